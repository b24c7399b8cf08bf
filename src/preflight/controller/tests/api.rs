//! The reconciler against a scripted API server: the real `reconcile` over a
//! mock client, each request it makes read and answered in turn.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::super::reconcile::reconcile;
use super::super::{Ctx, Settings};
use crate::checks;
use crate::cluster::api_mock::{self, ApiServer, PATIENCE, Seen};
use crate::cluster::live::Reads;
use crate::metrics::Metrics;
use crate::model::annotations::REQUESTED_AT;
use crate::model::release::ReleaseKey;
use crate::model::standing::Exemptions;
use crate::model::status;
use crate::model::vouch::ResultKey;
use crate::model::{CheckResult, UpdatePreflight};
use crate::view::kinds;

const IMAGE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:1111111111111111111111111111111111111111111111111111111111111111";
const REFRESH: Duration = Duration::from_secs(3600);

fn settings() -> Settings {
    Settings {
        newest_runs: Default::default(),
        refresh_interval: REFRESH,
        run_timeout: Duration::from_secs(60),
        check_timeout: Duration::from_secs(30),
        concurrency: 1,
        gc_grace: Duration::from_secs(3600),
        checks: Vec::new(),
        // No Jobs: the run's requests are the built-in suite's alone.
        jobs: None,
        reads: Reads { tls_secrets: false },
        exemptions: Exemptions::default(),
        alerts: None,
        alert_namespaces: Default::default(),
        namespace: "preflight-gate".into(),
    }
}

/// The key this test's gate signs results with.
fn key() -> ResultKey {
    ResultKey::new(&[42; 32]).unwrap()
}

/// `object` with its status signed as the gate signs it.
fn signed(mut object: UpdatePreflight) -> UpdatePreflight {
    let signature = key().sign(&object);
    object.status.as_mut().unwrap().signature = Some(signature);
    object
}

/// The release's own object (so the run asks for no other), with `status`.
fn own_object(status: Option<Value>, requested: Option<Timestamp>) -> UpdatePreflight {
    let mut object: UpdatePreflight = serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {
            "name": ReleaseKey::from_image(IMAGE).object_name(),
            "uid": "7d3c9a52-4c1e-4d2b-9f0e-0a1b2c3d4e5f",
            "generation": 1,
        },
        "spec": {"image": IMAGE, "version": "4.16.3"},
    }))
    .unwrap();
    if let Some(status) = status {
        object.status = Some(serde_json::from_value(status).unwrap());
    }
    if let Some(at) = requested {
        object.metadata.annotations = Some([(REQUESTED_AT.to_owned(), at.to_string())].into());
    }
    object
}

/// What the API server saw of one run.
struct Run {
    running: Value,
    listed: Vec<Seen>,
    done: Value,
    event: Value,
}

fn assert_status_patch(seen: &Seen, name: &str) {
    assert_eq!(seen.method, Method::PATCH);
    assert_eq!(
        seen.path,
        format!("/apis/preflight.dev/v1alpha1/updatepreflights/{name}/status")
    );
    assert!(
        seen.has_query("fieldManager", "preflight-gate"),
        "status written as the gate's field manager: {}",
        seen.query
    );
    assert_eq!(seen.content_type, "application/merge-patch+json");
}

/// Serves one run of `object`: its two status writes, the live view's
/// lists (each an empty list, except that `fail_lists` answers the first
/// with that code) and its Event.
async fn serve_run(api: &mut ApiServer, object: &UpdatePreflight, fail_lists: Option<u16>) -> Run {
    let name = object.name_any();
    // As the API server answers a merge patch: a null removes the field.
    let echo = |patch: &Value| {
        let mut o = serde_json::to_value(object).unwrap();
        let mut status = patch["status"].clone();
        if let Some(fields) = status.as_object_mut() {
            fields.retain(|_, v| !v.is_null());
        }
        o["status"] = status;
        o
    };
    let mut first = api.next().await;
    assert_status_patch(&first, &name);
    let running = first.body.clone();
    first.ok(&echo(&running));

    let mut listed = Vec::new();
    let mut last = loop {
        let mut seen = api.next().await;
        if seen.method != Method::GET {
            break seen;
        }
        match fail_lists {
            Some(code) if listed.is_empty() => {
                seen.fail(code, "InternalError", "etcdserver: leader changed")
            }
            _ => seen.empty_list(),
        }
        listed.push(seen);
    };
    assert_status_patch(&last, &name);
    let done = last.body.clone();
    last.ok(&echo(&done));

    let mut created = api.next().await;
    assert_eq!(created.method, Method::POST);
    assert_eq!(
        created.path,
        "/apis/events.k8s.io/v1/namespaces/default/events"
    );
    let event = created.body.clone();
    created.ok(&event);
    Run {
        running,
        listed,
        done,
        event,
    }
}

