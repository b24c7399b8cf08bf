//! Only the gate may vouch, on the real API server: an UpdatePreflight
//! whose status someone else wrote, or that goes by another name, is a
//! request, never the result the webhook decides on; the spec of the
//! gate's own result is the gate's, repaired when someone narrows it.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use preflight_gate::model::release::ReleaseKey;
use serde_json::{Value, json};

use crate::cluster::{Replica, User, World, image_patch_args, lock, result_names};

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

/// Stops every controller replica, so that nothing rewrites a status the
/// test forges (a controller runs an unsigned result again).
fn stop_controllers(world: &World) -> MutexGuard<'_, Vec<Replica>> {
    let mut replicas = world.replicas.lock().unwrap();
    for replica in replicas.iter_mut() {
        replica.kill();
    }
    replicas.clear();
    replicas
}

/// Starts a controller replica again; it leads once the killed one's Lease
/// runs out.
fn start_controller(world: &World, mut replicas: MutexGuard<'_, Vec<Replica>>, name: &str) {
    replicas.push(world.start_replica(name));
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
    let replicas = stop_controllers(world);

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
    // A controller runs it again, and its own result counts.
    start_controller(world, replicas, "controller-forged");
    world.wait_for_result(FORGED, "rewritten by the controller", |o| {
        done(o) && o["status"]["results"][0]["message"] != "forged"
    });
    ask_until(world, FORGED, "allowed again", |ok, _| ok);
}

/// Trust, third pass, L2: the gate owns its own result's spec. A suite
/// narrowed under the release's own name (by anyone who may create or
/// patch UpdatePreflights: an updater) is repaired to the whole suite and
/// run, never obeyed. Before, the narrowed suite ran, its pass was refused,
/// and every update to the target was denied until someone deleted it.
#[test]
fn a_narrowed_suite_of_the_gates_own_result_is_repaired_and_run_whole() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(NARROWED).object_name();
    start_from_rest(world, &[&own]);
    world.apply_json(&upf(&own, NARROWED, &["ClusterVersionState"]));
    let result = world.wait_for_result(NARROWED, "repaired and run whole", |o| {
        done(o) && o["spec"].get("checks").is_none()
    });
    assert_eq!(
        result_names(&result),
        ["ClusterVersionState", "ClusterOperatorsHealthy"],
        "{result}"
    );
    let events: Value =
        serde_json::from_str(&world.admin(&["get", "events.events.k8s.io", "-A", "-o", "json"]))
            .unwrap();
    let repaired = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "PreflightSpecRepaired" && e["regarding"]["name"] == own.as_str())
        .unwrap_or_else(|| panic!("no PreflightSpecRepaired Event for {own}"));
    assert!(
        repaired["note"]
            .as_str()
            .unwrap()
            .contains("its suite was narrowed to ClusterVersionState"),
        "{repaired}"
    );
    // And the whole suite's result is the one the gate decides on.
    ask_until(world, NARROWED, "allowed", |ok, _| ok);
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

const UNSIGNED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5";

