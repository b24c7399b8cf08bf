//! Must-gathers the project makes itself, in the real layout
//! (`must-gather.local.<n>/timestamp`, an image-hash folder holding
//! `cluster-scoped-resources/<group>/<resource>/<name>.yaml`,
//! `namespaces/<ns>/<group>/<resource>.yaml` lists and `monitoring/`), one
//! per way real must-gathers were misread, and table tests over them.
//!
//! The trees are checked in under tests/data/must-gathers/ and are exactly
//! what [`cases`] writes: run with `PREFLIGHT_GATE_BLESS=1` to rewrite them
//! after changing the generator. Certificates are signed with a fixed
//! Ed25519 key, whose signatures are deterministic, so every run writes the
//! same bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use jiff::{Timestamp, ToSpan};
use preflight_gate::cluster::snapshot;
use preflight_gate::model::Outcome;
use preflight_gate::model::Target;
use preflight_gate::model::release::Version;
use preflight_gate::suite::{self, Limits};
use rstest::rstest;
use serde_json::{Value, json};
use std::sync::Arc;

const DIR: &str = "tests/data/must-gathers";

/// The folder `oc adm must-gather` names after the gather image.
const IMAGE_DIR: &str = "quay-io-openshift-release-dev-ocp-v4-0-art-dev-sha256-5b3fa9c1d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4";

/// One must-gather: its files by path below the case's folder.
struct MustGather {
    root: String,
    files: BTreeMap<String, String>,
}

impl MustGather {
    /// A must-gather that ran from `end - 2m` to `end`.
    fn new(root: &str, end: Timestamp) -> Self {
        let go_time = |t: Timestamp, monotonic: &str| {
            format!(
                "{} +0000 UTC m=+{monotonic}\n",
                t.strftime("%Y-%m-%d %H:%M:%S.%f")
            )
        };
        let start = end - 2.minutes();
        let mut files = BTreeMap::new();
        files.insert(
            format!("{root}/timestamp"),
            go_time(start, "0.041893711") + &go_time(end, "120.230517923"),
        );
        Self {
            root: root.to_owned(),
            files,
        }
    }

    fn put(&mut self, path: &str, text: String) {
        self.files
            .insert(format!("{}/{IMAGE_DIR}/{path}", self.root), text);
    }

    /// `cluster-scoped-resources/<group>/<resource>/<name>.yaml`.
    fn cluster_scoped(&mut self, group: &str, resource: &str, object: Value) {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        self.put(
            &format!("cluster-scoped-resources/{group}/{resource}/{name}.yaml"),
            yaml(&object),
        );
    }

    /// `namespaces/<ns>/<group>/<resource>.yaml`, a List as inspect writes it.
    fn namespaced(&mut self, namespace: &str, group: &str, resource: &str, items: Vec<Value>) {
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items});
        self.put(
            &format!("namespaces/{namespace}/{group}/{resource}.yaml"),
            yaml(&list),
        );
    }
}

fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap()
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn condition(type_: &str, status: &str, since: Timestamp, message: &str) -> Value {
    json!({"type": type_, "status": status, "lastTransitionTime": since.to_string(), "message": message, "reason": "AsExpected"})
}

/// A cluster at `version` (`history` newest first), taken at `end`.
struct Cluster {
    version: &'static str,
    id: &'static str,
    end: Timestamp,
    installed: Timestamp,
}

impl Cluster {
    fn minor(&self) -> String {
        let v = Version::parse(self.version).unwrap();
        format!("{}.{}", v.major, v.minor)
    }

