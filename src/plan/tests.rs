//! The plan as a whole, over small clusters: batches, order, holds and
//! durations.

use rstest::rstest;
use serde_json::{Value, json};

use super::duration::{DEFAULT_GRACE, DRAIN_UNKNOWN, NODE_REBOOT, NODE_UPDATE, REPLACEMENT_READY};
use super::*;

const NOW: &str = "2026-11-30T12:00:00Z";

fn view(objects: Vec<Value>) -> ClusterView {
    let mut view = ClusterView::default();
    for o in objects {
        let kind = o["kind"].as_str().unwrap().to_owned();
        view.add(&kind, o).unwrap();
    }
    view
}

fn plan_of(objects: Vec<Value>) -> Plan {
    plan(
        &view(objects),
        Some(UpdateKind::Patch),
        NOW.parse().unwrap(),
    )
}

fn node(name: &str, role: &str, zone: &str, created: &str, ready: bool) -> Value {
    json!({"kind": "Node", "metadata": {"name": name, "creationTimestamp": created,
            "labels": {format!("node-role.kubernetes.io/{role}"): "", "topology.kubernetes.io/zone": zone}},
           "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                      "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

fn pool(name: &str, max_unavailable: Value, paused: bool) -> Value {
    json!({"kind": "MachineConfigPool", "metadata": {"name": name},
           "spec": {"paused": paused, "maxUnavailable": max_unavailable,
                    "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}}})
}

fn pod(name: &str, node: &str, labels: Value, grace: Option<i64>) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": labels,
            "ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
           "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                    "containers": [{"resources": {"requests": {"cpu": "100m"}}}]}})
}

fn batches(plan: &Plan, pool: &str) -> Vec<Vec<String>> {
    plan.pools
        .iter()
        .find(|p| p.name == pool)
        .unwrap()
        .batches
        .iter()
        .map(|b| b.nodes.iter().map(|n| n.name.clone()).collect())
        .collect()
}

fn workers(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            node(
                &format!("w{i}"),
                "worker",
                ["b", "a"][i % 2],
                &format!("2024-01-{:02}T00:00:00Z", 20 - i),
                true,
            )
        })
        .collect()
}

#[rstest]
#[case::one_at_a_time_by_zone_then_age(json!(null), 4, vec![], "w3|w1|w2|w0")]
#[case::a_count(json!(2), 4, vec![], "w3 w1|w2 w0")]
#[case::a_percentage_rounds_down(json!("60%"), 4, vec![], "w3 w1|w2 w0")]
#[case::unavailable_nodes_shrink_the_batch(json!(3), 5, vec![node("w9", "worker", "c", "2020-01-01T00:00:00Z", false)],
    "w3 w1|w4 w2|w0 w9")]
fn worker_batches(
    #[case] max_unavailable: Value,
    #[case] count: usize,
    #[case] extra: Vec<Value>,
    #[case] expected: &str,
) {
    let mut objects = vec![
        pool("worker", max_unavailable, false),
        json!({"kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
    ];
    objects.extend(workers(count));
    objects.extend(extra);
    let plan = plan_of(objects);
    let said: Vec<String> = batches(&plan, "worker")
        .iter()
        .map(|b| b.join(" "))
        .collect();
    assert_eq!(said.join("|"), expected, "{plan:#?}");
}

#[test]
fn the_mco_node_goes_last_in_the_master_pool() {
    let plan = plan_of(vec![
        pool("master", json!(null), false),
        node("m0", "master", "a", "2024-01-01T00:00:00Z", true),
        node("m1", "master", "b", "2024-01-01T00:00:00Z", true),
        node("m2", "master", "c", "2024-01-01T00:00:00Z", true),
        json!({"kind": "Pod", "metadata": {"name": "machine-config-operator-1", "namespace": "openshift-machine-config-operator",
               "labels": {"k8s-app": "machine-config-operator"}}, "spec": {"nodeName": "m0"}}),
    ]);
    assert_eq!(batches(&plan, "master"), [["m1"], ["m2"], ["m0"]]);
    assert!(
        plan.unknowns
            .iter()
            .all(|u| !u.contains("machine-config-operator")),
        "{:?}",
        plan.unknowns
    );
}

#[test]
fn a_paused_pool_does_not_update_and_says_what_it_means() {
    let mut objects = vec![pool("worker", json!(1), true)];
    objects.extend(workers(2));
    let plan = plan_of(objects);
    let worker = &plan.pools[0];
    assert!(!worker.updates && worker.batches.is_empty());
    assert!(
        plan.warnings[0].starts_with("pool worker is paused: its 2 nodes keep the current release"),
        "{:?}",
        plan.warnings
    );
    // Nothing but the control plane.
    assert_eq!(plan.p50_seconds, plan.control_plane.p50_seconds);
}

#[test]
fn garbage_max_unavailable_is_said_not_guessed() {
    let mut objects = vec![pool("worker", json!("half"), false)];
    objects.extend(workers(2));
    let plan = plan_of(objects);
    assert!(plan.pools[0].batches.is_empty());
    assert!(
        plan.warnings[0].contains("maxUnavailable \"half\" is neither a count nor a percentage"),
        "{:?}",
        plan.warnings
    );
}

/// Two workers, one PDB over the pods on w1 (drained first: zone a).
fn drained(pdb_status: Value, pods: Vec<Value>) -> Plan {
    let mut objects = vec![pool("worker", json!(1), false)];
    objects.extend(workers(2));
    objects.push(json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
                        "spec": {"selector": {"matchLabels": {"app": "db"}}}, "status": pdb_status}));
    objects.extend(pods);
    plan_of(objects)
}

#[test]
fn a_batch_that_can_never_drain_blocks_naming_the_pdb_and_the_node() {
    let plan = drained(
        json!({"expectedPods": 1, "currentHealthy": 1, "desiredHealthy": 1}),
        vec![pod("db-0", "w1", json!({"app": "db"}), None)],
    );
    assert_eq!(
        plan.blockers,
        [
            "worker batch 1 (w1) cannot drain: PDB shop/db needs all 1 of its pods healthy (desiredHealthy 1): every eviction is refused, and a pod is replaced only after it is evicted"
        ]
    );
    assert!(plan.pools[0].blocked);
}

#[test]
fn a_batch_that_waits_warns_with_its_wait_and_the_wait_counts() {
    let plan = drained(
        json!({"expectedPods": 3, "currentHealthy": 3, "desiredHealthy": 2}),
        vec![
            pod("db-0", "w1", json!({"app": "db"}), Some(60)),
            pod("db-1", "w1", json!({"app": "db"}), None),
        ],
    );
    assert!(plan.blockers.is_empty(), "{:?}", plan.blockers);
    assert_eq!(
        plan.waits,
        [
            "worker batch 1 (w1) waits about 2m for PDB shop/db: it allows 1 of its 2 evictions at once: 1 round of replacements becoming healthy elsewhere"
        ]
    );
    let first = &plan.pools[0].batches[0];
    assert_eq!(first.evictions, Some(2));
    // The longest grace period, plus the wait, then update and reboot.
    assert_eq!(first.nodes[0].drain_seconds, 60 + REPLACEMENT_READY);
    assert_eq!(
        first.seconds,
        60 + REPLACEMENT_READY + NODE_UPDATE + NODE_REBOOT
    );
}

#[rstest]
#[case::default_grace(vec![pod("p", "w1", json!({}), None)], DEFAULT_GRACE)]
#[case::longest_grace(vec![pod("p", "w1", json!({}), Some(90)), pod("q", "w1", json!({}), Some(10))], 90)]
#[case::nothing_to_evict(vec![], 0)]
fn a_drain_is_its_longest_grace_period(#[case] pods: Vec<Value>, #[case] drain: u64) {
    let mut objects = vec![
        pool("worker", json!(1), false),
        json!({"kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
    ];
    objects.extend(workers(2));
    objects.extend(pods);
    let plan = plan_of(objects);
    assert_eq!(plan.pools[0].batches[0].nodes[0].drain_seconds, drain);
}

#[test]
fn without_pods_each_drain_is_ocs_estimate_and_the_plan_says_so() {
    let mut objects = vec![pool("worker", json!(1), false)];
    objects.extend(workers(3));
    let plan = plan_of(objects);
    let worker = &plan.pools[0];
    assert_eq!(worker.batches[0].evictions, None);
    assert_eq!(
        worker.seconds,
        3 * (DRAIN_UNKNOWN + NODE_UPDATE + NODE_REBOOT)
    );
    assert!(
        plan.unknowns
            .iter()
            .any(|u| u.starts_with("no Pod objects")),
        "{:?}",
        plan.unknowns
    );
    // The documented control plane, then the slowest pool.
    assert_eq!(plan.p50_seconds, 3600 + worker.seconds);
    assert_eq!(plan.p90_seconds, 7200 + worker.seconds);
}

#[test]
fn an_empty_view_is_an_answer_not_a_panic() {
    let plan = plan(&ClusterView::default(), None, NOW.parse().unwrap());
    assert!(plan.pools.is_empty());
    assert_eq!(plan.control_plane.source, "documented");
    assert!(!plan.unknowns.is_empty());
}

/// A worker's MachineConfigNode back from its reboot: drained at 10:00,
/// files and OS written `update` minutes later, back `reboot` after.
fn rebooted(node: &str, update: i64, reboot: i64) -> Value {
    let at = |m: i64| format!("2026-11-30T10:{m:02}:00Z");
    json!({"kind": "MachineConfigNode", "apiVersion": "machineconfiguration.openshift.io/v1",
           "metadata": {"name": node},
           "spec": {"node": {"name": node}, "pool": {"name": "worker"}},
           "status": {"conditions": [
               {"type": "Drained", "status": "True", "lastTransitionTime": at(0)},
               {"type": "UpdateExecuted", "status": "True", "lastTransitionTime": at(update)},
               {"type": "RebootedNode", "status": "True", "lastTransitionTime": at(update + reboot)}]}})
}

#[rstest]
// Three nodes' times: the median update 3m, reboot 8m.
#[case::from_the_cluster(vec![rebooted("w0", 2, 7), rebooted("w1", 3, 8), rebooted("w2", 6, 9)],
    3 * 60, 8 * 60, "machineconfignodes", None)]
#[case::too_few(vec![rebooted("w0", 2, 7)], NODE_UPDATE, NODE_REBOOT, "documented",
    Some("a node's update and reboot: the documented 5m each (oc adm upgrade status' estimates): the MachineConfigNodes give 1 node's times, fewer than 3 (they keep them only while a node updates)"))]
