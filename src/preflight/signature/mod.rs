//! Release signatures, verified as the cluster-version operator verifies a
//! target before it applies it: an OpenPGP-signed "atomic container
//! signature" claim naming the release's digest, signed by **every** key the
//! cluster trusts for releases.
//!
//! Where the CVO finds them, and so where the gate does:
//! - the keys and the default stores: ConfigMaps of
//!   `openshift-config-managed` annotated
//!   `release.openshift.io/verification-config-map`, whose
//!   `verifier-public-key-*` entries are armored keys and whose `store-*`
//!   entries are store URLs;
//! - the ClusterVersion's `spec.signatureStores`, which replace those
//!   stores when set;
//! - signatures: ConfigMaps of `openshift-config-managed` labelled
//!   `release.openshift.io/verification-signatures` (`binaryData` keys
//!   `sha256-<hex>-<n>`, what `oc adm release mirror` writes), and each
//!   store's `<store>/sha256=<hex>/signature-<n>`, `n` from 1.
//!
//! This module is pure: what was read goes in, a verdict comes out. The
//! reading is [`fetch`].

pub mod fetch;
#[cfg(test)]
mod tests;

use std::io::{BufReader, Read};

use k8s_openapi::api::core::v1::ConfigMap;
use pgp::composed::{Deserializable, Message, SignedPublicKey};
use pgp::types::VerifyingKey;
use serde_json::Value;

/// The namespace of the CVO's verification ConfigMaps.
pub const NAMESPACE: &str = "openshift-config-managed";
/// Marks the ConfigMap holding the keys and default stores.
pub const CONFIG_ANNOTATION: &str = "release.openshift.io/verification-config-map";
/// Marks the ConfigMaps holding signatures.
pub const SIGNATURES_LABEL: &str = "release.openshift.io/verification-signatures";
/// A signature larger than this is no release signature (OpenShift's are
/// under 1 KiB): it is refused unread.
pub const MAX_SIGNATURE_BYTES: usize = 64 * 1024;
/// The most signatures read per release and place, as the CVO's stores
/// stop at a bound.
pub const MAX_SIGNATURES: usize = 16;
/// A claim larger than this, once decompressed, is refused.
const MAX_CLAIM_BYTES: u64 = 64 * 1024;
const CLAIM_TYPE: &str = "atomic container signature";

/// Why a release's signature does not verify, or could not be told: each
/// variant says, in words, what went wrong. The verdict on a release is
/// [`SignatureError::Unverified`] (with the reason each signature was
/// refused for), or what kept it from being reached.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// A `verifier-public-key-*` entry is no armored OpenPGP key.
    #[error("{name} is not an armored OpenPGP public key: {error}")]
    NotAKey {
        name: String,
        error: pgp::errors::Error,
    },
    /// A key's subkeys are not bound to it.
    #[error("{name}: its subkeys' bindings do not verify: {error}")]
    Bindings {
        name: String,
        error: pgp::errors::Error,
    },
    /// The cluster trusts no key for releases.
    #[error(
        "the cluster trusts no release key (no verifier-public-key-* entry in a ConfigMap of {NAMESPACE} annotated {CONFIG_ANNOTATION})"
    )]
    NoKeys,
    /// No signature of the release was found anywhere.
    #[error("no signature of {digest} was found")]
    NoSignatures { digest: String },
    /// Some trusted keys signed none of the signatures found; `refused`
    /// says, by where it was found, why each signature no key took was
    /// refused.
    #[error(
        "no signature of {digest} verifies against {}{}",
        missing.join(", "),
        refused_words(refused)
    )]
    Unverified {
        digest: String,
        missing: Vec<String>,
        refused: Vec<(String, SignatureError)>,
    },
    /// A signature larger than [`MAX_SIGNATURE_BYTES`].
    #[error("{0} bytes, more than a release signature")]
    TooLarge(usize),
    /// A signature that is no OpenPGP message.
    #[error("not an OpenPGP message: {0}")]
    NotAMessage(pgp::errors::Error),
    /// A signature that cannot be decompressed.
    #[error("cannot decompress: {0}")]
    Decompress(pgp::errors::Error),
    /// A message that is not signed.
    #[error("not a signed message")]
    NotSigned,
    /// A signed claim that cannot be read.
    #[error("cannot read the signed claim: {0}")]
    UnreadableClaim(std::io::Error),
    /// A signed claim larger than a release's.
    #[error("the signed claim is larger than a release's")]
    ClaimTooLarge,
    /// A signature by another key.
    #[error("not signed by this key")]
    OtherKey,
    /// A signed claim that is no JSON.
    #[error("the signed claim is not JSON: {0}")]
    ClaimNotJson(serde_json::Error),
    /// A signed claim of another type than [`CLAIM_TYPE`].
    #[error("the signed claim's type is {found}, not {CLAIM_TYPE:?}")]
    OtherType { found: Value },
    /// A signed claim of another release.
    #[error("it signs {signed}, not {digest}")]
    OtherDigest { signed: String, digest: String },
    /// A signed claim naming no digest.
    #[error("the signed claim names no digest")]
    NoDigest,
    /// The release is not named by a digest, so nothing can sign it.
    #[error("{image} is not named by a sha256 digest")]
    NotByDigest { image: String },
    /// The ConfigMaps of [`NAMESPACE`] cannot be listed.
    #[error("cannot list the ConfigMaps of {NAMESPACE}: {0}")]
    ListConfigMaps(kube::Error),
    /// A verification ConfigMap cannot be read.
    #[error("cannot read ConfigMap {NAMESPACE}/{name}: {error}")]
    ReadConfigMap { name: String, error: kube::Error },
    /// The signature ConfigMaps cannot be listed.
    #[error("cannot list the signature ConfigMaps of {NAMESPACE}: {0}")]
    ListSignatures(kube::Error),
    /// The ClusterVersion cannot be read.
    #[error("cannot read the ClusterVersion: {0}")]
    ReadClusterVersion(kube::Error),
    /// No HTTP client to ask the stores with.
    #[error("cannot make an HTTP client: {0}")]
    HttpClient(BoxedError),
    /// A store that is no http(s) URL.
    #[error("store {store} is not an http(s) URL")]
    NotHttp { store: String },
    /// A store that cannot be asked.
    #[error("store {store}: {error}")]
    StoreUnreachable { store: String, error: BoxedError },
    /// A store's answer other than a signature or its absence.
    #[error("store {store}: {url} answered {status}")]
    StoreAnswered {
        store: String,
        url: String,
        /// The HTTP status, as it reads (`404 Not Found`).
        status: String,
    },
    /// A store's signature that cannot be read; `why` says why.
    #[error("store {store}: {url}: {why}")]
    StoreRead {
        store: String,
        url: String,
        why: String,
    },
    /// A refusal, with what could not be read on the way beside it (keys
    /// that are none, stores that could not be asked).
    #[error("{why}{}", problems_words(problems))]
    WithProblems {
        why: Box<SignatureError>,
        problems: Vec<SignatureError>,
    },
}

