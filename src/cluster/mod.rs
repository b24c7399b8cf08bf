//! The cluster: the read-only `ClusterView` checks run over, loaded live or
//! from a snapshot, with its lean object types (`openshift`, `k8s`,
//! `alerts`); the client; override authorization by
//! SubjectAccessReview; Events on the ClusterVersion. Nothing here runs on
//! the decision's path except the authorization question.

pub mod alerts;
mod authz;
mod events;
pub mod k8s;
pub mod kinds;
pub mod live;
pub mod openshift;
pub mod prometheus;
pub mod quantity;
pub mod selector;
pub mod snapshot;
mod view;

use std::path::Path;

pub use authz::{NoCluster, SubjectAccessReviewer};
pub use events::EventRecorder;
pub use view::{AsOf, CONFIG_MAPS, ClusterView, kept, kinds};

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
