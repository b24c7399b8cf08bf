//! Table-driven tests of the decision contract, through the real parser.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use rstest::rstest;
use serde_json::{Value, json};

use super::ports::{Lookup, ResultLookup, Verb};
use super::*;
use crate::model::UpdatePreflight;
use crate::model::release::ReleaseKey;

const IMG_PASS: &str = "quay.io/ocp/release@sha256:1111";
const IMG_FAIL: &str = "quay.io/ocp/release@sha256:2222";
const IMG_COND: &str = "quay.io/ocp/release@sha256:3333";
const IMG_CURRENT: &str = "quay.io/ocp/release@sha256:0000";

fn now() -> Timestamp {
    "2026-11-30T12:00:00Z".parse().unwrap()
}

/// The results a test source holds, by name; a release's result is the
/// gate's own object for it (named after its digest), as the runtime's
/// cache keeps them.
#[derive(Default)]
struct TestCache(std::sync::Mutex<BTreeMap<String, Arc<UpdatePreflight>>>);

impl TestCache {
    fn apply(&self, object: UpdatePreflight) {
        let name = object.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().insert(name, Arc::new(object));
    }

    fn get(&self, key: &ReleaseKey) -> Option<Arc<UpdatePreflight>> {
        self.0
            .lock()
            .unwrap()
            .get(&key.object_name())
            .filter(|o| ReleaseKey::from_image(&o.spec.image) == *key)
            .cloned()
    }
}

/// A cache-backed source whose trust and run behaviour a test sets.
struct TestSource {
    cache: TestCache,
    trusted: bool,
    runs: bool,
    /// What the update graph offers, where the source knows; None: all.
    offered: Option<BTreeSet<ReleaseKey>>,
    /// Who writes results, as the API server records it; None: offline.
    writer: Option<crate::model::vouch::StatusWriter>,
}

impl ResultLookup for TestSource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup {
            result: self.cache.get(key),
            trusted: self.trusted,
            expires: true,
            status_writer: self.writer.clone(),
        }
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn runs_checks(&self) -> bool {
        self.runs
    }
    fn checks_itself(&self, key: &ReleaseKey) -> bool {
        self.offered.as_ref().is_none_or(|o| o.contains(key))
    }
}

/// The gate's own result for `image`, named after its digest.
fn result(image: &str, phase: &str, completed: &str, checks: Value) -> UpdatePreflight {
    let name = ReleaseKey::from_image(image).object_name();
    serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": name, "generation": 1},
        "spec": {"image": image},
        "status": {"phase": phase, "completionTime": completed, "observedGeneration": 1,
                   "results": checks}
    }))
    .unwrap()
}

fn check(name: &str, severity: &str, outcome: &str) -> Value {
    json!({"name": name, "severity": severity, "outcome": outcome,
           "message": format!("{name} says {outcome}"),
           "remediationURL": format!("https://docs.example/{name}")})
}

/// `check` with the OpenShift names it carries.
fn carrying(mut check: Value, risks: &[&str]) -> Value {
    check["risks"] = json!(risks);
    check
}

fn source() -> TestSource {
    let cache = TestCache::default();
    cache.apply(result(
        IMG_PASS,
        "Passed",
        "2026-11-30T11:00:00Z",
        json!([
            check("ClusterOperatorsHealthy", "Blocking", "Pass"),
            check("CertificatesExpiringSoon", "Warning", "Fail"),
        ]),
    ));
    cache.apply(result(
        IMG_FAIL,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([
            carrying(
                check("ClusterOperatorsHealthy", "Blocking", "Fail"),
                &["ClusterOperatorDown"]
            ),
            carrying(
                check("NodesReady", "Blocking", "Fail"),
                &["KubeNodeNotReady"]
            ),
            check("EtcdHealthy", "Blocking", "Pass"),
            check("CriticalAlertsFiring", "Warning", "Fail"),
        ]),
    ));
    TestSource {
        cache,
        trusted: true,
        runs: true,
        offered: None,
        writer: None,
    }
}

/// The ClusterVersion the tests start from: at 4.14.1, offered 4.14.12
/// (passes), 4.15.3 (fails), and 4.15.16 conditionally (no results).
fn cluster_version() -> Value {
    json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version", "generation": 7},
        "spec": {"channel": "stable-4.15", "clusterID": "c0ffee"},
        "status": {
            "desired": {"version": "4.14.1", "image": IMG_CURRENT},
            "history": [{"state": "Completed", "version": "4.14.1", "image": IMG_CURRENT}],
            "availableUpdates": [
                {"version": "4.14.12", "image": IMG_PASS},
                {"version": "4.15.3", "image": IMG_FAIL},
            ],
            "conditionalUpdates": [{
                "release": {"version": "4.15.16", "image": IMG_COND},
                "risks": [{"name": "SomeRisk", "url": "https://x", "message": "m", "matchingRules": [{"type": "Always"}]}],
                "conditions": [{"type": "Recommended", "status": "False"}]
            }],
        }
    })
}

/// A review builder: starts as an UPDATE of `version` that changes nothing.
struct Review {
    body: Value,
}

impl Review {
    fn new() -> Self {
        Self {
            body: json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "uid-1",
                    "kind": {"group": "config.openshift.io", "version": "v1", "kind": "ClusterVersion"},
                    "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
                    "name": "version", "operation": "UPDATE",
                    "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                    "object": cluster_version(), "oldObject": cluster_version(),
                }
            }),
        }
    }
    fn new_obj(&mut self) -> &mut Value {
        &mut self.body["request"]["object"]
    }
    fn old_obj(&mut self) -> &mut Value {
        &mut self.body["request"]["oldObject"]
    }
    fn to(mut self, update: Value) -> Self {
        self.new_obj()["spec"]["desiredUpdate"] = update;
        self
    }
    fn from(mut self, update: Value) -> Self {
        self.old_obj()["spec"]["desiredUpdate"] = update;
        self
    }
    fn version(self, v: &str) -> Self {
        self.to(json!({"version": v}))
    }
    /// An annotation the ClusterVersion already has, before and after.
    fn annotate(mut self, key: &str, value: &str) -> Self {
        self.old_obj()["metadata"]["annotations"][key] = json!(value);
        self.write(key, value)
    }
    /// An annotation this request writes.
    fn write(mut self, key: &str, value: &str) -> Self {
        self.new_obj()["metadata"]["annotations"][key] = json!(value);
        self
    }
    fn by(mut self, user: &str) -> Self {
        self.body["request"]["userInfo"]["username"] = json!(user);
        self
    }
    fn create(mut self) -> Self {
        self.body["request"]["operation"] = json!("CREATE");
        self.body["request"]["oldObject"] = Value::Null;
        self
    }
    fn set(mut self, pointer: &str, value: Value) -> Self {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        self.body.pointer_mut(parent).unwrap()[key] = value;
        self
    }
    fn parse(&self) -> Request {
        review::parse(self.body.to_string().as_bytes()).unwrap()
    }
}

fn decide_with(review: &Review, source: &TestSource, policy: &Policy) -> Decision {
    decide(&review.parse(), source, policy, now())
}

fn verdict(review: Review) -> Verdict {
    decide_with(&review, &source(), &Policy::default())
        .into_final()
        .expect("no authorization needed")
}

/// Whether the answer says the gate checks the target by itself (and that
/// the review started nothing: no review can).
fn scheduled(v: &Verdict) -> bool {
    v.message
        .contains("The gate checks every target the update graph offers by itself")
        && v.message.contains("no review starts a run")
}

#[rstest]
#[case::channel_only(Review::new().set("/request/object/spec/channel", json!("fast-4.15")), Reason::NoTargetChange)]
#[case::annotation_only(Review::new().version("4.15.3").from(json!({"version": "4.15.3"})).write("x/y", "z"), Reason::NoTargetChange)]
#[case::accept_risks_only(
    Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": "NodesReady"}]})).from(json!({"version": "4.15.3"})),
    Reason::NoTargetChange
)]
#[case::image_added_to_same_version(
    Review::new().to(json!({"version": "4.15.3", "image": IMG_FAIL})).from(json!({"version": "4.15.3"})),
    Reason::NoTargetChange
)]
#[case::cleared(Review::new().from(json!({"version": "4.15.3"})), Reason::Cleared)]
#[case::status_subresource(Review::new().version("4.15.3").set("/request/subResource", json!("status")), Reason::NotGated)]
#[case::other_object(Review::new().version("4.15.3").set("/request/name", json!("other")), Reason::NotGated)]
#[case::delete(Review::new().set("/request/operation", json!("DELETE")), Reason::NotGated)]
#[case::passing(Review::new().version("4.14.12"), Reason::Passed)]
#[case::passing_by_image_in_a_mirror(Review::new().to(json!({"image": "mirror.local/ocp@sha256:1111"})), Reason::Passed)]
#[case::failing(Review::new().version("4.15.3"), Reason::Failed)]
#[case::failing_on_create(Review::new().create().version("4.15.3"), Reason::Failed)]
#[case::retarget(Review::new().version("4.15.3").from(json!({"version": "4.14.12"})), Reason::Failed)]
#[case::missing(Review::new().version("4.15.16"), Reason::Pending)]
#[case::unknown_version(Review::new().version("4.99.0"), Reason::UnknownVersion)]
fn decides_each_row_of_the_contract(#[case] review: Review, #[case] reason: Reason) {
    let v = verdict(review);
    assert_eq!(v.reason, reason, "{v:?}");
    let allowed = matches!(
        reason,
        Reason::NoTargetChange | Reason::Cleared | Reason::NotGated | Reason::Passed
    );
    assert_eq!(v.allowed, allowed, "{v:?}");
    if allowed {
        assert!(v.message.is_empty());
    } else {
        assert!(!v.message.is_empty());
    }
}

#[test]
fn no_op_changes_do_no_lookup_and_trigger_nothing() {
    let v = verdict(
        Review::new()
            .version("4.15.16")
            .from(json!({"version": "4.15.16"})),
    );
    assert_eq!(v.reason, Reason::NoTargetChange);
    assert!(v.effects.is_empty());
    assert!(v.audit.is_empty());
}

#[test]
fn a_failing_target_is_denied_with_each_reason_and_the_way_out() {
    let v = verdict(Review::new().version("4.15.3"));
    assert_eq!(v.code, 403);
    let lines: Vec<&str> = v.message.lines().collect();
    assert_eq!(
        lines[0],
        "preflight for 4.15.3 failed: 2 blocking checks failed"
    );
    assert_eq!(
        lines[1],
        "- ClusterOperatorsHealthy [ClusterOperatorDown]: ClusterOperatorsHealthy says Fail (https://docs.example/ClusterOperatorsHealthy)"
    );
    assert!(lines[2].starts_with("- NodesReady [KubeNodeNotReady]: "));
    assert!(
        v.message
            .contains("oc get updatepreflight release-sha256-2222 -o yaml")
    );
    // The narrowest names: OpenShift's, which each finding carries.
    assert!(
        v.message
            .contains("preflight.dev/accept=ClusterOperatorDown,KubeNodeNotReady ")
    );
    // This cluster's ClusterVersion has no acceptRisks: no oc adm upgrade
    // accept line.
    assert!(
        !v.message.contains("oc adm upgrade accept"),
        "{}",
        v.message
    );
    // Where it has, the line, with the switch oc keeps the command behind.
    let policy = Policy {
        accept_risks_field: true,
        ..Policy::default()
    };
    let with_field = decide_with(&Review::new().version("4.15.3"), &source(), &policy)
        .into_final()
        .unwrap();
    assert!(
        with_field.message.contains(
            "Or: OC_ENABLE_CMD_UPGRADE_ACCEPT_RISKS=true oc adm upgrade accept ClusterOperatorDown,KubeNodeNotReady (writes spec.desiredUpdate.acceptRisks"
        ),
        "{}",
        with_field.message
    );
    assert!(v.message.contains("preflight.dev/override=4.15.3"));
    assert!(
        !v.message.contains("EtcdHealthy"),
        "passing checks are not listed"
    );
    assert_eq!(
        v.warnings,
        [
            "preflight warning: CriticalAlertsFiring: CriticalAlertsFiring says Fail (https://docs.example/CriticalAlertsFiring)"
        ]
    );
    assert_eq!(v.audit.get("target").map(String::as_str), Some("4.15.3"));
    assert!(matches!(&v.effects[..], [Effect::Event(e)] if e.reason == "UpdateBlockedByPreflight"));
}