/// An error of the HTTP client, kept as it is: this file judges
/// signatures and leaves the asking to `fetch`.
pub type BoxedError = Box<dyn std::error::Error + Send + Sync>;

/// The reasons signatures were refused, as [`SignatureError::Unverified`]
/// ends: ` (<where>: <why>; …)`, or nothing.
fn refused_words(refused: &[(String, SignatureError)]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    let each: Vec<String> = refused
        .iter()
        .map(|(from, why)| format!("{from}: {why}"))
        .collect();
    format!(" ({})", each.join("; "))
}

/// What could not be read, as [`SignatureError::WithProblems`] ends:
/// `; <problem>` each.
fn problems_words(problems: &[SignatureError]) -> String {
    problems.iter().map(|p| format!("; {p}")).collect()
}

/// The keys a release must be signed by, each by its ConfigMap entry's name.
#[derive(Clone, Debug, Default)]
pub struct Keyring {
    keys: Vec<(String, SignedPublicKey)>,
}

impl Keyring {
    /// The names of the keys, for messages.
    pub fn names(&self) -> Vec<&str> {
        self.keys.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds the armored key `text` as `name`.
    pub fn add(&mut self, name: &str, text: &str) -> Result<(), SignatureError> {
        let (key, _) = SignedPublicKey::from_armor_single(text.as_bytes()).map_err(|error| {
            SignatureError::NotAKey {
                name: name.to_owned(),
                error,
            }
        })?;
        key.verify_bindings()
            .map_err(|error| SignatureError::Bindings {
                name: name.to_owned(),
                error,
            })?;
        self.keys.push((name.to_owned(), key));
        Ok(())
    }
}

/// How the cluster verifies releases: its keys and where signatures are.
#[derive(Debug, Default)]
pub struct Config {
    pub keys: Keyring,
    /// Store URLs, in order.
    pub stores: Vec<String>,
    /// Entries that could not be read, said beside any refusal.
    pub problems: Vec<SignatureError>,
}

impl Config {
    /// The configuration the CVO's annotated ConfigMaps give, with the
    /// ClusterVersion's `signatureStores` (their URLs) replacing the
    /// default stores when there are any.
    pub fn from_cluster(config_maps: &[ConfigMap], signature_stores: &[String]) -> Config {
        let mut config = Config::default();
        for cm in config_maps.iter().filter(|cm| {
            cm.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(CONFIG_ANNOTATION))
        }) {
            let cm_name = cm.metadata.name.as_deref().unwrap_or("");
            for (key, value) in cm.data.iter().flatten() {
                if key.starts_with("verifier-public-key-") {
                    if let Err(e) = config.keys.add(&format!("{cm_name}/{key}"), value) {
                        config.problems.push(e);
                    }
                } else if key.starts_with("store-") {
                    config.stores.push(value.trim().to_owned());
                }
            }
        }
        if !signature_stores.is_empty() {
            config.stores = signature_stores.to_vec();
        }
        config
    }
}

