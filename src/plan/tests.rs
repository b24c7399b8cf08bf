//! The plan as a whole, over small clusters: batches, order, holds and
//! durations.

use rstest::rstest;
use serde_json::{Value, json};

use super::duration::{
    DEFAULT_GRACE, DRAIN_UNKNOWN, NODE_REBOOT, NODE_UPDATE, REPLACEMENT_READY, TYPICAL_SHUTDOWN,
};
use super::*;

const NOW: &str = "2026-11-30T12:00:00Z";

fn view(objects: Vec<Value>) -> ClusterView {
    let mut view = ClusterView::default();
    for o in objects {
        let kind = crate::view::kinds::named(o["kind"].as_str().unwrap()).unwrap();
        view.add(kind, o).unwrap();
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

fn plan_of_sought(objects: Vec<Value>, sought: Sought) -> Plan {
    plan_of_view(&view(objects), sought)
}

fn plan_of_view(view: &ClusterView, sought: Sought) -> Plan {
    super::plan_of(view, sought, NOW.parse().unwrap())
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
#[case::default_grace(vec![pod("p", "w1", json!({}), None)], DEFAULT_GRACE, DEFAULT_GRACE, None)]
// Pods shut down at once: the drain is the slowest's shutdown, its grace
// period bounding it; the worst case the longest grace period.
#[case::a_grace_period_is_a_ceiling(vec![pod("p", "w1", json!({}), Some(90)), pod("q", "w1", json!({}), Some(10))],
    TYPICAL_SHUTDOWN, 90, Some("shop/p (1m)"))]
#[case::the_router(vec![pod("router-default-1", "w1", json!({}), Some(3600)), pod("q", "w1", json!({}), None)],
    TYPICAL_SHUTDOWN, 3600, Some("shop/router-default-1 (1h00m)"))]
#[case::nothing_to_evict(vec![], 0, 0, None)]
fn a_drain_is_its_pods_shutting_down_at_once(
    #[case] pods: Vec<Value>,
    #[case] drain: u64,
    #[case] worst: u64,
    #[case] longest: Option<&str>,
) {
    let mut objects = vec![
        pool("worker", json!(1), false),
        json!({"kind": "Pod", "metadata": {"name": "x", "namespace": "y"}}),
    ];
    objects.extend(workers(2));
    objects.extend(pods);
    let plan = plan_of(objects);
    let step = &plan.pools[0].batches[0].nodes[0];
    assert_eq!(
        (
            step.drain_seconds,
            step.drain_p90_seconds,
            step.longest_grace.as_deref()
        ),
        (drain, worst, longest),
        "{step:?}"
    );
    assert_eq!(step.p90_seconds, worst + NODE_UPDATE + NODE_REBOOT);
    let said = plan
        .unknowns
        .iter()
        .find(|u| u.starts_with("a pod's shutdown"))
        .unwrap();
    match longest {
        Some(pod) => assert!(
            said.ends_with(&format!("the grace periods that make the P90: {pod}")),
            "{said}"
        ),
        None => assert!(!said.contains("make the P90"), "{said}"),
    }
}

/// Three workers, each with a router whose grace period is an hour: a
/// worker is about its update and reboot, not an hour and ten minutes;
/// the P90 keeps the hour.
#[test]
fn a_routers_hour_of_grace_is_the_p90_not_the_plan() {
    let mut objects = vec![pool("worker", json!(1), false)];
    objects.extend(workers(3));
    for i in 0..3 {
        objects.push(pod(
            &format!("router-{i}"),
            &format!("w{i}"),
            json!({}),
            Some(3600),
        ));
    }
    let plan = plan_of(objects);
    let worker = &plan.pools[0];
    let node = TYPICAL_SHUTDOWN + NODE_UPDATE + NODE_REBOOT;
    assert_eq!(worker.seconds, 3 * node);
    // One router at its whole hour of grace.
    assert_eq!(worker.p90_seconds, 3 * node + 3600 - TYPICAL_SHUTDOWN);
    // The documented control plane, then the worker pool.
    assert_eq!(plan.p50_seconds, 3600 + 3 * node);
    // What an engineer gives a 3-worker cluster: 1h15m to 1h45m.
    assert!(
        (75 * 60..=105 * 60).contains(&plan.p50_seconds),
        "{}",
        plan.p50_seconds
    );
}

/// A worker of the pool `rendered-worker-2` targets, with the daemon's
/// annotations.
fn annotated(name: &str, current: &str, state: &str, reason: &str) -> Value {
    let mut n = node(name, "worker", "a", "2024-01-01T00:00:00Z", true);
    n["metadata"]["annotations"] = json!({
        "machineconfiguration.openshift.io/currentConfig": current,
        "machineconfiguration.openshift.io/state": state,
        "machineconfiguration.openshift.io/reason": reason});
    n
}