#[test]
fn a_passing_target_carries_warnings_for_warning_findings() {
    let v = verdict(Review::new().version("4.14.12"));
    assert!(v.allowed);
    assert_eq!(v.warnings.len(), 1);
    assert!(v.warnings[0].starts_with("preflight warning: CertificatesExpiringSoon"));
    assert!(v.effects.is_empty());
}

/// An admin ack is given in openshift-config/admin-acks: the denial lists
/// it with the command its finding gives, and offers only the others for
/// acceptance.
#[test]
fn the_denial_never_offers_an_admin_ack_for_acceptance() {
    let source = source();
    source.cache.apply(result(
        IMG_FAIL,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([
            carrying(
                check("AdminAcksMissing", "Blocking", "Fail"),
                &["AdminAck-ack-4.14-kube-1.28-api-removals-in-4.15"]
            ),
            carrying(
                check("NodesReady", "Blocking", "Fail"),
                &["KubeNodeNotReady"]
            ),
        ]),
    ));
    let v = decide_with(
        &Review::new().version("4.15.3"),
        &source,
        &Policy::default(),
    )
    .into_final()
    .unwrap();
    assert!(!v.allowed);
    assert!(v.message.contains("- AdminAcksMissing ["), "{}", v.message);
    assert!(
        v.message.contains("preflight.dev/accept=KubeNodeNotReady "),
        "{}",
        v.message
    );
    assert!(
        !v.message.contains("accept=AdminAck") && !v.message.contains(",AdminAck"),
        "{}",
        v.message
    );
}

#[test]
fn many_failures_are_cut_to_the_first_few() {
    let source = source();
    let checks: Vec<Value> = (0..8)
        .map(|i| check(&format!("Check{i}"), "Blocking", "Fail"))
        .collect();
    source.cache.apply(result(
        IMG_FAIL,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!(checks),
    ));
    let v = decide_with(
        &Review::new().version("4.15.3"),
        &source,
        &Policy::default(),
    )
    .into_final()
    .unwrap();
    assert!(
        v.message
            .starts_with("preflight for 4.15.3 failed: 8 blocking checks failed\n")
    );
    assert_eq!(
        v.message
            .lines()
            .filter(|l| l.starts_with("- Check"))
            .count(),
        message::MAX_LISTED
    );
    assert!(v.message.contains("\nand 3 more\n"));
}

#[test]
fn a_missing_result_is_pending_while_the_gate_checks_the_target_by_itself() {
    let v = decide_with(
        &Review::new().version("4.15.16"),
        &source(),
        &Policy::default(),
    )
    .into_final()
    .unwrap();
    assert_eq!(v.reason, Reason::Pending);
    assert!(scheduled(&v), "{}", v.message);
    assert!(v.effects.is_empty(), "{:?}", v.effects);
    assert_eq!(
        message::first_line(&v.message),
        "preflight for 4.15.16 is running, retry in ~60 s"
    );
    assert!(v.message.contains("no results yet"));
}

#[test]
fn a_fixed_directory_says_it_cannot_run() {
    let mut s = source();
    s.runs = false;
    let v = decide_with(&Review::new().version("4.15.16"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert_eq!(v.reason, Reason::Pending);
    assert!(
        v.message
            .starts_with("no fresh preflight results for 4.15.16: no results yet")
            && v.message.contains("starts no run"),
        "{}",
        v.message
    );
}

#[rstest]
#[case::stale(
    "Passed",
    "2026-11-29T12:00:00Z",
    1,
    true,
    true,
    "the results are 1d0h old"
)]
#[case::older_spec("Passed", "2026-11-30T11:00:00Z", 2, true, true, "older spec")]
#[case::untrusted_cache("Passed", "2026-11-30T11:00:00Z", 1, false, false, "lost its watch")]
#[case::running("Running", "2026-11-30T11:00:00Z", 1, true, false, "is running")]
#[case::pending("Pending", "2026-11-30T11:00:00Z", 1, true, false, "is running")]
fn stale_and_running_results_are_pending(
    #[case] phase: &str,
    #[case] completed: &str,
    #[case] generation: i64,
    #[case] trusted: bool,
    #[case] checked_by_itself: bool,
    #[case] says: &str,
) {
    let mut s = source();
    s.trusted = trusted;
    let mut r = result(
        IMG_COND,
        phase,
        completed,
        json!([check("A", "Blocking", "Pass")]),
    );
    r.metadata.generation = Some(generation);
    s.cache.apply(r);
    let v = decide_with(&Review::new().version("4.15.16"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert_eq!(v.reason, Reason::Pending, "{v:?}");
    assert!(v.message.contains(says), "{}", v.message);
    assert_eq!(scheduled(&v), checked_by_itself, "{}", v.message);
}

#[test]
fn on_pending_allow_lets_it_through_with_a_warning() {
    let policy = Policy {
        on_pending: OnPending::Allow,
        ..Policy::default()
    };
    let v = decide_with(&Review::new().version("4.15.16"), &source(), &policy)
        .into_final()
        .unwrap();
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::PendingAllowed);
    assert!(v.warnings[0].contains("allowed by --on-pending=allow"));
}

#[rstest]
#[case::fail_closed(None, &[], false)]
#[case::fail_open_by_result(Some("FailOpen"), &[], true)]
#[case::fail_open_by_flag(None, &["Flaky"], true)]
fn an_errored_check_counts_as_failed_unless_fail_open(
    #[case] policy_field: Option<&str>,
    #[case] fail_open: &[&str],
    #[case] allowed: bool,
) {
    let s = source();
    let mut c = check("Flaky", "Blocking", "Error");
    if let Some(p) = policy_field {
        c["failurePolicy"] = json!(p);
    }
    s.cache.apply(result(
        IMG_COND,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([c]),
    ));
    let policy = Policy {
        fail_open_checks: fail_open
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        ..Policy::default()
    };
    let v = decide_with(&Review::new().version("4.15.16"), &s, &policy)
        .into_final()
        .unwrap();
    assert_eq!(v.allowed, allowed, "{v:?}");
    if allowed {
        assert!(v.warnings[0].contains("Flaky (check errored)"));
    } else {
        assert!(v.message.contains("- Flaky (check errored): "));
        // An error is accepted by the check's own name, as a failure is:
        // it is often the gate's own machinery, and runs again soon.
        assert!(
            v.message.contains("preflight.dev/accept=Flaky "),
            "{}",
            v.message
        );
        assert!(
            v.message
                .contains("Flaky errored: the gate runs it again within 2 minutes; to go ahead before then, accept it by name"),
            "{}",
            v.message
        );
        assert!(!v.message.contains("cannot be accepted"), "{}", v.message);
        assert!(
            v.message.contains("preflight.dev/override="),
            "{}",
            v.message
        );
    }
}

/// The accept the denial's command writes, for 4.15.16, as a person pastes
/// it with a reason: every `preflight.dev/accept…` word of its line.
fn pasted_accept(denial: &str) -> Review {
    let line = denial
        .lines()
        .find(|l| l.starts_with("To accept them: "))
        .expect("the denial offers an accept");
    let words = shlex::split(line.trim_start_matches("To accept them: ")).unwrap();
    let mut review = Review::new().version("4.15.16");
    for word in words
        .iter()
        .filter(|w| w.starts_with("preflight.dev/accept"))
    {
        let (key, value) = word.split_once('=').unwrap();
        let value = if value == "<why>" {
            "node replaced, ticket 4711"
        } else {
            value
        };
        review = review.annotate(key, value);
    }
    review
}

/// NodesReady failing on `nodes`, for 4.15.16.
fn nodes_failing(nodes: &[&str]) -> TestSource {
    let s = source();
    let mut nodes_ready = check("NodesReady", "Blocking", "Fail");
    nodes_ready["subjects"] = json!(nodes);
    s.cache.apply(result(
        IMG_COND,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([nodes_ready]),
    ));
    s
}

/// Trust, third pass, L3: an accept counts for what it was written
/// against; when the check finds more, it asks again.
#[test]
fn an_accept_asks_again_when_a_check_finds_more_than_it_was_written_against() {
    let one = nodes_failing(&["worker-1 NotReady"]);
    let denial = decide_with(&Review::new().version("4.15.16"), &one, &Policy::default())
        .into_final()
        .unwrap();
    assert!(
        denial
            .message
            .contains(r#"preflight.dev/accept-findings='{"NodesReady":["worker-1 NotReady"]}'"#),
        "{}",
        denial.message
    );
    let accept = pasted_accept(&denial.message);
    let Decision::NeedsAuthorization(p) = decide_with(&accept, &one, &Policy::default()) else {
        panic!("the pasted accept covers what it saw");
    };
    assert!(p.resolve(Authorization::Allowed).allowed);

    // A second node fails: the same accept no longer counts.
    let two = nodes_failing(&["worker-1 NotReady", "worker-3 NotReady"]);
    let v = decide_with(&accept, &two, &Policy::default())
        .into_final()
        .expect("nothing to authorize");
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message.starts_with("Accept not counted: NodesReady now also finds worker-3 NotReady, which preflight.dev/accept was not written against"),
        "{}",
        v.message
    );
    // Its own command records both, and then counts.
    let again = pasted_accept(&v.message);
    assert!(matches!(
        decide_with(&again, &two, &Policy::default()),
        Decision::NeedsAuthorization(_)
    ));

    // An accept that recorded nothing for the check does not count for it.
    let elsewhere = accept.annotate("preflight.dev/accept-findings", r#"{"EtcdHealthy":[]}"#);
    let v = decide_with(&elsewhere, &one, &Policy::default())
        .into_final()
        .expect("nothing to authorize");
    assert!(
        v.message.starts_with(
            "Accept not counted: preflight.dev/accept-findings records nothing for NodesReady"
        ),
        "{}",
        v.message
    );
}

/// OpenShift's own field has no place to say what it saw: a name in
/// `acceptRisks` accepts by name alone, as the CVO reads it.
#[test]
fn accept_risks_stays_bound_by_its_names() {
    let two = nodes_failing(&["worker-1 NotReady", "worker-3 NotReady"]);
    let review =
        Review::new().to(json!({"version": "4.15.16", "acceptRisks": [{"name": "NodesReady"}]}));
    assert!(matches!(
        decide_with(&review, &two, &Policy::default()),
        Decision::NeedsAuthorization(_)
    ));
}

#[test]
fn an_errored_check_is_offered_for_acceptance_by_its_name_beside_a_failed_one() {
    // NodesReady here carries no OpenShift name: its own is offered.
    let s = source();
    s.cache.apply(result(
        IMG_COND,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([
            check("Flaky", "Blocking", "Error"),
            check("NodesReady", "Blocking", "Fail")
        ]),
    ));
    let v = decide_with(&Review::new().version("4.15.16"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("preflight.dev/accept=NodesReady,Flaky preflight.dev/accept-for="),
        "{}",
        v.message
    );
    assert!(v.message.contains("Flaky errored: "), "{}", v.message);
    // Accepting both by those names, with a reason, lets the update through.
    let review = Review::new()
        .version("4.15.16")
        .annotate("preflight.dev/accept", "NodesReady,Flaky")
        .annotate(
            "preflight.dev/accept-findings",
            r#"{"NodesReady":[],"Flaky":[]}"#,
        )
        .annotate("preflight.dev/accept-for", "4.15.16")
        .annotate("preflight.dev/accept-until", UNTIL)
        .annotate(
            "preflight.dev/accept-reason",
            "extraction pod cannot pull, tracked",
        );
    let Decision::NeedsAuthorization(p) = decide_with(&review, &s, &Policy::default()) else {
        panic!("accepting them asks whether the user may");
    };
    let v = p.resolve(Authorization::Allowed);
    assert!(v.allowed, "{v:?}");
    assert_eq!(v.reason, Reason::RisksAccepted);
    assert_eq!(v.audit["overridden-checks"], "Flaky,NodesReady");
}

#[test]
fn a_run_that_errored_as_a_whole_is_denied() {
    let s = source();
    let mut r = result(IMG_COND, "Error", "2026-11-30T11:00:00Z", json!([]));
    r.status.as_mut().unwrap().conditions.push(
        serde_json::from_value(json!({
            "type": "Passed", "status": "False", "reason": "RunFailed",
            "message": "cannot list nodes: forbidden", "lastTransitionTime": "2026-11-30T11:00:00Z"
        }))
        .unwrap(),
    );
    s.cache.apply(r);
    let v = decide_with(&Review::new().version("4.15.16"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message
            .starts_with("preflight for 4.15.16 errored: cannot list nodes: forbidden\nThe gate runs it again within 2 minutes; retry then.\n"),
        "{}",
        v.message
    );
    // No check to accept, so no accept line with an empty list.
    assert!(!v.message.contains("preflight.dev/accept"), "{}", v.message);
    assert!(
        v.message.contains("preflight.dev/override="),
        "{}",
        v.message
    );
}

fn pending_override(review: Review, policy: &Policy) -> PendingOverride {
    match decide_with(&review, &source(), policy) {
        Decision::NeedsAuthorization(p) => *p,
        Decision::Final(v) => panic!("expected an authorization question, got {v:?}"),
    }
}

/// `preflight.dev/accept-findings` for checks as they fail in
/// [`source`]: each finds the one name it carries there, any other
/// nothing.
fn seen(checks: &str) -> String {
    let map: serde_json::Map<String, serde_json::Value> = checks
        .split(',')
        .map(str::trim)
        .map(|c| {
            let found = match c {
                "ClusterOperatorsHealthy" => json!(["ClusterOperatorDown"]),
                "NodesReady" => json!(["KubeNodeNotReady"]),
                _ => json!([]),
            };
            (c.to_owned(), found)
        })
        .collect();
    serde_json::Value::Object(map).to_string()
}

/// Four hours after `now()`: within the default 24 hours.
const UNTIL: &str = "2026-11-30T16:00:00Z";

fn forced(review: Review) -> Review {
    review
        .annotate("preflight.dev/override", "4.15.3")
        .annotate(
            "preflight.dev/override-reason",
            "CVE fix, MCO degradation understood",
        )
        .annotate("preflight.dev/override-until", UNTIL)
}

/// An accept claim for 4.15.3, within its time limit, written against
/// what the named checks find in [`source`].
fn accepting(review: Review, names: &str) -> Review {
    review
        .annotate("preflight.dev/accept", names)
        .annotate("preflight.dev/accept-findings", &seen(names))
        .annotate("preflight.dev/accept-for", "4.15.3")
        .annotate("preflight.dev/accept-until", UNTIL)
        .annotate("preflight.dev/accept-reason", "known issue, tracked")
}

#[test]
fn an_authorized_force_override_is_allowed_audited_and_evented() {
    let p = pending_override(forced(Review::new().version("4.15.3")), &Policy::default());
    assert_eq!(p.user.username, "alice");
    let v = p.resolve(Authorization::Allowed);
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::Overridden);
    assert_eq!(
        v.override_kind,
        Some(crate::model::standing::OverrideKind::Force)
    );
    assert_eq!(v.audit["override-by"], "alice");
    assert_eq!(
        v.audit["override-reason"],
        "CVE fix, MCO degradation understood"
    );
    assert_eq!(v.audit["overridden-checks"], "*");
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("override by alice for 4.15.3"))
    );
    assert!(
        v.effects
            .iter()
            .any(|e| matches!(e, Effect::Event(n) if n.reason == "PreflightOverridden"))
    );
}

#[rstest]
#[case::not_allowed(
    Authorization::Denied,
    "user \"alice\" is not allowed the \"override\" verb"
)]
#[case::unavailable(Authorization::Unavailable("timed out".into()), "could not be authorized: timed out")]
fn an_unauthorized_force_override_is_refused(#[case] auth: Authorization, #[case] says: &str) {
    let v =
        pending_override(forced(Review::new().version("4.15.3")), &Policy::default()).resolve(auth);
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Failed);
    assert!(v.message.contains(says), "{}", v.message);
    assert!(!v.audit.contains_key("override-by"));
}

