//! When a hosted cluster's targets are run, pure: which targets it runs by
//! itself, what of the management cluster's state a result was run over,
//! whether a result is due again, and how long a guest that could not be
//! read waits before the next try.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use jiff::Timestamp;

use crate::model::hosted::{HostedCluster, NodePool, SupportError, SupportedVersions, belongs_to};
use crate::model::release::ReleaseKey;
use crate::preflight::live::{RunRequest, offered};

/// The first wait after a guest could not be read.
pub const FIRST_RETRY: Duration = Duration::from_secs(30);
/// The longest wait between tries of a guest that cannot be read: the
/// rerun of an errored result the denial promises ("within 2 minutes").
pub const LAST_RETRY: Duration = crate::model::status::ERRORED_RERUN;

/// The targets the gate runs for `cluster` by itself: the releases its
/// update graph offers (`status.version.availableUpdates` and
/// `conditionalUpdates`), and its stored release (`spec.release.image`),
/// which a NodePool's update names; one per release.
pub fn targets(cluster: &HostedCluster) -> Vec<RunRequest> {
    let mut targets = offered(&cluster.as_update());
    let stored = cluster.spec.release.image.trim();
    if !stored.is_empty() {
        targets.push(RunRequest {
            image: stored.to_owned(),
            version: None,
            existing: None,
        });
    }
    let mut seen = HashSet::new();
    targets.retain(|t| seen.insert(ReleaseKey::from_image(&t.image)));
    targets
}

/// What of the management cluster a run of `cluster` reads, as one
/// number: the HostedCluster's and its NodePools' generations, conditions
/// and versions, and HyperShift's supported versions. A result run over
/// another is out of date.
pub fn observed(
    cluster: &HostedCluster,
    pools: &[NodePool],
    supported: Result<&SupportedVersions, &SupportError>,
) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let conditions = |hasher: &mut std::collections::hash_map::DefaultHasher,
                      conditions: &[crate::model::meta::Condition]| {
        for c in conditions {
            (&c.type_, &c.status, &c.reason).hash(hasher);
        }
    };
    cluster.metadata.generation.hash(&mut hasher);
    conditions(&mut hasher, &cluster.status.conditions);
    cluster
        .status
        .version
        .history
        .first()
        .map(|h| (&h.state, &h.version))
        .hash(&mut hasher);
    let mut mine: Vec<&NodePool> = pools.iter().filter(|p| belongs_to(p, cluster)).collect();
    mine.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for pool in mine {
        (
            &pool.metadata.name,
            pool.metadata.generation,
            &pool.status.version,
        )
            .hash(&mut hasher);
        conditions(&mut hasher, &pool.status.conditions);
    }
    match supported {
        Ok(s) => (
            &s.server_version,
            s.minors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        )
            .hash(&mut hasher),
        Err(e) => e.to_string().hash(&mut hasher),
    }
    hasher.finish()
}

/// A result held: when it was run, and over what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    pub at: Timestamp,
    pub observed: u64,
}

/// Whether a target is run again: it has no result, its result is older
/// than `refresh_after` (half of `--max-result-age`, so a result is
/// renewed well before the decision calls it too old), or the state it
/// was run over has changed.
pub fn due(ran: Option<&Ran>, observed: u64, now: Timestamp, refresh_after: Duration) -> bool {
    let Some(ran) = ran else {
        return true;
    };
    let age = now.duration_since(ran.at);
    ran.observed != observed || age.unsigned_abs() >= refresh_after || age.is_negative()
}

