//! Only the gate may vouch, on the real API server: an UpdatePreflight
//! whose status someone else wrote, whose suite is narrowed, or that goes
//! by another name is a request, never the result the webhook decides on.

use std::time::{Duration, Instant};

use preflight_gate::model::release::ReleaseKey;
use serde_json::{Value, json};

use crate::cluster::{User, World, image_patch_args, lock, result_names};

const FORGED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
const NARROWED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";
const REQUESTED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3";

fn done(o: &Value) -> bool {
    matches!(
        o["status"]["phase"].as_str(),
        Some("Passed" | "Failed" | "Error")
    )
}

/// Asks, as a dry run, for `image` until the answer satisfies `until`
/// (the gate's cache follows the watch within moments).
fn ask_until(world: &World, image: &str, what: &str, until: impl Fn(bool, &str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = world.kubectl(User::Admin, &image_patch_args(image, &["--dry-run=server"]));
        if until(out.ok, &out.stderr) {
            return out.stderr;
        }
        assert!(Instant::now() < deadline, "never {what}: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Deletes what an earlier run on a reused control plane left.
fn start_from_rest(world: &World, names: &[&str]) {
    let mut args = vec!["delete", "updatepreflight", "--ignore-not-found", "--wait"];
    args.extend(names);
    world.admin(&args);
}

fn upf(name: &str, image: &str, checks: &[&str]) -> Value {
    json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": name}, "spec": {"image": image, "checks": checks}})
}

#[test]
fn status_written_by_anyone_but_the_gate_is_no_result() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(FORGED).object_name();
    start_from_rest(world, &[&own]);
    world.apply_json(&upf(&own, FORGED, &[]));
    world.wait_for_result(FORGED, "from the controller", done);
    ask_until(
        world,
        FORGED,
        "allowed on the gate's own result",
        |ok, _| ok,
    );

    // Someone allowed to write status (a cluster-admin, say) rewrites it.
    let forged = json!({"status": {"phase": "Failed", "results": [
        {"name": "ClusterVersionState", "severity": "Blocking", "outcome": "Fail", "message": "forged"}]}});
    world.admin(&[
        "patch",
        "updatepreflight",
        &own,
        "--subresource=status",
        "--type=merge",
        "-p",
        &forged.to_string(),
    ]);
    let refused = ask_until(world, FORGED, "refused", |ok, _| !ok);
    assert!(
        refused.contains(&format!(
            "preflight for {FORGED} has no result the gate vouches for: UpdatePreflight {own} has status written by kubectl-patch, not by the gate"
        )),
        "{refused}"
    );
}

#[test]
fn a_narrowed_suite_is_no_result() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(NARROWED).object_name();
    start_from_rest(world, &[&own]);
    // One harmless check under the release's own name: it runs, and passes.
    world.apply_json(&upf(&own, NARROWED, &["ClusterVersionState"]));
    let result = world.wait_for_result(NARROWED, "from the controller", done);
    assert_eq!(result["status"]["phase"], "Passed", "{result}");
    let refused = ask_until(world, NARROWED, "refused", |ok, _| !ok);
    assert!(
        refused.contains(&format!(
            "UpdatePreflight {own} narrows the suite to ClusterVersionState; a result runs every configured check"
        )),
        "{refused}"
    );
}

#[test]
fn a_request_under_another_name_asks_for_the_releases_own_result() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(REQUESTED).object_name();
    start_from_rest(world, &[&own, "manual-e2e-request"]);
    world.apply_json(&upf("manual-e2e-request", REQUESTED, &[]));
    // The request gets its run, and the release's own object the full suite.
    let deadline = Instant::now() + Duration::from_secs(60);
    let result = loop {
        let found = world
            .update_preflights()
            .into_iter()
            .find(|o| o["metadata"]["name"] == own.as_str() && done(o));
        if let Some(o) = found {
            break o;
        }
        assert!(Instant::now() < deadline, "{own} never got a result");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(result["spec"].get("checks").is_none(), "{result}");
    assert_eq!(
        result_names(&result),
        ["ClusterVersionState", "ClusterOperatorsHealthy"]
    );
    // And that is the result the gate decides on.
    ask_until(world, REQUESTED, "allowed", |ok, _| ok);
}

const FUTURE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4d4";

#[test]
fn a_request_stamped_in_the_future_asks_for_one_run_not_a_run_forever() {
    let (_turn, world) = lock();
    start_from_rest(world, &["manual-e2e-future"]);
    let runs = || -> u64 {
        world
            .replicas
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.runs())
            .sum()
    };
    let mut request = upf("manual-e2e-future", FUTURE, &["ClusterVersionState"]);
    request["metadata"]["annotations"] =
        json!({"preflight.dev/requested-at": "9999-01-01T00:00:00Z"});
    let before = runs();
    world.apply_json(&request);
    let result = world.wait_for_result(FUTURE, "from the controller", |o| {
        o["metadata"]["name"] == "manual-e2e-future" && done(o)
    });
    assert_eq!(
        result["status"]["observedRequest"], "9999-01-01T00:00:00Z",
        "{result}"
    );
    // Its own status write, and the watch's resyncs, ask for nothing more.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(runs(), before + 1, "one run for one stamp");
    world.admin(&[
        "delete",
        "updatepreflight",
        "manual-e2e-future",
        "--wait=false",
    ]);
}