#[test]
fn a_force_override_covers_a_missing_result() {
    let review = Review::new()
        .version("4.15.16")
        .annotate("preflight.dev/override", IMG_COND)
        .annotate("preflight.dev/override-reason", "urgent")
        .annotate("preflight.dev/override-until", UNTIL);
    let v = pending_override(review, &Policy::default()).resolve(Authorization::Allowed);
    assert_eq!(v.reason, Reason::Overridden);
}

#[rstest]
#[case::wrong_target(&[("preflight.dev/override", "4.14.12"), ("preflight.dev/override-reason", "CVE fix")], "names 4.14.12, not this target 4.15.3")]
#[case::no_reason(&[("preflight.dev/override", "4.15.3")], "needs a reason in preflight.dev/override-reason")]
#[case::the_denials_placeholder(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "<why>"), ("preflight.dev/override-until", UNTIL)], "preflight.dev/override-reason \"<why>\" is not a reason: say why")]
#[case::empty_reason(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", " "), ("preflight.dev/override-until", UNTIL)], "needs a reason in preflight.dev/override-reason")]
#[case::expired(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix"), ("preflight.dev/override-until", "2026-11-30T11:59:59Z")], "has passed")]
#[case::bad_until(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix"), ("preflight.dev/override-until", "tomorrow")], "is not an RFC 3339 time")]
#[case::no_until(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix")], "preflight.dev/override-until is required (an RFC 3339 time at most 1day ahead)")]
#[case::too_far(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix"), ("preflight.dev/override-until", "9999-01-01T00:00:00Z")], "is more than 1day ahead (--max-override-duration)")]
fn an_invalid_force_annotation_is_ignored_and_says_why(
    #[case] annotations: &[(&str, &str)],
    #[case] says: &str,
) {
    let mut review = Review::new().version("4.15.3");
    for (k, v) in annotations {
        review = review.annotate(k, v);
    }
    let v = verdict(review);
    assert!(!v.allowed);
    // The reason leads: it is what the override's author looks for.
    let first = v.message.lines().next().unwrap();
    assert!(first.starts_with("Override ignored: "), "{}", v.message);
    assert!(first.contains(says), "{}", v.message);
}

#[test]
fn a_force_override_within_its_time_limit_is_honoured() {
    let review = forced(Review::new().version("4.15.3"))
        .annotate("preflight.dev/override-until", "2026-12-01T12:00:00Z");
    let v = pending_override(review, &Policy::default()).resolve(Authorization::Allowed);
    assert!(v.allowed);
}

#[test]
fn desired_update_force_needs_the_flag() {
    let review = || Review::new().to(json!({"version": "4.15.3", "force": true}));
    let v = pending_override(review(), &Policy::default()).resolve(Authorization::Allowed);
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("spec.desiredUpdate.force does not bypass preflight")
    );

    let policy = Policy {
        honor_desired_update_force: true,
        ..Policy::default()
    };
    let v = pending_override(review(), &policy).resolve(Authorization::Allowed);
    assert_eq!(
        v.override_kind,
        Some(crate::model::standing::OverrideKind::DesiredUpdateForce)
    );
}

#[rstest]
#[case::accept_risks(Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": "ClusterOperatorsHealthy"}, {"name": "NodesReady"}]})))]
#[case::annotation(accepting(Review::new().version("4.15.3"), "NodesReady, ClusterOperatorsHealthy"))]
#[case::both(accepting(Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": "NodesReady"}]})), "ClusterOperatorsHealthy"))]
#[case::by_openshifts_names(Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": "ClusterOperatorDown"}, {"name": "KubeNodeNotReady"}]})))]
#[case::by_a_check_name_and_a_risk_name(accepting(Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": "KubeNodeNotReady"}]})), "ClusterOperatorsHealthy"))]
fn accepting_every_failing_check_allows_when_authorized(#[case] review: Review) {
    let p = pending_override(review, &Policy::default());
    let v = p.clone().resolve(Authorization::Allowed);
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::RisksAccepted);
    assert_eq!(
        v.audit["overridden-checks"],
        "ClusterOperatorsHealthy,NodesReady"
    );
    assert_eq!(v.audit["override-by"], "alice");
    // The annotation's reason is the audit's and the Event's; acceptRisks
    // has none.
    let by_annotation = p.clone().resolve(Authorization::Allowed).audit["override-reason"]
        == "known issue, tracked";
    let evented = v.effects.iter().any(|e| {
        matches!(e, Effect::Event(n) if n.reason == "PreflightChecksAccepted"
            && n.message.ends_with(": known issue, tracked") == by_annotation)
    });
    assert!(evented, "{:?}", v.effects);
    assert_eq!(
        v.warnings
            .iter()
            .filter(|w| w.starts_with("preflight check accepted as a risk"))
            .count(),
        2
    );

    let refused = p.resolve(Authorization::Denied);
    assert!(!refused.allowed);
    // The refused accept leaves them failing, and only failing: a denial
    // never says both of one check.
    assert!(
        refused.message.contains("- ClusterOperatorsHealthy")
            && refused.message.contains("- NodesReady"),
        "{}",
        refused.message
    );
    assert!(
        !refused.message.contains("Accepted as risks"),
        "{}",
        refused.message
    );
    assert!(
        refused.message.starts_with("Override ignored: user "),
        "why the override was ignored comes first, not after the accepted risks: {}",
        refused.message
    );
}

#[test]
fn accepting_some_failing_checks_still_denies_the_rest() {
    let v = verdict(
        Review::new()
            .version("4.15.3")
            .annotate("preflight.dev/accept", "NodesReady")
            .annotate("preflight.dev/accept-findings", &seen("NodesReady"))
            .annotate("preflight.dev/accept-for", "4.15.3")
            .annotate("preflight.dev/accept-until", UNTIL)
            .annotate("preflight.dev/accept-reason", "known issue, tracked"),
    );
    assert!(!v.allowed);
    assert!(v.message.starts_with(
        "preflight for 4.15.3 failed: 1 blocking check failed\n- ClusterOperatorsHealthy"
    ));
    assert!(v.message.contains("Accepted as risks: NodesReady"));
    // The command overwrites the accept: it keeps what is accepted already.
    assert!(
        v.message
            .contains("preflight.dev/accept=ClusterOperatorDown,KubeNodeNotReady "),
        "{}",
        v.message
    );
}

