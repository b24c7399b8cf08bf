//! The live source and the check catalogue on the real control plane: the
//! objects a cluster would have (Nodes, Pods, PDBs, ClusterOperators,
//! MachineConfigPools, an APIRequestCount, admin gates, the ingress
//! certificate) are created through the API server, validated by the real
//! OpenShift CRDs, read back by `cluster::live` with paged lists and field
//! selectors, and judged by the same checks as a snapshot.
//!
//! Nothing runs controllers here, so the test writes status the way the
//! kubelet, the disruption controller and the operators would, and
//! deletes everything it made before giving up its turn.

use std::path::PathBuf;
use std::process::Command;

use base64::Engine;
use jiff::Timestamp;
use preflight_gate::model::{CheckResult, Outcome};
use preflight_gate::suite::{self, Limits};
use preflight_gate::view::kinds;
use serde_json::{Value, json};
use std::sync::Arc;

use crate::cluster::{World, lock};

const NS: &str = "e2e-checks";

/// A kubeconfig variable of the control plane's env file, as `up` points
/// to it (it reuses the running plane): `ADMIN_KUBECONFIG`, `ALICE_KUBECONFIG`.
fn kubeconfig(variable: &str) -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/tests/control-plane/up"))
        .output()
        .expect("up runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let env_file = stdout
        .lines()
        .find_map(|l| l.strip_prefix("source "))
        .expect("up prints the env file")
        .trim()
        .to_owned();
    let out = Command::new("bash")
        .args(["-c", "set -a; source \"$1\"; printf %s \"${!2}\"", "env"])
        .arg(&env_file)
        .arg(variable)
        .output()
        .expect("bash runs");
    let path = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!path.is_empty(), "{variable} is not in {env_file}");
    PathBuf::from(path)
}

fn load_as(variable: &str) -> preflight_gate::view::ClusterView {
    let kubeconfig = kubeconfig(variable);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = preflight_gate::cluster::client(Some(&kubeconfig))
            .await
            .unwrap();
        preflight_gate::cluster::live::load(&client, preflight_gate::cluster::live::Reads::ALL)
            .await
            .unwrap()
    })
}

fn condition(type_: &str, status: &str) -> Value {
    json!({"type": type_, "status": status, "reason": "E2E", "message": format!("{type_} is {status}"),
           "lastTransitionTime": "2026-11-30T10:00:00Z"})
}

/// Everything the test creates, removed again on drop.
struct Objects<'a> {
    world: &'a World,
    made: Vec<Vec<String>>,
}

impl<'a> Objects<'a> {
    fn new(world: &'a World) -> Self {
        Self {
            world,
            made: Vec::new(),
        }
    }

    /// Creates `object` and remembers how to delete it.
    fn create(&mut self, object: Value) {
        self.world.apply_json(&object);
        let kind = object["kind"].as_str().unwrap().to_lowercase();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let mut delete = vec!["delete".to_owned(), kind, name, "--ignore-not-found".into()];
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            delete.extend(["-n".to_owned(), ns.to_owned()]);
        }
        if object["kind"] == "Pod" {
            // No kubelet confirms the deletion.
            delete.extend(["--grace-period=0".to_owned(), "--force".to_owned()]);
        }
        self.made.push(delete);
    }

    /// Writes `status` through the status subresource.
    fn status(&self, kind: &str, name: &str, namespace: Option<&str>, status: Value) {
        let patch = json!({"status": status}).to_string();
        let mut args = vec![
            "patch",
            kind,
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ];
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        self.world.admin(&args);
    }
}

impl Drop for Objects<'_> {
    fn drop(&mut self) {
        for delete in self.made.iter().rev() {
            let _ = self.world.kubectl(crate::cluster::User::Admin, delete);
        }
    }
}

fn install_openshift_crds(world: &World) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(crate::cluster::OPENSHIFT_CRDS);
    for file in [
        "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "0000_80_machine-config_01_machineconfigpools.crd.yaml",
        "kube-apiserver_apirequestcounts.crd.yaml",
    ] {
        world.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            dir.join(file).to_str().unwrap(),
        ]);
    }
    world.admin(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd/clusteroperators.config.openshift.io",
        "crd/machineconfigpools.machineconfiguration.openshift.io",
        "crd/apirequestcounts.apiserver.openshift.io",
    ]);
}