fn targeting(max_unavailable: Value) -> Value {
    let mut p = pool("worker", max_unavailable, false);
    p["spec"]["configuration"] = json!({"name": "rendered-worker-2"});
    p
}

#[test]
fn nodes_already_on_the_target_are_not_planned_again_for_the_update_under_way() {
    let objects = vec![
        targeting(json!(1)),
        annotated("w0", "rendered-worker-2", "Done", ""),
        annotated("w1", "rendered-worker-2", "Done", ""),
        annotated("w2", "rendered-worker-1", "Done", ""),
        // On the target, still working: not done.
        annotated("w3", "rendered-worker-2", "Working", ""),
    ];
    let under_way = plan_of_sought(
        objects.clone(),
        Sought {
            remaining: true,
            ..Sought::default()
        },
    );
    let worker = &under_way.pools[0];
    assert_eq!(worker.done, 2);
    let planned: Vec<String> = batches(&under_way, "worker").concat();
    assert_eq!(planned.len(), 2, "{planned:?}");
    assert!(
        planned.iter().all(|n| n == "w2" || n == "w3"),
        "{planned:?}"
    );
    // Another target: every node takes its new configuration.
    let next = plan_of(objects);
    assert_eq!(
        (next.pools[0].done, batches(&next, "worker").concat().len()),
        (0, 4)
    );
}

