//! Check Jobs and the release extraction pod, run by the real Job
//! controller and kubelet in their own namespace (`--jobs-namespace`, never
//! the gate's), under its `restricted` Pod Security.

use std::time::Duration;

use serde_json::{Value, json};

use crate::world::{CHECKS_NAMESPACE, NAMESPACE, lock, wait_for};

fn result<'v>(done: &'v Value, name: &str) -> &'v Value {
    done["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no result {name} in {done:#}"))
}

fn finished(o: &Value) -> bool {
    matches!(
        o["status"]["phase"].as_str(),
        Some("Passed" | "Failed" | "Error")
    ) && o["status"]["observedGeneration"] == o["metadata"]["generation"]
}

#[test]
fn external_checks_pass_fail_time_out_fail_to_pull_and_say_garbage_on_a_real_kubelet() {
    let (_turn, world) = lock();
    for namespace in [NAMESPACE, CHECKS_NAMESPACE] {
        let ns = world.get_json(&["get", "namespace", namespace]);
        assert_eq!(
            ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
            "{namespace}"
        );
    }
    let image = world.check_image.clone();
    let sh = |script: &str| json!({"command": ["/bin/sh", "-c"], "args": [script]});
    let checks = [
        (
            "node-pass",
            "NodePass",
            image.clone(),
            sh("echo \"all 3 storage drivers support $TARGET_VERSION\" >/dev/termination-log"),
        ),
        (
            "node-fail",
            "NodeFail",
            image.clone(),
            sh(
                r#"echo '{"outcome":"Fail","message":"driver foo 1.2 is too old","url":"https://example.com/foo"}' >/dev/termination-log; exit 1"#,
            ),
        ),
        ("node-timeout", "NodeTimeout", image.clone(), {
            let mut s = sh("sleep 600");
            s["timeoutSeconds"] = json!(5);
            s
        }),
        (
            "node-pull",
            "NodePull",
            // A registry on the node's loopback where nothing listens: the
            // pull fails at once and nothing leaves the machine. By digest,
            // as the checks' namespace admits images.
            format!(
                "127.0.0.1:9/preflight-gate-test/missing@sha256:{}",
                "0".repeat(64)
            ),
            sh("true"),
        ),
        (
            "node-garbage",
            "NodeGarbage",
            image.clone(),
            sh(r#"printf '{"outcome": 42, "mess' >/dev/termination-log"#),
        ),
    ];
    for (name, check, image, extra) in &checks {
        let mut spec = json!({"checkName": check, "image": image});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        world.apply_json(&json!({"apiVersion": "preflight.dev/v1alpha1",
            "kind": "PreflightCheck", "metadata": {"name": name}, "spec": spec}));
    }
    let names: Vec<&str> = checks.iter().map(|c| c.1).collect();
    let target = world.release_image.clone();
    world.apply_json(
        &json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": "node-external-outcomes"},
        "spec": {"image": target, "version": "4.14.20", "checks": names}}),
    );

    let done = world.wait_for_result(&target, Duration::from_secs(300), finished);
    eprintln!("{:#}", done["status"]["results"]);
    assert_eq!(done["status"]["phase"], "Failed", "{done:#}");
    let r = result(&done, "NodePass");
    assert_eq!(
        (r["outcome"].as_str(), r["message"].as_str()),
        // The version the update graph gives the release, not the one the
        // object claims (4.14.20): a run takes it from a trusted place only.
        (Some("Pass"), Some("all 3 storage drivers support 4.99.0"))
    );
    let r = result(&done, "NodeFail");
    assert_eq!(
        (
            r["outcome"].as_str(),
            r["message"].as_str(),
            r["remediationURL"].as_str()
        ),
        (
            Some("Fail"),
            Some("driver foo 1.2 is too old"),
            Some("https://example.com/foo")
        )
    );
    let r = result(&done, "NodeTimeout");
    assert_eq!(r["outcome"], "Error", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("timed out: the check did not finish within its deadline of 5 s"),
        "{r}"
    );
    let r = result(&done, "NodePull");
    assert_eq!(r["outcome"], "Error", "{r}");
    assert!(
        r["message"].as_str().unwrap().starts_with(
            "cannot pull the check's image 127.0.0.1:9/preflight-gate-test/missing@sha256:0000000000000000000000000000000000000000000000000000000000000000 ("
        ),
        "{r}"
    );
    let r = result(&done, "NodeGarbage");
    assert_eq!(r["outcome"], "Error", "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed output: the termination message looks like JSON"),
        "{r}"
    );

    // The pods ran under restricted Pod Security, as the kubelet ran them.
    let uid = done["metadata"]["uid"].as_str().unwrap();
    let pods = world.get_json(&[
        "get",
        "pods",
        "-n",
        CHECKS_NAMESPACE,
        "-l",
        &format!("preflight.dev/update-preflight-uid={uid}"),
    ]);
    let pass_pod = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["labels"]["preflight.dev/check"] == "NodePass")
        .expect("the passing check's pod is kept");
    let terminated = &pass_pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0);
    assert_eq!(
        terminated["message"],
        "all 3 storage drivers support 4.99.0\n"
    );
    assert_eq!(pass_pod["spec"]["nodeName"], world.var("NODE_NAME"));
    // None of them in the gate's own namespace, beside its Secrets.
    let beside_the_gate = world.get_json(&[
        "get",
        "pods",
        "-n",
        NAMESPACE,
        "-l",
        &format!("preflight.dev/update-preflight-uid={uid}"),
    ]);
    assert_eq!(beside_the_gate["items"], json!([]), "{beside_the_gate:#}");
}