/// A signature and where it was found (a ConfigMap entry, a store URL).
#[derive(Clone, Debug)]
pub struct Signature {
    pub from: String,
    pub bytes: Vec<u8>,
}

/// The signatures of `digest` (`sha256:<hex>`) that ConfigMaps labelled
/// [`SIGNATURES_LABEL`] hold, in their entries' order.
pub fn from_config_maps(config_maps: &[ConfigMap], digest: &str) -> Vec<Signature> {
    let Some(prefix) = digest.split_once(':').map(|(a, h)| format!("{a}-{h}-")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for cm in config_maps.iter().filter(|cm| {
        cm.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(SIGNATURES_LABEL))
    }) {
        let cm_name = cm.metadata.name.as_deref().unwrap_or("");
        let mut entries: Vec<(u32, &str, &[u8])> = cm
            .binary_data
            .iter()
            .flatten()
            .filter_map(|(key, value)| {
                let n = key.strip_prefix(&prefix)?.parse().ok()?;
                Some((n, key.as_str(), value.0.as_slice()))
            })
            .collect();
        entries.sort_by_key(|(n, _, _)| *n);
        found.extend(
            entries
                .into_iter()
                .take(MAX_SIGNATURES)
                .map(|(_, key, bytes)| Signature {
                    from: format!("ConfigMap {NAMESPACE}/{cm_name} {key}"),
                    bytes: bytes.to_vec(),
                }),
        );
    }
    found
}

/// Whether `signatures` verify release `digest` (`sha256:<hex>`) as the
/// CVO asks: each key of `keys` signed a claim of type "atomic container
/// signature" naming exactly this digest. Ok says by which keys and where;
/// Err says why not, for each signature.
pub fn verify(
    keys: &Keyring,
    digest: &str,
    signatures: &[Signature],
) -> Result<String, SignatureError> {
    if keys.is_empty() {
        return Err(SignatureError::NoKeys);
    }
    if signatures.is_empty() {
        return Err(SignatureError::NoSignatures {
            digest: digest.to_owned(),
        });
    }
    let mut unsigned: Vec<&(String, SignedPublicKey)> = keys.keys.iter().collect();
    let mut used = Vec::new();
    let mut refused = Vec::new();
    for signature in signatures {
        let before = unsigned.len();
        let mut last_error = None;
        unsigned.retain(|(_, key)| match verify_one(key, digest, &signature.bytes) {
            Ok(()) => false,
            Err(e) => {
                last_error = Some(e);
                true
            }
        });
        if unsigned.len() < before {
            used.push(signature.from.as_str());
        } else if let Some(e) = last_error {
            refused.push((signature.from.clone(), e));
        }
        if unsigned.is_empty() {
            return Ok(format!(
                "its signature verifies against {} ({})",
                keys.names().join(", "),
                used.join(", ")
            ));
        }
    }
    Err(SignatureError::Unverified {
        digest: digest.to_owned(),
        missing: unsigned.iter().map(|(n, _)| n.clone()).collect(),
        refused,
    })
}

/// One signature against one key: the OpenPGP signature verifies, and its
/// claim is an atomic container signature of `digest`.
fn verify_one(key: &SignedPublicKey, digest: &str, bytes: &[u8]) -> Result<(), SignatureError> {
    if bytes.len() > MAX_SIGNATURE_BYTES {
        return Err(SignatureError::TooLarge(bytes.len()));
    }
    let message = if bytes.starts_with(b"-----BEGIN PGP") {
        Message::from_armor(BufReader::new(bytes)).map(|(m, _)| m)
    } else {
        Message::from_bytes(bytes)
    }
    .map_err(SignatureError::NotAMessage)?;
    let mut message = message.decompress().map_err(SignatureError::Decompress)?;
    if !message.is_signed() {
        return Err(SignatureError::NotSigned);
    }
    let mut claim = Vec::new();
    (&mut message)
        .take(MAX_CLAIM_BYTES + 1)
        .read_to_end(&mut claim)
        .map_err(SignatureError::UnreadableClaim)?;
    if claim.len() as u64 > MAX_CLAIM_BYTES {
        return Err(SignatureError::ClaimTooLarge);
    }
    let by: Vec<&dyn VerifyingKey> = std::iter::once(key as &dyn VerifyingKey)
        .chain(key.public_subkeys.iter().map(|s| s as &dyn VerifyingKey))
        .collect();
    if !by.iter().any(|k| message.verify(*k).is_ok()) {
        return Err(SignatureError::OtherKey);
    }
    let claim: Value = serde_json::from_slice(&claim).map_err(SignatureError::ClaimNotJson)?;
    let critical = &claim["critical"];
    if critical["type"] != CLAIM_TYPE {
        return Err(SignatureError::OtherType {
            found: critical["type"].clone(),
        });
    }
    match critical["image"]["docker-manifest-digest"].as_str() {
        Some(signed) if signed == digest => Ok(()),
        Some(signed) => Err(SignatureError::OtherDigest {
            signed: signed.to_owned(),
            digest: digest.to_owned(),
        }),
        None => Err(SignatureError::NoDigest),
    }
}
