//! Hosted control planes through two real API servers: the world's control
//! plane is the management cluster, with HyperShift's own CRDs, a
//! HostedCluster and its NodePool; a second control plane
//! (`PREFLIGHT_GATE_GUEST_CP_DIR`, which tests/run brings up) is the hosted
//! cluster, whose admin kubeconfig sits in the Secret the HostedCluster
//! names. The gate serves with `--hosted-control-planes` and the
//! hypershift overlay's webhooks, and kubectl writes the HostedCluster and
//! NodePool as `oc patch` and the console would.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{
    ControlPlane, Output, ROOT, User, World, example_cluster_version, lock, operator_status, poll,
};

const CURRENT: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4210421042104210421042104210421042104210421042104210421042104210";
const PATCH: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4215421542154215421542154215421542154215421542154215421542154215";
const MINOR: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4220422042204220422042204220422042204220422042204220422042204220";

/// The hosted cluster: a control plane of its own, with OpenShift's
/// ClusterVersion at 4.21.0 and one ClusterOperator degraded.
struct Guest {
    plane: ControlPlane,
}

static GUEST: OnceLock<Guest> = OnceLock::new();

fn guest_dir() -> PathBuf {
    std::env::var_os("PREFLIGHT_GATE_GUEST_CP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("preflight-gate-guest"))
}

fn guest() -> &'static Guest {
    GUEST.get_or_init(|| {
        let plane = ControlPlane::up(
            Command::new(format!("{ROOT}/tests/control-plane/up"))
                .env("PREFLIGHT_GATE_CP_DIR", guest_dir()),
        );
        plane.install_cluster_crds();
        let mut cv = example_cluster_version();
        cv["status"]["desired"] = json!({"version": "4.21.0", "image": CURRENT});
        cv["status"]["history"] = json!([{"state": "Completed", "version": "4.21.0",
            "image": CURRENT, "verified": true,
            "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}]);
        cv["status"]["availableUpdates"] = json!([
            {"version": "4.21.5", "image": PATCH},
            {"version": "4.22.0", "image": MINOR}
        ]);
        plane.put_cluster_version(&cv);
        let since = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
        plane.put_cluster_operator("ingress", &operator_status(Some(("ingress", since))));
        plane.put_cluster_operator("dns", &operator_status(None));
        Guest { plane }
    })
}

/// The management cluster's side: HyperShift's CRDs, the operator's
/// supported versions, the HostedCluster `clusters/prod` at 4.21.0
/// offered 4.21.5 and 4.22.0 and held by `ClusterVersionUpgradeable=False`
/// for a minor, its NodePool `workers` at 4.21.0, and the admin kubeconfig
/// of the guest in the Secret the HostedCluster names. Writers: alice may
/// patch HostedClusters and NodePools, bob may too and may override.
fn set_up_management(world: &World, guest: &Guest) {
    for crd in ["hostedclusters-Hypershift-Default", "nodepools-Default"] {
        world.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &format!("{ROOT}/tests/data/hypershift-crds/{crd}.crd.yaml"),
        ]);
    }
    world.admin(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd/hostedclusters.hypershift.openshift.io",
        "crd/nodepools.hypershift.openshift.io",
    ]);
    for namespace in ["clusters", "hypershift"] {
        let _ = world.kubectl(User::Admin, &["create", "namespace", namespace]);
    }
    world.apply_json(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "supported-versions", "namespace": "hypershift",
                     "labels": {"hypershift.openshift.io/supported-versions": "true"}},
        "data": {"supported-versions": r#"{"versions":["4.22","4.21","4.20","4.19"]}"#,
                 "server-version": "4.22.0-hypershift-e2e"}
    }));
    let kubeconfig = std::fs::read_to_string(guest.plane.var("ADMIN_KUBECONFIG")).unwrap();
    put_secret(world, "prod-admin-kubeconfig", &kubeconfig);
    put_hosted_cluster(world, "prod", "prod-admin-kubeconfig");
    put_nodepool(world);
    world.apply_json(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "e2e-hosted-writer"},
        "rules": [{"apiGroups": ["hypershift.openshift.io"],
                   "resources": ["hostedclusters", "nodepools"],
                   "verbs": ["get", "list", "patch", "update"]}]
    }));
    world.apply_json(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-hosted-writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-hosted-writer"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                     {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]
    }));
}