    fn cluster_version(&self) -> Value {
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version", "creationTimestamp": self.installed.to_string()},
        "spec": {"channel": format!("stable-{}", self.minor()), "clusterID": self.id},
        "status": {
            "desired": {"version": self.version, "image": format!("quay.io/openshift-release-dev/ocp-release:{}-x86_64", self.version)},
            "history": [{"state": "Completed", "version": self.version,
                         "startedTime": self.installed.to_string(),
                         "completionTime": (self.installed + 40.minutes()).to_string()}],
            "conditions": [
                condition("Available", "True", self.installed + 40.minutes(), "Done applying"),
                condition("Failing", "False", self.installed + 40.minutes(), ""),
                condition("Progressing", "False", self.installed + 40.minutes(), "Cluster version is"),
            ]}})
    }

    fn cluster_operator(&self, name: &str) -> Value {
        let since = self.installed + 40.minutes();
        json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
        "metadata": {"name": name},
        "status": {"conditions": [
            condition("Available", "True", since, ""),
            condition("Degraded", "False", since, ""),
            condition("Progressing", "False", since, ""),
            condition("Upgradeable", "True", since, ""),
        ]}})
    }

    fn node(&self, name: &str, roles: &[&str]) -> Value {
        let labels: serde_json::Map<String, Value> = roles
            .iter()
            .map(|r| (format!("node-role.kubernetes.io/{r}"), json!("")))
            .chain([("kubernetes.io/hostname".to_owned(), json!(name))])
            .collect();
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": name, "labels": labels},
               "spec": {},
               "status": {"allocatable": {"cpu": "7500m", "memory": "31Gi", "pods": "250"},
                          "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                          "message": "kubelet is posting ready status",
                                          "lastTransitionTime": (self.installed + 20.minutes()).to_string(),
                                          "lastHeartbeatTime": (self.end - 40.seconds()).to_string()}]}})
    }

    fn pool(&self, name: &str, nodes: usize) -> Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
               "metadata": {"name": name},
               "spec": {"paused": false, "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}},
               "status": {"machineCount": nodes, "updatedMachineCount": nodes, "readyMachineCount": nodes,
                          "degradedMachineCount": 0, "unavailableMachineCount": 0,
                          "conditions": [condition("Updated", "True", self.installed + 30.minutes(), ""),
                                         condition("Degraded", "False", self.installed + 30.minutes(), "")]}})
    }

    /// A must-gather of a healthy cluster: three control-plane nodes and
    /// `workers` workers, each with a pod of a Deployment.
    fn must_gather(&self, root: &str, workers: usize) -> MustGather {
        let mut mg = MustGather::new(root, self.end);
        mg.cluster_scoped(
            "config.openshift.io",
            "clusterversions",
            self.cluster_version(),
        );
        for name in ["etcd", "ingress", "kube-apiserver", "machine-config"] {
            mg.cluster_scoped(
                "config.openshift.io",
                "clusteroperators",
                self.cluster_operator(name),
            );
        }
        let mut pods = Vec::new();
        for i in 0..3 {
            let name = format!("master-{i}");
            mg.cluster_scoped("core", "nodes", self.node(&name, &["master"]));
        }
        for i in 0..workers {
            let name = format!("worker-{i}");
            mg.cluster_scoped("core", "nodes", self.node(&name, &["worker"]));
            pods.push(pod(&format!("web-{i}"), &name, "500m"));
        }
        mg.cluster_scoped(
            "machineconfiguration.openshift.io",
            "machineconfigpools",
            self.pool("master", 3),
        );
        mg.cluster_scoped(
            "machineconfiguration.openshift.io",
            "machineconfigpools",
            self.pool("worker", workers),
        );
        mg.cluster_scoped(
            "config.openshift.io",
            "infrastructures",
            infrastructure("HighlyAvailable"),
        );
        mg.namespaced("shop", "core", "pods", pods);
        mg
    }
}

fn pod(name: &str, node: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "shop",
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": true}]},
           "spec": {"nodeName": node, "containers": [{"name": "web", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
           "status": {"phase": "Running"}})
}

fn infrastructure(topology: &str) -> Value {
    json!({"apiVersion": "config.openshift.io/v1", "kind": "Infrastructure",
           "metadata": {"name": "cluster"},
           "status": {"controlPlaneTopology": topology, "infrastructureTopology": topology,
                      "infrastructureName": "mg-7k2xp", "platform": "None"}})
}

/// A certificate for `name`, valid between the two dates, signed with a
/// fixed Ed25519 key so that the generated bytes never change.
fn certificate(name: &str, from: (i32, u8, u8), until: (i32, u8, u8), serial: u64) -> String {
    let mut pkcs8 = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    pkcs8.extend([7u8; 32]);
    let key = rcgen::KeyPair::try_from(pkcs8.as_slice()).unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
    params.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
    params.serial_number = Some(serial.into());
    params.self_signed(&key).unwrap().pem()
}

fn tls_secret(namespace: &str, name: &str, pem: &str, annotations: Value) -> Value {
    use base64::Engine;
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
           "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
           "data": {"tls.crt": base64::engine::general_purpose::STANDARD.encode(pem), "tls.key": ""}})
}

