//! deploy/ before a real API server: the rendered openshift and kubernetes
//! overlays pass a server-side dry run (the gate's pod, too, under Pod
//! Security `restricted`), the dev overlay is applied and every object is
//! accepted, its webhook configuration works once pointed at the gate, and
//! the gate's own code, run as the deployed ServiceAccount, may do what it
//! does and no more.
//!
//! The renderings are the checked-in deploy/rendered/*.yaml, which
//! tests/it/deploy.rs keeps equal to `kubectl kustomize`.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

use crate::cluster::{User, World, lock, merge_patch_args};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SA: &str = "system:serviceaccount:preflight-gate:preflight-gate";

/// Namespaces OpenShift has and the control plane lacks; the overlays put
/// Roles in them.
const OPENSHIFT_NAMESPACES: [&str; 3] = [
    "openshift-config",
    "openshift-config-managed",
    "openshift-ingress-operator",
];

/// Kinds whose CRDs the control plane does not have (cert-manager,
/// Prometheus operator). The dry run skips them, and only them; their
/// fields are checked by tests/it/deploy.rs.
const NOT_SERVED: [&str; 2] = ["cert-manager.io", "monitoring.coreos.com"];

fn rendered(overlay: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/rendered/{overlay}.yaml")).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn group(object: &Value) -> &str {
    object["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .map_or("", |(g, _)| g)
}

/// Writes objects as YAML documents (JSON ones), not as a List: kubectl
/// validates a List's items against the older OpenAPI v2 schema, which
/// rejects the CRD's `null` in an enum that the API server accepts.
fn write_list(dir: &Path, name: &str, items: &[&Value]) -> String {
    let path = dir.join(name);
    let docs: Vec<String> = items.iter().map(|o| o.to_string()).collect();
    std::fs::write(&path, docs.join("\n---\n")).unwrap();
    path.to_str().unwrap().to_owned()
}

fn openshift_namespaces(world: &World) {
    for ns in OPENSHIFT_NAMESPACES {
        world.apply_json(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
}

/// Applies the dev overlay, as `kubectl apply --server-side -k
/// deploy/overlays/dev` would, and returns its objects. Its webhook
/// configuration is applied as a developer completes it (the caBundle of
/// their certs/, the address their gate listens on): pointed at the World's
/// gate, so that at no moment do ClusterVersion writes go to a port where
/// nothing listens, which would fail them, the World's own set-up included.
pub(crate) fn apply_dev(world: &World) -> Vec<Value> {
    openshift_namespaces(world);
    let objects = rendered("dev");
    let completed: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if o["kind"] == "ValidatingWebhookConfiguration" {
                let client = &mut o["webhooks"][0]["clientConfig"];
                assert_eq!(
                    client["url"],
                    "https://127.0.0.1:8443/validate/clusterversion"
                );
                *client = json!({"url": world.gate_url(), "caBundle": world.ca_bundle});
            }
            o
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = write_list(
        dir.path(),
        "dev.json",
        &completed.iter().collect::<Vec<_>>(),
    );
    let out = world.kubectl(
        User::Admin,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=preflight-gate-dev",
            "-f",
            &file,
        ],
    );
    assert!(out.ok, "the dev overlay was refused:\n{}", out.stderr);
    let applied = out
        .stdout
        .lines()
        .filter(|l| l.contains("serverside-applied"));
    assert_eq!(applied.count(), objects.len(), "{}", out.stdout);
    objects
}

#[test]
fn the_overlays_pass_a_server_side_dry_run() {
    let (_turn, world) = lock();
    // The dev overlay's namespace labels (Pod Security `restricted`) and
    // ServiceAccount are what the pod below is admitted against.
    apply_dev(world);
    let dir = tempfile::tempdir().unwrap();
    for overlay in ["openshift", "kubernetes"] {
        let objects = rendered(overlay);
        let (skipped, checked): (Vec<&Value>, Vec<&Value>) =
            objects.iter().partition(|o| NOT_SERVED.contains(&group(o)));
        let skipped_groups: BTreeSet<&str> = skipped.iter().map(|o| group(o)).collect();
        assert!(
            skipped_groups.iter().all(|g| NOT_SERVED.contains(g)),
            "{overlay}: {skipped_groups:?}"
        );
        let expected = match overlay {
            "kubernetes" => "cert-manager.io",
            _ => "monitoring.coreos.com",
        };
        assert!(skipped_groups.contains(expected), "{overlay}");

        // Objects that exist already (the World's namespace, CRD and
        // webhook configuration) are validated as a replacement, the others
        // as a creation: either way the whole object, not a merge with
        // someone else's fields.
        let all = write_list(dir.path(), &format!("{overlay}.json"), &checked);
        let existing = world.admin(&["get", "-f", &all, "--ignore-not-found", "-o", "json"]);
        let existing: Value = serde_json::from_str(&existing).unwrap();
        let exists = |o: &Value| {
            existing["items"].as_array().unwrap().iter().any(|e| {
                e["kind"] == o["kind"]
                    && e["metadata"]["name"] == o["metadata"]["name"]
                    && e["metadata"]["namespace"] == o["metadata"]["namespace"]
            })
        };
        let (replace, create): (Vec<&Value>, Vec<&Value>) =
            checked.iter().copied().partition(|o| exists(o));
        assert!(!create.is_empty() && !replace.is_empty(), "{overlay}");
        for (verb, items) in [("create", &create), ("replace", &replace)] {
            let file = write_list(dir.path(), &format!("{overlay}-{verb}.json"), items);
            let out = world.kubectl(User::Admin, &[verb, "--dry-run=server", "-f", &file]);
            assert!(
                out.ok,
                "{overlay}: {verb} --dry-run=server failed:\n{}",
                out.stderr
            );
            let accepted = out
                .stdout
                .lines()
                .filter(|l| l.contains("(server dry run)"));
            assert_eq!(accepted.count(), items.len(), "{overlay}:\n{}", out.stdout);
        }

        // The pod the Deployment makes, admitted under the namespace's
        // Pod Security `restricted` enforcement, the priority class and the
        // ServiceAccount.
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let template = &deployment["spec"]["template"];
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "preflight-gate-dry-run", "namespace": "preflight-gate",
                "labels": template["metadata"]["labels"]},
            "spec": template["spec"]});
        let file = write_list(dir.path(), &format!("{overlay}-pod.json"), &[&pod]);
        let out = world.kubectl(User::Admin, &["create", "--dry-run=server", "-f", &file]);
        assert!(
            out.ok,
            "{overlay}: the gate's pod is refused:\n{}",
            out.stderr
        );
        assert!(!out.stderr.contains("PodSecurity"), "{}", out.stderr);
    }
    // The enforcement the pod passed is really on.
    let ns = world.admin(&[
        "get",
        "namespace",
        "preflight-gate",
        "-o",
        "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
    ]);
    assert_eq!(ns, "restricted");
    // A privileged pod is refused there: the dry run above could fail.
    let file = dir.path().join("privileged.json");
    let privileged = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": "preflight-gate"},
        "spec": {"serviceAccountName": "preflight-gate", "containers": [{"name": "c", "image": "x",
            "securityContext": {"privileged": true}}]}});
    std::fs::write(&file, privileged.to_string()).unwrap();
    let out = world.kubectl(
        User::Admin,
        &["create", "--dry-run=server", "-f", file.to_str().unwrap()],
    );
    assert!(
        !out.ok && out.stderr.contains("PodSecurity"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_dev_overlay_is_applied_and_its_webhook_gates_updates() {
    let (_turn, world) = lock();
    let objects = apply_dev(world);
    // Every object is there, as applied.
    let file = format!("{ROOT}/deploy/rendered/dev.yaml");
    let names = world.admin(&["get", "-f", &file, "-o", "name"]);
    assert_eq!(names.lines().count(), objects.len(), "{names}");
    let kinds: BTreeSet<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    for kind in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(kinds.contains(kind), "{kind}");
    }

    // The configuration as the API server stored it keeps the contract.
    let stored: Value = serde_json::from_str(&world.admin(&[
        "get",
        "validatingwebhookconfiguration",
        "preflight-gate",
        "-o",
        "json",
    ]))
    .unwrap();
    let webhook = &stored["webhooks"][0];
    assert_eq!(webhook["clientConfig"]["url"], world.gate_url());
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "NoneOnDryRun");
    assert_eq!(webhook["matchConditions"].as_array().unwrap().len(), 1);

    // The API server calls the gate through the overlay's own configuration.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = world.kubectl(
            User::Admin,
            &merge_patch_args("4.15.3", &["--dry-run=server"]),
        );
        if !out.ok && out.stderr.contains("preflight for 4.15.3 failed") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the dev webhook never gated: {}",
            out.stderr
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // A change that leaves the target alone never reaches the gate.
    let out = world.kubectl(
        User::Admin,
        &[
            "annotate",
            "clusterversion",
            "version",
            "e2e.preflight.dev/deploy=yes",
            "--overwrite",
            "--dry-run=server",
        ],
    );
    assert!(out.ok, "{}", out.stderr);
}

