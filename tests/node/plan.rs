//! The update plan on the real node: a Deployment whose
//! PodDisruptionBudget allows no disruption (its status kept by the real
//! disruption controller, its pod run by the real kubelet) makes the plan
//! block the batch of the node it runs on, naming the PDB and the node, and
//! the webhook's denial says so.

use std::time::Duration;

use serde_json::{Value, json};

use crate::world::{World, lock, wait_for};

/// The test's own namespace, and what it makes there.
const NS: &str = "node-plan-pdb";
const APP: &str = "db";
/// The role label the worker pool selects, as OpenShift labels a worker.
const WORKER_ROLE: &str = "node-role.kubernetes.io/worker";
/// OpenShift's own MachineConfigPool CRD (tests/data/openshift-crds).
const POOL_CRD: &str = "machineconfigpools.machineconfiguration.openshift.io";
const POOL_CRD_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/openshift-crds/0000_80_machine-config_01_machineconfigpools.crd.yaml"
);

/// What the test adds to the world, taken away when it ends (pass or
/// panic): the namespace with its Deployment and PDB, the worker pool, its
/// CRD and the node's role label, so that every other test's world is as
/// it was.
struct Made<'a> {
    world: &'a World,
    node: String,
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        let _ = self.world.kubectl(&[
            "delete",
            "namespace",
            NS,
            "--ignore-not-found",
            "--wait=true",
            "--timeout=120s",
        ]);
        let _ = self.world.kubectl(&[
            "delete",
            "machineconfigpool",
            "worker",
            "--ignore-not-found",
        ]);
        let _ = self
            .world
            .kubectl(&["delete", "crd", POOL_CRD, "--ignore-not-found"]);
        let _ = self
            .world
            .kubectl(&["label", "node", &self.node, &format!("{WORKER_ROLE}-")]);
    }
}

/// The node as OpenShift has a worker: its role label, and the `worker`
/// MachineConfigPool selecting it (maxUnavailable 1, so the node is a batch
/// of its own).
fn make_the_node_a_worker(world: &World, node: &str) {
    world.admin(&["apply", "--server-side", "-f", POOL_CRD_FILE]);
    world.admin(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{POOL_CRD}"),
        "--timeout=60s",
    ]);
    world.admin(&[
        "label",
        "node",
        node,
        &format!("{WORKER_ROLE}="),
        "--overwrite",
    ]);
    world.apply_json(&json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"paused": false, "maxUnavailable": 1,
            "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
            "nodeSelector": {"matchLabels": {WORKER_ROLE: ""}}},
    }));
}

/// One replica of a shell that sleeps, and a PDB that needs it: minAvailable
/// 1 of 1, so no eviction is ever allowed.
fn deploy_a_budgeted_app(world: &World, image: &str) {
    world.apply_json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    world.apply_json(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "db", "image": image, "imagePullPolicy": "IfNotPresent",
                        "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }],
                },
            },
        },
    }));
    world.apply_json(&json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": APP, "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": APP}}},
    }));
}

#[test]
fn a_pdb_that_allows_no_disruption_blocks_the_plan_and_the_webhooks_denial_names_it() {
    let (_turn, world) = lock();
    let node = world.var("NODE_NAME").to_owned();
    let _made = Made {
        world,
        node: node.clone(),
    };
    make_the_node_a_worker(world, &node);
    deploy_a_budgeted_app(world, &world.check_image);

    // The pod runs on the node, and the disruption controller says the
    // budget allows nothing.
    let pdb = wait_for(
        "the PDB to count its healthy pod",
        Duration::from_secs(120),
        || {
            let pdb = world.get_json(&["get", "pdb", "-n", NS, APP]);
            let s = &pdb["status"];
            (s["expectedPods"] == 1 && s["currentHealthy"] == 1 && s["desiredHealthy"] == 1)
                .then_some(pdb)
        },
    );
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb:#}");
    let pods = world.get_json(&["get", "pods", "-n", NS, "-l", &format!("app={APP}")]);
    assert_eq!(
        pods["items"][0]["spec"]["nodeName"].as_str(),
        Some(node.as_str()),
        "{pods:#}"
    );

    // A run for the release, through `oc adm upgrade --to-image`'s patch:
    // denied, by DrainsComplete, with the plan's line naming the PDB and
    // the node.
    let image = world.release_image.clone();
    let denied = world.request_until_verdict(&image, &[]);
    assert!(!denied.ok, "allowed with a batch that can never drain");
    let blocker = format!("worker batch 1 ({node}) cannot drain: PDB {NS}/{APP}");
    assert!(
        denied.stderr.contains("- DrainsComplete"),
        "{}",
        denied.stderr
    );
    assert!(
        denied.stderr.contains(&format!("blocked: {blocker}")),
        "no plan line naming the PDB and the node: {}",
        denied.stderr
    );
    assert!(
        world.cluster_version()["spec"]
            .get("desiredUpdate")
            .is_none()
    );

    // The result's plan, as the controller wrote it: the worker pool
    // blocked, and the blocker named in full.
    let done = world.wait_for_result(&image, Duration::from_secs(10), |o| {
        o["status"]["phase"] == "Failed"
    });
    let plan = &done["status"]["plan"];
    let worker = plan["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "worker")
        .unwrap_or_else(|| panic!("no worker pool in the plan: {plan:#}"));
    assert_eq!(worker["nodes"], 1, "{plan:#}");
    assert_eq!(worker["blocked"], true, "{plan:#}");
    let blockers: Vec<&str> = plan["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(blockers.len(), 1, "{plan:#}");
    assert!(blockers[0].starts_with(&blocker), "{}", blockers[0]);
    let drains = done["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "DrainsComplete")
        .unwrap_or_else(|| panic!("no DrainsComplete result: {done:#}"));
    assert_eq!(drains["outcome"], "Fail", "{drains:#}");
    eprintln!("denied: {}", denied.stderr.trim());
}
