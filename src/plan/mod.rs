//! The update plan: what an update to a target will do, pool by pool and
//! batch by batch, and how long it will take. Pure: computed from the
//! same read-only `ClusterView` the checks read, at the time of the data
//! the caller passes; no clock, no I/O. The rules and their sources are in
//! `docs/plan.md`.
//!
//! - `control_plane`: P50 and P90 from the cluster's own history.
//! - `pools`: which pools update, their batches and their order.
//! - `drains`: what each batch evicts and the PDBs that hold it.
//! - `nodes`: a node's update and reboot, from the cluster's own
//!   MachineConfigNode phase times, else the documented defaults.
//! - `duration`: the named defaults and how durations add up.
//! - `status`: the plan bounded, as an `UpdatePreflight`'s status keeps it.

pub mod control_plane;
pub mod drains;
pub mod duration;
pub mod nodes;
pub mod pools;
pub mod status;

use jiff::Timestamp;
use serde::Serialize;

pub use control_plane::ControlPlane;
pub use drains::{Hold, Outcome};
pub use nodes::NodePhases;

use crate::model::release::UpdateKind;
use crate::view::ClusterView;
use crate::view::k8s::Node;
use duration::words;

/// The version of the plan's JSON and YAML shape; a change that removes
/// or renames a field raises it.
pub const SCHEMA_VERSION: u32 = 1;

/// The plan of one update.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub schema_version: u32,
    pub control_plane: ControlPlane,
    /// The master pool first, then by name.
    pub pools: Vec<PoolPlan>,
    /// The whole update, until every node of a pool that updates runs the
    /// target: the control plane, then the slowest other pool.
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    /// Batches that can never drain, each naming its PDB and node.
    pub blockers: Vec<String>,
    /// Batches whose drain waits for a PDB, each with its wait.
    pub waits: Vec<String>,
    /// What will hold the update up, or keep it from finishing.
    pub warnings: Vec<String>,
    /// What the plan cannot know from the data, and what it took instead.
    pub unknowns: Vec<String>,
    /// The maintenance window the update must fit in, when one is given
    /// (`check --window-end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
}

/// A maintenance window and how the plan meets it: the update, started
/// now, ends at its P90 by the window's end, or not.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    pub end: Timestamp,
    /// Now, plus the plan's P90.
    pub p90_end: Timestamp,
    pub fits: bool,
}

/// One MachineConfigPool's rollout.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolPlan {
    pub name: String,
    pub nodes: usize,
    /// Whether the update rolls it now (it is not paused).
    pub updates: bool,
    /// `maxUnavailable` as the pool gives it.
    pub max_unavailable: String,
    /// Its nodes already unavailable (not Ready, cordoned, or as the
    /// pool's status counts them).
    pub unavailable: usize,
    /// Nodes updated at once.
    pub batch_size: usize,
    /// How long each node takes to update and to reboot once drained,
    /// and where those figures come from.
    pub node_phases: NodePhases,
    pub batches: Vec<Batch>,
    /// The pool's rollout, batch after batch.
    pub seconds: u64,
    /// Some batch can never drain.
    pub blocked: bool,
}

/// Nodes that update together.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// From 1.
    pub number: usize,
    pub nodes: Vec<NodeStep>,
    /// Pods the batch's drains evict; `None` without Pod data.
    pub evictions: Option<usize>,
    pub holds: Vec<Hold>,
    /// Its slowest node.
    pub seconds: u64,
}

/// One node's update.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStep {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evictions: Option<usize>,
    /// Its drain: the longest grace period of its evictions plus the PDB
    /// waits, else `oc adm upgrade status`' estimate.
    pub drain_seconds: u64,
    /// Drain, update and reboot (the pool's `nodePhases`).
    pub seconds: u64,
}