fn namespace(world: &World, name: &str) {
    world.apply_json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    // No controller-manager makes the default ServiceAccount pods need.
    world.apply_json(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": name}}));
}

fn create_cluster(objects: &mut Objects) {
    let world = objects.world;
    for ns in [
        NS,
        "openshift-config",
        "openshift-config-managed",
        "openshift-ingress",
    ] {
        namespace(world, ns);
    }
    let nodes = [
        ("e2e-master-0", "master", "True", false, "8"),
        ("e2e-worker-0", "worker", "True", false, "4"),
        ("e2e-worker-1", "worker", "False", false, "4"),
        ("e2e-worker-2", "worker", "True", true, "4"),
    ];
    for (name, role, ready, cordoned, cpu) in nodes {
        objects.create(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}},
            "spec": {"unschedulable": cordoned}}));
        objects.status(
            "node",
            name,
            None,
            json!({
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [condition("Ready", ready)]}),
        );
    }
    objects.create(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": NS, "labels": {"app": "db"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db",
                                 "uid": "7c1f0e52-7d36-4d8e-9a5e-0d7f2b1c9a10", "controller": true}]},
        "spec": {"nodeName": "e2e-worker-0", "containers": [{"name": "db", "image": "registry.example/db:1",
            "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}]}}));
    objects.status("pod", "db-0", Some(NS), json!({"phase": "Running"}));
    objects.create(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": NS},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}),
    );
    objects.status("poddisruptionbudget", "db", Some(NS), json!({
        "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "observedGeneration": 1}));
    for role in ["master", "worker"] {
        objects.create(json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": role},
            "spec": {"paused": false, "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{role}"): ""}}}}));
        objects.status(
            "machineconfigpool",
            role,
            None,
            json!({
            "machineCount": 1, "updatedMachineCount": 1, "readyMachineCount": 1,
            "unavailableMachineCount": 0, "degradedMachineCount": 0,
            "conditions": [condition("Updating", "False"), condition("Degraded", "False")]}),
        );
    }
    for (name, upgradeable) in [("etcd", "True"), ("e2e-storage", "False")] {
        objects.create(
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": name}, "spec": {}}),
        );
        objects.status("clusteroperator", name, None, json!({"conditions": [
            condition("Available", "True"), condition("Degraded", "False"), condition("Upgradeable", upgradeable)]}));
    }
    // An API the 4.14 -> 4.15 update removes (Kubernetes 1.27 -> 1.28); one
    // removed in 1.27 or before would be gone from a 4.14 cluster already.
    let api = "csistoragecapacities.v1beta1.storage.k8s.io";
    objects.create(
        json!({"apiVersion": "apiserver.openshift.io/v1", "kind": "APIRequestCount",
        "metadata": {"name": api}, "spec": {"numberOfUsersToReport": 10}}),
    );
    objects.status("apirequestcount", api, None, json!({
        "removedInRelease": "1.28", "requestCount": 7,
        "currentHour": {"requestCount": 0},
        "last24h": [{"requestCount": 7, "byNode": [{"nodeName": "e2e-master-0", "requestCount": 7, "byUser": [
            {"username": "system:serviceaccount:storage:csi-driver", "userAgent": "csi-provisioner/3.5",
             "requestCount": 7, "byVerb": [{"verb": "list", "requestCount": 7}]}]}]}]}));
    objects.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
        "data": {"ack-4.14-kube-1.28-api-removals-in-4.15": "Kubernetes 1.28 removes APIs."}}));
    objects.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "admin-acks", "namespace": "openshift-config"}, "data": {}}));
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    objects.create(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "router-certs-default", "namespace": "openshift-ingress"},
        "data": {"tls.crt": b64(include_str!("../data/certs/rsa1024-sha256.pem")), "tls.key": b64("not kept")}}));
}