#[rstest]
#[case::beside_a_failure("4.15.3", &["NodesReady", "AROBrokenDNSMasq"], false)]
#[case::on_a_pass("4.14.12", &["AROBrokenDNSMasq"], true)]
fn an_accepted_name_no_check_carries_is_said_to_accept_nothing(
    #[case] version: &str,
    #[case] names: &[&str],
    #[case] allowed: bool,
) {
    let accept: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
    let v = verdict(Review::new().to(json!({"version": version, "acceptRisks": accept})));
    assert_eq!(v.allowed, allowed, "{}", v.message);
    let said: Vec<&String> = v
        .warnings
        .iter()
        .filter(|w| w.contains("names no preflight check"))
        .collect();
    assert_eq!(
        said,
        [
            "preflight-gate: the accepted name AROBrokenDNSMasq names no preflight check or risk of this release and accepts nothing at the gate (it accepts check names and the OpenShift risk names the results carry; a risk name may still count for the cluster-version operator)"
        ],
        "{:?}",
        v.warnings
    );
}

#[rstest]
#[case::a_name_a_result_carries("KubeNodeNotReady")]
#[case::a_name_openshift_uses("PodDisruptionBudgetAtLimit")]
#[case::a_cvo_operator_risk("ClusterOperatorUpgradeable-storage")]
#[case::ocs_name_for_an_update_in_progress("Progressing")]
fn an_openshift_name_is_never_said_to_accept_nothing(#[case] name: &str) {
    let v =
        verdict(Review::new().to(json!({"version": "4.15.3", "acceptRisks": [{"name": name}]})));
    assert!(
        !v.warnings.iter().any(|w| w.contains("accepts nothing")),
        "{:?}",
        v.warnings
    );
}

#[test]
fn one_openshift_name_of_two_failing_checks_still_denies_the_other() {
    let v = verdict(
        Review::new()
            .to(json!({"version": "4.15.3", "acceptRisks": [{"name": "KubeNodeNotReady"}]})),
    );
    assert!(!v.allowed);
    assert!(
        v.message.starts_with(
            "preflight for 4.15.3 failed: 1 blocking check failed\n- ClusterOperatorsHealthy [ClusterOperatorDown]"
        ),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("Accepted as risks: NodesReady"),
        "{}",
        v.message
    );
}

#[test]
fn preflight_mode_is_allowed_and_the_review_asks_for_nothing() {
    // Stored, the change names its target, and the controller checks it
    // from there (`preflight::live::checked_itself`).
    let v = verdict(Review::new().to(json!({"version": "4.15.16", "mode": "Preflight"})));
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::PreflightMode);
    assert!(v.effects.is_empty(), "{:?}", v.effects);
}

#[test]
fn the_response_echoes_uid_warnings_and_audit() {
    let review = Review::new().version("4.15.3");
    let request = review.parse();
    let v = verdict(review);
    let json = serde_json::to_value(Response::decided(&request, &v)).unwrap();
    assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(json["response"]["uid"], "uid-1");
    assert_eq!(json["response"]["allowed"], false);
    assert_eq!(json["response"]["status"]["code"], 403);
    assert_eq!(json["response"]["status"]["reason"], "Forbidden");
    assert_eq!(json["response"]["auditAnnotations"]["target"], "4.15.3");
    assert_eq!(json["response"]["warnings"].as_array().unwrap().len(), 1);
}

#[test]
fn result_age_uses_the_policy() {
    let s = source();
    let policy = Policy {
        max_result_age: Duration::from_secs(30 * 60),
        ..Policy::default()
    };
    let v = decide_with(&Review::new().version("4.15.3"), &s, &policy)
        .into_final()
        .unwrap();
    assert_eq!(v.reason, Reason::Pending);
    assert!(
        v.message.contains("the results are 1h0m old"),
        "{}",
        v.message
    );
}

fn four_eyes() -> Policy {
    Policy {
        require_distinct_approver: true,
        ..Policy::default()
    }
}

#[rstest]
#[case::unattributed(None, "it is not set")]
#[case::someone_else(Some("bob"), "it says \"bob\"")]
fn a_claim_write_that_does_not_name_its_writer_is_refused(
    #[case] claimed_by: Option<&str>,
    #[case] says: &str,
) {
    let mut review = Review::new().write("preflight.dev/accept", "NodesReady");
    if let Some(who) = claimed_by {
        review = review.write("preflight.dev/claimed-by", who);
    }
    let v = verdict(review);
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::ClaimRefused);
    assert_eq!(v.code, 403);
    assert!(
        v.message
            .starts_with("preflight-gate: alice may not write preflight.dev/accept"),
        "{}",
        v.message
    );
    assert!(v.message.contains(says), "{}", v.message);
    assert!(
        v.message.contains("preflight.dev/claimed-by=alice"),
        "{}",
        v.message
    );
}

#[test]
fn a_claim_write_that_names_its_writer_needs_the_override_verb() {
    let review = Review::new()
        .write("preflight.dev/override", "4.15.3")
        .write("preflight.dev/override-reason", "CVE fix")
        .write("preflight.dev/override-until", UNTIL)
        .write("preflight.dev/claimed-by", "alice");
    let p = pending_override(review, &Policy::default());
    assert_eq!(p.user.username, "alice");

    let written = p.clone().resolve(Authorization::Allowed);
    assert!(written.allowed);
    assert_eq!(written.reason, Reason::ClaimWritten);
    assert_eq!(written.audit["claims-written-by"], "alice");
    assert_eq!(
        written.audit["claims"],
        "preflight.dev/claimed-by,preflight.dev/override,preflight.dev/override-reason,preflight.dev/override-until"
    );

    let refused = p.clone().resolve(Authorization::Denied);
    assert!(!refused.allowed);
    assert_eq!(refused.reason, Reason::ClaimRefused);
    assert!(
        refused.message.contains(
            r#"Write refused: user "alice" is not allowed the "override" verb on updatepreflights.preflight.dev."#
        ),
        "{}",
        refused.message
    );
    let unavailable = p.resolve(Authorization::Unavailable("timed out".into()));
    assert!(!unavailable.allowed);
    assert!(
        unavailable
            .message
            .contains("the write could not be authorized: timed out")
    );
}

#[rstest]
#[case::removed(Review::new().annotate("preflight.dev/accept", "NodesReady").set("/request/object/metadata/annotations", json!({})))]
#[case::unchanged(Review::new().annotate("preflight.dev/accept", "NodesReady").annotate("preflight.dev/claimed-by", "bob"))]
#[case::other_prefix(Review::new().write("example.com/accept", "NodesReady"))]
fn writes_that_add_or_change_no_claim_are_not_claim_writes(#[case] review: Review) {
    let v = verdict(review);
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::NoTargetChange);
}

#[test]
fn a_claim_written_with_the_target_is_one_question_for_both() {
    // alice accepts both failing checks and asks for 4.15.3 in one write.
    let review = Review::new()
        .version("4.15.3")
        .write("preflight.dev/accept", "NodesReady,ClusterOperatorsHealthy")
        .write(
            "preflight.dev/accept-findings",
            &seen("NodesReady,ClusterOperatorsHealthy"),
        )
        .write("preflight.dev/accept-for", "4.15.3")
        .write("preflight.dev/accept-until", UNTIL)
        .write("preflight.dev/accept-reason", "known issue, tracked")
        .write("preflight.dev/claimed-by", "alice");
    let p = pending_override(review, &Policy::default());
    let granted = p.clone().resolve(Authorization::Allowed);
    assert!(granted.allowed);
    assert_eq!(granted.reason, Reason::RisksAccepted);
    assert_eq!(granted.audit["claims-written-by"], "alice");
    assert_eq!(granted.audit["claimed-by"], "alice");
    let refused = p.resolve(Authorization::Denied);
    assert!(!refused.allowed);
    assert_eq!(refused.reason, Reason::ClaimRefused);
}

#[test]
fn four_eyes_refuses_an_override_its_requester_wrote() {
    let review =
        forced(Review::new().version("4.15.3")).annotate("preflight.dev/claimed-by", "alice");
    let v = decide_with(&review, &source(), &four_eyes())
        .into_final()
        .expect("nothing to authorize");
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message.contains("Override ignored: preflight.dev/override was written by alice, who is changing the target; --require-distinct-approver needs it written by someone other than alice."),
        "{}",
        v.message
    );

    // Without the rule, the same claim is the requester's to use.
    let p = pending_override(review, &Policy::default());
    assert!(p.resolve(Authorization::Allowed).allowed);
}

#[test]
fn four_eyes_refuses_a_claim_that_names_no_writer() {
    let v = decide_with(
        &forced(Review::new().version("4.15.3")),
        &source(),
        &four_eyes(),
    )
    .into_final()
    .unwrap();
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("preflight.dev/override names no writer in preflight.dev/claimed-by"),
        "{}",
        v.message
    );
}

/// A claim bob approved at the generation the spec is at (7).
fn approved_by_bob(review: Review) -> Review {
    review
        .annotate("preflight.dev/claimed-by", "bob")
        .annotate("preflight.dev/claimed-generation", "7")
}

#[test]
fn four_eyes_honours_an_override_another_identity_wrote() {
    let review = approved_by_bob(forced(Review::new().version("4.15.3")));
    let p = pending_override(review, &four_eyes());
    assert_eq!(
        p.user.username, "alice",
        "the requester still needs the verb"
    );
    let v = p.clone().resolve(Authorization::Allowed);
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::Overridden);
    assert_eq!(v.audit["override-by"], "alice");
    assert_eq!(v.audit["claimed-by"], "bob");
    // The audit and the Event name both people: who changed the target
    // and who approved it.
    assert_eq!(v.audit["approved-by"], "bob");
    assert!(
        v.effects.iter().any(|e| matches!(e, Effect::Event(n)
            if n.reason == "PreflightOverridden"
                && n.message.starts_with("alice, approved by bob, overrode the preflight gate for 4.15.3: "))),
        "{:?}",
        v.effects
    );
    assert!(!p.resolve(Authorization::Denied).allowed);
}

#[test]
fn four_eyes_counts_accept_annotations_by_another_identity_only() {
    let accept = || {
        Review::new()
            .version("4.15.3")
            .annotate("preflight.dev/accept", "NodesReady,ClusterOperatorsHealthy")
            .annotate(
                "preflight.dev/accept-findings",
                &seen("NodesReady,ClusterOperatorsHealthy"),
            )
            .annotate("preflight.dev/accept-for", "4.15.3")
            .annotate("preflight.dev/accept-until", UNTIL)
            .annotate("preflight.dev/accept-reason", "known issue, tracked")
    };
    let by_bob = approved_by_bob(accept());
    let v = pending_override(by_bob, &four_eyes()).resolve(Authorization::Allowed);
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::RisksAccepted);
    assert_eq!(v.audit["claimed-by"], "bob");
    assert_eq!(v.audit["approved-by"], "bob");
    assert!(
        v.effects.iter().any(|e| matches!(e, Effect::Event(n)
            if n.message.starts_with("alice, approved by bob, accepted failing preflight checks"))),
        "{:?}",
        v.effects
    );

    // bob wrote it, and bob asks: not four eyes.
    let own = approved_by_bob(accept()).by("bob");
    let v = decide_with(&own, &source(), &four_eyes())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("preflight.dev/accept was written by bob, who is changing the target"),
        "{}",
        v.message
    );
}

