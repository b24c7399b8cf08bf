//! Alerts from Prometheus or Thanos (`/api/v1/alerts`), with a bearer token
//! read from a file (a service account token, reread on every call) and a
//! CA bundle for the querier's serving certificate. A querier that cannot
//! be reached for a moment is asked again with backoff.

use std::path::{Path, PathBuf};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use tracing::warn;

use crate::view::alerts::{Alert, AlertsResponse};

#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no usable PEM certificate: {message}")]
    Ca { path: PathBuf, message: String },
    #[error("cannot ask {url} for alerts")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} answered more than {max} bytes of alerts: not read")]
    TooLarge { url: String, max: usize },
    #[error("{url} did not answer in the /api/v1/alerts format: {message}")]
    Body { url: String, message: String },
}

/// Where to read alerts from.
#[derive(Clone, Debug)]
pub struct Prometheus {
    /// Base URL, e.g. `https://thanos-querier.openshift-monitoring.svc:9091`.
    pub url: String,
    pub token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
}

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(20);

/// The most of an alerts answer that is read: a large cluster's thousands
/// of alerts are a few MB; a querier that sends more is not answering
/// about alerts, and is not let fill the gate's memory.
pub const MAX_BODY: usize = 32 << 20;

/// How a read that failed for a moment is asked again: after about 1, 2
/// and 4 s (with jitter), so a querier restarting during a drain or a
/// rollout costs a run seconds, not an error until the next refresh.
fn backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(4))
        .with_max_times(3)
        .with_jitter()
}

impl PrometheusError {
    /// A failure that asking again may mend: no connection, a timeout, an
    /// overloaded or restarting querier (HTTP 429 or 5xx). A bad CA file, a
    /// refused token or an answer in another format is not.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Request { source, .. } => !source.is_builder(),
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Read { .. } | Self::Ca { .. } | Self::Body { .. } | Self::TooLarge { .. } => {
                false
            }
        }
    }
}

impl Prometheus {
    /// The alerts endpoint for the base URL.
    pub fn endpoint(&self) -> String {
        format!("{}/api/v1/alerts", self.url.trim_end_matches('/'))
    }

    /// Fetches every alert (firing and pending), asking again with
    /// [`backoff`] while the failure [`is_transient`](PrometheusError::is_transient).
    pub async fn alerts(&self) -> Result<Vec<Alert>, PrometheusError> {
        (|| self.alerts_once())
            .retry(backoff())
            .when(PrometheusError::is_transient)
            .notify(|error, after| warn!(%error, ?after, "cannot read the alerts; asking again"))
            .await
    }

    async fn alerts_once(&self) -> Result<Vec<Alert>, PrometheusError> {
        let url = self.endpoint();
        // reqwest's rustls needs a process-wide provider; main installs the
        // same one, so this only matters when the library is used alone.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().timeout(TIMEOUT);
        if let Some(path) = &self.ca_file {
            for cert in read_ca(path)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder.build().map_err(|source| PrometheusError::Request {
            url: url.clone(),
            source,
        })?;
        let mut request = client.get(&url);
        if let Some(path) = &self.token_file {
            let token = read(path)?;
            request = request.bearer_auth(String::from_utf8_lossy(&token).trim());
        }
        let response = request
            .send()
            .await
            .map_err(|source| PrometheusError::Request {
                url: url.clone(),
                source,
            })?;
        if !response.status().is_success() {
            return Err(PrometheusError::Status {
                url,
                status: response.status().as_u16(),
            });
        }
        let body = read_capped(response, MAX_BODY).await.map_err(|e| match e {
            Capped::Over => PrometheusError::TooLarge {
                url: url.clone(),
                max: MAX_BODY,
            },
            Capped::Read(source) => PrometheusError::Request {
                url: url.clone(),
                source,
            },
        })?;
        let parsed: AlertsResponse =
            serde_json::from_slice(&body).map_err(|e| PrometheusError::Body {
                url: url.clone(),
                message: e.to_string(),
            })?;
        if parsed.status != "success" {
            return Err(PrometheusError::Body {
                url,
                message: format!("status {:?}", parsed.status),
            });
        }
        Ok(parsed.data.alerts)
    }
}

/// Why a capped read stopped.
pub(crate) enum Capped {
    Over,
    Read(reqwest::Error),
}

impl std::fmt::Display for Capped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Capped::Over => f.write_str("the answer is larger than allowed"),
            Capped::Read(e) => write!(f, "{e}"),
        }
    }
}

/// The body of `response`, read chunk by chunk, up to `max` bytes: a
/// declared length over it is refused before a byte is read, and a stream
/// that goes past it is cut off.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, Capped> {
    if response
        .content_length()
        .is_some_and(|length| length > max as u64)
    {
        return Err(Capped::Over);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Read)? {
        if body.len() + chunk.len() > max {
            return Err(Capped::Over);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn read(path: &Path) -> Result<Vec<u8>, PrometheusError> {
    std::fs::read(path).map_err(|source| PrometheusError::Read {
        path: path.to_owned(),
        source,
    })
}

fn read_ca(path: &Path) -> Result<Vec<reqwest::Certificate>, PrometheusError> {
    let pem = read(path)?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| PrometheusError::Ca {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(PrometheusError::Ca {
            path: path.to_owned(),
            message: "no certificates".to_owned(),
        });
    }
    Ok(certs)
}
