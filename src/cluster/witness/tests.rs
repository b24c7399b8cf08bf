use serde_json::json;

use super::*;
use crate::metrics::testing::value;

const OVERRIDES: &str = r#"preflight_gate_overrides_total{kind="force"}"#;
const UNSTORED: &str = "preflight_gate_decisions_unstored_total";
const BLOCKED_4153: &str = r#"preflight_gate_update_blocked{target_version="4.15.3"}"#;

fn cluster_version(target: Option<&str>, annotations: serde_json::Value) -> ClusterVersion {
    let desired = target.map(|v| json!({"version": v}));
    serde_json::from_value(json!({
        "metadata": {"name": "version", "uid": "cv-uid", "annotations": annotations},
        "spec": {"clusterID": "c", "channel": "stable-4.15", "desiredUpdate": desired},
    }))
    .unwrap()
}

fn forced(user: &str, target: &str) -> Stored {
    Stored {
        user: user.to_owned(),
        override_kind: Some(OverrideKind::Force),
        accepted: Some(Accepted::Target(target.to_owned())),
        ..Stored::default()
    }
}

fn count(metrics: &Metrics, sample: &str) -> f64 {
    value(metrics, sample).unwrap_or(0.0)
}

/// A witness that has seen the cluster at 4.14.12 with nothing claimed.
fn watching() -> (Witness, Metrics, Instant) {
    let metrics = Metrics::new().unwrap();
    let witness = Witness::new(None, metrics.clone(), true);
    let start = Instant::now();
    witness.observed(&cluster_version(Some("4.14.12"), json!({})), start);
    (witness, metrics, start)
}

fn force_annotation() -> serde_json::Value {
    json!({"preflight.dev/force": "true", "preflight.dev/force-reason": "INC-1"})
}

#[test]
fn an_allowed_override_counts_only_once_the_watch_shows_it_stored() {
    let (witness, metrics, start) = watching();
    metrics.admission.target_denied("4.15.3", 1.0);
    let asked = cluster_version(Some("4.15.3"), force_annotation());

    witness.expect(&asked, forced("alice", "4.15.3"));
    assert_eq!(count(&metrics, OVERRIDES), 0.0, "not stored yet");
    assert_eq!(count(&metrics, BLOCKED_4153), 1.0);

    // A status write that changes nothing the decision is joined by.
    witness.observed(&cluster_version(Some("4.14.12"), json!({})), start);
    assert_eq!(count(&metrics, OVERRIDES), 0.0);

    witness.observed(&asked, start);
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, BLOCKED_4153), 0.0);
    // Recorded once: the same state seen again is no new change.
    witness.observed(&asked, start);
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, UNSTORED), 0.0);
}

#[test]
fn a_forged_review_that_is_never_stored_leaves_only_a_count_of_unstored_decisions() {
    let (witness, metrics, start) = watching();
    metrics.admission.target_denied("4.15.3", 1.0);
    // A review claiming system:admin forced 4.15.3, which nobody wrote.
    witness.expect(
        &cluster_version(Some("4.15.3"), force_annotation()),
        forced("system:admin", "4.15.3"),
    );
    // The cluster moves on to something else.
    witness.observed(&cluster_version(Some("4.14.13"), json!({})), start);
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
    assert_eq!(count(&metrics, BLOCKED_4153), 1.0, "the alert stays");

    witness.observed(
        &cluster_version(Some("4.14.13"), json!({})),
        start + STORED_WITHIN + Duration::from_secs(1),
    );
    assert_eq!(count(&metrics, UNSTORED), 1.0);
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
}

#[test]
fn a_forged_review_of_the_state_already_stored_is_never_recorded() {
    let (witness, metrics, start) = watching();
    // The forgery names exactly what the cluster already holds: only a
    // change to it is a stored write, and later status writes are not.
    witness.expect(
        &cluster_version(Some("4.14.12"), json!({})),
        forced("system:admin", "4.14.12"),
    );
    witness.observed(&cluster_version(Some("4.14.12"), json!({})), start);
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
}

#[test]
fn of_two_decisions_for_one_change_the_newest_is_the_one_stored() {
    let (witness, metrics, start) = watching();
    let asked = cluster_version(Some("4.15.3"), force_annotation());
    witness.expect(&asked, forced("mallory", "4.15.3"));
    witness.expect(&asked, forced("alice", "4.15.3"));
    witness.observed(&asked, start);
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, UNSTORED), 1.0, "the older one is dropped");
}

#[test]
fn a_flood_of_reviews_keeps_a_bounded_table() {
    let (witness, metrics, _) = watching();
    for i in 0..MAX_AWAITED + 10 {
        witness.expect(
            &cluster_version(Some(&format!("4.15.{i}")), json!({})),
            forced("mallory", "4.15.3"),
        );
    }
    assert_eq!(witness.lock().awaited.len(), MAX_AWAITED);
    assert_eq!(count(&metrics, UNSTORED), 10.0);
}

#[test]
fn without_a_cluster_a_decision_is_recorded_as_it_is_made() {
    let metrics = Metrics::new().unwrap();
    let witness = Witness::unwatched(None, metrics.clone());
    witness.expect(
        &cluster_version(Some("4.15.3"), force_annotation()),
        forced("alice", "4.15.3"),
    );
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
}

#[test]
fn the_join_is_the_uid_the_spec_and_the_gates_own_annotations() {
    let (witness, _, _) = watching();
    let base = cluster_version(Some("4.15.3"), json!({"other": "x"}));
    let same = cluster_version(Some("4.15.3"), json!({"other": "y"}));
    assert_eq!(witness.fingerprint(&base), witness.fingerprint(&same));
    for differs in [
        cluster_version(Some("4.15.4"), json!({})),
        cluster_version(Some("4.15.3"), json!({"preflight.dev/accept": "A"})),
        {
            let mut other = base.clone();
            other.metadata.uid = "another".into();
            other
        },
        {
            let mut other = base.clone();
            other.spec.upstream = Some("https://graph.example".into());
            other
        },
    ] {
        assert_ne!(witness.fingerprint(&base), witness.fingerprint(&differs));
    }
}
