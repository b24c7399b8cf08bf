//! A generator of large cluster snapshots, for the offline suite
//! benchmark: `scale` 1 is 5,000 nodes, 150,000 pods, 10,000
//! PodDisruptionBudgets and 1,000 APIRequestCounts, plus the
//! ClusterVersion, ClusterOperators, pools, admin gates and alerts. Pods are
//! written as `oc get -o json` would, trimmed of the fields no check reads
//! (managedFields, most of status), one file per 100 namespaces as a
//! must-gather splits them.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::{Value, json};

pub struct Counts {
    pub nodes: usize,
    pub pods: usize,
    pub pdbs: usize,
    pub api_request_counts: usize,
}

const NAMESPACES_PER_FILE: usize = 100;

/// Writes a snapshot of `scale` times the base size into `dir`.
pub fn write(dir: &Path, scale: usize) -> std::io::Result<Counts> {
    let nodes = 5_000 * scale;
    let namespaces = 1_000 * scale;
    let pods_per_namespace = 150;
    let pdbs_per_namespace = 10;
    let api_request_counts = 1_000 * scale;

    list(
        dir,
        "clusterversion.json",
        std::iter::once(cluster_version()),
    )?;
    list(dir, "clusteroperators.json", (0..34).map(cluster_operator))?;
    list(
        dir,
        "machineconfigpools.json",
        ["master", "worker", "infra"].into_iter().map(pool),
    )?;
    list(dir, "nodes.json", (0..nodes).map(node))?;
    let workers = nodes - 3;
    for first in (0..namespaces).step_by(NAMESPACES_PER_FILE) {
        let range = first..(first + NAMESPACES_PER_FILE).min(namespaces);
        let pods = range.clone().flat_map(|ns| {
            (0..pods_per_namespace)
                .map(move |i| pod(ns, i, 3 + (ns * pods_per_namespace + i) % workers))
        });
        list(dir, &format!("pods-{first:05}.json"), pods)?;
        let pdbs = range.flat_map(|ns| (0..pdbs_per_namespace).map(move |i| pdb(ns, i)));
        list(dir, &format!("pdbs-{first:05}.json"), pdbs)?;
    }
    list(
        dir,
        "apirequestcounts.json",
        (0..api_request_counts).map(api_request_count),
    )?;
    list(dir, "configmaps.json", config_maps().into_iter())?;
    let alerts =
        json!({"status": "success", "data": {"alerts": (0..200).map(alert).collect::<Vec<_>>()}});
    std::fs::write(dir.join("alerts.json"), alerts.to_string())?;
    Ok(Counts {
        nodes,
        pods: namespaces * pods_per_namespace,
        pdbs: namespaces * pdbs_per_namespace,
        api_request_counts,
    })
}

/// Writes `{"kind":"List","items":[...]}` one item at a time.
fn list(dir: &Path, name: &str, items: impl Iterator<Item = Value>) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(dir.join(name))?);
    out.write_all(br#"{"apiVersion":"v1","kind":"List","items":["#)?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut out, &item)?;
    }
    out.write_all(b"]}\n")?;
    out.flush()
}

fn image(i: usize) -> String {
    format!("quay.io/openshift-release-dev/ocp-release@sha256:{i:064x}")
}

fn cluster_version() -> Value {
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"channel": "stable-4.16"},
        "status": {
            "desired": {"version": "4.15.20", "image": image(1)},
            "history": [{"state": "Completed", "version": "4.15.20", "image": image(1),
                         "startedTime": "2026-10-01T00:00:00Z", "completionTime": "2026-10-01T02:00:00Z"}],
            "conditions": [
                {"type": "Failing", "status": "False", "lastTransitionTime": "2026-10-01T02:00:00Z"},
                {"type": "Progressing", "status": "False", "lastTransitionTime": "2026-10-01T02:00:00Z"}],
            "availableUpdates": [{"version": "4.16.5", "image": image(2)}],
            "conditionalUpdates": []}})
}

