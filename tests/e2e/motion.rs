//! A cluster in motion, on the real API server: a new target while an
//! update is under way is judged as `oc adm upgrade` judges it (denied,
//! naming `Progressing`, until that is accepted), and a migration to the
//! multi-architecture payload is judged, never taken for the release the
//! cluster runs.

use serde_json::{Value, json};

use crate::cluster::{User, World, image_patch_args, lock};
use crate::support::poll;

/// A release only these tests ask for.
const RETARGET: &str = "quay.io/openshift-release-dev/ocp-release@sha256:abababababababababababababababababababababababababababababababab";

/// Puts the ClusterVersion's status back as it was when dropped, and
/// removes the results judged on a cluster that is no more.
struct RestoreStatus<'a> {
    world: &'a World,
    status: Value,
}

impl Drop for RestoreStatus<'_> {
    fn drop(&mut self) {
        let _ = self
            .world
            .kubectl(User::Admin, &crate::cluster::CLEAR_TARGET);
        let _ = write_status(self.world, &self.status);
        let own = preflight_gate::model::release::ReleaseKey::from_image(RETARGET).object_name();
        let _ = self.world.kubectl(
            User::Admin,
            &["delete", "updatepreflight", "--ignore-not-found", &own],
        );
    }
}

/// The ClusterVersion's status as the CVO writes it 16% into the update to
/// 4.14.12 (`4.14.1-all-recommended` at a later patch).
fn mid_update(status: &Value) -> Value {
    let now = jiff::Timestamp::now().to_string();
    let offered = &status["availableUpdates"][0];
    let mut status = status.clone();
    status["desired"] = offered.clone();
    status["history"] = json!([
        {"state": "Partial", "version": offered["version"], "image": offered["image"],
         "startedTime": now, "completionTime": null, "verified": true},
        {"state": "Completed", "version": "4.14.1", "image": status["history"][0]["image"],
         "startedTime": "2024-02-07T15:59:57Z", "completionTime": "2024-02-07T16:17:57Z", "verified": false}
    ]);
    status["conditions"] = json!([
        {"type": "Available", "status": "True", "lastTransitionTime": now, "message": "Done applying 4.14.1"},
        {"type": "Failing", "status": "False", "lastTransitionTime": now},
        {"type": "Progressing", "status": "True", "lastTransitionTime": now, "reason": "ClusterOperatorUpdating",
         "message": "Working towards 4.14.12: 139 of 859 done (16% complete), waiting on kube-scheduler"},
        {"type": "RetrievedUpdates", "status": "True", "lastTransitionTime": now}
    ]);
    status
}

/// Writes the whole status, as the CVO does (a JSON patch keeps the
/// `completionTime: null` of an update under way, which a merge would drop).
fn write_status(world: &World, status: &Value) -> crate::cluster::Output {
    world.kubectl(
        User::Admin,
        &[
            "patch",
            "clusterversion",
            "version",
            "--subresource=status",
            "--type=json",
            "-p",
            &json!([{"op": "replace", "path": "/status", "value": status}]).to_string(),
        ],
    )
}

