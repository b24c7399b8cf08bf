//! Loading a must-gather the size of a real one: about 150 MB in about
//! 3,700 files, in the must-gather layout (per-namespace lists, one file
//! per pod, cluster-scoped objects one per file, CRDs and events that no
//! check reads, the config Node, the rules-format alerts, and container
//! logs, which are most of a real one's bytes), read as a directory and as
//! a `.tar.gz`. Prints the median load time and the peak
//! RSS of each; the budget is 2 s and 100 MB.
//!
//! `cargo bench --bench must_gather_load`; figures in docs/benchmarks.md.
//! `PREFLIGHT_GATE_BENCH_RUNS` sets the number of timed runs (default 5);
//! `PREFLIGHT_GATE_BENCH_DIR` keeps the generated must-gather in that folder.

mod rss;

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use preflight_gate::cluster::snapshot;
use rss::{peak_rss_mb, reset_peak_rss};
use serde_json::{Value, json};

const NAMESPACES: usize = 60;
const PODS_PER_NAMESPACE: usize = 20;
const NODES: usize = 60;
const CRDS: usize = 900;
/// Bytes of log per pod: most of a real must-gather is container logs.
const LOG_BYTES: usize = 92_000;

#[path = "common/runs.rs"]
mod runs;

fn main() {
    let (_, runs) = runs::how_many();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    // PREFLIGHT_GATE_BENCH_DIR keeps the generated must-gather there, to
    // look at or profile.
    let base = std::env::var_os("PREFLIGHT_GATE_BENCH_DIR")
        .map_or_else(|| tmp.path().to_owned(), std::path::PathBuf::from);
    let root = base.join("must-gather.local.5020417323848155215");
    let started = Instant::now();
    write(&root).expect("the must-gather is written");
    let (files, bytes) = size(&root);
    println!(
        "must-gather: {files} files, {:.0} MB, written in {:.1}s",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let archive = base.join("must-gather.tar.gz");
    pack(&root, &archive).expect("the archive is written");
    println!(
        "must-gather.tar.gz: {:.0} MB",
        std::fs::metadata(&archive).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );
    for (name, path) in [("directory", &root), ("tar.gz", &archive)] {
        let (median, rss) = time(path, runs);
        println!(
            "{name}: median of {runs}: load {:.0} ms; peak RSS {} MB",
            median.as_secs_f64() * 1000.0,
            rss.map_or("unknown".to_owned(), |m| m.to_string())
        );
    }
}

/// Loads `path` once to warm the page cache, then `runs` times.
fn time(path: &Path, runs: usize) -> (Duration, Option<u64>) {
    let once = || {
        let started = Instant::now();
        let view = snapshot::load(path).expect("the must-gather loads");
        assert_eq!(view.nodes.len(), NODES, "the config Node is no node");
        assert!(view.alerts.as_ref().is_some_and(|a| !a.is_empty()));
        std::hint::black_box(&view);
        started.elapsed()
    };
    once();
    reset_peak_rss();
    let mut samples: Vec<Duration> = (0..runs.max(1)).map(|_| once()).collect();
    let rss = peak_rss_mb();
    samples.sort();
    (samples[samples.len() / 2], rss)
}

fn write(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    std::fs::write(
        root.join("timestamp"),
        "2026-11-30 11:58:02.143990912 +0000 UTC m=+0.052341234\n2026-11-30 12:00:00.877104533 +0000 UTC m=+118.785454855\n",
    )?;
    let base = root.join("quay-io-openshift-release-dev-ocp-v4-0-art-dev-sha256-0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0");
    let cluster = base.join("cluster-scoped-resources");
    object(
        &cluster.join("config.openshift.io/clusterversions/version.yaml"),
        &json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"}, "spec": {"clusterID": "5a1c9e0b-7d3f-4b21-9c8e-2f6a4d0b1e37", "channel": "stable-4.16"},
                "status": {"desired": {"version": "4.16.20"}, "history": [{"state": "Completed", "version": "4.16.20",
                           "startedTime": "2026-10-01T00:00:00Z", "completionTime": "2026-10-01T01:10:00Z"}],
                           "conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-10-01T01:10:00Z"}]}}),
    )?;
    object(
        &cluster.join("config.openshift.io/nodes/cluster.yaml"),
        &json!({"apiVersion": "config.openshift.io/v1", "kind": "Node", "metadata": {"name": "cluster"}, "spec": {}}),
    )?;
    for i in 0..34 {
        object(
            &cluster.join(format!(
                "config.openshift.io/clusteroperators/operator-{i}.yaml"
            )),
            &json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": format!("operator-{i}")},
                    "status": {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-10-01T01:00:00Z",
                                               "message": "All is well"}],
                               "relatedObjects": (0..20).map(|j| json!({"group": "", "resource": "namespaces", "name": format!("ns-{j}")})).collect::<Vec<_>>()}}),
        )?;
    }
    for i in 0..NODES {
        object(
            &cluster.join(format!("core/nodes/node-{i}.yaml")),
            &padded(
                json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": format!("node-{i}"), "labels": {"node-role.kubernetes.io/worker": ""}},
                    "status": {"allocatable": {"cpu": "7500m", "memory": "31Gi"},
                               "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-30T11:59:20Z",
                                               "lastTransitionTime": "2026-10-01T00:30:00Z"}],
                               "images": (0..60).map(|j| json!({"names": [format!("quay.io/openshift/image-{j}@sha256:{j:064x}")], "sizeBytes": 400_000_000 + j})).collect::<Vec<_>>()}}),
                4,
            ),
        )?;
    }
    for i in 0..CRDS {
        object(
            &cluster.join(format!(
                "apiextensions.k8s.io/customresourcedefinitions/crd-{i}.example.com.yaml"
            )),
            &crd(i),
        )?;
    }
    for ns in 0..NAMESPACES {
        let dir = base.join(format!("namespaces/ns-{ns}"));
        let pods: Vec<Value> = (0..PODS_PER_NAMESPACE).map(|p| pod(ns, p)).collect();
        for p in &pods {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            object(&dir.join(format!("pods/{name}/{name}.yaml")), p)?;
            let logs = dir.join(format!("pods/{name}/c0/c0/logs"));
            std::fs::create_dir_all(&logs)?;
            let line = "2026-11-30T11:59:59.123456789Z I1130 11:59:59.123456       1 controller.go:123] Reconciled the object in 12ms\n";
            std::fs::write(
                logs.join("current.log"),
                line.repeat(LOG_BYTES / line.len()),
            )?;
        }
        list(&dir.join("core/pods.yaml"), pods)?;
        list(
            &dir.join("core/events.yaml"),
            (0..60).map(|e| event(ns, e)).collect(),
        )?;
        list(&dir.join("core/configmaps.yaml"), (0..6).map(|c| padded(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{c}"), "namespace": format!("ns-{ns}")}, "data": {"config.yaml": "x: 1\n".repeat(200)}}), 2)).collect())?;
        list(&dir.join("apps/deployments.yaml"), (0..4).map(|d| padded(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("app-{d}"), "namespace": format!("ns-{ns}")}, "spec": {"replicas": 5}}), 4)).collect())?;
        list(
            &dir.join("policy/poddisruptionbudgets.yaml"),
            vec![
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "app", "namespace": format!("ns-{ns}")}, "spec": {"selector": {"matchLabels": {"app": "app-0"}}}, "status": {"disruptionsAllowed": 1}}),
            ],
        )?;
    }
    let monitoring = base.join("monitoring/prometheus");
    std::fs::create_dir_all(&monitoring)?;
    let rules: Vec<Value> = (0..400)
        .map(|r| json!({"type": "alerting", "name": format!("Alert{r}"), "labels": {"severity": if r % 50 == 0 { "critical" } else { "warning" }},
                        "annotations": {"summary": "something"}, "lastEvaluation": "2026-11-30T11:59:40Z",
                        "alerts": if r % 10 == 0 { json!([{"labels": {"alertname": format!("Alert{r}")}, "state": "firing", "activeAt": "2026-11-30T10:00:00Z"}]) } else { json!([]) }}))
        .collect();
    std::fs::write(
        monitoring.join("rules.json"),
        json!({"status": "success", "data": {"groups": [{"name": "all", "rules": rules}]}})
            .to_string(),
    )?;
    Ok(())
}

