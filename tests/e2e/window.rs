//! The maintenance window on the real API server: the controller writes
//! the update plan into a release's result, an administrator annotates the
//! ClusterVersion with `preflight.dev/window-end`, and `oc adm upgrade`
//! is denied while the plan's P90 ends past the window's end, naming the
//! window and the P90; with the window moved later, the same update goes
//! ahead, saying where its P90 ends.

use jiff::{SignedDuration, Timestamp, Unit};
use serde_json::json;

use crate::cluster::{CLEAR_TARGET, User, World, image_patch_args, lock};

/// A release only this test asks for.
const IMAGE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5151515151515151515151515151515151515151515151515151515151515151";

/// Removes the target, the window and the result when dropped.
struct Forget<'a> {
    world: &'a World,
    name: String,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let _ = self.world.kubectl(User::Admin, &CLEAR_TARGET);
        let _ = self.world.kubectl(
            User::Admin,
            &[
                "annotate",
                "clusterversion",
                "version",
                "preflight.dev/window-end-",
                "preflight.dev/claimed-by-",
            ],
        );
        let _ = self.world.kubectl(
            User::Admin,
            &[
                "delete",
                "updatepreflight",
                "--ignore-not-found",
                &self.name,
            ],
        );
    }
}

/// The window's end, `hours` from now, to the second (as the gate says it).
fn window_in(hours: i64) -> Timestamp {
    Timestamp::now()
        .checked_add(SignedDuration::from_hours(hours))
        .unwrap()
        .round(Unit::Second)
        .unwrap()
}

/// Writes `preflight.dev/window-end`, a claim: as the admin, naming itself.
fn set_window(world: &World, end: Timestamp) {
    world.admin(&[
        "annotate",
        "--overwrite",
        "clusterversion",
        "version",
        &format!("preflight.dev/window-end={end}"),
        &format!("preflight.dev/claimed-by={}", User::Admin.name()),
    ]);
}

#[test]
fn an_update_the_window_cannot_hold_is_denied_naming_the_window_and_the_p90() {
    let (_turn, world) = lock();
    let name = preflight_gate::model::release::ReleaseKey::from_image(IMAGE).object_name();
    let _forget = Forget {
        world,
        name: name.clone(),
    };
    world.admin(&[
        "delete",
        "updatepreflight",
        "--ignore-not-found",
        "--wait",
        &name,
    ]);
    world.apply_json(
        &json!({"apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": name}, "spec": {"image": IMAGE}}),
    );

    // The controller's run writes the plan beside the results: the test
    // cluster's history holds no completed update and it has no nodes, so
    // the plan is the control plane's documented 1h to 2h.
    let done = world.wait_for_result(IMAGE, "with its plan", |o| {
        o["metadata"]["name"] == name.as_str()
            && o["status"]["phase"] == "Passed"
            && o["status"]["plan"]["p90Seconds"].is_u64()
    });
    let plan = &done["status"]["plan"];
    assert_eq!(plan["p90Seconds"], 7200, "{plan}");
    assert_eq!(plan["controlPlane"]["source"], "documented", "{plan}");

    // A window that ends in an hour cannot hold a P90 of two.
    let end = window_in(1);
    set_window(world, end);
    let denied = world.kubectl(User::Admin, &image_patch_args(IMAGE, &[]));
    assert!(!denied.ok, "{}", denied.stdout);
    assert!(
        denied
            .stderr
            .contains("the update may not finish within the maintenance window: its P90 of 2h00m from now ends "),
        "{}",
        denied.stderr
    );
    assert!(
        denied.stderr.contains(&format!(
            ", after the maintenance window's end {end} (preflight.dev/window-end)"
        )),
        "{}",
        denied.stderr
    );
    assert!(
        denied
            .stderr
            .contains("expected duration: about 1h00m (P90 2h00m)"),
        "{}",
        denied.stderr
    );
    assert!(
        world.cluster_version()["spec"]
            .get("desiredUpdate")
            .is_none(),
        "the target was not stored"
    );
    world.wait_for_event(
        "UpdateOutsideMaintenanceWindow",
        "may not finish within the maintenance window",
    );

    // Moved to end in three hours, it holds the update, which goes ahead
    // saying where its P90 ends.
    let later = window_in(3);
    set_window(world, later);
    let allowed = world.kubectl(User::Admin, &image_patch_args(IMAGE, &[]));
    assert!(allowed.ok, "{}", allowed.stderr);
    assert!(
        allowed.stderr.contains(
            "Warning: preflight-gate: expected duration: about 1h00m (P90 2h00m); its P90 ends "
        ) && allowed.stderr.contains(&format!(
            "within the maintenance window (preflight.dev/window-end {later})"
        )),
        "{}",
        allowed.stderr
    );
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["image"],
        IMAGE
    );
}
