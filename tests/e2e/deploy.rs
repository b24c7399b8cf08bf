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

use crate::access::{self, Account};
use crate::cluster::{User, World, lock, merge_patch_args};
use crate::support::poll;

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
                for webhook in o["webhooks"].as_array_mut().unwrap() {
                    let client = &mut webhook["clientConfig"];
                    let url = client["url"].as_str().unwrap();
                    let path = url
                        .strip_prefix("https://127.0.0.1:8443")
                        .unwrap_or_else(|| panic!("the dev overlay calls 127.0.0.1:8443: {url}"));
                    let url = format!("{}{path}", world.gate_base());
                    *client = json!({"url": url, "caBundle": world.ca_bundle});
                }
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
    openshift_priority_classes(world);
    // A management cluster's namespaces of HostedClusters and of the
    // HyperShift operator, where the hypershift overlay grants its reads.
    for namespace in ["clusters", "hypershift"] {
        let _ = world.kubectl(User::Admin, &["create", "namespace", namespace]);
    }
    let dir = tempfile::tempdir().unwrap();
    for overlay in ["openshift", "hypershift", "fleet-member", "kubernetes"] {
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

/// What the OLM bundle leaves to the administrator (bundle/after-install.yaml,
/// generated by tests/it/bundle.rs) is accepted by a real API server as
/// written: a server-side dry run of `oc apply -f`, each object created or,
/// where it exists already, replaced whole.
#[test]
fn the_bundles_after_install_file_passes_a_server_side_dry_run() {
    let (_turn, world) = lock();
    apply_dev(world);
    let file = format!("{ROOT}/bundle/after-install.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let objects: Vec<Value> = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect();
    assert!(objects.len() >= 10, "{}", objects.len());
    let dir = tempfile::tempdir().unwrap();
    let all = write_list(
        dir.path(),
        "after-install.json",
        &objects.iter().collect::<Vec<_>>(),
    );
    let existing = world.admin(&["get", "-f", &all, "--ignore-not-found", "-o", "json"]);
    let existing: Value = serde_json::from_str(&existing).unwrap();
    let exists = |o: &Value| {
        existing["items"].as_array().unwrap().iter().any(|e| {
            e["kind"] == o["kind"]
                && e["metadata"]["name"] == o["metadata"]["name"]
                && e["metadata"]["namespace"] == o["metadata"]["namespace"]
        })
    };
    let (replace, create): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| exists(o));
    for (verb, items) in [("create", &create), ("replace", &replace)] {
        if items.is_empty() {
            continue;
        }
        let file = write_list(dir.path(), &format!("after-install-{verb}.json"), items);
        let out = world.kubectl(User::Admin, &[verb, "--dry-run=server", "-f", &file]);
        assert!(out.ok, "{verb} --dry-run=server failed:\n{}", out.stderr);
        let accepted = out
            .stdout
            .lines()
            .filter(|l| l.contains("(server dry run)"));
        assert_eq!(accepted.count(), items.len(), "{}", out.stdout);
    }
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
    world.wait_for_webhook();
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
        .block_on(preflight_gate::cluster::live::load(
            &client,
            preflight_gate::cluster::live::Reads::ALL,
        ))
        .unwrap();
    assert!(
        view.unreadable.is_empty(),
        "the ServiceAccount may not list: {:?}",
        view.unreadable
    );
    assert!(view.has(&preflight_gate::view::kinds::CLUSTER_VERSION));

    // Asking for a run: create, then stamp (patch).
    use preflight_gate::model::UpdatePreflight;
    use preflight_gate::preflight::live::RunRequest;
    use preflight_gate::preflight::live::trigger;
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
        // The key it signs results with (docs/security.md, 3d): read, and
        // filled once, in the Secret the install makes.
        &[
            "get",
            "secrets/preflight-gate-result-key",
            "-n",
            "preflight-gate",
        ],
        &[
            "patch",
            "secrets/preflight-gate-result-key",
            "-n",
            "preflight-gate",
        ],
    ] {
        assert!(can_i(world, allowed), "may not {allowed:?}");
    }
    for refused in [
        // Never its own override, never a write of what it judges.
        &["override", "updatepreflights.preflight.dev"][..],
        &["update", "clusterversions.config.openshift.io"],
        &["patch", "clusterversions.config.openshift.io"],
        &["delete", "validatingwebhookconfigurations"],
        // Secrets only as a list, never one by name nor a write, but for
        // its result key in its own namespace.
        &["get", "secrets", "-n", "kube-system"],
        &["get", "secrets/other", "-n", "preflight-gate"],
        &["patch", "secrets/other", "-n", "preflight-gate"],
        &["create", "secrets", "-n", "kube-system"],
        // Nor does it make one, not even its key's (L5).
        &["create", "secrets", "-n", "preflight-gate"],
        &[
            "update",
            "secrets/preflight-gate-result-key",
            "-n",
            "preflight-gate",
        ],
        &[
            "delete",
            "secrets/preflight-gate-result-key",
            "-n",
            "preflight-gate",
        ],
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
        &["create", "pods", "-n", "preflight-gate"],
        &["create", "jobs.batch", "-n", "preflight-gate"],
    ] {
        assert!(!can_i(world, refused), "may {refused:?}");
    }
}