#[test]
fn nothing_left_plans_nothing() {
    let plan = plan_of_sought(
        vec![
            targeting(json!(1)),
            annotated("w0", "rendered-worker-2", "Done", ""),
            annotated("w1", "rendered-worker-2", "Done", ""),
            json!({"kind": "ClusterVersion", "metadata": {"name": "version"},
                   "status": {"history": [
                       {"state": "Completed", "version": "4.15.3", "startedTime": "2026-11-29T10:00:00Z", "completionTime": "2026-11-29T11:00:00Z"},
                       {"state": "Completed", "version": "4.15.2", "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}]}}),
        ],
        Sought {
            remaining: true,
            ..Sought::default()
        },
    );
    assert_eq!(plan.control_plane.origin, "done");
    assert!(plan.pools[0].batches.is_empty());
    assert_eq!((plan.p50_seconds, plan.p90_seconds), (0, 0));
}

#[test]
fn a_drain_failing_now_holds_its_batch_naming_the_node_and_the_daemons_message() {
    let message = "failed to drain node: w1 after 1 hour. Please see machine-config-controller logs for more information";
    let mut stuck = annotated("w1", "rendered-worker-1", "Degraded", message);
    stuck["spec"] = json!({"unschedulable": true});
    let plan = plan_of(vec![
        targeting(json!(2)),
        annotated("w0", "rendered-worker-1", "Done", ""),
        stuck,
        annotated("w2", "rendered-worker-1", "Done", ""),
    ]);
    let worker = &plan.pools[0];
    // The failing node keeps its slot: one other node at a time.
    assert_eq!(worker.batch_size, 1);
    assert_eq!(worker.batches[0].failing, ["w1"]);
    assert_eq!(batches(&plan, "worker")[0][0], "w1");
    assert_eq!(
        plan.warnings,
        [format!(
            "worker batch 1 holds: the drain of w1 is failing now; its machine-config daemon reports \"{message}\"; the batch waits until it drains, for a time the plan cannot know"
        )]
    );
    assert!(plan.blockers.is_empty());
}

#[test]
fn a_slow_node_does_not_hold_back_the_next_batch() {
    // maxUnavailable 2: w3 and w1 start, w3 with seven replicas to wait
    // for, one round each; w2 and w0 start as each slot returns.
    let mut objects = vec![
        pool("worker", json!(2), false),
        json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
               "spec": {"selector": {"matchLabels": {"app": "db"}}},
               "status": {"expectedPods": 9, "currentHealthy": 9, "desiredHealthy": 8}}),
    ];
    objects.extend(workers(4));
    for i in 0..8 {
        objects.push(pod(
            &format!("db-{i}"),
            "w3",
            json!({"app": "db"}),
            Some(10),
        ));
    }
    let plan = plan_of(objects);
    let worker = &plan.pools[0];
    let node = NODE_UPDATE + NODE_REBOOT;
    let slow = 10 + 7 * REPLACEMENT_READY + node;
    assert_eq!(
        worker.batches.iter().map(|b| b.seconds).collect::<Vec<_>>(),
        [slow, node]
    );
    // Whole batches would take slow + node; the window refills: w1, w2
    // and w0 go one after the other beside w3.
    assert_eq!(worker.seconds, 3 * node);
    assert!(worker.seconds < slow + node, "{worker:?}");
}

#[test]
fn a_single_node_says_its_outage_and_counts_it() {
    let plan = plan_of(vec![
        pool("master", json!(null), false),
        node("sno", "master", "a", "2024-01-01T00:00:00Z", true),
        json!({"kind": "Infrastructure", "metadata": {"name": "cluster"},
               "status": {"controlPlaneTopology": "SingleReplica", "infrastructureTopology": "SingleReplica"}}),
    ]);
    let master = &plan.pools[0];
    assert!(plan.p50_seconds >= master.seconds, "{plan:?}");
    assert_eq!(plan.p50_seconds, 3600 + master.seconds);
    assert_eq!(plan.downtime.len(), 1, "{plan:?}");
    assert!(
        plan.downtime[0].starts_with("a single-node cluster: sno reboots with every workload on it: about 10m of downtime (P90 10m)"),
        "{}",
        plan.downtime[0]
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
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
    assert_eq!(plan.control_plane.origin, "documented");
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
    #[case] origin: &str,
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
            phases.update.origin
        ),
        (update, reboot, origin),
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

/// A migration to the multi-architecture payload, asked for or under way,
/// gets no control-plane estimate, as oc says N/A; a pre-release target
/// is estimated from pre-release steps.
#[test]
fn what_the_target_is_to_the_cluster() {
    use crate::model::cluster_version::{ArchitectureChange, Target};
    let cv = json!({"kind": "ClusterVersion", "metadata": {"name": "version"},
        "status": {"desired": {"version": "4.15.3", "image": "quay.io/r/release@sha256:multi"},
                   "history": [
            {"state": "Partial", "version": "4.15.3", "image": "quay.io/r/release@sha256:multi", "startedTime": "2026-11-30T10:00:00Z"},
            {"state": "Completed", "version": "4.15.3", "image": "quay.io/r/release@sha256:amd64",
             "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}]}});
    let view = view(vec![cv]);
    let mut to_multi = Target::image("quay.io/r/release@sha256:amd64", Some("4.15.3".into()));
    to_multi.architecture = Some(ArchitectureChange::ToMulti);
    let asked = Sought::of(&view, &to_multi, Some(UpdateKind::Patch));
    assert!(asked.migration && !asked.remaining, "{asked:?}");
    // The migration under way: the target is the desired release.
    let under_way = Sought::of(
        &view,
        &Target::image("quay.io/r/release@sha256:multi", Some("4.15.3".into())),
        None,
    );
    assert!(under_way.migration && under_way.remaining, "{under_way:?}");
    let plan = plan_of_view(&view, under_way);
    assert_eq!(plan.control_plane.origin, "none");
    assert!(
        plan.unknowns
            .iter()
            .any(|u| u
                .starts_with("control plane: N/A: a migration to the multi-architecture payload")),
        "{:?}",
        plan.unknowns
    );
    let rc = Sought::of(
        &view,
        &Target::image("quay.io/r/release@sha256:rc", Some("4.16.0-rc.1".into())),
        None,
    );
    assert!(rc.pre_release && !rc.migration && !rc.remaining, "{rc:?}");
}

#[test]
fn a_hosted_cluster_plans_its_nodepools_and_invents_no_master_pool() {
    let hosted = |name: &str, pool: &str| {
        json!({"kind": "Node", "metadata": {"name": name,
                "labels": {"node-role.kubernetes.io/worker": "", crate::view::NODEPOOL_LABEL: pool}},
               "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let infrastructure = json!({"kind": "Infrastructure", "metadata": {"name": "cluster"},
        "status": {"controlPlaneTopology": "External", "infrastructureTopology": "HighlyAvailable"}});
    let plan = plan_of(vec![
        infrastructure,
        hosted("b-0", "blue"),
        hosted("a-0", "amber"),
        hosted("a-1", "amber"),
    ]);
    let names: Vec<&str> = plan.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["amber", "blue"]);
    assert_eq!(batches(&plan, "amber"), [["a-0"], ["a-1"]]);
    assert!(
        plan.unknowns.contains(&HOSTED_GUEST.to_owned()),
        "{:?}",
        plan.unknowns
    );
    assert!(
        !plan
            .unknowns
            .iter()
            .any(|u| u.contains("no MachineConfigPool data")),
        "{:?}",
        plan.unknowns
    );
}