fn result<'a>(results: &'a [CheckResult], name: &str) -> &'a CheckResult {
    results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn the_live_source_feeds_the_same_checks_as_a_snapshot() {
    let (_turn, world) = lock();
    install_openshift_crds(world);
    let mut objects = Objects::new(world);
    create_cluster(&mut objects);

    let view = load_as("ADMIN_KUBECONFIG");
    for kind in [
        kinds::CLUSTER_VERSION,
        kinds::CLUSTER_OPERATOR,
        kinds::NODE,
        kinds::POD,
        kinds::POD_DISRUPTION_BUDGET,
        kinds::MACHINE_CONFIG_POOL,
        kinds::API_REQUEST_COUNT,
        kinds::CONFIG_MAP,
        kinds::SECRET,
    ] {
        assert!(view.has(&kind), "{} was not listed", kind.name);
    }
    // Not served here: no IngressController or OLM CRDs.
    assert!(!view.has(&kinds::CLUSTER_SERVICE_VERSION));
    let secret = view
        .tls_secrets
        .iter()
        .find(|s| s.name == "router-certs-default")
        .unwrap();
    assert!(
        secret
            .certificate
            .starts_with("-----BEGIN CERTIFICATE-----")
    );

    let target = view.target("4.15.3");
    let now = "2026-11-30T12:00:00Z".parse::<Timestamp>().unwrap();
    let results = suite::run(Arc::new(view), &target, now, None, Limits::default());
    let expect = [
        (
            "NodesReady",
            Outcome::Fail,
            "e2e-worker-2 is unschedulable (cordoned by hand)",
        ),
        ("NodesReady", Outcome::Fail, "e2e-worker-1 is not Ready"),
        (
            "PodDisruptionBudgetsAllowDrain",
            Outcome::Fail,
            "e2e-checks/db allows no disruption and protects pods on e2e-worker-0",
        ),
        (
            "DrainCapacity",
            Outcome::Fail,
            "pool worker: draining e2e-worker-0 needs 3000m CPU",
        ),
        (
            "ClusterOperatorsUpgradeable",
            Outcome::Fail,
            "e2e-storage (E2E: Upgradeable is False)",
        ),
        (
            "RemovedAPIsInUse",
            Outcome::Fail,
            "csistoragecapacities.v1beta1.storage.k8s.io (removed in 1.28): 7 requests, by system:serviceaccount:storage:csi-driver (csi-provisioner/3.5) 7",
        ),
        (
            "AdminAcksMissing",
            Outcome::Fail,
            "ack-4.14-kube-1.28-api-removals-in-4.15",
        ),
        (
            "IngressCertificateCompatible",
            Outcome::Fail,
            "an RSA key of 1024 bits",
        ),
        (
            "EtcdHealthy",
            Outcome::Pass,
            "etcd is Available and not Degraded",
        ),
        (
            "MachineConfigPoolsHealthy",
            Outcome::Pass,
            "MachineConfigPools are updated and not paused",
        ),
        (
            "TargetRecommended",
            Outcome::Pass,
            "4.15.3 is a recommended update",
        ),
        (
            "OLMOperatorsCompatible",
            Outcome::Skipped,
            "the cluster serves no ClusterServiceVersion API",
        ),
    ];
    for (check, outcome, says) in expect {
        let r = result(&results, check);
        assert_eq!(r.outcome, outcome, "{check}: {}", r.message);
        assert!(r.message.contains(says), "{check}: {}", r.message);
    }
}

#[test]
fn kinds_the_user_may_not_list_are_errors_that_say_so() {
    let (_turn, world) = lock();
    install_openshift_crds(world);
    // Alice may read the ClusterVersion and nothing else the checks need.
    let view = load_as("ALICE_KUBECONFIG");
    assert!(view.has(&kinds::CLUSTER_VERSION));
    assert!(
        view.unreadable.contains_key("Node"),
        "{:?}",
        view.unreadable
    );
    assert!(view.unreadable.contains_key("Secret"));
    let target = view.target("4.15.3");
    let now = "2026-11-30T12:00:00Z".parse::<Timestamp>().unwrap();
    let results = suite::run(Arc::new(view), &target, now, None, Limits::default());
    let nodes = result(&results, "NodesReady");
    assert_eq!(nodes.outcome, Outcome::Error, "{}", nodes.message);
    assert!(
        nodes
            .message
            .starts_with("cannot list Node objects: nodes is forbidden"),
        "{}",
        nodes.message
    );
    assert_eq!(result(&results, "TargetRecommended").outcome, Outcome::Pass);
}
