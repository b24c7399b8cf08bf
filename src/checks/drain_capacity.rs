//! DrainCapacity: for each MachineConfigPool, the pods of its busiest node
//! can be rescheduled on the pool's other Ready, schedulable nodes. Only
//! requests count; DaemonSet and static (mirror) pods stay where they are,
//! and terminating pods (a rollout under way) are gone before the drain.
//!
//! Without MachineConfigPool data, nodes are grouped by their node-role
//! labels as OpenShift's default pools select them (`master`, and
//! `control-plane` since 4.12, in the master pool; every other node in the
//! worker pool), and the message says so: masters and workers never drain
//! onto each other, so one pool of all nodes would find room that is not
//! there. Custom pools cannot be told apart then and count as workers.
//!
//! A hosted cluster (HyperShift) has no MachineConfigPools and no
//! control-plane nodes: its nodes are grouped by their NodePool.

use std::collections::{BTreeMap, HashMap};

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::view::k8s::Node;
use crate::view::kinds;
use crate::view::quantity::Resources;

pub struct DrainCapacity;

const URL: &str = "https://docs.openshift.com/container-platform/latest/nodes/clusters/nodes-cluster-resource-configure.html";

/// What a node holds.
#[derive(Default, Clone, Copy)]
struct Load {
    /// Requests of every pod on it.
    used: Resources,
    /// Requests of the pods a drain moves elsewhere.
    moving: Resources,
}

const SINGLE_NODE_URL: &str = "https://docs.openshift.com/container-platform/latest/installing/installing_sno/install-sno-preparing-to-install-sno.html";

impl Check for DrainCapacity {
    fn name(&self) -> &'static str {
        "DrainCapacity"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let view = ctx.view;
        // Nothing to drain onto, and nothing keeps serving: an outage the
        // administrator plans for, whatever the pods.
        if let Some(by) = view.single_node_by() {
            return Finding::warn(format!(
                "a single-node cluster ({}): its API and every workload are down while its one node reboots; nothing is drained onto another node. Plan the update for a maintenance window",
                by.evidence()
            ))
            .with_url(SINGLE_NODE_URL);
        }
        if let Err(skip) = require(ctx.view, &[kinds::NODE, kinds::POD]) {
            return skip;
        }
        let mut load: HashMap<&str, Load> = HashMap::with_capacity(view.nodes.len());
        for pod in &view.pods {
            if pod.node_name.is_empty() || pod.terminating {
                continue;
            }
            let l = load.entry(pod.node_name.as_str()).or_default();
            l.used = l.used + pod.requests;
            if pod.evicted_by_drain() {
                l.moving = l.moving + pod.requests;
            }
        }
        let mut pools: BTreeMap<String, Vec<&Node>> = BTreeMap::new();
        let hosted = view.hosted();
        let inferred = !hosted && view.machine_config_pools.is_empty();
        for node in &view.nodes {
            let pool = if hosted {
                Some(nodepool(node).to_owned())
            } else if inferred {
                Some(role_pool(node).to_owned())
            } else {
                view.pool_of(node)
                    .filter(|p| !p.spec.paused)
                    .map(|p| p.metadata.name.clone())
            };
            if let Some(pool) = pool {
                pools.entry(pool).or_default().push(node);
            }
        }
        let mut short = Vec::new();
        // Each pool short of room, by name, for an accept to record.
        let mut subjects = Vec::new();
        let mut single = Vec::new();
        for (pool, nodes) in &pools {
            if let [node] = &nodes[..] {
                single.push(format!("{pool} ({})", node.name()));
            } else if let Some(problem) = pool_shortfall(pool, nodes, &load) {
                short.push(problem);
                subjects.push(pool.clone());
            }
        }
        if short.is_empty() {
            let drained = pools.len() - single.len();
            let mut message = match drained {
                0 => String::new(),
                _ => format!(
                    "in each of {drained} pools the busiest node can be drained onto the others"
                ),
            };
            if !single.is_empty() {
                if !message.is_empty() {
                    message.push_str("; ");
                }
                message.push_str(&format!(
                    "{} of a single node: its pods have no other node of the pool to go to and wait for it to reboot",
                    match &single[..] {
                        [one] => format!("pool {one} is"),
                        many => format!("pools {} are", many.join(", ")),
                    }
                ));
            }
            if message.is_empty() {
                message = "no node is drained: no pool that is not paused has a node".to_owned();
            }
            message.push_str(grouped(hosted, inferred));
            Finding::pass(message)
        } else {
            let message = list(&short, 5) + grouped(hosted, inferred);
            Finding::fail(message)
                .with_items(&short, 5)
                .with_subjects(subjects)
                .with_url(URL)
        }
    }
}

