use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use rstest::rstest;
use serde_json::json;

use super::manifest::{CHECK, OWNER_UID, PREFLIGHT_CHECK, Update, image_to_run, job_manifest};
use super::progress::{Progress, parse_result, progress_of, result};
use super::run::{grant_tokens, refused_names, selected};
use super::settings::JobSettings;
use crate::model::annotations::UPDATE_PREFLIGHT;
use crate::model::preflight_check::{DEFAULT_TIMEOUT_SECONDS, PreflightCheck};
use crate::model::release::Version;
use crate::model::{Finding, Outcome, UpdatePreflight};

fn check(spec: serde_json::Value) -> PreflightCheck {
    serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "PreflightCheck",
        "metadata": {"name": "storage-driver"},
        "spec": spec,
    }))
    .unwrap()
}

fn owner() -> UpdatePreflight {
    serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": "release-sha256-aa", "uid": "0b7c1e0e-6a0f-4a57-9c3a-5d1e2f3a4b5c"},
        "spec": {"image": "q@sha256:aa"},
    }))
    .unwrap()
}

fn update(current: &str, target: &str) -> Update {
    Update {
        target_image: "q@sha256:aa".into(),
        target_version: Version::parse(target),
        current_image: "q@sha256:00".into(),
        current_version: Version::parse(current),
    }
}

#[rstest]
#[case::pass_plain(
    0,
    "all 3 drivers support 4.16",
    Outcome::Pass,
    "all 3 drivers support 4.16",
    None
)]
#[case::pass_empty(0, "", Outcome::Pass, "passed", None)]
#[case::fail_plain(
    1,
    "driver foo 1.2 does not support 4.16\n",
    Outcome::Fail,
    "driver foo 1.2 does not support 4.16",
    None
)]
#[case::fail_empty(1, "", Outcome::Fail, "failed, without saying why", None)]
#[case::crash(137, "", Outcome::Error, "the check exited with code 137", None)]
#[case::crash_with_text(
    2,
    "panic: nil map",
    Outcome::Error,
    "the check exited with code 2: panic: nil map",
    None
)]
#[case::json_fail(
    1,
    r#"{"outcome":"Fail","message":"foo too old","url":"https://example.com/foo"}"#,
    Outcome::Fail,
    "foo too old",
    Some("https://example.com/foo")
)]
#[case::json_lowercase(0, r#"{"outcome":"pass","message":"ok"}"#, Outcome::Pass, "ok", None)]
#[case::json_without_outcome(1, r#"{"message":"no"}"#, Outcome::Fail, "no", None)]
#[case::json_skipped(
    0,
    r#"{"outcome":"Skipped","message":"no foo here"}"#,
    Outcome::Skipped,
    "no foo here",
    None
)]
#[case::json_error(
    3,
    r#"{"outcome":"Error","message":"cannot reach the API"}"#,
    Outcome::Error,
    "cannot reach the API",
    None
)]
#[case::json_fail_says_error(
    1,
    r#"{"outcome":"Error","message":"half done"}"#,
    Outcome::Error,
    "half done",
    None
)]
fn results_follow_the_protocol(
    #[case] code: i32,
    #[case] message: &str,
    #[case] outcome: Outcome,
    #[case] text: &str,
    #[case] url: Option<&str>,
) {
    let f = parse_result(code, message);
    assert_eq!(
        (f.outcome, f.message.as_str(), f.url.as_deref()),
        (outcome, text, url)
    );
}

#[rstest]
#[case::truncated_json(
    0,
    r#"{"outcome": "Pass", "mess"#,
    "malformed output: the termination message looks like JSON"
)]
#[case::wrong_types(
    0,
    r#"{"outcome": 42}"#,
    "malformed output: the termination message looks like JSON"
)]
#[case::unknown_outcome(
    0,
    r#"{"outcome": "Maybe"}"#,
    "malformed output: unknown outcome \"maybe\""
)]
#[case::disagrees(
    0,
    r#"{"outcome": "Fail", "message": "x"}"#,
    "malformed output: the check exited with code 0 but its message says \"fail\""
)]
#[case::pass_on_exit_1(
    1,
    r#"{"outcome": "Pass"}"#,
    "malformed output: the check exited with code 1 but its message says \"pass\""
)]
#[case::bad_url(
    1,
    r#"{"outcome": "Fail", "url": "javascript:alert(1)"}"#,
    "malformed output: url \"javascript:alert(1)\" is not an http(s) link"
)]
fn garbage_is_an_error_that_says_so(#[case] code: i32, #[case] message: &str, #[case] says: &str) {
    let f = parse_result(code, message);
    assert_eq!(f.outcome, Outcome::Error);
    assert!(f.message.starts_with(says), "{}", f.message);
}

