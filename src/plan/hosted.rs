//! A NodePool's rollout, as HyperShift updates it by its `upgradeType`:
//! how many machines change at once and in how many waves, pure
//! arithmetic over its replicas and its `maxSurge` / `maxUnavailable`
//! (their defaults and rounding are the NodePool CRD's). How long a wave
//! takes is another matter: `Replace` waits on the cloud for new machines,
//! which no data here tells; `InPlace` drains and updates each node as the
//! MCO does.
//!
//! [`plan`] is the plan of a hosted cluster's update: its control plane
//! timed from the HostedCluster's own history, then each NodePool's
//! rollout, timed by the hosted cluster's own nodes where it was read.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::duration::{self, words};
use super::pools::scaled;
use super::{ControlPlane, Plan, Sought, control_plane};
use crate::model::hosted::{HostedCluster, NodePool, belongs_to};
use crate::model::release::{UpdateKind, Version};
use crate::view::ClusterView;

/// How a NodePool's machines are updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UpgradeType {
    /// New machines replace the old, `maxSurge` above and
    /// `maxUnavailable` below the desired count.
    Replace,
    /// The machines are drained and updated where they are,
    /// `maxUnavailable` at a time.
    InPlace,
}

/// A NodePool's rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    pub upgrade_type: UpgradeType,
    pub replicas: usize,
    /// Machines made above the desired count at once (`Replace` only).
    pub surge: usize,
    /// Machines unavailable at once.
    pub unavailable: usize,
    /// Machines that change in one wave.
    pub at_once: usize,
    /// Waves until every machine has changed.
    pub waves: usize,
}

/// The rollout of `pool`, or why its settings cannot roll it out (as the
/// NodePool's controller refuses them).
pub fn rollout(pool: &NodePool) -> Result<Rollout, String> {
    let replicas = pool.spec.replicas.unwrap_or(0) as usize;
    let management = &pool.spec.management;
    let (upgrade_type, surge, unavailable) = match management.upgrade_type.as_str() {
        "InPlace" => {
            let given = management
                .in_place
                .as_ref()
                .and_then(|p| p.max_unavailable.as_ref());
            let unavailable = match given {
                Some(given) => scaled("maxUnavailable", given, replicas, false)?,
                None => 1,
            };
            (UpgradeType::InPlace, 0, unavailable.max(1))
        }
        "Replace" | "" => {
            let rolling = management
                .replace
                .as_ref()
                .and_then(|r| r.rolling_update.as_ref());
            let surge = rolling.and_then(|r| r.max_surge.as_ref());
            let unavailable = rolling.and_then(|r| r.max_unavailable.as_ref());
            let surge = scaled(
                "maxSurge",
                surge.unwrap_or(&IntOrString::Int(1)),
                replicas,
                true,
            )?;
            let unavailable = scaled(
                "maxUnavailable",
                unavailable.unwrap_or(&IntOrString::Int(0)),
                replicas,
                false,
            )?;
            if surge == 0 && unavailable == 0 {
                return Err(
                    "maxSurge and maxUnavailable are both 0: no machine can be replaced".to_owned(),
                );
            }
            (UpgradeType::Replace, surge, unavailable)
        }
        other => {
            return Err(format!(
                "upgradeType {other:?} is neither Replace nor InPlace"
            ));
        }
    };
    let at_once = surge + unavailable;
    Ok(Rollout {
        upgrade_type,
        replicas,
        surge,
        unavailable,
        at_once,
        waves: replicas.div_ceil(at_once),
    })
}

/// One NodePool's part in the plan of a hosted cluster's update.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolPlan {
    /// `namespace/name`.
    pub name: String,
    /// Its rollout, unless its settings cannot roll it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Why it cannot roll out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Its rollout as far as the plan can time it (for `Replace`, the
    /// drains; the cloud's new machines are not counted).
    pub seconds: u64,
    pub p90_seconds: u64,
    /// How it is timed, in words.
    pub basis: String,
}

/// What a hosted cluster's update is of: its control plane (then every
/// NodePool follows to the same release), or one NodePool alone.
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    ControlPlane,
    NodePool(&'a str),
}

