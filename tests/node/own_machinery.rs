//! Nothing the gate itself does holds an update, on the real node: a drain
//! of the gate's own node (the only one, so its replicas have nowhere to go)
//! goes through its PodDisruptionBudget, and that budget allowing no
//! disruption is no reason for the drain checks to block a target; a lost
//! signing key is mended by the gate itself, not by the updater.

use std::time::{Duration, Instant};

use crate::world::{CLEAR_TARGET, NAMESPACE, World, lock, wait_for};

const SELECTOR: &str = "app.kubernetes.io/name=preflight-gate";

/// Leaves the node schedulable and the gate's budget as deployed, however
/// the test ends.
struct Restore<'w>(&'w World);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let world = self.0;
        world.kubectl(&["uncordon", world.var("NODE_NAME")]);
        world.kubectl(&budget_patch(1));
    }
}

/// The kubectl arguments that set the gate's budget's `maxUnavailable`.
fn budget_patch(max_unavailable: u32) -> Vec<String> {
    [
        "patch",
        "pdb",
        "-n",
        NAMESPACE,
        "preflight-gate",
        "--type=merge",
        "-p",
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([format!(
        r#"{{"spec":{{"maxUnavailable":{max_unavailable}}}}}"#
    )])
    .collect()
}

#[test]
fn the_gates_own_node_drains_and_its_own_budget_holds_no_update() {
    let (_turn, world) = lock();
    let node = world.var("NODE_NAME").to_owned();
    let restore = Restore(world);
    // The two replicas, and no pod of an earlier rollout still going.
    let pods = wait_for(
        "two replicas and no other",
        Duration::from_secs(120),
        || {
            let pods = world.gate_pods();
            (pods.len() == 2).then_some(pods)
        },
    );

    // `oc adm drain` of the one node, for the gate's pods: it cordons, then
    // evicts through the eviction API, retrying what the budget refuses.
    // The replicas step aside once their node is cordoned (unready), and
    // the budget (AlwaysAllow) lets unready pods go: the drain ends rather
    // than retrying "would violate the pod's disruption budget" until its
    // timeout. The timeout bounds a hang; it is not a measure.
    let started = Instant::now();
    let drained = world.kubectl(&["drain", &node, "--pod-selector", SELECTOR, "--timeout=180s"]);
    assert!(
        drained.ok,
        "the drain of the gate's own node did not go through in {:?}:\n{}\n{}",
        started.elapsed(),
        drained.stdout,
        drained.stderr
    );
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap();
        assert!(
            drained.stdout.contains(&format!("pod/{name} evicted")),
            "{name} was not evicted:\n{}",
            drained.stdout
        );
    }
    // Their replacements wait for a node; the gate's log said why it went
    // unready (read from the replacements' predecessors is not possible, so
    // the Deployment's state tells it).
    let deployment = world.get_json(&["get", "deployment", "-n", NAMESPACE, "preflight-gate"]);
    assert_ne!(
        deployment["status"]["readyReplicas"], 2,
        "replicas stayed ready on a cordoned node: {deployment:#}"
    );

    // The node back, the gate back.
    world.admin(&["uncordon", &node]);
    world.wait_for_rollout();
    wait_for("both replicas ready", Duration::from_secs(120), || {
        let ready = world
            .gate_pods()
            .iter()
            .filter(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .count();
        (ready == 2).then_some(())
    });

    // The gate's own budget allowing no disruption (as while a replica is
    // unready) holds no target: PodDisruptionBudgetsAllowDrain and
    // DrainsComplete, which the node's gate runs, leave it out.
    world.admin(&budget_patch(0));
    wait_for(
        "the budget to allow no disruption",
        Duration::from_secs(60),
        || {
            let pdb = world.get_json(&["get", "pdb", "-n", NAMESPACE, "preflight-gate"]);
            (pdb["status"]["disruptionsAllowed"] == 0
                && pdb["status"]["observedGeneration"] == pdb["metadata"]["generation"])
                .then_some(())
        },
    );
    let image = world.release_image.clone();
    let verdict = world.request_until_verdict(&image, &[]);
    assert!(verdict.ok, "{}", verdict.stderr);
    let done = world.wait_for_result(&image, Duration::from_secs(10), |o| {
        o["status"]["phase"] == "Passed"
    });
    for check in ["PodDisruptionBudgetsAllowDrain", "DrainsComplete"] {
        let result = done["status"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == check)
            .unwrap_or_else(|| panic!("{check} did not run: {done:#}"));
        assert_eq!(result["outcome"], "Pass", "{result:#}");
    }
    drop(restore);
}

/// A lost signing key (the Secret deleted and made again, empty, by
/// applying the manifests, the replicas restarted: the first fills it with
/// a new key) leaves every result with a signature that no longer verifies.
/// Updaters may not delete results, and need not: the gate runs the
/// target again by itself (saying so to a review that comes first), and
/// the update goes ahead on a result signed with the new key.
#[test]
fn a_lost_signing_key_is_the_gates_to_mend_not_the_updaters() {
    let (_turn, world) = lock();
    let image = world.release_image.clone();
    let first = world.request_until_verdict(&image, &[]);
    assert!(first.ok, "{}", first.stderr);
    let signed = world.wait_for_result(&image, Duration::from_secs(10), |o| {
        o["status"]["signature"].is_string()
    });
    world.admin(&CLEAR_TARGET);

    world.admin(&[
        "delete",
        "secret",
        "-n",
        NAMESPACE,
        "preflight-gate-result-key",
    ]);
    // The gate makes no Secret: the administrator's manifests make it again,
    // empty, as the install did.
    world.admin(&[
        "apply",
        "--server-side",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/base/result-key.yaml"),
    ]);
    world.admin(&[
        "rollout",
        "restart",
        "-n",
        NAMESPACE,
        "deployment/preflight-gate",
    ]);
    world.wait_for_rollout();
    // Only the new replicas, which hold the new key, answer from here on:
    // an old one, shutting down, would still vouch with the lost key.
    wait_for("the old replicas gone", Duration::from_secs(120), || {
        let pods = world.gate_pods();
        (pods.len() == 2
            && pods
                .iter()
                .all(|p| p["metadata"]["deletionTimestamp"].is_null()))
        .then_some(())
    });

    // The new leader may have run it again before anyone asks; a review
    // that comes first is pending, never a chore for the updater.
    let again = world.request_image(&image, &[]);
    if !again.ok {
        assert!(
            again.stderr.contains("is running, retry") && !again.stderr.contains("Delete it"),
            "{}",
            again.stderr
        );
    }
    let allowed = world.request_until_verdict(&image, &[]);
    assert!(allowed.ok, "{}", allowed.stderr);
    // What the update went ahead on was signed with the new key.
    let resigned = world.wait_for_result(&image, Duration::from_secs(10), |o| {
        o["status"]["signature"].is_string()
    });
    assert_ne!(
        resigned["status"]["signature"], signed["status"]["signature"],
        "allowed on a result the new key never signed"
    );
}