/// Adds managedFields as the API server writes them: most of a real
/// object's bytes, and many small YAML nodes.
fn padded(mut object: Value, fields: usize) -> Value {
    let managed: Vec<Value> = (0..fields)
        .map(|m| json!({"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": format!("manager-{m}"), "operation": "Update",
                        "time": "2026-10-01T00:30:00Z",
                        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:annotations": {".": {}, "f:note": {}}},
                                     "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                                                "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}},
                                                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                                                "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}}}}))
        .collect();
    object["metadata"]["managedFields"] = Value::Array(managed);
    object
}

fn pod(ns: usize, p: usize) -> Value {
    padded(
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("app-{}-{p:05}", p % 4), "namespace": format!("ns-{ns}"),
                            "labels": {"app": format!("app-{}", p % 4)},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-5d8f", "controller": true}]},
               "spec": {"nodeName": format!("node-{}", (ns * PODS_PER_NAMESPACE + p) % NODES),
                        "containers": (0..2).map(|c| json!({"name": format!("c{c}"), "image": "quay.io/app/app:1",
                                   "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                                   "env": (0..15).map(|e| json!({"name": format!("VAR_{e}"), "value": "some value"})).collect::<Vec<_>>(),
                                   "volumeMounts": (0..5).map(|v| json!({"name": format!("vol-{v}"), "mountPath": format!("/var/run/{v}")})).collect::<Vec<_>>()})).collect::<Vec<_>>()},
               "status": {"phase": "Running", "conditions": (0..4).map(|c| json!({"type": format!("C{c}"), "status": "True", "lastTransitionTime": "2026-10-01T00:30:00Z"})).collect::<Vec<_>>()}}),
        5,
    )
}

