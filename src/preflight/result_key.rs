//! The key the gate signs its results with (`model::vouch::ResultKey`),
//! kept in the Secret `preflight-gate-result-key` of the gate's namespace
//! so that every replica signs and verifies with the same one. Read at
//! start; created, 32 random bytes, when absent, and read again when
//! another replica created it first. A replica that cannot read it signs
//! nothing and vouches for nothing, saying why.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use tracing::{info, warn};

use crate::model::vouch::ResultKey;

/// The Secret's name, which the gate's Role names for `get`.
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
    #[error("cannot create Secret {namespace}/{SECRET_NAME}")]
    Create {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {namespace}/{SECRET_NAME} holds no usable {SECRET_KEY:?}: {why}")]
    Unusable { namespace: String, why: String },
    #[error("cannot draw random bytes for a new key")]
    Random,
}

/// Reads the key from the Secret in `namespace`, creating the Secret with
/// a new random key when there is none.
pub async fn load_or_create(client: &kube::Client, namespace: &str) -> Result<ResultKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = |source| KeyError::Read {
        namespace: namespace.to_owned(),
        source,
    };
    if let Some(secret) = api.get_opt(SECRET_NAME).await.map_err(read)? {
        return from_secret(&secret, namespace);
    }
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| KeyError::Random)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SECRET_NAME.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(
                [(
                    "app.kubernetes.io/name".to_owned(),
                    "preflight-gate".to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        immutable: Some(true),
        data: Some([(SECRET_KEY.to_owned(), ByteString(bytes.to_vec()))].into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            info!(
                namespace,
                secret = SECRET_NAME,
                "made the key results are signed with"
            );
            ResultKey::new(&bytes).map_err(|why| KeyError::Unusable {
                namespace: namespace.to_owned(),
                why,
            })
        }
        // Another replica made it meanwhile: its key is the one.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let secret = api.get(SECRET_NAME).await.map_err(read)?;
            from_secret(&secret, namespace)
        }
        Err(source) => Err(KeyError::Create {
            namespace: namespace.to_owned(),
            source,
        }),
    }
}

fn from_secret(secret: &Secret, namespace: &str) -> Result<ResultKey, KeyError> {
    let unusable = |why: String| KeyError::Unusable {
        namespace: namespace.to_owned(),
        why,
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(SECRET_KEY))
        .ok_or_else(|| unusable("no such key".to_owned()))?;
    ResultKey::new(&bytes.0).map_err(unusable)
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
    let read = || load_or_create(client, namespace);
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