/// A pod as the checks' namespace sees one: Pod Security `restricted`
/// kept, running `image` as `account` (none when empty), with the token
/// setting `token` (unsaid when None).
fn checks_pod(name: &str, account: &str, token: Option<bool>, image: &str) -> Value {
    let mut spec = json!({
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "check", "image": image,
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]});
    if !account.is_empty() {
        spec["serviceAccountName"] = json!(account);
    }
    if let Some(token) = token {
        spec["automountServiceAccountToken"] = json!(token);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": crate::cluster::JOBS_NAMESPACE},
        "spec": spec})
}

/// deploy/base's admission policy of the checks' namespace, on the real API
/// server: a pod (or Job) breaking each of its rules is refused with the
/// rule's reason, whoever creates it; pods keeping them all, as the gate
/// makes them, are admitted; another namespace is left alone.
#[test]
fn the_checks_namespace_admits_only_the_check_account_an_asked_token_and_images_by_digest() {
    let (_turn, world) = lock();
    apply_dev(world);
    let ns = crate::cluster::JOBS_NAMESPACE;
    // The accounts the pods name (no controller here makes `default`).
    for account in ["default", "e2e-other"] {
        world.apply_json(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": ns}}));
    }
    let digest = format!("registry.example/check@sha256:{}", "5e".repeat(32));
    let tag = "registry.example/check:1";
    let dir = tempfile::tempdir().unwrap();
    let create = |object: &Value| {
        let file = write_list(dir.path(), "object.json", &[object]);
        world.kubectl(User::Admin, &["create", "--dry-run=server", "-f", &file])
    };
    // The policy holds once the API server has loaded it and its binding.
    poll(
        "the policy to hold",
        std::time::Duration::from_secs(30),
        || {
            let out = create(&checks_pod(
                "e2e-by-tag",
                "preflight-check",
                Some(false),
                tag,
            ));
            if !out.ok && out.stderr.contains("preflight-gate-checks") {
                Ok(())
            } else {
                Err(format!("{} {}", out.stdout, out.stderr))
            }
        },
    );

    let token_volume = |pod: &mut Value, token_source: Value| {
        pod["spec"]["volumes"] = json!([{"name": "token", "projected": {"sources": [{"serviceAccountToken": token_source}]}}]);
        pod["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "token", "mountPath": "/var/run/token"}]);
    };
    let mut projected = checks_pod("e2e-projected", "preflight-check", Some(false), &digest);
    token_volume(&mut projected, json!({"path": "token"}));
    let mut audience = checks_pod("e2e-audience", "preflight-check", Some(true), &digest);
    token_volume(
        &mut audience,
        json!({"path": "token", "audience": "vault.example"}),
    );
    let mut init_by_tag = checks_pod("e2e-init-by-tag", "preflight-check", Some(false), &digest);
    init_by_tag["spec"]["initContainers"] = json!([{"name": "init", "image": tag,
        "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]);
    let job = |name: &str, image: &str| {
        let pod = checks_pod(name, "preflight-check", Some(true), image);
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"backoffLimit": 0, "template": {"spec": pod["spec"]}}})
    };
    for (what, object, reason) in [
        (
            "another account",
            checks_pod("e2e-other", "e2e-other", Some(false), &digest),
            "runs as e2e-other: pods in preflight-gate-checks run as preflight-check or as no account",
        ),
        (
            "no account, with its token",
            checks_pod("e2e-default-token", "", None, &digest),
            "mounts a token without the check account",
        ),
        (
            "the default account, asking for its token",
            checks_pod("e2e-default-asks", "default", Some(true), &digest),
            "mounts a token without the check account",
        ),
        (
            "a projected token it did not ask for",
            projected,
            "mounts a token through a projected volume it did not ask for",
        ),
        (
            "a projected token for another audience",
            audience,
            "mounts a token through a projected volume it did not ask for",
        ),
        (
            "an image by tag",
            checks_pod("e2e-by-tag", "preflight-check", Some(true), tag),
            "runs registry.example/check:1, not named by digest",
        ),
        (
            "an init container by tag",
            init_by_tag,
            "runs registry.example/check:1, not named by digest",
        ),
        (
            "a Job whose image is a tag",
            job("e2e-job-by-tag", tag),
            "runs registry.example/check:1, not named by digest",
        ),
    ] {
        let out = create(&object);
        assert!(!out.ok, "{what} was admitted: {}", out.stdout);
        assert!(
            out.stderr
                .contains("ValidatingAdmissionPolicy 'preflight-gate-checks'")
                && out.stderr.contains(reason),
            "{what}: {}",
            out.stderr
        );
    }
    for (what, object) in [
        (
            "a check that asked for the API",
            checks_pod("e2e-asks", "preflight-check", Some(true), &digest),
        ),
        (
            "a check that did not",
            checks_pod("e2e-quiet", "preflight-check", Some(false), &digest),
        ),
        (
            "the check account, the token unsaid (its default is off)",
            checks_pod("e2e-unsaid", "preflight-check", None, &digest),
        ),
        (
            "no account, no token",
            checks_pod("e2e-none", "default", Some(false), &digest),
        ),
        ("a Job by digest", job("e2e-job", &digest)),
    ] {
        let out = create(&object);
        assert!(out.ok, "{what} was refused: {}", out.stderr);
    }
    // The policy is bound to the checks' namespace alone.
    let mut elsewhere = checks_pod("e2e-elsewhere", "", None, tag);
    elsewhere["metadata"]["namespace"] = json!("default");
    let _ = world.kubectl(
        User::Admin,
        &["-n", "default", "create", "serviceaccount", "default"],
    );
    let out = create(&elsewhere);
    assert!(out.ok, "a pod elsewhere was refused: {}", out.stderr);
}

/// The key the gate signs its results with lives in a Secret the install
/// makes empty (deploy/base/result-key.yaml); the gate's own code, run as
/// its account with the Role the install grants, fills it: two replicas
/// that start together get one key, a later one reads it, and a Secret
/// that is not there is an error saying so, never made. Shown in a
/// namespace of its own, with the install's Secret and Role moved there,
/// so that the shared gate's key is left alone.
#[test]
fn replicas_fill_the_installs_empty_key_secret_with_one_key_and_make_none() {
    use preflight_gate::preflight::result_key::{KeyError, load_or_fill};
    let (_turn, world) = lock();
    // Kept between runs: no namespace controller runs here to delete one.
    let ns = "e2e-key";
    let _ = world.kubectl(User::Admin, &["create", "namespace", ns]);
    let _ = world.kubectl(
        User::Admin,
        &[
            "-n",
            ns,
            "delete",
            "secret",
            "preflight-gate-result-key",
            "--ignore-not-found",
        ],
    );
    let objects = rendered("dev");
    let moved = |kind: &str| {
        let mut o = objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == "preflight-gate-result-key")
            .unwrap_or_else(|| panic!("the install has no {kind} preflight-gate-result-key"))
            .clone();
        assert_eq!(o["metadata"]["namespace"], "preflight-gate");
        o["metadata"]["namespace"] = json!(ns);
        o
    };
    let secret = moved("Secret");
    assert!(
        secret.get("data").is_none(),
        "the install ships a key: {secret}"
    );
    for kind in ["Role", "RoleBinding"] {
        world.apply_json(&moved(kind));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(world, dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime
        .block_on(preflight_gate::cluster::client(Some(&kubeconfig)))
        .unwrap();

    // No Secret: an error that says what makes it, and none is made.
    let absent = runtime.block_on(load_or_fill(&client, ns));
    assert!(matches!(absent, Err(KeyError::Absent { .. })), "{absent:?}");
    let text = preflight_gate::model::text::chain(&absent.unwrap_err());
    assert!(text.contains("the install makes it, empty"), "{text}");
    let out = world.kubectl(
        User::Admin,
        &["-n", ns, "get", "secret", "preflight-gate-result-key"],
    );
    assert!(!out.ok, "the gate made its Secret: {}", out.stdout);

    // The install's empty Secret: two replicas at once, one key.
    world.apply_json(&secret);
    let (a, b) = runtime
        .block_on(async { tokio::join!(load_or_fill(&client, ns), load_or_fill(&client, ns)) });
    let (a, b) = (a.unwrap(), b.unwrap());
    let upf: preflight_gate::model::UpdatePreflight = serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": "release-sha256-e2e"},
        "spec": {"image": "quay.io/e2e/release@sha256:0d3e10ed0000000000000000000000000000000000000000000000000000beef"}}))
    .unwrap();
    assert_eq!(a.sign(&upf), b.sign(&upf), "two replicas, two keys");
    let later = runtime.block_on(load_or_fill(&client, ns)).unwrap();
    assert_eq!(later.sign(&upf), a.sign(&upf));
    let stored: Value = serde_json::from_str(&world.admin(&[
        "-n",
        ns,
        "get",
        "secret",
        "preflight-gate-result-key",
        "-o",
        "json",
    ]))
    .unwrap();
    let key = stored["data"]["key"].as_str().unwrap();
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    assert_eq!(bytes.len(), 32);
    let from_stored = preflight_gate::model::vouch::ResultKey::new(&bytes).unwrap();
    assert_eq!(from_stored.sign(&upf), a.sign(&upf));
}

