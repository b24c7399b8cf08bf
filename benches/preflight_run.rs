//! Time from a run being asked for to its result being written, for the
//! suite on the test control plane (tests/control-plane/), through the real
//! controller: an UpdatePreflight is created (as the webhook does on a cache
//! miss) or stamped `requested-at`, and the clock stops when its status says
//! Passed or Failed.
//!
//! `cargo bench --bench preflight_run`; figures in docs/benchmarks.md.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use preflight_gate::metrics::Metrics;
use preflight_gate::model::{Phase, UpdatePreflight, UpdatePreflightSpec};
use preflight_gate::preflight::{controller, leader};
use serde_json::json;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SAMPLES: usize = 20;

fn kubectl(env: &[(String, String)], args: &[&str]) {
    let var = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let out = Command::new(var("KUBECTL"))
        .arg("--kubeconfig")
        .arg(var("ADMIN_KUBECONFIG"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn control_plane() -> Vec<(String, String)> {
    let up = Command::new(format!("{ROOT}/tests/control-plane/up"))
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let stdout = String::from_utf8(up.stdout).unwrap();
    let env_file = stdout
        .lines()
        .find_map(|l| l.strip_prefix("source "))
        .unwrap()
        .trim()
        .to_owned();
    let out = Command::new("bash")
        .args(["-c", "set -a; source \"$1\"; env", "env", &env_file])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn wait_done(api: &Api<UpdatePreflight>, name: &str, after: jiff::Timestamp) -> Duration {
    let started = Instant::now();
    loop {
        if let Some(o) = api.get_opt(name).await.unwrap()
            && let Some(status) = &o.status
            && matches!(
                status.phase,
                Some(Phase::Passed | Phase::Failed | Phase::Error)
            )
            && status.start_time.as_ref().is_some_and(|t| t.0 >= after)
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no result for {name}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)]
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = control_plane();
    for crd in [
        "tests/control-plane/crds/clusterversion.yaml",
        "tests/control-plane/crds/clusteroperator.yaml",
        "deploy/crds/updatepreflights.preflight.dev.yaml",
    ] {
        kubectl(
            &env,
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                &format!("{ROOT}/{crd}"),
            ],
        );
    }
    kubectl(
        &env,
        &[
            "wait",
            "--for",
            "condition=established",
            "--timeout=60s",
            "crd/clusterversions.config.openshift.io",
            "crd/clusteroperators.config.openshift.io",
            "crd/updatepreflights.preflight.dev",
        ],
    );
    let kubeconfig = env
        .iter()
        .find(|(k, _)| k == "ADMIN_KUBECONFIG")
        .unwrap()
        .1
        .clone();
    let client = preflight_gate::cluster::client(Some(Path::new(&kubeconfig)))
        .await
        .unwrap();

    // A cluster at rest: the ClusterVersion and healthy ClusterOperators.
    let gvk = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("config.openshift.io", "v1", kind),
            plural,
        )
    };
    let cvs: Api<DynamicObject> =
        Api::all_with(client.clone(), &gvk("ClusterVersion", "clusterversions"));
    let apply = PatchParams::apply("preflight-bench").force();
    let cv = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"clusterID": "ea006e73-1e7a-4fbc-a12d-ae4109affb3d", "channel": "stable-4.15"}});
    cvs.patch("version", &apply, &Patch::Apply(&cv))
        .await
        .unwrap();
    let status = json!({"status": {"desired": {"version": "4.14.1", "image": "quay.io/ocp/release@sha256:00"}, "availableUpdates": [], "observedGeneration": 1, "versionHash": "x",
        "history": [{"state": "Completed", "version": "4.14.1", "image": "quay.io/ocp/release@sha256:00", "startedTime": "2026-01-01T00:00:00Z", "completionTime": "2026-01-01T01:00:00Z", "verified": true}]}});
    cvs.patch_status("version", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let cos: Api<DynamicObject> =
        Api::all_with(client.clone(), &gvk("ClusterOperator", "clusteroperators"));
    for name in ["etcd", "kube-apiserver", "machine-config", "network"] {
        let co = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": {"name": name}, "spec": {}});
        cos.patch(name, &apply, &Patch::Apply(&co)).await.unwrap();
        let now = jiff::Timestamp::now().to_string();
        let status = json!({"status": {"conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": now},
            {"type": "Degraded", "status": "False", "lastTransitionTime": now}]}});
        cos.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "preflight-bench"}});
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .patch("preflight-bench", &apply, &Patch::Apply(&namespace))
        .await
        .unwrap();

    // One controller, as the leader runs it.
    let settings = controller::Settings {
        newest_runs: Default::default(),
        refresh_interval: Duration::ZERO,
        run_timeout: Duration::from_secs(60),
        check_timeout: Duration::from_secs(10),
        concurrency: 2,
        gc_grace: Duration::from_secs(3600),
        checks: Vec::new(),
        jobs: None,
        reads: preflight_gate::cluster::live::Reads::ALL,
        exemptions: Default::default(),
        alerts: None,
        alert_namespaces: Default::default(),
        namespace: "preflight-bench".into(),
    };
    let metrics = Metrics::new().unwrap();
    let lease = leader::LeaseSettings {
        namespace: "preflight-bench".into(),
        name: "preflight-bench".into(),
        identity: "bench".into(),
        duration: Duration::from_secs(15),
    };
    let work = {
        let (client, metrics) = (client.clone(), metrics.clone());
        move || {
            controller::start(
                client.clone(),
                settings.clone(),
                metrics.clone(),
                "bench".into(),
            )
        }
    };
    tokio::spawn(leader::lead(
        client.clone(),
        lease,
        metrics.clone(),
        work,
        std::future::pending(),
    ));
    while !metrics.controller.is_leader() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let api: Api<UpdatePreflight> = Api::all(client.clone());
    let run = std::process::id();
    let mut created = Vec::new();
    for i in 0..SAMPLES {
        let name = format!("bench-{run}-{i}");
        let object = UpdatePreflight::new(
            &name,
            UpdatePreflightSpec {
                image: format!("quay.io/ocp/release@sha256:{run:08x}{i:056x}"),
                version: Some(format!("4.14.{}", 20 + i)),
                checks: Vec::new(),
            },
        );
        let asked = jiff::Timestamp::now()
            .checked_sub(jiff::SignedDuration::from_secs(1))
            .unwrap();
        let clock = Instant::now();
        api.create(&PostParams::default(), &object).await.unwrap();
        wait_done(&api, &name, asked).await;
        created.push(clock.elapsed());
    }
    let mut requested = Vec::new();
    for i in 0..SAMPLES {
        let name = format!("bench-{run}-{i}");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let asked = jiff::Timestamp::now();
        let clock = Instant::now();
        let stamp =
            json!({"metadata": {"annotations": {"preflight.dev/requested-at": asked.to_string()}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&stamp))
            .await
            .unwrap();
        wait_done(
            &api,
            &name,
            asked
                .checked_sub(jiff::SignedDuration::from_secs(1))
                .unwrap(),
        )
        .await;
        requested.push(clock.elapsed());
    }
    let catalogue = preflight_gate::checks::catalogue().len();
    for (what, samples) in [
        ("new object", &mut created),
        ("requested-at", &mut requested),
    ] {
        println!(
            "trigger to written result ({what}, {catalogue} built-in checks, {SAMPLES} runs): p50 {:?}, p90 {:?}, max {:?}",
            percentile(samples, 0.5),
            percentile(samples, 0.9),
            percentile(samples, 1.0)
        );
    }
    for i in 0..SAMPLES {
        let _ = api
            .delete(&format!("bench-{run}-{i}"), &Default::default())
            .await;
    }
}