/// What a finding says when the pools were told apart by node roles.
const INFERRED: &str = " (no MachineConfigPool data: pools told apart by the nodes' node-role labels, as the default master and worker pools select them)";

/// What a finding says when the pools were told apart by NodePool.
const BY_NODEPOOL: &str = " (a hosted cluster: pools are its NodePools, told apart by the nodes' hypershift.openshift.io/nodePool label)";

/// What a finding adds of how the pools were told apart.
fn grouped(hosted: bool, inferred: bool) -> &'static str {
    match (hosted, inferred) {
        (true, _) => BY_NODEPOOL,
        (false, true) => INFERRED,
        (false, false) => "",
    }
}

/// The NodePool of a hosted cluster's `node`; a node without the label
/// counts as a worker.
fn nodepool(node: &Node) -> &str {
    crate::view::ClusterView::nodepool_of(node).unwrap_or("worker")
}

/// The default pool that selects `node`, by its node-role labels: the
/// master pool wins over the worker pool, as the MCO has it for a node
/// with both (a compact cluster's).
fn role_pool(node: &Node) -> &'static str {
    let labels = &node.metadata.labels;
    let has = |role: &str| labels.contains_key(&format!("node-role.kubernetes.io/{role}"));
    if has("master") || has("control-plane") {
        "master"
    } else {
        "worker"
    }
}

/// Whether the node with the most to move, per resource, fits on the
/// free capacity of the rest of its pool.
fn pool_shortfall(pool: &str, nodes: &[&Node], load: &HashMap<&str, Load>) -> Option<String> {
    let load_of = |n: &Node| load.get(n.name()).copied().unwrap_or_default();
    let usable = |n: &Node| n.ready() && !n.spec.unschedulable;
    let free = |n: &Node| n.status.allocatable.saturating_sub(load_of(n).used);
    type Pick = fn(Resources) -> u64;
    let resources: [(&str, Pick); 2] = [("CPU", |r| r.cpu_millis), ("memory", |r| r.memory_bytes)];
    for (resource, pick) in resources {
        let busiest = nodes
            .iter()
            .max_by_key(|n| (pick(load_of(n).moving), n.name()))?;
        let need = pick(load_of(busiest).moving);
        if need == 0 {
            continue;
        }
        let room: u64 = nodes
            .iter()
            .filter(|n| n.name() != busiest.name() && usable(n))
            .map(|n| pick(free(n)))
            .fold(0, u64::saturating_add);
        if room < need {
            let (need, room) = match resource {
                "CPU" => (format!("{need}m"), format!("{room}m")),
                _ => (gib(need), gib(room)),
            };
            return Some(format!(
                "pool {pool}: draining {} needs {need} {resource} requested elsewhere, the other {} nodes have {room} free",
                busiest.name(),
                nodes.len() - 1
            ));
        }
    }
    None
}

