//! The update plan over the real cluster captures
//! (tests/data/real-clusters): the figures that can be derived by hand
//! from the captured YAML.

use std::path::Path;

use jiff::Timestamp;
use preflight_gate::checks::Context;
use preflight_gate::cluster::snapshot;
use preflight_gate::plan::{Plan, duration};
use preflight_gate::view::kinds;

const NOW: &str = "2026-11-30T12:00:00Z";

fn plan_of(capture: &str, to: &str) -> Plan {
    plan_in("tests/data/real-clusters", capture, to)
}

fn plan_in(root: &str, capture: &str, to: &str) -> Plan {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(root)
        .join(capture);
    let view = snapshot::load(&dir).unwrap_or_else(|e| panic!("{capture}: {e}"));
    let target = view.target(to);
    let ctx = Context::new(&view, &target, NOW.parse::<Timestamp>().unwrap());
    preflight_gate::plan::plan_to(&view, &target, ctx.kind, ctx.now)
}

/// Without Pod data, a node is oc's drain, update and reboot: 20 minutes.
const NODE: u64 = duration::DRAIN_UNKNOWN + duration::NODE_UPDATE + duration::NODE_REBOOT;

/// The CI cluster's seven workers whose drains fail now, as their
/// machine-config daemons say.
const FAILING: [&str; 7] = [
    "build0-gstfj-ci-prowjobs-worker-b-9lztv",
    "build0-gstfj-ci-tests-worker-c-dcz9p",
    "build0-gstfj-ci-prowjobs-worker-b-bg9f5",
    "build0-gstfj-ci-tests-worker-b-4h7pn",
    "build0-gstfj-ci-prowjobs-worker-b-mrxwn",
    "build0-gstfj-ci-tests-worker-b-jv5bg",
    "build0-gstfj-ci-tests-worker-b-kj6gk",
];

#[test]
fn the_ci_cluster_with_59_workers() {
    let plan = plan_of(
        "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
        "4.16.0-ec.4",
    );
    // 74 history entries: the install and 73 updates, 37 of them
    // pre-release steps (ec.3 to ec.4 is one: no patch); of their
    // completionTime - startedTime, the nearest-rank P50 of the last five
    // (5360, 5519, 7967, 12631 and 85210 s) and the P90 of the last twenty
    // (the third longest: 56460 s).
    let cp = &plan.control_plane;
    assert_eq!(
        (cp.origin, cp.samples, cp.p50_seconds, cp.p90_seconds),
        ("history", 37, 7967, 56460),
        "{}",
        cp.basis
    );
    let worker = plan.pools.iter().find(|p| p.name == "worker").unwrap();
    assert_eq!(
        (
            worker.nodes,
            worker.max_unavailable.as_str(),
            worker.unavailable
        ),
        (59, "20", 14)
    );
    // maxUnavailable 20, less the 2 workers down or cordoned by hand and
    // the 7 whose drains fail (they keep their slots): 11 at a time. The
    // MCO has started on the others unavailable: they return, and refill.
    // Batch 1 is the 7 failing and 11 more; then 52 - 11 = 41 in 11s.
    assert_eq!(worker.batch_size, 11);
    let sizes: Vec<usize> = worker.batches.iter().map(|b| b.nodes.len()).collect();
    assert_eq!(sizes, [18, 11, 11, 11, 8]);
    assert_eq!(worker.batches[0].failing, FAILING);
    // ceil(52 / 11) = 5 rounds of 20 minutes.
    assert_eq!(worker.seconds, 5 * NODE);
    let master = plan.pools.iter().find(|p| p.name == "master").unwrap();
    assert_eq!((master.batches.len(), master.seconds), (3, 3 * NODE));
    // The control plane, then the slowest pool other than master.
    assert_eq!(plan.p50_seconds, 7967 + 5 * NODE);
    assert_eq!(plan.p90_seconds, 56460 + 5 * NODE);
    // Each failing drain is a hold, naming the node and the daemon's
    // message.
    let holds: Vec<&String> = plan
        .warnings
        .iter()
        .filter(|w| w.starts_with("worker batch 1 holds: the drain of "))
        .collect();
    assert_eq!(holds.len(), 7, "{:?}", plan.warnings);
    assert!(
        holds[0].contains("reports \"failed to drain node: build0-gstfj-ci-prowjobs-worker-b-9lztv after 1 hour. Please see machine-config-controller logs for more information\""),
        "{}",
        holds[0]
    );
    assert_eq!(
        preflight_gate::report::plan_clearance(&plan).exit_code(),
        4,
        "a drain failing now holds the update up"
    );
    // No Pods or PDBs in the capture: nothing blocks, and the plan says
    // what it could not know.
    assert!(plan.blockers.is_empty());
    assert!(
        plan.unknowns
            .iter()
            .any(|u| u.starts_with("no Pod objects")),
        "{:?}",
        plan.unknowns
    );
}