fn job(created: &str, conditions: serde_json::Value) -> Job {
    serde_json::from_value(json!({
        "metadata": {"name": "pfc-foo-abcde", "namespace": "preflight-gate", "creationTimestamp": created},
        "spec": {"activeDeadlineSeconds": 60, "template": {"spec": {"containers": [{"name": "check", "image": "example.com/foo:1"}]}}},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

fn pod(created: &str, status: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "pfc-foo-abcde-xyz", "creationTimestamp": created},
        "status": status,
    }))
    .unwrap()
}

fn state(state: serde_json::Value) -> serde_json::Value {
    json!({"containerStatuses": [{"name": "check", "image": "example.com/foo:1", "imageID": "", "ready": false, "restartCount": 0, "state": state}]})
}

const NOW: &str = "2026-11-30T12:00:00Z";
const JUST_NOW: &str = "2026-11-30T11:59:50Z";
const LONG_AGO: &str = "2026-11-30T11:50:00Z";

#[rstest]
#[case::no_pod_yet(JUST_NOW, json!([]), vec![], None)]
#[case::running(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"running": {"startedAt": JUST_NOW}})))], None)]
#[case::passed(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"terminated": {"exitCode": 0, "message": "fine"}})))], Some((Outcome::Pass, "fine")))]
#[case::failed(JUST_NOW, json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]), vec![pod(JUST_NOW, state(json!({"terminated": {"exitCode": 1, "message": "driver too old"}})))], Some((Outcome::Fail, "driver too old")))]
#[case::oom(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"terminated": {"exitCode": 137, "reason": "OOMKilled"}})))], Some((Outcome::Error, "the check ran out of memory (OOMKilled): the check exited with code 137")))]
#[case::pull_backoff(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}})))], Some((Outcome::Error, "cannot pull the check's image example.com/foo:1 (ImagePullBackOff): Back-off pulling image")))]
#[case::pull_error(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"waiting": {"reason": "ErrImagePull"}})))], Some((Outcome::Error, "cannot pull the check's image example.com/foo:1 (ErrImagePull)")))]
#[case::config_error(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"waiting": {"reason": "CreateContainerConfigError", "message": "no such key"}})))], Some((Outcome::Error, "the check's container cannot start (CreateContainerConfigError): no such key")))]
#[case::container_creating(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"waiting": {"reason": "ContainerCreating"}})))], None)]
#[case::deadline(LONG_AGO, json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}]), vec![], Some((Outcome::Error, "timed out: the check did not finish within its deadline of 60 s (DeadlineExceeded)")))]
#[case::other_failure(JUST_NOW, json!([{"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "rule 0"}]), vec![], Some((Outcome::Error, "the Job failed (PodFailurePolicy): rule 0")))]
#[case::unschedulable_for_a_while(LONG_AGO, json!([]), vec![pod(LONG_AGO, json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]}))], Some((Outcome::Error, "never scheduled: the check's pod found no node within 2m (Unschedulable): 0/3 nodes are available")))]
#[case::unschedulable_just_now(JUST_NOW, json!([]), vec![pod(JUST_NOW, json!({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}))], None)]
#[case::no_pod_ever(LONG_AGO, json!([]), vec![], Some((Outcome::Error, "never scheduled: no pod was created for the Job within 2m")))]
#[case::complete_without_pod(JUST_NOW, json!([{"type": "Complete", "status": "True"}]), vec![], Some((Outcome::Error, "the Job completed, but its pod is gone: no result to read")))]
#[case::malformed(JUST_NOW, json!([]), vec![pod(JUST_NOW, state(json!({"terminated": {"exitCode": 0, "message": "{not json"}})))], Some((Outcome::Error, "malformed output: the termination message looks like JSON but is not {outcome, message, url} (key must be a string at line 1 column 2); it starts: {not json")))]
fn jobs_and_pods_tell_how_a_check_ended(
    #[case] created: &str,
    #[case] conditions: serde_json::Value,
    #[case] pods: Vec<Pod>,
    #[case] expected: Option<(Outcome, &str)>,
) {
    let progress = progress_of(
        &job(created, conditions),
        &pods,
        &JobSettings::default(),
        NOW.parse().unwrap(),
    );
    match (progress, expected) {
        (Progress::Running, None) => {}
        (Progress::Done(f), Some((outcome, message))) => {
            assert_eq!((f.outcome, f.message.as_str()), (outcome, message));
        }
        (other, expected) => panic!("got {other:?}, expected {expected:?}"),
    }
}