fn cluster_operator(i: usize) -> Value {
    let name = if i == 0 {
        "etcd".to_owned()
    } else {
        format!("operator-{i}")
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name},
        "status": {"conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "2026-10-01T02:00:00Z",
             "message": "EtcdMembersAvailable: 3 members are available"},
            {"type": "Degraded", "status": "False", "lastTransitionTime": "2026-10-01T02:00:00Z"},
            {"type": "Upgradeable", "status": "True", "lastTransitionTime": "2026-10-01T02:00:00Z"}]}})
}

fn pool(name: &str) -> Value {
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool", "metadata": {"name": name},
        "spec": {"paused": false, "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
        "status": {"machineCount": 3, "updatedMachineCount": 3, "conditions": [
            {"type": "Degraded", "status": "False"}, {"type": "Updating", "status": "False"}]}})
}

fn node_name(i: usize) -> String {
    format!(
        "ip-10-{}-{}-{}.ec2.internal",
        i / 65_536 % 256,
        i / 256 % 256,
        i % 256
    )
}

fn node(i: usize) -> Value {
    let role = match i {
        0..3 => "master",
        _ if i.is_multiple_of(10) => "infra",
        _ => "worker",
    };
    let mut labels = json!({"kubernetes.io/hostname": node_name(i), "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": format!("us-east-1{}", ["a", "b", "c"][i % 3]),
        format!("node-role.kubernetes.io/{role}"): ""});
    if role == "infra" {
        labels["node-role.kubernetes.io/worker"] = json!("");
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name(i), "labels": labels,
            "annotations": {"machineconfiguration.openshift.io/desiredDrain": "uncordon-rendered-worker-1",
                            "machineconfiguration.openshift.io/state": "Done"}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017x}")},
        "status": {"allocatable": {"cpu": "15500m", "memory": "63Gi", "pods": "250"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "250"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastTransitionTime": "2026-10-01T02:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-10-01T02:00:00Z",
                 "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}})
}

fn pod(ns: usize, i: usize, node: usize) -> Value {
    let app = format!("app-{}", i % 10);
    let daemon = i.is_multiple_of(50);
    let (owner, owner_name) = if daemon {
        ("DaemonSet", format!("{app}-agent"))
    } else {
        ("ReplicaSet", format!("{app}-7d9f8c6b5"))
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{owner_name}-{i:05x}"), "namespace": format!("team-{ns:04}"),
            "labels": {"app": app, "pod-template-hash": "7d9f8c6b5", "team": format!("team-{ns:04}")},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": owner_name,
                                 "uid": format!("{ns:08x}-0000-4000-8000-{i:012x}"), "controller": true}]},
        "spec": {"nodeName": node_name(node), "serviceAccountName": "default",
            "containers": [
                {"name": "main", "image": format!("registry.example/team-{ns}/{app}:1.0"),
                 "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}},
                {"name": "proxy", "image": "registry.example/proxy:2.1",
                 "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]},
        "status": {"phase": "Running", "podIP": format!("10.128.{}.{}", i / 256 % 256, i % 256)}})
}

fn pdb(ns: usize, i: usize) -> Value {
    // One namespace in twenty has a budget at its limit.
    let allowed = if ns.is_multiple_of(20) && i == 0 {
        0
    } else {
        1
    };
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": format!("app-{i}"), "namespace": format!("team-{ns:04}")},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": format!("app-{i}")}}},
        "status": {"disruptionsAllowed": allowed, "expectedPods": 15, "currentHealthy": 15, "desiredHealthy": 14}})
}

fn api_request_count(i: usize) -> Value {
    let removed = match i % 100 {
        0 => Some("1.29"),
        1 => Some("1.32"),
        _ => None,
    };
    let hours: Vec<Value> = (0..24)
        .map(|h| json!({"requestCount": 6, "byNode": (0..3).map(|n| json!({
            "nodeName": node_name(n), "requestCount": 2, "byUser": [
                {"username": format!("system:serviceaccount:team-{:04}:deployer", (i + h) % 1000),
                 "userAgent": "kubectl/v1.29.0", "requestCount": 1, "byVerb": [{"verb": "get", "requestCount": 1}]},
                {"username": "system:serviceaccount:openshift-monitoring:prometheus-k8s",
                 "userAgent": "Prometheus/2.48", "requestCount": 1, "byVerb": [{"verb": "list", "requestCount": 1}]}]})).collect::<Vec<_>>()}))
        .collect();
    let mut status = json!({"requestCount": 144, "last24h": hours});
    if let Some(removed) = removed {
        status["removedInRelease"] = json!(removed);
    }
    json!({"apiVersion": "apiserver.openshift.io/v1", "kind": "APIRequestCount",
        "metadata": {"name": format!("resource{i}.v1beta1.example{}.io", i % 7)}, "status": status})
}

