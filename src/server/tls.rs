//! TLS for the webhook: a certificate resolver that reloads the serving pair
//! from disk without a restart, and keeps the last good pair when a new one
//! is broken.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use notify::{RecursiveMode, Watcher};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tracing::{info, warn};

use crate::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no usable PEM private key: {message}")]
    Key { path: PathBuf, message: String },
    #[error("the certificate and key do not form a usable pair: {0}")]
    Pair(rustls::Error),
    #[error("the client CA bundle is unusable: {0}")]
    ClientCa(String),
}

/// The serving certificate and key files.
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A loaded pair, with the bytes it came from to tell when the files change.
struct Loaded {
    key: Arc<CertifiedKey>,
    bytes: (Vec<u8>, Vec<u8>),
    not_after: i64,
}

/// Serves the current certificate to every handshake; `reload` swaps it.
pub struct ReloadingCert {
    files: CertFiles,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    bytes: Mutex<(Vec<u8>, Vec<u8>)>,
    metrics: Metrics,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("files", &self.files)
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn load(files: &CertFiles, provider: &CryptoProvider) -> Result<Loaded, TlsError> {
    let cert_pem = read(&files.cert)?;
    let key_pem = read(&files.key)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .filter_map(Result::ok)
        .collect();
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoCertificate {
            path: files.cert.clone(),
        });
    };
    let not_after = x509_parser::parse_x509_certificate(leaf)
        .map(|(_, c)| c.validity().not_after.timestamp())
        .map_err(|e| TlsError::Key {
            path: files.cert.clone(),
            message: format!("the certificate does not parse: {e}"),
        })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(TlsError::Pair)?;
    Ok(Loaded {
        key: Arc::new(certified),
        bytes: (cert_pem, key_pem),
        not_after,
    })
}

impl ReloadingCert {
    /// Loads the pair once; fails when it is unusable.
    pub fn load(
        files: CertFiles,
        provider: Arc<CryptoProvider>,
        metrics: Metrics,
    ) -> Result<Self, TlsError> {
        let loaded = load(&files, &provider)?;
        metrics.tls_cert_expiry.set(loaded.not_after as f64);
        Ok(Self {
            files,
            provider,
            current: ArcSwap::new(loaded.key),
            bytes: Mutex::new(loaded.bytes),
            metrics,
        })
    }

    /// Reloads the pair if the files changed. A broken new pair is refused
    /// and the last good one kept. Returns whether the pair was swapped.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let (cert, key) = (read(&self.files.cert)?, read(&self.files.key)?);
        {
            let bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
            if bytes.0 == cert && bytes.1 == key {
                return Ok(false);
            }
        }
        match load(&self.files, &self.provider) {
            Ok(loaded) => {
                self.current.store(loaded.key);
                *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) = loaded.bytes;
                self.metrics.tls_cert_expiry.set(loaded.not_after as f64);
                self.metrics
                    .tls_reloads
                    .with_label_values(&["success"])
                    .inc();
                Ok(true)
            }
            Err(e) => {
                self.metrics
                    .tls_reloads
                    .with_label_values(&["failure"])
                    .inc();
                Err(e)
            }
        }
    }

    /// Reloads whenever the certificate's directory changes, and every
    /// `interval` in case a change went unseen (e.g. on some volume types).
    /// Watching the directory, not the files, catches the `..data` symlink
    /// swap of a Kubernetes Secret volume.
    pub async fn watch(self: Arc<Self>, interval: Duration) {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        let mut watcher = notify::recommended_watcher(move |_event| {
            let _ = tx.try_send(());
        });
        let dirs: std::collections::BTreeSet<PathBuf> = [&self.files.cert, &self.files.key]
            .iter()
            .filter_map(|p| p.parent().map(Path::to_owned))
            .map(|p| {
                if p.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    p
                }
            })
            .collect();
        match watcher.as_mut() {
            Ok(w) => {
                for dir in &dirs {
                    if let Err(e) = w.watch(dir, RecursiveMode::NonRecursive) {
                        warn!(dir = %dir.display(), error = %e, "cannot watch the certificate directory; polling only");
                    }
                }
            }
            Err(e) => warn!(error = %e, "cannot watch files; polling only"),
        }
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                Some(()) = rx.recv() => {
                    // Let a writer finish both files before reading them.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            match self.reload() {
                Ok(true) => {
                    info!(cert = %self.files.cert.display(), "serving certificate reloaded")
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(error = %e, "new serving certificate refused; keeping the last good one")
                }
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// A rustls server configuration: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1,
/// and client certificates verified against `client_ca` when given.
pub fn server_config(
    cert: Arc<ReloadingCert>,
    provider: Arc<CryptoProvider>,
    client_ca: Option<&Path>,
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Pair)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = read(path)?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::ClientCa(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