/// The plan of an update of `cluster` (with the management cluster's
/// `pools`, of which only its own are read) to `target` (its version,
/// when known), at `now`, the time of the data. `guest` is the hosted
/// cluster as it was read, for its nodes' drains; without it they take
/// the documented defaults. Pure.
pub fn plan(
    cluster: &HostedCluster,
    pools: &[NodePool],
    guest: Option<&ClusterView>,
    target: Option<&Version>,
    part: Part,
    now: Timestamp,
) -> Plan {
    let kind = cluster
        .control_plane_version()
        .zip(target)
        .map(|(current, target)| UpdateKind::between(&current, target));
    let control_plane = match part {
        Part::NodePool(_) => ControlPlane {
            basis: "a NodePool update leaves the control plane as it is".to_owned(),
            ..ControlPlane::done()
        },
        Part::ControlPlane => {
            let completed = control_plane::completed_updates(&cluster.status.version.history, now);
            let mut estimate = if target.is_some_and(|t| t.pre.is_some()) {
                control_plane::estimate_pre_release(&completed)
            } else {
                control_plane::estimate(&completed, kind)
            };
            estimate.basis = format!("the HostedCluster's history: {}", estimate.basis);
            estimate
        }
    };
    // The hosted cluster's own nodes, pool by NodePool, for their drains.
    let nodes = guest.map(|view| {
        super::plan_of(
            view,
            Sought {
                kind,
                ..Sought::default()
            },
            now,
        )
    });
    let mut plan = Plan::of(control_plane);
    if plan.control_plane.origin == "documented" {
        plan.unknowns
            .push(format!("control plane: {}", plan.control_plane.basis));
    }
    if let Some(nodes) = &nodes {
        plan.blockers.extend(nodes.blockers.iter().cloned());
        plan.waits.extend(nodes.waits.iter().cloned());
        plan.unknowns.extend(
            nodes
                .unknowns
                .iter()
                .filter(|u| *u != super::HOSTED_GUEST && !u.starts_with("control plane:"))
                .cloned(),
        );
    } else {
        plan.unknowns.push(format!(
            "the hosted cluster was not read: the plan cannot know what each drain evicts, and takes {} per drain (oc adm upgrade status' estimate)",
            words(duration::DRAIN_UNKNOWN)
        ));
    }
    let selected = pools
        .iter()
        .filter(|p| belongs_to(p, cluster))
        .filter(|p| match part {
            Part::ControlPlane => true,
            Part::NodePool(name) => p.metadata.name == name,
        });
    for pool in selected {
        let guest_pool = nodes
            .as_ref()
            .and_then(|n| n.pools.iter().find(|g| g.name == pool.metadata.name));
        let node_pool = node_pool_plan(pool, guest_pool);
        if let Some(problem) = &node_pool.problem {
            plan.warnings.push(format!(
                "NodePool {}: {problem}; HyperShift will not roll it out until it is fixed",
                node_pool.name
            ));
        }
        if let Some(r) = &node_pool.rollout
            && r.upgrade_type == UpgradeType::Replace
            && r.replicas > 0
        {
            plan.unknowns.push(format!(
                "NodePool {} (Replace): each of its {} wave(s) waits for the cloud to give {} new machine(s) and for them to join; how long, the plan cannot know, and counts only the old machines' drains. Whether the cloud has capacity (quota, instance types) for {} machine(s) above the {} it runs, neither",
                node_pool.name, r.waves, r.at_once.min(r.replicas), r.surge, r.replicas
            ));
        }
        plan.node_pools.push(node_pool);
    }
    let cp = &plan.control_plane;
    let slowest = plan.node_pools.iter().map(|p| p.seconds).max().unwrap_or(0);
    let slowest_p90 = plan
        .node_pools
        .iter()
        .map(|p| p.p90_seconds)
        .max()
        .unwrap_or(0);
    plan.p50_seconds = cp.p50_seconds.saturating_add(slowest);
    plan.p90_seconds = cp.p90_seconds.saturating_add(slowest_p90);
    plan
}

