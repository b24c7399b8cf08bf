//! Parse plus decide for large reviews: the lean parse the webhook uses,
//! against the naive full deserialize into kube's dynamic types.
//!
//! `cargo bench --bench decide`; figures in docs/benchmarks.md.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use jiff::Timestamp;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use preflight_gate::admission::{Policy, decide, review};
use preflight_gate::model::UpdatePreflight;
use preflight_gate::model::vouch::ResultKey;
use preflight_gate::preflight::DirectorySource;
use serde_json::{Value, json};

/// A ClusterVersion with `history` entries and `conditional` conditional
/// updates, each with two risks and a Recommended condition, like a cluster
/// on a long-lived channel.
fn cluster_version(history: usize, conditional: usize) -> Value {
    let image = |i: usize| format!("quay.io/openshift-release-dev/ocp-release@sha256:{i:064x}");
    let history: Vec<Value> = (0..history)
        .map(|i| json!({"state": "Completed", "version": format!("4.{}.{}", 10 + i / 60, i % 60),
            "image": image(i), "startedTime": "2025-01-01T00:00:00Z", "completionTime": "2025-01-01T01:00:00Z",
            "verified": true, "acceptedRisks": "None"}))
        .collect();
    let conditional: Vec<Value> = (0..conditional)
        .map(|i| json!({
            "release": {"version": format!("4.16.{i}"), "image": image(10_000 + i),
                "url": format!("https://access.redhat.com/errata/RHSA-2025:{i}"),
                "channels": ["candidate-4.16", "fast-4.16", "stable-4.16", "eus-4.16"]},
            "risks": [
                {"name": format!("Risk{i}A"), "url": "https://issues.redhat.com/browse/OCPBUGS-12345",
                 "message": "Clusters with a particular configuration may see degraded networking after the update; see the linked bug for the details and the workaround.",
                 "matchingRules": [{"type": "PromQL", "promql": {"promql": "group(cluster_operator_conditions{name=\"aro\"}) or 0 * group(cluster_operator_conditions)"}}]},
                {"name": format!("Risk{i}B"), "url": "https://issues.redhat.com/browse/OCPBUGS-67890",
                 "message": "Nodes may fail to boot after the kernel update on some hardware.",
                 "matchingRules": [{"type": "Always"}]}],
            "conditions": [{"type": "Recommended", "status": "False", "reason": "MultipleReasons",
                "message": "Clusters with a particular configuration may see degraded networking.", "lastTransitionTime": "2025-01-01T00:00:00Z"}]
        }))
        .collect();
    json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version", "uid": "3ba11aa4-3a62-47d1-9158-ec54d4c49e1d", "generation": 7},
        "spec": {"channel": "stable-4.15", "clusterID": "ea006e73-1e7a-4fbc-a12d-ae4109affb3d"},
        "status": {
            "desired": {"version": "4.14.1", "image": image(1)},
            "history": history,
            "availableUpdates": [
                {"version": "4.15.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b"}],
            "conditionalUpdates": conditional,
        }
    })
}

/// An `oc adm upgrade --to 4.15.3` review over that ClusterVersion.
pub fn review(history: usize, conditional: usize) -> Vec<u8> {
    let old = cluster_version(history, conditional);
    let mut new = old.clone();
    new["spec"]["desiredUpdate"] = json!({"version": "4.15.3"});
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a00",
            "kind": {"group": "config.openshift.io", "version": "v1", "kind": "ClusterVersion"},
            "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
            "name": "version", "operation": "UPDATE",
            "userInfo": {"username": "system:admin", "groups": ["system:masters"]},
            "object": new, "oldObject": old, "dryRun": false}
    }))
    .unwrap()
}

/// (name, history entries, conditional updates): ~200 KB per object, and
/// the API's maximum of 500 conditional updates.
const CASES: [(&str, usize, usize); 2] = [("200KB", 150, 155), ("500-conditional", 150, 500)];

fn bench(c: &mut Criterion) {
    let source = DirectorySource::embedded();
    let policy = Policy::default();
    let now = Timestamp::now();
    let mut group = c.benchmark_group("parse_and_decide");
    for (name, history, conditional) in CASES {
        let body = review(history, conditional);
        let object_kb = body.len() / 2 / 1024;
        group.throughput(Throughput::Bytes(body.len() as u64));
        let id = format!("{name} ({object_kb} KiB per object)");
        group.bench_with_input(BenchmarkId::new("lean", &id), &body, |b, body| {
            b.iter(|| {
                let request: review::Request = review::parse(black_box(body)).unwrap();
                let decision = decide(&request, &source, &policy, now);
                black_box(decision)
            })
        });
        group.bench_with_input(
            BenchmarkId::new("naive-full-deserialize", &id),
            &body,
            |b, body| {
                b.iter(|| {
                    // The parse alone: decide is not even counted here.
                    let review: AdmissionReview<DynamicObject> =
                        serde_json::from_slice(black_box(body)).unwrap();
                    black_box(review)
                })
            },
        );
    }
    group.finish();
}

/// Criterion reports means; the budget is a tail latency, so time single
/// iterations too and print their percentiles.
fn percentiles() {
    let source = DirectorySource::embedded();
    let policy = Policy::default();
    let now = Timestamp::now();
    for (name, history, conditional) in CASES {
        let body = review(history, conditional);
        let mut samples: Vec<std::time::Duration> = (0..5_000)
            .map(|_| {
                let started = std::time::Instant::now();
                let request: review::Request = review::parse(black_box(&body)).unwrap();
                black_box(decide(&request, &source, &policy, now));
                started.elapsed()
            })
            .collect();
        samples.sort();
        let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
        println!(
            "parse_and_decide/lean/{name}: {} KiB per object, p50 {:?}, p99 {:?}, max {:?} over {} runs",
            body.len() / 2 / 1024,
            at(0.50),
            at(0.99),
            samples[samples.len() - 1],
            samples.len()
        );
    }
}

/// What the live source adds per review: verifying the gate's signature
/// on the target's result (HMAC-SHA256 over what the decision reads), here
/// on the sample failing result with its 17 checks.
fn signature(c: &mut Criterion) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/results/4.15.3-failing.yaml"
    ))
    .unwrap();
    let mut object: UpdatePreflight = serde_saphyr::from_str(&text).unwrap();
    let key = ResultKey::new(&[7; 32]).unwrap();
    let signature = key.sign(&object);
    if let Some(status) = object.status.as_mut() {
        status.signature = Some(signature);
    }
    c.bench_function("verify_signature/4.15.3-failing", |b| {
        b.iter(|| black_box(key.verify(black_box(&object))))
    });
}

/// What the leader's `--cluster-claims` costs each period: every offered
/// target decided, here the 155 and 500 conditional updates of [`CASES`]
/// against the sample results (most have none: pending).
fn readiness(c: &mut Criterion) {
    let source = DirectorySource::embedded();
    let policy = Policy::default();
    let now = Timestamp::now();
    let mut group = c.benchmark_group("readiness");
    for (name, history, conditional) in CASES {
        let cv: preflight_gate::model::cluster_version::ClusterVersion =
            serde_json::from_value(cluster_version(history, conditional)).unwrap();
        group.throughput(Throughput::Elements(conditional as u64 + 1));
        group.bench_with_input(BenchmarkId::from_parameter(name), &cv, |b, cv| {
            b.iter(|| {
                black_box(preflight_gate::admission::readiness::readiness(
                    black_box(cv),
                    &source,
                    &policy,
                    now,
                ))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, signature, readiness);

fn main() {
    benches();
    percentiles();
    Criterion::default().configure_from_args().final_summary();
}