#[rstest]
#[case::override_(forced, "preflight.dev/override")]
#[case::accept(|r| accepting(r, "NodesReady,ClusterOperatorsHealthy"), "preflight.dev/accept")]
fn four_eyes_honours_a_claim_for_one_change_of_the_target_only(
    #[case] claim: fn(Review) -> Review,
    #[case] name: &str,
) {
    // bob approved at generation 7; alice's change to 4.15.3 is honoured,
    // and the API server stores the spec as generation 8.
    let first = approved_by_bob(claim(Review::new().version("4.15.3")));
    let v = pending_override(first, &four_eyes()).resolve(Authorization::Allowed);
    assert!(v.allowed, "{}", v.message);

    // Any later change of the target starts from generation 8 (here alice
    // goes back to 4.14.1, then asks for 4.15.3 again): the claim is spent.
    let again = |review: Review| {
        approved_by_bob(review)
            .set("/request/oldObject/metadata/generation", json!(9))
            .set("/request/object/metadata/generation", json!(10))
    };
    let back_again = Review::new()
        .version("4.15.3")
        .from(json!({"version": "4.14.1"}));
    let v = decide_with(&again(claim(back_again)), &source(), &four_eyes())
        .into_final()
        .expect("a spent claim asks nothing");
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message.contains(&format!("{name} does not count for this change: preflight.dev/claimed-generation says \"7\", and the ClusterVersion's spec is at generation 9")),
        "{}",
        v.message
    );
    // The denial's own commands bind a new claim to generation 9.
    assert!(
        v.message.contains(
            "preflight.dev/claimed-by=\"$(oc whoami)\" preflight.dev/claimed-generation=9"
        ),
        "{}",
        v.message
    );
}

#[rstest]
#[case::missing(None, "preflight.dev/claimed-generation is not set")]
#[case::another(Some("6"), "preflight.dev/claimed-generation says \"6\"")]
#[case::not_a_number(Some("latest"), "preflight.dev/claimed-generation says \"latest\"")]
fn four_eyes_refuses_a_claim_written_without_the_generation_it_approves(
    #[case] generation: Option<&str>,
    #[case] says: &str,
) {
    let mut review = Review::new()
        .by("bob")
        .write("preflight.dev/override", "4.15.3")
        .write("preflight.dev/override-reason", "CVE fix")
        .write("preflight.dev/override-until", UNTIL)
        .write("preflight.dev/claimed-by", "bob");
    if let Some(generation) = generation {
        review = review.write("preflight.dev/claimed-generation", generation);
    }
    let v = decide_with(&review, &source(), &four_eyes())
        .into_final()
        .expect("refused before any question");
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::ClaimRefused);
    assert!(v.message.contains(says), "{}", v.message);
    assert!(
        v.message
            .contains("write preflight.dev/claimed-generation=7 with the claims"),
        "{}",
        v.message
    );

    // With the generation it approves, the write asks for the verb; a
    // window alone needs none, and without the rule nothing changes.
    let bound = review.write("preflight.dev/claimed-generation", "7");
    let written = pending_override(bound, &four_eyes()).resolve(Authorization::Allowed);
    assert_eq!(written.reason, Reason::ClaimWritten);
    let window = Review::new()
        .by("bob")
        .write("preflight.dev/window-end", "2026-11-30T20:00:00Z")
        .write("preflight.dev/claimed-by", "bob");
    let p = pending_override(window, &four_eyes());
    assert_eq!(p.verb, Verb::Window);
}

#[test]
fn four_eyes_does_not_count_what_the_requester_writes_with_the_target() {
    let spec_accept = Review::new().to(json!({"version": "4.15.3", "acceptRisks": [
        {"name": "ClusterOperatorsHealthy"}, {"name": "NodesReady"}]}));
    let v = decide_with(&spec_accept, &source(), &four_eyes())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("acceptRisks ClusterOperatorsHealthy,NodesReady is written with the target"),
        "{}",
        v.message
    );

    let policy = Policy {
        honor_desired_update_force: true,
        ..four_eyes()
    };
    let force = Review::new().to(json!({"version": "4.15.3", "force": true}));
    let v = pending_override(force, &policy).resolve(Authorization::Allowed);
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("spec.desiredUpdate.force is written with the target"),
        "{}",
        v.message
    );
}

#[test]
fn text_from_a_check_reaches_the_terminal_clean_and_bounded() {
    // A crafted operator condition: escape sequences that clear the screen
    // and print a fake pass, and a quarter of a megabyte of text.
    let crafted = format!(
        "\u{1b}[2J\u{1b}[HALL CHECKS PASSED\r\n\u{9b}31m{}",
        "x".repeat(250_000)
    );
    let s = source();
    let mut c = check("ClusterOperatorsHealthy", "Blocking", "Fail");
    c["message"] = json!(crafted);
    let mut warn = check("CertificatesExpiringSoon", "Warning", "Fail");
    warn["message"] = json!(format!("\u{7}bell {}", "y".repeat(10_000)));
    s.cache.apply(result(
        IMG_COND,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([c, warn]),
    ));
    let review = Review::new().version("4.15.16");
    let v = decide_with(&review, &s, &Policy::default())
        .into_final()
        .unwrap();
    let json = serde_json::to_value(Response::decided(&review.parse(), &v)).unwrap();
    let message = json["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.len() <= message::MAX_DENIAL,
        "{} bytes",
        message.len()
    );
    assert!(
        !message.chars().any(|c| c.is_control() && c != '\n'),
        "{message:?}"
    );
    let line = message
        .lines()
        .find(|l| l.starts_with("- ClusterOperatorsHealthy"))
        .unwrap();
    assert!(
        line.starts_with("- ClusterOperatorsHealthy: [2J [HALL CHECKS PASSED 31mxxx"),
        "{line}"
    );
    assert!(
        line.ends_with(" more characters cut) (https://docs.example/ClusterOperatorsHealthy)"),
        "{line}"
    );
    assert!(line.chars().count() < message::MAX_LINE + 120, "{line}");
    for warning in json["response"]["warnings"].as_array().unwrap() {
        let warning = warning.as_str().unwrap();
        assert!(
            warning.chars().count() <= message::MAX_WARNING + 40,
            "{warning}"
        );
        assert!(!warning.chars().any(char::is_control), "{warning:?}");
    }
}

#[test]
fn an_answer_past_its_budget_is_cut_at_a_line_and_says_so() {
    let long: Vec<String> = (0..100)
        .map(|i| format!("line {i}: {}", "z".repeat(100)))
        .collect();
    let bounded = message::bounded(&long.join("\n"));
    assert!(bounded.len() <= message::MAX_DENIAL, "{}", bounded.len());
    assert!(bounded.starts_with("line 0: "));
    let last = bounded.lines().last().unwrap();
    assert!(
        last.starts_with("… ") && last.ends_with(" more lines cut; the full report has everything"),
        "{last}"
    );
    let kept = bounded.lines().count() - 1;
    assert_eq!(
        last,
        format!(
            "… {} more lines cut; the full report has everything",
            100 - kept
        )
    );
    // A short answer is left as it is.
    assert_eq!(message::bounded("a\nb"), "a\nb");
}

#[rstest]
#[case::passing_target(Review::new().to(json!({"version": "4.14.12", "force": true})))]
#[case::force_only(Review::new().to(json!({"version": "4.14.12", "force": true})).from(json!({"version": "4.14.12"})))]
fn setting_force_needs_the_override_verb_whatever_the_checks_say(#[case] review: Review) {
    let p = pending_override(review, &Policy::default());
    assert!(p.clone().resolve(Authorization::Allowed).allowed);
    let refused = p.resolve(Authorization::Denied);
    assert!(!refused.allowed);
    assert_eq!(refused.code, 403);
    assert!(
        refused
            .message
            .starts_with("preflight-gate: alice may not set spec.desiredUpdate.force"),
        "{}",
        refused.message
    );
}

/// Whoever chooses the update graph chooses what the cluster is offered
/// (and, before releases were verified by signature, what ran as pods):
/// a write of what the cluster trusts needs the override verb, alone or
/// beside a target change, and is audited when allowed.
#[rstest]
#[case::a_graph_of_ones_own("/request/object/spec/upstream", json!("https://graph.attacker.example/api/upgrades_info"), "spec.upstream")]
#[case::signature_stores("/request/object/spec/signatureStores", json!([{"url": "https://sigs.attacker.example"}]), "spec.signatureStores")]
#[case::an_unmanaged_operator(
    "/request/object/spec/overrides",
    json!([{"kind": "Deployment", "group": "apps", "namespace": "openshift-cluster-version", "name": "cluster-version-operator", "unmanaged": true}]),
    "spec.overrides"
)]
#[case::capabilities("/request/object/spec/capabilities", json!({"baselineCapabilitySet": "vCurrent"}), "spec.capabilities")]
fn changing_what_the_cluster_trusts_needs_the_override_verb(
    #[case] pointer: &str,
    #[case] value: Value,
    #[case] field: &str,
) {
    for review in [
        Review::new().set(pointer, value.clone()),
        Review::new().version("4.14.12").set(pointer, value.clone()),
    ] {
        let p = pending_override(review, &Policy::default());
        let refused = p.clone().resolve(Authorization::Denied);
        assert!(!refused.allowed);
        assert_eq!(refused.code, 403);
        assert!(
            refused
                .message
                .starts_with(&format!("preflight-gate: alice may not change {field}\n")),
            "{}",
            refused.message
        );
        assert!(
            refused
                .message
                .contains("Write refused: user \"alice\" is not allowed the \"override\" verb"),
            "{}",
            refused.message
        );
        let granted = p.resolve(Authorization::Allowed);
        assert!(granted.allowed, "{granted:?}");
        assert_eq!(granted.audit["trust-changed-by"], "alice");
        assert_eq!(granted.audit["trust-changed"], field);
        assert!(
            granted.effects.iter().any(|e| matches!(e, Effect::Event(n)
                if n.reason == "PreflightTrustChanged" && n.message.starts_with(&format!("alice changed {field}")))),
            "{:?}",
            granted.effects
        );
    }
}

#[test]
fn what_the_cluster_trusts_left_as_it_was_asks_nothing() {
    let same = |r: Review| {
        r.set(
            "/request/object/spec/upstream",
            json!("https://graph.example"),
        )
        .set(
            "/request/oldObject/spec/upstream",
            json!("https://graph.example"),
        )
    };
    let v = verdict(same(Review::new()).set("/request/object/spec/channel", json!("fast-4.15")));
    assert!(v.allowed, "{v:?}");
    assert!(!v.audit.contains_key("trust-changed-by"));
    // A target change beside it is judged as any other.
    let v = verdict(same(Review::new()).version("4.14.12"));
    assert!(v.allowed, "{v:?}");
}

#[test]
fn force_left_as_it_was_asks_nothing() {
    let v = verdict(
        Review::new()
            .to(json!({"version": "4.14.12", "force": true}))
            .from(json!({"version": "4.14.12", "force": true})),
    );
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::NoTargetChange);
}

#[rstest]
#[case::mode_dropped(json!({"version": "4.15.3", "mode": "Preflight"}), json!({"version": "4.15.3"}), "4.15.3")]
#[case::architecture_multi(json!({"version": "4.15.3"}), json!({"version": "4.15.3", "architecture": "Multi"}), "4.15.3 (multi-architecture)")]
fn a_change_of_mode_or_architecture_is_a_target_change(
    #[case] from: Value,
    #[case] to: Value,
    #[case] named: &str,
) {
    let v = verdict(Review::new().to(to).from(from));
    assert!(!v.allowed, "{v:?}");
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message
            .starts_with(&format!("preflight for {named} failed")),
        "{}",
        v.message
    );
}