fn event(ns: usize, e: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
           "metadata": {"name": format!("app.{e:016x}"), "namespace": format!("ns-{ns}")},
           "involvedObject": {"kind": "Pod", "name": format!("app-{e}"), "namespace": format!("ns-{ns}")},
           "reason": "Pulled", "message": "Container image \"quay.io/app/app:1\" already present on machine and it is a long message",
           "firstTimestamp": "2026-11-30T10:00:00Z", "lastTimestamp": "2026-11-30T11:00:00Z", "count": 3, "type": "Normal"})
}

fn crd(i: usize) -> Value {
    let properties: serde_json::Map<String, Value> = (0..60)
        .map(|p| (format!("field{p}"), json!({"type": "string", "description": "A field of the custom resource, described at length as CRDs do. ".repeat(2)})))
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("crd-{i}.example.com")},
           "spec": {"group": "example.com", "names": {"kind": format!("Kind{i}"), "plural": format!("kind{i}s")},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}}}]}})
}

fn object(path: &Path, value: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let mut out = BufWriter::new(File::create(path)?);
    out.write_all(
        serde_saphyr::to_string(value)
            .map_err(std::io::Error::other)?
            .as_bytes(),
    )?;
    out.flush()
}

fn list(path: &Path, items: Vec<Value>) -> std::io::Result<()> {
    object(
        path,
        &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}),
    )
}

fn pack(root: &Path, archive: &Path) -> std::io::Result<()> {
    let gz = flate2::write::GzEncoder::new(File::create(archive)?, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    tar.append_dir_all("must-gather.local.5020417323848155215", root)?;
    tar.into_inner()?.finish()?.flush()
}

fn size(dir: &Path) -> (usize, u64) {
    let mut total = (0, 0);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                let (f, b) = size(&path);
                total = (total.0 + f, total.1 + b);
            } else if let Ok(m) = entry.metadata() {
                total = (total.0 + 1, total.1 + m.len());
            }
        }
    }
    total
}