#[test]
fn a_job_past_its_deadline_with_nobody_saying_so_times_out() {
    let settings = JobSettings {
        schedule_timeout: Duration::from_secs(10),
        ..JobSettings::default()
    };
    let running = pod(LONG_AGO, state(json!({"running": {"startedAt": LONG_AGO}})));
    let progress = progress_of(
        &job(LONG_AGO, json!([])),
        &[running],
        &settings,
        NOW.parse().unwrap(),
    );
    assert_eq!(
        progress,
        Progress::Done(Finding::error(
            "timed out: the check did not finish within its deadline of 60 s"
        ))
    );
}

#[test]
fn the_job_is_restricted_limited_owned_and_labelled() {
    let c = check(json!({
        "checkName": "StorageDriverReady", "image": "example.com/vendor/check:1",
        "command": ["/check"], "args": ["--strict"],
        "env": [{"name": "MODE", "value": "strict"}, {"name": "TARGET_VERSION", "value": "spoofed"}],
        "timeoutSeconds": 90,
    }));
    let job = job_manifest(
        &c,
        "example.com/vendor/check:1",
        &owner(),
        &update("4.15.3", "4.16.1"),
        &JobSettings::default(),
    )
    .unwrap();
    let j = serde_json::to_value(&job).unwrap();
    assert_eq!(j["metadata"]["generateName"], "pfc-storagedriverready-");
    // An administrator's check gets no token unless it asks for one.
    let token = |api_access: Option<bool>| {
        let mut c = c.clone();
        c.spec.api_access = api_access;
        let job = job_manifest(
            &c,
            "example.com/vendor/check:1",
            &owner(),
            &update("4.15.3", "4.16.1"),
            &JobSettings::default(),
        )
        .unwrap();
        serde_json::to_value(&job).unwrap()["spec"]["template"]["spec"]
            ["automountServiceAccountToken"]
            .clone()
    };
    assert_eq!(
        [token(None), token(Some(false)), token(Some(true))],
        [false, false, true]
    );
    assert_eq!(j["metadata"]["namespace"], "preflight-gate");
    assert_eq!(
        j["metadata"]["labels"][OWNER_UID],
        "0b7c1e0e-6a0f-4a57-9c3a-5d1e2f3a4b5c"
    );
    assert_eq!(j["metadata"]["labels"][CHECK], "StorageDriverReady");
    assert_eq!(j["metadata"]["labels"][PREFLIGHT_CHECK], "storage-driver");
    assert_eq!(
        j["metadata"]["annotations"][UPDATE_PREFLIGHT],
        "release-sha256-aa"
    );
    let owner_ref = &j["metadata"]["ownerReferences"][0];
    assert_eq!(owner_ref["kind"], "UpdatePreflight");
    assert_eq!(owner_ref["name"], "release-sha256-aa");
    assert_eq!(owner_ref["uid"], "0b7c1e0e-6a0f-4a57-9c3a-5d1e2f3a4b5c");
    assert_eq!(owner_ref["controller"], true);

    let spec = &j["spec"];
    assert_eq!(spec["activeDeadlineSeconds"], 90);
    assert_eq!(spec["backoffLimit"], 0);
    assert_eq!(spec["ttlSecondsAfterFinished"], 3600);
    assert_eq!(
        spec["template"]["metadata"]["labels"],
        j["metadata"]["labels"]
    );
    assert_eq!(
        spec["template"]["metadata"]["annotations"]["openshift.io/required-scc"], "restricted-v2",
        "admitted under restricted-v2 or not at all"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "preflight-check");
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["containers"][0];
    assert_eq!(container["name"], "check");
    assert_eq!(container["image"], "example.com/vendor/check:1");
    assert_eq!(container["command"], json!(["/check"]));
    assert_eq!(container["args"], json!(["--strict"]));
    let sc = &container["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
    assert_eq!(container["resources"]["limits"]["cpu"], "500m");
    assert_eq!(
        container["env"],
        json!([
            {"name": "MODE", "value": "strict"},
            {"name": "TARGET_VERSION", "value": "4.16.1"},
            {"name": "TARGET_IMAGE", "value": "q@sha256:aa"},
            {"name": "CURRENT_VERSION", "value": "4.15.3"},
            {"name": "CURRENT_IMAGE", "value": "q@sha256:00"},
        ]),
        "the gate's variables cannot be overridden"
    );
}

#[test]
fn a_check_with_defaults_gets_the_default_deadline_and_the_image_entrypoint() {
    let c = check(json!({"checkName": "X", "image": "example.com/x"}));
    let job = job_manifest(
        &c,
        "example.com/x",
        &owner(),
        &Update::default(),
        &JobSettings::default(),
    )
    .unwrap();
    let j = serde_json::to_value(&job).unwrap();
    assert_eq!(j["spec"]["activeDeadlineSeconds"], DEFAULT_TIMEOUT_SECONDS);
    let container = &j["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("command").is_none());
    assert_eq!(
        container["env"][0],
        json!({"name": "TARGET_VERSION", "value": ""})
    );
}

#[rstest]
#[case::image(json!({"checkName": "X", "image": " example.com/x:1 "}), "4.15.3", "4.16.1", Ok("example.com/x:1".to_owned()))]
#[case::not_this_kind(json!({"checkName": "X", "image": "i", "appliesTo": {"updateKinds": ["Minor"]}}), "4.15.3", "4.15.9", Err((Outcome::Skipped, "does not apply to a patch update")))]
#[case::not_this_version(json!({"checkName": "X", "image": "i", "appliesTo": {"versions": [">=4.17"]}}), "4.15.3", "4.16.1", Err((Outcome::Skipped, "does not apply to target version 4.16.1")))]
#[case::version_unknown(json!({"checkName": "X", "image": "i", "appliesTo": {"versions": [">=4.17"]}}), "4.15.3", "", Err((Outcome::Fail, "version unknown: this check applies to some versions or update kinds only, and the target's version is unknown")))]
#[case::bad_range(json!({"checkName": "X", "image": "i", "appliesTo": {"versions": ["~4.16"]}}), "4.15.3", "4.16.1", Err((Outcome::Error, "appliesTo.versions: \"~4.16\" in \"~4.16\" is not a version")))]
#[case::from_release(json!({"checkName": "X", "fromRelease": "cli"}), "4.15.3", "4.16.1", Ok("example.com/cli@sha256:cc".to_owned()))]
#[case::from_release_unknown(json!({"checkName": "X", "fromRelease": "nope"}), "4.15.3", "4.16.1", Err((Outcome::Error, "fromRelease \"nope\": the target release has no such component in its image-references")))]
#[case::neither(json!({"checkName": "X"}), "4.15.3", "4.16.1", Err((Outcome::Error, "the PreflightCheck must give exactly one of image and fromRelease")))]
#[case::both(json!({"checkName": "X", "image": "i", "fromRelease": "c"}), "4.15.3", "4.16.1", Err((Outcome::Error, "the PreflightCheck must give exactly one of image and fromRelease")))]
fn plans(
    #[case] spec: serde_json::Value,
    #[case] current: &str,
    #[case] target: &str,
    #[case] expected: Result<String, (Outcome, &str)>,
) {
    let images = BTreeMap::from([("cli".to_owned(), "example.com/cli@sha256:cc".to_owned())]);
    let got = image_to_run(&check(spec), &update(current, target), Some(&images));
    match (got, expected) {
        (Ok(image), Ok(want)) => assert_eq!(image, want),
        (Err(f), Err((outcome, message))) => {
            assert_eq!((f.outcome, f.message.as_str()), (outcome, message));
        }
        (got, want) => panic!("got {got:?}, expected {want:?}"),
    }
}

#[test]
fn from_release_without_image_references_is_an_error() {
    let c = check(json!({"checkName": "X", "fromRelease": "cli"}));
    let f = image_to_run(&c, &update("4.15.3", "4.16.1"), None).unwrap_err();
    assert_eq!(f.outcome, Outcome::Error);
    assert!(
        f.message.contains("image-references are not known"),
        "{}",
        f.message
    );
}

#[test]
fn results_carry_the_checks_name_severity_and_failure_policy() {
    let c = check(
        json!({"checkName": "Foo", "image": "i", "severity": "Warning", "failurePolicy": "FailOpen"}),
    );
    let r = result(&c, Finding::error("x"), Duration::from_millis(1500));
    assert_eq!(r.name, "Foo");
    assert_eq!(r.severity, crate::model::Severity::Warning);
    assert_eq!(
        r.failure_policy,
        Some(crate::model::FailurePolicy::FailOpen)
    );
    assert_eq!(r.duration.as_deref(), Some("1.500s"));
}

#[test]
fn a_run_selects_checks_by_result_name() {
    let checks = [
        check(json!({"checkName": "A", "image": "i"})),
        check(json!({"checkName": "B", "image": "i"})),
    ];
    let names = |sel: &[&str]| -> Vec<String> {
        let sel: Vec<String> = sel.iter().map(|s| s.to_string()).collect();
        selected(&checks, &sel)
            .map(|c| c.spec.check_name.clone())
            .collect()
    };
    assert_eq!(names(&[]), ["A", "B"]);
    assert_eq!(names(&["B", "ClusterVersionState"]), ["B"]);
}

/// An administrator's check whose name is not a check name is not run: one
/// Error result says which and why (the CRD's pattern may be missing).
#[rstest]
#[case::one(&[("Vendor;touch${IFS}x;#", "Blocking")], Some((crate::model::Severity::Blocking, "1 check is not run, as it has no check name: PreflightCheck storage-driver: checkName \"Vendor;touch${IFS}x;#\" is not a check name: character 7 is \";\"")))]
#[case::only_warnings(&[("Vendor\u{202e}A", "Warning"), ("b", "Warning")], Some((crate::model::Severity::Warning, "some checks are not run, as they have no check name: PreflightCheck storage-driver: checkName \"Vendor\\u{202e}A\" is not a check name")))]
#[case::none(&[], None)]
fn checks_with_names_that_are_not_check_names_are_refused_saying_why(
    #[case] refused: &[(&str, &str)],
    #[case] expected: Option<(crate::model::Severity, &str)>,
) {
    let checks: Vec<PreflightCheck> = refused
        .iter()
        .map(|(name, severity)| {
            check(json!({"checkName": name, "image": "i", "severity": severity}))
        })
        .collect();
    let refs: Vec<&PreflightCheck> = checks.iter().collect();
    match (refused_names(&refs), expected) {
        (None, None) => {}
        (Some(r), Some((severity, says))) => {
            assert_eq!(
                (r.name.as_str(), r.outcome, r.severity),
                ("PreflightChecks", Outcome::Error, severity)
            );
            assert!(r.message.starts_with(says), "{}", r.message);
            assert!(!r.message.contains('\u{202e}'), "{}", r.message);
        }
        (other, _) => panic!("{other:?}"),
    }
}

#[test]
fn format_characters_in_a_checks_message_are_dropped() {
    let f = parse_result(
        1,
        "{\"outcome\":\"Fail\",\"message\":\"driver \\u202eold\\u2066 too\\u200b\\ufeff\",\"url\":\"https://example.com/\\u202ex\"}",
    );
    assert_eq!(f.message, "driver old too");
    // A link is kept in the form it parses to: nothing invisible is left
    // in it for a terminal or a browser to read otherwise.
    assert_eq!(f.url.as_deref(), Some("https://example.com/%E2%80%AEx"));
    let plain = parse_result(1, "\u{202e}driver\u{200d} too old");
    assert_eq!(plain.message, "driver too old");
}

/// A release asks for the API token; only the administrator grants it. An
/// administrator's own check says so itself.
#[test]
fn a_release_check_gets_a_token_only_when_the_administrator_grants_it() {
    let asks =
        |name: &str| check(json!({"checkName": name, "image": "q@sha256:50", "apiAccess": true}));
    let from_release = [
        asks("ReadsTheApi"),
        asks("GrantedTheApi"),
        check(json!({"checkName": "Quiet", "image": "q@sha256:50"})),
    ];
    let own = [asks("AdministratorsOwn")];
    let settings = JobSettings {
        release_api_access: vec!["GrantedTheApi".into()],
        ..JobSettings::default()
    };
    let all: Vec<&PreflightCheck> = from_release.iter().chain(&own).collect();
    let (run, withheld) = grant_tokens(all, &from_release, &settings);
    let names: Vec<&str> = run.iter().map(|c| c.spec.check_name.as_str()).collect();
    assert_eq!(names, ["GrantedTheApi", "Quiet", "AdministratorsOwn"]);
    assert_eq!(withheld.len(), 1);
    assert_eq!(withheld[0].name, "ReadsTheApi");
    assert_eq!(withheld[0].outcome, Outcome::Error);
    assert!(
        withheld[0]
            .message
            .contains("only an administrator grants (--release-checks-api-access=ReadsTheApi)"),
        "{}",
        withheld[0].message
    );
}