/// The gate's account may make pods only in the namespace of the check
/// Jobs, never in its own, which holds its serving Secret (and, on plain
/// Kubernetes, the client CA's key): the API server's authorizer says so to
/// SubjectAccessReviews for the account and its groups, as it would judge
/// the account's own requests.
#[test]
fn the_gates_account_makes_pods_only_in_the_checks_namespace_never_its_own() {
    let (_turn, world) = lock();
    apply_dev(world);
    let checks = crate::cluster::JOBS_NAMESPACE;
    let gate = Account {
        namespace: "preflight-gate",
        name: "preflight-gate",
    };
    let sar = |verb: &str, group: &str, resource: &str, namespace: &str| {
        let review = gate.review(verb, group, resource, namespace, "");
        access::allowed(&review, world.dir(), |file| {
            world.admin(&["create", "-f", file, "-o", "json"])
        })
    };
    for (verb, group, resource) in [
        ("create", "", "pods"),
        ("delete", "", "pods"),
        ("get", "", "pods/log"),
        ("create", "batch", "jobs"),
        ("delete", "batch", "jobs"),
    ] {
        assert!(
            sar(verb, group, resource, checks),
            "the gate may not {verb} {resource} in {checks}"
        );
        assert!(
            !sar(verb, group, resource, "preflight-gate"),
            "the gate may {verb} {resource} in its own namespace"
        );
    }
    // Nor any workload that would make pods, in either namespace.
    for (group, resource) in access::MAKE_PODS {
        for namespace in ["preflight-gate", checks] {
            assert!(
                !sar("create", group, resource, namespace),
                "the gate may create {resource} in {namespace}"
            );
        }
    }
    // The check Jobs' account lives there, and the Namespace is restricted.
    let labels = world.admin(&[
        "get",
        "namespace",
        checks,
        "-o",
        "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
    ]);
    assert_eq!(labels, "restricted");
    world.admin(&["get", "serviceaccount", "-n", checks, "preflight-check"]);
}

