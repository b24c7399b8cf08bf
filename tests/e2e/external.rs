//! External checks (PreflightChecks run as Jobs) through the real API server.
//! No kubelet and no controller-manager run here, so the test plays both
//! the Job controller (it creates the Job's pod from its template) and the
//! kubelet (it writes the pod's status: container states, exit codes and
//! termination messages), and the Job controller's deadline verdict.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::access::{self, Account};
use crate::cluster::{CLEAR_TARGET, JOBS_NAMESPACE, User, World, image_patch_args, lock};

/// Where check Jobs and extraction pods run (deploy/base's
/// `--jobs-namespace`), apart from the gate's own namespace.
const NS: &str = "preflight-gate-checks";

/// Release images these tests check; by digest, as the gate keys them.
fn release(n: char) -> String {
    format!("ocp-release@sha256:{}", n.to_string().repeat(64))
}

/// A check's image, by digest: the checks' namespace admits no other
/// (deploy/base/checks-admission-policy.yaml).
fn check_image(name: &str) -> String {
    format!("preflight-e2e/{name}@sha256:{}", "c4".repeat(32))
}

/// The PreflightChecks and UpdatePreflights a test made, deleted when it
/// ends (pass or panic), so that other tests' runs never see them.
struct Made<'a> {
    world: &'a World,
    checks: Vec<String>,
    preflights: Vec<String>,
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        for (kind, names) in [
            ("preflightcheck", &self.checks),
            ("updatepreflight", &self.preflights),
        ] {
            for name in names {
                let _ = self.world.kubectl(
                    User::Admin,
                    &["delete", kind, name, "--ignore-not-found", "--wait=false"],
                );
            }
        }
        // No garbage collector runs here: the Jobs and pods go by hand.
        for kind in ["jobs", "pods"] {
            let _ = self.world.kubectl(
                User::Admin,
                &[
                    "delete",
                    kind,
                    "-n",
                    NS,
                    "-l",
                    "app.kubernetes.io/managed-by=preflight-gate",
                    "--ignore-not-found",
                    "--wait=false",
                ],
            );
        }
    }
}

impl<'a> Made<'a> {
    fn new(world: &'a World) -> Self {
        // The check ServiceAccount and its ClusterRole, as deploy/ has them;
        // pods need their ServiceAccount to exist, and nothing else makes it.
        let rbac = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/base/preflight-check-rbac.yaml"
        );
        world.admin(&["apply", "--server-side", "--force-conflicts", "-f", rbac]);
        Self {
            world,
            checks: Vec::new(),
            preflights: Vec::new(),
        }
    }

    fn check(&mut self, name: &str, spec: Value) {
        self.world.apply_json(&json!({
            "apiVersion": "preflight.dev/v1alpha1", "kind": "PreflightCheck",
            "metadata": {"name": name}, "spec": spec}));
        self.checks.push(name.to_owned());
    }

    /// An UpdatePreflight for `image` running only `checks`; its uid.
    fn preflight(&mut self, name: &str, image: &str, version: &str, checks: &[&str]) -> String {
        self.world.apply_json(&json!({
            "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
            "metadata": {"name": name},
            "spec": {"image": image, "version": version, "checks": checks}}));
        self.preflights.push(name.to_owned());
        self.world
            .admin(&[
                "get",
                "updatepreflight",
                name,
                "-o",
                "jsonpath={.metadata.uid}",
            ])
            .trim()
            .to_owned()
    }
}

/// A ClusterVersion whose update graph offers `images`.
fn offering(images: &[&str]) -> preflight_gate::model::ClusterVersion {
    let offered: Vec<Value> = images
        .iter()
        .map(|image| json!({"version": "4.14.20", "image": image}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "version"},
        "status": {"availableUpdates": offered}
    }))
    .unwrap()
}

fn get_json(world: &World, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&world.admin(&all)).unwrap()
}