fn put_secret(world: &World, name: &str, kubeconfig: &str) {
    world.apply_json(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "clusters"},
        "stringData": {"kubeconfig": kubeconfig}
    }));
}

/// A HostedCluster as HyperShift's schema has it, with the status its
/// operator would write.
fn put_hosted_cluster(world: &World, name: &str, secret: &str) {
    let service = |s: &str| json!({"service": s, "servicePublishingStrategy": {"type": "NodePort", "nodePort": {"address": "10.0.0.1"}}});
    world.apply_json(&json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": name, "namespace": "clusters"},
        "spec": {
            "release": {"image": CURRENT},
            "channel": "stable-4.22",
            "platform": {"type": "None"},
            "pullSecret": {"name": "pull-secret"},
            "etcd": {"managementType": "Managed", "managed": {"storage": {"type": "PersistentVolume", "persistentVolume": {"size": "8Gi"}}}},
            "networking": {"networkType": "OVNKubernetes"},
            "services": [service("APIServer"), service("OAuthServer"), service("Konnectivity"), service("Ignition")]
        }
    }));
    let now = jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastTransitionTime": now})
    };
    let status = json!({"status": {
        "kubeconfig": {"name": secret},
        "version": {
            "desired": {"version": "4.21.0", "image": CURRENT},
            "history": [{"state": "Completed", "version": "4.21.0", "image": CURRENT, "verified": true,
                         "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}],
            "observedGeneration": 1,
            "availableUpdates": [
                {"version": "4.21.5", "image": PATCH},
                {"version": "4.22.0", "image": MINOR}
            ]
        },
        "conditions": [
            condition("Available", "True", "AsExpected", "The hosted control plane is available"),
            condition("Degraded", "False", "AsExpected", "The hosted cluster is not degraded"),
            condition("ClusterVersionUpgradeable", "False", "AdminAckRequired",
                      "Kubernetes 1.35 removes APIs this cluster uses; an administrator must acknowledge it")
        ]
    }});
    world.admin(&[
        "patch",
        "hostedcluster",
        name,
        "-n",
        "clusters",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

fn put_nodepool(world: &World) {
    world.apply_json(&json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": "workers", "namespace": "clusters"},
        "spec": {"clusterName": "prod", "release": {"image": CURRENT}, "replicas": 3,
                 "platform": {"type": "None"},
                 "management": {"upgradeType": "Replace"}}
    }));
    world.admin(&[
        "patch",
        "nodepool",
        "workers",
        "-n",
        "clusters",
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({"status": {"version": "4.21.0"}}).to_string(),
    ]);
}

/// The hypershift overlay's webhooks, as rendered, pointed at `base` with
/// `ca_bundle`, in a configuration of their own that [`Hosted`] removes.
fn register_hosted_webhooks(world: &World, base: &str, ca_bundle: &str) {
    let rendered =
        std::fs::read_to_string(Path::new(ROOT).join("deploy/rendered/hypershift.yaml")).unwrap();
    let webhooks: Vec<Value> = rendered
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("rendered YAML parses"))
        .filter(|o| o["kind"] == "ValidatingWebhookConfiguration")
        .flat_map(|o| o["webhooks"].as_array().cloned().unwrap_or_default())
        .filter(|w| {
            w["name"] != crate::cluster::WEBHOOK && w["name"] != "updatepreflights.preflight.dev"
        })
        .map(|mut w| {
            let path = w["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap()
                .to_owned();
            w["clientConfig"] = json!({"url": format!("{base}{path}"), "caBundle": ca_bundle});
            w
        })
        .collect();
    assert_eq!(
        webhooks
            .iter()
            .map(|w| w["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["hostedclusters.preflight.dev", "nodepools.preflight.dev"],
        "the hypershift overlay's webhooks"
    );
    world.apply_json(&json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "preflight-gate-hosted"},
        "webhooks": webhooks
    }));
}

/// A turn with a gate serving hosted control planes, its webhooks
/// registered; they are removed when the turn ends.
struct Hosted<'a> {
    world: &'a World,
}

impl Drop for Hosted<'_> {
    fn drop(&mut self) {
        let _ = self.world.kubectl(
            User::Admin,
            &[
                "delete",
                "validatingwebhookconfiguration",
                "preflight-gate-hosted",
                "--ignore-not-found",
            ],
        );
    }
}

