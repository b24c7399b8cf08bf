//! The update plan over the real cluster captures
//! (tests/data/real-clusters): the figures that can be derived by hand
//! from the captured YAML.

use std::path::Path;

use jiff::Timestamp;
use preflight_gate::checks::Context;
use preflight_gate::cluster::snapshot;
use preflight_gate::plan::{Plan, duration};

const NOW: &str = "2026-11-30T12:00:00Z";

fn plan_of(capture: &str, to: &str) -> Plan {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real-clusters")
        .join(capture);
    let view = snapshot::load(&dir).unwrap_or_else(|e| panic!("{capture}: {e}"));
    let target = view.target(to);
    let ctx = Context::new(&view, &target, NOW.parse::<Timestamp>().unwrap());
    preflight_gate::plan::plan(&view, ctx.kind, ctx.now)
}

/// Without Pod data, a node is oc's drain, update and reboot: 20 minutes.
const NODE: u64 = duration::DRAIN_UNKNOWN + duration::NODE_UPDATE + duration::NODE_REBOOT;

#[test]
fn the_ci_cluster_with_59_workers() {
    let plan = plan_of(
        "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
        "4.16.0-ec.4",
    );
    // 74 history entries: the install and 73 updates, 62 of them within a
    // minor (ec.3 to ec.4 is one); of their completionTime - startedTime,
    // the nearest-rank P50 of the last five (5360, 5519, 7967, 12631 and
    // 85210 s) and the P90 of all 62.
    let cp = &plan.control_plane;
    assert_eq!(
        (cp.source, cp.samples, cp.p50_seconds, cp.p90_seconds),
        ("history", 62, 7967, 22472)
    );
    let worker = plan.pools.iter().find(|p| p.name == "worker").unwrap();
    // maxUnavailable 20, less the 14 workers not Ready or cordoned (the
    // pool's status counts 13): batches of 6, ceil(59 / 6) = 10 of them.
    assert_eq!(
        (
            worker.nodes,
            worker.max_unavailable.as_str(),
            worker.unavailable
        ),
        (59, "20", 14)
    );
    assert_eq!((worker.batch_size, worker.batches.len()), (6, 10));
    // No zone label: oldest first.
    let first: Vec<&str> = worker.batches[0]
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(
        first,
        [
            "build0-gstfj-w-b-infra-mhb8g.c.openshift-ci-build-farm.internal",
            "build0-gstfj-w-b-infra-n9kc5.c.openshift-ci-build-farm.internal",
            "build0-gstfj-w-b-f7dkq.c.openshift-ci-build-farm.internal",
            "build0-gstfj-w-d-7rj9w.c.openshift-ci-build-farm.internal",
            "build0-gstfj-ci-prowjobs-worker-b-9lztv",
            "build0-gstfj-ci-tests-worker-d-r2k42",
        ]
    );
    assert_eq!(worker.batches[9].nodes.len(), 5);
    assert_eq!(worker.seconds, 10 * NODE);
    let master = plan.pools.iter().find(|p| p.name == "master").unwrap();
    assert_eq!((master.batches.len(), master.seconds), (3, 3 * NODE));
    // The control plane, then the slowest pool other than master.
    assert_eq!(plan.p50_seconds, 7967 + 10 * NODE);
    assert_eq!(plan.p90_seconds, 22472 + 10 * NODE);
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

#[test]
fn a_cluster_at_rest_with_too_little_history() {
    let plan = plan_of("not-upgrading", "4.15.3");
    assert_eq!(plan.control_plane.source, "documented");
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