/// Runs `reconcile` on `object` while `scenario` answers its requests;
/// neither may take longer than a minute.
async fn reconcile_with<S, F>(object: UpdatePreflight, scenario: S) -> (Action, F::Output)
where
    S: FnOnce(ApiServer, Arc<UpdatePreflight>) -> F,
    F: std::future::Future,
{
    let (client, api) = api_mock::client();
    let metrics = Metrics::new().unwrap();
    let ctx = Arc::new(Ctx::new(
        client,
        settings(),
        metrics,
        "preflight-gate-0".into(),
        key(),
    ));
    let object = Arc::new(object);
    let run = tokio::spawn(reconcile(object.clone(), ctx));
    let both = async {
        let seen = scenario(api, object).await;
        let action = run
            .await
            .expect("reconcile panicked")
            .expect("reconcile failed");
        (action, seen)
    };
    tokio::time::timeout(PATIENCE * 6, both)
        .await
        .expect("the scenario did not finish in time")
}

#[tokio::test]
async fn a_new_target_is_marked_running_read_checked_written_and_evented() {
    let object = own_object(None, None);
    let name = object.name_any();
    let before = Timestamp::now();
    let (action, run) = reconcile_with(object, |mut api, object| async move {
        serve_run(&mut api, &object, None).await
    })
    .await;
    // The mock cluster is empty, so some checks error ("no Nodes in the
    // cluster data"): the run is back within minutes, not at the refresh.
    assert_eq!(action, Action::requeue(crate::model::status::ERRORED_RERUN));

    assert_eq!(run.running["status"]["phase"], "Running");
    let started: Timestamp = run.running["status"]["startTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(started.as_second() >= before.as_second());
    assert!(run.running["status"]["completionTime"].is_null());

    // The live view: one paged list of every kind the checks read, bar the
    // TLS Secrets it is not allowed to read.
    let wanted: Vec<&str> = kinds::listings()
        .filter(|(kind, _)| kind.name != "Secret")
        .map(|(kind, _)| kind.plural)
        .collect();
    let paths: Vec<&str> = run.listed.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths.len(), wanted.len(), "{paths:?}");
    for (path, plural) in paths.iter().zip(&wanted) {
        assert!(
            path.ends_with(&format!("/{plural}")),
            "{path} lists {plural}"
        );
    }
    assert!(run.listed.iter().all(|s| s.has_query("limit", "500")));
    assert!(!paths.iter().any(|p| p.contains("secrets")));

    // One result per built-in check, a phase and a summary, as the gate's.
    let status = &run.done["status"];
    let phase = status["phase"].as_str().unwrap();
    assert!(["Passed", "Failed", "Error"].contains(&phase), "{phase}");
    let names: Vec<&str> = status["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let catalogue: Vec<String> = checks::catalogue()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    assert_eq!(names, catalogue);
    // The summary and the phase are those of the results written.
    let results: Vec<CheckResult> = serde_json::from_value(status["results"].clone()).unwrap();
    let exemptions = Exemptions::default();
    assert_eq!(
        status["summary"],
        serde_json::to_value(exemptions.summarize(&results)).unwrap()
    );
    let (verdict, _, _) = status::conclusion(&results, &exemptions);
    assert_eq!(phase, format!("{verdict:?}"));
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(status["startTime"], run.running["status"]["startTime"]);
    assert!(status["completionTime"].is_string());
    assert_eq!(status["conditions"][0]["type"], "Passed");
    // The update plan of the same (empty) view: the control plane's
    // documented range, as nothing else updates.
    let plan = &status["plan"];
    assert_eq!(plan["controlPlane"]["source"], "documented", "{plan}");
    assert_eq!(
        (plan["p50Seconds"].as_u64(), plan["p90Seconds"].as_u64()),
        (Some(3600), Some(7200))
    );
    let computed: Timestamp = plan["computedAt"].as_str().unwrap().parse().unwrap();
    assert!(computed.as_second() >= before.as_second(), "{plan}");

    // The Event is about the object, and tells the phase.
    assert_eq!(run.event["reason"], format!("Preflight{phase}"));
    assert_eq!(
        run.event["type"],
        if phase == "Passed" {
            "Normal"
        } else {
            "Warning"
        }
    );
    assert_eq!(run.event["action"], "Run");
    assert_eq!(run.event["regarding"]["name"], name);
    assert_eq!(run.event["regarding"]["kind"], "UpdatePreflight");
    assert_eq!(run.event["reportingController"], "preflight-gate");
    assert_eq!(run.event["reportingInstance"], "preflight-gate-0");
    assert_eq!(run.event["note"], status["conditions"][0]["message"]);

    // Signed with the gate's key, as the API server hands it back: what
    // the webhook vouches for. The run under way was not.
    let mut written = object_of(&name);
    written.status = Some(serde_json::from_value(status.clone()).unwrap());
    assert_eq!(key().verify(&written), Ok(()));
    assert!(ResultKey::new(&[7; 32]).unwrap().verify(&written).is_err());
    assert!(
        run.running["status"]["signature"].is_null(),
        "{}",
        run.running
    );
    // Every status field is named, null when the run has none, so that no
    // earlier write's is left beside the signed ones.
    for field in super::super::reconcile::STATUS_FIELDS {
        assert!(run.running["status"].get(field).is_some(), "{field}");
    }
}

/// The object `own_object` makes, by name.
fn object_of(name: &str) -> UpdatePreflight {
    let object = own_object(None, None);
    assert_eq!(object.name_any(), name);
    object
}

/// A result the gate did not sign (someone else wrote it with the gate's
/// field manager, or a gate from before results were signed) is run and
/// written anew, however fresh it says it is.
#[tokio::test]
async fn an_unsigned_result_is_run_again() {
    let (status, started) = finished();
    let object = own_object(Some(status), Some(started - SignedDuration::from_secs(30)));
    let (_, run) = reconcile_with(object, |mut api, object| async move {
        serve_run(&mut api, &object, None).await
    })
    .await;
    assert!(
        run.done["status"]["signature"]
            .as_str()
            .unwrap()
            .starts_with("v2:")
    );
}

/// Trust, third pass, L2: the gate owns its own result's spec. Its suite
/// narrowed by an updater is patched back to the whole suite, with an
/// Event saying so, and the narrowed suite is not run; the repair's new
/// generation runs the whole suite.
#[tokio::test]
async fn a_narrowed_suite_of_the_gates_own_result_is_repaired_not_run() {
    let (status, started) = finished();
    let mut object = signed(own_object(
        Some(status),
        Some(started - SignedDuration::from_secs(30)),
    ));
    object.spec.checks = vec!["EtcdHealthy".into()];
    let name = object.name_any();
    let (action, (patch, event)) = reconcile_with(object, |mut api, object| async move {
        let mut repaired = api.next().await;
        assert_eq!(repaired.method, Method::PATCH);
        assert_eq!(
            repaired.path,
            format!("/apis/preflight.dev/v1alpha1/updatepreflights/{name}")
        );
        assert_eq!(repaired.content_type, "application/merge-patch+json");
        let patch = repaired.body.clone();
        repaired.ok(&serde_json::to_value(&*object).unwrap());
        let mut created = api.next().await;
        assert_eq!(created.method, Method::POST);
        let event = created.body.clone();
        created.ok(&event);
        assert_eq!(api.silent().await, Ok(()), "nothing run");
        (patch, event)
    })
    .await;
    assert_eq!(patch, json!({"spec": {"checks": null}}));
    assert_eq!(event["reason"], "PreflightSpecRepaired");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("narrowed to EtcdHealthy"), "{note}");
    assert_eq!(action, Action::await_change());
}