/// PriorityClasses OpenShift has and the control plane lacks: the openshift
/// overlay's pod asks for this one (its value is OpenShift's).
pub(crate) fn openshift_priority_classes(world: &World) {
    world.apply_json(
        &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "openshift-user-critical"}, "value": 1000000000,
        "description": "Stand-in for OpenShift's class for user-critical add-ons."}),
    );
}

/// A user bound to the shipped `preflight-gate-updater` ClusterRole, and
/// nothing else.
const UPDATER: &str = "carol";

fn bind_updater(world: &World) {
    world.apply_json(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "e2e-carol-updater"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "preflight-gate-updater"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": UPDATER}],
    }));
}

/// Asks the authorizer, with a SubjectAccessReview, whether `user` may
/// `verb` the resource described by `attributes` (group, resource, ...).
fn subject_access_review(world: &World, user: &str, verb: &str, attributes: &Value) -> bool {
    let mut attributes = attributes.clone();
    attributes["verb"] = verb.into();
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"], "resourceAttributes": attributes},
    });
    let path = world.dir().join(format!(
        "sar-{user}-{verb}-{}.json",
        attributes["resource"].as_str().unwrap()
    ));
    std::fs::write(&path, review.to_string()).unwrap();
    let out = world.admin(&["create", "-f", path.to_str().unwrap(), "-o", "json"]);
    let answer: Value = serde_json::from_str(&out).unwrap();
    answer["status"]["allowed"] == true
}

