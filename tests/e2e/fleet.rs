//! The fleet through two real API servers: a second control plane
//! (`PREFLIGHT_GATE_MEMBER_CP_DIR`, which tests/run brings up) is a managed
//! cluster, running the gate with `--cluster-claims` and its controller;
//! the world's control plane is the Open Cluster Management hub, with OCM's,
//! RHACM's and TALM's real CRDs (tests/data/fleet-crds).
//!
//! What the managed cluster's gate does is real: it runs its checks on its
//! cluster, decides each offered target and writes its ClusterClaims. What
//! OCM's agents and controllers would do is not here (they are not built
//! for these tests), and stands in as little as it can:
//! - the registration agent copies a managed cluster's claims into its
//!   ManagedCluster's `status.clusterClaims` on the hub: [`copy_cluster_claims`]
//!   does that and nothing more;
//! - the placement controller selects ManagedClusters whose claims match a
//!   Placement's `claimSelector`, a label selector over the claims:
//!   [`selected`] reads the Placement docs/fleet.md applies and matches it
//!   with kube's own label selector.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde_json::{Value, json};

use crate::cluster::{
    ControlPlane, ROOT, World, example_cluster_version, lock, operator_status, poll,
};
use crate::support::free_port;

const CURRENT: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4210421042104210421042104210421042104210421042104210421042104210";
const PATCH: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4215421542154215421542154215421542154215421542154215421542154215";
const MINOR: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4223422342234223422342234223422342234223422342234223422342234223";

const FLEET_CRDS: &str = "tests/data/fleet-crds";
const CLUSTER_CLAIM_CRD: &str =
    "0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml";
const OWN: &str = "app.kubernetes.io/managed-by=preflight-gate";
/// The name the hub knows the managed cluster by.
const MEMBER: &str = "prod-east";

/// What the managed cluster's update graph offers.
fn offered() -> Value {
    json!([
        {"version": "4.21.5", "image": PATCH},
        {"version": "4.22.3", "image": MINOR}
    ])
}

/// The managed cluster, its gate serving with `--cluster-claims` at
/// `base` (`https://127.0.0.1:PORT`), its serving CA `ca_bundle`.
struct Member {
    plane: ControlPlane,
    base: String,
    ca_bundle: String,
}

static MEMBER_CLUSTER: OnceLock<Member> = OnceLock::new();

fn member_dir() -> PathBuf {
    std::env::var_os("PREFLIGHT_GATE_MEMBER_CP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("preflight-gate-member"))
}

/// The managed cluster at 4.21.0, offered 4.21.5 and 4.22.3, every
/// operator healthy; a claim of someone else's, and one an earlier gate
/// left for a target no longer offered; then the gate, with its controller
/// refreshing every 10 s.
fn member() -> &'static Member {
    MEMBER_CLUSTER.get_or_init(|| {
        let plane = ControlPlane::up(
            Command::new(format!("{ROOT}/tests/control-plane/up"))
                .env("PREFLIGHT_GATE_CP_DIR", member_dir()),
        );
        plane.install_cluster_crds();
        for crd in ["updatepreflights", "preflightchecks"] {
            plane.apply_file(
                &PathBuf::from(ROOT).join(format!("deploy/crds/{crd}.preflight.dev.yaml")),
            );
        }
        plane.apply_file(&PathBuf::from(ROOT).join(FLEET_CRDS).join(CLUSTER_CLAIM_CRD));
        plane.wait_established(&[
            "updatepreflights.preflight.dev",
            "preflightchecks.preflight.dev",
            "clusterclaims.cluster.open-cluster-management.io",
        ]);
        let _ = plane.kubectl(&["create", "namespace", "preflight-gate"]);
        plane.apply_file(&PathBuf::from(ROOT).join("deploy/base/result-key.yaml"));
        // The grant, whose ClusterRole owns the gate's ClusterClaims (the
        // gate here runs as the admin, who may do more).
        plane.apply_file(&PathBuf::from(ROOT).join("deploy/components/cluster-claims/rbac.yaml"));
        // A reused control plane: the world as this test first sets it.
        plane.admin(&["delete", "updatepreflights", "--all", "--ignore-not-found"]);
        plane.admin(&["delete", "clusterclaims", "--all", "--ignore-not-found"]);
        let mut cv = example_cluster_version();
        cv["status"]["desired"] = json!({"version": "4.21.0", "image": CURRENT});
        cv["status"]["history"] = json!([{"state": "Completed", "version": "4.21.0",
            "image": CURRENT, "verified": true,
            "startedTime": "2026-11-01T10:00:00Z", "completionTime": "2026-11-01T11:00:00Z"}]);
        cv["status"]["availableUpdates"] = offered();
        cv["status"]["conditionalUpdates"] = json!([]);
        plane.put_cluster_version(&cv);
        for name in ["ingress", "dns", "etcd"] {
            plane.put_cluster_operator(name, &operator_status(None));
        }
        plane.apply_json(&json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
            "metadata": {"name": "id.k8s.io"}, "spec": {"value": "prod-east-id"}
        }));
        plane.apply_json(&json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
            "metadata": {"name": "update-4.20.9.preflight.dev",
                         "labels": {"app.kubernetes.io/managed-by": "preflight-gate"}},
            "spec": {"value": "Cleared"}
        }));
        let (base, ca_bundle) = serve(&plane);
        Member {
            plane,
            base,
            ca_bundle,
        }
    })
}

