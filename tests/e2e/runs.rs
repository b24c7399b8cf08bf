//! Preflight runs through the real API server: triggers, the controller,
//! leader election, proactive results and a broken watch.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{
    LEASE_SECONDS, STALE_AFTER_SECONDS, User, World, image_patch_args, lock, result_names,
};
use crate::signatures::set_available_updates;

const UNCHECKED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5555555555555555555555555555555555555555555555555555555555555555";

/// Adds `image` at `version` to what the update graph offers; returns what
/// it offered before, to put back.
fn offer(world: &World, version: &str, image: &str) -> Value {
    let before = world.cluster_version()["status"]["availableUpdates"].clone();
    let mut offered = before.clone();
    offered
        .as_array_mut()
        .unwrap()
        .push(json!({"version": version, "image": image, "channels": ["stable-4.15"]}));
    set_available_updates(world, &offered);
    before
}

fn phase(o: &Value) -> &str {
    o["status"]["phase"].as_str().unwrap_or("")
}

#[test]
fn a_target_nobody_checked_is_run_only_when_someone_asks_then_gets_its_verdict() {
    let (_turn, world) = lock();
    let own = preflight_gate::model::release::ReleaseKey::from_image(UNCHECKED).object_name();
    world.admin(&[
        "delete",
        "updatepreflights",
        "--ignore-not-found",
        "--wait",
        "-l",
        "preflight.dev/e2e-request",
    ]);
    world.admin(&[
        "delete",
        "updatepreflight",
        "--ignore-not-found",
        "--wait",
        &own,
    ]);
    // The graph does not offer it: the review alone starts nothing.
    let first = world.kubectl(User::Admin, &image_patch_args(UNCHECKED, &[]));
    assert!(!first.ok);
    assert!(
        first.stderr.contains(&format!(
            "preflight for {UNCHECKED} has not been checked: no results yet, and the update graph does not offer it"
        )),
        "{}",
        first.stderr
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !world
            .update_preflights()
            .iter()
            .any(|o| o["spec"]["image"] == UNCHECKED),
        "a review made an object"
    );

    // Someone allowed to create UpdatePreflights asks, as the denial says.
    let request = json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"generateName": "manual-", "labels": {"preflight.dev/e2e-request": "true"}},
        "spec": {"image": UNCHECKED}});
    let path = world.dir().join("unchecked-request.json");
    std::fs::write(&path, request.to_string()).unwrap();
    world.admin(&["create", "-f", path.to_str().unwrap()]);

    // The controller ran the request, and the release's own object.
    let done = world.wait_for_result(UNCHECKED, "with a result", |o| {
        o["metadata"]["name"] == own.as_str() && matches!(phase(o), "Passed" | "Failed" | "Error")
    });
    assert_eq!(
        done["metadata"]["labels"]["preflight.dev/auto-created"],
        "true"
    );
    assert_eq!(phase(&done), "Passed", "{done}");
    assert_eq!(
        result_names(&done),
        ["ClusterVersionState", "ClusterOperatorsHealthy"]
    );
    assert_eq!(done["status"]["conditions"][0]["type"], "Passed");
    assert_eq!(
        done["status"]["observedGeneration"],
        done["metadata"]["generation"]
    );

    // The same request now gets its real verdict, from the watch-fed cache.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let again = world.kubectl(User::Admin, &image_patch_args(UNCHECKED, &[]));
        if again.ok {
            break;
        }
        assert!(Instant::now() < deadline, "never allowed: {}", again.stderr);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["image"],
        UNCHECKED
    );
}