/// An `/api/v1/rules` response with one firing critical alert, as a
/// must-gather stores it.
fn rules(end: Timestamp) -> String {
    let rule = |name: &str, severity: &str, alerts: Value| {
        json!({"state": if alerts.as_array().unwrap().is_empty() { "inactive" } else { "firing" },
               "name": name, "query": "up == 0", "duration": 600,
               "labels": {"severity": severity},
               "annotations": {"summary": format!("{name} is firing.")},
               "alerts": alerts, "health": "ok", "evaluationTime": 0.0004,
               "lastEvaluation": (end - 20.seconds()).to_string(), "type": "alerting"})
    };
    let firing = json!([{"labels": {"alertname": "etcdMembersDown", "namespace": "openshift-etcd", "severity": "critical"},
                         "annotations": {"summary": "etcd cluster members are down."},
                         "state": "firing", "activeAt": (end - 25.minutes()).to_string(), "value": "1e+00"}]);
    let response = json!({"status": "success", "data": {"groups": [
        {"name": "etcd", "file": "/etc/prometheus/rules/prometheus-k8s-rulefiles-0/openshift-etcd-operator-etcd-prometheus-rules.yaml",
         "rules": [rule("etcdMembersDown", "critical", firing), rule("etcdNoLeader", "critical", json!([]))],
         "interval": 30, "evaluationTime": 0.001, "lastEvaluation": (end - 20.seconds()).to_string()},
        {"name": "kubernetes-recording", "file": "/etc/prometheus/rules/x.yaml",
         "rules": [{"name": "namespace:container_cpu_usage:sum", "query": "sum(x)", "health": "ok", "type": "recording",
                    "lastEvaluation": (end - 10.seconds()).to_string()}],
         "interval": 30}]}});
    serde_json::to_string_pretty(&response).unwrap() + "\n"
}