/// The update under way on the CI cluster (its ClusterVersion completed
/// 4.16.0-ec.3; 22 of its 59 workers and its 3 masters are on their
/// pool's target configuration, state Done): only the 37 workers left.
#[test]
fn the_ci_clusters_update_under_way_plans_only_what_is_left() {
    let plan = plan_of(
        "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
        "4.16.0-ec.3",
    );
    assert_eq!(plan.control_plane.origin, "done");
    let master = plan.pools.iter().find(|p| p.name == "master").unwrap();
    assert_eq!((master.done, master.batches.len()), (3, 0));
    let worker = plan.pools.iter().find(|p| p.name == "worker").unwrap();
    assert_eq!(worker.done, 22);
    let planned: usize = worker.batches.iter().map(|b| b.nodes.len()).sum();
    assert_eq!(planned, 37);
    // 37 - 7 failing = 30 in 11s: 3 rounds.
    assert_eq!(worker.seconds, 3 * NODE);
    assert_eq!(plan.p50_seconds, 3 * NODE);
    assert_eq!(worker.batches[0].failing, FAILING);
}

/// A cluster at rest asked for the release it runs: every node is on its
/// pool's target configuration, the control plane done; nothing planned,
/// and it fits any window.
#[test]
fn the_release_a_cluster_runs_plans_nothing() {
    let plan = plan_of("not-upgrading", "4.14.1");
    assert_eq!(plan.control_plane.origin, "done");
    let done: Vec<(usize, usize)> = plan
        .pools
        .iter()
        .map(|p| (p.done, p.batches.len()))
        .collect();
    assert_eq!(done, [(3, 0), (3, 0)]);
    assert_eq!((plan.p50_seconds, plan.p90_seconds), (0, 0));
}

/// The single-node must-gather: the outage, its node's update and reboot,
/// is in the total and named; the total is never less than the pool's.
#[test]
fn a_single_node_says_its_outage() {
    let plan = plan_in("tests/data/must-gathers", "single-node-4.13", "4.13.35");
    let master = plan.pools.iter().find(|p| p.name == "master").unwrap();
    assert_eq!(master.nodes, 1);
    assert!(plan.p50_seconds >= master.seconds + plan.control_plane.p50_seconds);
    assert_eq!(plan.downtime.len(), 1, "{plan:?}");
    assert!(
        plan.downtime[0].starts_with(
            "a single-node cluster: sno-0 reboots with every workload on it: about 10m of downtime"
        ),
        "{}",
        plan.downtime[0]
    );
    assert_eq!(
        preflight_gate::report::plan_clearance(&plan).exit_code(),
        0,
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_cluster_at_rest_with_too_little_history() {
    let plan = plan_of("not-upgrading", "4.15.3");
    assert_eq!(plan.control_plane.origin, "documented");
    assert_eq!(
        (
            plan.control_plane.p50_seconds,
            plan.control_plane.p90_seconds
        ),
        (3600, 7200)
    );
    let batches: Vec<usize> = plan.pools.iter().map(|p| p.batches.len()).collect();
    assert_eq!(batches, [3, 3]);
    assert_eq!(plan.p50_seconds, 3600 + 3 * NODE);
}

#[test]
fn a_paused_worker_pool_is_said_and_not_counted() {
    let plan = plan_of("4.14.1-paused-worker-pool", "4.14.2");
    let worker = plan.pools.iter().find(|p| p.name == "worker").unwrap();
    assert!(!worker.updates && worker.batches.is_empty());
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.starts_with("pool worker is paused: its 3 nodes keep the current release")),
        "{:?}",
        plan.warnings
    );
    assert_eq!(plan.p50_seconds, plan.control_plane.p50_seconds);
}

#[test]
fn the_json_report_carries_the_plan_with_its_own_schema_version() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args(["check", "--to", "4.14.12", "--plan-only", "-o", "json"])
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["schemaVersion"], 1);
    assert_eq!(plan["pools"][1]["name"], "worker");
    assert_eq!(out.status.code(), Some(0));
    let full = std::process::Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args(["check", "--to", "4.14.12", "-o", "json"])
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&full.stdout).unwrap();
    assert_eq!(report["schemaVersion"], 1);
    assert_eq!(report["plan"]["schemaVersion"], 1);
}

