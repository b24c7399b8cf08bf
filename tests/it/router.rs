//! The webhook's Router driven without a socket: every answer is a
//! well-formed AdmissionReview, and dryRun has no side effects.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use preflight_gate::admission::Authorization;
use preflight_gate::server::app;
use serde_json::Value;
use tower::ServiceExt;

use crate::harness::{FixedAuthorizer, SampleSource, gate_over, sample_gate, sum_metric};
use crate::reviews::Review;

async fn call(
    router: axum::Router,
    method: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri("/validate/clusterversion?timeout=5s")
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, json)
}

async fn review(body: Vec<u8>) -> Value {
    let (g, _) = sample_gate(FixedAuthorizer::new(Authorization::Denied));
    let (status, json) = call(app(g, 8), "POST", "application/json", body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json["kind"], "AdmissionReview", "{json}");
    assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    json["response"].clone()
}

#[tokio::test]
async fn every_malformed_review_gets_a_well_formed_answer_that_echoes_its_uid() {
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (b"{not json".to_vec(), "", "not valid JSON"),
        (b"".to_vec(), "", "not valid JSON"),
        (br#"{"kind":"AdmissionReview","request":{"uid":"abc","operation":"UPDATE","resource":{"group":"apps","resource":"deployments"}}}"#.to_vec(), "abc", "not deployments.apps"),
        (br#"{"kind":"AdmissionReview","request":{"uid":"def","operation":"UPDATE","resource":{"group":"config.openshift.io","resource":"clusterversions"},"object":[1,2]}}"#.to_vec(), "def", "not a ClusterVersion"),
        (br#"{"kind":"AdmissionReview","request":{"uid":"ghi","operation":"PATCH"}}"#.to_vec(), "ghi", "not valid JSON"),
        (Review::merge_patch_to("4.15.3").uid("").body(), "", "has no uid"),
    ];
    for (body, uid, says) in cases {
        let response = review(body).await;
        assert_eq!(response["uid"], uid);
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        assert!(
            response["status"]["message"]
                .as_str()
                .unwrap()
                .contains(says),
            "{response}"
        );
    }
}

#[tokio::test]
async fn a_decided_review_carries_uid_warnings_and_audit_annotations() {
    let response = review(Review::merge_patch_to("4.15.3").uid("u-1").body()).await;
    assert_eq!(response["uid"], "u-1");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .contains("CriticalAlertsFiring")
    );
    assert_eq!(response["auditAnnotations"]["target"], "4.15.3");

    let response = review(Review::json_patch_to("4.14.12").uid("u-2").body()).await;
    assert_eq!(response["uid"], "u-2");
    assert_eq!(response["allowed"], true);
    assert!(response.get("status").is_none());
}

#[tokio::test]
async fn transport_faults_are_http_errors() {
    let (g, _) = sample_gate(FixedAuthorizer::new(Authorization::Denied));
    let body = Review::merge_patch_to("4.15.3").body();
    let (status, _) = call(app(g.clone(), 8), "GET", "application/json", Vec::new()).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = call(app(g.clone(), 8), "POST", "text/plain", body).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, _) = call(
        app(g, 8),
        "POST",
        "application/json",
        vec![b' '; 8 * 1024 * 1024],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
}

/// A review only ever asks a question: a missing result is pending, and
/// says the gate checks the target by itself; a dry run and a real review
/// get the same answer, and neither asks for anything (a review has no way
/// to start a run at all: `admission::Effect` has none).
#[tokio::test]
async fn a_missing_result_is_pending_for_a_dry_run_and_a_real_review_alike() {
    let (g, _) = sample_gate(FixedAuthorizer::new(Authorization::Denied));
    let (_, json) = call(
        app(g.clone(), 8),
        "POST",
        "application/json",
        Review::merge_patch_to("4.15.16").dry_run().body(),
    )
    .await;
    assert_eq!(json["response"]["allowed"], false);
    assert!(
        json["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .starts_with("preflight for 4.15.16 is running, retry in ~60 s")
    );
    assert!(
        json["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no review starts a run"),
        "{json}"
    );

    let (_, again) = call(
        app(g, 8),
        "POST",
        "application/json",
        Review::merge_patch_to("4.15.16").body(),
    )
    .await;
    assert_eq!(
        again["response"]["status"], json["response"]["status"],
        "the same verdict"
    );
}

/// Trust, third pass, L1: a review's `status` is the caller's to write, so
/// a denial marks a target blocked only where the gate's own watch offers
/// or stores it. Before, any target a review's status offered (a forged
/// review could offer any number) became a blocked series and an alert.
#[tokio::test]
async fn a_denial_marks_a_target_blocked_only_where_the_gates_own_watch_offers_it() {
    let blocked = |g: &preflight_gate::server::Gate| {
        sum_metric(
            &g.metrics.render(),
            "preflight_gate_update_blocked",
            &[r#"target_version="4.15.3""#],
        )
    };
    for (source, offered) in [
        (SampleSource::new(), 1.0),
        (SampleSource::checking_nothing_itself(), 0.0),
    ] {
        let (g, _) = gate_over(source, FixedAuthorizer::new(Authorization::Denied));
        let body = Review::merge_patch_to("4.15.3").body();
        let (_, json) = call(app(g.clone(), 8), "POST", "application/json", body).await;
        assert_eq!(json["response"]["allowed"], false, "{json}");
        assert!(
            json["response"]["status"]["message"]
                .as_str()
                .unwrap()
                .contains("preflight for 4.15.3 failed"),
            "{json}"
        );
        assert_eq!(blocked(&g), offered, "the gate checks it itself: {offered}");
    }
}

/// A review of a run request (an UpdatePreflight created, stamped or
/// changed), as the API server sends it.
fn run_request(user: &str, dry_run: bool) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("run-{user}"),
            "kind": {"group": "preflight.dev", "version": "v1alpha1", "kind": "UpdatePreflight"},
            "resource": {"group": "preflight.dev", "version": "v1alpha1", "resource": "updatepreflights"},
            "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "dryRun": dry_run,
            "object": {"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
                       "metadata": {"name": "manual-1"},
                       "spec": {"image": "quay.io/openshift-release-dev/ocp-release@sha256:aa"}},
        }
    })
    .to_string()
    .into_bytes()
}

