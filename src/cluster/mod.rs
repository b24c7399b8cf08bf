//! The cluster, as I/O: the client; the live reader and the snapshot and
//! must-gather reader that fill a [`crate::view::ClusterView`]; a management
//! cluster's snapshot of its hosted clusters (`management`); the alert
//! querier; override authorization by SubjectAccessReview; Events on the
//! ClusterVersion; whether the replica's own node is cordoned; who may read
//! `/metrics` (TokenReview and SubjectAccessReview); the API server's own
//! addresses, for the connection slots reserved for it; and the witness that records an allowed change once the
//! API server stored it. What they read is `crate::view`, pure. Nothing here runs
//! on the decision's path except the authorization question.

#[cfg(test)]
pub(crate) mod api_mock;
pub mod api_server;
mod authz;
pub mod cordon;
mod events;
pub mod guest;
pub mod live;
pub mod management;
pub mod prometheus;
pub mod scrape;
pub mod snapshot;
pub mod witness;

use std::path::Path;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

pub use authz::{NoCluster, SubjectAccessReviewer};
pub use events::EventRecorder;

/// A client from `--kubeconfig`, or else `KUBECONFIG`, `~/.kube/config`, or
/// the in-cluster service account.
pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// The `ClusterVersion` API, read as JSON.
pub fn cluster_versions(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    );
    Api::all_with(client.clone(), &resource)
}

/// Whether the cluster's ClusterVersion has `spec.desiredUpdate.acceptRisks`
/// (a TechPreview field of OpenShift's), from its CRD's schema; false when
/// the CRD cannot be read within 5 s, said in the log, so that a slow API
/// server never holds the gate's start.
pub async fn has_accept_risks(client: &kube::Client) -> bool {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        api.get("clusterversions.config.openshift.io"),
    )
    .await
    .unwrap_or_else(|_| {
        Err(kube::Error::Service(
            "the API server did not answer within 5 s".into(),
        ))
    });
    match read {
        Ok(crd) => crd.spec.versions.iter().any(|v| {
            v.schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| s.properties.as_ref()?.get("spec"))
                .and_then(|s| s.properties.as_ref()?.get("desiredUpdate"))
                .and_then(|s| s.properties.as_ref())
                .is_some_and(|p| p.contains_key("acceptRisks"))
        }),
        Err(e) => {
            tracing::info!(error = %e, "cannot read the ClusterVersion CRD: denials offer no oc adm upgrade accept");
            false
        }
    }
}