#[test]
fn the_release_image_declares_a_check_that_runs_from_its_image_references() {
    let (_turn, world) = lock();
    let image = world.release_image.clone();
    let out = world.request_until_verdict(&image, &[]);
    assert!(out.ok, "{}", out.stderr);
    let done = world.wait_for_result(&image, Duration::from_secs(10), finished);
    let r = result(&done, "ExampleOperatorReady");
    assert_eq!(
        (r["outcome"].as_str(), r["message"].as_str()),
        (Some("Pass"), Some("example-operator can move to 4.99.0")),
        "{r}"
    );
    // The declared check ran from the image image-references names, as a
    // Job of the gate's in the checks' namespace, on the node.
    let uid = done["metadata"]["uid"].as_str().unwrap();
    let jobs = world.get_json(&[
        "get",
        "jobs",
        "-n",
        CHECKS_NAMESPACE,
        "-l",
        &format!("preflight.dev/update-preflight-uid={uid}"),
    ]);
    let job = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["metadata"]["labels"]["preflight.dev/check"] == "ExampleOperatorReady")
        .unwrap_or_else(|| panic!("no Job for the declared check: {jobs:#}"));
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["image"],
        world.check_image
    );
    // The gate read the pod's termination message; the Job controller
    // marks the Job complete a moment later.
    let job_name = job["metadata"]["name"].as_str().unwrap().to_owned();
    wait_for("the Job to complete", Duration::from_secs(60), || {
        let job = world.get_json(&["get", "job", "-n", CHECKS_NAMESPACE, &job_name]);
        (job["status"]["succeeded"] == 1).then_some(())
    });
    // The gate read the extraction pod's log through the API server and the
    // kubelet, not the termination message it falls back to.
    for pod in world.gate_pods() {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let logs = world.admin(&["logs", "-n", NAMESPACE, name]);
        assert!(
            !logs.contains("cannot read the extraction pod's log"),
            "{name}: {logs}"
        );
    }
    // The extraction pod ran from the release image and is gone.
    let extraction = world.get_json(&[
        "get",
        "pods",
        "-n",
        CHECKS_NAMESPACE,
        "-l",
        "preflight.dev/release-extraction",
    ]);
    assert_eq!(extraction["items"], json!([]), "{extraction:#}");
    let events = world.get_json(&[
        "get",
        "events",
        "-n",
        CHECKS_NAMESPACE,
        "--field-selector",
        "reason=Pulled",
    ]);
    assert!(
        events["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["involvedObject"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("pfx-release-"))
                && e["message"].as_str().is_some_and(|m| m.contains(&image))),
        "no kubelet event for the extraction pod's image: {events:#}"
    );
}
