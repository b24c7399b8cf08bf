//! One set of results, accepted names and fail-open checks, read by the four
//! places that say whether an update may go ahead: the status a run writes,
//! the `check` report, the metrics (and so the alerts) and the webhook. They
//! give the same blocking answer, because all four ask `model::standing`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use jiff::Timestamp;
use preflight_gate::admission::{Authorization, Policy};
use preflight_gate::checks::Context;
use preflight_gate::cluster::witness::Witness;
use preflight_gate::metrics::Metrics;
use preflight_gate::model::standing::Exemptions;
use preflight_gate::model::status::{self, Ending};
use preflight_gate::model::{
    CheckResult, FailurePolicy, Outcome, Severity, Target, UpdatePreflight, UpdatePreflightSpec,
    UpdatePreflightStatus,
};
use preflight_gate::preflight::DirectorySource;
use preflight_gate::report::Report;
use preflight_gate::server::{Gate, app};
use preflight_gate::view::ClusterView;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::harness::{FixedAuthorizer, sum_metric};
use crate::reviews::Review;

/// 4.15.16 in the example review's update graph (a conditional update).
const VERSION: &str = "4.15.16";

fn image() -> String {
    let review = Review::merge_patch_to(VERSION);
    review.0["request"]["oldObject"]["status"]["conditionalUpdates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| &u["release"])
        .find(|r| r["version"] == VERSION)
        .and_then(|r| r["image"].as_str())
        .unwrap()
        .to_owned()
}

fn result(name: &str, outcome: Outcome, severity: Severity) -> CheckResult {
    CheckResult::new(name, severity, outcome, format!("{name} says {outcome:?}"))
}

/// One of each way a result can count.
fn results() -> Vec<CheckResult> {
    let mut vendor = result("VendorOpen", Outcome::Error, Severity::Blocking);
    vendor.failure_policy = Some(FailurePolicy::FailOpen);
    vec![
        result("Passes", Outcome::Pass, Severity::Blocking),
        result("Fails", Outcome::Fail, Severity::Blocking),
        result("Errs", Outcome::Error, Severity::Blocking),
        result("ErrsOpen", Outcome::Error, Severity::Blocking),
        vendor,
        result("Warns", Outcome::Fail, Severity::Warning),
        result("Accepted", Outcome::Fail, Severity::Blocking),
        result("Skips", Outcome::Skipped, Severity::Blocking),
    ]
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// What the controller writes, under the gate's fail-open checks.
fn written(fail_open: &BTreeSet<String>) -> UpdatePreflight {
    let image = image();
    let name = preflight_gate::model::ReleaseKey::from_image(&image).object_name();
    let mut object = UpdatePreflight::new(
        &name,
        UpdatePreflightSpec {
            image,
            version: Some(VERSION.into()),
            checks: Vec::new(),
        },
    );
    object.metadata.generation = Some(1);
    let exemptions = Exemptions::fail_open(fail_open.iter().cloned());
    let (phase, reason, message) = status::conclusion(&results(), &exemptions);
    let mut written = UpdatePreflightStatus::default();
    status::complete(
        &mut written,
        results(),
        &exemptions,
        Ending {
            phase,
            reason,
            message,
            generation: Some(1),
            at: Timestamp::now(),
        },
    );
    object.status = Some(written);
    object
}

/// The checks whose series the UpdatePreflightFailing alert selects:
/// `severity="blocking"` and below 1.
fn alerting(metrics: &Metrics) -> BTreeSet<String> {
    metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("preflight_gate_check_status{"))
        .filter(|l| l.contains("severity=\"blocking\""))
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) < Some(1.0))
        .filter_map(|l| {
            let check = l.split("check=\"").nth(1)?;
            Some(check.split('"').next()?.to_owned())
        })
        .collect()
}

