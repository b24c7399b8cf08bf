//! Reads what [`super::verify`] needs from the cluster and the signature
//! stores: the CVO's verification ConfigMaps, the ClusterVersion's
//! `signatureStores`, signature ConfigMaps, then each store in turn until
//! the signatures found verify. Runs in the controller, before a release
//! runs as a pod; never on the webhook's path.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use tracing::debug;

use super::{
    Config, MAX_SIGNATURE_BYTES, MAX_SIGNATURES, NAMESPACE, SIGNATURES_LABEL, Signature,
    SignatureError,
};

/// Time allowed for each request to a store.
const STORE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether release `image` (named by digest) is signed as the cluster's
/// CVO requires: Ok says by which keys and where the signatures were
/// found, Err why it is not (or could not be told).
pub async fn verify_release(client: &kube::Client, image: &str) -> Result<String, SignatureError> {
    let Some(digest) = image
        .rsplit_once('@')
        .map(|(_, d)| d)
        .filter(|d| d.strip_prefix("sha256:").is_some_and(is_hex_64))
    else {
        return Err(SignatureError::NotByDigest {
            image: image.to_owned(),
        });
    };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let config = Config::from_cluster(
        &config_config_maps(&config_maps).await?,
        &signature_stores(client).await?,
    );
    let signed = config_maps
        .list(&ListParams::default().labels(SIGNATURES_LABEL))
        .await
        .map_err(SignatureError::ListSignatures)?;
    let mut signatures = super::from_config_maps(&signed.items, digest);
    let mut outcome = super::verify(&config.keys, digest, &signatures);
    let mut unreachable = Vec::new();
    if outcome.is_err() && !config.keys.is_empty() {
        let http = reqwest::Client::builder()
            .timeout(STORE_TIMEOUT)
            .build()
            .map_err(|e| SignatureError::HttpClient(e.into()))?;
        for store in &config.stores {
            match from_store(&http, store, digest).await {
                Ok(found) => signatures.extend(found),
                Err(e) => unreachable.push(e),
            }
            outcome = super::verify(&config.keys, digest, &signatures);
            if outcome.is_ok() {
                break;
            }
        }
    }
    outcome.map_err(|why| {
        let mut problems = config.problems;
        problems.extend(unreachable);
        if problems.is_empty() {
            why
        } else {
            SignatureError::WithProblems {
                why: Box::new(why),
                problems,
            }
        }
    })
}

fn is_hex_64(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The ConfigMaps annotated as the CVO's verification configuration:
/// listed by metadata (the namespace holds many), then read by name.
async fn config_config_maps(api: &Api<ConfigMap>) -> Result<Vec<ConfigMap>, SignatureError> {
    let listed = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(SignatureError::ListConfigMaps)?;
    let mut found = Vec::new();
    for meta in listed.items.iter().filter(|m| {
        m.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(super::CONFIG_ANNOTATION))
    }) {
        let name = meta.metadata.name.as_deref().unwrap_or_default();
        if let Some(cm) =
            api.get_opt(name)
                .await
                .map_err(|error| SignatureError::ReadConfigMap {
                    name: name.to_owned(),
                    error,
                })?
        {
            found.push(cm);
        }
    }
    Ok(found)
}

/// The URLs of the ClusterVersion's `spec.signatureStores` (none when the
/// field is absent, as on clusters without the feature).
async fn signature_stores(client: &kube::Client) -> Result<Vec<String>, SignatureError> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "config.openshift.io",
        "v1",
        "ClusterVersion",
    ));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let cv = api
        .get_opt("version")
        .await
        .map_err(SignatureError::ReadClusterVersion)?;
    Ok(cv
        .and_then(|cv| cv.data["spec"]["signatureStores"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s["url"].as_str().map(str::to_owned))
        .collect())
}

/// The signatures `store` holds for `digest`: `signature-1`, `-2`, … until
/// the first that is not there.
async fn from_store(
    http: &reqwest::Client,
    store: &str,
    digest: &str,
) -> Result<Vec<Signature>, SignatureError> {
    let base = store.trim_end_matches('/');
    if !(base.starts_with("https://") || base.starts_with("http://")) {
        return Err(SignatureError::NotHttp {
            store: store.to_owned(),
        });
    }
    let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    let mut found = Vec::new();
    for n in 1..=MAX_SIGNATURES {
        let url = format!("{base}/{algorithm}={hex}/signature-{n}");
        let response =
            http.get(&url)
                .send()
                .await
                .map_err(|e| SignatureError::StoreUnreachable {
                    store: base.to_owned(),
                    error: e.into(),
                })?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            break;
        }
        if !response.status().is_success() {
            return Err(SignatureError::StoreAnswered {
                store: base.to_owned(),
                url,
                status: response.status().to_string(),
            });
        }
        let bytes = crate::cluster::prometheus::read_capped(response, MAX_SIGNATURE_BYTES)
            .await
            .map_err(|why| SignatureError::StoreRead {
                store: base.to_owned(),
                url: url.clone(),
                why: why.to_string(),
            })?;
        debug!(%url, bytes = bytes.len(), "a release signature");
        found.push(Signature { from: url, bytes });
    }
    Ok(found)
}