#[case::none_in_the_data(vec![], NODE_UPDATE, NODE_REBOOT, "documented",
    Some("a node's update and reboot: the documented 5m each (oc adm upgrade status' estimates): no MachineConfigNode objects in the cluster data"))]
fn a_nodes_update_and_reboot_come_from_its_machine_config_nodes(
    #[case] mcns: Vec<Value>,
    #[case] update: u64,
    #[case] reboot: u64,
    #[case] source: &str,
    #[case] unknown: Option<&str>,
) {
    let mut objects = vec![
        pool("worker", json!(1), false),
        json!({"kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
    ];
    objects.extend(workers(3));
    objects.extend(mcns);
    let plan = plan_of(objects);
    let worker = &plan.pools[0];
    let phases = &worker.node_phases;
    assert_eq!(
        (
            phases.update.seconds,
            phases.reboot.seconds,
            phases.update.source
        ),
        (update, reboot, source),
        "{phases:?}"
    );
    // Nothing to evict: each node is its update and reboot.
    assert_eq!(worker.batches[0].seconds, update + reboot);
    assert_eq!(worker.seconds, 3 * (update + reboot));
    let said: Vec<&String> = plan
        .unknowns
        .iter()
        .filter(|u| u.starts_with("a node's"))
        .collect();
    assert_eq!(
        said.first().map(|s| s.as_str()),
        unknown,
        "{:?}",
        plan.unknowns
    );
    assert!(said.len() <= 1, "{said:?}");
}
