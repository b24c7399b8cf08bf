//! HyperShift's side of a hosted cluster's update, as checks: what the
//! management cluster says of the HostedCluster, its NodePools and the
//! HyperShift operator (the rules are [`crate::model::hosted`]'s). They
//! are results like the catalogue's, by name, so they are accepted,
//! reported and counted as any other; the catalogue itself runs on the
//! hosted cluster ([`crate::suite::run_hosted`]).

use crate::model::hosted::{
    HostedCluster, NodePool, Refusal, SupportError, SupportedVersions, UPGRADEABLE_CHECK,
    belongs_to, named, nodepool_skew, nodepool_update, not_upgradeable, unhealthy_conditions,
};
use crate::model::release::{UpdateKind, Version};
use crate::model::{CheckResult, Outcome, Severity};

/// The HostedCluster and its NodePools are available and healthy.
pub const HEALTHY: &str = "HostedClusterHealthy";
/// `ClusterVersionUpgradeable` allows a minor or major update.
pub const UPGRADEABLE: &str = UPGRADEABLE_CHECK;
/// The HyperShift operator supports the target.
pub const SUPPORTED: &str = "HostedClusterVersionSupported";
/// Every NodePool stays within HyperShift's skew of the target.
pub const SKEW: &str = "NodePoolVersionSkew";
/// The hosted cluster could be read through its admin kubeconfig.
pub const REACHABLE: &str = "HostedClusterReachable";

/// Every check's name here, in the order they run.
pub const NAMES: [&str; 5] = [REACHABLE, HEALTHY, UPGRADEABLE, SUPPORTED, SKEW];

/// What the management cluster says of one hosted cluster.
#[derive(Clone, Copy)]
pub struct Hosted<'a> {
    pub cluster: &'a HostedCluster,
    /// NodePools of the management cluster; only the cluster's are read.
    pub pools: &'a [NodePool],
    /// The HyperShift operator's supported versions, or why they cannot
    /// be read.
    pub supported: Result<&'a SupportedVersions, &'a SupportError>,
}

impl Hosted<'_> {
    fn pools(&self) -> impl Iterator<Item = &NodePool> {
        self.pools.iter().filter(|p| belongs_to(p, self.cluster))
    }
}

/// HyperShift's checks of an update of `hosted`'s control plane to
/// `target` (its version, when known).
pub fn checks(hosted: &Hosted, target: Option<&Version>) -> Vec<CheckResult> {
    vec![
        healthy(hosted),
        upgradeable(hosted, target),
        supported(hosted, target),
        skew(hosted, target),
    ]
}

/// HyperShift's checks of an update of `hosted`'s NodePool `pool` to
/// `target`: the cluster and that pool healthy, and the pool's update
/// one HyperShift takes ([`nodepool_update`]: not while the control
/// plane updates, never past it nor too far behind it), as
/// [`SKEW`].
pub fn nodepool_checks(
    hosted: &Hosted,
    pool: &NodePool,
    target: Option<&Version>,
) -> Vec<CheckResult> {
    let alone = Hosted {
        pools: std::slice::from_ref(pool),
        ..*hosted
    };
    let name = named(&pool.metadata);
    let skew = match target {
        None => result(
            SKEW,
            Outcome::Error,
            "the target's version is not known, so its skew from the control plane cannot be told"
                .to_owned(),
        ),
        Some(target) => {
            let refusals = nodepool_update(hosted.cluster, pool, target);
            if refusals.is_empty() {
                result(
                    SKEW,
                    Outcome::Pass,
                    format!(
                        "NodePool {name} at {target} stays within HyperShift's skew of its control plane (not newer, at most 3 minors older)"
                    ),
                )
            } else {
                failed(SKEW, &refusals, vec![name])
            }
        }
    };
    vec![healthy(&alone), skew]
}

/// The result of reading the hosted cluster: a pass, or an Error that
/// says why it could not be read (never a pass for want of data).
pub fn reachable(read: Result<(), &str>, cluster: &HostedCluster) -> CheckResult {
    let name = named(&cluster.metadata);
    match read {
        Ok(()) => CheckResult::new(
            REACHABLE,
            Severity::Blocking,
            Outcome::Pass,
            format!("hosted cluster {name} was read through its admin kubeconfig"),
        ),
        Err(why) => CheckResult::new(
            REACHABLE,
            Severity::Blocking,
            Outcome::Error,
            format!(
                "hosted cluster {name} could not be read through its admin kubeconfig, so its own checks did not run: {why}"
            ),
        ),
    }
}