/// What `oc adm upgrade --to-multi-arch` writes: the version the cluster
/// runs, on the multi-architecture payload. A whole payload change, judged
/// by the results for this version's release (none yet: a run is asked
/// for), never "the release it runs".
#[test]
fn a_migration_to_multi_architecture_is_judged_not_waved_through() {
    let v = verdict(Review::new().to(json!({"version": "4.14.1", "architecture": "Multi"})));
    assert!(!v.allowed, "{v:?}");
    assert_ne!(v.reason, Reason::NoTargetChange);
    assert_eq!(v.target.as_deref(), Some("4.14.1 (multi-architecture)"));
    assert!(
        v.message.contains("4.14.1 (multi-architecture)"),
        "{}",
        v.message
    );
    // The CVO took it: the cluster now runs Multi, and asking again is no
    // change.
    let mut review = Review::new().to(json!({"version": "4.14.1", "architecture": "Multi"}));
    review.new_obj()["status"]["desired"]["architecture"] = json!("Multi");
    let again = verdict(review);
    assert!(again.allowed, "{again:?}");
    assert_eq!(again.reason, Reason::NoTargetChange);
}

#[rstest]
#[case::no_target(&[], "preflight.dev/accept needs the target it is for in preflight.dev/accept-for")]
#[case::another_target(&[("preflight.dev/accept-for", "4.14.12"), ("preflight.dev/accept-until", UNTIL)], "preflight.dev/accept is for 4.14.12 (preflight.dev/accept-for), not this target 4.15.3")]
#[case::no_reason(&[("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-until", UNTIL)], "preflight.dev/accept needs a reason in preflight.dev/accept-reason")]
#[case::no_until(&[("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "known issue")], "preflight.dev/accept-until is required")]
#[case::expired(&[("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "known issue"), ("preflight.dev/accept-until", "2026-11-30T11:00:00Z")], "preflight.dev/accept-until 2026-11-30T11:00:00Z has passed")]
fn a_leftover_accept_weakens_no_later_update(#[case] bounds: &[(&str, &str)], #[case] says: &str) {
    let mut review = Review::new()
        .version("4.15.3")
        .annotate("preflight.dev/accept", "NodesReady,ClusterOperatorsHealthy");
    for (k, v) in bounds {
        review = review.annotate(k, v);
    }
    let v = verdict(review);
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message.contains(&format!("Override ignored: {says}")),
        "{}",
        v.message
    );
    assert!(!v.message.contains("Accepted as risks"), "{}", v.message);
}

#[rstest]
#[case::override_without_until(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix")], "preflight.dev/override-until is required")]
#[case::override_too_far(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "CVE fix"), ("preflight.dev/override-until", "2026-12-02T12:00:01Z")], "is more than 1day ahead")]
#[case::accept_without_target(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-until", UNTIL)], "needs the target it is for in preflight.dev/accept-for")]
#[case::accept_without_reason(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-until", UNTIL)], "preflight.dev/accept needs a reason in preflight.dev/accept-reason")]
#[case::accept_without_until(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "known issue")], "preflight.dev/accept-until is required")]
#[case::accept_with_a_placeholder(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "<why>"), ("preflight.dev/accept-until", UNTIL)], "preflight.dev/accept-reason \"<why>\" is not a reason: say why this update goes ahead")]
#[case::override_with_a_placeholder(&[("preflight.dev/override", "4.15.3"), ("preflight.dev/override-reason", "TODO"), ("preflight.dev/override-until", UNTIL)], "preflight.dev/override-reason \"TODO\" is not a reason")]
#[case::accept_without_findings(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "known issue"), ("preflight.dev/accept-until", UNTIL)], "preflight.dev/accept needs the findings it was written against in preflight.dev/accept-findings")]
#[case::accept_with_findings_not_json(&[("preflight.dev/accept", "NodesReady"), ("preflight.dev/accept-for", "4.15.3"), ("preflight.dev/accept-reason", "known issue"), ("preflight.dev/accept-until", UNTIL), ("preflight.dev/accept-findings", "NodesReady=worker-1")], "preflight.dev/accept-findings is not a JSON object of check names to lists of findings")]
fn a_claim_is_refused_as_written_when_its_bounds_are_wrong(
    #[case] written: &[(&str, &str)],
    #[case] says: &str,
) {
    let mut review = Review::new().write("preflight.dev/claimed-by", "alice");
    for (k, v) in written {
        review = review.write(k, v);
    }
    let v = verdict(review);
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::ClaimRefused);
    assert!(v.message.contains(says), "{}", v.message);
}

#[test]
fn the_denial_gives_commands_with_a_time_limit_to_copy() {
    let v = verdict(Review::new().version("4.15.3"));
    assert!(
        v.message.contains("preflight.dev/accept=ClusterOperatorDown,KubeNodeNotReady preflight.dev/accept-for=4.15.3 preflight.dev/accept-reason='<why>' preflight.dev/accept-until=2026-11-30T16:00:00Z preflight.dev/accept-findings='{\"ClusterOperatorsHealthy\":[\"ClusterOperatorDown\"],\"NodesReady\":[\"KubeNodeNotReady\"]}' preflight.dev/claimed-by=\"$(oc whoami)\""),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("preflight.dev/override=4.15.3 preflight.dev/override-reason='<why>' preflight.dev/override-until=2026-11-30T16:00:00Z preflight.dev/claimed-by=\"$(oc whoami)\""),
        "{}",
        v.message
    );
}

