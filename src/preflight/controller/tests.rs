//! The controller's pure rules (when a run is due, what the status says),
//! and its reconciler and leader loop against a mock API server (`mock`).

mod api;

use std::time::Duration;

use jiff::Timestamp;
use rstest::rstest;
use serde_json::json;

use super::run_due;
use crate::model::annotations::REQUESTED_AT;
use crate::model::standing::Exemptions;
use crate::model::status;
use crate::model::{CheckResult, ClusterVersion, Phase, UpdatePreflight};
use crate::preflight::live::offered;

#[rstest]
#[case(1, "1 check passed")]
#[case(2, "2 checks passed")]
fn a_passed_suite_counts_its_checks_in_words(#[case] n: usize, #[case] says: &str) {
    let results: Vec<CheckResult> = (0..n)
        .map(|i| {
            serde_json::from_value(json!({"name": format!("C{i}"), "outcome": "Pass"})).unwrap()
        })
        .collect();
    let (phase, _, message) = status::conclusion(&results, &Exemptions::default());
    assert_eq!(phase, Phase::Passed);
    assert_eq!(message, says);
}

fn object(
    phase: Option<&str>,
    started: &str,
    completed: Option<&str>,
    generation: i64,
    observed: i64,
    requested: Option<&str>,
) -> UpdatePreflight {
    let mut o: UpdatePreflight = serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": "x", "generation": generation},
        "spec": {"image": "q@sha256:aa"},
    }))
    .unwrap();
    if let Some(requested) = requested {
        o.metadata.annotations = Some([(REQUESTED_AT.to_owned(), requested.to_owned())].into());
    }
    if let Some(phase) = phase {
        o.status = serde_json::from_value(json!({
            "phase": phase, "startTime": started, "completionTime": completed, "observedGeneration": observed
        }))
        .unwrap();
    }
    o
}

#[rstest]
#[case::new(None, None, 1, 0, None, Some("new"))]
#[case::fresh(Some("Passed"), Some("2026-11-30T11:50:00Z"), 1, 1, None, None)]
#[case::spec_changed(
    Some("Passed"),
    Some("2026-11-30T11:50:00Z"),
    2,
    1,
    None,
    Some("the spec changed")
)]
#[case::requested(
    Some("Failed"),
    Some("2026-11-30T11:50:00Z"),
    1,
    1,
    Some("2026-11-30T11:57:00Z"),
    Some("a run was requested")
)]
#[case::requested_before_the_last_run(
    Some("Failed"),
    Some("2026-11-30T11:50:00Z"),
    1,
    1,
    Some("2026-11-30T11:40:00Z"),
    None
)]
#[case::requested_within_the_second_the_run_started(
    Some("Failed"),
    Some("2026-11-30T11:56:30Z"),
    1,
    1,
    Some("2026-11-30T11:56:00.700Z"),
    None
)]
#[case::requested_in_the_future(
    Some("Failed"),
    Some("2026-11-30T11:50:00Z"),
    1,
    1,
    Some("9999-01-01T00:00:00Z"),
    Some("a run was requested")
)]
#[case::old(
    Some("Passed"),
    Some("2026-11-30T10:00:00Z"),
    1,
    1,
    None,
    Some("the results are old")
)]
#[case::running(Some("Running"), None, 1, 1, None, None)]
fn runs_are_due_when_new_changed_requested_or_old(
    #[case] phase: Option<&str>,
    #[case] completed: Option<&str>,
    #[case] generation: i64,
    #[case] observed: i64,
    #[case] requested: Option<&str>,
    #[case] due: Option<&str>,
) {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let o = object(
        phase,
        "2026-11-30T11:56:00Z",
        completed,
        generation,
        observed,
        requested,
    );
    assert_eq!(
        run_due(
            &o,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            "2026-11-30T11:00:00Z".parse().unwrap(),
            now
        ),
        due
    );
}

#[test]
fn a_stamp_asks_for_one_run_even_one_in_the_future() {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let due = |requested: &str, answered: Option<&str>| {
        let mut o = object(
            Some("Passed"),
            "2026-11-30T11:56:00Z",
            Some("2026-11-30T11:57:00Z"),
            1,
            1,
            Some(requested),
        );
        o.status.as_mut().unwrap().observed_request = answered.map(str::to_owned);
        run_due(
            &o,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            "2026-11-30T11:00:00Z".parse().unwrap(),
            now,
        )
    };
    let future = "9999-01-01T00:00:00Z";
    assert_eq!(due(future, None), Some("a run was requested"));
    // The run recorded it: asked once, answered once.
    assert_eq!(due(future, Some(future)), None);
    // A new stamp, even an older time than the one answered, asks again.
    assert_eq!(
        due("2026-11-30T11:00:00Z", Some(future)),
        Some("a run was requested")
    );
}