/// Every case: its folder, and the must-gathers in it.
fn cases() -> Vec<(&'static str, Vec<MustGather>)> {
    let mut cases = Vec::new();

    // 1. Since 4.12: the nodes configuration, a config.openshift.io Node.
    let c = Cluster {
        version: "4.12.40",
        id: "0a8c2f5e-12d4-4b1e-9a57-6c3e8d1f2b90",
        end: at("2023-11-20T09:12:44Z"),
        installed: at("2023-06-01T08:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.1843305927461183019", 2);
    mg.cluster_scoped(
        "config.openshift.io",
        "nodes",
        json!({"apiVersion": "config.openshift.io/v1", "kind": "Node",
               "metadata": {"name": "cluster", "creationTimestamp": c.installed.to_string()},
               "spec": {"cgroupMode": "v2"}, "status": {}}),
    );
    cases.push(("config-node-4.12", vec![mg]));

    // 2. Old data: a two-year serving certificate valid when taken, and an
    // operator down for ten minutes then.
    let c = Cluster {
        version: "4.8.22",
        id: "6f1e0b3a-0c44-4d8e-b0b5-2a9d7c3e4f11",
        end: at("2021-12-08T15:30:00Z"),
        installed: at("2021-03-02T10:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.6250013897420571112", 2);
    let mut ingress = c.cluster_operator("ingress");
    ingress["status"]["conditions"][0] = condition(
        "Available",
        "False",
        c.end - 10.minutes(),
        "Not all ingress controllers are available.",
    );
    mg.cluster_scoped("config.openshift.io", "clusteroperators", ingress);
    mg.namespaced(
        "openshift-ingress",
        "core",
        "secrets",
        vec![tls_secret(
            "openshift-ingress",
            "router-certs-default",
            &certificate("*.apps.mg.example.com", (2021, 3, 2), (2023, 3, 2), 1),
            json!({}),
        )],
    );
    cases.push(("old-certificates-4.8", vec![mg]));

    // 3. A single-node cluster.
    let c = Cluster {
        version: "4.13.30",
        id: "c41d7e22-5b8a-4f0c-8e3d-91a6b2f0d7c4",
        end: at("2024-02-14T07:45:10Z"),
        installed: at("2024-01-10T12:00:00Z"),
    };
    let mut mg = MustGather::new("must-gather.local.3391850027364410582", c.end);
    mg.cluster_scoped(
        "config.openshift.io",
        "clusterversions",
        c.cluster_version(),
    );
    mg.cluster_scoped(
        "config.openshift.io",
        "infrastructures",
        infrastructure("SingleReplica"),
    );
    mg.cluster_scoped("core", "nodes", c.node("sno-0", &["master", "worker"]));
    mg.cluster_scoped(
        "machineconfiguration.openshift.io",
        "machineconfigpools",
        c.pool("master", 1),
    );
    mg.cluster_scoped(
        "machineconfiguration.openshift.io",
        "machineconfigpools",
        c.pool("worker", 0),
    );
    mg.namespaced(
        "shop",
        "core",
        "pods",
        vec![pod("web-0", "sno-0", "3"), pod("web-1", "sno-0", "2")],
    );
    cases.push(("single-node-4.13", vec![mg]));

    // 4. Alerts in the rules format, where 4.6-4.8 and 4.9+ keep them.
    let c = Cluster {
        version: "4.8.22",
        id: "9b2c4d6e-8f0a-4b2c-9d4e-6f8a0b2c4d6e",
        end: at("2021-12-08T15:30:00Z"),
        installed: at("2021-03-02T10:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.4418230098765112345", 2);
    mg.put("monitoring/alerts.json", rules(c.end));
    cases.push(("alerts-4.8", vec![mg]));
    let c = Cluster {
        version: "4.9.59",
        id: "1c3e5a7b-9d1f-4a3c-8e5b-7d9f1a3c5e7b",
        end: at("2022-09-01T11:00:00Z"),
        installed: at("2022-01-15T09:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.8834120098761234567", 2);
    mg.put("monitoring/prometheus/rules.json", rules(c.end));
    cases.push(("alerts-4.9", vec![mg]));

    // 5. APIRequestCounts: one removed long ago, one called by platform
    // components only.
    let count = |name: &str, removed: &str, callers: &[(&str, &str, u64)]| {
        let by_user: Vec<Value> = callers
            .iter()
            .map(|(user, agent, n)| json!({"username": user, "userAgent": agent, "requestCount": n, "byVerb": [{"verb": "list", "requestCount": n}]}))
            .collect();
        let total: u64 = callers.iter().map(|c| c.2).sum();
        json!({"apiVersion": "apiserver.openshift.io/v1", "kind": "APIRequestCount",
               "metadata": {"name": name},
               "spec": {"numberOfUsersToReport": 10},
               "status": {"removedInRelease": removed, "requestCount": total,
                          "currentHour": {"requestCount": 0},
                          "last24h": [{"requestCount": total, "byNode": [{"nodeName": "10.0.0.10", "requestCount": total, "byUser": by_user}]}]}})
    };
    let c = Cluster {
        version: "4.18.12",
        id: "5e7a9c1b-3d5f-4e7a-9c1b-3d5f7e9a1c3b",
        end: at("2025-06-03T16:20:00Z"),
        installed: at("2025-02-01T10:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.2231908876512340987", 2);
    mg.cluster_scoped(
        "apiserver.openshift.io",
        "apirequestcounts",
        count(
            "flowschemas.v1beta1.flowcontrol.apiserver.k8s.io",
            "1.26",
            &[(
                "system:serviceaccount:monitoring:exporter",
                "exporter/1.4",
                96,
            )],
        ),
    );
    cases.push(("removed-apis-4.18", vec![mg]));
    let c = Cluster {
        version: "4.8.22",
        id: "7a9c1e3b-5d7f-4a9c-8e1b-3d5f7a9c1e3b",
        end: at("2021-12-08T15:30:00Z"),
        installed: at("2021-03-02T10:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.5512098876123409871", 2);
    mg.cluster_scoped(
        "apiserver.openshift.io",
        "apirequestcounts",
        count(
            "ingresses.v1beta1.extensions",
            "1.22",
            &[(
                "system:kube-controller-manager",
                "kube-controller-manager/v1.21.1 (linux/amd64) kubernetes/1dd4ae2/system:serviceaccount:kube-system:generic-garbage-collector",
                41,
            )],
        ),
    );
    mg.cluster_scoped(
        "apiserver.openshift.io",
        "apirequestcounts",
        count(
            "ingresses.v1beta1.networking.k8s.io",
            "1.22",
            &[(
                "system:serviceaccount:openshift-infra:default",
                "cluster-policy-controller/v0.0.0 (linux/amd64) kubernetes/$Format",
                17,
            )],
        ),
    );
    cases.push(("removed-apis-4.8", vec![mg]));

    // 6. Two clusters' must-gathers side by side.
    let a = Cluster {
        version: "4.14.20",
        id: "aaaaaaaa-1111-4aaa-8aaa-aaaaaaaaaaaa",
        end: at("2024-05-02T10:00:00Z"),
        installed: at("2024-01-02T10:00:00Z"),
    };
    let b = Cluster {
        version: "4.14.12",
        id: "bbbbbbbb-2222-4bbb-8bbb-bbbbbbbbbbbb",
        end: at("2024-05-03T10:00:00Z"),
        installed: at("2024-01-03T10:00:00Z"),
    };
    cases.push((
        "two-clusters",
        vec![
            a.must_gather("must-gather.local.1111111111111111111", 3),
            b.must_gather("must-gather.local.2222222222222222222", 3),
        ],
    ));

    // 7. A cluster still installing.
    let c = Cluster {
        version: "4.15.9",
        id: "3c5e7a9b-1d3f-4c5e-8a9b-1d3f5c7e9a1b",
        end: at("2024-04-20T13:25:00Z"),
        installed: at("2024-04-20T12:40:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.7719283746501928374", 2);
    let mut cv = c.cluster_version();
    cv["status"]["history"][0]["state"] = json!("Partial");
    cv["status"]["history"][0]["completionTime"] = Value::Null;
    cv["status"]["conditions"] = json!([
        condition("Available", "False", c.installed, ""),
        condition("Failing", "False", c.installed, ""),
        condition(
            "Progressing",
            "True",
            c.installed,
            "Working towards 4.15.9: 701 of 873 done (80% complete)"
        ),
    ]);
    mg.cluster_scoped("config.openshift.io", "clusterversions", cv);
    cases.push(("installing-4.15", vec![mg]));

    // 8. Certificates operators renew, and one a person must.
    let c = Cluster {
        version: "4.16.8",
        id: "8e0a2c4b-6d8f-4e0a-9c2b-4d6f8e0a2c4b",
        end: at("2024-10-07T08:00:00Z"),
        installed: at("2024-07-01T10:00:00Z"),
    };
    let mut mg = c.must_gather("must-gather.local.9901827364519283746", 2);
    let soon = (2024, 10, 8);
    let mut secrets = vec![tls_secret(
        "shop",
        "web-tls",
        &certificate("web.shop.example.com", (2023, 10, 8), soon, 10),
        json!({}),
    )];
    for (i, service) in ["metrics", "webhook", "api"].iter().enumerate() {
        secrets.push(tls_secret(
            "shop",
            &format!("{service}-serving-cert"),
            &certificate(
                &format!("{service}.shop.svc"),
                (2022, 10, 8),
                soon,
                20 + i as u64,
            ),
            json!({"service.beta.openshift.io/originating-service-name": service}),
        ));
    }
    mg.namespaced("shop", "core", "secrets", secrets);
    mg.namespaced(
        "openshift-kube-apiserver-operator",
        "core",
        "secrets",
        vec![tls_secret(
            "openshift-kube-apiserver-operator",
            "aggregator-client-signer",
            &certificate("aggregator-signer", (2024, 9, 8), soon, 30),
            json!({"auth.openshift.io/certificate-not-after": "2024-10-08T00:00:00Z",
                   "auth.openshift.io/certificate-not-before": "2024-09-08T00:00:00Z"}),
        )],
    );
    cases.push(("operator-certificates-4.16", vec![mg]));
    cases
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR)
}

fn files_under(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, base, out);
        } else {
            let key = path.strip_prefix(base).unwrap().display().to_string();
            out.insert(key, std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn the_checked_in_must_gathers_are_what_the_generator_writes() {
    let mut expected = BTreeMap::new();
    for (name, must_gathers) in cases() {
        for mg in &must_gathers {
            for (path, text) in &mg.files {
                expected.insert(format!("{name}/{path}"), text.clone());
            }
        }
        assert!(must_gathers.iter().all(|mg| !mg.root.is_empty()), "{name}");
    }
    crate::golden::tree(DIR, &expected, "must_gathers");
}

/// Runs every check on a generated must-gather for an update to `to`.
fn run(
    case: &str,
    to: &str,
) -> (
    Arc<preflight_gate::view::ClusterView>,
    Vec<(String, Outcome, String)>,
) {
    let view = snapshot::load(&data_dir().join(case)).unwrap_or_else(|e| panic!("{case}: {e}"));
    let target = Target::image(
        &format!("quay.io/openshift-release-dev/ocp-release:{to}-x86_64"),
        Some(to.to_owned()),
    );
    // Today's clock: the checks must not use it on a snapshot.
    let view = Arc::new(view);
    let results = suite::run(
        view.clone(),
        &target,
        Timestamp::now(),
        None,
        Limits::default(),
    )
    .into_iter()
    .map(|r| (r.name, r.outcome, r.message))
    .collect();
    (view, results)
}

/// One case per way real must-gathers were misread: the check, its
/// outcome, and what its message must say.
#[rstest]
#[case::config_node_is_not_a_node(
    "config-node-4.12",
    "4.12.45",
    "NodesReady",
    Outcome::Pass,
    "all 5 nodes are Ready and schedulable"
)]
#[case::config_node_is_not_drained(
    "config-node-4.12",
    "4.12.45",
    "DrainCapacity",
    Outcome::Pass,
    "in each of 2 pools"
)]
#[case::certificates_at_the_datas_time(
    "old-certificates-4.8",
    "4.8.30",
    "IngressCertificateCompatible",
    Outcome::Pass,
    "meets the TLS policy"
)]
#[case::durations_at_the_datas_time(
    "old-certificates-4.8",
    "4.8.30",
    "ClusterOperatorsHealthy",
    Outcome::Fail,
    "ingress is not Available for 10m"
)]
#[case::single_node(
    "single-node-4.13",
    "4.13.35",
    "DrainCapacity",
    Outcome::Fail,
    "a single-node cluster (Infrastructure topology SingleReplica): its API and every workload are down while its one node reboots"
)]
#[case::rules_format_4_8(
    "alerts-4.8",
    "4.8.30",
    "CriticalAlertsFiring",
    Outcome::Fail,
    "etcdMembersDown (namespace=openshift-etcd): etcd cluster members are down."
)]
#[case::rules_format_4_9(
    "alerts-4.9",
    "4.9.60",
    "CriticalAlertsFiring",
    Outcome::Fail,
    "etcdMembersDown (namespace=openshift-etcd)"
)]
#[case::removed_before_the_current_minor(
    "removed-apis-4.18",
    "4.19.0",
    "RemovedAPIsInUse",
    Outcome::Pass,
    "no API removed after Kubernetes 1.31, up to 1.32"
)]
#[case::platform_callers_left_out(
    "removed-apis-4.8",
    "4.9.0",
    "RemovedAPIsInUse",
    Outcome::Pass,
    "(58 calls by platform components or the install's bootstrap, which need no action, left out)"
)]
#[case::an_install_is_not_an_update(
    "installing-4.15",
    "4.15.10",
    "ClusterVersionState",
    Outcome::Fail,
    "the cluster is still being installed (4.15.9, started 45m ago)"
)]
#[case::an_install_updates_from_the_version_it_installs(
    "installing-4.15",
    "4.15.10",
    "UpdatePath",
    Outcome::Pass,
    "a patch update from 4.15.9 to 4.15.10"
)]
#[case::only_certificates_a_person_renews(
    "operator-certificates-4.16",
    "4.16.10",
    "CertificatesExpiringSoon",
    Outcome::Fail,
    "shop/web-tls expires at 2024-10-08T00:00:00Z; 4 that operators renew by themselves"
)]
fn must_gathers_read_as_an_engineer_reads_them(
    #[case] case: &str,
    #[case] to: &str,
    #[case] check: &str,
    #[case] outcome: Outcome,
    #[case] says: &str,
) {
    let (_, results) = run(case, to);
    let (_, got, message) = results
        .iter()
        .find(|r| r.0 == check)
        .unwrap_or_else(|| panic!("no {check}"));
    assert_eq!(*got, outcome, "{case} {check}: {message}");
    assert!(message.contains(says), "{case} {check}: {message}");
}