/// The admin kubeconfig, impersonating the gate's ServiceAccount.
pub(crate) fn service_account_kubeconfig(world: &World, dir: &Path) -> std::path::PathBuf {
    let mut config: Value =
        serde_json::from_str(&world.admin(&["config", "view", "--raw", "--minify", "-o", "json"]))
            .unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"]["as"] = json!(SA);
    }
    let path = dir.join("service-account.kubeconfig");
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

fn can_i(world: &World, args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i", "--as", SA];
    all.extend(args);
    let out = world.kubectl(User::Admin, &all);
    match out.stdout.trim() {
        "yes" => true,
        "no" => false,
        other => panic!("can-i {args:?}: {other} {}", out.stderr),
    }
}

#[test]
fn the_gate_runs_with_the_deployed_rbac_and_no_more() {
    let (_turn, world) = lock();
    apply_dev(world);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(world, dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime
        .block_on(preflight_gate::cluster::client(Some(&kubeconfig)))
        .unwrap();

    // Everything the checks read, with the live loader's own requests
    // (field selectors included, which RBAC matches against resourceNames).
    let view = runtime
        .block_on(preflight_gate::cluster::live::load(&client))
        .unwrap();
    assert!(
        view.unreadable.is_empty(),
        "the ServiceAccount may not list: {:?}",
        view.unreadable
    );
    assert!(view.has("ClusterVersion"));

    // Asking for a run: create, then stamp (patch).
    use preflight_gate::preflight::{RunRequest, UpdatePreflight, live::trigger};
    let api: kube::Api<UpdatePreflight> = kube::Api::all(client.clone());
    let request = RunRequest {
        image: "quay.io/e2e/release@sha256:0d3e10ed0000000000000000000000000000000000000000000000000000beef".into(),
        version: Some("4.99.0".into()),
        existing: None,
    };
    let name = runtime.block_on(trigger(&api, &request)).unwrap();
    let again = RunRequest {
        existing: Some(name.clone()),
        ..request
    };
    runtime.block_on(trigger(&api, &again)).unwrap();
    // Writing results, then collecting the object, with the calls the
    // controller makes (a merge patch of status; a delete).
    use kube::api::{DeleteParams, Patch, PatchParams};
    let status = Patch::Merge(json!({"status": {"phase": "Pending"}}));
    runtime
        .block_on(api.patch_status(&name, &PatchParams::default(), &status))
        .unwrap();
    runtime
        .block_on(api.delete(&name, &DeleteParams::default()))
        .unwrap();

    // The rest of what the gate does, as the authorizer answers it.
    for allowed in [
        &["create", "subjectaccessreviews.authorization.k8s.io"][..],
        &["create", "events.events.k8s.io", "-n", "default"],
        &["patch", "events.events.k8s.io", "-n", "default"],
        &[
            "create",
            "leases.coordination.k8s.io",
            "-n",
            "preflight-gate",
        ],
        &[
            "patch",
            "leases.coordination.k8s.io/preflight-gate-controller",
            "-n",
            "preflight-gate",
        ],
        &[
            "get",
            "leases.coordination.k8s.io/preflight-gate-controller",
            "-n",
            "preflight-gate",
        ],
        &["watch", "updatepreflights.preflight.dev"],
        &["watch", "clusterversions.config.openshift.io"],
        &["get", "clusterversions.config.openshift.io/version"],
    ] {
        assert!(can_i(world, allowed), "may not {allowed:?}");
    }
    for refused in [
        // Never its own override, never a write of what it judges.
        &["override", "updatepreflights.preflight.dev"][..],
        &["update", "clusterversions.config.openshift.io"],
        &["patch", "clusterversions.config.openshift.io"],
        &["delete", "validatingwebhookconfigurations"],
        // Secrets only as a list, never one by name nor a write.
        &["get", "secrets", "-n", "kube-system"],
        &["create", "secrets", "-n", "preflight-gate"],
        // ConfigMaps only the two OpenShift names.
        &["list", "configmaps", "-n", "openshift-config"],
        &["list", "configmaps", "-n", "kube-system"],
        // Another component's Lease.
        &[
            "patch",
            "leases.coordination.k8s.io/kube-controller-manager",
            "-n",
            "kube-system",
        ],
        &[
            "patch",
            "leases.coordination.k8s.io/other",
            "-n",
            "preflight-gate",
        ],
        &["create", "events.events.k8s.io", "-n", "kube-system"],
        // Pods only where check Jobs and extraction pods run
        // (preflight-check-rbac.yaml), never elsewhere.
        &["create", "pods", "-n", "kube-system"],
    ] {
        assert!(!can_i(world, refused), "may {refused:?}");
    }
}
