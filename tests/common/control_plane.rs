//! The control plane of tests/control-plane/ as the tests that share one
//! see it: `up` run and its env file read, kubectl with its kubeconfigs,
//! objects applied, the requests `oc adm upgrade` sends, and waiting. The
//! end-to-end world (tests/e2e/cluster.rs) and the node suite's
//! (tests/node/world.rs) are built on it; each includes this file and uses
//! a part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

/// Waiting, shared with the tests that use no control plane
/// (tests/common/support.rs, which each binary including this file includes).
#[allow(unused_imports)]
pub use crate::support::{poll, wait_for};

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// OpenShift's own CRDs (openshift/api, Apache-2.0), in the repository.
pub const OPENSHIFT_CRDS: &str = "tests/data/openshift-crds";

/// The CRDs of the ClusterVersion (as a `Default` cluster serves it) and
/// the ClusterOperator, under `OPENSHIFT_CRDS`, with their names.
pub const CLUSTER_CRDS: [(&str, &str); 2] = [
    (
        "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
        "clusterversions.config.openshift.io",
    ),
    (
        "0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "clusteroperators.config.openshift.io",
    ),
];

/// The ClusterOperators a cluster at rest reports.
pub const OPERATORS: [&str; 4] = ["authentication", "etcd", "kube-apiserver", "machine-config"];

/// What `oc adm upgrade --clear` amounts to: `spec.desiredUpdate` removed.
pub const CLEAR_TARGET: [&str; 6] = [
    "patch",
    "clusterversion",
    "version",
    "--type=json",
    "-p",
    r#"[{"op":"remove","path":"/spec/desiredUpdate"}]"#,
];

