//! A node's update and reboot, from the cluster's own MachineConfigNode
//! phase times when they are there, else the documented defaults.
//!
//! The machine-config daemon moves a node's MachineConfigNode through the
//! phases of its update, each condition's `lastTransitionTime` the moment
//! it entered its status: `Drained` True once the drain is done,
//! `UpdateExecuted` True once the files and OS image are written (the
//! reboot comes next), `RebootedNode` True once the node is back from its
//! reboot. A node's update is `Drained` to `UpdateExecuted`, its reboot
//! and rejoin `UpdateExecuted` to `RebootedNode`. Once the node is
//! `Updated`, the daemon sets every other condition False at that moment,
//! so the times are those of a node caught during an update, never of a
//! settled one.

use jiff::Timestamp;
use serde::Serialize;

use super::control_plane::percentile;
use super::duration::{NODE_REBOOT, NODE_UPDATE, words};
use crate::view::openshift::{Condition, MachineConfigNode, condition};

/// Fewer nodes with a phase's time than this, in the pool and then in the
/// cluster, and the plan takes the documented default instead.
pub const MIN_NODES: usize = 3;

/// What one node's MachineConfigNode says of its update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub node: String,
    pub pool: String,
    /// Drain done to files and OS written, in seconds.
    pub update: Option<u64>,
    /// Files and OS written to back from the reboot, in seconds.
    pub reboot: Option<u64>,
}

/// One phase of a node's update, and where its figure comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub seconds: u64,
    /// Its P90: the nearest-rank P90 of the same nodes' times, the
    /// documented default when there are none (no spread known).
    pub p90_seconds: u64,
    /// `machineconfignodes` or `documented`.
    #[serde(rename = "source")]
    pub origin: &'static str,
    /// How many nodes' times it was computed from.
    pub samples: usize,
    /// What it was computed from, in words.
    pub basis: String,
    /// Why the default, when it is.
    #[serde(skip)]
    why: Option<String>,
}

/// A pool's node update and reboot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePhases {
    pub update: Phase,
    pub reboot: Phase,
}

impl NodePhases {
    /// Both documented, for a pool the plan has no data for.
    pub fn documented() -> Self {
        Self::of(&[], "", false)
    }

    /// What the plan cannot know of them, in one line: the phases it took
    /// the defaults for, and why; `None` when the cluster's times gave
    /// both.
    pub fn unknown(&self) -> Option<String> {
        match (&self.update.why, &self.reboot.why) {
            (Some(a), Some(b)) if a == b => Some(format!(
                "a node's update and reboot: the documented {} (oc adm upgrade status' estimates): {a}",
                if self.update.seconds == self.reboot.seconds {
                    format!("{} each", words(self.update.seconds))
                } else {
                    format!(
                        "{} and {}",
                        words(self.update.seconds),
                        words(self.reboot.seconds)
                    )
                }
            )),
            _ => {
                let lines: Vec<&str> = [&self.update, &self.reboot]
                    .into_iter()
                    .filter(|p| p.why.is_some())
                    .map(|p| p.basis.as_str())
                    .collect();
                (!lines.is_empty()).then(|| format!("a node's {}", lines.join("; ")))
            }
        }
    }

    /// `update + reboot`, the part of a node's time after its drain.
    pub fn after_drain(&self) -> u64 {
        self.update.seconds.saturating_add(self.reboot.seconds)
    }

    /// The same at P90: each phase's own worst cases.
    pub fn after_drain_p90(&self) -> u64 {
        self.update
            .p90_seconds
            .saturating_add(self.reboot.p90_seconds)
    }

    /// The phases of `pool`'s nodes from `samples` (every node's, each
    /// naming its pool); `loaded` whether MachineConfigNodes were in the
    /// data at all.
    pub fn of(samples: &[Sample], pool: &str, loaded: bool) -> Self {
        Self {
            update: phase(samples, pool, loaded, Which::Update),
            reboot: phase(samples, pool, loaded, Which::Reboot),
        }
    }
}

/// The samples of every MachineConfigNode.
pub fn samples(nodes: &[MachineConfigNode]) -> Vec<Sample> {
    nodes.iter().map(sample).collect()
}

/// What one MachineConfigNode says: each phase whose two ends are True,
/// in order.
pub fn sample(mcn: &MachineConfigNode) -> Sample {
    let conditions = &mcn.status.conditions;
    let drained = true_since(conditions, "Drained");
    let executed = true_since(conditions, "UpdateExecuted");
    let rebooted = true_since(conditions, "RebootedNode");
    Sample {
        node: mcn.node().to_owned(),
        pool: mcn.spec.pool.name.clone(),
        update: between(drained, executed),
        reboot: between(executed, rebooted),
    }
}

