//! The cluster, as I/O: the client; the live reader and the snapshot and
//! must-gather reader that fill a [`crate::view::ClusterView`]; the alert
//! querier; override authorization by SubjectAccessReview; Events on the
//! ClusterVersion; whether the replica's own node is cordoned; and the witness that records an allowed change once the
//! API server stored it. What they read is `crate::view`, pure. Nothing here runs
//! on the decision's path except the authorization question.

mod authz;
pub mod cordon;
mod events;
pub mod live;
pub mod prometheus;
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