/// Writes a MachineConfigNode for each node of a snapshot of `scale`
/// (`machineconfignodes.json`), as a 4.19 cluster has them: most settled
/// (`Updated`, every phase reset), one in fifty caught during an update,
/// back from its reboot, with its phase times. Returns how many.
#[allow(dead_code)]
pub fn write_machine_config_nodes(dir: &Path, scale: usize) -> std::io::Result<usize> {
    let nodes = 5_000 * scale;
    list(
        dir,
        "machineconfignodes.json",
        (0..nodes).map(machine_config_node),
    )?;
    Ok(nodes)
}

fn machine_config_node(i: usize) -> Value {
    let pool = match i {
        0..3 => "master",
        _ if i.is_multiple_of(10) => "infra",
        _ => "worker",
    };
    let at = |minute: usize| format!("2026-11-30T{:02}:{:02}:00Z", 8 + minute / 60, minute % 60);
    let condition = |type_: &str, status: &str, minute: usize| {
        json!({"type": type_, "status": status, "reason": type_, "message": "generated",
               "lastTransitionTime": at(minute)})
    };
    let phases = [
        "UpdatePrepared",
        "UpdateExecuted",
        "Cordoned",
        "Drained",
        "AppliedFilesAndOS",
        "RebootedNode",
        "UpdatePostActionComplete",
        "UpdateComplete",
        "Resumed",
        "Uncordoned",
    ];
    let conditions: Vec<Value> = if i.is_multiple_of(50) {
        // Drained at 10, written 3 to 6 minutes later, back 4 to 8 after.
        let (update, reboot) = (3 + i % 4, 4 + i % 5);
        vec![
            condition("Updated", "False", 0),
            condition("UpdatePrepared", "True", 1),
            condition("Cordoned", "True", 2),
            condition("Drained", "True", 10),
            condition("AppliedFilesAndOS", "True", 10 + update),
            condition("UpdateExecuted", "True", 10 + update),
            condition("RebootedNode", "True", 10 + update + reboot),
        ]
    } else {
        std::iter::once(condition("Updated", "True", 90))
            .chain(phases.iter().map(|p| condition(p, "False", 90)))
            .collect()
    };
    json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigNode",
        "metadata": {"name": node_name(i)},
        "spec": {"node": {"name": node_name(i)}, "pool": {"name": pool},
                 "configVersion": {"desired": format!("rendered-{pool}-2")}},
        "status": {"conditions": conditions, "observedGeneration": 2,
                   "configVersion": {"current": format!("rendered-{pool}-2"), "desired": format!("rendered-{pool}-2")}}})
}

fn config_maps() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
            "data": {"ack-4.15-kube-1.29-api-removals-in-4.16": "Kubernetes 1.29 and therefore OpenShift 4.16 remove several APIs."}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "admin-acks", "namespace": "openshift-config"}, "data": {}}),
    ]
}

fn alert(i: usize) -> Value {
    let (name, severity, state) = match i % 4 {
        0 => ("KubePodCrashLooping", "warning", "firing"),
        1 => ("KubeContainerWaiting", "warning", "firing"),
        2 => ("TargetDown", "warning", "pending"),
        _ => ("KubeJobFailed", "warning", "firing"),
    };
    json!({"labels": {"alertname": name, "severity": severity, "namespace": format!("team-{:04}", i % 1000)},
        "annotations": {"summary": "generated"}, "state": state, "activeAt": "2026-11-30T10:00:00Z"})
}