/// `preflight-gate serve --cluster-claims` on the managed cluster, with its
/// controller (whose leader publishes), on a thread of its own; its
/// webhook's base URL and CA bundle.
fn serve(plane: &ControlPlane) -> (String, String) {
    let certs = plane.dir().join("member-certs");
    let written = preflight_gate::certs::generate(&certs, &[]).unwrap();
    let port = free_port();
    let args = [
        "preflight-gate".to_owned(),
        "serve".into(),
        format!("--webhook-addr=127.0.0.1:{port}"),
        format!("--admin-addr=127.0.0.1:{}", free_port()),
        format!("--tls-cert={}", certs.join("tls.crt").display()),
        format!("--tls-key={}", certs.join("tls.key").display()),
        format!("--kubeconfig={}", plane.var("ADMIN_KUBECONFIG")),
        format!("--client-ca={}", plane.var("WEBHOOK_CLIENT_CA")),
        "--instance=member-gate".into(),
        "--cluster-claims".into(),
        "--checks=ClusterVersionState,ClusterOperatorsHealthy".into(),
        "--external-checks=false".into(),
        "--release-checks=false".into(),
        "--refresh-interval=10s".into(),
        "--lease-duration=6s".into(),
        "--shutdown-delay=0s".into(),
    ];
    crate::cluster::serve_in_process(Vec::from(args));
    (format!("https://127.0.0.1:{port}"), written.ca_bundle())
}

