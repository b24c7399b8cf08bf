//! The key the gate signs its results with (`model::vouch::ResultKey`),
//! kept in the Secret `preflight-gate-result-key` of the gate's namespace
//! so that every replica signs and verifies with the same one. The install
//! makes that Secret empty (deploy/base), so that the gate needs no right
//! to create Secrets and no key is ever in a manifest; the first replica
//! to read it empty fills it with 32 random bytes, by a patch that holds
//! only if nobody changed the Secret since it was read, and a replica that
//! lost that race reads the winner's key. A replica that cannot read it
//! (absent, forbidden, unusable) signs nothing and vouches for nothing,
//! saying why.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use tracing::{info, warn};

use crate::model::vouch::ResultKey;

/// The Secret's name, which the gate's Role names for `get` and `patch`.
pub const SECRET_NAME: &str = "preflight-gate-result-key";
/// The Secret's data key holding the key's bytes.
pub const SECRET_KEY: &str = "key";

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read Secret {namespace}/{SECRET_NAME}")]
    Read {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Secret {namespace}/{SECRET_NAME} does not exist: the install makes it, empty, and the gate fills it (apply the manifests again)"
    )]
    Absent { namespace: String },
    #[error("cannot fill Secret {namespace}/{SECRET_NAME} with a new key")]
    Fill {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {namespace}/{SECRET_NAME} holds no usable {SECRET_KEY:?}: {why}")]
    Unusable { namespace: String, why: String },
    #[error("cannot draw random bytes for a new key")]
    Random,
}

/// Reads the key from the Secret in `namespace`, filling the Secret with a
/// new random key when it holds none yet. The Secret itself is the
/// install's: an absent one is an error, never made here.
pub async fn load_or_fill(client: &kube::Client, namespace: &str) -> Result<ResultKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = |source| KeyError::Read {
        namespace: namespace.to_owned(),
        source,
    };
    let absent = || KeyError::Absent {
        namespace: namespace.to_owned(),
    };
    let secret = api
        .get_opt(SECRET_NAME)
        .await
        .map_err(read)?
        .ok_or_else(absent)?;
    if let Some(key) = from_secret(&secret, namespace)? {
        return Ok(key);
    }
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| KeyError::Random)?;
    // The resourceVersion read makes the patch conditional: if another
    // replica filled the Secret meanwhile, this one is refused (409) and
    // the other's key is the one.
    let fill = Patch::Merge(serde_json::json!({
        "metadata": {"resourceVersion": secret.metadata.resource_version},
        "data": {SECRET_KEY: ByteString(bytes.to_vec())},
    }));
    match api.patch(SECRET_NAME, &PatchParams::default(), &fill).await {
        Ok(_) => {
            info!(
                namespace,
                secret = SECRET_NAME,
                "made the key results are signed with"
            );
            ResultKey::new(&bytes).map_err(|why| KeyError::Unusable {
                namespace: namespace.to_owned(),
                why: why.to_string(),
            })
        }
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let secret = api
                .get_opt(SECRET_NAME)
                .await
                .map_err(read)?
                .ok_or_else(absent)?;
            from_secret(&secret, namespace)?.ok_or_else(|| KeyError::Unusable {
                namespace: namespace.to_owned(),
                why: format!("it changed while being filled and still holds no {SECRET_KEY:?}"),
            })
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Err(absent()),
        Err(source) => Err(KeyError::Fill {
            namespace: namespace.to_owned(),
            source,
        }),
    }
}

/// The key the Secret holds; None while it holds none (as the install
/// makes it). A key that is there but unusable is an error, never
/// replaced: results signed with it would stop counting.
fn from_secret(secret: &Secret, namespace: &str) -> Result<Option<ResultKey>, KeyError> {
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(SECRET_KEY)) else {
        return Ok(None);
    };
    ResultKey::new(&bytes.0)
        .map(Some)
        .map_err(|why| KeyError::Unusable {
            namespace: namespace.to_owned(),
            why: why.to_string(),
        })
}

/// Reads the key, trying again with backoff (up to a minute apart, with
/// jitter) until it is read; each failure is logged and told to `failed`.
pub async fn load_until_read(
    client: &kube::Client,
    namespace: &str,
    failed: impl Fn(String),
) -> ResultKey {
    let backoff = ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(60))
        .without_max_times()
        .with_jitter();
    let read = || load_or_fill(client, namespace);
    // Retried without a limit, so only the key ends it.
    loop {
        let tried = read.retry(backoff).notify(|e, retry_in| {
            let why = crate::model::text::chain(e);
            warn!(error = %why, ?retry_in, "cannot read the key results are signed with; no result is vouched for until it is read");
            failed(why);
        });
        if let Ok(key) = tried.await {
            return key;
        }
    }
}

/// The key as the webhook holds it: read in the background, retried until
/// read; until then, why it is not.
pub struct SharedKey {
    key: RwLock<Result<ResultKey, String>>,
}

impl SharedKey {
    /// Starts reading the key from `namespace`.
    pub fn spawn(client: kube::Client, namespace: String) -> Arc<Self> {
        let shared = Arc::new(Self {
            key: RwLock::new(Err(format!(
                "Secret {namespace}/{SECRET_NAME} has not been read yet"
            ))),
        });
        let filled = shared.clone();
        tokio::spawn(async move {
            let set = |key| *filled.key.write().unwrap_or_else(|e| e.into_inner()) = key;
            let key = load_until_read(&client, &namespace, |why| set(Err(why))).await;
            set(Ok(key));
        });
        shared
    }

    /// A key known already.
    pub fn fixed(key: Result<ResultKey, String>) -> Arc<Self> {
        Arc::new(Self {
            key: RwLock::new(key),
        })
    }

    /// The key, or why the gate has none. Answered from memory.
    pub fn get(&self) -> Result<ResultKey, String> {
        self.key.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