/// `namespace/name`.
pub(crate) fn qualified(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

/// The plan of an update of `kind` (when known) for the cluster `view`
/// holds, at `now`, the time of the data.
pub fn plan(view: &ClusterView, kind: Option<UpdateKind>, now: Timestamp) -> Plan {
    let history = view
        .cluster_version
        .as_ref()
        .map_or(&[][..], |cv| &cv.status.history[..]);
    let control_plane =
        control_plane::estimate(&control_plane::completed_updates(history, now), kind);
    let mut plan = Plan {
        schema_version: SCHEMA_VERSION,
        p50_seconds: 0,
        p90_seconds: 0,
        pools: Vec::new(),
        blockers: Vec::new(),
        waits: Vec::new(),
        warnings: Vec::new(),
        unknowns: Vec::new(),
        window: None,
        control_plane,
    };
    if plan.control_plane.source == "documented" {
        plan.unknowns
            .push(format!("control plane: {}", plan.control_plane.basis));
    }
    let have_pods = view.has("Pod");
    if !have_pods {
        plan.unknowns.push(format!(
            "no Pod objects in the cluster data: the plan cannot know what each drain evicts, and takes {} per drain (oc adm upgrade status' estimate)",
            words(duration::DRAIN_UNKNOWN)
        ));
    } else if !view.has("PodDisruptionBudget") {
        plan.unknowns.push(
            "no PodDisruptionBudget objects in the cluster data: the plan cannot know which drains they hold".to_owned(),
        );
    }
    if !view.has("Node") {
        plan.unknowns.push(
            "no Node objects in the cluster data: the plan cannot know the pools' nodes".to_owned(),
        );
    }
    let single_node = view.single_node();
    if single_node {
        plan.warnings.push(
            "a single-node cluster: its one node reboots with every workload on it; no pod has another node to go to, and no PodDisruptionBudget is judged".to_owned(),
        );
    }
    let (members, inferred) = pools::members(view);
    if inferred && !members.is_empty() {
        plan.unknowns.push(
            "no MachineConfigPool data: pools told apart by the nodes' node-role labels, each with maxUnavailable 1".to_owned(),
        );
    }
    let index = drains::Index::new(view);
    let operator = pools::operator_node(view);
    let samples = nodes::samples(&view.machine_config_nodes);
    let have_mcns = view.has("MachineConfigNode");
    for (name, nodes) in members {
        let phases = NodePhases::of(&samples, &name, have_mcns);
        let pool = pool_plan(
            view,
            &name,
            nodes,
            phases,
            operator,
            &index,
            have_pods,
            single_node,
            &mut plan,
        );
        plan.pools.push(pool);
    }
    // Where a pool that updates took a node's update or reboot from the
    // documented defaults, say so once (as the control plane does).
    let documented: Vec<String> = plan
        .pools
        .iter()
        .filter(|p| p.updates && p.nodes > 0)
        .filter_map(|p| p.node_phases.unknown())
        .collect();
    for line in documented {
        if !plan.unknowns.contains(&line) {
            plan.unknowns.push(line);
        }
    }
    let slowest = plan
        .pools
        .iter()
        .filter(|p| p.updates && p.name != pools::MASTER)
        .map(|p| p.seconds)
        .max()
        .unwrap_or(0);
    plan.p50_seconds = plan.control_plane.p50_seconds.saturating_add(slowest);
    plan.p90_seconds = plan.control_plane.p90_seconds.saturating_add(slowest);
    plan
}

#[allow(clippy::too_many_arguments)]
fn pool_plan<'a>(
    view: &'a ClusterView,
    name: &str,
    nodes: Vec<&'a Node>,
    node_phases: NodePhases,
    operator: Option<&str>,
    index: &drains::Index<'a>,
    have_pods: bool,
    single_node: bool,
    plan: &mut Plan,
) -> PoolPlan {
    let object = view
        .machine_config_pools
        .iter()
        .find(|p| p.metadata.name == name);
    let paused = object.is_some_and(|p| p.spec.paused);
    let given = object.and_then(|p| p.spec.max_unavailable.as_ref());
    let reported = object.map_or(0, |p| p.status.unavailable_machine_count.max(0));
    let unavailable = nodes
        .iter()
        .filter(|n| pools::unavailable(n))
        .count()
        .max(usize::try_from(reported).unwrap_or(0));
    let mut pool = PoolPlan {
        name: name.to_owned(),
        nodes: nodes.len(),
        updates: !paused,
        max_unavailable: pools::said(given),
        unavailable,
        batch_size: 0,
        node_phases,
        batches: Vec::new(),
        seconds: 0,
        blocked: false,
    };
    if paused {
        plan.warnings.push(if name == pools::MASTER {
            format!(
                "pool {name} is paused: it takes no update until it is unpaused, and the update cannot complete without it (the machine-config operator waits for the master pool)"
            )
        } else {
            format!(
                "pool {name} is paused: its {} nodes keep the current release until it is unpaused; the ClusterVersion can report the update Completed without them, but their update is still to come, and while paused it also holds back the kube-apiserver-to-kubelet signer CA certificate the MCO would roll out",
                nodes.len()
            )
        });
        return pool;
    }
    let max = match pools::max_unavailable(given, nodes.len()) {
        Ok(max) => max,
        Err(why) => {
            plan.warnings.push(format!(
                "pool {name}: {why}; the machine-config operator will not roll the pool until it is fixed"
            ));
            return pool;
        }
    };
    pool.batch_size = match max.checked_sub(unavailable).filter(|c| *c > 0) {
        Some(capacity) => capacity,
        None => {
            if !nodes.is_empty() {
                plan.warnings.push(format!(
                    "pool {name}: {unavailable} of its nodes are unavailable and maxUnavailable allows {max}: it updates no node until they return, which the plan cannot know; batches of {max} are planned from then"
                ));
            }
            max
        }
    };
    // The machine-config-operator's node goes last, on its own, in the
    // master pool.
    let deferred = (name == pools::MASTER && nodes.len() > 1)
        .then_some(operator)
        .flatten()
        .filter(|op| nodes.iter().any(|n| n.name() == *op));
    if name == pools::MASTER && nodes.len() > 1 && deferred.is_none() {
        plan.unknowns.push(
            "the machine-config-operator pod's node is not in the data: the plan cannot know which master the MCO updates last".to_owned(),
        );
    }
    let ordered = pools::order(nodes.clone(), deferred);
    let (rest, last): (Vec<&Node>, Vec<&Node>) =
        ordered.iter().partition(|n| Some(n.name()) != deferred);
    let mut chunks: Vec<Vec<&Node>> = rest
        .chunks(pool.batch_size.max(1))
        .map(<[&Node]>::to_vec)
        .collect();
    if !last.is_empty() {
        chunks.push(last);
    }
    // The room on the pool's nodes, once; each batch leaves its own out.
    let room = drains::Room::new(index, &nodes);
    let after_drain = pool.node_phases.after_drain();
    for (i, batch) in chunks.into_iter().enumerate() {
        let holds = if have_pods && !single_node {
            index.holds(&batch, &room)
        } else {
            Vec::new()
        };
        let steps: Vec<NodeStep> = batch
            .iter()
            .map(|node| {
                let evicted = index.evictions(node.name());
                let drain = if have_pods {
                    let grace = evicted
                        .iter()
                        .map(|p| duration::grace(p.termination_grace_period_seconds))
                        .max()
                        .unwrap_or(0);
                    let wait = holds
                        .iter()
                        .filter(|h| h.nodes.iter().any(|n| n == node.name()))
                        .filter_map(|h| h.wait_seconds)
                        .max()
                        .unwrap_or(0);
                    grace.saturating_add(wait)
                } else {
                    duration::DRAIN_UNKNOWN
                };
                NodeStep {
                    name: node.name().to_owned(),
                    evictions: have_pods.then_some(evicted.len()),
                    drain_seconds: drain,
                    seconds: duration::node(drain, after_drain),
                }
            })
            .collect();
        let number = i + 1;
        for hold in &holds {
            let nodes = crate::model::text::list(&hold.nodes, 3);
            match hold.outcome {
                Outcome::Never => {
                    pool.blocked = true;
                    plan.blockers.push(format!(
                        "{name} batch {number} ({nodes}) cannot drain: PDB {} {}",
                        hold.pdb, hold.reason
                    ));
                }
                Outcome::Waits => plan.waits.push(format!(
                    "{name} batch {number} ({nodes}) waits{} for PDB {}: it {}",
                    hold.wait_seconds
                        .map(|w| format!(" about {}", words(w)))
                        .unwrap_or_default(),
                    hold.pdb,
                    hold.reason
                )),
                Outcome::Unknown => plan.unknowns.push(format!(
                    "{name} batch {number} ({nodes}), PDB {}: {}",
                    hold.pdb, hold.reason
                )),
            }
        }
        let seconds = steps.iter().map(|s| s.seconds).max().unwrap_or(0);
        pool.seconds = pool.seconds.saturating_add(seconds);
        pool.batches.push(Batch {
            number,
            evictions: have_pods.then(|| steps.iter().filter_map(|s| s.evictions).sum()),
            nodes: steps,
            holds,
            seconds,
        });
    }
    pool
}

#[cfg(test)]
mod tests;