/// One NodePool's rollout, timed: a node's drain (and, in place, its
/// update and reboot) from the hosted cluster's plan of that pool's
/// nodes where there is one, else the documented defaults.
fn node_pool_plan(pool: &NodePool, guest: Option<&super::PoolPlan>) -> NodePoolPlan {
    let name = crate::model::hosted::named(&pool.metadata);
    let steps = guest
        .into_iter()
        .flat_map(|g| g.batches.iter().flat_map(|b| &b.nodes));
    let (drain, drain_p90, node, node_p90) = steps.fold((None, None, None, None), |acc, step| {
        let max = |a: Option<u64>, b: u64| Some(a.map_or(b, |a: u64| a.max(b)));
        (
            max(acc.0, step.drain_seconds),
            max(acc.1, step.drain_p90_seconds),
            max(acc.2, step.seconds),
            max(acc.3, step.p90_seconds),
        )
    });
    let measured = drain.is_some();
    let phases = super::NodePhases::documented();
    let drain = drain.unwrap_or(duration::DRAIN_UNKNOWN);
    let drain_p90 = drain_p90.unwrap_or(duration::DRAIN_UNKNOWN);
    let node = node.unwrap_or_else(|| duration::node(drain, phases.after_drain()));
    let node_p90 = node_p90.unwrap_or_else(|| duration::node(drain_p90, phases.after_drain_p90()));
    let from = if measured {
        "its nodes' drains as the hosted cluster's pods and PodDisruptionBudgets make them"
    } else {
        "the documented defaults"
    };
    match rollout(pool) {
        Err(problem) => NodePoolPlan {
            name,
            rollout: None,
            problem: Some(problem),
            seconds: 0,
            p90_seconds: 0,
            basis: "not rolled out".to_owned(),
        },
        Ok(r) => {
            let (each, each_p90, what, slots) = match r.upgrade_type {
                UpgradeType::InPlace => (
                    node,
                    node_p90,
                    format!(
                        "in place, {} node(s) at a time, each drained, updated and rebooted as the machine-config daemon does, about {} (P90 {}), from {from}",
                        r.unavailable,
                        words(node),
                        words(node_p90)
                    ),
                    r.unavailable,
                ),
                UpgradeType::Replace => (
                    drain,
                    drain_p90,
                    format!(
                        "replaced, {} new machine(s) at a time (maxSurge {}, maxUnavailable {}), each old one drained in about {} (P90 {}), from {from}; the cloud's new machines not counted",
                        r.at_once,
                        r.surge,
                        r.unavailable,
                        words(drain),
                        words(drain_p90)
                    ),
                    r.at_once,
                ),
            };
            NodePoolPlan {
                name,
                seconds: duration::rollout(std::iter::repeat_n(each, r.replicas), slots),
                p90_seconds: duration::rollout(std::iter::repeat_n(each_p90, r.replicas), slots),
                rollout: Some(r),
                problem: None,
                basis: what,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn pool(replicas: u32, management: Value) -> NodePool {
        serde_json::from_value(json!({
            "metadata": {"name": "workers", "namespace": "clusters"},
            "spec": {"clusterName": "prod", "replicas": replicas, "management": management}
        }))
        .unwrap()
    }

    #[rstest]
    #[case::replace_defaults(10, json!({"upgradeType": "Replace"}), UpgradeType::Replace, 1, 0, 10)]
    #[case::replace_surge_percent_rounds_up(10, json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}}), UpgradeType::Replace, 3, 0, 4)]
    #[case::replace_unavailable_percent_rounds_down(10, json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}}}), UpgradeType::Replace, 0, 2, 5)]
    #[case::in_place_defaults(7, json!({"upgradeType": "InPlace"}), UpgradeType::InPlace, 0, 1, 7)]
    #[case::in_place_count(7, json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": 3}}), UpgradeType::InPlace, 0, 3, 3)]
    #[case::in_place_small_percent_is_one(7, json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": "10%"}}), UpgradeType::InPlace, 0, 1, 7)]
    #[case::no_replicas(0, json!({"upgradeType": "Replace"}), UpgradeType::Replace, 1, 0, 0)]
    fn a_nodepool_rolls_out_in_waves(
        #[case] replicas: u32,
        #[case] management: Value,
        #[case] upgrade_type: UpgradeType,
        #[case] surge: usize,
        #[case] unavailable: usize,
        #[case] waves: usize,
    ) {
        let r = rollout(&pool(replicas, management)).unwrap();
        assert_eq!(
            (r.upgrade_type, r.surge, r.unavailable, r.waves),
            (upgrade_type, surge, unavailable, waves),
            "{r:?}"
        );
        assert_eq!(r.at_once, surge + unavailable);
    }

    #[rstest]
    #[case::both_zero(json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}), "both 0")]
    #[case::negative(json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": -1}}), "maxUnavailable -1 is negative")]
    #[case::words(json!({"upgradeType": "Replace",
        "replace": {"rollingUpdate": {"maxSurge": "a few"}}}), "maxSurge \"a few\" is neither")]
    #[case::other_type(json!({"upgradeType": "Recreate"}), "neither Replace nor InPlace")]
    fn settings_that_cannot_roll_out_say_why(#[case] management: Value, #[case] says: &str) {
        let err = rollout(&pool(3, management)).unwrap_err();
        assert!(err.contains(says), "{err}");
    }

    fn cluster() -> HostedCluster {
        let entry = |version: &str, started: &str, done: &str| {
            json!({"state": "Completed", "version": version,
                   "startedTime": started, "completionTime": done})
        };
        serde_json::from_value(json!({
            "metadata": {"name": "prod", "namespace": "clusters"},
            "spec": {"release": {"image": "quay.io/r@sha256:aa"}},
            "status": {"version": {"history": [
                entry("4.21.4", "2026-11-20T10:00:00Z", "2026-11-20T10:30:00Z"),
                entry("4.21.3", "2026-11-10T10:00:00Z", "2026-11-10T10:40:00Z"),
                entry("4.21.2", "2026-11-01T10:00:00Z", "2026-11-01T10:20:00Z"),
                entry("4.21.1", "2026-10-01T10:00:00Z", "2026-10-01T11:00:00Z"),
            ]}}
        }))
        .unwrap()
    }

    #[test]
    fn a_hosted_update_times_its_control_plane_by_its_history_then_each_nodepool() {
        let pools = [pool(4, json!({"upgradeType": "Replace"})), {
            let mut p = pool(
                3,
                json!({"upgradeType": "InPlace", "inPlace": {"maxUnavailable": 2}}),
            );
            p.metadata.name = "metal".to_owned();
            p
        }];
        let now = "2026-11-30T12:00:00Z".parse().unwrap();
        let target = Version::parse("4.21.9");
        let plan = plan(
            &cluster(),
            &pools,
            None,
            target.as_ref(),
            Part::ControlPlane,
            now,
        );
        assert_eq!(plan.control_plane.origin, "history");
        assert_eq!(plan.control_plane.p50_seconds, 30 * 60);
        assert!(
            plan.control_plane.basis.starts_with(
                "the HostedCluster's history: this cluster's 3 completed patch updates"
            ),
            "{}",
            plan.control_plane.basis
        );
        let names: Vec<&str> = plan.node_pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["clusters/workers", "clusters/metal"]);
        // Replace: 4 waves of one new machine, each old one's drain timed.
        let replace = &plan.node_pools[0];
        assert_eq!(replace.seconds, 4 * duration::DRAIN_UNKNOWN);
        // InPlace: 2 at a time, drain, update and reboot.
        let in_place = &plan.node_pools[1];
        assert_eq!(in_place.rollout.as_ref().unwrap().waves, 2);
        assert_eq!(
            in_place.seconds,
            2 * (duration::DRAIN_UNKNOWN + duration::NODE_UPDATE + duration::NODE_REBOOT)
        );
        assert_eq!(
            plan.p50_seconds,
            30 * 60 + replace.seconds.max(in_place.seconds)
        );
        assert!(
            plan.unknowns.iter().any(|u| u.starts_with(
                "NodePool clusters/workers (Replace): each of its 4 wave(s) waits for the cloud"
            )),
            "{:?}",
            plan.unknowns
        );
        // The status keeps each NodePool among its pools, its waves as batches.
        let summary = crate::plan::status::summary(&plan, now);
        let kept: Vec<(&str, u32, u32)> = summary
            .pools
            .iter()
            .map(|p| (p.name.as_str(), p.batches, p.batch_size))
            .collect();
        assert_eq!(
            kept,
            [
                ("NodePool clusters/workers", 4, 1),
                ("NodePool clusters/metal", 2, 2)
            ]
        );
        let one = super::plan(
            &cluster(),
            &pools,
            None,
            target.as_ref(),
            Part::NodePool("metal"),
            now,
        );
        assert_eq!(one.node_pools.len(), 1);
        assert_eq!(one.control_plane.origin, "done");
        assert_eq!(one.p50_seconds, in_place.seconds);
    }

    #[test]
    fn a_nodepool_that_cannot_roll_out_holds_the_plan() {
        let pools = [pool(3, json!({"upgradeType": "Recreate"}))];
        let now = "2026-11-30T12:00:00Z".parse().unwrap();
        let plan = plan(&cluster(), &pools, None, None, Part::ControlPlane, now);
        assert!(plan.node_pools[0].problem.is_some());
        assert!(
            plan.warnings[0].starts_with("NodePool clusters/workers: upgradeType"),
            "{:?}",
            plan.warnings
        );
    }
}