/// The single-node must-gather gathered without the Infrastructure object
/// (a partial gather): its one node, master and worker, says what the
/// topology would, and the report and the plan say the outage of its
/// reboot.
#[test]
fn a_single_node_cluster_is_recognised_from_its_nodes() {
    let mut files = BTreeMap::new();
    let source = data_dir().join("single-node-4.13");
    files_under(&source, &source, &mut files);
    let dir = tempfile::tempdir().unwrap();
    let mut left_out = 0;
    for (path, text) in &files {
        if path.contains("config.openshift.io/infrastructures/") {
            left_out += 1;
            continue;
        }
        let to = dir.path().join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, text).unwrap();
    }
    assert_eq!(left_out, 1);
    let view = snapshot::load(dir.path()).unwrap();
    assert!(view.infrastructure.is_none());
    assert_eq!(
        view.single_node_by(),
        Some(preflight_gate::view::SingleNode::Nodes)
    );
    let target = Target::image(
        "quay.io/openshift-release-dev/ocp-release:4.13.35-x86_64",
        Some("4.13.35".to_owned()),
    );
    let view = Arc::new(view);
    let results = suite::run(
        view.clone(),
        &target,
        Timestamp::now(),
        None,
        Limits::default(),
    );
    let drain = results.iter().find(|r| r.name == "DrainCapacity").unwrap();
    assert_eq!(drain.outcome, Outcome::Fail);
    assert!(
        drain.message.starts_with(
            "a single-node cluster (no Infrastructure object; its one node is both control plane and worker): its API and every workload are down while its one node reboots"
        ),
        "{}",
        drain.message
    );
    let plan = preflight_gate::plan::plan(
        &view,
        Some(preflight_gate::model::UpdateKind::Patch),
        Timestamp::now(),
    );
    assert!(
        plan.downtime
            .iter()
            .any(|w| w.starts_with("a single-node cluster: ") && w.contains(" of downtime")),
        "{:?}",
        plan.downtime
    );
}