fn gib(bytes: u64) -> String {
    format!("{:.1}Gi", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn node(name: &str, cpu: &str, ready: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
               "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"},
                          "conditions": [{"type": "Ready", "status": ready}]}})
    }

    fn pod(name: &str, node: &str, cpu: &str, owner: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "x",
                                            "ownerReferences": [{"kind": owner, "controller": true}]},
               "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}})
    }

    fn pool() -> Value {
        json!({"kind": "MachineConfigPool", "metadata": {"name": "worker"},
               "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}})
    }

    #[rstest]
    #[case::fits(vec![node("a", "4", "True"), node("b", "4", "True"), pod("p", "a", "3", "ReplicaSet")], Outcome::Pass, "busiest node can be drained")]
    #[case::does_not_fit(vec![node("a", "4", "True"), node("b", "2", "True"), pod("p", "a", "3", "ReplicaSet")], Outcome::Fail, "pool worker: draining a needs 3000m CPU requested elsewhere, the other 1 nodes have 2000m free")]
    #[case::daemonsets_stay(vec![node("a", "4", "True"), node("b", "2", "True"), pod("p", "a", "3", "DaemonSet")], Outcome::Pass, "drained")]
    #[case::not_ready_nodes_do_not_count(vec![node("a", "4", "True"), node("b", "8", "False"), pod("p", "a", "3", "ReplicaSet")], Outcome::Fail, "0m free")]
    #[case::a_pool_of_one_node(vec![node("a", "4", "True"), pod("p", "a", "3", "ReplicaSet")], Outcome::Pass, "pool worker (a) is of a single node")]
    #[case::other_pods_use_room(vec![node("a", "4", "True"), node("b", "4", "True"), pod("p", "a", "3", "ReplicaSet"), pod("q", "b", "2", "DaemonSet")], Outcome::Fail, "2000m free")]
    fn capacity(#[case] objects: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut all = vec![pool()];
        all.extend(objects);
        let finding = fixture::evaluate(&DrainCapacity, &fixture::view(all), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    fn labelled(name: &str, roles: &[&str]) -> Value {
        let mut n = node(name, "4", "True");
        n["metadata"]["labels"] = roles
            .iter()
            .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
            .collect();
        n
    }

    fn terminating(mut pod: Value) -> Value {
        pod["metadata"]["deletionTimestamp"] = json!("2026-11-30T11:58:00Z");
        pod
    }

    /// No MachineConfigPool data: masters and workers are told apart by
    /// their roles, never lumped into one pool whose room is not there.
    #[rstest]
    #[case::masters_never_take_a_workers_pods(vec![
        labelled("m0", &["master"]), labelled("m1", &["master"]), labelled("w0", &["worker"]), labelled("w1", &["worker"]),
        pod("p", "w0", "3", "ReplicaSet"), pod("q", "w1", "3", "ReplicaSet")],
        Outcome::Fail, "needs 3000m CPU requested elsewhere, the other 1 nodes have 1000m free (no MachineConfigPool data: pools told apart")]
    #[case::control_plane_label(vec![
        labelled("m0", &["control-plane"]), labelled("w0", &["worker"]), labelled("w1", &["worker"]),
        pod("p", "w0", "3", "ReplicaSet")],
        Outcome::Pass, "pool master (m0) is of a single node")]
    #[case::a_compact_cluster(vec![
        labelled("m0", &["master", "worker"]), labelled("m1", &["master", "worker"]), labelled("m2", &["master", "worker"]),
        pod("p", "m0", "3", "ReplicaSet")],
        Outcome::Pass, "in each of 1 pools the busiest node can be drained onto the others (no MachineConfigPool data")]
    fn without_pools_the_roles_tell_them_apart(
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let finding = fixture::evaluate(&DrainCapacity, &fixture::view(objects), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::a_terminating_pod_is_gone_before_the_drain(vec![terminating(pod("p", "a", "3", "ReplicaSet"))], Outcome::Pass)]
    #[case::its_replacement_counts(vec![terminating(pod("p", "a", "3", "ReplicaSet")), pod("p2", "a", "3", "ReplicaSet")], Outcome::Fail)]
    fn terminating_pods_are_left_out(#[case] pods: Vec<Value>, #[case] outcome: Outcome) {
        let mut all = vec![pool(), node("a", "4", "True"), node("b", "2", "True")];
        all.extend(pods);
        let finding = fixture::evaluate(&DrainCapacity, &fixture::view(all), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
    }

    /// The node of the single-node must-gather (4.13): master and worker.
    fn sno_node() -> Value {
        let mut node: Value = serde_saphyr::from_str(include_str!(
            "../../tests/data/must-gathers/single-node-4.13/must-gather.local.3391850027364410582/quay-io-openshift-release-dev-ocp-v4-0-art-dev-sha256-5b3fa9c1d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4/cluster-scoped-resources/core/nodes/sno-0.yaml"
        ))
        .unwrap();
        node["kind"] = json!("Node");
        node
    }

    fn etcd_operator(members: &str) -> Value {
        json!({"kind": "ClusterOperator", "metadata": {"name": "etcd"},
               "status": {"conditions": [fixture::condition("Available", "True",
                   &format!("StaticPodsAvailable: {members} nodes are active\nEtcdMembersAvailable: {members} members are available"))]}})
    }

    fn etcd_pod(node: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": format!("etcd-{node}"), "namespace": "openshift-etcd",
               "labels": {"app": "etcd", "etcd": "true"}},
               "spec": {"nodeName": node}})
    }

    /// Without the Infrastructure object (a partial capture), the nodes say
    /// it: one node, both roles, one etcd member where the data counts them.
    #[rstest]
    #[case::the_node_alone(vec![], true)]
    #[case::one_etcd_member(vec![etcd_operator("1")], true)]
    #[case::one_etcd_pod(vec![etcd_pod("sno-0")], true)]
    #[case::three_etcd_members(vec![etcd_operator("3")], false)]
    #[case::etcd_pods_elsewhere(vec![etcd_pod("sno-0"), etcd_pod("m-1"), etcd_pod("m-2")], false)]
    fn a_single_node_cluster_is_recognised_from_its_nodes(
        #[case] more: Vec<Value>,
        #[case] single: bool,
    ) {
        let mut objects = vec![sno_node()];
        objects.extend(more);
        let view = fixture::view(objects);
        assert_eq!(view.single_node(), single);
        let finding = fixture::evaluate(&DrainCapacity, &view, "4.13.12");
        assert_eq!(
            finding.message.starts_with(
                "a single-node cluster (no Infrastructure object; its one node is both control plane and worker): its API and every workload are down while its one node reboots"
            ),
            single,
            "{}",
            finding.message
        );
    }

    #[rstest]
    #[case::a_worker_only(&["worker"])]
    #[case::a_master_only(&["master"])]
    fn one_node_without_both_roles_is_not_a_single_node_cluster(#[case] roles: &[&str]) {
        let mut node = sno_node();
        node["metadata"]["labels"] = roles
            .iter()
            .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
            .collect();
        assert!(!fixture::view(vec![node]).single_node());
    }

    #[test]
    fn the_infrastructure_object_decides_where_there_is_one() {
        let infrastructure = json!({"kind": "Infrastructure", "metadata": {"name": "cluster"},
            "status": {"controlPlaneTopology": "HighlyAvailable", "infrastructureTopology": "HighlyAvailable"}});
        assert!(!fixture::view(vec![infrastructure, sno_node()]).single_node());
    }

    #[test]
    fn the_plan_says_the_outage_of_a_single_node_found_by_its_nodes() {
        let view = fixture::view(vec![sno_node(), etcd_operator("1")]);
        let now = fixture::NOW.parse().unwrap();
        let plan = crate::plan::plan(&view, Some(crate::model::UpdateKind::Patch), now);
        assert!(
            plan.downtime
                .iter()
                .any(|w| w.starts_with("a single-node cluster: ") && w.contains(" of downtime")),
            "{:?}",
            plan.downtime
        );
    }

    #[test]
    fn a_single_node_cluster_warns_of_its_outage() {
        let infrastructure = json!({"kind": "Infrastructure", "metadata": {"name": "cluster"},
            "status": {"controlPlaneTopology": "SingleReplica", "infrastructureTopology": "SingleReplica"}});
        let view = fixture::view(vec![
            infrastructure,
            node("sno", "4", "True"),
            pod("p", "sno", "3", "ReplicaSet"),
        ]);
        let finding = fixture::evaluate(&DrainCapacity, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            finding.message
        );
        assert!(
            finding
                .message
                .contains("its API and every workload are down while its one node reboots"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn a_hosted_cluster_drains_within_its_nodepools_and_says_so() {
        let view = fixture::view(vec![
            fixture::hosted_infrastructure(),
            fixture::hosted_worker("a-0", "a"),
            fixture::hosted_worker("a-1", "a"),
            fixture::hosted_worker("b-0", "b"),
            pod("p", "a-0", "3", "ReplicaSet"),
        ]);
        let finding = fixture::evaluate(&DrainCapacity, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(
            finding.message.contains("pool b (b-0) is of a single node")
                && finding
                    .message
                    .ends_with("told apart by the nodes' hypershift.openshift.io/nodePool label)"),
            "{}",
            finding.message
        );
        assert!(!finding.message.contains("master"), "{}", finding.message);
    }
}