/// How long to wait after `failures` reads of a guest failed in a row:
/// [`FIRST_RETRY`], doubling, at most [`LAST_RETRY`]; none before a failure.
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => FIRST_RETRY
            .saturating_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
            .min(LAST_RETRY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OFFERED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:aa11";
    const CONDITIONAL: &str = "quay.io/openshift-release-dev/ocp-release@sha256:bb22";

    fn cluster(stored: &str) -> HostedCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "prod", "namespace": "clusters", "generation": 3},
            "spec": {"release": {"image": stored}},
            "status": {
                "version": {
                    "availableUpdates": [{"version": "4.22.4", "image": OFFERED}],
                    "conditionalUpdates": [{"release": {"version": "4.23.0", "image": CONDITIONAL}}],
                    "history": [{"state": "Completed", "version": "4.22.3"}]
                },
                "conditions": [{"type": "Available", "status": "True"}]
            }
        }))
        .unwrap()
    }

    fn pool(name: &str, cluster: &str) -> NodePool {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "clusters", "generation": 1},
            "spec": {"clusterName": cluster},
            "status": {"version": "4.22.3", "conditions": [{"type": "AllNodesHealthy", "status": "True"}]}
        }))
        .unwrap()
    }

    fn images(cluster: &HostedCluster) -> Vec<(String, Option<String>)> {
        targets(cluster)
            .into_iter()
            .map(|t| (t.image, t.version))
            .collect()
    }

    #[test]
    fn a_hosted_cluster_runs_its_offers_and_its_stored_release() {
        let running = "quay.io/openshift-release-dev/ocp-release:4.22.3-x86_64";
        assert_eq!(
            images(&cluster(running)),
            [
                (OFFERED.to_owned(), Some("4.22.4".to_owned())),
                (CONDITIONAL.to_owned(), Some("4.23.0".to_owned())),
                (running.to_owned(), None),
            ]
        );
        // Updating to an offered release: one target for it.
        assert_eq!(images(&cluster(OFFERED)).len(), 2);
        assert_eq!(images(&cluster("")).len(), 2);
    }

    #[test]
    fn what_a_run_read_changes_with_the_clusters_and_its_pools_state() {
        let supported =
            SupportedVersions::from_data(Some(r#"{"versions":["4.23","4.22"]}"#), None).unwrap();
        let hc = cluster(OFFERED);
        let pools = [pool("workers", "prod"), pool("other", "staging")];
        let base = observed(&hc, &pools, Ok(&supported));
        assert_eq!(base, observed(&hc, &pools, Ok(&supported)));
        // Another cluster's pool does not count.
        let mut elsewhere = pools.clone();
        elsewhere[1].status.version = "4.20.0".into();
        assert_eq!(base, observed(&hc, &elsewhere, Ok(&supported)));
        let mut degraded = pools.clone();
        degraded[0].status.conditions[0].status = "False".into();
        assert_ne!(base, observed(&hc, &degraded, Ok(&supported)));
        let mut edited = hc.clone();
        edited.metadata.generation = Some(4);
        assert_ne!(base, observed(&edited, &pools, Ok(&supported)));
        assert_ne!(
            base,
            observed(&hc, &pools, Err(&SupportError::Missing)),
            "the operator's supported versions"
        );
    }

    #[test]
    fn a_result_is_run_again_when_missing_old_or_run_over_another_state() {
        let refresh = Duration::from_secs(3 * 3600);
        let at: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        let ran = Ran { at, observed: 7 };
        let later = |secs: i64| at + jiff::SignedDuration::from_secs(secs);
        assert!(due(None, 7, at, refresh));
        assert!(!due(Some(&ran), 7, later(60), refresh));
        assert!(!due(Some(&ran), 7, later(3 * 3600 - 1), refresh));
        assert!(due(Some(&ran), 7, later(3 * 3600), refresh));
        assert!(due(Some(&ran), 8, later(60), refresh));
        // A clock that went back cannot keep a result forever.
        assert!(due(Some(&ran), 7, later(-60), refresh));
    }

    #[test]
    fn a_guest_that_cannot_be_read_is_tried_again_later_and_later() {
        let secs = |n| backoff(n).as_secs();
        assert_eq!(
            (0..=7).map(secs).collect::<Vec<_>>(),
            [0, 30, 60, 120, 120, 120, 120, 120]
        );
        assert_eq!(backoff(u32::MAX), LAST_RETRY);
    }
}
