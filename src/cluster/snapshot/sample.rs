//! The sample snapshot in `examples/snapshot/`, compiled into the binary:
//! what `preflight-gate check` runs on when given no snapshot and no
//! kubeconfig. A small cluster at 4.14.1 (derived from a real capture)
//! with an update graph, a workload, an operator that stops at 4.14 and a
//! warning alert firing.

use super::{SnapshotError, load_files};
use crate::view::ClusterView;

/// The files, by name.
pub(crate) const FILES: &[(&str, &str)] = &[
    (
        "alerts.json",
        include_str!("../../../examples/snapshot/alerts.json"),
    ),
    (
        "apirequestcounts.yaml",
        include_str!("../../../examples/snapshot/apirequestcounts.yaml"),
    ),
    (
        "clusteroperators.yaml",
        include_str!("../../../examples/snapshot/clusteroperators.yaml"),
    ),
    (
        "clusterserviceversions.yaml",
        include_str!("../../../examples/snapshot/clusterserviceversions.yaml"),
    ),
    (
        "clusterversion.yaml",
        include_str!("../../../examples/snapshot/clusterversion.yaml"),
    ),
    (
        "configmaps.yaml",
        include_str!("../../../examples/snapshot/configmaps.yaml"),
    ),
    (
        "infrastructures.yaml",
        include_str!("../../../examples/snapshot/infrastructures.yaml"),
    ),
    (
        "ingresscontrollers.yaml",
        include_str!("../../../examples/snapshot/ingresscontrollers.yaml"),
    ),
    (
        "machineconfignodes.yaml",
        include_str!("../../../examples/snapshot/machineconfignodes.yaml"),
    ),
    (
        "machineconfigpools.yaml",
        include_str!("../../../examples/snapshot/machineconfigpools.yaml"),
    ),
    (
        "nodes.yaml",
        include_str!("../../../examples/snapshot/nodes.yaml"),
    ),
    (
        "poddisruptionbudgets.yaml",
        include_str!("../../../examples/snapshot/poddisruptionbudgets.yaml"),
    ),
    (
        "pods.yaml",
        include_str!("../../../examples/snapshot/pods.yaml"),
    ),
    (
        "secrets.yaml",
        include_str!("../../../examples/snapshot/secrets.yaml"),
    ),
];

/// Loads the sample.
pub fn load() -> Result<ClusterView, SnapshotError> {
    load_files(FILES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_example_directory_is_embedded() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/snapshot");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") || n.ends_with(".json"))
            .collect();
        on_disk.sort();
        let embedded: Vec<&str> = FILES.iter().map(|(name, _)| *name).collect();
        assert_eq!(on_disk, embedded);
    }

    #[test]
    fn the_sample_loads_every_kind_the_checks_read() {
        let view = load().unwrap();
        for kind in crate::view::kinds::ALL {
            assert!(view.has(kind), "{}", kind.name);
        }
        assert!(view.alerts.is_some());
        assert_eq!(
            view.pods
                .iter()
                .filter(|p| p.name.starts_with("migrate-"))
                .count(),
            0
        );
    }
}
