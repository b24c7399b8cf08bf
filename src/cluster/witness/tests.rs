use std::collections::HashMap;

use serde_json::json;

use super::*;
use crate::metrics::testing::value;

const OVERRIDES: &str = r#"preflight_gate_overrides_total{kind="force"}"#;
const UNSTORED: &str = "preflight_gate_decisions_unstored_total";
const AMBIGUOUS_TOTAL: &str = "preflight_gate_decisions_ambiguous_total";
const BLOCKED_4153: &str = r#"preflight_gate_update_blocked{target_version="4.15.3"}"#;

/// The API server's part of the ledger: an Event of a name is created
/// once, and says whose it is.
#[derive(Default)]
struct Events(Mutex<HashMap<String, (String, EventNote)>>);

impl Events {
    fn reasons(&self) -> Vec<&'static str> {
        let mut reasons: Vec<_> = self.lock().values().map(|(_, n)| n.reason).collect();
        reasons.sort();
        reasons
    }

    fn note(&self, reason: &str) -> String {
        let events = self.lock();
        let found = events.values().find(|(_, n)| n.reason == reason);
        found.map(|(_, n)| n.message.clone()).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, EventNote)>> {
        self.0.lock().unwrap()
    }
}

impl Ledger for Events {
    fn publish_once<'a>(&'a self, once: Once<'a>) -> BoxFuture<'a, Result<Claim, String>> {
        let mut events = self.lock();
        let claim = match events.get(&once.name) {
            None => {
                let entry = (once.requester.to_owned(), once.note.clone());
                events.insert(once.name.clone(), entry);
                Claim::First
            }
            Some((theirs, _)) if theirs == once.requester => Claim::Same,
            Some((theirs, _)) => Claim::Other(theirs.clone()),
        };
        Box::pin(async move { Ok(claim) })
    }
}

fn cluster_version(target: Option<&str>, annotations: serde_json::Value) -> ClusterVersion {
    let desired = target.map(|v| json!({"version": v}));
    // The API server's version of the object (opaque): one per state here.
    let version = format!("{target:?}{annotations}");
    serde_json::from_value(json!({
        "metadata": {"name": "version", "uid": "cv-uid", "annotations": annotations,
                     "resourceVersion": version},
        "spec": {"clusterID": "c", "channel": "stable-4.15", "desiredUpdate": desired},
    }))
    .unwrap()
}

fn forced(user: &str, target: &str) -> AllowedChange {
    AllowedChange {
        user: user.to_owned(),
        notes: vec![EventNote {
            warning: true,
            reason: "PreflightOverridden",
            message: format!("{user} overrode failing preflight checks for {target}"),
            related: None,
        }],
        override_kind: Some(OverrideKind::Force),
        settled: Some(Settled::Target(target.to_owned())),
        ..AllowedChange::default()
    }
}

fn count(metrics: &Metrics, sample: &str) -> f64 {
    value(metrics, sample).unwrap_or(0.0)
}

/// A replica's witness, publishing into `events`, that has seen the
/// cluster at 4.14.12 with nothing claimed.
fn replica(events: &Arc<Events>) -> (Witness, Metrics, Instant) {
    let metrics = Metrics::new().unwrap();
    let witness = Witness::new(Some(events.clone()), metrics.clone());
    let start = Instant::now();
    let none = witness.observed(&cluster_version(Some("4.14.12"), json!({})), start);
    assert!(none.is_none(), "the first state seen is no change");
    (witness, metrics, start)
}

fn watching() -> (Witness, Metrics, Instant, Arc<Events>) {
    let events = Arc::new(Events::default());
    let (witness, metrics, start) = replica(&events);
    (witness, metrics, start, events)
}

/// What the watch loop does with one object it shows.
async fn sees(witness: &Witness, object: &ClusterVersion, now: Instant) {
    if let Some(record) = witness.observed(object, now) {
        witness.record(record).await;
    }
}

