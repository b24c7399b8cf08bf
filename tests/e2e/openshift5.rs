//! OpenShift 5 through the real API server: the example ClusterVersion set
//! to 4.22 (then 4.21), offering 5.0 and 5.1, a gate serving a snapshot of
//! that same cluster, and kubectl asking for the target as
//! `oc adm upgrade --to` would. The hops the CVO refuses are denied with
//! the CVO's reason names (docs/checks.md, "How OpenShift 5 is judged").

use serde_json::{Value, json};

use crate::cluster::{Output, User, WEBHOOK, World, lock, merge_patch_args};

const TO_5_0: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5050505050505050505050505050505050505050505050505050505050505050";
const TO_5_1: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5151515151515151515151515151515151515151515151515151515151515151";

/// The status fields this test changes, as the CVO would write them for a
/// cluster at `current` offered 5.0.1 and 5.1.0 besides what the example
/// offers (the world's probe of a gate asks for the example's 4.15.3,
/// which from 4.2x is a rollback that fails).
fn status_at(current: &str, example: &Value) -> Value {
    let mut offered = example["availableUpdates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    offered.extend([
        json!({"version": "5.0.1", "image": TO_5_0}),
        json!({"version": "5.1.0", "image": TO_5_1}),
    ]);
    json!({
        "desired": {"version": current, "image": format!("quay.io/openshift-release-dev/ocp-release:{current}-x86_64")},
        "history": [{"state": "Completed", "version": current, "verified": true,
                     "image": format!("quay.io/openshift-release-dev/ocp-release:{current}-x86_64"),
                     "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}],
        "availableUpdates": offered,
    })
}

/// Puts the ClusterVersion's changed status fields back when the test ends,
/// passed or not, and removes the results the controller may have made for
/// the targets offered meanwhile: the next test finds the example cluster.
struct Restore<'a> {
    world: &'a World,
    status: Value,
}

impl Restore<'_> {
    fn new(world: &World) -> Restore<'_> {
        let cv = world.cluster_version();
        let status = json!({
            "desired": cv["status"]["desired"],
            "history": cv["status"]["history"],
            "availableUpdates": cv["status"]["availableUpdates"],
        });
        Restore { world, status }
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        self.world.patch_cluster_version_status(&self.status);
        for image in [TO_5_0, TO_5_1] {
            let name = preflight_gate::model::release::ReleaseKey::from_image(image).object_name();
            let _ = self.world.kubectl(
                User::Admin,
                &["delete", "updatepreflight", &name, "--ignore-not-found"],
            );
        }
    }
}

/// Sets the API server's ClusterVersion to `current` ([`status_at`]) and
/// serves a gate over a snapshot of the same cluster, so the gate's results
/// for 5.0.1 and 5.1.0 are checked up front from that version.
fn serve_snapshot_of(world: &World, restore: &Restore, current: &str) {
    let dir = world.dir().join(format!("openshift5-{current}"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cv = world.cluster_version();
    cv["metadata"] = json!({"name": "version"});
    let status = status_at(current, &restore.status);
    for field in ["desired", "history", "availableUpdates"] {
        cv["status"][field] = status[field].clone();
    }
    std::fs::write(dir.join("clusterversion.json"), cv.to_string()).unwrap();
    world.patch_cluster_version_status(&status);
    world.switch_to_gate_with(&["--snapshot", dir.to_str().unwrap()]);
}

/// Asks for `version` as `oc adm upgrade --to` does, in a dry run.
fn ask_for(world: &World, version: &str) -> Output {
    world.kubectl(
        User::Admin,
        &merge_patch_args(version, &["--dry-run=server"]),
    )
}

#[track_caller]
fn refused(out: &Output, says: &[&str]) {
    assert!(
        !out.ok,
        "denied was expected:\n{}{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "admission webhook \"{WEBHOOK}\" denied the request"
        )),
        "{}",
        out.stderr
    );
    for said in says {
        assert!(out.stderr.contains(said), "no {said:?} in:\n{}", out.stderr);
    }
}

#[test]
fn from_4_22_only_5_0_is_a_supported_hop_and_4_21_may_not_skip_4_22() {
    let (_turn, world) = lock();
    let restore = Restore::new(world);

    serve_snapshot_of(world, &restore, "4.22.3");
    refused(
        &ask_for(world, "5.1.0"),
        &[
            "UpdatePath",
            "4.22.3 to 5.1.0 is refused by the CVO (MajorVersionUpdate)",
            "to 5.0 first",
        ],
    );
    // 4.22 to 5.0 is a minor update: whatever else the sparse snapshot
    // says of it, its path is not refused.
    let to_5_0 = ask_for(world, "5.0.1");
    for refusal in [
        "UpdatePath",
        "MajorVersionUpdate",
        "MultipleMinorVersionsUpdate",
    ] {
        assert!(
            !to_5_0.stderr.contains(refusal),
            "{refusal} in:\n{}",
            to_5_0.stderr
        );
    }

    serve_snapshot_of(world, &restore, "4.21.7");
    refused(
        &ask_for(world, "5.0.1"),
        &[
            "UpdatePath",
            "4.21.7 to 5.0.1 crosses 2 minor versions and skips 4.22 (MultipleMinorVersionsUpdate)",
            "to 4.22 first",
        ],
    );
}