#[rstest]
#[case::narrowed(json!({"image": IMG_FAIL, "checks": ["EtcdHealthy"]}), "narrows the suite to EtcdHealthy")]
#[case::another_version(json!({"image": IMG_FAIL, "version": "4.14.13"}), "says version 4.14.13, but the release is 4.15.3")]
fn a_forged_pass_for_a_failing_target_is_no_result(#[case] spec: Value, #[case] says: &str) {
    // Someone allowed to create UpdatePreflights replaces the failing
    // target's object with one that passes: it is no result, and since the
    // gate owns its result's spec (L2), its controller repairs the spec and
    // runs it again, so the update waits as for a run under way.
    let s = source();
    let mut forged = result(
        IMG_FAIL,
        "Passed",
        "2026-11-30T11:30:00Z",
        json!([check("EtcdHealthy", "Blocking", "Pass")]),
    );
    forged.spec = serde_json::from_value(spec).unwrap();
    s.cache.apply(forged);
    let v = decide_with(&Review::new().version("4.15.3"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Pending);
    assert!(
        v.message.starts_with("preflight for 4.15.3 is running"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains(&format!("Its result {says}")),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("repairs a changed spec"),
        "{}",
        v.message
    );
}

#[test]
fn a_request_under_another_name_stands_in_for_no_result() {
    let s = source();
    let mut request = result(IMG_COND, "Passed", "2026-11-30T11:30:00Z", json!([]));
    request.metadata.name = Some("manual-x7k2".into());
    s.cache.apply(request);
    let v = decide_with(&Review::new().version("4.15.16"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert_eq!(v.reason, Reason::Pending, "{v:?}");
    assert!(scheduled(&v), "{}", v.message);
}

/// The test source as a cluster's: it runs only what the graph offers.
fn offering_the_graph() -> TestSource {
    TestSource {
        offered: Some(
            [IMG_PASS, IMG_FAIL, IMG_COND]
                .map(ReleaseKey::from_image)
                .into_iter()
                .collect(),
        ),
        ..source()
    }
}

#[test]
fn a_review_for_a_release_the_graph_does_not_offer_starts_nothing() {
    let forged = "evil.example/anything@sha256:6666";
    let review = Review::new().to(json!({"image": forged}));
    let v = decide_with(&review, &offering_the_graph(), &Policy::default())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Pending);
    assert!(!scheduled(&v), "{}", v.message);
    assert!(
        v.message.starts_with(&format!(
            "preflight for {forged} has not been checked: no results yet, and the update graph does not offer it"
        )),
        "{}",
        v.message
    );
    assert!(
        v.message
            .contains(&format!("spec: {{image: \"{forged}\"}}")),
        "{}",
        v.message
    );

    // Not even as mode: Preflight.
    let preflight = Review::new().to(json!({"image": forged, "mode": "Preflight"}));
    let v = decide_with(&preflight, &offering_the_graph(), &Policy::default())
        .into_final()
        .unwrap();
    assert!(v.allowed);
    assert!(v.effects.is_empty(), "{:?}", v.effects);

    // An offered target with no results is checked by the gate itself.
    let offered = decide_with(
        &Review::new().version("4.15.16"),
        &offering_the_graph(),
        &Policy::default(),
    )
    .into_final()
    .unwrap();
    assert!(scheduled(&offered), "{}", offered.message);
}

#[rstest]
#[case::by_version(json!({"version": "4.14.1"}))]
#[case::by_image(json!({"image": IMG_CURRENT}))]
fn asking_for_the_release_the_cluster_has_changes_nothing(#[case] update: Value) {
    let v = decide_with(
        &Review::new().to(update),
        &offering_the_graph(),
        &Policy::default(),
    )
    .into_final()
    .unwrap();
    assert!(v.allowed);
    assert_eq!(v.reason, Reason::NoTargetChange);
    assert_eq!(
        v.warnings,
        [
            "preflight-gate: 4.14.1 is the release the cluster runs or is already updating to; there is nothing to check"
        ]
    );
}

#[test]
fn a_version_the_graph_contradicts_beside_an_image_is_refused() {
    // IMG_PASS is 4.14.12 in the graph; the request calls it a patch of 4.15.
    let v = verdict(Review::new().to(json!({"version": "4.15.3", "image": IMG_PASS})));
    assert!(!v.allowed);
    assert_eq!(v.code, 400);
    assert!(
        v.message.starts_with(&format!(
            "spec.desiredUpdate says version 4.15.3, but the update graph says {IMG_PASS} is 4.14.12"
        )),
        "{}",
        v.message
    );
    // The same contradiction left as it was is no target change.
    let unchanged = verdict(
        Review::new()
            .to(json!({"version": "4.15.3", "image": IMG_PASS}))
            .from(json!({"version": "4.15.3", "image": IMG_PASS})),
    );
    assert_eq!(unchanged.reason, Reason::NoTargetChange);
    // Agreeing, it is the target as usual.
    let agreed = verdict(Review::new().to(json!({"version": "4.14.12", "image": IMG_PASS})));
    assert_eq!(agreed.reason, Reason::Passed);
}

#[test]
fn a_version_the_graph_cannot_confirm_is_not_taken_from_the_request() {
    let unknown = "quay.io/ocp/release@sha256:9999";
    let review = Review::new().to(json!({"version": "4.14.2", "image": unknown}));
    let v = decide_with(&review, &source(), &Policy::default())
        .into_final()
        .unwrap();
    // Named by its image, not the version it claims.
    assert_eq!(v.target.as_deref(), Some(unknown));
    assert!(!v.message.contains("4.14.2"), "{}", v.message);
}

#[rstest]
#[case::tag("quay.io/openshift-release-dev/ocp-release:4.15.16-x86_64")]
#[case::registry_port_and_tag("mirror.example:5000/ocp/release:4.15.16")]
#[case::no_tag("mirror.example:5000/ocp/release")]
fn a_target_named_by_a_tag_is_refused_with_how_to_give_its_digest(#[case] image: &str) {
    let review = Review::new().to(json!({"image": image}));
    let v = decide_with(&review, &offering_the_graph(), &Policy::default())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::NotADigest);
    assert!(
        v.message
            .starts_with(&format!("{image} names the release by a tag")),
        "{}",
        v.message
    );
    let repository = image
        .strip_suffix(":4.15.16-x86_64")
        .or_else(|| image.strip_suffix(":4.15.16"))
        .unwrap_or(image);
    assert!(
        v.message.contains(&format!(
            "oc adm upgrade --to-image {repository}@sha256:<digest> --allow-explicit-upgrade"
        )),
        "{}",
        v.message
    );
}

#[test]
fn a_digest_is_a_digest_and_a_tag_is_not() {
    for digest in ["quay.io/r@sha256:6666", "r@sha512:00"] {
        assert!(ReleaseKey::from_image(digest).is_digest(), "{digest}");
    }
    for tag in [
        "quay.io/r:4.15",
        "r:abc",
        "quay.io/r@latest",
        "",
        "quay.io/r@md5:00",
    ] {
        assert!(!ReleaseKey::from_image(tag).is_digest(), "{tag}");
    }
}

const IMG_HOSTILE: &str = "quay.io/ocp/release@sha256:6666";

/// A denial for a target the update graph names `version`, whose one
/// failing check carries the OpenShift names `risks`: what a graph server
/// or a check chose reaches the commands the denial suggests.
fn hostile_denial(version: &str, risks: &[&str], message: &str) -> String {
    let source = source();
    let mut failing = carrying(check("NodesReady", "Blocking", "Fail"), risks);
    failing["message"] = json!(message);
    source.cache.apply(result(
        IMG_HOSTILE,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([failing]),
    ));
    let mut review = Review::new().version(version);
    for pointer in ["/request/object", "/request/oldObject"] {
        review.body.pointer_mut(pointer).unwrap()["status"]["availableUpdates"]
            .as_array_mut()
            .unwrap()
            .push(json!({"version": version, "image": IMG_HOSTILE}));
    }
    let v = decide_with(&review, &source, &Policy::default())
        .into_final()
        .expect("no authorization needed");
    assert_eq!(v.reason, Reason::Failed, "{v:?}");
    // As the API server gets it.
    message::bounded(&v.message)
}

/// Plain names and targets stay unquoted, for reading.
#[test]
fn plain_values_stay_plain_words() {
    let denial = hostile_denial("4.15.4", &["KubeNodeNotReady", "etcd.Member-2"], "x");
    assert!(
        denial.contains(
            "preflight.dev/accept=KubeNodeNotReady,etcd.Member-2 preflight.dev/accept-for=4.15.4 "
        ),
        "{denial}"
    );
}

/// Bidi overrides and zero-width characters in a check's message and
/// names never reach the denial.
#[test]
fn format_characters_do_not_reach_the_denial() {
    let denial = hostile_denial(
        "4.15.4",
        &["Kube\u{200b}NodeNotReady"],
        "node \u{202e}1-rekrow\u{202c} is \u{2066}not\u{2069} ready\u{feff}\u{200d}",
    );
    assert!(
        !denial.chars().any(crate::model::text::is_format),
        "{denial:?}"
    );
    assert!(
        denial.contains("- NodesReady [KubeNodeNotReady]: node 1-rekrow is not ready"),
        "{denial}"
    );
}

/// A result whose name is not a check name is not the gate's: the denial
/// says why, escaped, and offers no command with it.
#[test]
fn a_result_named_with_shell_text_is_not_vouched_for() {
    let source = source();
    source.cache.apply(result(
        IMG_FAIL,
        "Failed",
        "2026-11-30T11:00:00Z",
        json!([check("ReleaseCheck;touch${IFS}x;#", "Blocking", "Fail")]),
    ));
    let v = decide_with(
        &Review::new().version("4.15.3"),
        &source,
        &Policy::default(),
    )
    .into_final()
    .expect("no authorization needed");
    assert!(!v.allowed);
    assert!(
        v.message.contains(
            "has a result that is not the gate's: \"ReleaseCheck;touch${IFS}x;#\" is not a check name: character 13 is \";\""
        ),
        "{}",
        v.message
    );
    assert!(!v.message.contains("To accept them"), "{}", v.message);
}

/// A plan as a run writes it into the status: about 2h10m (P90 3h05m),
/// the master pool and four worker batches, the third of which can
/// never drain.
fn sample_plan() -> Value {
    json!({
        "computedAt": "2026-11-30T11:00:00Z",
        "p50Seconds": 7800, "p90Seconds": 11100,
        "controlPlane": {"p50Seconds": 4200, "p90Seconds": 7500, "source": "history", "samples": 6,
                         "basis": "this cluster's 6 completed patch updates (the P50 of the last 5)"},
        "pools": [
            {"name": "master", "nodes": 3, "updates": true, "batches": 3, "batchSize": 1, "seconds": 3600, "blocked": false},
            {"name": "worker", "nodes": 4, "updates": true, "batches": 4, "batchSize": 1, "seconds": 3600, "blocked": true},
        ],
        "batches": [{"pool": "worker", "number": 3, "nodes": ["ip-10-0-1-5"], "nodeCount": 1,
                     "holds": ["PDB db/pg: never drains"], "seconds": 900}],
        "blockers": ["worker batch 3 (ip-10-0-1-5) cannot drain: PDB db/pg allows no disruption"],
        "waits": 0, "warnings": 0, "unknowns": 0,
    })
}

/// The line the webhook says of `sample_plan()`.
const PLAN_LINE: &str = "expected duration: about 2h10m (P90 3h05m), 4 worker batches; blocked: worker batch 3 (ip-10-0-1-5) cannot drain: PDB db/pg allows no disruption";

/// The sample results, each with `plan` in its status.
fn planned(plan: Value) -> TestSource {
    let source = source();
    for image in [IMG_PASS, IMG_FAIL] {
        let mut r = (*source.cache.get(&ReleaseKey::from_image(image)).unwrap()).clone();
        let mut status = serde_json::to_value(r.status.as_ref().unwrap()).unwrap();
        status["plan"] = plan.clone();
        r.status = Some(serde_json::from_value(status).unwrap());
        source.cache.apply(r);
    }
    source
}

fn planned_verdict(review: Review) -> Verdict {
    decide_with(&review, &planned(sample_plan()), &Policy::default())
        .into_final()
        .expect("no authorization needed")
}

#[test]
fn an_allowed_update_says_its_plan_in_one_warning() {
    let v = planned_verdict(Review::new().version("4.14.12"));
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings.last().unwrap(),
        &format!("preflight-gate: {PLAN_LINE}")
    );
    // Results from before plans: no line, nothing else changes.
    let v = verdict(Review::new().version("4.14.12"));
    assert!(!v.warnings.iter().any(|w| w.contains("expected duration")));
}

#[test]
fn a_denial_says_the_plan_in_one_line_after_the_failures() {
    let v = planned_verdict(Review::new().version("4.15.3"));
    assert_eq!(v.reason, Reason::Failed);
    let lines: Vec<&str> = v.message.lines().collect();
    assert!(lines[2].starts_with("- NodesReady"), "{}", v.message);
    assert_eq!(lines[3], PLAN_LINE, "{}", v.message);
    assert!(lines[4].starts_with("Full report: "), "{}", v.message);
    assert!(!v.warnings.iter().any(|w| w.contains("expected duration")));
}

#[test]
fn the_plan_line_names_each_pool_that_adds_to_the_update_and_counts_the_blockers() {
    let mut p = sample_plan();
    p["pools"].as_array_mut().unwrap().extend([
        json!({"name": "infra", "nodes": 1, "updates": true, "batches": 1}),
        json!({"name": "gpu", "nodes": 2, "updates": false, "batches": 0}),
    ]);
    p["blockers"].as_array_mut().unwrap().push(json!(
        "worker batch 4 (ip-10-0-1-6) cannot drain: PDB db/pg …"
    ));
    p["moreBlockers"] = json!(3);
    let summary: crate::model::results::PlanSummary = serde_json::from_value(p).unwrap();
    assert_eq!(
        message::plan_line(&summary, None),
        "expected duration: about 2h10m (P90 3h05m), 4 worker batches, 1 infra batch, gpu paused; blocked: worker batch 3 (ip-10-0-1-5) cannot drain: PDB db/pg allows no disruption (and 4 more)"
    );
    let mut hostile = summary.clone();
    hostile.blockers = vec![format!("\u{1b}[31m{}", "x".repeat(5000))];
    let line = message::plan_line(&hostile, None);
    assert!(line.chars().count() < message::MAX_PLAN_LINE + 40, "{line}");
    assert!(!line.contains('\u{1b}'));
}

const WINDOW: &str = "preflight.dev/window-end";

#[rstest]
// now() + P90 3h05m = 15:05:00.
#[case::fits("2026-11-30T16:00:00Z", true)]
#[case::ends_on_the_dot("2026-11-30T15:05:00Z", true)]
#[case::a_second_short("2026-11-30T15:04:59Z", false)]
#[case::p50_fits_p90_does_not("2026-11-30T14:30:00Z", false)]
fn the_window_rule_is_now_plus_the_p90(#[case] end: &str, #[case] fits: bool) {
    let fit = crate::model::window::WindowFit::new(end.parse().unwrap(), now(), 11100);
    assert_eq!(fit.p90_end, "2026-11-30T15:05:00Z".parse().unwrap());
    assert_eq!(fit.fits(), fits);
    assert_eq!(
        crate::model::window::WindowFit::new(now(), now(), u64::MAX).p90_end,
        Timestamp::MAX
    );
}

#[test]
fn an_update_that_fits_the_window_goes_ahead_saying_where_its_p90_ends() {
    let v = planned_verdict(
        Review::new()
            .version("4.14.12")
            .annotate(WINDOW, "2026-11-30T16:00:00Z"),
    );
    assert!(v.allowed, "{v:?}");
    assert_eq!(
        v.warnings.last().unwrap(),
        &format!(
            "preflight-gate: {PLAN_LINE}; its P90 ends 2026-11-30T15:05:00Z, within the maintenance window (preflight.dev/window-end 2026-11-30T16:00:00Z)"
        )
    );
}

#[test]
fn an_update_past_the_windows_end_is_denied_naming_the_window_and_the_p90() {
    let v = planned_verdict(
        Review::new()
            .version("4.14.12")
            .annotate(WINDOW, "2026-11-30T14:00:00Z"),
    );
    assert!(!v.allowed);
    assert_eq!((v.reason, v.code), (Reason::OutsideWindow, 403));
    let lines: Vec<&str> = v.message.lines().collect();
    assert_eq!(
        lines[0],
        "preflight for 4.14.12: the update may not finish within the maintenance window: its P90 of 3h05m from now ends 2026-11-30T15:05:00Z, after the maintenance window's end 2026-11-30T14:00:00Z (preflight.dev/window-end)"
    );
    assert_eq!(lines[1], PLAN_LINE);
    assert!(
        v.message
            .contains("oc annotate clusterversion version preflight.dev/window-end-"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("preflight.dev/override=4.14.12"),
        "{}",
        v.message
    );
    // The check's warning stays; the plan is in the message, not twice.
    assert!(v.warnings[0].starts_with("preflight warning: CertificatesExpiringSoon"));
    assert!(!v.warnings.iter().any(|w| w.contains("expected duration")));
    assert!(
        matches!(&v.effects[..], [Effect::Event(e)] if e.reason == "UpdateOutsideMaintenanceWindow" && e.message == lines[0])
    );
    assert_eq!(v.audit["target"], "4.14.12");
}

#[rstest]
#[case::not_a_time(
    "Saturday night",
    "preflight.dev/window-end \"Saturday night\" is not an RFC 3339 time (such as 2026-11-30T22:00:00Z)"
)]
#[case::passed(
    "2026-11-30T11:00:00Z",
    "preflight.dev/window-end 2026-11-30T11:00:00Z has passed"
)]
#[case::too_far(
    "2026-12-20T00:00:00Z",
    "preflight.dev/window-end 2026-12-20T00:00:00Z is more than 14days ahead (--max-window-ahead)"
)]
fn a_window_the_gate_cannot_hold_to_is_denied_saying_why(#[case] end: &str, #[case] says: &str) {
    let v = planned_verdict(Review::new().version("4.14.12").annotate(WINDOW, end));
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::OutsideWindow);
    assert_eq!(
        message::first_line(&v.message),
        format!(
            "preflight for 4.14.12: the maintenance window is not one the gate can hold the update to: {says}"
        )
    );
    assert!(
        v.message.contains("preflight.dev/window-end-"),
        "{}",
        v.message
    );
}