fn force_annotation() -> serde_json::Value {
    json!({"preflight.dev/force": "true", "preflight.dev/force-reason": "INC-1"})
}

#[tokio::test]
async fn an_allowed_override_counts_only_once_the_watch_shows_it_stored() {
    let (witness, metrics, start, events) = watching();
    metrics.admission.target_denied("4.15.3", 1.0);
    let asked = cluster_version(Some("4.15.3"), force_annotation());

    witness.expect(&asked, forced("alice", "4.15.3"));
    assert_eq!(count(&metrics, OVERRIDES), 0.0, "not stored yet");
    assert_eq!(count(&metrics, BLOCKED_4153), 1.0);

    // A status write that changes nothing the decision is joined by.
    sees(
        &witness,
        &cluster_version(Some("4.14.12"), json!({})),
        start,
    )
    .await;
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
    assert!(events.reasons().is_empty());

    sees(&witness, &asked, start).await;
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, BLOCKED_4153), 0.0);
    assert_eq!(events.reasons(), ["PreflightOverridden"]);
    // Recorded once: the same state seen again is no new change.
    sees(&witness, &asked, start).await;
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, UNSTORED), 0.0);
    assert_eq!(count(&metrics, AMBIGUOUS_TOTAL), 0.0);
}

#[tokio::test]
async fn a_forged_review_that_is_never_stored_leaves_only_a_count_of_unstored_decisions() {
    let (witness, metrics, start, events) = watching();
    metrics.admission.target_denied("4.15.3", 1.0);
    // A review claiming system:admin forced 4.15.3, which nobody wrote.
    witness.expect(
        &cluster_version(Some("4.15.3"), force_annotation()),
        forced("system:admin", "4.15.3"),
    );
    // The cluster moves on to something else.
    sees(
        &witness,
        &cluster_version(Some("4.14.13"), json!({})),
        start,
    )
    .await;
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
    assert_eq!(count(&metrics, BLOCKED_4153), 1.0, "the alert stays");

    sees(
        &witness,
        &cluster_version(Some("4.14.13"), json!({})),
        start + STORED_WITHIN + Duration::from_secs(1),
    )
    .await;
    assert_eq!(count(&metrics, UNSTORED), 1.0);
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn a_forged_review_of_the_state_already_stored_is_never_recorded() {
    let (witness, metrics, start, events) = watching();
    // The forgery names exactly what the cluster already holds: only a
    // change to it is a stored write, and later status writes are not.
    witness.expect(
        &cluster_version(Some("4.14.12"), json!({})),
        forced("system:admin", "4.14.12"),
    );
    sees(
        &witness,
        &cluster_version(Some("4.14.12"), json!({})),
        start,
    )
    .await;
    assert_eq!(count(&metrics, OVERRIDES), 0.0);
    assert!(events.reasons().is_empty());
}

#[tokio::test]
async fn two_decisions_of_one_requester_for_one_change_are_recorded_once() {
    let (witness, metrics, start, events) = watching();
    let asked = cluster_version(Some("4.15.3"), force_annotation());
    witness.expect(&asked, forced("alice", "4.15.3"));
    witness.expect(&asked, forced("alice", "4.15.3"));
    sees(&witness, &asked, start).await;
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
    assert_eq!(count(&metrics, UNSTORED), 1.0, "the older one is dropped");
    assert_eq!(count(&metrics, AMBIGUOUS_TOTAL), 0.0);
    assert_eq!(events.reasons(), ["PreflightOverridden"]);
}

/// Trust, third pass, M2: where callers are not authenticated, a forged
/// review can predict a stored change exactly, but not who made it.
#[tokio::test]
async fn decisions_of_different_requesters_for_one_change_are_recorded_as_ambiguous() {
    let (witness, metrics, start, events) = watching();
    let asked = cluster_version(Some("4.15.3"), force_annotation());
    witness.expect(&asked, forced("alice", "4.15.3"));
    witness.expect(&asked, forced("system:admin", "4.15.3"));
    sees(&witness, &asked, start).await;
    assert_eq!(count(&metrics, OVERRIDES), 1.0, "one change, one override");
    assert_eq!(count(&metrics, AMBIGUOUS_TOTAL), 1.0);
    assert_eq!(events.reasons(), ["PreflightOverridden", AMBIGUOUS]);
    let said = events.note(AMBIGUOUS);
    assert!(said.contains("alice, system:admin"), "{said}");
    assert!(said.contains("audit log"), "{said}");
}

/// Trust, third pass, M2: the real decision on one replica, a forgery
/// predicting it on the other. Before, each replica recorded its own:
/// two Events and two overrides for one stored change.
#[tokio::test]
async fn one_stored_change_is_recorded_once_across_replicas_and_a_second_requester_is_ambiguous() {
    let events = Arc::new(Events::default());
    let (real, real_metrics, start) = replica(&events);
    let (forged, forged_metrics, _) = replica(&events);
    let asked = cluster_version(Some("4.15.3"), force_annotation());
    forged.expect(&asked, forced("system:admin", "4.15.3"));
    real.expect(&asked, forced("alice", "4.15.3"));

    sees(&forged, &asked, start).await;
    sees(&real, &asked, start).await;
    let both = |sample| count(&real_metrics, sample) + count(&forged_metrics, sample);
    assert_eq!(both(OVERRIDES), 1.0, "counted once across replicas");
    assert_eq!(both(AMBIGUOUS_TOTAL), 1.0);
    assert_eq!(events.reasons(), ["PreflightOverridden", AMBIGUOUS]);
    let said = events.note(AMBIGUOUS);
    assert!(
        said.contains("alice") && said.contains("system:admin"),
        "{said}"
    );
    // Each replica settles its own blocked targets all the same.
    assert_eq!(count(&real_metrics, BLOCKED_4153), 0.0);
}

#[tokio::test]
async fn replicas_told_of_the_same_requester_record_one_change_once_and_unambiguously() {
    let events = Arc::new(Events::default());
    let (one, one_metrics, start) = replica(&events);
    let (other, other_metrics, _) = replica(&events);
    let asked = cluster_version(Some("4.15.3"), force_annotation());
    // A dry run on one replica, the write on the other.
    one.expect(&asked, forced("alice", "4.15.3"));
    other.expect(&asked, forced("alice", "4.15.3"));
    sees(&one, &asked, start).await;
    sees(&other, &asked, start).await;
    let both = |sample| count(&one_metrics, sample) + count(&other_metrics, sample);
    assert_eq!(both(OVERRIDES), 1.0);
    assert_eq!(both(AMBIGUOUS_TOTAL), 0.0);
    assert_eq!(events.reasons(), ["PreflightOverridden"]);
}

#[test]
fn every_replica_names_one_stored_change_alike_and_another_change_otherwise() {
    let key = record_key("version", "cv-uid", "4711");
    assert_eq!(key, record_key("version", "cv-uid", "4711"));
    assert_ne!(key, record_key("version", "cv-uid", "4712"));
    assert_ne!(key, record_key("version", "other-uid", "4711"));
    // A DNS subdomain, as an Event's name must be, with room for a suffix.
    assert!(key.len() < 200);
    assert!(
        key.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    );
}

#[test]
fn a_flood_of_reviews_keeps_a_bounded_table() {
    let (witness, metrics, _, _) = watching();
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
    let witness = Witness::unwatched(metrics.clone());
    witness.expect(
        &cluster_version(Some("4.15.3"), force_annotation()),
        forced("alice", "4.15.3"),
    );
    assert_eq!(count(&metrics, OVERRIDES), 1.0);
}

#[test]
fn the_join_is_the_uid_the_spec_and_the_gates_own_annotations() {
    let (witness, _, _, _) = watching();
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
