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
//! - `hosted`: a NodePool's rollout (hosted control planes), by its
//!   `upgradeType`: machines at once and waves.

pub mod control_plane;
pub mod drains;
pub mod duration;
pub mod hosted;
pub mod nodes;
pub mod pools;
pub mod status;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

pub use control_plane::ControlPlane;
pub use drains::{Hold, Outcome};
pub use nodes::NodePhases;

use crate::model::cluster_version::Target;
use crate::model::release::{UpdateKind, Version};
use crate::view::ClusterView;
use crate::view::k8s::Node;
use crate::view::kinds;
use crate::view::openshift::MachineConfigPool;
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
    /// A hosted cluster's NodePools ([`hosted::plan`]), in the order its
    /// management cluster lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<hosted::NodePoolPlan>,
    /// The whole update, until every node of a pool that updates runs the
    /// target: the control plane, then the slowest other pool (never less
    /// than a pool's own rollout); P90 from each part's own worst cases.
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
    /// The outage the update is (a single node's update and reboot),
    /// counted in the figures: no hold, a fact to plan for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub downtime: Vec<String>,
    /// The maintenance window the update must fit in, when one is given
    /// (`check --window-end`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
}

impl Plan {
    /// A plan of `control_plane` alone, before its pools are added and
    /// its durations summed.
    pub(crate) fn of(control_plane: ControlPlane) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            control_plane,
            pools: Vec::new(),
            node_pools: Vec::new(),
            p50_seconds: 0,
            p90_seconds: 0,
            blockers: Vec::new(),
            waits: Vec::new(),
            warnings: Vec::new(),
            unknowns: Vec::new(),
            downtime: Vec::new(),
            window: None,
        }
    }
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
    /// Its nodes already on the pool's target configuration, state Done,
    /// when the target is the update under way: not planned again.
    pub done: usize,
    /// Nodes updated at once (the MCO starts the next as soon as one
    /// returns).
    pub batch_size: usize,
    /// How long each node takes to update and to reboot once drained,
    /// and where those figures come from.
    pub node_phases: NodePhases,
    pub batches: Vec<Batch>,
    /// The pool's rollout, each node starting as soon as one returns.
    pub seconds: u64,
    /// Its P90: the rollout with its slowest node's worst case (its pods'
    /// whole grace periods, the phases' P90) added.
    pub p90_seconds: u64,
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
    /// Its nodes whose drain is failing now, each with the machine-config
    /// daemon's message: the batch holds on them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
    /// Its slowest node.
    pub seconds: u64,
    /// Its slowest node at P90.
    pub p90_seconds: u64,
}

/// One node's update.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStep {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evictions: Option<usize>,
    /// Its drain: its evictions at once, each pod's shutdown the typical
    /// one bounded by its grace period, plus the PDB waits; else
    /// `oc adm upgrade status`' estimate.
    pub drain_seconds: u64,
    /// Its drain's worst case: the longest grace period of its
    /// evictions, plus the PDB waits.
    pub drain_p90_seconds: u64,
    /// The evicted pod whose grace period makes the worst case, when it
    /// is longer than the typical shutdown: `namespace/name (grace)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_grace: Option<String>,
    /// Drain, update and reboot (the pool's `nodePhases`).
    pub seconds: u64,
    /// The same at P90.
    pub p90_seconds: u64,
}

/// What the plan is of: the update's kind, and what the target is to the
/// cluster.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sought {
    /// Patch, minor or major, when known.
    pub kind: Option<UpdateKind>,
    /// The target is an engineering candidate, release candidate or
    /// nightly: its control plane is estimated from pre-release steps.
    pub pre_release: bool,
    /// The target migrates the payload to another architecture: no
    /// estimate of the control plane (oc says N/A).
    pub migration: bool,
    /// The target is the update under way or the release the cluster
    /// runs: only what is left of it is planned (nodes already on their
    /// pool's target configuration are done).
    pub remaining: bool,
}