#[test]
fn a_run_abandoned_by_a_dead_leader_is_started_again() {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let o = object(Some("Running"), "2026-11-30T11:00:00Z", None, 1, 0, None);
    assert_eq!(
        run_due(
            &o,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            "2026-11-30T11:00:00Z".parse().unwrap(),
            now
        ),
        Some("an earlier run did not finish")
    );
    // Recent, but started before this replica led: its leader is gone.
    let recent = object(Some("Running"), "2026-11-30T11:59:00Z", None, 1, 0, None);
    let took_over: Timestamp = "2026-11-30T11:59:30Z".parse().unwrap();
    let due = run_due(
        &recent,
        Duration::from_secs(3600),
        Duration::from_secs(300),
        took_over,
        now,
    );
    assert_eq!(due, Some("an earlier run did not finish"));
    let ours = run_due(
        &recent,
        Duration::from_secs(3600),
        Duration::from_secs(300),
        "2026-11-30T11:58:00Z".parse().unwrap(),
        now,
    );
    assert_eq!(ours, None, "a run this leader started is left to finish");
}

#[test]
fn refresh_zero_never_reruns_for_age() {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let o = object(
        Some("Passed"),
        "2025-01-01T00:00:00Z",
        Some("2025-01-01T00:00:00Z"),
        1,
        1,
        None,
    );
    assert_eq!(
        run_due(
            &o,
            Duration::ZERO,
            Duration::from_secs(300),
            "2025-01-01T00:00:00Z".parse().unwrap(),
            now
        ),
        None
    );
}

/// An errored run, or a run with an errored check, is run again within
/// minutes: a drained extraction pod or a restarting querier must not
/// block every update until the next refresh.
#[rstest]
#[case::errored_run_two_minutes_on(
    Some("Error"),
    None,
    "2026-11-30T11:58:00Z",
    Some("the last run errored")
)]
#[case::errored_run_just_now(Some("Error"), None, "2026-11-30T11:59:00Z", None)]
#[case::an_errored_check(
    Some("Failed"),
    Some("Error"),
    "2026-11-30T11:57:00Z",
    Some("the last run errored")
)]
#[case::a_failing_check_waits_for_the_refresh(
    Some("Failed"),
    Some("Fail"),
    "2026-11-30T11:57:00Z",
    None
)]
fn errored_runs_are_run_again_within_minutes(
    #[case] phase: Option<&str>,
    #[case] check: Option<&str>,
    #[case] completed: &str,
    #[case] due: Option<&str>,
) {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let mut o = object(phase, "2026-11-30T11:56:00Z", Some(completed), 1, 1, None);
    if let Some(outcome) = check {
        o.status.as_mut().unwrap().results = vec![
            serde_json::from_value(json!({"name": "ReleaseDeclaredChecks", "outcome": outcome}))
                .unwrap(),
        ];
    }
    for refresh in [Duration::from_secs(1800), Duration::ZERO] {
        assert_eq!(
            run_due(
                &o,
                refresh,
                Duration::from_secs(300),
                "2026-11-30T11:00:00Z".parse().unwrap(),
                now
            ),
            due,
            "refresh {refresh:?}"
        );
    }
}

#[test]
fn offered_targets_come_from_available_and_conditional_updates() {
    let cv: ClusterVersion = serde_json::from_value(json!({
        "metadata": {"name": "version"},
        "status": {
            "desired": {"version": "4.14.1", "image": "q@sha256:00"},
            "availableUpdates": [{"version": "4.14.12", "image": "q@sha256:11"}, {"version": "4.15.0", "image": ""}],
            "conditionalUpdates": [{"release": {"version": "4.15.16", "image": "q@sha256:33"}, "risks": [], "conditions": []}]
        }
    }))
    .unwrap();
    let images: Vec<String> = offered(&cv).into_iter().map(|r| r.image).collect();
    assert_eq!(images, ["q@sha256:11", "q@sha256:33"]);
}

/// Runs are numbered past the object's last run and any run seen, and at
/// least by the start's second, so a leader that never saw the newest run
/// still numbers past it (M1).
#[test]
fn runs_are_numbered_past_every_earlier_run() {
    let mut object = crate::model::UpdatePreflight::new(
        "release-sha256-aa",
        crate::model::UpdatePreflightSpec {
            image: "q@sha256:aa".into(),
            ..Default::default()
        },
    );
    let at = |s: i64| jiff::Timestamp::from_second(s).unwrap();
    assert_eq!(super::reconcile::next_run(&object, None, at(0)), 1);
    object.status = Some(crate::model::UpdatePreflightStatus {
        run: Some(1_700_000_000),
        ..Default::default()
    });
    // Another run the same second, and one seen signed beyond the object's.
    assert_eq!(
        super::reconcile::next_run(&object, None, at(1_700_000_000)),
        1_700_000_001
    );
    assert_eq!(
        super::reconcile::next_run(&object, Some(1_700_000_050), at(1_700_000_000)),
        1_700_000_051
    );
    // A run written back is older than a new leader's clock.
    assert_eq!(
        super::reconcile::next_run(&object, None, at(1_800_000_000)),
        1_800_000_000
    );
}