#[test]
fn a_target_offered_by_the_graph_is_checked_without_anyone_asking_and_collected_when_withdrawn() {
    let (_turn, world) = lock();
    let image = "quay.io/openshift-release-dev/ocp-release@sha256:7777777777777777777777777777777777777777777777777777777777777777";
    let before = offer(world, "4.15.20", image);
    let done = world.wait_for_result(image, "checked ahead of time", |o| phase(o) == "Passed");
    assert_eq!(done["spec"]["version"], "4.15.20");

    // Withdrawn from the graph: the auto-created object goes once idle for
    // the grace period (15 s here).
    set_available_updates(world, &before);
    let deadline = Instant::now() + Duration::from_secs(60);
    while world
        .update_preflights()
        .iter()
        .any(|o| o["spec"]["image"] == image)
    {
        assert!(
            Instant::now() < deadline,
            "the withdrawn target's object was never collected"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Objects made by administrators (the seeded results) are never collected.
    assert!(world.update_preflights().len() >= 2);
}

#[test]
fn only_the_leader_runs_suites_and_a_new_one_takes_over_when_it_dies() {
    let (_turn, world) = lock();
    let mut replicas = world.replicas.lock().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !replicas[0].is_leader() {
        assert!(Instant::now() < deadline, "the first replica never led");
        std::thread::sleep(Duration::from_millis(100));
    }
    let standby = world.start_replica(&format!("controller-{}", replicas.len() + 1));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(world.lease_holder(), replicas[0].identity);
    assert!(!standby.is_leader());

    // A run asked for now is run by the leader alone. The target is one the
    // graph offers, so garbage collection leaves it alone.
    let target = world.wait_for_result(
        "quay.io/openshift-release-dev/ocp-release@sha256:77aa0c1b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c",
        "for the offered 4.15.16",
        |o| o["metadata"]["labels"]["preflight.dev/auto-created"] == "true",
    );
    let name = target["metadata"]["name"].as_str().unwrap().to_owned();
    let (leader_runs, standby_runs) = (replicas[0].runs(), standby.runs());
    let request = |world: &crate::cluster::World| {
        let stamp = format!("preflight.dev/requested-at={}", jiff::Timestamp::now());
        world.admin(&["annotate", "--overwrite", "updatepreflight", &name, &stamp]);
    };
    request(world);
    let deadline = Instant::now() + Duration::from_secs(20);
    while replicas[0].runs() == leader_runs {
        assert!(
            Instant::now() < deadline,
            "the leader never ran the requested suite"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(standby.runs(), standby_runs, "the standby ran nothing");

    // The leader dies without releasing its Lease.
    replicas[0].kill();
    let killed = Instant::now();
    while world.lease_holder() != standby.identity {
        assert!(
            killed.elapsed() < Duration::from_secs(LEASE_SECONDS * 3),
            "no takeover"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = killed.elapsed();
    assert!(
        took <= Duration::from_secs(LEASE_SECONDS + 2),
        "took over in {took:?}, lease is {LEASE_SECONDS} s"
    );
    let standby_runs = standby.runs();
    std::thread::sleep(Duration::from_millis(1100));
    request(world);
    let deadline = Instant::now() + Duration::from_secs(20);
    while standby.runs() == standby_runs {
        assert!(
            Instant::now() < deadline,
            "the new leader never ran the requested suite"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("takeover after the leader died: {took:?} (lease {LEASE_SECONDS} s)");
    replicas.remove(0);
    replicas.insert(0, standby);
}

#[test]
fn a_broken_watch_serves_cached_results_then_marks_them_stale() {
    let (_turn, world) = lock();
    let review: Value =
        serde_json::from_str(include_str!("../../examples/reviews/update-to-4.15.3.json")).unwrap();
    let message = |answer: &Value| {
        answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(message(&world.post_review(&review)).starts_with("preflight for 4.15.3 failed"));

    let down_for = Duration::from_secs(STALE_AFTER_SECONDS + 4);
    let restart = world.restart_apiserver(down_for);
    // Just after the API server went away: the cache still answers.
    std::thread::sleep(Duration::from_millis(1500));
    let cached = message(&world.post_review(&review));
    assert!(
        cached.starts_with("preflight for 4.15.3 failed"),
        "{cached}"
    );
    // Past the threshold: the cache is not trusted, and no run is asked
    // for, since it could not reach the API server anyway.
    std::thread::sleep(Duration::from_secs(STALE_AFTER_SECONDS + 1));
    let stale = message(&world.post_review(&review));
    assert!(
        stale.starts_with("preflight results for 4.15.3 cannot be trusted now"),
        "{stale}"
    );
    assert!(stale.contains("lost its watch"), "{stale}");

    let restarted = restart.join().unwrap();
    assert!(restarted.ok, "{}", restarted.stderr);
    // The watch recovers and the verdict is real again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = message(&world.post_review(&review));
        if now.starts_with("preflight for 4.15.3 failed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cache never recovered: {now}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // And the controller is back at work: a run asked for now is run.
    let offered = "quay.io/openshift-release-dev/ocp-release@sha256:77aa0c1b2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c";
    let name =
        world.wait_for_result(offered, "for the offered 4.15.16", |_| true)["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
    let asked = jiff::Timestamp::now();
    world.admin(&[
        "annotate",
        "--overwrite",
        "updatepreflight",
        &name,
        &format!("preflight.dev/requested-at={asked}"),
    ]);
    world.wait_for_result(offered, "run again after the outage", |o| {
        let started = o["status"]["startTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        matches!(phase(o), "Passed" | "Failed")
            && started.is_some_and(|t| t.as_second() >= asked.as_second())
    });
}

#[test]
fn preflight_gate_run_asks_for_a_run_and_prints_the_result() {
    let (_turn, world) = lock();
    let image = "quay.io/openshift-release-dev/ocp-release@sha256:8888888888888888888888888888888888888888888888888888888888888888";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args(["run", "--to", image, "--wait", "--timeout", "60s"])
        .args(["--kubeconfig", world.admin_kubeconfig()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("preflight run requested for {image}")),
        "{stderr}"
    );
    assert!(stdout.starts_with(&format!("{image}: Passed")), "{stdout}");
    assert!(stdout.contains("ClusterOperatorsHealthy"), "{stdout}");
    let done = world.wait_for_result(image, "written", |o| phase(o) == "Passed");
    assert_eq!(
        done["metadata"]["labels"]["preflight.dev/auto-created"],
        "true"
    );

    // A version the cluster is not offered cannot be resolved.
    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args([
            "run",
            "--to",
            "4.99.1",
            "--kubeconfig",
            world.admin_kubeconfig(),
        ])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("4.99.1 is not offered to this cluster")
    );
}

/// A review only ever asks a question (trust, third pass, M6): a forged
/// `mode: Preflight` review and a forged target change, posted straight to
/// the gate for a target whose results are fresh, leave its object as it
/// was (no stamp, no new run), and a real update to it is then decided on
/// those results, not denied as running.
#[test]
fn a_review_never_starts_a_run_not_even_a_forged_preflight_mode() {
    let (_turn, world) = lock();
    let image = "quay.io/openshift-release-dev/ocp-release@sha256:8888888888888888888888888888888888888888888888888888888888888888";
    let before = offer(world, "4.15.21", image);
    let done = world.wait_for_result(image, "checked ahead of time", |o| phase(o) == "Passed");
    let name = done["metadata"]["name"].as_str().unwrap().to_owned();

    let stored = world.cluster_version();
    for (uid, update) in [
        (
            "f0f0f0f0-0000-4000-8000-00000000000a",
            json!({"image": image, "mode": "Preflight"}),
        ),
        (
            "f0f0f0f0-0000-4000-8000-00000000000b",
            json!({"image": image}),
        ),
    ] {
        let mut claimed = stored.clone();
        claimed["spec"]["desiredUpdate"] = update;
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "config.openshift.io", "version": "v1", "kind": "ClusterVersion"},
                "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
                "name": "version",
                "operation": "UPDATE",
                "userInfo": {"username": "mallory", "groups": ["system:authenticated"]},
                "object": claimed,
                "oldObject": stored,
                "dryRun": false,
            }
        });
        let answer = world.post_review(&review);
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    // Long enough for a trigger and the controller to have acted on one.
    std::thread::sleep(Duration::from_secs(4));
    let after: Value =
        serde_json::from_str(&world.admin(&["get", "updatepreflight", &name, "-o", "json"]))
            .unwrap();
    assert!(
        after["metadata"]["annotations"]["preflight.dev/requested-at"].is_null(),
        "a review stamped a run request: {after}"
    );
    assert_eq!(
        after["status"]["startTime"], done["status"]["startTime"],
        "a review started a run"
    );
    assert_eq!(phase(&after), "Passed");

    // A real change to that target, through the API server, is decided on
    // the fresh results.
    let real = world.kubectl(User::Admin, &image_patch_args(image, &["--dry-run=server"]));
    assert!(real.ok, "{}", real.stderr);
    set_available_updates(world, &before);
}

/// Trust, third pass, L2: on the real API server, whoever may create
/// UpdatePreflights (here alice, granted that alone) gets
/// `--max-run-requests` run requests (2 here) and then the gate's 429,
/// which the API server passes on; a dry run is not counted, and the
/// API server's superusers are not limited. Before, every request ran.
#[test]
fn run_requests_past_the_limit_are_refused_with_when_to_ask_again() {
    let (_turn, world) = lock();
    world.switch_to_gate_with(&["--max-run-requests", "2"]);
    world.apply_json(&json!({
        "apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "e2e-updatepreflight-requester"},
         "rules": [{"apiGroups": ["preflight.dev"], "resources": ["updatepreflights"],
                    "verbs": ["create", "get", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "e2e-alice-requester"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "e2e-updatepreflight-requester"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}]}));
    let names: Vec<String> = (1..=4).map(|i| format!("e2e-limited-{i}")).collect();
    let mut delete = vec![
        "delete",
        "updatepreflight",
        "--ignore-not-found",
        "--wait=false",
    ];
    delete.extend(names.iter().map(String::as_str));
    world.admin(&delete);
    let dir = tempfile::tempdir().unwrap();
    let create = |user: User, name: &str, extra: &[&str]| {
        let file = dir.path().join(format!("{name}.json"));
        let object = json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
            "metadata": {"name": name}, "spec": {"image": UNCHECKED}});
        std::fs::write(&file, object.to_string()).unwrap();
        let mut args = vec!["create", "-f", file.to_str().unwrap()];
        args.extend(extra);
        world.kubectl(user, &args)
    };

    let dry = create(User::Alice, &names[0], &["--dry-run=server"]);
    assert!(dry.ok, "{}", dry.stderr);
    for name in &names[..2] {
        let taken = create(User::Alice, name, &[]);
        assert!(taken.ok, "{name}: {}", taken.stderr);
    }
    let refused = create(User::Alice, &names[2], &[]);
    assert!(!refused.ok, "a third request went through");
    assert!(
        refused.stderr.contains(
            "admission webhook \"updatepreflights.preflight.dev\" denied the request: preflight-gate: alice has asked for 2 preflight runs in the last 10 minutes"
        ),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains("retry in ~"), "{}", refused.stderr);
    // The API server's superusers are not limited.
    let admin = create(User::Admin, &names[3], &[]);
    assert!(admin.ok, "{}", admin.stderr);
    world.admin(&delete);
}