/// The managed cluster's claims, name to value: all of them, or the gate's.
fn cluster_claims(plane: &ControlPlane, selector: Option<&str>) -> BTreeMap<String, String> {
    let mut args = vec!["get", "clusterclaims"];
    if let Some(selector) = selector {
        args.extend(["-l", selector]);
    }
    plane.get_json(&args)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["name"].as_str().unwrap().to_owned(),
                c["spec"]["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until the gate's claims are exactly `expected` (the summary's
/// value checked by `summary`).
fn wait_for_cluster_claims(
    plane: &ControlPlane,
    what: &str,
    expected: &[(&str, &str)],
    summary: &str,
) -> BTreeMap<String, String> {
    let mut expected: BTreeMap<String, String> = expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    expected.insert("updates.preflight.dev".into(), summary.into());
    poll(what, Duration::from_secs(120), || {
        let now = cluster_claims(plane, Some(OWN));
        if now == expected {
            Ok(now)
        } else {
            Err(format!("{now:?}"))
        }
    })
}

/// Both targets offered again, every operator healthy, and the gate's
/// ClusterClaims saying both are cleared.
fn offered_and_cleared(member: &Member) {
    member
        .plane
        .patch_cluster_version_status(&json!({"availableUpdates": offered()}));
    for name in ["ingress", "dns", "etcd"] {
        member
            .plane
            .put_cluster_operator(name, &operator_status(None));
    }
    wait_for_cluster_claims(
        &member.plane,
        "both offered targets cleared",
        &[
            ("update-4.21.5.preflight.dev", "Cleared"),
            ("update-4.22.3.preflight.dev", "Cleared"),
        ],
        "4.22.3=Cleared 4.21.5=Cleared",
    );
}

/// The hub: OCM's and the update tools' CRDs, and the ManagedClusters
/// prod-east (the member) and prod-west (another cluster, whose gate
/// found a failing operator: its claims as its registration agent would
/// have copied them).
fn set_up_hub(world: &World) {
    let crds = std::fs::read_dir(PathBuf::from(ROOT).join(FLEET_CRDS)).unwrap();
    let mut files: Vec<PathBuf> = crds
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in &files {
        world.admin(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            file.to_str().unwrap(),
        ]);
    }
    world.admin(&[
        "wait",
        "--for",
        "condition=established",
        "--timeout=60s",
        "crd/managedclusters.cluster.open-cluster-management.io",
        "crd/placements.cluster.open-cluster-management.io",
        "crd/placementdecisions.cluster.open-cluster-management.io",
        "crd/manifestworkreplicasets.work.open-cluster-management.io",
        "crd/clustercurators.cluster.open-cluster-management.io",
        "crd/clustergroupupgrades.ran.openshift.io",
    ]);
    for name in [MEMBER, "prod-west", "preflight-gate-fleet"] {
        let _ = world.kubectl(crate::cluster::User::Admin, &["create", "namespace", name]);
    }
    for name in [MEMBER, "prod-west"] {
        world.apply_json(&json!({
            "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": {"vendor": "OpenShift"}},
            "spec": {"hubAcceptsClient": true}
        }));
    }
    set_hub_cluster_claims(
        world,
        "prod-west",
        &BTreeMap::from([
            (
                "update-4.22.3.preflight.dev".to_owned(),
                "Blocked".to_owned(),
            ),
            (
                "updates.preflight.dev".to_owned(),
                "4.22.3=Blocked(ClusterOperatorsHealthy)".to_owned(),
            ),
        ]),
    );
}

/// The registration agent's part, and nothing more: the managed cluster's
/// claims, copied into its ManagedCluster's status on the hub.
fn copy_cluster_claims(world: &World, member: &Member) {
    set_hub_cluster_claims(world, MEMBER, &cluster_claims(&member.plane, None));
}

fn set_hub_cluster_claims(world: &World, cluster: &str, claims: &BTreeMap<String, String>) {
    let claims: Vec<Value> = claims
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    world.admin(&[
        "patch",
        "managedcluster",
        cluster,
        "--subresource=status",
        "--type=merge",
        "-p",
        &json!({"status": {"clusterClaims": claims}}).to_string(),
    ]);
}

/// A manifest of docs/fleet.md: the ```yaml block after `<!-- fleet: NAME -->`.
fn documented(name: &str) -> Value {
    let doc = std::fs::read_to_string(PathBuf::from(ROOT).join("docs/fleet.md")).unwrap();
    let marker = format!("<!-- fleet: {name} -->");
    let after = &doc[doc
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/fleet.md has no {marker}"))
        + marker.len()..];
    let block = after
        .trim_start()
        .strip_prefix("```yaml\n")
        .unwrap_or_else(|| panic!("{marker} is not followed by a ```yaml block"));
    let yaml = &block[..block.find("\n```").unwrap()];
    serde_saphyr::from_str(yaml).unwrap()
}