#[test]
fn the_config_node_is_skipped_and_counted() {
    let (view, _) = run("config-node-4.12", "4.12.45");
    assert_eq!(view.nodes.len(), 5);
    // In the must-gather layout its path says what it is, so it is not
    // even opened; read from anywhere else, its API group says it.
    assert_eq!(
        view.unread_files.get("nodes (config.openshift.io)"),
        Some(&1)
    );
    let file = data_dir()
        .join("config-node-4.12/must-gather.local.1843305927461183019")
        .join(IMAGE_DIR)
        .join("cluster-scoped-resources/config.openshift.io/nodes/cluster.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut snapshot = snapshot::Snapshot::default();
    assert_eq!(
        snapshot.add_file(Path::new("cluster.yaml"), &text).unwrap(),
        0
    );
    assert_eq!(
        snapshot.view.skipped.get("Node (config.openshift.io/v1)"),
        Some(&1)
    );
}

#[rstest]
#[case("config-node-4.12", "2023-11-20T09:12:44Z")]
#[case("old-certificates-4.8", "2021-12-08T15:30:00Z")]
fn the_time_of_a_must_gather_is_its_timestamp_file(#[case] case: &str, #[case] time: &str) {
    let (view, _) = run(case, "4.12.45");
    let as_of = view.as_of.clone().expect("a time");
    assert_eq!(as_of.time, at(time));
    assert_eq!(as_of.found_by, "the must-gather's timestamp file");
}

#[test]
fn the_rules_format_keeps_state_labels_and_annotations() {
    let (view, _) = run("alerts-4.9", "4.9.60");
    let alerts = view.alerts.clone().expect("alerts read");
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let alert = &alerts[0];
    assert_eq!(
        (alert.name(), alert.severity(), alert.state.as_str()),
        ("etcdMembersDown", "critical", "firing")
    );
    assert_eq!(alert.label("namespace"), "openshift-etcd");
    assert_eq!(
        alert.annotations["summary"],
        "etcd cluster members are down."
    );
}

fn check_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .arg("check")
        .args(args)
        .env_remove("PREFLIGHT_GATE_KUBECONFIG")
        .env_remove("PREFLIGHT_GATE_SNAPSHOT")
        .output()
        .expect("the binary runs")
}