/// The healthy 3-master, 3-worker capture with a workload added as a
/// cluster has one: a router on each worker (its grace period the
/// default router's hour) and a database of three replicas whose PDB
/// allows one eviction at a time, its pods on the first worker; the
/// `healthy` flag says whether its replicas are all healthy.
fn healthy_3_plus_3_with(healthy: bool) -> Plan {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real-clusters/not-upgrading");
    let mut view = snapshot::load(&dir).unwrap();
    let workers: Vec<String> = view
        .nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .contains_key("node-role.kubernetes.io/worker")
        })
        .map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(workers.len(), 3);
    // The capture keeps no allocatable: a worker's of an m5.xlarge.
    for node in &mut view.nodes {
        node.status.allocatable = preflight_gate::view::quantity::Resources {
            cpu_millis: 3500,
            memory_bytes: 14 << 30,
        };
    }
    let pod = |name: &str, ns: &str, node: &str, app: &str, grace: u64| {
        serde_json::json!({"kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
                "ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
               "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                        "containers": [{"resources": {"requests": {"cpu": "10m"}}}]}})
    };
    for (i, worker) in workers.iter().enumerate() {
        view.add(
            &kinds::POD,
            pod(
                &format!("router-default-{i}"),
                "openshift-ingress",
                worker,
                "router",
                3600,
            ),
        )
        .unwrap();
    }
    for i in 0..2 {
        view.add(
            &kinds::POD,
            pod(&format!("db-{i}"), "shop", &workers[0], "db", 30),
        )
        .unwrap();
    }
    view.add(&kinds::POD, pod("db-2", "shop", &workers[1], "db", 30))
        .unwrap();
    let current = if healthy { 3 } else { 2 };
    view.add(&kinds::POD_DISRUPTION_BUDGET,
        serde_json::json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"expectedPods": 3, "currentHealthy": current, "desiredHealthy": 2}}),
    )
    .unwrap();
    let target = view.target("4.14.2");
    let ctx = Context::new(&view, &target, NOW.parse::<Timestamp>().unwrap());
    preflight_gate::plan::plan_to(&view, &target, ctx.kind, ctx.now)
}

/// An engineer's figure for a healthy 3+3 cluster is 1h15m to 1h45m, and
/// it fits a 4-hour window: the routers' hour of grace is the P90's, not
/// every worker's. The routine wait for the database's PDB is counted,
/// and holds nothing: `--plan-only` exits 0.
#[test]
fn a_healthy_3_plus_3_cluster_is_what_an_engineer_says_and_fits_four_hours() {
    let plan = healthy_3_plus_3_with(true);
    assert!(
        (75 * 60..=105 * 60).contains(&plan.p50_seconds),
        "P50 {}",
        plan.p50_seconds
    );
    assert!(plan.p90_seconds < 4 * 3600, "P90 {}", plan.p90_seconds);
    assert_eq!(plan.waits.len(), 1, "{:?} {:?}", plan.waits, plan.unknowns);
    assert!(
        plan.waits[0].contains("waits about 2m for PDB shop/db"),
        "{}",
        plan.waits[0]
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    assert_eq!(preflight_gate::report::plan_clearance(&plan).exit_code(), 0);
    let said = plan
        .unknowns
        .iter()
        .find(|u| u.starts_with("a pod's shutdown"))
        .unwrap();
    assert!(
        said.contains("openshift-ingress/router-default-0 (1h00m)"),
        "{said}"
    );
    // The worker pool's P90: its rollout, with one router at its hour.
    let worker = plan.pools.iter().find(|p| p.name == "worker").unwrap();
    assert_eq!(
        worker.p90_seconds - worker.seconds,
        3600 - duration::TYPICAL_SHUTDOWN
    );
}

/// The same PDB with a replica unhealthy: its evictions wait for a
/// recovery the plan cannot time, which holds the update up (exit 4).
#[test]
fn a_wait_the_plan_cannot_count_holds() {
    let plan = healthy_3_plus_3_with(false);
    assert!(
        plan.waits
            .iter()
            .any(|w| w.contains("which the plan cannot know")),
        "{:?}",
        plan.waits
    );
    assert_eq!(preflight_gate::report::plan_clearance(&plan).exit_code(), 4);
}