/// The ManagedClusters a Placement's claim selectors select, matched as
/// the placement controller matches them: each predicate's `claimSelector`
/// is a label selector over the cluster's claims.
fn selected(world: &World, placement: &Value) -> Vec<String> {
    let selectors: Vec<Selector> = placement["spec"]["predicates"]
        .as_array()
        .expect("the Placement has predicates")
        .iter()
        .map(|p| {
            let claim_selector = &p["requiredClusterSelector"]["claimSelector"];
            let selector: LabelSelector = serde_json::from_value(claim_selector.clone()).unwrap();
            Selector::try_from(selector).unwrap()
        })
        .collect();
    let clusters = world.admin(&["get", "managedclusters", "-o", "json"]);
    let clusters: Value = serde_json::from_str(&clusters).unwrap();
    clusters["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            let claims: BTreeMap<String, String> = c["status"]["clusterClaims"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|claim| {
                    (
                        claim["name"].as_str().unwrap().to_owned(),
                        claim["value"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            selectors.iter().any(|s| s.matches(&claims))
        })
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_managed_clusters_claims_follow_its_results_and_a_placement_selects_the_cleared() {
    let (_turn, world) = lock();
    let member = member();
    set_up_hub(world);
    // The gate publishes both offered targets, cleared, and withdraws the
    // ClusterClaim an earlier gate left; someone else's stays as it was.
    offered_and_cleared(member);
    assert_eq!(
        cluster_claims(&member.plane, None)["id.k8s.io"],
        "prod-east-id"
    );
    // Each is owned by the ClusterRole that grants them: removing the grant
    // (uninstalling) has the garbage collector delete them.
    let role = member
        .plane
        .get_json(&["get", "clusterrole", "preflight-gate-cluster-claims"]);
    for cluster_claim in member.plane.get_json(&["get", "clusterclaims", "-l", OWN])["items"]
        .as_array()
        .unwrap()
    {
        let owners = &cluster_claim["metadata"]["ownerReferences"];
        assert_eq!(
            owners,
            &json!([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "name": "preflight-gate-cluster-claims", "uid": role["metadata"]["uid"]}]),
            "{cluster_claim}"
        );
    }

    // On the hub, the docs' Placement for 4.22.3 selects prod-east alone.
    let placement = documented("placement");
    assert_eq!(placement["kind"], "Placement");
    world.apply_json(&placement);
    copy_cluster_claims(world, member);
    assert_eq!(selected(world, &placement), [MEMBER]);

    // A failure the next refresh finds withdraws the cleared claims.
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    member
        .plane
        .put_cluster_operator("ingress", &operator_status(Some(("ingress", since))));
    wait_for_cluster_claims(
        &member.plane,
        "both targets blocked by the degraded operator",
        &[
            ("update-4.21.5.preflight.dev", "Blocked"),
            ("update-4.22.3.preflight.dev", "Blocked"),
        ],
        "4.22.3=Blocked(ClusterOperatorsHealthy) 4.21.5=Blocked(ClusterOperatorsHealthy)",
    );
    copy_cluster_claims(world, member);
    assert!(selected(world, &placement).is_empty());

    // A target the update graph no longer offers loses its claim.
    member.plane.patch_cluster_version_status(
        &json!({"availableUpdates": [{"version": "4.22.3", "image": MINOR}]}),
    );
    wait_for_cluster_claims(
        &member.plane,
        "4.21.5 withdrawn",
        &[("update-4.22.3.preflight.dev", "Blocked")],
        "4.22.3=Blocked(ClusterOperatorsHealthy)",
    );

    // Healthy again: cleared again, and selected.
    member
        .plane
        .put_cluster_operator("ingress", &operator_status(None));
    wait_for_cluster_claims(
        &member.plane,
        "4.22.3 cleared again",
        &[("update-4.22.3.preflight.dev", "Cleared")],
        "4.22.3=Cleared",
    );
    copy_cluster_claims(world, member);
    assert_eq!(selected(world, &placement), [MEMBER]);
    assert_eq!(
        cluster_claims(&member.plane, None)["id.k8s.io"],
        "prod-east-id"
    );
}

/// The docs' manifests for a wave are what the hub's CRDs accept, and the
/// hub overlay applies to a hub (a server-side dry run: nothing delivers
/// it here).
#[test]
fn the_docs_wave_manifests_and_the_hub_overlay_apply_to_a_hub() {
    let (_turn, world) = lock();
    set_up_hub(world);
    // The template before the ClusterGroupUpgrade that names it.
    for name in [
        "placement",
        "manifestworkreplicaset",
        "clustergroupupgrade",
        "clustercurator",
    ] {
        let manifest = documented(name);
        let path = world.dir().join(format!("fleet-{name}.json"));
        std::fs::write(&path, manifest.to_string()).unwrap();
        world.admin(&[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            path.to_str().unwrap(),
        ]);
    }
    let hub = PathBuf::from(ROOT).join("deploy/rendered/fleet.yaml");
    let out = world.admin(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        hub.to_str().unwrap(),
    ]);
    assert!(out.contains("manifestworkreplicaset"), "{out}");
    assert!(out.contains("placement"), "{out}");
}