/// Vouching rests on more than RBAC: a status written with
/// `--field-manager=preflight-gate` but without the gate's key is no
/// result, nor is one that carries a signature the gate made for another
/// status. With no controller running, the forged status stays, and the
/// webhook refuses it; a controller that starts then runs the target again
/// and writes a result it signed, which counts.
#[test]
fn a_status_written_as_the_gates_field_manager_without_its_key_is_no_result() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(UNSIGNED).object_name();
    // No controller: nothing rewrites what is forged below.
    let replicas = stop_controllers(world);
    start_from_rest(world, &[&own]);
    let object = upf(&own, UNSIGNED, &[]);
    world.apply_json(&object);
    let generation = world.admin(&[
        "get",
        "updatepreflight",
        &own,
        "-o",
        "jsonpath={.metadata.generation}",
    ]);
    let now = jiff::Timestamp::now().to_string();
    let status = |outcome: &str, phase: &str| {
        json!({"phase": phase, "startTime": now, "completionTime": now,
            "observedGeneration": generation.trim().parse::<i64>().unwrap(),
            "results": [
                {"name": "ClusterVersionState", "severity": "Blocking", "outcome": outcome, "message": "forged"},
                {"name": "ClusterOperatorsHealthy", "severity": "Blocking", "outcome": "Pass", "message": "forged"}]})
    };

    // A pass, as the gate's field manager, and no signature.
    world.write_status_as_the_gates_manager(&own, &status("Pass", "Passed"));
    let refused = ask_until(world, UNSIGNED, "refused", |ok, stderr| {
        !ok && stderr.contains("signature")
    });
    // The gate's own object with a bad signature (as a lost or rotated key
    // leaves every result): run again by the gate itself, never a chore
    // for the updater, who may not delete it.
    assert!(
        refused.contains(&format!("preflight for {UNSIGNED} is running, retry in ~"))
            && refused.contains("Its result has no signature of the gate's")
            && refused.contains("the gate runs it again by itself")
            && !refused.contains("Delete it"),
        "{refused}"
    );

    // The gate's own signature of a failure, on a pass.
    let mut copied = status("Pass", "Passed");
    copied["signature"] = json!(world.sign_as_the_gate(&object, &status("Fail", "Failed")));
    world.write_status_as_the_gates_manager(&own, &copied);
    let refused = ask_until(world, UNSIGNED, "refused", |ok, stderr| {
        !ok && stderr.contains("a signature that is not the gate's")
    });
    assert!(
        refused.contains("Its result has a signature that is not the gate's"),
        "{refused}"
    );
    // What the gate signed is what counts: the failure, signed, is a result.
    let mut failure = status("Fail", "Failed");
    failure["signature"] = json!(world.sign_as_the_gate(&object, &failure));
    world.write_status_as_the_gates_manager(&own, &failure);
    let denied = ask_until(world, UNSIGNED, "denied on its checks", |ok, stderr| {
        !ok && stderr.contains("ClusterVersionState")
    });
    assert!(!denied.contains("vouches"), "{denied}");

    // The forged pass again; a controller that starts runs the target anew
    // and signs what it writes, which the webhook counts.
    world.write_status_as_the_gates_manager(&own, &copied);
    ask_until(world, UNSIGNED, "refused", |ok, stderr| {
        !ok && stderr.contains("a signature that is not the gate's")
    });
    start_controller(world, replicas, "controller-vouch");
    let result = world.wait_for_result(UNSIGNED, "rewritten by the controller", |o| {
        done(o) && o["status"]["results"][0]["message"] != "forged"
    });
    let written: preflight_gate::model::UpdatePreflight =
        serde_json::from_value(result.clone()).unwrap();
    assert_eq!(world.result_key().verify(&written), Ok(()), "{result}");
    ask_until(
        world,
        UNSIGNED,
        "allowed on the gate's own result",
        |ok, _| ok,
    );
    start_from_rest(world, &[&own]);
}

const REPLAYED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6f6";