impl Sought {
    /// What an update to `target` is, for the cluster `view` holds.
    pub fn of(view: &ClusterView, target: &Target, kind: Option<UpdateKind>) -> Self {
        let cv = view.cluster_version.as_ref();
        let remaining = cv.is_some_and(|cv| cv.is_desired(target));
        let history = cv.map_or(&[][..], |cv| &cv.status.history[..]);
        Self {
            kind,
            pre_release: target
                .version
                .as_deref()
                .and_then(Version::parse)
                .is_some_and(|v| v.pre.is_some()),
            migration: target.architecture.is_some()
                || (remaining && control_plane::migration_under_way(history)),
            remaining,
        }
    }
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
/// holds, at `now`, the time of the data: every node updates.
pub fn plan(view: &ClusterView, kind: Option<UpdateKind>, now: Timestamp) -> Plan {
    plan_of(
        view,
        Sought {
            kind,
            ..Sought::default()
        },
        now,
    )
}

/// The plan of the update to `target`: a target the cluster runs or is
/// updating to plans only what is left of it.
pub fn plan_to(
    view: &ClusterView,
    target: &Target,
    kind: Option<UpdateKind>,
    now: Timestamp,
) -> Plan {
    plan_of(view, Sought::of(view, target, kind), now)
}

/// The plan of the update `sought` says, at `now`.
pub fn plan_of(view: &ClusterView, sought: Sought, now: Timestamp) -> Plan {
    let history = view
        .cluster_version
        .as_ref()
        .map_or(&[][..], |cv| &cv.status.history[..]);
    let completed = control_plane::completed_updates(history, now);
    let control_plane = if sought.migration {
        ControlPlane::migration()
    } else if sought.remaining && history.first().is_some_and(|h| h.state == "Completed") {
        ControlPlane::done()
    } else if sought.pre_release {
        control_plane::estimate_pre_release(&completed)
    } else {
        control_plane::estimate(&completed, sought.kind)
    };
    let mut plan = Plan::of(control_plane);
    if matches!(plan.control_plane.origin, "documented" | "none") {
        plan.unknowns
            .push(format!("control plane: {}", plan.control_plane.basis));
    }
    let have_pods = view.has(&kinds::POD);
    if !have_pods {
        plan.unknowns.push(format!(
            "no Pod objects in the cluster data: the plan cannot know what each drain evicts, and takes {} per drain (oc adm upgrade status' estimate)",
            words(duration::DRAIN_UNKNOWN)
        ));
    } else if !view.has(&kinds::POD_DISRUPTION_BUDGET) {
        plan.unknowns.push(
            "no PodDisruptionBudget objects in the cluster data: the plan cannot know which drains they hold".to_owned(),
        );
    }
    if !view.has(&kinds::NODE) {
        plan.unknowns.push(
            "no Node objects in the cluster data: the plan cannot know the pools' nodes".to_owned(),
        );
    }
    let single_node = view.single_node();
    let (members, inferred) = pools::members(view);
    if view.hosted() {
        plan.unknowns.push(HOSTED_GUEST.to_owned());
    } else if inferred && !members.is_empty() {
        plan.unknowns.push(
            "no MachineConfigPool data: pools told apart by the nodes' node-role labels, each with maxUnavailable 1".to_owned(),
        );
    }
    let index = drains::Index::new(view);
    let operator = pools::operator_node(view);
    let samples = nodes::samples(&view.machine_config_nodes);
    let have_mcns = view.has(&kinds::MACHINE_CONFIG_NODE);
    let mut graces: Vec<(u64, String)> = Vec::new();
    for (name, nodes) in members {
        let phases = NodePhases::of(&samples, &name, have_mcns);
        let input = PoolInput {
            view,
            name: &name,
            nodes,
            node_phases: phases,
            operator,
            index: &index,
            facts: Facts {
                have_pods,
                single_node,
                remaining: sought.remaining,
            },
        };
        let pool = pool_plan(&input, &mut plan, &mut graces);
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
    if have_pods && plan.pools.iter().any(|p| !p.batches.is_empty()) {
        plan.unknowns.push(shutdowns(graces));
    }
    let rolling = plan.pools.iter().filter(|p| p.updates);
    let others = rolling.clone().filter(|p| p.name != pools::MASTER);
    let slowest = others.clone().map(|p| p.seconds).max().unwrap_or(0);
    let slowest_p90 = others.map(|p| p.p90_seconds).max().unwrap_or(0);
    let longest = rolling.clone().map(|p| p.seconds).max().unwrap_or(0);
    let longest_p90 = rolling.map(|p| p.p90_seconds).max().unwrap_or(0);
    let cp = &plan.control_plane;
    if single_node {
        // The one node's update and reboot is the outage: in the total,
        // after the control plane, and named.
        plan.p50_seconds = cp.p50_seconds.saturating_add(longest);
        plan.p90_seconds = cp.p90_seconds.saturating_add(longest_p90);
        if let Some((pool, node)) = plan.pools.iter().filter(|p| p.updates).find_map(|p| {
            p.batches
                .first()
                .and_then(|b| b.nodes.first())
                .map(|n| (p, n))
        }) {
            plan.downtime.push(format!(
                "a single-node cluster: {} reboots with every workload on it: about {} of downtime (P90 {}), its update and reboot ({}), after its drain; counted in the total. No pod has another node to go to, and no PodDisruptionBudget is judged",
                node.name,
                words(pool.node_phases.after_drain()),
                words(pool.node_phases.after_drain_p90()),
                if pool.node_phases.update.origin == "documented" {
                    "oc adm upgrade status' estimates"
                } else {
                    "from the cluster's MachineConfigNodes"
                },
            ));
        }
    } else {
        plan.p50_seconds = cp.p50_seconds.saturating_add(slowest).max(longest);
        plan.p90_seconds = cp.p90_seconds.saturating_add(slowest_p90).max(longest_p90);
    }
    plan
}

/// What the plan of a hosted cluster, read alone, says of its pools.
pub const HOSTED_GUEST: &str = "a hosted cluster: its control plane runs on the management cluster and its NodePools roll its nodes, by their upgradeType; pools here are its NodePools, told apart by the nodes' hypershift.openshift.io/nodePool label, each with maxUnavailable 1 (check --hosted-cluster plans them by their own settings)";

/// What every pool's plan is computed with.
#[derive(Clone, Copy)]
struct Facts {
    have_pods: bool,
    single_node: bool,
    remaining: bool,
}

/// The line that says how drains are timed, naming the pods whose grace
/// periods make the P90.
fn shutdowns(mut graces: Vec<(u64, String)>) -> String {
    graces.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    graces.dedup();
    let mut line = format!(
        "a pod's shutdown: each drain evicts its pods at once (as oc adm drain and the machine-config daemon do), each pod taken to shut down in {} or its grace period when shorter (an assumption: the P50), and in its whole grace period at the P90",
        words(duration::TYPICAL_SHUTDOWN)
    );
    if !graces.is_empty() {
        let named: Vec<String> = graces.iter().take(3).map(|(_, pod)| pod.clone()).collect();
        line.push_str(&format!(
            "; the grace periods that make the P90: {}",
            crate::model::text::list(&named, 3)
        ));
    }
    line
}

/// Whether the machine-config operator is updating the node now (it has
/// cordoned it, or its daemon is working on it or failed).
fn updating(node: &Node) -> bool {
    node.drained_by_mco() || matches!(node.mco_state(), Some("Working" | "Degraded"))
}

/// What one pool's plan is made from.
struct PoolInput<'i, 'v> {
    view: &'v ClusterView,
    /// The pool's name.
    name: &'i str,
    nodes: Vec<&'v Node>,
    node_phases: NodePhases,
    /// The node the machine-config-operator's pod runs on, when known.
    operator: Option<&'i str>,
    index: &'i drains::Index<'v>,
    facts: Facts,
}

/// One pool's plan, in the steps the MCO takes: the pool as it stands,
/// then (unless it is paused, its maxUnavailable is invalid or nothing is
/// left to do) how many nodes it updates at once, its batches in the
/// MCO's order, each timed, and the rolling window over them. What the
/// plan says of the pool goes into `plan`; the grace periods that make a
/// drain's P90, into `graces`.
fn pool_plan(
    input: &PoolInput<'_, '_>,
    plan: &mut Plan,
    graces: &mut Vec<(u64, String)>,
) -> PoolPlan {
    let name = input.name;
    let object = input
        .view
        .machine_config_pools
        .iter()
        .find(|p| p.metadata.name == name);
    let given = object.and_then(|p| p.spec.max_unavailable.as_ref());
    let (mut pool, work) = pool_state(input, object, given);
    if !pool.updates {
        plan.warnings.push(paused(name, input.nodes.len()));
        return pool;
    }
    let max = match pools::max_unavailable(given, input.nodes.len()) {
        Ok(max) => max,
        Err(why) => {
            plan.warnings.push(format!(
                "pool {name}: {why}; the machine-config operator will not roll the pool until it is fixed"
            ));
            return pool;
        }
    };
    if work.is_empty() {
        return pool;
    }
    pool.batch_size = batch_size(input, &work, max, plan);
    let batches = in_order(input, work, pool.batch_size, plan);
    let times = time_batches(input, &mut pool, batches, plan, graces);
    roll(&mut pool, &times);
    pool
}

/// The pool as it stands, and the nodes left to update: all of them,
/// unless only what is left of the update under way is planned (nodes on
/// the pool's target configuration, state Done, are done).
fn pool_state<'v>(
    input: &PoolInput<'_, 'v>,
    object: Option<&MachineConfigPool>,
    given: Option<&IntOrString>,
) -> (PoolPlan, Vec<&'v Node>) {
    let nodes = &input.nodes;
    let paused = object.is_some_and(|p| p.spec.paused);
    let reported = object.map_or(0, |p| p.status.unavailable_machine_count.max(0));
    let unavailable = nodes
        .iter()
        .filter(|n| pools::unavailable(n))
        .count()
        .max(usize::try_from(reported).unwrap_or(0));
    let target = object.and_then(|p| p.target_config());
    let (done, work): (Vec<&Node>, Vec<&Node>) = nodes.iter().partition(|n| {
        input.facts.remaining
            && target.is_some()
            && n.current_config() == target
            && n.mco_state() == Some("Done")
    });
    let pool = PoolPlan {
        name: input.name.to_owned(),
        nodes: nodes.len(),
        updates: !paused,
        max_unavailable: pools::said(given),
        unavailable,
        done: done.len(),
        batch_size: 0,
        node_phases: input.node_phases.clone(),
        batches: Vec::new(),
        seconds: 0,
        p90_seconds: 0,
        blocked: false,
    };
    (pool, work)
}

/// The warning of a paused pool of `nodes` nodes.
fn paused(name: &str, nodes: usize) -> String {
    if name == pools::MASTER {
        format!(
            "pool {name} is paused: it takes no update until it is unpaused, and the update cannot complete without it (the machine-config operator waits for the master pool)"
        )
    } else {
        format!(
            "pool {name} is paused: its {nodes} nodes keep the current release until it is unpaused; the ClusterVersion can report the update Completed without them, but their update is still to come, and while paused it also holds back the kube-apiserver-to-kubelet signer CA certificate the MCO would roll out"
        )
    }
}

/// How many nodes the MCO updates at once: maxUnavailable (`max`) less
/// what holds a slot of it through the whole rollout: nodes down or
/// cordoned for another reason than the update, and nodes whose drain is
/// failing now. Nodes the MCO is updating return, and the MCO starts the
/// next as each one does.
fn batch_size(input: &PoolInput<'_, '_>, work: &[&Node], max: usize, plan: &mut Plan) -> usize {
    let name = input.name;
    let failing = work.iter().filter(|n| n.drain_failure().is_some()).count();
    let by_hand = input
        .nodes
        .iter()
        .filter(|n| pools::unavailable(n) && !updating(n))
        .count();
    let held = by_hand + failing;
    match max.checked_sub(held).filter(|c| *c > 0) {
        Some(capacity) => capacity,
        None => {
            plan.warnings.push(format!(
                "pool {name}: {held} of its nodes are unavailable (down or cordoned by hand, or failing to drain) and maxUnavailable allows {max}: it updates no other node until they return, which the plan cannot know; {max} at a time are planned from then"
            ));
            max
        }
    }
}

/// The nodes left to update (`work`) in batches of `batch_size`, in the
/// MCO's order: the nodes it has started on first, those failing to drain
/// before them (with the first batch), and the machine-config-operator's
/// node last, on its own, in the master pool.
fn in_order<'v>(
    input: &PoolInput<'_, 'v>,
    work: Vec<&'v Node>,
    batch_size: usize,
    plan: &mut Plan,
) -> Vec<Vec<&'v Node>> {
    let (name, nodes, operator) = (input.name, &input.nodes, input.operator);
    let deferred = (name == pools::MASTER && nodes.len() > 1)
        .then_some(operator)
        .flatten()
        .filter(|op| work.iter().any(|n| n.name() == *op));
    if name == pools::MASTER
        && nodes.len() > 1
        && operator.is_none_or(|op| !nodes.iter().any(|n| n.name() == op))
    {
        plan.unknowns.push(
            "the machine-config-operator pod's node is not in the data: the plan cannot know which master the MCO updates last".to_owned(),
        );
    }
    let mut ordered = pools::order(work, deferred);
    ordered.sort_by_key(|n| {
        if Some(n.name()) == deferred {
            3
        } else if n.drain_failure().is_some() {
            0
        } else if updating(n) && pools::unavailable(n) {
            1
        } else {
            2
        }
    });
    let (stuck, rest): (Vec<&Node>, Vec<&Node>) =
        ordered.iter().partition(|n| n.drain_failure().is_some());
    let (rest, last): (Vec<&Node>, Vec<&Node>) =
        rest.iter().partition(|n| Some(n.name()) != deferred);
    let mut batches: Vec<Vec<&Node>> = rest
        .chunks(batch_size.max(1))
        .map(<[&Node]>::to_vec)
        .collect();
    if !stuck.is_empty() {
        match batches.first_mut() {
            Some(first) => first.splice(0..0, stuck.iter().copied()).for_each(drop),
            None => batches.push(stuck.clone()),
        }
    }
    if !last.is_empty() {
        batches.push(last);
    }
    batches
}