#[test]
fn a_new_target_mid_update_is_denied_naming_progressing_until_it_is_accepted() {
    let (_turn, world) = lock();
    let saved = world.cluster_version()["status"].clone();
    let _restore = RestoreStatus {
        world,
        status: saved.clone(),
    };
    let status = mid_update(&saved);
    let written = write_status(world, &status);
    assert!(written.ok, "{}", written.stderr);

    // The controller checks the release on the cluster as it is now.
    let own = preflight_gate::model::release::ReleaseKey::from_image(RETARGET).object_name();
    world.admin(&[
        "delete",
        "updatepreflight",
        "--ignore-not-found",
        "--wait",
        &own,
    ]);
    let request = json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": own}, "spec": {"image": RETARGET}});
    world.apply_json(&request);
    let done = world.wait_for_result(RETARGET, "checked mid-update", |o| {
        o["metadata"]["name"] == own.as_str()
            && matches!(o["status"]["phase"].as_str(), Some("Failed" | "Passed"))
    });
    let state = done["status"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "ClusterVersionState")
        .cloned()
        .unwrap_or_else(|| panic!("{done}"));
    assert_eq!(state["outcome"], "Fail", "{state}");
    // Its version is not in the graph: whether it leaves the minor is not
    // known, so the CVO's name for that rides along.
    assert_eq!(
        state["risks"],
        json!(["Progressing", "ClusterVersionUpdating"]),
        "{state}"
    );

    // What `oc adm upgrade --to-image … --allow-upgrade-with-warnings`
    // writes (oc's own guard passed by that flag): denied, naming it.
    let denied = world.kubectl(User::Admin, &image_patch_args(RETARGET, &[]));
    assert!(!denied.ok, "{}", denied.stdout);
    assert!(
        denied
            .stderr
            .contains("- ClusterVersionState [Progressing, ClusterVersionUpdating]: an update to 4.14.12 is in progress (Working towards 4.14.12: 139 of 859 done (16% complete)"),
        "{}",
        denied.stderr
    );

    // Accepted by oc's name for it, with a reason: it goes through.
    let claim = [
        "annotate",
        "--overwrite",
        "clusterversion",
        "version",
        "preflight.dev/accept=Progressing",
        r#"preflight.dev/accept-findings={"ClusterVersionState":["ClusterVersionUpdating","Progressing"]}"#,
        &format!("preflight.dev/accept-for={RETARGET}"),
        "preflight.dev/accept-reason=leave the stuck 4.14.12 for a fixed release",
        &format!("preflight.dev/accept-until={}", crate::flows::in_hours(2)),
        &format!("preflight.dev/claimed-by={}", User::Admin.name()),
    ];
    let out = world.kubectl(User::Admin, &claim);
    assert!(out.ok, "{}", out.stderr);
    let allowed = world.kubectl(User::Admin, &image_patch_args(RETARGET, &[]));
    assert!(allowed.ok, "{}", allowed.stderr);
    assert!(
        allowed
            .stderr
            .contains("preflight check accepted as a risk: ClusterVersionState"),
        "{}",
        allowed.stderr
    );
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["image"],
        RETARGET
    );
    world.admin(&crate::cluster::CLEAR_TARGET);
    world.admin(&[
        "annotate",
        "clusterversion",
        "version",
        "preflight.dev/accept-",
        "preflight.dev/accept-for-",
        "preflight.dev/accept-reason-",
        "preflight.dev/accept-until-",
        "preflight.dev/accept-findings-",
        "preflight.dev/claimed-by-",
    ]);

    // OpenShift's own field, where the ClusterVersion has it (a
    // TechPreviewNoUpgrade cluster): what `oc adm upgrade accept
    // Progressing` writes, beside the target.
    {
        let _crd = crate::flows::FeatureSetCrd::apply(world, "TechPreviewNoUpgrade")
            .expect("OpenShift's CRDs are in tests/data/openshift-crds");
        let accepted = json!({"spec": {"desiredUpdate": {"image": RETARGET, "version": "",
            "acceptRisks": [{"name": "Progressing"}]}}});
        poll(
            "acceptRisks to accept Progressing",
            std::time::Duration::from_secs(30),
            || {
                // The new schema is served within moments.
                let out = world.kubectl(
                    User::Admin,
                    &[
                        "patch",
                        "clusterversion",
                        "version",
                        "--type=merge",
                        "-p",
                        &accepted.to_string(),
                    ],
                );
                if out.ok { Ok(()) } else { Err(out.stderr) }
            },
        );
        assert_eq!(
            world.cluster_version()["spec"]["desiredUpdate"]["acceptRisks"],
            json!([{"name": "Progressing"}])
        );
    }

    // Asking for the update under way again changes nothing.
    let again = world.kubectl(
        User::Admin,
        &image_patch_args(status["desired"]["image"].as_str().unwrap(), &[]),
    );
    assert!(again.ok, "{}", again.stderr);
}

/// What `oc adm upgrade --to-multi-arch` writes, the version the cluster
/// runs on the multi-architecture payload, is a whole payload change: the
/// gate judges it (here: nothing has checked it yet), and never answers
/// "the release it runs".
#[test]
fn a_migration_to_multi_architecture_is_judged_not_waved_through() {
    let (_turn, world) = lock();
    let out = match crate::oc::oc() {
        Some(oc) => {
            let out = std::process::Command::new(oc)
                .args(["--kubeconfig", world.var("ADMIN_KUBECONFIG")])
                .args(["adm", "upgrade", "--to-multi-arch"])
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned()
                    + &String::from_utf8_lossy(&out.stdout),
            )
        }
        None => {
            let patch =
                json!({"spec": {"desiredUpdate": {"version": "4.14.1", "architecture": "Multi"}}});
            let out = world.kubectl(
                User::Admin,
                &[
                    "patch",
                    "clusterversion",
                    "version",
                    "--type=merge",
                    "-p",
                    &patch.to_string(),
                ],
            );
            (out.ok, out.stderr)
        }
    };
    let (ok, said) = out;
    assert!(!ok, "{said}");
    assert!(said.contains("4.14.1 (multi-architecture)"), "{said}");
    assert!(!said.contains("nothing to check"), "{said}");
    let cv = world.cluster_version();
    assert!(
        cv["spec"]["desiredUpdate"]["architecture"].is_null(),
        "{cv}"
    );
}