#[test]
fn two_clusters_in_one_directory_are_a_usage_error_naming_both() {
    let dir = data_dir().join("two-clusters");
    let out = check_cli(&["--snapshot", dir.to_str().unwrap(), "--to", "4.14.25"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in [
        "holds two clusters",
        "aaaaaaaa-1111-4aaa-8aaa-aaaaaaaaaaaa at 4.14.20",
        "bbbbbbbb-2222-4bbb-8bbb-bbbbbbbbbbbb at 4.14.12",
        "must-gather.local.1111111111111111111",
        "must-gather.local.2222222222222222222",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
}

/// Packs a case as `oc adm must-gather` users do: `tar czf mg.tar.gz must-gather.local.*`.
fn pack(case: &str, out: &Path, compression: &str) {
    let file = std::fs::File::create(out).unwrap();
    let writer: Box<dyn std::io::Write> = match compression {
        "gz" => Box::new(flate2::write::GzEncoder::new(
            file,
            flate2::Compression::default(),
        )),
        "xz" => Box::new(xz2::write::XzEncoder::new(file, 6)),
        _ => Box::new(file),
    };
    let mut builder = tar::Builder::new(writer);
    builder.append_dir_all(".", data_dir().join(case)).unwrap();
    builder.into_inner().unwrap().flush().unwrap();
}

use std::io::Write as _;

#[rstest]
#[case("tar")]
#[case("gz")]
#[case("xz")]
fn a_must_gather_archive_reads_as_its_tree(#[case] compression: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let name = match compression {
        "tar" => "must-gather.tar".to_owned(),
        other => format!("must-gather.tar.{other}"),
    };
    let archive = tmp.path().join(name);
    pack("alerts-4.9", &archive, compression);
    let out = check_cli(&[
        "--snapshot",
        archive.to_str().unwrap(),
        "--to",
        "4.9.60",
        "-o",
        "json",
    ]);
    let tree = check_cli(&[
        "--snapshot",
        data_dir().join("alerts-4.9").to_str().unwrap(),
        "--to",
        "4.9.60",
        "-o",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let from_tree: Value = serde_json::from_slice(&tree.stdout).unwrap();
    let strip = |mut v: Value| {
        for r in v["results"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("duration");
        }
        v
    };
    assert_eq!(strip(report.clone()), strip(from_tree));
    assert_eq!(report["asOf"], "2022-09-01T11:00:00Z");
}

#[test]
fn a_file_that_is_no_snapshot_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("notes.txt");
    std::fs::write(&path, "not a must-gather").unwrap();
    let out = check_cli(&["--snapshot", path.to_str().unwrap(), "--to", "4.9.60"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("nor a .tar, .tar.gz or .tar.xz archive"),
        "{stderr}"
    );
    let truncated = tmp.path().join("cut.tar.gz");
    pack("alerts-4.9", &truncated, "gz");
    let bytes = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let out = check_cli(&["--snapshot", truncated.to_str().unwrap(), "--to", "4.9.60"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cut.tar.gz is a truncated or corrupt archive"),
        "{stderr}"
    );
    assert!(!stderr.contains("deflate"), "{stderr}");
}

/// Copies `case`'s files below `to`, each must-gather's folder renamed by
/// `rename`, without the `timestamp` files when `stamps` is false.
fn copy_case(case: &str, to: &Path, stamps: bool) {
    let mut files = BTreeMap::new();
    let from = data_dir().join(case);
    files_under(&from, &from, &mut files);
    for (path, text) in files {
        if !stamps && path.ends_with("/timestamp") {
            continue;
        }
        let path = to.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Two captures of one cluster merged would take each object from
/// whichever folder sorts first; the same data would give two verdicts.
#[rstest]
#[case::two_captures_side_by_side(&["monday", "tuesday"], "holds two captures: ClusterOperator etcd is both in")]
#[case::one_capture(&["monday"], "")]
fn two_captures_of_one_cluster_are_a_usage_error(#[case] folders: &[&str], #[case] says: &str) {
    let tmp = tempfile::tempdir().unwrap();
    for folder in folders {
        copy_case("alerts-4.8", &tmp.path().join(folder), false);
    }
    let out = check_cli(&["--snapshot", tmp.path().to_str().unwrap(), "--to", "4.8.30"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if says.is_empty() {
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for said in [says, tmp.path().to_str().unwrap(), "/monday/", "/tuesday/"] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
}

#[test]
fn a_snapshot_without_a_cluster_version_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    copy_case("alerts-4.8", tmp.path(), true);
    let gone = tmp.path().join("must-gather.local.4418230098765112345");
    let cv = gone
        .join(IMAGE_DIR)
        .join("cluster-scoped-resources/config.openshift.io/clusterversions/version.yaml");
    std::fs::remove_file(cv).unwrap();
    let out = check_cli(&["--snapshot", tmp.path().to_str().unwrap(), "--to", "4.8.30"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("holds no ClusterVersion"), "{stderr}");
    assert!(stderr.contains(tmp.path().to_str().unwrap()), "{stderr}");
}

#[test]
fn now_overrides_the_datas_time_and_the_header_says_as_of() {
    let dir = data_dir().join("old-certificates-4.8");
    let out = check_cli(&["--snapshot", dir.to_str().unwrap(), "--to", "4.8.30"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("as of 2021-12-08T15:30:00Z (the must-gather's timestamp file)"),
        "{text}"
    );
    let out = check_cli(&[
        "--snapshot",
        dir.to_str().unwrap(),
        "--to",
        "4.8.30",
        "--now",
        "2023-06-01T00:00:00Z",
        "-o",
        "json",
    ]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&report["asOf"], &report["asOfSource"]),
        (&json!("2023-06-01T00:00:00Z"), &json!("--now"))
    );
    let ingress = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "IngressCertificateCompatible")
        .unwrap();
    assert_eq!(ingress["outcome"], "Fail", "{ingress}");
    assert!(
        ingress["message"]
            .as_str()
            .unwrap()
            .contains("expired at 2023-03-02"),
        "{ingress}"
    );
}