/// Each node's time (P50, P90) as the batches give it: those that drain,
/// and those whose drain is failing now.
#[derive(Default)]
struct Times {
    order: Vec<(u64, u64)>,
    stuck: Vec<(u64, u64)>,
}

/// Times each batch into `pool`: its nodes' steps, the PDBs that hold
/// it, and the nodes whose drain is failing.
fn time_batches<'v>(
    input: &PoolInput<'_, 'v>,
    pool: &mut PoolPlan,
    batches: Vec<Vec<&'v Node>>,
    plan: &mut Plan,
    graces: &mut Vec<(u64, String)>,
) -> Times {
    let (name, index) = (input.name, input.index);
    let Facts {
        have_pods,
        single_node,
        ..
    } = input.facts;
    // The room on the pool's nodes, once; each batch leaves its own out.
    let room = drains::Room::new(index, &input.nodes);
    let after_drain = (
        pool.node_phases.after_drain(),
        pool.node_phases.after_drain_p90(),
    );
    let mut times = Times::default();
    for (i, batch) in batches.into_iter().enumerate() {
        let holds = if have_pods && !single_node {
            index.holds(&batch, &room)
        } else {
            Vec::new()
        };
        let steps: Vec<NodeStep> = batch
            .iter()
            .map(|node| node_step(input, node, &holds, after_drain, graces))
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
        let mut failing = Vec::new();
        for (node, step) in batch.iter().zip(&steps) {
            match node.drain_failure() {
                Some(message) => {
                    plan.warnings.push(format!(
                        "{name} batch {number} holds: the drain of {} is failing now; its machine-config daemon reports \"{}\"; the batch waits until it drains, for a time the plan cannot know",
                        node.name(),
                        crate::model::text::clean(message, 300)
                    ));
                    failing.push(node.name().to_owned());
                    times.stuck.push((step.seconds, step.p90_seconds));
                }
                None => times.order.push((step.seconds, step.p90_seconds)),
            }
        }
        let seconds = steps.iter().map(|s| s.seconds).max().unwrap_or(0);
        let p90_seconds = steps.iter().map(|s| s.p90_seconds).max().unwrap_or(0);
        pool.batches.push(Batch {
            number,
            evictions: have_pods.then(|| steps.iter().filter_map(|s| s.evictions).sum()),
            nodes: steps,
            holds,
            failing,
            seconds,
            p90_seconds,
        });
    }
    times
}