/// The status fields a write names are every field of the status but
/// `updateDuration`.
#[test]
fn a_status_write_names_every_field_but_the_update_duration() {
    let schema = schemars::schema_for!(crate::model::UpdatePreflightStatus);
    let mut fields: Vec<&str> = schema
        .as_object()
        .and_then(|s| s.get("properties"))
        .and_then(|p| p.as_object())
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|f| *f != "updateDuration")
        .collect();
    fields.sort_unstable();
    let mut written = super::super::reconcile::STATUS_FIELDS.to_vec();
    written.sort_unstable();
    assert_eq!(written, fields);
}

/// A finished run: started two minutes ago, done one minute ago.
fn finished() -> (Value, Timestamp) {
    let now = Timestamp::now();
    let started = now - SignedDuration::from_secs(120);
    let status = json!({
        "phase": "Passed",
        "startTime": started.to_string(),
        "completionTime": (now - SignedDuration::from_secs(60)).to_string(),
        "observedGeneration": 1,
        "results": [{"name": "Old", "outcome": "Pass"}],
    });
    (status, started)
}

#[tokio::test]
async fn a_run_requested_after_the_last_one_started_runs_again() {
    let (status, started) = finished();
    let object = own_object(Some(status), Some(started + SignedDuration::from_secs(30)));
    let (action, run) = reconcile_with(object, |mut api, object| async move {
        serve_run(&mut api, &object, None).await
    })
    .await;
    assert_eq!(action, Action::requeue(crate::model::status::ERRORED_RERUN));
    assert_eq!(run.running["status"]["phase"], "Running");
    let restarted: Timestamp = run.running["status"]["startTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(restarted > started, "a new run, with a new startTime");
    let names: Vec<&str> = run.done["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"Old"),
        "the new run's results replace the old"
    );
    assert!(
        run.event["reason"]
            .as_str()
            .unwrap()
            .starts_with("Preflight")
    );
}

#[tokio::test]
async fn a_request_older_than_the_last_run_makes_no_call() {
    let (status, started) = finished();
    let object = signed(own_object(
        Some(status),
        Some(started - SignedDuration::from_secs(30)),
    ));
    let (action, silent) =
        reconcile_with(object, |mut api, _| async move { api.silent().await }).await;
    assert_eq!(silent, Ok(()), "no request to the API server");
    // Looked at again when the results grow old, an hour after they were
    // made a minute ago.
    let shown = format!("{action:?}");
    let after: f64 = shown
        .split_once("Some(")
        .and_then(|(_, rest)| rest.split_once("s)"))
        .and_then(|(secs, _)| secs.parse().ok())
        .unwrap_or_else(|| panic!("a requeue: {shown}"));
    assert!((3530.0..3541.0).contains(&after), "{shown}");
}

#[tokio::test]
async fn an_unreadable_cluster_ends_the_run_in_error_written_and_evented() {
    let object = own_object(None, None);
    let (action, run) = reconcile_with(object, |mut api, object| async move {
        serve_run(&mut api, &object, Some(500)).await
    })
    .await;
    // An errored run is back within minutes, not at the refresh.
    assert_eq!(action, Action::requeue(crate::model::status::ERRORED_RERUN));
    assert_eq!(
        run.listed.len(),
        1,
        "the run stops reading at the first failure"
    );
    let status = &run.done["status"];
    assert_eq!(status["phase"], "Error");
    let condition = &status["conditions"][0];
    assert_eq!(condition["reason"], "ClusterUnreadable");
    assert_eq!(condition["status"], "False");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with("cannot read the cluster: "),
        "{message}"
    );
    assert!(message.contains("etcdserver: leader changed"), "{message}");
    assert!(status["completionTime"].is_string());
    assert_eq!(status["observedGeneration"], 1);
    // No view, no plan: an earlier run's is removed, not left standing.
    assert_eq!(status.get("plan"), Some(&Value::Null), "{status}");
    assert_eq!(run.event["type"], "Warning");
    assert_eq!(run.event["reason"], "PreflightError");
    assert_eq!(run.event["note"], message);
}