#[test]
fn a_failing_update_outside_the_window_says_both() {
    let v = planned_verdict(
        Review::new()
            .version("4.15.3")
            .annotate(WINDOW, "2026-11-30T14:00:00Z"),
    );
    assert_eq!(v.reason, Reason::Failed);
    assert!(
        v.message.ends_with("Nor may it finish within the maintenance window: its P90 of 3h05m from now ends 2026-11-30T15:05:00Z, after the maintenance window's end 2026-11-30T14:00:00Z (preflight.dev/window-end)."),
        "{}",
        v.message
    );
}

/// Accepting every failing check lets an update go ahead, but not past
/// the window; only a force override does.
#[test]
fn an_accept_does_not_go_past_the_window_and_an_override_does() {
    let review = || {
        accepting(
            Review::new().version("4.15.3"),
            "NodesReady,ClusterOperatorsHealthy",
        )
        .annotate(WINDOW, "2026-11-30T14:00:00Z")
    };
    let v = decide_with(&review(), &planned(sample_plan()), &Policy::default())
        .into_final()
        .expect("nothing left to authorize");
    assert!(!v.allowed);
    assert!(
        v.message
            .contains("Nor may it finish within the maintenance window"),
        "{}",
        v.message
    );

    let review = forced(Review::new().version("4.15.3")).annotate(WINDOW, "2026-11-30T14:00:00Z");
    let p = match decide_with(&review, &planned(sample_plan()), &Policy::default()) {
        Decision::NeedsAuthorization(p) => *p,
        Decision::Final(v) => panic!("{v:?}"),
    };
    let v = p.resolve(Authorization::Allowed);
    assert_eq!(v.reason, Reason::Overridden);
    assert_eq!(
        v.warnings.last().unwrap(),
        &format!(
            "preflight-gate: {PLAN_LINE}; its P90 ends 2026-11-30T15:05:00Z, after the maintenance window's end (preflight.dev/window-end 2026-11-30T14:00:00Z)"
        )
    );
}

#[test]
fn results_without_a_plan_cannot_be_fitted_and_a_run_is_asked_for() {
    let v = verdict(
        Review::new()
            .version("4.14.12")
            .annotate(WINDOW, "2026-11-30T16:00:00Z"),
    );
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::OutsideWindow);
    assert_eq!(
        message::first_line(&v.message),
        "preflight for 4.14.12: whether the update fits the maintenance window (preflight.dev/window-end 2026-11-30T16:00:00Z) is not known: its results carry no update plan"
    );
    assert!(
        v.message
            .contains("The gate runs it again by itself; retry in ~60 s"),
        "{}",
        v.message
    );
}

#[test]
fn without_results_the_window_is_said_to_be_unjudged_when_pending_updates_go_ahead() {
    let policy = Policy {
        on_pending: OnPending::Allow,
        ..Policy::default()
    };
    let review = Review::new()
        .version("4.15.16")
        .annotate(WINDOW, "2026-11-30T16:00:00Z");
    let v = decide_with(&review, &source(), &policy)
        .into_final()
        .unwrap();
    assert!(v.allowed);
    assert!(
        v.warnings.iter().any(|w| w.contains("fits the maintenance window (preflight.dev/window-end 2026-11-30T16:00:00Z) is not known: there are no results")),
        "{:?}",
        v.warnings
    );
    // Denied while pending, as ever.
    let v = verdict(review);
    assert_eq!(v.reason, Reason::Pending);
}

#[rstest]
#[case::not_a_time("tonight", "is not an RFC 3339 time")]
#[case::passed("2026-11-30T11:00:00Z", "has passed")]
#[case::too_far("2026-12-14T12:00:01Z", "is more than 14days ahead")]
fn a_window_is_refused_as_written_when_it_cannot_be_held_to(#[case] end: &str, #[case] says: &str) {
    let v = verdict(
        Review::new()
            .write("preflight.dev/claimed-by", "alice")
            .write(WINDOW, end),
    );
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::ClaimRefused);
    assert!(v.message.contains(says), "{}", v.message);
}

/// A window is planned days ahead, under a verb of its own: setting one
/// is not forcing an update.
#[rstest]
#[case::tonight("2026-11-30T22:00:00Z")]
#[case::next_weekend("2026-12-06T02:00:00Z")]
fn a_window_written_within_its_bounds_is_a_claim_for_the_window_verb(#[case] end: &str) {
    let review = Review::new()
        .write("preflight.dev/claimed-by", "alice")
        .write(WINDOW, end);
    let p = match decide_with(&review, &source(), &Policy::default()) {
        Decision::NeedsAuthorization(p) => *p,
        Decision::Final(v) => panic!("{v:?}"),
    };
    assert_eq!(p.verb, Verb::Window);
    assert_eq!(
        p.clone().resolve(Authorization::Allowed).reason,
        Reason::ClaimWritten
    );
    let refused = p.resolve(Authorization::Denied);
    assert!(!refused.allowed);
    assert!(
        refused
            .message
            .contains(r#"user "alice" is not allowed the "window" verb"#),
        "{}",
        refused.message
    );
}

/// A window written beside any other claim, or with a target change, asks
/// the override verb: one answer for the whole write.
#[test]
fn a_window_written_with_another_claim_asks_the_override_verb() {
    let review = Review::new()
        .write("preflight.dev/claimed-by", "alice")
        .write(WINDOW, "2026-11-30T22:00:00Z")
        .write("preflight.dev/override", "4.15.3")
        .write("preflight.dev/override-reason", "CVE fix")
        .write("preflight.dev/override-until", UNTIL);
    let Decision::NeedsAuthorization(p) = decide_with(&review, &source(), &Policy::default())
    else {
        panic!("a claim write asks");
    };
    assert_eq!(p.verb, Verb::Override);
}

/// A lost or rotated signing key leaves every finished result with a
/// signature that does not verify. The updater cannot delete them, and
/// need not: the gate runs them again by itself, and says so.
#[rstest]
#[case::offered(None)]
#[case::not_offered(Some(BTreeSet::new()))]
fn a_result_signed_with_another_key_is_run_again_by_the_gate(
    #[case] offered: Option<BTreeSet<ReleaseKey>>,
) {
    use crate::model::vouch::{ResultKey, StatusWriter};
    let old = ResultKey::new(&[1; 32]).unwrap();
    let s = TestSource {
        offered,
        writer: Some(StatusWriter {
            newest_run: None,
            field_manager: "preflight-gate",
            key: ResultKey::new(&[2; 32]).map_err(|e| e.to_string()),
        }),
        ..source()
    };
    let mut signed = (*s.cache.get(&ReleaseKey::from_image(IMG_PASS)).unwrap()).clone();
    let signature = old.sign(&signed);
    signed.status.as_mut().unwrap().signature = Some(signature);
    s.cache.apply(signed);
    let v = decide_with(&Review::new().version("4.14.12"), &s, &Policy::default())
        .into_final()
        .unwrap();
    assert!(!v.allowed);
    assert_eq!(v.reason, Reason::Pending);
    assert!(
        v.message
            .starts_with("preflight for 4.14.12 is running, retry in ~")
            && v.message
                .contains("Its result has a signature that is not the gate's")
            && v.message.contains("the gate runs it again by itself"),
        "{}",
        v.message
    );
    assert!(!v.message.contains("Delete it"), "{}", v.message);
}

/// The cluster's readiness for what it is offered, from the webhook's own
/// answer to a write of each target.
mod readiness {
    use super::*;
    use crate::admission::readiness::readiness;
    use crate::model::cluster_claim::Readiness;
    use crate::model::cluster_version::ClusterVersion;

    fn of(review: Review, source: &TestSource) -> Vec<(String, Readiness)> {
        let cv: ClusterVersion =
            serde_json::from_value(review.body["request"]["oldObject"].clone()).unwrap();
        readiness(&cv, source, &Policy::default(), now())
            .into_iter()
            .map(|(version, readiness)| (version.to_string(), readiness))
            .collect()
    }

    #[test]
    fn each_offered_target_is_cleared_blocked_by_its_checks_or_pending() {
        assert_eq!(
            of(Review::new(), &source()),
            [
                ("4.14.12".to_owned(), Readiness::Cleared),
                (
                    "4.15.3".to_owned(),
                    Readiness::Blocked(vec!["ClusterOperatorsHealthy".into(), "NodesReady".into()])
                ),
                ("4.15.16".to_owned(), Readiness::Pending),
            ]
        );
    }

    #[test]
    fn an_override_or_accept_on_the_cluster_version_clears_nothing() {
        for review in [
            forced(Review::new()),
            accepting(Review::new(), "ClusterOperatorsHealthy,NodesReady"),
        ] {
            let blocked = of(review, &source());
            assert!(matches!(blocked[1].1, Readiness::Blocked(_)), "{blocked:?}");
        }
    }

    #[test]
    fn what_the_cluster_runs_is_no_update_and_untrusted_results_clear_nothing() {
        let mut review = Review::new();
        review.old_obj()["status"]["availableUpdates"]
            .as_array_mut()
            .unwrap()
            .push(json!({"version": "4.14.1", "image": IMG_CURRENT}));
        let versions: Vec<String> = of(review, &source()).into_iter().map(|(v, _)| v).collect();
        assert_eq!(versions, ["4.14.12", "4.15.3", "4.15.16"]);
        let untrusted = TestSource {
            trusted: false,
            ..source()
        };
        assert!(
            of(Review::new(), &untrusted)
                .iter()
                .all(|(_, r)| *r == Readiness::Pending)
        );
    }

    #[test]
    fn a_fail_open_error_does_not_block_and_an_unvouched_result_is_an_error() {
        let cache = TestCache::default();
        cache.apply(result(
            IMG_PASS,
            "Failed",
            "2026-11-30T11:00:00Z",
            json!([check("EtcdHealthy", "Blocking", "Error")]),
        ));
        let errored = TestSource { cache, ..source() };
        let policy = Policy {
            fail_open_checks: ["EtcdHealthy".to_owned()].into(),
            ..Policy::default()
        };
        let cv: ClusterVersion = serde_json::from_value(cluster_version()).unwrap();
        let first = |policy: &Policy, source: &TestSource| {
            readiness(&cv, source, policy, now()).remove(0).1
        };
        assert_eq!(
            first(&Policy::default(), &errored),
            Readiness::Blocked(vec!["EtcdHealthy".into()])
        );
        assert_eq!(first(&policy, &errored), Readiness::Cleared);
        let unvouched = TestSource {
            writer: Some(crate::model::vouch::StatusWriter {
                field_manager: crate::model::vouch::FIELD_MANAGER,
                key: Err("no key yet".into()),
                newest_run: None,
            }),
            ..source()
        };
        assert_eq!(first(&Policy::default(), &unvouched), Readiness::Error);
    }
}