/// One node's step: its drain (its pods' shutdowns at once, plus the
/// waits of the PDBs that hold its batch), then its update and reboot
/// (`after_drain`, P50 and P90).
fn node_step(
    input: &PoolInput<'_, '_>,
    node: &Node,
    holds: &[drains::Hold],
    after_drain: (u64, u64),
    graces: &mut Vec<(u64, String)>,
) -> NodeStep {
    let have_pods = input.facts.have_pods;
    let evicted = input.index.evictions(node.name());
    let (drain, drain_p90, longest) = if have_pods {
        let typical = evicted
            .iter()
            .map(|p| duration::shutdown(duration::grace(p.termination_grace_period_seconds)))
            .max()
            .unwrap_or(0);
        let worst = evicted
            .iter()
            .map(|p| (duration::grace(p.termination_grace_period_seconds), p))
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.name.cmp(&a.1.name)));
        let longest = worst
            .filter(|(g, _)| *g > duration::TYPICAL_SHUTDOWN)
            .map(|(g, p)| {
                graces.push((
                    g,
                    format!("{} ({})", qualified(&p.namespace, &p.name), words(g)),
                ));
                format!("{} ({})", qualified(&p.namespace, &p.name), words(g))
            });
        let wait = holds
            .iter()
            .filter(|h| h.nodes.iter().any(|n| n == node.name()))
            .filter_map(|h| h.wait_seconds)
            .max()
            .unwrap_or(0);
        (
            typical.saturating_add(wait),
            worst.map_or(0, |(g, _)| g).saturating_add(wait),
            longest,
        )
    } else {
        (duration::DRAIN_UNKNOWN, duration::DRAIN_UNKNOWN, None)
    };
    NodeStep {
        name: node.name().to_owned(),
        evictions: have_pods.then_some(evicted.len()),
        drain_seconds: drain,
        drain_p90_seconds: drain_p90,
        longest_grace: longest,
        seconds: duration::node(drain, after_drain.0),
        p90_seconds: duration::node(drain_p90, after_drain.1),
    }
}

/// The rolling window: each node starts as soon as a slot returns; a
/// node failing to drain keeps its own slot (outside the batch size)
/// and ends no sooner than its own time. The P90: the rollout with
/// one node at its worst case (its pods' whole grace periods, the
/// phases' P90), the largest such spread; nodes' worst cases are
/// independent, and all of them at once is no P90 of the whole.
fn roll(pool: &mut PoolPlan, times: &Times) {
    let stuck_p50 = times.stuck.iter().map(|t| t.0).max().unwrap_or(0);
    let spread = times
        .order
        .iter()
        .chain(&times.stuck)
        .map(|(p50, p90)| p90.saturating_sub(*p50))
        .max()
        .unwrap_or(0);
    pool.seconds =
        duration::rollout(times.order.iter().map(|t| t.0), pool.batch_size).max(stuck_p50);
    pool.p90_seconds = pool.seconds.saturating_add(spread);
}

#[cfg(test)]
mod tests;