fn result(name: &str, outcome: Outcome, message: String) -> CheckResult {
    CheckResult::new(name, Severity::Blocking, outcome, message)
}

/// A result failing for each refusal, with the objects they name.
fn failed(name: &str, refusals: &[Refusal], subjects: Vec<String>) -> CheckResult {
    let said: Vec<String> = refusals.iter().map(ToString::to_string).collect();
    let mut result = result(name, Outcome::Fail, said.join("; "));
    result.subjects = subjects;
    result
}

fn healthy(hosted: &Hosted) -> CheckResult {
    let refusals = unhealthy_conditions(hosted.cluster, hosted.pools);
    if refusals.is_empty() {
        let name = named(&hosted.cluster.metadata);
        let pools = hosted.pools().count();
        return result(
            HEALTHY,
            Outcome::Pass,
            format!(
                "HostedCluster {name} is available, not degraded or failing, and its {pools} NodePool(s) are ready and healthy"
            ),
        );
    }
    let subjects = refusals
        .iter()
        .filter_map(|r| match r {
            Refusal::Unhealthy { object, .. } => Some(object.clone()),
            _ => None,
        })
        .collect();
    failed(HEALTHY, &refusals, subjects)
}

fn upgradeable(hosted: &Hosted, target: Option<&Version>) -> CheckResult {
    let cluster = hosted.cluster;
    let patch = match (cluster.control_plane_version(), target) {
        (Some(current), Some(target)) => UpdateKind::between(&current, target) == UpdateKind::Patch,
        _ => false,
    };
    match not_upgradeable(cluster) {
        Some(_) if patch => result(
            UPGRADEABLE,
            Outcome::Pass,
            "a patch update, which ClusterVersionUpgradeable=False does not hold".to_owned(),
        ),
        Some(refusal) => {
            let mut failed = failed(UPGRADEABLE, &[refusal], Vec::new());
            failed.risks = vec!["ClusterVersionUpgradeable".to_owned()];
            failed
        }
        None => result(
            UPGRADEABLE,
            Outcome::Pass,
            "ClusterVersionUpgradeable is not False".to_owned(),
        ),
    }
}

fn supported(hosted: &Hosted, target: Option<&Version>) -> CheckResult {
    let Some(target) = target else {
        return result(
            SUPPORTED,
            Outcome::Error,
            "the target's version is not known, so whether the HyperShift operator supports it cannot be told".to_owned(),
        );
    };
    match hosted.supported.map(|s| s.supports(target)) {
        Ok(Ok(())) => result(
            SUPPORTED,
            Outcome::Pass,
            format!("the HyperShift operator supports {}", target.line()),
        ),
        Ok(Err(why)) => failed(SUPPORTED, &[why.into()], Vec::new()),
        Err(why) => result(SUPPORTED, Outcome::Error, why.to_string()),
    }
}