/// When a condition turned True, if it is True.
fn true_since(conditions: &[Condition], type_: &str) -> Option<Timestamp> {
    condition(conditions, type_)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time)
}

fn between(from: Option<Timestamp>, to: Option<Timestamp>) -> Option<u64> {
    let (from, to) = (from?, to?);
    (to >= from).then(|| to.duration_since(from).as_secs().unsigned_abs())
}

#[derive(Clone, Copy)]
enum Which {
    Update,
    Reboot,
}

impl Which {
    fn of(self, sample: &Sample) -> Option<u64> {
        match self {
            Which::Update => sample.update,
            Which::Reboot => sample.reboot,
        }
    }

    fn default(self) -> u64 {
        match self {
            Which::Update => NODE_UPDATE,
            Which::Reboot => NODE_REBOOT,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Which::Update => "update (drained to files and OS written)",
            Which::Reboot => "reboot and rejoin (files and OS written to RebootedNode)",
        }
    }
}

/// The median of the pool's nodes' times for the phase, else of every
/// node's, else the documented default, saying which.
fn phase(samples: &[Sample], pool: &str, loaded: bool, which: Which) -> Phase {
    let of = |in_pool: bool| -> Vec<u64> {
        let mut times: Vec<u64> = samples
            .iter()
            .filter(|s| !in_pool || s.pool == pool)
            .filter_map(|s| which.of(s))
            .collect();
        times.sort_unstable();
        times
    };
    let own = of(true);
    let all = of(false);
    let what = which.what();
    let from = |times: &[u64], whose: String| Phase {
        seconds: percentile(times, 50),
        p90_seconds: percentile(times, 90),
        origin: "machineconfignodes",
        samples: times.len(),
        basis: format!("the median {what} of {whose}, from their MachineConfigNodes' phase times"),
        why: None,
    };
    if own.len() >= MIN_NODES {
        from(&own, format!("pool {pool}'s {} nodes", own.len()))
    } else if all.len() >= MIN_NODES {
        from(
            &all,
            format!(
                "the cluster's {} nodes (pool {pool} has {})",
                all.len(),
                own.len()
            ),
        )
    } else {
        let why = if loaded {
            format!(
                "the MachineConfigNodes give {} {} times, fewer than {MIN_NODES} (they keep them only while a node updates)",
                all.len(),
                if all.len() == 1 { "node's" } else { "nodes'" }
            )
        } else {
            "no MachineConfigNode objects in the cluster data".to_owned()
        };
        Phase {
            seconds: which.default(),
            p90_seconds: which.default(),
            origin: "documented",
            samples: all.len(),
            basis: format!(
                "{what}: the documented {} (oc adm upgrade status' estimate): {why}",
                words(which.default())
            ),
            why: Some(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// A MachineConfigNode of `pool` whose conditions are `(type, status,
    /// minutes past 10:00)`.
    fn mcn(node: &str, pool: &str, conditions: &[(&str, &str, i64)]) -> MachineConfigNode {
        let base: Timestamp = "2026-11-30T10:00:00Z".parse().unwrap();
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, s, m)| {
                json!({"type": t, "status": s, "reason": "r", "message": "m",
                       "lastTransitionTime": (base + jiff::SignedDuration::from_mins(*m)).to_string()})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
            "metadata": {"name": node},
            "spec": {"node": {"name": node}, "pool": {"name": pool},
                     "configVersion": {"desired": "rendered-worker-2"}},
            "status": {"conditions": conditions}}))
        .unwrap()
    }

    /// Drained at 0, executed at `update`, back at `update + reboot`.
    fn rebooted(node: &str, pool: &str, update: i64, reboot: i64) -> MachineConfigNode {
        mcn(
            node,
            pool,
            &[
                ("Updated", "False", -10),
                ("Cordoned", "True", -5),
                ("Drained", "True", 0),
                ("UpdateExecuted", "True", update),
                ("RebootedNode", "True", update + reboot),
            ],
        )
    }

    #[rstest]
    #[case::after_its_reboot(rebooted("a", "worker", 4, 7), Some(240), Some(420))]
    #[case::rebooting(mcn("a", "worker", &[("Drained", "True", 0), ("UpdateExecuted", "True", 3),
        ("RebootedNode", "Unknown", 3)]), Some(180), None)]
    #[case::draining(mcn("a", "worker", &[("Drained", "Unknown", 0), ("UpdateExecuted", "Unknown", 0)]), None, None)]
    // Once Updated, the daemon sets every other condition False.
    #[case::settled(mcn("a", "worker", &[("Updated", "True", 30), ("Drained", "False", 30),
        ("UpdateExecuted", "False", 30), ("RebootedNode", "False", 30)]), None, None)]
    #[case::out_of_order(mcn("a", "worker", &[("Drained", "True", 5), ("UpdateExecuted", "True", 1)]), None, None)]
    #[case::never_updated(mcn("a", "worker", &[]), None, None)]
    fn a_nodes_phases(
        #[case] object: MachineConfigNode,
        #[case] update: Option<u64>,
        #[case] reboot: Option<u64>,
    ) {
        let s = sample(&object);
        assert_eq!((s.update, s.reboot), (update, reboot), "{s:?}");
        assert_eq!((s.node.as_str(), s.pool.as_str()), ("a", "worker"));
    }

    fn phases(objects: &[MachineConfigNode], pool: &str) -> NodePhases {
        NodePhases::of(&samples(objects), pool, true)
    }

    #[rstest]
    // The pool's own three: medians 4 and 7 minutes.
    #[case::the_pools_own(vec![rebooted("w0", "worker", 3, 6), rebooted("w1", "worker", 4, 7),
        rebooted("w2", "worker", 9, 8), rebooted("m0", "master", 20, 20)], "worker",
        (240, "machineconfignodes", 3), (420, "machineconfignodes", 3))]
    // Two of the pool's, too few: every node's four.
    #[case::the_clusters(vec![rebooted("w0", "worker", 3, 6), rebooted("w1", "worker", 4, 7),
        rebooted("m0", "master", 20, 20), rebooted("m1", "master", 2, 1)], "worker",
        (180, "machineconfignodes", 4), (360, "machineconfignodes", 4))]
    #[case::too_few(vec![rebooted("w0", "worker", 3, 6), rebooted("w1", "worker", 4, 7)], "worker",
        (NODE_UPDATE, "documented", 2), (NODE_REBOOT, "documented", 2))]
    // Three nodes caught rebooting give an update, and no reboot.
    #[case::each_phase_on_its_own(vec![
        mcn("w0", "worker", &[("Drained", "True", 0), ("UpdateExecuted", "True", 2)]),
        mcn("w1", "worker", &[("Drained", "True", 0), ("UpdateExecuted", "True", 2)]),
        mcn("w2", "worker", &[("Drained", "True", 0), ("UpdateExecuted", "True", 2)])], "worker",
        (120, "machineconfignodes", 3), (NODE_REBOOT, "documented", 0))]
    fn a_pools_phases(
        #[case] objects: Vec<MachineConfigNode>,
        #[case] pool: &str,
        #[case] update: (u64, &str, usize),
        #[case] reboot: (u64, &str, usize),
    ) {
        let p = phases(&objects, pool);
        let said = |p: &Phase| (p.seconds, p.origin, p.samples);
        assert_eq!(said(&p.update), update, "{}", p.update.basis);
        assert_eq!(said(&p.reboot), reboot, "{}", p.reboot.basis);
    }

    #[test]
    fn the_basis_says_which() {
        let own = phases(
            &[
                rebooted("w0", "worker", 3, 6),
                rebooted("w1", "worker", 4, 7),
                rebooted("w2", "worker", 9, 8),
            ],
            "worker",
        );
        assert_eq!(
            own.update.basis,
            "the median update (drained to files and OS written) of pool worker's 3 nodes, from their MachineConfigNodes' phase times"
        );
        let none = NodePhases::documented();
        assert_eq!(
            none.reboot.basis,
            "reboot and rejoin (files and OS written to RebootedNode): the documented 5m (oc adm upgrade status' estimate): no MachineConfigNode objects in the cluster data"
        );
        assert_eq!(none.after_drain(), NODE_UPDATE + NODE_REBOOT);
        // Both defaults for one reason: one line.
        assert_eq!(
            none.unknown().unwrap(),
            "a node's update and reboot: the documented 5m each (oc adm upgrade status' estimates): no MachineConfigNode objects in the cluster data"
        );
        assert_eq!(own.unknown(), None);
        // The update from three nodes caught rebooting, the reboot not.
        let rebooting = |n: &str| {
            mcn(
                n,
                "worker",
                &[("Drained", "True", 0), ("UpdateExecuted", "True", 2)],
            )
        };
        let half = phases(
            &[rebooting("w0"), rebooting("w1"), rebooting("w2")],
            "worker",
        );
        assert_eq!(
            half.unknown().unwrap(),
            "a node's reboot and rejoin (files and OS written to RebootedNode): the documented 5m (oc adm upgrade status' estimate): the MachineConfigNodes give 0 nodes' times, fewer than 3 (they keep them only while a node updates)"
        );
        let few = phases(&[rebooted("w0", "worker", 3, 6)], "worker");
        assert!(
            few.update
                .basis
                .ends_with("the MachineConfigNodes give 1 node's times, fewer than 3 (they keep them only while a node updates)"),
            "{}",
            few.update.basis
        );
    }
}
