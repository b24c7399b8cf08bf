//! The sample snapshot in `examples/snapshot/`, compiled into the binary:
//! what `preflight-gate check` runs on when given no snapshot and no
//! kubeconfig. A small cluster at 4.14.1 (derived from a real capture)
//! with an update graph, a workload, an operator that stops at 4.14 and a
//! warning alert firing.

use crate::cluster::ClusterView;
use crate::cluster::snapshot::{SnapshotError, load_files};

/// The files, by name.
pub const FILES: &[(&str, &str)] = &[
    (
        "alerts.json",
        include_str!("../../examples/snapshot/alerts.json"),
    ),
    (
        "apirequestcounts.yaml",
        include_str!("../../examples/snapshot/apirequestcounts.yaml"),
    ),
    (
        "clusteroperators.yaml",
        include_str!("../../examples/snapshot/clusteroperators.yaml"),
    ),
    (
        "clusterserviceversions.yaml",
        include_str!("../../examples/snapshot/clusterserviceversions.yaml"),
    ),
    (
        "clusterversion.yaml",
        include_str!("../../examples/snapshot/clusterversion.yaml"),
    ),
    (
        "configmaps.yaml",
        include_str!("../../examples/snapshot/configmaps.yaml"),
    ),
    (
        "ingresscontrollers.yaml",
        include_str!("../../examples/snapshot/ingresscontrollers.yaml"),
    ),
    (
        "machineconfigpools.yaml",
        include_str!("../../examples/snapshot/machineconfigpools.yaml"),
    ),
    (
        "nodes.yaml",
        include_str!("../../examples/snapshot/nodes.yaml"),
    ),
    (
        "poddisruptionbudgets.yaml",
        include_str!("../../examples/snapshot/poddisruptionbudgets.yaml"),
    ),
    (
        "pods.yaml",
        include_str!("../../examples/snapshot/pods.yaml"),
    ),
    (
        "secrets.yaml",
        include_str!("../../examples/snapshot/secrets.yaml"),
    ),
];

/// Loads the sample.
pub fn load() -> Result<ClusterView, SnapshotError> {
    load_files(FILES)
}