fn skew(hosted: &Hosted, target: Option<&Version>) -> CheckResult {
    let Some(target) = target else {
        return result(
            SKEW,
            Outcome::Error,
            "the target's version is not known, so its skew from the NodePools cannot be told"
                .to_owned(),
        );
    };
    let mut refusals = Vec::new();
    let mut subjects = Vec::new();
    let mut unknown = Vec::new();
    for pool in hosted.pools() {
        let name = named(&pool.metadata);
        match Version::parse(&pool.status.version) {
            Some(version) => {
                if let Err(error) = nodepool_skew(target, &version) {
                    refusals.push(Refusal::Skew {
                        pool: name.clone(),
                        error,
                    });
                    subjects.push(name);
                }
            }
            None => unknown.push(name),
        }
    }
    if !refusals.is_empty() {
        return failed(SKEW, &refusals, subjects);
    }
    let mut message = format!(
        "every NodePool stays within HyperShift's skew of {target} (not newer, at most 3 minors older)"
    );
    if !unknown.is_empty() {
        message.push_str(&format!(
            "; {} report(s) no version yet: {}",
            unknown.len(),
            unknown.join(", ")
        ));
    }
    result(SKEW, Outcome::Pass, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(conditions: serde_json::Value) -> HostedCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "prod", "namespace": "clusters"},
            "spec": {"release": {"image": "quay.io/openshift-release-dev/ocp-release@sha256:aa"}},
            "status": {
                "version": {"history": [{"state": "Completed", "version": "4.21.4"}]},
                "conditions": conditions
            }
        }))
        .unwrap()
    }

    fn pool(name: &str, version: &str) -> NodePool {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "clusters"},
            "spec": {"clusterName": "prod", "replicas": 3},
            "status": {"version": version}
        }))
        .unwrap()
    }

    fn supported() -> SupportedVersions {
        SupportedVersions::from_data(Some(r#"{"versions":["5.0","4.22","4.21"]}"#), None).unwrap()
    }

    fn outcomes(results: &[CheckResult]) -> Vec<(&str, Outcome)> {
        results
            .iter()
            .map(|r| (r.name.as_str(), r.outcome))
            .collect()
    }

    #[test]
    fn a_healthy_cluster_passes_every_check() {
        let (cluster, pools, supported) = (cluster(json!([])), [pool("a", "4.21.4")], supported());
        let hosted = Hosted {
            cluster: &cluster,
            pools: &pools,
            supported: Ok(&supported),
        };
        let results = checks(&hosted, Version::parse("4.22.1").as_ref());
        assert_eq!(
            outcomes(&results),
            [
                (HEALTHY, Outcome::Pass),
                (UPGRADEABLE, Outcome::Pass),
                (SUPPORTED, Outcome::Pass),
                (SKEW, Outcome::Pass)
            ]
        );
    }

    #[test]
    fn each_refusal_fails_its_check_with_hypershifts_words() {
        let cluster = cluster(json!([
            {"type": "Degraded", "status": "True", "reason": "EtcdQuorumLost", "message": "etcd has 1 of 3 members"},
            {"type": "ClusterVersionUpgradeable", "status": "False", "reason": "AdminAckRequired", "message": "ack the API removals"}
        ]));
        let pools = [pool("old", "4.18.2"), pool("new", "4.21.4")];
        let supported = supported();
        let hosted = Hosted {
            cluster: &cluster,
            pools: &pools,
            supported: Ok(&supported),
        };
        let results = checks(&hosted, Version::parse("5.1.0").as_ref());
        assert!(
            results.iter().all(|r| r.outcome == Outcome::Fail),
            "{results:#?}"
        );
        assert_eq!(
            results[0].message,
            "HostedCluster clusters/prod is Degraded=True (EtcdQuorumLost): etcd has 1 of 3 members"
        );
        assert!(
            results[1]
                .message
                .contains("(AdminAckRequired): ack the API removals")
        );
        assert_eq!(results[1].risks, ["ClusterVersionUpgradeable"]);
        assert_eq!(
            results[2].message,
            "the HyperShift operator supports 5.0, 4.22, 4.21, not 5.1"
        );
        assert_eq!(results[3].subjects, ["clusters/old"]);
        assert!(
            results[3].message.contains("is 6 minors older"),
            "{}",
            results[3].message
        );
    }

    #[test]
    fn a_patch_update_is_not_held_by_upgradeable_false() {
        let cluster = cluster(json!([
            {"type": "ClusterVersionUpgradeable", "status": "False", "reason": "AdminAckRequired"}
        ]));
        let supported = supported();
        let hosted = Hosted {
            cluster: &cluster,
            pools: &[],
            supported: Ok(&supported),
        };
        let results = checks(&hosted, Version::parse("4.21.9").as_ref());
        assert_eq!(results[1].outcome, Outcome::Pass, "{}", results[1].message);
    }

    #[test]
    fn what_cannot_be_told_is_an_error_never_a_pass() {
        let cluster = cluster(json!([]));
        let missing = SupportError::Missing;
        let hosted = Hosted {
            cluster: &cluster,
            pools: &[],
            supported: Err(&missing),
        };
        let results = checks(&hosted, Version::parse("4.22.0").as_ref());
        assert_eq!(results[2].outcome, Outcome::Error);
        let unknown = checks(&hosted, None);
        assert_eq!(unknown[2].outcome, Outcome::Error);
        assert_eq!(unknown[3].outcome, Outcome::Error);
        let unread = reachable(Err("connection refused"), &cluster);
        assert_eq!(unread.outcome, Outcome::Error);
        assert!(unread.message.ends_with("connection refused"));
    }
}