/// What the hub's update tools write to a managed cluster, and what its
/// gate answers (docs/fleet.md, "TALM" and "ClusterCurator"):
/// - TALM's ManifestWork applies the docs' template's ClusterVersion
///   server-side (`desiredUpdate` by version, `image: ""`): a cleared
///   cluster takes it;
/// - a ClusterCurator's klusterlet agent merges the ClusterVersion the
///   curator edited, with `desiredUpdate` set from the matching
///   `availableUpdates` entry; on a blocked cluster the gate denies it, and
///   that denial is the text the curator's ManagedClusterAction shows, as
///   it denies TALM's write.
#[test]
fn the_hub_tools_writes_go_through_when_cleared_and_are_denied_with_the_gates_reasons() {
    let (_turn, world) = lock();
    let member = member();
    let gate = register_member_webhook(world, member);
    offered_and_cleared(member);
    let template = documented("manifestworkreplicaset");
    let cluster_version = template["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "ClusterVersion")
        .expect("the template sets the ClusterVersion")
        .clone();
    let talms_write = |dry_run: &str| {
        let path = member.plane.dir().join("talm-cluster-version.json");
        std::fs::write(&path, cluster_version.to_string()).unwrap();
        member.plane.kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=work-agent-talm-update",
            dry_run,
            "-f",
            path.to_str().unwrap(),
        ])
    };
    let cleared = poll(
        "TALM's write to go through on the cleared cluster",
        Duration::from_secs(60),
        || {
            let out = talms_write("--dry-run=server");
            if out.ok { Ok(out) } else { Err(out.stderr) }
        },
    );
    assert!(
        cleared.stdout.contains("clusterversion"),
        "{}",
        cleared.stdout
    );
    let since = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(2);
    member
        .plane
        .put_cluster_operator("dns", &operator_status(Some(("dns", since))));
    let curators_write = json!({"spec": {"desiredUpdate": {
        "version": "4.22.3", "image": MINOR, "force": false}}});
    let out = poll(
        "the member's gate to deny for dns",
        Duration::from_secs(120),
        || {
            let out = member.plane.kubectl(&[
                "patch",
                "clusterversion",
                "version",
                "--type=merge",
                "--dry-run=server",
                "-p",
                &curators_write.to_string(),
            ]);
            if !out.ok && out.stderr.contains("dns") {
                Ok(out)
            } else {
                Err(format!("{}{}", out.stdout, out.stderr))
            }
        },
    );
    let talms = talms_write("--dry-run=server");
    member
        .plane
        .put_cluster_operator("dns", &operator_status(None));
    drop(gate);
    for out in [&out, &talms] {
        assert!(!out.ok, "{}", out.stdout);
        for said in [
            "admission webhook \"clusterversions.preflight.dev\" denied the request",
            "preflight for 4.22.3 failed",
            "ClusterOperatorsHealthy",
            "dns",
        ] {
            assert!(out.stderr.contains(said), "no {said:?} in:\n{}", out.stderr);
        }
    }
}

/// The member's gate registered as its API server's webhook, until dropped.
struct Registered<'a>(&'a ControlPlane);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(&[
            "delete",
            "validatingwebhookconfiguration",
            "preflight-gate",
            "--ignore-not-found",
        ]);
    }
}

/// deploy/base's webhook configuration on the managed cluster's API
/// server, pointed at its gate.
fn register_member_webhook<'a>(world: &World, member: &'a Member) -> Registered<'a> {
    let mut config = world.webhook_configuration(&member.base);
    for webhook in config["webhooks"].as_array_mut().unwrap() {
        webhook["clientConfig"]["caBundle"] = json!(member.ca_bundle);
    }
    member.plane.apply_json(&config);
    Registered(&member.plane)
}