/// Waits for the Jobs of one run, one per check, keyed by check name.
fn wait_for_jobs(world: &World, uid: &str, count: usize) -> Vec<Value> {
    let selector = format!("preflight.dev/update-preflight-uid={uid}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let jobs = get_json(world, &["get", "jobs", "-n", NS, "-l", &selector]);
        let items = jobs["items"].as_array().unwrap().clone();
        if items.len() >= count {
            assert_eq!(items.len(), count, "one Job per check that applies");
            return items;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {count} Jobs were created",
            items.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn check_of(job: &Value) -> &str {
    job["metadata"]["labels"]["preflight.dev/check"]
        .as_str()
        .unwrap()
}

/// As the Job controller: the Job's pod, from its template.
fn start_pod(world: &World, job: &Value) -> String {
    let name = job["metadata"]["name"].as_str().unwrap();
    let template = &job["spec"]["template"];
    let mut labels = template["metadata"]["labels"].clone();
    labels["batch.kubernetes.io/job-name"] = json!(name);
    labels["job-name"] = json!(name);
    let pod_name = format!("{name}-pod");
    world.apply_json(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": NS, "labels": labels,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
        "spec": template["spec"],
    }));
    pod_name
}

/// As the kubelet: the check container's state.
fn kubelet_reports(world: &World, pod: &str, image: &str, state: Value) {
    let phase = match state.get("terminated") {
        Some(t) if t["exitCode"] == 0 => "Succeeded",
        Some(_) => "Failed",
        None => "Pending",
    };
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": phase,
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "check", "image": image, "imageID": "", "ready": false,
            "restartCount": 0, "state": state}]}});
    world.admin(&[
        "patch",
        "pod",
        pod,
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// As the Job controller when `activeDeadlineSeconds` has passed.
fn deadline_exceeded(world: &World, job: &str) {
    let now = jiff::Timestamp::now().to_string();
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": "DeadlineExceeded",
            "message": "Job was active longer than specified deadline",
            "lastProbeTime": now, "lastTransitionTime": now})
    };
    let status = json!({"status": {"startTime": now, "active": 0, "failed": 0,
        "conditions": [condition("FailureTarget"), condition("Failed")]}});
    world.admin(&[
        "patch",
        "job",
        job,
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// As the Job controller and the kubelet together: every Job of the run
/// `uid` gets a pod in `state`, until the UpdatePreflight of `image` is
/// `done`. (A requested run may be followed by another; each gets served.)
fn kubelet_until(
    world: &World,
    uid: &str,
    image: &str,
    state: impl Fn() -> Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let selector = format!("preflight.dev/update-preflight-uid={uid}");
    let mut served = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for job in get_json(world, &["get", "jobs", "-n", NS, "-l", &selector])["items"]
            .as_array()
            .unwrap()
        {
            let name = job["metadata"]["name"].as_str().unwrap().to_owned();
            if served.insert(name) {
                let pod = start_pod(world, job);
                let image = job["spec"]["template"]["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap();
                kubelet_reports(world, &pod, image, state());
            }
        }
        if let Some(o) = world
            .update_preflights()
            .into_iter()
            .find(|o| o["spec"]["image"] == image && done(o))
        {
            return o;
        }
        assert!(Instant::now() < deadline, "no result for {image}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn terminated(code: i32, message: &str) -> Value {
    let now = jiff::Timestamp::now().to_string();
    json!({"terminated": {"exitCode": code, "message": message, "reason": if code == 0 { "Completed" } else { "Error" },
        "startedAt": now, "finishedAt": now}})
}

fn pull_failure() -> Value {
    json!({"waiting": {"reason": "ImagePullBackOff",
        "message": "Back-off pulling image: manifest unknown"}})
}

fn result<'v>(done: &'v Value, name: &str) -> &'v Value {
    done["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no result for {name}: {done}"))
}

fn phase(o: &Value) -> &str {
    o["status"]["phase"].as_str().unwrap_or("")
}

fn finished(o: &Value) -> bool {
    matches!(phase(o), "Passed" | "Failed" | "Error")
}

#[test]
fn external_checks_pass_fail_time_out_fail_to_pull_and_say_garbage() {
    let (_turn, world) = lock();
    let mut made = Made::new(world);
    let checks = [
        ("e2e-pass", "E2EPass", json!({})),
        ("e2e-fail", "E2EFail", json!({})),
        ("e2e-timeout", "E2ETimeout", json!({"timeoutSeconds": 5})),
        (
            "e2e-pull",
            "E2EPull",
            json!({"failurePolicy": "FailClosed"}),
        ),
        ("e2e-garbage", "E2EGarbage", json!({})),
        (
            "e2e-minor-only",
            "E2EMinorOnly",
            json!({"appliesTo": {"updateKinds": ["Minor", "Major"]}}),
        ),
    ];
    for (name, check, extra) in &checks {
        let mut spec = json!({"checkName": check, "image": check_image(name),
            "command": ["/check"], "env": [{"name": "MODE", "value": "e2e"}]});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        made.check(name, spec);
    }
    // A release the update graph offers, at 4.14.12: from 4.14.1, a patch
    // update. The object claims 4.14.20; the gate takes the graph's word.
    let offered = &world.cluster_version()["status"]["availableUpdates"][0];
    assert_eq!(offered["version"], "4.14.12");
    let image = offered["image"].as_str().unwrap().to_owned();
    let names: Vec<&str> = checks.iter().map(|c| c.1).collect();
    let uid = made.preflight("e2e-external-outcomes", &image, "4.14.20", &names);

    // Every check that applies gets a Job; the minor-only one none.
    let jobs = wait_for_jobs(world, &uid, 5);
    let job = |check: &str| jobs.iter().find(|j| check_of(j) == check).unwrap();
    assert!(jobs.iter().all(|j| check_of(j) != "E2EMinorOnly"));

    // What the gate asked for, as the API server stored it.
    let pass = job("E2EPass");
    let pod = &pass["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "preflight-check");
    assert_eq!(pod["containers"][0]["image"], check_image("e2e-pass"));
    assert_eq!(
        pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
    let env = &pod["containers"][0]["env"];
    let var = |name: &str| {
        env.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(var("TARGET_VERSION"), Some(json!("4.14.12")));
    assert_eq!(var("TARGET_IMAGE"), Some(json!(image)));
    assert_eq!(var("CURRENT_VERSION"), Some(json!("4.14.1")));
    assert_eq!(var("MODE"), Some(json!("e2e")));
    assert!(
        var("CURRENT_IMAGE")
            .and_then(|v| v.as_str().map(|s| s.contains("@sha256:05ba8e63")))
            .unwrap_or(false)
    );
    assert_eq!(pass["spec"]["activeDeadlineSeconds"], 120);
    assert_eq!(job("E2ETimeout")["spec"]["activeDeadlineSeconds"], 5);
    let owner = &pass["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("UpdatePreflight"), Some(uid.as_str()))
    );

    // The test plays the Job controller and the kubelet.
    let run = |check: &str, state: Value| {
        let j = job(check);
        let pod = start_pod(world, j);
        let image = j["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap();
        kubelet_reports(world, &pod, image, state);
    };
    run(
        "E2EPass",
        terminated(0, "all 3 storage drivers support 4.14.20"),
    );
    run(
        "E2EFail",
        terminated(
            1,
            r#"{"outcome":"Fail","message":"driver foo 1.2 does not support 4.14.20","url":"https://example.com/foo"}"#,
        ),
    );
    run("E2EPull", pull_failure());
    run("E2EGarbage", terminated(0, r#"{"outcome": 42, "mess"#));
    // The deadline: a pod that runs and never ends, then the Job controller's verdict.
    let timeout = job("E2ETimeout");
    let pod = start_pod(world, timeout);
    kubelet_reports(
        world,
        &pod,
        &check_image("e2e-timeout"),
        json!({"running": {"startedAt": jiff::Timestamp::now().to_string()}}),
    );
    deadline_exceeded(world, timeout["metadata"]["name"].as_str().unwrap());

    let done = world.wait_for_result(&image, "after its Jobs", |o| {
        o["metadata"]["name"] == "e2e-external-outcomes" && finished(o)
    });
    assert_eq!(phase(&done), "Failed", "{done}");
    let r = result(&done, "E2EPass");
    assert_eq!(
        (r["outcome"].as_str(), r["message"].as_str()),
        (Some("Pass"), Some("all 3 storage drivers support 4.14.20"))
    );
    assert_eq!(r["failurePolicy"], "FailClosed");
    let r = result(&done, "E2EFail");
    assert_eq!(
        (
            r["outcome"].as_str(),
            r["message"].as_str(),
            r["remediationURL"].as_str()
        ),
        (
            Some("Fail"),
            Some("driver foo 1.2 does not support 4.14.20"),
            Some("https://example.com/foo")
        )
    );
    let r = result(&done, "E2ETimeout");
    assert_eq!(r["outcome"], "Error");
    assert_eq!(
        r["message"],
        "timed out: the check did not finish within its deadline of 5 s (DeadlineExceeded)"
    );
    let r = result(&done, "E2EPull");
    assert_eq!(r["outcome"], "Error");
    assert_eq!(
        r["message"],
        format!(
            "cannot pull the check's image {} (ImagePullBackOff): Back-off pulling image: manifest unknown",
            check_image("e2e-pull")
        )
    );
    let r = result(&done, "E2EGarbage");
    assert_eq!(r["outcome"], "Error");
    let garbage = r["message"].as_str().unwrap();
    assert!(
        garbage.starts_with("malformed output: the termination message looks like JSON"),
        "{garbage}"
    );
    let r = result(&done, "E2EMinorOnly");
    assert_eq!(
        (r["outcome"].as_str(), r["message"].as_str()),
        (Some("Skipped"), Some("does not apply to a patch update"))
    );
    // Only the external checks ran: the object selected no built-in.
    assert_eq!(done["status"]["results"].as_array().unwrap().len(), 6);
    assert_eq!(done["status"]["summary"]["failing"], 4, "{done}");

    // A Job given up on is deleted; finished ones stay for their TTL.
    let left: Vec<String> = get_json(
        world,
        &[
            "get",
            "jobs",
            "-n",
            NS,
            "-l",
            &format!("preflight.dev/update-preflight-uid={uid}"),
        ],
    )["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| check_of(j).to_owned())
        .collect();
    assert!(!left.iter().any(|c| c == "E2EPull"), "{left:?}");
    assert!(left.iter().any(|c| c == "E2EPass"), "{left:?}");
}

#[test]
fn an_erroring_check_lets_the_update_through_only_when_it_is_fail_open() {
    let (_turn, world) = lock();
    let mut made = Made::new(world);
    made.check(
        "e2e-flaky",
        json!({"checkName": "E2EFlaky", "image": check_image("flaky"), "failurePolicy": "FailOpen"}),
    );
    let image = release('b');
    // The release's own object, with the full suite: the result the
    // webhook decides on (model::vouch).
    let own = preflight_gate::model::release::ReleaseKey::from_image(&image).object_name();
    let uid = made.preflight(&own, &image, "4.14.20", &[]);
    let done = kubelet_until(world, &uid, &image, pull_failure, finished);
    assert_eq!(phase(&done), "Passed", "{done}");
    let r = result(&done, "E2EFlaky");
    assert_eq!(
        (r["outcome"].as_str(), r["failurePolicy"].as_str()),
        (Some("Error"), Some("FailOpen"))
    );
    let completed = done["status"]["completionTime"].clone();

    // The webhook lets the update through.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = world.kubectl(User::Admin, &image_patch_args(&image, &[]));
        if out.ok {
            break;
        }
        assert!(Instant::now() < deadline, "never allowed: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(200));
    }
    world.admin(&CLEAR_TARGET);

    // The same error, fail-closed, blocks it.
    made.check(
        "e2e-flaky",
        json!({"checkName": "E2EFlaky", "image": check_image("flaky"), "failurePolicy": "FailClosed"}),
    );
    // Jobs of the first run go, so the rerun's Job is the only one.
    world.admin(&[
        "delete",
        "jobs",
        "-n",
        NS,
        "-l",
        &format!("preflight.dev/update-preflight-uid={uid}"),
    ]);
    std::thread::sleep(Duration::from_millis(1100));
    let stamp = format!("preflight.dev/requested-at={}", jiff::Timestamp::now());
    world.admin(&["annotate", "--overwrite", "updatepreflight", &own, &stamp]);
    let again = kubelet_until(world, &uid, &image, pull_failure, |o| {
        finished(o) && o["status"]["completionTime"] != completed
    });
    assert_eq!(phase(&again), "Failed", "{again}");
    assert_eq!(result(&again, "E2EFlaky")["failurePolicy"], "FailClosed");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = world.kubectl(User::Admin, &image_patch_args(&image, &[]));
        if !out.ok && out.stderr.contains("E2EFlaky") {
            assert!(out.stderr.contains("cannot pull"), "{}", out.stderr);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never denied for E2EFlaky: ok={} {}",
            out.ok,
            out.stderr
        );
        if out.ok {
            world.admin(&CLEAR_TARGET);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asks the API server whether the check's ServiceAccount may do something.
fn check_sa_may(world: &World, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    check_sa_may_on(world, verb, group, resource, namespace, "")
}

/// Whether the check's ServiceAccount may do something to the object
/// `name` (any object when empty).
fn check_sa_may_on(
    world: &World,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let check = Account {
        namespace: JOBS_NAMESPACE,
        name: "preflight-check",
    };
    let review = check.review(verb, group, resource, namespace, name);
    access::allowed(&review, world.dir(), |file| {
        world.admin(&["create", "-f", file, "-o", "json"])
    })
}

#[test]
fn the_check_service_account_reads_and_does_nothing_else_and_no_secrets() {
    let (_turn, world) = lock();
    let _made = Made::new(world);
    for (group, resource, namespace) in [
        ("", "nodes", ""),
        ("config.openshift.io", "clusterversions", ""),
        ("config.openshift.io", "clusteroperators", ""),
        ("policy", "poddisruptionbudgets", "openshift-storage"),
        (
            "machineconfiguration.openshift.io",
            "machineconfigpools",
            "",
        ),
        (
            "operators.coreos.com",
            "clusterserviceversions",
            "openshift-operators",
        ),
        ("image.openshift.io", "imagestreams", "openshift"),
        ("apiserver.openshift.io", "apirequestcounts", ""),
        (
            "monitoring.coreos.com",
            "prometheusrules",
            "openshift-monitoring",
        ),
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(
                check_sa_may(world, verb, group, resource, namespace),
                "cannot {verb} {resource}.{group}"
            );
        }
    }
    // The admin gates and acks, by name and nothing more.
    for (namespace, name) in [
        ("openshift-config-managed", "admin-gates"),
        ("openshift-config", "admin-acks"),
    ] {
        assert!(
            check_sa_may_on(world, "get", "", "configmaps", namespace, name),
            "cannot get {namespace}/{name}"
        );
    }
    // Nothing that holds a credential or a key, by any verb that reads:
    // pod specs and the pod templates of every workload hold literal
    // environment values, any ConfigMap may hold a credential,
    // controllerconfigs the internal registry's pull secret, proxies
    // credentials in their URLs.
    let workloads = [
        ("apps", "deployments"),
        ("apps", "daemonsets"),
        ("apps", "statefulsets"),
        ("apps", "replicasets"),
        ("apps", "controllerrevisions"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("", "replicationcontrollers"),
    ];
    for (group, resource) in workloads {
        for namespace in ["openshift-storage", "acme-storage", ""] {
            for verb in ["get", "list", "watch"] {
                assert!(
                    !check_sa_may(world, verb, group, resource, namespace),
                    "may {verb} {resource}.{group} in {namespace:?}"
                );
            }
        }
    }
    for (group, resource, namespace) in [
        ("", "pods", "openshift-etcd"),
        ("", "pods", ""),
        ("", "configmaps", "openshift-config"),
        ("", "configmaps", ""),
        ("machineconfiguration.openshift.io", "controllerconfigs", ""),
        ("config.openshift.io", "proxies", ""),
        (
            "operators.coreos.com",
            "installplans",
            "openshift-operators",
        ),
        ("", "secrets", ""),
        ("", "secrets", "openshift-config"),
        ("", "secrets", "preflight-gate"),
        ("", "secrets", NS),
        ("", "pods/log", "openshift-etcd"),
        ("image.openshift.io", "imagestreams/secrets", "openshift"),
        ("image.openshift.io", "imagestreams/secrets", ""),
        ("route.openshift.io", "routes", "openshift-console"),
        ("route.openshift.io", "routes", ""),
        ("machineconfiguration.openshift.io", "machineconfigs", ""),
        (
            "monitoring.coreos.com",
            "alertmanagerconfigs",
            "openshift-monitoring",
        ),
        ("oauth.openshift.io", "oauthaccesstokens", ""),
        ("oauth.openshift.io", "oauthclients", ""),
        ("", "serviceaccounts/token", "preflight-gate"),
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(
                !check_sa_may(world, verb, group, resource, namespace),
                "may {verb} {resource} in {namespace:?}"
            );
        }
    }
    for (group, resource, namespace) in [
        ("", "pods", "preflight-gate"),
        ("", "pods", NS),
        ("", "configmaps", "openshift-config"),
        ("", "nodes", ""),
        ("", "serviceaccounts", "preflight-gate"),
        ("", "pods/log", "openshift-etcd"),
        ("", "pods/exec", "openshift-etcd"),
        ("batch", "jobs", "preflight-gate"),
        ("batch", "jobs", NS),
        ("apps", "deployments", "openshift-storage"),
        ("config.openshift.io", "clusterversions", ""),
        ("preflight.dev", "updatepreflights", ""),
        ("preflight.dev", "preflightchecks", ""),
        ("rbac.authorization.k8s.io", "clusterrolebindings", ""),
        ("oauth.openshift.io", "oauthaccesstokens", ""),
    ] {
        for verb in [
            "create",
            "update",
            "patch",
            "delete",
            "deletecollection",
            "get",
        ] {
            if verb == "get" && !matches!(resource, "pods/log" | "pods/exec" | "oauthaccesstokens")
            {
                continue;
            }
            assert!(
                !check_sa_may(world, verb, group, resource, namespace),
                "may {verb} {resource}.{group} in {namespace:?}"
            );
        }
    }

    // An administrator grants the workloads' reads to the checks in one
    // namespace, with docs/checks.md's own command: there they are read,
    // and nowhere else.
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/checks.md")).unwrap();
    let marker = "<!-- workload-reads:";
    let at = guide.find(marker).expect("docs/checks.md shows the grant");
    let block = &guide[at..];
    let start = block.find("```sh\n").unwrap() + "```sh\n".len();
    let command = block[start..start + block[start..].find("```").unwrap()].replace("\\\n", " ");
    let args: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(args[..3], ["oc", "-n", "acme-storage"], "{command}");
    let _ = world.kubectl(User::Admin, &["create", "namespace", "acme-storage"]);
    let _ = world.kubectl(
        User::Admin,
        &["-n", "acme-storage", "delete", "rolebinding", "--all"],
    );
    world.admin(&args[1..]);
    for (group, resource) in workloads {
        for verb in ["get", "list", "watch"] {
            assert!(
                check_sa_may(world, verb, group, resource, "acme-storage"),
                "the grant does not let the checks {verb} {resource}.{group}"
            );
            for namespace in ["openshift-storage", ""] {
                assert!(
                    !check_sa_may(world, verb, group, resource, namespace),
                    "the grant lets the checks {verb} {resource}.{group} in {namespace:?}"
                );
            }
        }
        assert!(!check_sa_may(
            world,
            "update",
            group,
            resource,
            "acme-storage"
        ));
    }
    world.admin(&["-n", "acme-storage", "delete", "rolebinding", "--all"]);
}

/// As the kubelet for the extraction pod of `image`: it ran and printed
/// `output`. Returns the pod as the gate created it.
fn complete_extraction(world: &World, image: &str, output: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    let pod = loop {
        let pods = get_json(
            world,
            &[
                "get",
                "pods",
                "-n",
                NS,
                "-l",
                "preflight.dev/release-extraction",
            ],
        );
        if let Some(pod) = pods["items"].as_array().unwrap().first() {
            break pod.clone();
        }
        assert!(Instant::now() < deadline, "no extraction pod");
        std::thread::sleep(Duration::from_millis(200));
    };
    let name = pod["metadata"]["name"].as_str().unwrap();
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Succeeded",
        "containerStatuses": [{"name": "extract", "image": image, "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": output,
                "startedAt": now, "finishedAt": now}}}]}});
    world.admin(&[
        "patch",
        "pod",
        name,
        "-n",
        NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    pod
}

/// What the extraction pod of the test release prints: its image-references
/// and a manifest file that declares one check.
fn extraction_output() -> String {
    r#"--- preflight-gate begin image-references
{"kind": "ImageStream", "apiVersion": "image.openshift.io/v1", "spec": {"tags": [
  {"name": "cluster-storage-operator", "from": {"kind": "DockerImage", "name": "preflight-e2e/cluster-storage-operator@sha256:5050505050505050505050505050505050505050505050505050505050505050"}}]}}
--- preflight-gate end
--- preflight-gate begin release-metadata
{"kind": "cincinnati-metadata-v0", "version": "4.14.20", "previous": ["4.14.19"]}
--- preflight-gate end
--- preflight-gate begin 0000_50_cluster-storage-operator_99_preflight.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: storage-csi-migration
  annotations:
    openshift.io/preflight-check: "true"
spec:
  activeDeadlineSeconds: 300
  template:
    spec:
      containers:
      - name: check
        image: preflight-e2e/cluster-storage-operator@sha256:5050505050505050505050505050505050505050505050505050505050505050
        command: ["cluster-storage-operator", "preflight"]
--- preflight-gate end
"#
    .to_owned()
}

#[test]
fn checks_the_release_declares_are_found_by_an_extraction_pod_and_run_from_its_images() {
    use preflight_gate::preflight::jobs::{self, JobSettings};
    use preflight_gate::preflight::release_checks::Cache;
    let (_turn, world) = lock();
    let mut made = Made::new(world);
    made.check(
        "e2e-from-release",
        json!({"checkName": "E2EFromRelease", "fromRelease": "cluster-storage-operator"}),
    );
    let image = release('c');
    let uid = made.preflight(
        "e2e-release-declared",
        &image,
        "4.14.20",
        &["E2EFromRelease", "StorageCsiMigration"],
    );
    let owner: preflight_gate::model::UpdatePreflight = serde_json::from_value(get_json(
        world,
        &["get", "updatepreflight", "e2e-release-declared"],
    ))
    .unwrap();
    // The cluster trusts the test's release key, and the release's
    // signature is mirrored into a ConfigMap, as `oc adm release mirror`
    // leaves it (tests/e2e/signatures.rs tests the rest).
    let trust = crate::signatures::Trust::test_key(world, &[]);
    trust.signature_config_map(
        "e2e-release-c",
        'c',
        &format!("sha256-{}-1", "c".repeat(64)),
    );
    // Release e is signed too, but the cluster neither offers nor targets it.
    trust.signature_config_map(
        "e2e-release-e",
        'e',
        &format!("sha256-{}-1", "e".repeat(64)),
    );

    // The runner with release checks on, as `serve --release-checks` runs it,
    // in a thread of its own while the test plays the kubelet.
    let kubeconfig = std::path::PathBuf::from(world.var("ADMIN_KUBECONFIG"));
    let runner = {
        let image = image.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let client = preflight_gate::cluster::client(Some(&kubeconfig))
                    .await
                    .unwrap();
                let settings = JobSettings {
                    release_checks: true,
                    poll: Duration::from_millis(300),
                    schedule_timeout: Duration::from_secs(8),
                    namespace: NS.into(),
                    ..JobSettings::default()
                };
                let update = jobs::Update {
                    target_image: image,
                    target_version: preflight_gate::model::release::Version::parse("4.14.20"),
                    ..Default::default()
                };
                let cache = Cache::default();
                let deadline = || Instant::now() + Duration::from_secs(40);
                // The cluster offers releases c and d.
                let cluster = offering(&[&update.target_image, &release('d')]);
                let cluster = Some(&cluster);
                // A release nobody offers or targets, though its object was
                // created and its signature verifies: nothing is extracted.
                let unnamed = jobs::Update {
                    target_image: release('e'),
                    ..update.clone()
                };
                let unoffered = jobs::release_declared(
                    &client,
                    cluster,
                    &owner,
                    &unnamed,
                    &settings,
                    deadline(),
                    &cache,
                )
                .await
                .expect_err("a release the cluster does not name is not run");
                // Another release, offered, but neither listed nor signed:
                // nothing runs.
                let unsigned = jobs::Update {
                    target_image: release('d'),
                    ..update.clone()
                };
                let unverified = jobs::release_declared(
                    &client,
                    cluster,
                    &owner,
                    &unsigned,
                    &settings,
                    deadline(),
                    &cache,
                )
                .await
                .expect_err("an unverified release is not run");
                // Signed by the cluster's release key (the test's): it runs.
                let declared = jobs::release_declared(
                    &client,
                    cluster,
                    &owner,
                    &update,
                    &settings,
                    deadline(),
                    &cache,
                )
                .await
                .unwrap()
                .unwrap();
                let both = [
                    "E2EFromRelease".to_owned(),
                    "StorageCsiMigration".to_owned(),
                ];
                let first = jobs::run_external(
                    &client,
                    &owner,
                    &both,
                    &update,
                    &settings,
                    deadline(),
                    Some(&declared),
                )
                .await;
                // Asked again for the same digest: the cache answers, no pod runs.
                let again = jobs::release_declared(
                    &client,
                    cluster,
                    &owner,
                    &update,
                    &settings,
                    deadline(),
                    &cache,
                )
                .await
                .unwrap();
                let none = ["NoSuchCheck".to_owned()];
                let second = jobs::run_external(
                    &client,
                    &owner,
                    &none,
                    &update,
                    &settings,
                    deadline(),
                    again.as_ref(),
                )
                .await;
                (unoffered, unverified, declared, first, second)
            })
        })
    };

    // The extraction pod: the target release image, restricted, no token.
    // As the kubelet: the pod ran and printed the declared checks. With no
    // kubelet there is no log to serve: the API server answers the log
    // request of a pod on no node with an empty body. The gate then reads the
    // same text from the termination message, which the script also writes.
    let pod = complete_extraction(world, &image, &extraction_output());
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(pod["spec"]["containers"][0]["image"], image);
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    let log = world.kubectl(User::Admin, &["logs", "-n", NS, &name]);
    assert!(
        log.stdout.trim().is_empty(),
        "a log was served without a kubelet: {}",
        log.stdout
    );

    // Both checks run as Jobs from the release's own image of the component.
    let jobs = wait_for_jobs(world, &uid, 2);
    let operator_image = "preflight-e2e/cluster-storage-operator@sha256:5050505050505050505050505050505050505050505050505050505050505050";
    for job in &jobs {
        let spec = &job["spec"]["template"]["spec"];
        assert_eq!(
            spec["containers"][0]["image"],
            operator_image,
            "{}",
            check_of(job)
        );
        // The gate's account and namespace, not the manifest's.
        assert_eq!(spec["serviceAccountName"], "preflight-check");
        assert_eq!(job["metadata"]["namespace"], NS);
    }
    let declared = jobs
        .iter()
        .find(|j| check_of(j) == "StorageCsiMigration")
        .unwrap();
    assert_eq!(declared["spec"]["activeDeadlineSeconds"], 300);
    assert_eq!(
        declared["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["cluster-storage-operator", "preflight"])
    );
    for job in &jobs {
        let pod = start_pod(world, job);
        kubelet_reports(world, &pod, operator_image, terminated(0, "ok"));
    }

    let (unoffered, unverified, declared, first, second) = runner.join().unwrap();
    assert_eq!(unoffered.name, "ReleaseDeclaredChecks");
    assert!(
        unoffered.message.contains(&format!(
            "neither the ClusterVersion's update graph offers {} nor does its stored target name it",
            release('e')
        )),
        "{}",
        unoffered.message
    );
    assert_eq!(unverified.name, "ReleaseDeclaredChecks");
    assert!(
        unverified.message.contains(&format!(
            "--trusted-releases does not list {}, and no signature of sha256:{} was found",
            release('d'),
            "d".repeat(64)
        )),
        "{}",
        unverified.message
    );
    // The release's own metadata gives its version.
    assert_eq!(declared.version.as_deref(), Some("4.14.20"));
    // No check's pod gets an API token unless it asks for one: neither the
    // release's declared check nor the administrator's (no `apiAccess`).
    let token = |check: &str| {
        jobs.iter().find(|j| check_of(j) == check).unwrap()["spec"]["template"]["spec"]
            ["automountServiceAccountToken"]
            .clone()
    };
    assert_eq!(token("StorageCsiMigration"), false);
    assert_eq!(token("E2EFromRelease"), false);
    let outcomes: Vec<(&str, &str)> = first
        .iter()
        .map(|r| (r.name.as_str(), r.message.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [("StorageCsiMigration", "ok"), ("E2EFromRelease", "ok")],
        "{first:?}"
    );
    assert!(second.is_empty(), "{second:?}");
    let extraction_pods = get_json(
        world,
        &[
            "get",
            "pods",
            "-n",
            NS,
            "-l",
            "preflight.dev/release-extraction",
        ],
    );
    assert!(
        extraction_pods["items"].as_array().unwrap().is_empty(),
        "the extraction pod was deleted, and no second one made"
    );
}

#[test]
fn the_gate_runs_external_checks_with_the_deployed_rbac_and_the_check_rbac() {
    use preflight_gate::preflight::jobs::{self, JobSettings};
    use preflight_gate::preflight::release_checks::Cache;
    let (_turn, world) = lock();
    // The gate's ServiceAccount with deploy/'s RBAC (the dev overlay), plus
    // deploy/base/preflight-check-rbac.yaml (applied by Made).
    crate::deploy::apply_dev(world);
    let mut made = Made::new(world);
    made.check(
        "e2e-as-gate",
        json!({"checkName": "E2EAsGate", "image": check_image("as-gate")}),
    );
    // A signed release: the gate's account reads the keys and signatures
    // of openshift-config-managed (deploy/components/openshift-reads).
    let image = release('c');
    let trust = crate::signatures::Trust::test_key(world, &[]);
    trust.signature_config_map(
        "e2e-as-gate-c",
        'c',
        &format!("sha256-{}-1", "c".repeat(64)),
    );
    let uid = made.preflight("e2e-as-gate", &image, "4.14.20", &["E2EAsGate"]);
    let owner: preflight_gate::model::UpdatePreflight =
        serde_json::from_value(get_json(world, &["get", "updatepreflight", "e2e-as-gate"]))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = crate::deploy::service_account_kubeconfig(world, dir.path());
    let runner = {
        let image = image.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let client = preflight_gate::cluster::client(Some(&kubeconfig))
                    .await
                    .unwrap();
                let settings = JobSettings {
                    release_checks: true,
                    poll: Duration::from_millis(300),
                    schedule_timeout: Duration::from_secs(8),
                    namespace: NS.into(),
                    ..JobSettings::default()
                };
                let update = jobs::Update {
                    target_image: image,
                    target_version: preflight_gate::model::release::Version::parse("4.14.20"),
                    ..Default::default()
                };
                let selection = ["E2EAsGate".to_owned()];
                let deadline = Instant::now() + Duration::from_secs(40);
                let declared = jobs::release_declared(
                    &client,
                    Some(&offering(&[&update.target_image])),
                    &owner,
                    &update,
                    &settings,
                    deadline,
                    &Cache::default(),
                )
                .await
                .unwrap();
                jobs::run_external(
                    &client,
                    &owner,
                    &selection,
                    &update,
                    &settings,
                    deadline,
                    declared.as_ref(),
                )
                .await
            })
        })
    };
    // A release that declares nothing.
    let nothing = "--- preflight-gate begin image-references\n{\"kind\": \"ImageStream\", \"spec\": {\"tags\": []}}\n--- preflight-gate end\n";
    complete_extraction(world, &image, nothing);
    // The controller replica runs the same object too (without release
    // checks): every Job of the object gets its pod, until the runner ends.
    let selector = format!("preflight.dev/update-preflight-uid={uid}");
    let mut served = std::collections::HashSet::new();
    while !runner.is_finished() {
        for job in get_json(world, &["get", "jobs", "-n", NS, "-l", &selector])["items"]
            .as_array()
            .unwrap()
        {
            if served.insert(job["metadata"]["name"].as_str().unwrap().to_owned()) {
                let pod = start_pod(world, job);
                kubelet_reports(world, &pod, &check_image("as-gate"), terminated(0, "fine"));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let results = runner.join().unwrap();
    let got: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r.name.as_str(), r.message.as_str()))
        .collect();
    // No "cannot list", "cannot create" or "forbidden": the rights suffice.
    assert_eq!(got, [("E2EAsGate", "fine")], "{results:?}");
}