/// The webhook's answer to an update to VERSION accepting `accepted`, over
/// the written object, under the policy's fail-open checks.
async fn webhook(
    object: &UpdatePreflight,
    fail_open: &BTreeSet<String>,
    accepted: &BTreeSet<String>,
) -> (Value, Metrics) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("result.json"),
        serde_json::to_vec(object).unwrap(),
    )
    .unwrap();
    let source = Arc::new(DirectorySource::load(dir.path()).unwrap());
    let metrics = Metrics::new().unwrap();
    let gate = Arc::new(Gate {
        results: source,
        authorizer: FixedAuthorizer::new(Authorization::Allowed),
        events: None,
        witness: Witness::unwatched(metrics.clone()),
        run_requests: preflight_gate::admission::run_requests::RunRequests::new(10, "gate"),
        policy: Policy {
            fail_open_checks: fail_open.clone(),
            ..Policy::default()
        },
        metrics: metrics.clone(),
    });
    let mut review = Review::merge_patch_to(VERSION);
    review.0["request"]["object"]["spec"]["desiredUpdate"]["acceptRisks"] =
        accepted.iter().map(|n| json!({"name": n})).collect();
    let request = Request::builder()
        .method("POST")
        .uri("/validate/clusterversion?timeout=5s")
        .header("content-type", "application/json")
        .body(Body::from(review.body()))
        .unwrap();
    let response = app(gate, 8).oneshot(request).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    (json["response"].clone(), metrics)
}

/// The check names a denial lists as blocking (`- Name: ...` lines).
fn denied_for(response: &Value) -> BTreeSet<String> {
    response["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.split([':', ' ']).next())
        .map(str::to_owned)
        .collect()
}

fn report(fail_open: &BTreeSet<String>, accepted: &BTreeSet<String>) -> Report {
    let view = ClusterView::default();
    let target = Target::image(&image(), Some(VERSION.into()));
    let ctx = Context::new(&view, &target, Timestamp::now());
    Report::new(
        &ctx,
        results(),
        &Exemptions {
            fail_open: fail_open.clone(),
            accepted: accepted.clone(),
            ..Exemptions::default()
        },
    )
}

#[tokio::test]
async fn the_status_the_report_the_metric_and_the_webhook_agree_on_what_blocks() {
    let fail_open = names(&["ErrsOpen"]);
    let object = written(&fail_open);
    let blocking = names(&["Fails", "Errs", "Accepted"]);

    // The status: what blocks before anything is accepted.
    let status = object.status.as_ref().unwrap();
    assert_eq!(status.summary.as_ref().unwrap().failing, 3);
    assert_eq!(
        format!("{:?}", status.phase.unwrap()),
        "Failed",
        "{status:?}"
    );

    // The metric the alert reads, from that status.
    let metrics = Metrics::new().unwrap();
    metrics.results.observe(&object);
    assert_eq!(alerting(&metrics), blocking);

    // The report and the webhook, with nothing accepted.
    let none = BTreeSet::new();
    let r = report(&fail_open, &none);
    assert_eq!((r.summary.failing, r.exit_code()), (3, 3));
    let (response, _) = webhook(&object, &fail_open, &none).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(denied_for(&response), blocking, "{response}");

    // One accepted: the report and the webhook both drop it, and only it.
    let accepted = names(&["Accepted"]);
    let r = report(&fail_open, &accepted);
    assert_eq!((r.summary.failing, r.exit_code()), (2, 3));
    assert_eq!(r.accepted, ["Accepted"]);
    let (response, metrics) = webhook(&object, &fail_open, &accepted).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        denied_for(&response),
        names(&["Fails", "Errs"]),
        "{response}"
    );
    assert_eq!(
        sum_metric(
            &metrics.render(),
            "preflight_gate_update_blocked",
            &[VERSION]
        ),
        1.0
    );

    // Everything that blocks accepted: the report passes with warnings, the
    // webhook allows (the override verb granted) and nothing stays blocked.
    let r = report(&fail_open, &blocking);
    assert_eq!((r.summary.failing, r.exit_code()), (0, 4));
    let (response, metrics) = webhook(&object, &fail_open, &blocking).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        sum_metric(
            &metrics.render(),
            "preflight_gate_update_blocked",
            &[VERSION]
        ),
        0.0
    );
}

#[tokio::test]
async fn a_fail_open_check_the_status_recorded_stays_open_for_a_gate_without_the_flag() {
    // Written under --fail-open-checks=ErrsOpen, read by a gate (or an
    // `oc get`) that does not know the flag: the result says it itself.
    let object = written(&names(&["ErrsOpen"]));
    let none = BTreeSet::new();
    let (response, _) = webhook(&object, &none, &none).await;
    assert_eq!(
        denied_for(&response),
        names(&["Fails", "Errs", "Accepted"]),
        "{response}"
    );
    let erred = object
        .status
        .as_ref()
        .unwrap()
        .results
        .iter()
        .find(|r| r.name == "ErrsOpen");
    assert_eq!(
        erred.and_then(|r| r.failure_policy),
        Some(FailurePolicy::FailOpen)
    );
}