fn serve_hosted(world: &World) -> Hosted<'_> {
    let guest = guest();
    set_up_management(world, guest);
    let url = world.switch_to_gate_with(&["--hosted-control-planes"]);
    let base = url.trim_end_matches(preflight_gate::server::webhook::PATH);
    let registered = world.admin(&[
        "get",
        "validatingwebhookconfiguration",
        "preflight-gate",
        "-o",
        "json",
    ]);
    let registered: Value = serde_json::from_str(&registered).unwrap();
    let ca_bundle = registered["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .unwrap()
        .to_owned();
    register_hosted_webhooks(world, base, &ca_bundle);
    Hosted { world }
}

/// Patches `kind/name` in `clusters` as `user`, in a dry run.
fn patch(world: &World, user: User, kind: &str, name: &str, patch: &Value) -> Output {
    world.kubectl(
        user,
        &[
            "patch",
            kind,
            name,
            "-n",
            "clusters",
            "--type=merge",
            "--dry-run=server",
            "-p",
            &patch.to_string(),
        ],
    )
}

fn release(image: &str) -> Value {
    json!({"spec": {"release": {"image": image}}})
}

/// Retries `write` until its denial is no longer the wait for results:
/// the gate runs the hosted cluster's offered targets by itself.
fn once_checked(what: &str, write: impl Fn() -> Output) -> Output {
    poll(what, Duration::from_secs(120), || {
        let out = write();
        if out.stderr.contains("is running, retry") {
            Err(out.stderr)
        } else {
            Ok(out)
        }
    })
}

/// Retries `write` until the gate's watch holds clusters/prod.
fn once_seen(write: impl Fn() -> Output) -> Output {
    poll(
        "the gate's watch to show clusters/prod",
        Duration::from_secs(60),
        || {
            let out = write();
            if out.stderr.contains("has not seen HostedCluster") {
                Err(out.stderr)
            } else {
                Ok(out)
            }
        },
    )
}

#[track_caller]
fn denied_by(out: &Output, webhook: &str, says: &[&str]) {
    assert!(
        !out.ok,
        "denied was expected:\n{}{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "admission webhook \"{webhook}\" denied the request"
        )),
        "{}",
        out.stderr
    );
    for said in says {
        assert!(out.stderr.contains(said), "no {said:?} in:\n{}", out.stderr);
    }
}

#[test]
fn a_hosted_clusters_update_is_denied_with_the_guests_and_hypershifts_reasons() {
    let (_turn, world) = lock();
    let _hosted = serve_hosted(world);
    let to_minor = once_checked("the results of 4.22.0 for clusters/prod", || {
        patch(world, User::Admin, "hostedcluster", "prod", &release(MINOR))
    });
    denied_by(
        &to_minor,
        "hostedclusters.preflight.dev",
        &[
            "preflight for 4.22.0 failed",
            // The guest's own: read through its admin kubeconfig.
            "ingress",
            // HyperShift's.
            "HostedClusterUpgradeable",
            "(AdminAckRequired)",
            "oc annotate --overwrite hostedcluster prod -n clusters",
            "Full report: preflight-gate check --kubeconfig <the management cluster's> --hosted-cluster clusters/prod --to 4.22.0",
        ],
    );
    assert!(
        !to_minor.stderr.contains("clusterversion version"),
        "{}",
        to_minor.stderr
    );
    // The dry run left the HostedCluster as it was.
    let stored = world.admin(&[
        "get",
        "hostedcluster",
        "prod",
        "-n",
        "clusters",
        "-o",
        "jsonpath={.spec.release.image}",
    ]);
    assert_eq!(stored, CURRENT);
}

#[test]
fn a_nodepool_newer_than_its_hosted_cluster_is_refused_by_hypershifts_rule() {
    let (_turn, world) = lock();
    let _hosted = serve_hosted(world);
    let out = once_seen(|| patch(world, User::Admin, "nodepool", "workers", &release(PATCH)));
    denied_by(
        &out,
        "nodepools.preflight.dev",
        &[
            "HyperShift would not take the NodePool to 4.21.5",
            "NodePool version 4.21.5 is newer than its HostedCluster's 4.21.0",
        ],
    );
}