/// What a command did, and what it printed.
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `NAME=value` lines.
pub fn vars(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The variables of the control plane's env file.
pub fn read_env(file: &Path) -> HashMap<String, String> {
    let out = run(Command::new("bash")
        .args(["-c", "set -a; source \"$1\"; env", "env"])
        .arg(file));
    assert!(out.ok, "cannot read {}: {}", file.display(), out.stderr);
    vars(&out.stdout)
}

/// A name no other call in this process was given.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// What `oc adm upgrade --to VERSION` sends: a JSON merge patch.
pub fn merge_patch_args(version: &str, extra: &[&str]) -> Vec<String> {
    patch_args(
        json!({"spec": {"desiredUpdate": {"version": version}}}),
        extra,
    )
}

/// What `oc adm upgrade --to-image IMAGE --allow-explicit-upgrade` sends.
pub fn image_patch_args(image: &str, extra: &[&str]) -> Vec<String> {
    let update = json!({"image": image, "version": "", "force": false});
    patch_args(json!({"spec": {"desiredUpdate": update}}), extra)
}

/// kubectl's arguments for a merge patch of the ClusterVersion, then `extra`.
fn patch_args(patch: Value, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["patch", "clusterversion", "version", "--type=merge", "-p"]
        .map(String::from)
        .to_vec();
    args.push(patch.to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The example ClusterVersion `version` (from examples/reviews/, at
/// 4.14.1), whose offered releases the sample results cover: 4.14.12
/// passes, 4.15.3 fails, 4.15.16 has no results.
pub fn example_cluster_version() -> Value {
    let review: Value = serde_json::from_str(include_str!(
        "../../examples/reviews/update-to-4.14.12.json"
    ))
    .unwrap();
    let mut cv = review["request"]["oldObject"].clone();
    cv["metadata"] = json!({"name": "version"});
    cv["status"]["versionHash"] = json!("XGjSjKwUh");
    cv
}

/// A ClusterOperator's status at 4.14.1: healthy, or Degraded with a
/// message since a time.
pub fn operator_status(degraded: Option<(&str, jiff::Timestamp)>) -> Value {
    let now = jiff::Timestamp::now().to_string();
    let (status, reason, message, since) = match degraded {
        Some((message, since)) => ("True", "TestDegraded", message, since.to_string()),
        None => ("False", "AsExpected", "ok", now.clone()),
    };
    json!({"status": {"conditions": [
        {"type": "Available", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
        {"type": "Degraded", "status": status, "lastTransitionTime": since, "reason": reason, "message": message},
        {"type": "Progressing", "status": "False", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"},
        {"type": "Upgradeable", "status": "True", "lastTransitionTime": now, "reason": "AsExpected", "message": "ok"}],
        "versions": [{"name": "operator", "version": "4.14.1"}]}})
}

/// A control plane that `up` brought up (or found up), with a temporary
/// directory for the files the tests hand kubectl.
pub struct ControlPlane {
    env: HashMap<String, String>,
    dir: tempfile::TempDir,
}

impl ControlPlane {
    /// Runs `up` (the script, with its flags and environment) and reads
    /// the env file it names.
    pub fn up(up: &mut Command) -> Self {
        let out = run(up);
        assert!(out.ok, "the control plane did not come up:\n{}", out.stderr);
        let env_file = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("source "))
            .expect("up prints the env file")
            .trim()
            .to_owned();
        Self {
            env: read_env(Path::new(&env_file)),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A variable of the env file.
    pub fn var(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| panic!("{name} is not in the control plane's env file"))
    }

    /// A variable of the env file, if it has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }

    /// Every variable of the env file.
    pub fn env(&self) -> &HashMap<String, String> {
        &self.env
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// kubectl with `kubeconfig`: one of the env file's `*_KUBECONFIG`
    /// variables, naming its user.
    pub fn kubectl_with<S: AsRef<std::ffi::OsStr>>(&self, kubeconfig: &str, args: &[S]) -> Output {
        run(Command::new(self.var("KUBECTL"))
            .arg("--kubeconfig")
            .arg(self.var(kubeconfig))
            .args(args))
    }

    /// kubectl as the admin (system:masters).
    pub fn kubectl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Output {
        self.kubectl_with("ADMIN_KUBECONFIG", args)
    }

    /// kubectl as the admin, which must succeed; its stdout.
    pub fn admin<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(&self, args: &[S]) -> String {
        let out = self.kubectl(args);
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// `kubectl get ARGS -o json`, as the admin.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.admin(&all)).unwrap()
    }

    /// A server-side apply of the file at `path`, taking every field.
    pub fn apply_file(&self, path: &Path) {
        self.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            path.to_str().unwrap(),
        ]);
    }

    /// A server-side apply of `object`, taking every field.
    pub fn apply_json(&self, object: &Value) {
        let path = self.dir().join(format!("apply-{}.json", unique()));
        std::fs::write(&path, object.to_string()).unwrap();
        self.apply_file(&path);
    }

    /// Waits until each CRD (by its name) is established.
    pub fn wait_established(&self, crds: &[&str]) {
        let mut args = vec!["wait", "--for", "condition=established", "--timeout=60s"];
        let names: Vec<String> = crds.iter().map(|crd| format!("crd/{crd}")).collect();
        args.extend(names.iter().map(String::as_str));
        self.admin(&args);
    }

    /// OpenShift's ClusterVersion and ClusterOperator CRDs, established.
    pub fn install_cluster_crds(&self) {
        for (file, _) in CLUSTER_CRDS {
            self.apply_file(&Path::new(ROOT).join(OPENSHIFT_CRDS).join(file));
        }
        self.wait_established(&CLUSTER_CRDS.map(|(_, name)| name));
    }

    /// The ClusterVersion `version` with `cv`'s status, written through the
    /// subresource as the CVO writes it; created first from `cv`'s spec if
    /// there is none.
    pub fn put_cluster_version(&self, cv: &Value) {
        if !self.kubectl(&["get", "clusterversion", "version"]).ok {
            let spec_only = json!({"apiVersion": cv["apiVersion"], "kind": cv["kind"],
                "metadata": cv["metadata"], "spec": cv["spec"]});
            let path = self.dir().join("cv.json");
            std::fs::write(&path, spec_only.to_string()).unwrap();
            self.admin(&["create", "-f", path.to_str().unwrap()]);
        }
        self.patch_cluster_version_status(&cv["status"]);
    }

    /// Merges `status` into the ClusterVersion's, through the /status
    /// subresource, as the CVO writes it.
    pub fn patch_cluster_version_status(&self, status: &Value) {
        let patch = json!({ "status": status }).to_string();
        self.admin(&[
            "patch",
            "clusterversion",
            "version",
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ]);
    }

    /// The ClusterOperator `name` with `status` (see `operator_status`),
    /// created first if there is none.
    pub fn put_cluster_operator(&self, name: &str, status: &Value) {
        if !self.kubectl(&["get", "clusteroperator", name]).ok {
            self.apply_json(&json!({"apiVersion": "config.openshift.io/v1",
                "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}}));
        }
        self.admin(&[
            "patch",
            "clusteroperator",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    }
}