#[test]
fn the_updater_role_may_update_and_ask_for_runs_but_not_override() {
    let (_turn, world) = lock();
    apply_dev(world);
    bind_updater(world);
    let cv = |name: &str| json!({"group": "config.openshift.io", "resource": "clusterversions", "name": name});
    let upf = json!({"group": "preflight.dev", "resource": "updatepreflights"});
    let mut upf_status = upf.clone();
    upf_status["subresource"] = "status".into();
    let operators = json!({"group": "config.openshift.io", "resource": "clusteroperators"});
    for (verb, what) in [
        ("get", cv("version")),
        ("list", cv("")),
        ("watch", cv("")),
        // How oc adm upgrade and the console set spec.desiredUpdate.
        ("patch", cv("version")),
        ("update", cv("version")),
        ("get", operators.clone()),
        ("list", operators.clone()),
        // Read results, and ask for a run (oc create -f, oc annotate).
        ("get", upf.clone()),
        ("list", upf.clone()),
        ("watch", upf.clone()),
        ("create", upf.clone()),
        ("patch", upf.clone()),
    ] {
        assert!(
            subject_access_review(world, UPDATER, verb, &what),
            "the updater may not {verb} {what}"
        );
    }
    for (verb, what) in [
        // Never the override, nor results of its own making.
        ("override", upf.clone()),
        ("patch", upf_status.clone()),
        ("update", upf_status.clone()),
        ("delete", upf.clone()),
        // Only the ClusterVersion's spec, not its status, nor other
        // cluster configuration.
        ("patch", {
            let mut s = cv("version");
            s["subresource"] = "status".into();
            s
        }),
        ("delete", cv("version")),
        ("patch", cv("other")),
        (
            "patch",
            json!({"group": "config.openshift.io", "resource": "proxies", "name": "cluster"}),
        ),
        ("patch", operators.clone()),
        // Nor the gate's own configuration.
        (
            "delete",
            json!({"group": "admissionregistration.k8s.io",
            "resource": "validatingwebhookconfigurations", "name": "preflight-gate"}),
        ),
        (
            "create",
            json!({"group": "rbac.authorization.k8s.io", "resource": "clusterrolebindings"}),
        ),
    ] {
        assert!(
            !subject_access_review(world, UPDATER, verb, &what),
            "the updater may {verb} {what}"
        );
    }

    // And the gate, which asks the same authorizer, honours no override of
    // theirs: an update to a failing target stays denied.
    let as_updater = format!("--as={UPDATER}");
    let until = format!("preflight.dev/override-until={}", crate::flows::in_hours(4));
    // An override for 4.15.3, written as `user` (with `as_whom`, if any).
    let write_override = |user: User, as_whom: Option<&str>, reason: &str, claimed_by: &str| {
        let reason = format!("preflight.dev/override-reason={reason}");
        let claimed_by = format!("preflight.dev/claimed-by={claimed_by}");
        let mut args: Vec<&str> = as_whom.into_iter().collect();
        args.extend([
            "annotate",
            "--overwrite",
            "clusterversion",
            "version",
            "preflight.dev/override=4.15.3",
            &reason,
            &until,
            &claimed_by,
        ]);
        world.kubectl(user, &args)
    };
    let annotate = write_override(User::Admin, Some(&as_updater), "an updater trying", UPDATER);
    assert!(!annotate.ok, "an updater wrote an override");
    assert!(
        annotate.stderr.contains(&format!(
            r#"Write refused: user "{UPDATER}" is not allowed the "override" verb"#
        )),
        "{}",
        annotate.stderr
    );
    // An override someone else wrote is no more the updater's to use.
    let annotate = write_override(User::Bob, None, "written by an approver", "bob");
    assert!(annotate.ok, "{}", annotate.stderr);
    let refused = world.kubectl(User::Admin, &merge_patch_args("4.15.3", &[&as_updater]));
    assert!(!refused.ok, "an updater's override was honoured");
    assert!(
        refused.stderr.contains(&format!(
            r#"Override ignored: user "{UPDATER}" is not allowed the "override" verb"#
        )),
        "{}",
        refused.stderr
    );
    // A passing target goes through: the role suffices to update, with the
    // real `oc adm upgrade` where ../shared has it.
    let allowed = match crate::oc::oc() {
        Some(oc) => {
            let out = std::process::Command::new(oc)
                .args(["--kubeconfig", world.var("ADMIN_KUBECONFIG"), &as_updater])
                .args(["adm", "upgrade", "--to", "4.14.12"])
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        None => {
            let out = world.kubectl(User::Admin, &merge_patch_args("4.14.12", &[&as_updater]));
            (out.ok, out.stderr)
        }
    };
    assert!(allowed.0, "{}", allowed.1);
    assert_eq!(
        world.cluster_version()["spec"]["desiredUpdate"]["version"],
        "4.14.12"
    );
}

/// The fenced block of `lang` that follows `marker` in the install guide.
fn guide_block(marker: &str, lang: &str) -> String {
    let guide = std::fs::read_to_string(format!("{ROOT}/docs/install.md")).unwrap();
    let at = guide.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let fence = format!("```{lang}\n");
    let start = at + guide[at..].find(&fence).unwrap() + fence.len();
    let end = start + guide[start..].find("```").unwrap();
    guide[start..end].to_owned()
}

#[test]
fn an_updater_asks_for_runs_with_the_guides_oc_commands() {
    let (_turn, world) = lock();
    apply_dev(world);
    bind_updater(world);
    // `oc` on PATH, as the updater: the real one where ../shared has it.
    let bin = tempfile::tempdir().unwrap();
    let real = match crate::oc::oc() {
        Some(oc) => oc.to_path_buf(),
        None => {
            eprintln!(
                "the real oc (../shared/tools/oc) is absent: running the guide's commands with kubectl"
            );
            std::path::PathBuf::from(world.var("KUBECTL"))
        }
    };
    let wrapper = bin.path().join("oc");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' --kubeconfig '{}' --as {UPDATER} \"$@\"\n",
            real.display(),
            world.var("ADMIN_KUBECONFIG")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let sh = |script: &str| {
        let out = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(world.dir())
            .env("PATH", &path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{script}\n{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // A target nobody asked about: the guide's UpdatePreflight, with a
    // release image of this test's.
    let image = "quay.io/e2e/release@sha256:0d3e10ed00000000000000000000000000000000000000000000000000c0ffee";
    let manifest = guide_block("<!-- run-request", "yaml")
        .replace("<the image printed above>", image)
        .replace("version: 4.15.3", "version: 4.99.1");
    assert!(manifest.contains(image), "{manifest}");
    std::fs::write(world.dir().join("upf-4.15.3.yaml"), &manifest).unwrap();
    let created = sh("oc create -f upf-4.15.3.yaml -o name");
    let name = created.trim().rsplit('/').next().unwrap().to_owned();
    assert!(name.starts_with("manual-"), "{created}");
    // The request gets its run; the release's own result, which the
    // controller asks for beside it (model::vouch), runs too, and either
    // may finish first: wait for the request by its name.
    let done = |o: &Value| {
        o["metadata"]["name"] == name.as_str()
            && ["Passed", "Failed"].contains(&o["status"]["phase"].as_str().unwrap_or(""))
    };
    let first = world.wait_for_result(image, "finished", done);
    let first_start = first["status"]["startTime"].as_str().unwrap().to_owned();

    // `oc get upf` lists it, with its phase.
    let listing = sh("oc get upf");
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("4.99.1")),
        "{listing}"
    );

    // Ask again with the guide's annotate command, a second later than
    // the first run began (requests are compared to the second).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let commands = guide_block("Ask for a fresh run of a target that has an object", "sh");
    let annotate = commands
        .split("\n")
        .skip_while(|l| !l.starts_with("oc annotate upf"))
        .take_while(|l| !l.starts_with("oc get"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("<name>", &name);
    assert!(
        annotate.contains("preflight.dev/requested-at"),
        "{annotate}"
    );
    sh(&annotate);
    let again = world.wait_for_result(image, "run again", |o| {
        done(o)
            && o["status"]["startTime"]
                .as_str()
                .is_some_and(|s| s > first_start.as_str())
    });
    assert_eq!(again["metadata"]["name"], name.as_str());
    let own = preflight_gate::model::ReleaseKey::from_image(image).object_name();
    world.admin(&["delete", "updatepreflight", &name]);
    world.admin(&["delete", "updatepreflight", &own, "--ignore-not-found"]);
}

/// Uninstalling leaves nothing of the gate's behind but its audit trail:
/// the guide's clean-up block, run word for word (with `oc` the admin's
/// kubectl), removes the bindings made to the gate's roles as the guide
/// shows and every claim on the ClusterVersion, and leaves the gate's
/// Events to expire.
#[test]
fn the_guides_uninstall_leaves_no_binding_or_claim_behind_and_keeps_the_events() {
    let (_turn, world) = lock();
    for (name, role) in [
        (
            "preflight-gate-override-platform-admins",
            "preflight-gate-override",
        ),
        ("e2e-updaters", "preflight-gate-updater"),
        ("e2e-window-planners", "preflight-gate-window"),
    ] {
        let _ = world.kubectl(User::Admin, &["delete", "clusterrolebinding", name]);
        world.admin(&[
            "create",
            "clusterrolebinding",
            name,
            &format!("--clusterrole={role}"),
            "--group=platform-admins",
        ]);
    }
    world.admin(&[
        "annotate",
        "--overwrite",
        "clusterversion",
        "version",
        "preflight.dev/override-reason=left over",
        "preflight.dev/claimed-by=admin",
    ]);
    // An Event of the gate's, as its recorder writes them.
    world.admin(&[
        "create",
        "-f",
        write_list(
            world.dir(),
            "event",
            &[&json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"generateName": "e2e-uninstall-", "namespace": "default"},
                "eventTime": "2026-12-02T08:00:00.000000Z",
                "reportingController": "preflight-gate", "reportingInstance": "e2e",
                "action": "Run", "reason": "PreflightPassed", "type": "Normal",
                "note": "left over",
                "regarding": {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "name": "version"},
            })],
        )
        .as_str(),
    ]);

    let block = guide_block("Then what the manifests did not make", "sh");
    let bin = world.dir().join("uninstall-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let oc = bin.join("oc");
    std::fs::write(
        &oc,
        format!(
            "#!/bin/sh\nexec {:?} --kubeconfig {:?} \"$@\"\n",
            world.var("KUBECTL"),
            world.var("ADMIN_KUBECONFIG")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&oc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the guide's clean-up failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bindings: Value =
        serde_json::from_str(&world.admin(&["get", "clusterrolebindings", "-o", "json"])).unwrap();
    let left: Vec<&Value> = bindings["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| {
            [
                "preflight-gate-override",
                "preflight-gate-window",
                "preflight-gate-updater",
            ]
            .contains(&b["roleRef"]["name"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(left.is_empty(), "bindings left: {left:?}");
    // The gate's Events are the audit trail: the guide exports them and
    // deletes none.
    let events = world.admin(&[
        "get",
        "events",
        "--all-namespaces",
        "--field-selector",
        "reportingComponent=preflight-gate",
        "-o",
        "name",
    ]);
    assert!(events.contains("e2e-uninstall-"), "events: {events}");
    let annotations = &world.cluster_version()["metadata"]["annotations"];
    let claims: Vec<&String> = annotations
        .as_object()
        .into_iter()
        .flat_map(|a| a.keys())
        .filter(|k| k.starts_with("preflight.dev/"))
        .collect();
    assert!(claims.is_empty(), "claims left: {claims:?}");
}