#[test]
fn force_upgrade_to_is_an_override_that_forces_past_upgradeable_alone() {
    let (_turn, world) = lock();
    let _hosted = serve_hosted(world);
    let force = |user: User| {
        json!({"metadata": {"annotations": {
            "hypershift.openshift.io/force-upgrade-to": MINOR,
            "preflight.dev/override-reason": "CHG-981: the admin ack is given in the change",
            "preflight.dev/claimed-by": user.name()
        }}})
    };
    let by_alice = patch(
        world,
        User::Alice,
        "hostedcluster",
        "prod",
        &force(User::Alice),
    );
    denied_by(
        &by_alice,
        "hostedclusters.preflight.dev",
        &[
            "alice may not set hypershift.openshift.io/force-upgrade-to",
            "is not allowed the \"override\" verb",
        ],
    );
    let mut no_reason = force(User::Bob);
    no_reason["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("preflight.dev/override-reason");
    denied_by(
        &patch(world, User::Bob, "hostedcluster", "prod", &no_reason),
        "hostedclusters.preflight.dev",
        &["an override gives its reason"],
    );
    let by_bob = patch(world, User::Bob, "hostedcluster", "prod", &force(User::Bob));
    assert!(by_bob.ok, "{}", by_bob.stderr);

    // Forced, the release change still meets the guest's failure.
    let mut forced_update = force(User::Bob);
    forced_update["spec"] = release(MINOR)["spec"].clone();
    let out = once_checked("the results of 4.22.0 for clusters/prod", || {
        patch(world, User::Bob, "hostedcluster", "prod", &forced_update)
    });
    denied_by(
        &out,
        "hostedclusters.preflight.dev",
        &["ingress", "Accepted as risks: HostedClusterUpgradeable"],
    );
    assert!(
        !out.stderr.contains("- HostedClusterUpgradeable"),
        "forced past HostedClusterUpgradeable:\n{}",
        out.stderr
    );
}

#[test]
fn a_hosted_cluster_that_cannot_be_read_is_an_error_never_a_pass() {
    let (_turn, world) = lock();
    let _hosted = serve_hosted(world);
    let guest = guest();
    let closed = crate::support::free_port();
    let kubeconfig = std::fs::read_to_string(guest.plane.var("ADMIN_KUBECONFIG"))
        .unwrap()
        .lines()
        .map(|l| match l.trim_start().strip_prefix("server: ") {
            Some(_) => format!("    server: https://127.0.0.1:{closed}"),
            None => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    put_secret(world, "lost-admin-kubeconfig", &kubeconfig);
    put_hosted_cluster(world, "lost", "lost-admin-kubeconfig");
    let out = once_checked("the results of 4.21.5 for clusters/lost", || {
        patch(world, User::Admin, "hostedcluster", "lost", &release(PATCH))
    });
    denied_by(
        &out,
        "hostedclusters.preflight.dev",
        &[
            "HostedClusterReachable",
            "could not be read through its admin kubeconfig",
        ],
    );
    world.admin(&[
        "delete",
        "hostedcluster",
        "lost",
        "-n",
        "clusters",
        "--wait=false",
    ]);
}

/// What a ClusterCurator's upgrade of a hosted cluster meets
/// (docs/fleet.md, "ClusterCurator"): the curator JSON-patches the
/// HostedCluster's release with a tag of the release repository, which the
/// gate refuses whatever the hosted cluster's readiness; the denial, which
/// the curator's `clustercurator-job` condition carries, says how to name
/// the release by digest.
#[test]
fn a_curators_update_of_a_hosted_cluster_by_tag_is_refused_as_not_a_digest() {
    let (_turn, world) = lock();
    let _hosted = serve_hosted(world);
    let curators_patch = json!([{"op": "replace", "path": "/spec/release/image",
        "value": "quay.io/openshift-release-dev/ocp-release:4.22.0-multi"}]);
    let out = once_seen(|| {
        world.kubectl(
            User::Admin,
            &[
                "patch",
                "hostedcluster",
                "prod",
                "-n",
                "clusters",
                "--type=json",
                "--dry-run=server",
                "-p",
                &curators_patch.to_string(),
            ],
        )
    });
    denied_by(
        &out,
        "hostedclusters.preflight.dev",
        &[
            "ocp-release:4.22.0-multi names the release by a tag",
            "@sha256:<digest>",
        ],
    );
}