async fn call_run_request(
    g: &std::sync::Arc<preflight_gate::server::Gate>,
    body: Vec<u8>,
) -> Value {
    let request = Request::builder()
        .method("POST")
        .uri(format!(
            "{}?timeout=5s",
            preflight_gate::server::webhook::RUN_REQUESTS_PATH
        ))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = app(g.clone(), 8).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// Trust, third pass, L2: whoever may create UpdatePreflights gets
/// `--max-run-requests` runs in 10 minutes (the harness's gate: 10), then a
/// 429 that says when to ask again; a dry run asks for nothing and is not
/// counted, and one requester's count holds nobody else. Before, there was
/// no such path: every request ran.
#[tokio::test]
async fn run_requests_are_limited_per_requester() {
    let (g, _) = sample_gate(FixedAuthorizer::new(Authorization::Denied));
    for _ in 0..3 {
        let dry = call_run_request(&g, run_request("alice", true)).await;
        assert_eq!(dry["response"]["allowed"], true, "{dry}");
    }
    for i in 0..10 {
        let taken = call_run_request(&g, run_request("alice", false)).await;
        assert_eq!(taken["response"]["allowed"], true, "request {i}: {taken}");
        assert_eq!(taken["response"]["uid"], "run-alice");
    }
    let refused = call_run_request(&g, run_request("alice", false)).await;
    let response = &refused["response"];
    assert_eq!(response["allowed"], false, "{refused}");
    assert_eq!(response["status"]["code"], 429);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "preflight-gate: alice has asked for 10 preflight runs in the last 10 minutes"
        ),
        "{message}"
    );
    assert!(message.contains("retry in ~"), "{message}");
    let bob = call_run_request(&g, run_request("bob", false)).await;
    assert_eq!(bob["response"]["allowed"], true, "{bob}");
    assert_eq!(
        sum_metric(
            &g.metrics.render(),
            "preflight_gate_run_requests_refused_total",
            &[]
        ),
        1.0
    );
    // A review of anything else on that path is malformed, and says so.
    let other = call_run_request(&g, Review::merge_patch_to("4.15.3").body()).await;
    assert_eq!(other["response"]["allowed"], false);
    assert_eq!(
        other["response"]["status"]["message"],
        "this path reviews only updatepreflights.preflight.dev"
    );
}

#[tokio::test]
async fn an_override_is_asked_about_once_and_counted_only_when_honoured() {
    let authorizer = FixedAuthorizer::new(Authorization::Allowed);
    let (g, _) = sample_gate(authorizer.clone());
    let body = Review::merge_patch_to("4.15.3")
        .overridden("4.15.3", "tested in staging")
        .body();
    let (_, json) = call(app(g.clone(), 8), "POST", "application/json", body).await;
    let response = &json["response"];
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["auditAnnotations"]["override-by"], "system:admin");
    assert_eq!(
        response["auditAnnotations"]["override-reason"],
        "tested in staging"
    );
    assert_eq!(*authorizer.asked.lock().unwrap(), ["system:admin"]);
    let text = g.metrics.render();
    assert_eq!(
        sum_metric(
            &text,
            "preflight_gate_overrides_total",
            &[r#"kind="force""#]
        ),
        1.0
    );
    assert_eq!(
        sum_metric(
            &text,
            "preflight_gate_admission_reviews_total",
            &[r#"decision="allowed""#, r#"reason="overridden""#]
        ),
        1.0
    );
}

#[tokio::test]
async fn an_access_review_that_outlives_the_budget_refuses_the_override_in_time() {
    let (g, _) = sample_gate(FixedAuthorizer::slow(
        Authorization::Allowed,
        Duration::from_secs(30),
    ));
    let body = Review::merge_patch_to("4.15.3")
        .overridden("4.15.3", "CVE fix")
        .body();
    let request = Request::builder()
        .method("POST")
        .uri("/validate/clusterversion?timeout=1s")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let started = std::time::Instant::now();
    let response = app(g, 8).oneshot(request).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "answered before the API server's timeout"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let json: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(json["response"]["allowed"], false);
    assert!(
        json["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("the access review timed out")
    );
}