/// An older signed pass written back (trust, third pass, M1): run 1 of the
/// target passed, run 2 failed; someone who may write status (naming the
/// gate's field manager) puts run 1's status back, signature and all. The
/// webhook has seen run 2, so it refuses run 1 rather than allow the
/// target, and the controller, which has seen run 2 too, runs it again.
#[test]
fn an_older_signed_pass_written_back_is_no_result() {
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(REPLAYED).object_name();
    // No controller while the runs are written: the test plays it.
    let replicas = stop_controllers(world);
    start_from_rest(world, &[&own]);
    let object = upf(&own, REPLAYED, &[]);
    world.apply_json(&object);
    let generation: i64 = world
        .admin(&[
            "get",
            "updatepreflight",
            &own,
            "-o",
            "jsonpath={.metadata.generation}",
        ])
        .trim()
        .parse()
        .unwrap();
    let now = jiff::Timestamp::now().to_string();
    let run = |number: u64, outcome: &str, phase: &str| {
        let mut status = json!({"phase": phase, "startTime": now, "completionTime": now,
            "observedGeneration": generation, "run": number,
            "results": [{"name": "ClusterVersionState", "severity": "Blocking",
                         "outcome": outcome, "message": format!("run {number}")}]});
        status["signature"] = json!(world.sign_as_the_gate(&object, &status));
        status
    };
    let passed = run(1, "Pass", "Passed");
    world.write_status_as_the_gates_manager(&own, &passed);
    ask_until(world, REPLAYED, "allowed on run 1", |ok, _| ok);
    world.write_status_as_the_gates_manager(&own, &run(2, "Fail", "Failed"));
    ask_until(world, REPLAYED, "denied on run 2", |ok, stderr| {
        !ok && stderr.contains("ClusterVersionState")
    });
    // Run 1's pass, written back: well signed, and still no result.
    world.write_status_as_the_gates_manager(&own, &passed);
    let refused = ask_until(world, REPLAYED, "refused", |ok, stderr| {
        !ok && stderr.contains("older")
    });
    assert!(
        refused.contains(
            "Its result is run 1 of the object, older than run 2, which the gate has seen: an older status was written back"
        ) && refused.contains("the gate runs it again by itself"),
        "{refused}"
    );

    // A controller leads and sees run 10, fresh and signed: nothing to run.
    let mut replicas = replicas;
    replicas.push(world.start_replica("controller-replay"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !replicas[0].is_leader() {
        assert!(Instant::now() < deadline, "the new replica never led");
        std::thread::sleep(Duration::from_millis(200));
    }
    world.write_status_as_the_gates_manager(&own, &run(10, "Fail", "Failed"));
    std::thread::sleep(Duration::from_secs(2));
    drop(replicas);
    // Run 1 written back again: the controller runs the target anew,
    // numbered past every run.
    world.write_status_as_the_gates_manager(&own, &passed);
    let result = world.wait_for_result(REPLAYED, "run again by the controller", |o| {
        done(o) && o["status"]["run"].as_u64().is_some_and(|n| n > 10)
    });
    let written: preflight_gate::model::UpdatePreflight =
        serde_json::from_value(result.clone()).unwrap();
    assert_eq!(world.result_key().verify(&written), Ok(()), "{result}");
    start_from_rest(world, &[&own]);
}

/// A review may name any host with a digest the graph offers: the object
/// the gate creates for it, whose image its extraction pod would pull,
/// names the pullspec the update graph gives.
#[test]
fn a_review_naming_another_host_gets_the_object_the_graph_names() {
    const GRAPH: &str = "quay.io/openshift-release-dev/ocp-release@sha256:77aa0c1b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c";
    let (_turn, world) = lock();
    let own = ReleaseKey::from_image(GRAPH).object_name();
    start_from_rest(world, &[&own]);
    let (_, digest) = GRAPH.split_once('@').unwrap();
    let evil = format!("evil.example/x@{digest}");
    // A real review naming another host, not a dry run: denied for want of a
    // result, which the controller makes for the offered digest by itself.
    let out = world.kubectl(User::Admin, &image_patch_args(&evil, &[]));
    assert!(!out.ok, "no result yet, so denied: {}", out.stdout);
    let deadline = Instant::now() + Duration::from_secs(30);
    let created = loop {
        let found = world
            .update_preflights()
            .into_iter()
            .find(|o| o["metadata"]["name"] == own.as_str());
        if let Some(o) = found {
            break o;
        }
        assert!(Instant::now() < deadline, "{own} was never created");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(created["spec"]["image"], GRAPH, "{created}");
    assert!(
        !world.update_preflights().iter().any(|o| o["spec"]["image"]
            .as_str()
            .unwrap_or("")
            .contains("evil.example")),
        "no object names the review's host"
    );
}
