//! deploy/: every overlay renders with `kubectl kustomize`, the rendering
//! is checked in under deploy/rendered/ (run with `PREFLIGHT_GATE_BLESS=1`
//! to rewrite it), and the rendered objects keep the promises an
//! administrator reviews: the webhook configuration of DESIGN.md, a
//! Deployment that survives drains and its own updates, certificates wired
//! end to end, and RBAC that grants what src/cluster/live.rs lists.
//! tests/e2e/deploy.rs puts the same objects before a real API server.
//! The hub's overlay, fleet, is held here to the Open Cluster Management
//! CRDs of tests/data/fleet-crds, and to carrying exactly the fleet-member
//! rendering.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use preflight_gate::view::kinds;
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The overlays of a cluster the gate runs on. The hub's ([`HUB_OVERLAYS`])
/// carry one of them to the clusters it manages.
pub const OVERLAYS: [&str; 6] = [
    "openshift",
    "kubernetes",
    "hypershift",
    "fleet-member",
    "dev",
    "node",
];
/// The overlays of an Open Cluster Management hub: no gate runs there; the
/// fleet overlay's ManifestWorkReplicaSet puts the fleet-member overlay's
/// objects on every OpenShift cluster its Placement selects.
pub const HUB_OVERLAYS: [&str; 1] = ["fleet"];
const SA_NAMESPACE: &str = "preflight-gate";
/// Where the check Jobs and the extraction pod run (`--jobs-namespace`).
const CHECKS_NAMESPACE: &str = "preflight-gate-checks";
const SA_NAME: &str = "preflight-gate";

/// The kubectl that tests/control-plane/ builds (kustomize is built in).
pub fn kubectl() -> &'static str {
    static KUBECTL: OnceLock<String> = OnceLock::new();
    KUBECTL.get_or_init(|| {
        let out = Command::new(format!("{ROOT}/tests/control-plane/build"))
            .arg("-q")
            .output()
            .expect("tests/control-plane/build runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "tests/control-plane/build failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("KUBECTL_BIN="))
            .expect("build prints KUBECTL_BIN")
            .to_owned()
    })
}

/// The overlays an administrator installs: they deploy no image until one
/// is set (deploy/components/image).
pub const IMAGE_REQUIRED: [&str; 5] = [
    "openshift",
    "kubernetes",
    "hypershift",
    "fleet-member",
    "fleet",
];

/// The overlays for OpenShift: `hypershift` is `openshift` on a management
/// cluster of hosted control planes, with the hosted webhooks and reads;
/// `fleet-member` is `openshift` on a cluster an Open Cluster Management
/// hub manages, with --cluster-claims and its grant.
const ON_OPENSHIFT: [&str; 3] = ["openshift", "hypershift", "fleet-member"];

/// The image the checked-in renderings of [`IMAGE_REQUIRED`] are made with,
/// standing for the administrator's: by digest, under a host that does not
/// resolve (`.invalid`), so that it can never be pulled or mistaken for a
/// release.
pub const TEST_IMAGE: &str = "registry.invalid/preflight-gate/preflight-gate@sha256:7e57000000000000000000000000000000000000000000000000000000000000";

fn header(overlay: &str) -> String {
    let image = if IMAGE_REQUIRED.contains(&overlay) {
        format!("# The image is set to {TEST_IMAGE}, standing for yours (docs/install.md).\n")
    } else {
        String::new()
    };
    format!(
        "# Rendered from deploy/overlays/{overlay} by `kubectl kustomize`; do not edit.\n\
         {image}# Regenerate: PREFLIGHT_GATE_BLESS=1 cargo test --test it deploy\n"
    )
}

/// An overlay of an administrator's own over `overlay`, in the target
/// directory (kustomize takes relative paths only), that sets `image` as
/// docs/install.md says; returns its directory.
pub fn with_image(overlay: &str, image: &str) -> std::path::PathBuf {
    with_image_in(&format!("image-overlay-{overlay}"), overlay, image)
}

/// [`with_image`] in `target/<name>`: a test that renders an overlay
/// another test renders too writes its own directory.
fn with_image_in(name: &str, overlay: &str, image: &str) -> std::path::PathBuf {
    let dir = Path::new(ROOT).join("target").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy/overlays/{overlay}\n\
             patches:\n  - patch: |-\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: preflight-gate-image\n        namespace: preflight-gate\n      data:\n        image: {image}\n"
        ),
    )
    .unwrap();
    dir
}

/// `kubectl kustomize deploy/overlays/<overlay>`, with the header; the
/// overlays that need an image, with [`TEST_IMAGE`] set.
fn render(overlay: &str) -> String {
    let dir = if IMAGE_REQUIRED.contains(&overlay) {
        with_image(overlay, TEST_IMAGE)
    } else {
        Path::new(ROOT).join(format!("deploy/overlays/{overlay}"))
    };
    format!("{}{}", header(overlay), kustomize(&dir, overlay))
}

/// `kubectl kustomize dir`, which must render (`overlay` names it).
fn kustomize(dir: &Path, overlay: &str) -> String {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "deploy/overlays/{overlay} does not render: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The objects of a rendering (kustomize separates them with `---` lines).
pub fn objects(yaml: &str) -> Vec<Value> {
    yaml.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("rendered YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

/// The checked-in rendering of `overlay`.
pub fn rendered(overlay: &str) -> Vec<Value> {
    let path = format!("{ROOT}/deploy/rendered/{overlay}.yaml");
    objects(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn one<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(objects, kind, name).unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The Deployments a rendering deploys: its own, and on a hub those its
/// ManifestWorkReplicaSets carry to the managed clusters.
pub fn deployments(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .flat_map(|o| match o["kind"].as_str() {
            Some("ManifestWorkReplicaSet") => carried(o).iter().collect(),
            _ => vec![o],
        })
        .filter(|o| o["kind"] == "Deployment")
        .collect()
}

/// The manifests a ManifestWorkReplicaSet puts on each cluster.
fn carried(set: &Value) -> &[Value] {
    set["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn every_overlay_renders_as_checked_in() {
    let rendered: Vec<(String, String)> = OVERLAYS
        .iter()
        .map(|overlay| (format!("deploy/rendered/{overlay}.yaml"), render(overlay)))
        .collect();
    crate::golden::files(
        rendered
            .iter()
            .map(|(path, text)| (path.as_str(), text.as_str())),
        "deploy",
    );
}

/// The hub's overlay carries the fleet-member rendering in its
/// ManifestWorkReplicaSet (deploy/overlays/fleet/manifests.yaml, generated
/// here from deploy/overlays/fleet-member, never edited), and renders as
/// checked in. Blessing writes manifests.yaml before rendering the overlay.
#[test]
fn the_fleet_overlay_renders_as_checked_in() {
    let member = kustomize(
        &with_image_in("image-overlay-fleet-carried", "fleet-member", TEST_IMAGE),
        "fleet-member",
    );
    crate::golden::file(
        "deploy/overlays/fleet/manifests.yaml",
        &fleet_manifests(&member),
        "deploy",
    );
    for overlay in HUB_OVERLAYS {
        crate::golden::file(
            &format!("deploy/rendered/{overlay}.yaml"),
            &render(overlay),
            "deploy",
        );
    }
}

/// The image var of deploy/components/image, which the fleet overlay
/// substitutes in the Deployment it carries (deploy/overlays/fleet/varreference.yaml).
const IMAGE_VAR: &str = "$(SET_data.image_OF_ConfigMap_preflight-gate-image)";

/// deploy/overlays/fleet/manifests.yaml: a JSON patch (RFC 6902, applied
/// verbatim, unlike a merge patch, which would drop a manifest's nulls)
/// that gives the ManifestWorkReplicaSet every object of `member`, the
/// fleet-member rendering made with [`TEST_IMAGE`], with the image left to
/// the var, and for each a manifestConfig that applies it server-side.
/// The objects are kustomize's YAML as it is, indented.
fn fleet_manifests(member: &str) -> String {
    assert_eq!(member.matches(TEST_IMAGE).count(), 1, "the image, once");
    let member = member.replace(TEST_IMAGE, IMAGE_VAR);
    let mut out = String::from(
        "# Generated by tests/it/deploy.rs from deploy/overlays/fleet-member; do not edit.\n\
         # Regenerate: PREFLIGHT_GATE_BLESS=1 cargo test --test it deploy\n\
         #\n\
         # Every object of the fleet-member overlay, the image left to your overlay\n\
         # (deploy/components/image), and for each a manifestConfig that applies it\n\
         # with server-side apply: the work agent then owns the fields it sets and\n\
         # no others, so it leaves alone what others add on the cluster, the\n\
         # caBundle that service-ca injects into the webhook configuration and the\n\
         # key the gate fills into its Secret preflight-gate-result-key, where an\n\
         # update (the default) would write the manifest back over them. Each\n\
         # manifestConfig names its object in full (group, resource, namespace,\n\
         # name): the CRD's resourceIdentifier requires name and resource, and\n\
         # documents no wildcard. Not forced: a field someone else set to another\n\
         # value shows as ApplyConflict in the ManifestWork's status rather than\n\
         # being taken over.\n\
         - op: add\n  path: /spec/manifestWorkTemplate/workload/manifests\n  value:\n",
    );
    for doc in member.split("\n---\n") {
        for (i, line) in doc.trim_end_matches('\n').lines().enumerate() {
            match (i, line.is_empty()) {
                (_, true) => out.push('\n'),
                (0, false) => out.push_str(&format!("    - {line}\n")),
                _ => out.push_str(&format!("      {line}\n")),
            }
        }
    }
    out.push_str("- op: add\n  path: /spec/manifestWorkTemplate/manifestConfigs\n  value:\n");
    for o in objects(&member) {
        let (group, resource, namespace, name) = identifier(&o);
        let namespace = namespace.map_or(String::new(), |n| format!(", namespace: {n}"));
        out.push_str(&format!(
            "    - resourceIdentifier: {{group: \"{group}\", resource: {resource}{namespace}, name: {name}}}\n      \
             updateStrategy: {{type: ServerSideApply}}\n"
        ));
    }
    out
}

/// What a manifestConfig's resourceIdentifier names an object by: its
/// API group, resource, namespace (None: cluster-scoped) and name.
fn identifier(o: &Value) -> (String, String, Option<String>, String) {
    let group = o["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit_once('/')
        .map_or("", |(g, _)| g);
    let kind = o["kind"].as_str().unwrap();
    // The resources of the kinds the overlays render; a new kind is added
    // here, so that no resource name is guessed.
    let resource = match kind {
        "Namespace" => "namespaces",
        "ServiceAccount" => "serviceaccounts",
        "ConfigMap" => "configmaps",
        "Secret" => "secrets",
        "Service" => "services",
        "CustomResourceDefinition" => "customresourcedefinitions",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Deployment" => "deployments",
        "PodDisruptionBudget" => "poddisruptionbudgets",
        "NetworkPolicy" => "networkpolicies",
        "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding" => "validatingadmissionpolicybindings",
        "PrometheusRule" => "prometheusrules",
        "ServiceMonitor" => "servicemonitors",
        other => panic!("no resource known for kind {other}: add it to identifier()"),
    };
    (
        group.to_owned(),
        resource.to_owned(),
        o["metadata"]["namespace"].as_str().map(str::to_owned),
        o["metadata"]["name"].as_str().unwrap().to_owned(),
    )
}

/// No overlay an administrator installs deploys an image they did not
/// choose: rendered as it is, each fails, and says what to set; with the
/// image set, that image is deployed, by digest, and nothing else changes.
#[test]
fn the_overlays_deploy_no_image_until_the_administrator_sets_one() {
    for overlay in IMAGE_REQUIRED {
        let out = Command::new(kubectl())
            .arg("kustomize")
            .arg(format!("{ROOT}/deploy/overlays/{overlay}"))
            .output()
            .expect("kubectl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "deploy/overlays/{overlay} renders with no image chosen"
        );
        for says in [
            "SET_data.image_OF_ConfigMap_preflight-gate-image",
            "not found",
        ] {
            assert!(stderr.contains(says), "{overlay}: {stderr}");
        }
        let objects = rendered(overlay);
        let images: Vec<&str> = deployments(&objects)
            .into_iter()
            .flat_map(|d| {
                d["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .unwrap()
            })
            .map(|c| c["image"].as_str().unwrap())
            .collect();
        assert_eq!(images, [TEST_IMAGE], "{overlay}");
        // The ConfigMap that carries the choice is never rendered.
        assert!(find(&objects, "ConfigMap", "preflight-gate-image").is_none());
    }
}

#[test]
fn the_webhook_configuration_is_as_the_design_says_in_every_overlay() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let configs: Vec<_> = objects
            .iter()
            .filter(|o| o["kind"] == "ValidatingWebhookConfiguration")
            .collect();
        assert_eq!(configs.len(), 1, "{overlay}");
        let webhooks = configs[0]["webhooks"].as_array().unwrap();
        // The hosted control planes' two come after these two, in the
        // hypershift overlay alone (hosted_updates_reach_the_gate_…).
        let expected = if overlay == "hypershift" { 4 } else { 2 };
        assert_eq!(webhooks.len(), expected, "{overlay}");
        run_requests_are_limited_never_gated(overlay, &webhooks[1]);
        let w = &webhooks[0];
        assert_eq!(w["name"], "clusterversions.preflight.dev", "{overlay}");
        assert_eq!(w["failurePolicy"], "Fail", "{overlay}");
        assert_eq!(w["sideEffects"], "NoneOnDryRun", "{overlay}");
        let timeout = w["timeoutSeconds"].as_u64().expect("timeoutSeconds set");
        assert!((1..=5).contains(&timeout), "{overlay}: {timeout}");
        assert_eq!(strings(&w["admissionReviewVersions"]), ["v1"]);
        let rules = w["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 1, "{overlay}: one rule only");
        let rule = &rules[0];
        assert_eq!(strings(&rule["apiGroups"]), ["config.openshift.io"]);
        assert_eq!(strings(&rule["apiVersions"]), ["v1"]);
        // Never clusterversions/status, never a wildcard.
        assert_eq!(strings(&rule["resources"]), ["clusterversions"]);
        let mut operations = strings(&rule["operations"]);
        operations.sort();
        assert_eq!(operations, ["CREATE", "UPDATE"], "{overlay}");
        let conditions = w["matchConditions"].as_array().unwrap();
        assert!(
            conditions
                .iter()
                .any(|c| c["expression"].as_str().unwrap().contains("desiredUpdate")),
            "{overlay}: a match condition on desiredUpdate"
        );
        assert!(
            conditions.iter().any(|c| c["expression"]
                .as_str()
                .unwrap()
                .contains("k.startsWith('preflight.dev/')")),
            "{overlay}: writes of preflight.dev/ claims reach the gate"
        );
        let client = &w["clientConfig"];
        assert!(
            client.get("url").is_some() != client.get("service").is_some(),
            "{overlay}: exactly one of url or service"
        );
    }
}

/// The second webhook counts run requests (L2): it fails open (a limit, not
/// a gate), sees only UpdatePreflights (never their status), and only the
/// writes that ask for a run.
fn run_requests_are_limited_never_gated(overlay: &str, w: &Value) {
    assert_eq!(w["name"], "updatepreflights.preflight.dev", "{overlay}");
    assert_eq!(w["failurePolicy"], "Ignore", "{overlay}");
    assert_eq!(w["sideEffects"], "None", "{overlay}");
    let rules = w["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{overlay}");
    assert_eq!(strings(&rules[0]["apiGroups"]), ["preflight.dev"]);
    assert_eq!(strings(&rules[0]["resources"]), ["updatepreflights"]);
    let conditions = w["matchConditions"].as_array().unwrap();
    let expression = conditions[0]["expression"].as_str().unwrap();
    for asks in [
        "request.operation == 'CREATE'",
        "object.spec != oldObject.spec",
        "'preflight.dev/requested-at'",
    ] {
        assert!(expression.contains(asks), "{overlay}: {expression}");
    }
    let client = &w["clientConfig"];
    let path = client["service"]["path"]
        .as_str()
        .or_else(|| {
            client["url"]
                .as_str()
                .and_then(|u| u.rsplit_once("8443").map(|(_, p)| p))
        })
        .unwrap();
    assert_eq!(
        path,
        preflight_gate::server::webhook::RUN_REQUESTS_PATH,
        "{overlay}"
    );
}

/// Parses a duration the way the gate's flags do.
fn duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
}

/// Whether a selector's matchLabels all hold in `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector["matchLabels"].as_object().unwrap();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| &labels[k] == v)
}

#[test]
fn the_deployment_survives_drains_and_its_own_updates() {
    for overlay in ["openshift", "kubernetes", "hypershift", "fleet-member"] {
        let objects = rendered(overlay);
        let d = one(&objects, "Deployment", "preflight-gate");
        let spec = &d["spec"];
        assert!(spec["replicas"].as_u64().unwrap() >= 2, "{overlay}");
        let rolling = &spec["strategy"]["rollingUpdate"];
        assert_eq!(rolling["maxUnavailable"], 0, "{overlay}");
        assert!(rolling["maxSurge"].as_u64().unwrap() >= 1, "{overlay}");
        let pod = &spec["template"]["spec"];
        let labels = &spec["template"]["metadata"]["labels"];
        assert!(selects(&spec["selector"], labels), "{overlay}");
        // OpenShift's class for add-ons; plain Kubernetes has no such class.
        let priority = match overlay {
            o if ON_OPENSHIFT.contains(&o) => "openshift-user-critical",
            _ => "system-cluster-critical",
        };
        assert_eq!(pod["priorityClassName"], priority, "{overlay}");
        assert_eq!(pod["serviceAccountName"], SA_NAME);
        // Hard spreading over nodes: never both replicas of a revision on
        // one node while another can take one; cordoned and tainted nodes
        // are not counted, so a drain can always move a replica.
        let spread = pod["topologySpreadConstraints"]
            .as_array()
            .and_then(|c| {
                c.iter()
                    .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
            })
            .unwrap_or_else(|| panic!("{overlay}: no spreading over nodes"));
        assert_eq!(spread["whenUnsatisfiable"], "DoNotSchedule", "{overlay}");
        assert_eq!(spread["maxSkew"], 1, "{overlay}");
        assert_eq!(spread["nodeTaintsPolicy"], "Honor", "{overlay}");
        assert!(selects(&spread["labelSelector"], labels), "{overlay}");
        assert_eq!(
            strings(&spread["matchLabelKeys"]),
            ["pod-template-hash"],
            "{overlay}: the surge pod of a rollout is counted apart"
        );

        let pdb = one(&objects, "PodDisruptionBudget", "preflight-gate");
        assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{overlay}");
        assert!(pdb["spec"].get("minAvailable").is_none(), "{overlay}");
        assert!(selects(&pdb["spec"]["selector"], labels), "{overlay}");
        // SCC pinned on OpenShift, so a wider one granted later is not used.
        let scc = &spec["template"]["metadata"]["annotations"]["openshift.io/required-scc"];
        match overlay {
            o if ON_OPENSHIFT.contains(&o) => assert_eq!(scc, "restricted-v2"),
            _ => assert!(scc.is_null(), "{overlay}: {scc}"),
        }

        // Restricted: pod and container.
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        // OpenShift's restricted SCC assigns the user: setting one breaks it.
        assert!(pod["securityContext"].get("runAsUser").is_none());
        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        let c = &containers[0];
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{overlay}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{overlay}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{overlay}");
        assert!(sc.get("privileged").is_none_or(|p| p == false));
        for what in ["cpu", "memory"] {
            assert!(c["resources"]["requests"][what].is_string(), "{what}");
            assert!(c["resources"]["limits"][what].is_string(), "{what}");
        }

        // Probes on the admin port: liveness is the process, readiness the
        // cache and certificates.
        let admin = env(c, "PREFLIGHT_GATE_ADMIN_ADDR").expect("admin address set");
        let admin_port: u64 = admin.rsplit(':').next().unwrap().parse().unwrap();
        let port_named = |name: &str| {
            c["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .map(|p| p["containerPort"].as_u64().unwrap())
        };
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = &c[probe]["httpGet"];
            assert_eq!(get["path"], path, "{overlay} {probe}");
            let port = match &get["port"] {
                Value::String(name) => port_named(name).expect("a named port"),
                n => n.as_u64().unwrap(),
            };
            assert_eq!(port, admin_port, "{overlay} {probe} on the admin port");
        }

        // The kubelet waits long enough for the gate's own drain.
        let delay = duration(env(c, "PREFLIGHT_GATE_SHUTDOWN_DELAY").unwrap_or("3s"));
        let grace = duration(env(c, "PREFLIGHT_GATE_SHUTDOWN_GRACE").unwrap_or("20s"));
        let kubelet = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap());
        assert!(
            kubelet > delay + grace,
            "{overlay}: {kubelet:?} <= {delay:?} + {grace:?}"
        );

        // The serving certificate comes from a mounted Secret, in-cluster
        // always as files (so the root filesystem stays read-only).
        let cert = env(c, "PREFLIGHT_GATE_TLS_CERT").expect("--tls-cert set");
        let key = env(c, "PREFLIGHT_GATE_TLS_KEY").expect("--tls-key set");
        let mount = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| cert.starts_with(m["mountPath"].as_str().unwrap()))
            .expect("the certificate is on a mount");
        assert!(key.starts_with(mount["mountPath"].as_str().unwrap()));
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        let secret = volume["secret"]["secretName"].as_str().unwrap();
        // And that Secret is the one the overlay's issuer writes.
        let service = one(&objects, "Service", "preflight-gate");
        match overlay {
            o if ON_OPENSHIFT.contains(&o) => assert_eq!(
                service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
                secret
            ),
            _ => {
                let issued = objects
                    .iter()
                    .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == secret)
                    .expect("a Certificate for the serving Secret");
                assert!(
                    strings(&issued["spec"]["dnsNames"])
                        .contains(&"preflight-gate.preflight-gate.svc"),
                    "the name the API server dials"
                );
            }
        }

        // The Lease namespace and instance come from the pod itself.
        for name in ["PREFLIGHT_GATE_NAMESPACE", "PREFLIGHT_GATE_INSTANCE"] {
            let var = c["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .unwrap_or_else(|| panic!("{name}"));
            assert!(var["valueFrom"]["fieldRef"].is_object(), "{name}");
        }
    }
}

/// Single-node OpenShift: the component docs/install.md tells such a
/// cluster to add, on top of the openshift overlay, leaves one replica and
/// no PodDisruptionBudget, and changes nothing else.
#[test]
fn the_single_replica_component_leaves_one_replica_and_no_budget() {
    // kustomize takes relative paths only: the overlay of a user's own
    // repository, placed in the target directory.
    let dir = Path::new(ROOT).join("target/single-replica-overlay");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy/overlays/openshift\ncomponents:\n  - ../../deploy/components/single-replica\n\
             patches:\n  - patch: |-\n      apiVersion: v1\n      kind: ConfigMap\n      metadata:\n        name: preflight-gate-image\n        namespace: preflight-gate\n      data:\n        image: {TEST_IMAGE}\n"
        ),
    )
    .unwrap();
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let single = objects(&String::from_utf8(out.stdout).unwrap());
    let openshift = rendered("openshift");
    let kinds = |objects: &[Value]| -> Vec<(String, String)> {
        objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_owned(),
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let mut expected = kinds(&openshift);
    expected.retain(|(kind, _)| kind != "PodDisruptionBudget");
    assert_eq!(
        kinds(&single),
        expected,
        "only the PodDisruptionBudget goes"
    );
    let deployment = |objects: &[Value]| -> Value {
        objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .unwrap()
            .clone()
    };
    let mut one = deployment(&single);
    assert_eq!(one["spec"]["replicas"], 1);
    assert_eq!(
        one["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0
    );
    one["spec"]["replicas"] = 2.into();
    assert_eq!(one, deployment(&openshift), "only the replicas change");
}

#[test]
fn the_api_server_reaches_the_gate_and_trusts_its_certificate() {
    for overlay in ["openshift", "kubernetes", "hypershift", "fleet-member"] {
        let objects = rendered(overlay);
        let d = one(&objects, "Deployment", "preflight-gate");
        let labels = &d["spec"]["template"]["metadata"]["labels"];
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        let service = one(&objects, "Service", "preflight-gate");
        let config = objects
            .iter()
            .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
            .unwrap();
        let target = &config["webhooks"][0]["clientConfig"]["service"];
        assert_eq!(target["name"], service["metadata"]["name"]);
        assert_eq!(target["namespace"], service["metadata"]["namespace"]);
        assert_eq!(target["path"], "/validate/clusterversion");
        // Every webhook of the configuration calls the same Service and port.
        for w in config["webhooks"].as_array().unwrap() {
            let to = &w["clientConfig"]["service"];
            assert_eq!(
                (&to["name"], &to["namespace"], &to["port"]),
                (&target["name"], &target["namespace"], &target["port"]),
                "{overlay}: {}",
                w["name"]
            );
        }
        let selector = service["spec"]["selector"].as_object().unwrap();
        assert!(selector.iter().all(|(k, v)| &labels[k] == v));
        let port = service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["port"] == target["port"])
            .expect("the webhook's port on the Service");
        let webhook_port = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == port["targetPort"] || p["containerPort"] == port["targetPort"])
            .expect("the Service's target port on the container");
        let addr = env(container, "PREFLIGHT_GATE_WEBHOOK_ADDR").unwrap_or("0.0.0.0:8443");
        assert!(addr.ends_with(&format!(":{}", webhook_port["containerPort"])));

        let annotations = &config["metadata"]["annotations"];
        match overlay {
            o if ON_OPENSHIFT.contains(&o) => assert_eq!(
                annotations["service.beta.openshift.io/inject-cabundle"],
                "true"
            ),
            _ => {
                let from = annotations["cert-manager.io/inject-ca-from"]
                    .as_str()
                    .expect("cert-manager injects the CA");
                let (namespace, name) = from.split_once('/').unwrap();
                let certificate = one(&objects, "Certificate", name);
                assert_eq!(certificate["metadata"]["namespace"], namespace);
            }
        }
    }
    let dev = rendered("dev");
    assert!(find(&dev, "Deployment", "preflight-gate").is_none());
    let config = dev
        .iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
        .unwrap();
    assert_eq!(
        config["webhooks"][0]["clientConfig"]["url"],
        "https://127.0.0.1:8443/validate/clusterversion"
    );
}

/// What a rendering grants the gate's ServiceAccount: (namespace or None
/// for cluster-wide, rule), from every binding whose subject it is.
fn grants(objects: &[Value]) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        let ours = binding["subjects"].as_array().unwrap().iter().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == SA_NAME && s["namespace"] == SA_NAMESPACE
        });
        if !ours {
            continue;
        }
        let scope = (binding["kind"] == "RoleBinding").then(|| {
            binding["metadata"]["namespace"]
                .as_str()
                .unwrap()
                .to_owned()
        });
        let role_ref = &binding["roleRef"];
        let role = objects
            .iter()
            .find(|o| {
                o["kind"] == role_ref["kind"]
                    && o["metadata"]["name"] == role_ref["name"]
                    && (o["kind"] == "ClusterRole"
                        || o["metadata"]["namespace"].as_str() == scope.as_deref())
            })
            .unwrap_or_else(|| panic!("the role of {}", binding["metadata"]["name"]));
        for rule in role["rules"].as_array().unwrap() {
            out.push((scope.clone(), rule.clone()));
        }
    }
    out
}

/// Whether the grants allow `verb` on `group/resource` in `namespace` (None:
/// across the cluster) for a request naming `name` (None: no name).
fn allowed(
    grants: &[(Option<String>, Value)],
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> bool {
    grants.iter().any(|(scope, rule)| {
        let scope_ok = match (scope, namespace) {
            (None, _) => true,
            (Some(s), Some(n)) => s == n,
            (Some(_), None) => false,
        };
        let names = strings(&rule["resourceNames"]);
        scope_ok
            && strings(&rule["verbs"]).contains(&verb)
            && strings(&rule["apiGroups"]).contains(&group)
            && strings(&rule["resources"]).contains(&resource)
            && (names.is_empty() || name.is_some_and(|n| names.contains(&n)))
    })
}

#[test]
fn rbac_lets_the_gate_list_everything_the_checks_read() {
    for overlay in ["openshift", "hypershift", "fleet-member", "dev"] {
        let grants = grants(&rendered(overlay));
        for (kind, listing) in kinds::listings() {
            // TLS Secrets are read only where the overlay opts in
            // (listing_every_secret_is_opt_in).
            if kind.name == "Secret" && overlay != "dev" {
                continue;
            }
            // A list with metadata.name=X is authorized as a request for X.
            let name = listing.name();
            assert!(
                allowed(
                    &grants,
                    "list",
                    kind.group,
                    kind.plural,
                    listing.namespace,
                    name
                ),
                "{overlay}: the gate may not list {} ({}) {:?}",
                kind.plural,
                kind.group,
                listing.namespace
            );
        }
    }
}

/// The connection slots reserved for the API server follow its addresses,
/// the `kubernetes` Service's EndpointSlice in `default`
/// (src/cluster/api_server.rs): the gate may list and watch that one
/// object by name (a request with `metadata.name=kubernetes`), and no other
/// EndpointSlice anywhere.
#[test]
fn the_gate_watches_only_the_api_servers_own_endpoints() {
    for overlay in OVERLAYS {
        let grants = grants(&rendered(overlay));
        let may = |verb, namespace, name| {
            allowed(
                &grants,
                verb,
                "discovery.k8s.io",
                "endpointslices",
                namespace,
                name,
            )
        };
        for verb in ["list", "watch"] {
            assert!(
                may(verb, Some("default"), Some("kubernetes")),
                "{overlay}: {verb}"
            );
            assert!(!may(verb, Some("default"), None), "{overlay}: {verb} all");
            assert!(
                !may(verb, Some("kube-system"), Some("kubernetes")),
                "{overlay}: {verb} elsewhere"
            );
        }
        assert!(
            !may("get", Some("default"), Some("kubernetes")),
            "{overlay}"
        );
    }
}

#[test]
fn rbac_grants_nothing_the_gate_does_not_use() {
    for overlay in ON_OPENSHIFT {
        grants_nothing_unused(overlay);
    }
}

/// The namespace where the hypershift overlay lets the gate read hosted
/// clusters' admin kubeconfigs: HyperShift's default for HostedClusters.
const HOSTED_CLUSTERS_NAMESPACE: &str = "clusters";

fn grants_nothing_unused(overlay: &str) {
    let objects = rendered(overlay);
    let grants = grants(&objects);
    for (scope, rule) in &grants {
        let verbs = strings(&rule["verbs"]);
        let resources = strings(&rule["resources"]);
        assert!(
            !verbs.contains(&"*") && !resources.contains(&"*"),
            "no wildcards: {rule}"
        );
        // The gate's own ClusterClaims, on a cluster a hub manages, are
        // written, and their owner read: checked on their own
        // (the_fleet_member_gate_may_write_cluster_claims_and_nothing_else_of_the_hubs).
        if strings(&rule["apiGroups"]) == [OCM_CLUSTER_GROUP]
            || strings(&rule["resources"]) == ["clusterroles"]
        {
            assert_eq!(overlay, "fleet-member", "{rule}");
            continue;
        }
        // Nothing the checks read is written, and secrets are only listed,
        // but for the key the gate signs its results with: read and filled
        // by name, in its own namespace, never created (docs/security.md,
        // 3d and L5); and, on a management cluster, hosted clusters' admin
        // kubeconfigs, fetched by name (get alone) in the namespace bound
        // for them.
        if resources.contains(&"secrets") {
            let names = strings(&rule["resourceNames"]);
            let own = scope.as_deref() == Some(SA_NAMESPACE);
            match verbs.as_slice() {
                ["get", "patch"] => {
                    assert!(own && names == ["preflight-gate-result-key"], "{rule}")
                }
                ["get"] => assert!(
                    overlay == "hypershift" && scope.as_deref() == Some(HOSTED_CLUSTERS_NAMESPACE),
                    "{overlay}: {scope:?}: {rule}"
                ),
                _ => assert_eq!(verbs, ["list"], "{rule}"),
            }
        }
        for written in [
            "update",
            "deletecollection",
            "escalate",
            "bind",
            "impersonate",
        ] {
            assert!(!verbs.contains(&written), "{written} in {scope:?}: {rule}");
        }
    }
    // Writes only where the gate writes.
    let writes = |resource: &str| {
        grants
            .iter()
            .filter(|(_, r)| strings(&r["resources"]).contains(&resource))
            .flat_map(|(_, r)| strings(&r["verbs"]).into_iter().map(str::to_owned))
            .filter(|v| !["get", "list", "watch"].contains(&v.as_str()))
            .collect::<Vec<_>>()
    };
    for read_only in [
        "clusterversions",
        "clusteroperators",
        "nodes",
        "configmaps",
        "ingresscontrollers",
        "hostedclusters",
        "nodepools",
    ] {
        assert!(
            writes(read_only).is_empty(),
            "{overlay}: {read_only} is written"
        );
    }
    assert_eq!(
        writes("secrets"),
        ["patch"],
        "only the result key is filled"
    );
    assert!(
        !allowed(&grants, "create", "", "secrets", Some(SA_NAMESPACE), None),
        "the gate makes no Secret"
    );
    // Pods and Jobs are written only in the namespace where external
    // checks and release extraction pods run: never in the gate's own,
    // which holds its serving Secret.
    for (scope, rule) in &grants {
        let resources = strings(&rule["resources"]);
        let writes_any = strings(&rule["verbs"])
            .iter()
            .any(|v| !["get", "list", "watch"].contains(v));
        if writes_any && (resources.contains(&"pods") || resources.contains(&"jobs")) {
            assert_eq!(scope.as_deref(), Some(CHECKS_NAMESPACE), "{rule}");
        }
    }
    for (verb, group, resource) in [("create", "", "pods"), ("create", "batch", "jobs")] {
        assert!(
            allowed(&grants, verb, group, resource, Some(CHECKS_NAMESPACE), None),
            "{verb} {resource} in {CHECKS_NAMESPACE}"
        );
        assert!(
            !allowed(&grants, verb, group, resource, Some(SA_NAMESPACE), None),
            "{verb} {resource} in the gate's own namespace"
        );
    }
    assert_eq!(writes("updatepreflights/status"), ["patch"]);
    // The gate never grants itself overrides.
    assert!(!allowed(
        &grants,
        "override",
        "preflight.dev",
        "updatepreflights",
        None,
        None
    ));
    // Nor the window.
    assert!(!allowed(
        &grants,
        "window",
        "preflight.dev",
        "updatepreflights",
        None,
        None
    ));
    // The override role exists, with its verb and the window's (whoever
    // may force a target may plan one), bound to nobody; the window role
    // has the window's alone.
    let role = one(&objects, "ClusterRole", "preflight-gate-override");
    assert_eq!(role["rules"].as_array().unwrap().len(), 1);
    assert_eq!(strings(&role["rules"][0]["verbs"]), ["override", "window"]);
    let window = one(&objects, "ClusterRole", "preflight-gate-window");
    assert_eq!(strings(&window["rules"][0]["verbs"]), ["window"]);
    assert_eq!(
        strings(&role["rules"][0]["resources"]),
        ["updatepreflights"]
    );
    assert!(
        !objects
            .iter()
            .any(|o| o["roleRef"]["name"] == "preflight-gate-override"),
        "bound to nobody by default"
    );
    // Leader election: only the controller's Lease, in the gate's namespace.
    assert!(allowed(
        &grants,
        "patch",
        "coordination.k8s.io",
        "leases",
        Some(SA_NAMESPACE),
        Some("preflight-gate-controller")
    ));
    assert!(!allowed(
        &grants,
        "patch",
        "coordination.k8s.io",
        "leases",
        Some("kube-system"),
        Some("kube-controller-manager")
    ));
}

/// The Secret the gate keeps its signing key in is made by the install,
/// empty, in every overlay: the gate only fills it (docs/security.md, L5),
/// and no key is ever in a manifest.
#[test]
fn the_result_keys_secret_ships_empty_in_every_overlay() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let secret = one(&objects, "Secret", "preflight-gate-result-key");
        assert_eq!(secret["metadata"]["namespace"], SA_NAMESPACE, "{overlay}");
        assert_eq!(secret["type"], "Opaque", "{overlay}");
        for field in ["data", "stringData", "immutable"] {
            assert!(
                secret.get(field).is_none(),
                "{overlay}: {field} in {secret}"
            );
        }
        // The only Secret the manifests make: none holds a credential.
        let secrets: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Secret").collect();
        assert_eq!(secrets.len(), 1, "{overlay}");
    }
}

#[test]
fn the_openshift_namespace_is_scraped_by_cluster_monitoring() {
    for overlay in ON_OPENSHIFT {
        let objects = rendered(overlay);
        let ns = one(&objects, "Namespace", "preflight-gate");
        assert_eq!(
            ns["metadata"]["labels"]["openshift.io/cluster-monitoring"], "true",
            "{overlay}"
        );
        assert_eq!(
            ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
            "{overlay}"
        );
    }
}

#[test]
fn listing_every_secret_is_opt_in() {
    let lists_secrets = |overlay: &str| {
        grants(&rendered(overlay)).iter().any(|(_, rule)| {
            strings(&rule["resources"]).contains(&"secrets")
                && strings(&rule["verbs"]).contains(&"list")
        })
    };
    let flag_set = |overlay: &str| {
        rendered(overlay).iter().any(|o| {
            o["kind"] == "Deployment"
                && o["spec"]["template"]["spec"]["containers"][0]["env"]
                    .as_array()
                    .is_some_and(|env| {
                        env.iter().any(|e| {
                            e["name"] == "PREFLIGHT_GATE_READ_TLS_SECRETS" && e["value"] == "true"
                        })
                    })
        })
    };
    for overlay in [
        "openshift",
        "kubernetes",
        "hypershift",
        "fleet-member",
        "node",
    ] {
        assert!(!lists_secrets(overlay), "{overlay} grants the Secrets list");
        assert!(!flag_set(overlay), "{overlay} sets --read-tls-secrets");
    }
    // The development overlay opts in (its Deployment is the local process).
    assert!(lists_secrets("dev"));
}

#[test]
fn on_openshift_only_the_api_server_reaches_the_webhook_port_and_only_monitoring_the_admin_port() {
    for overlay in ON_OPENSHIFT {
        only_the_api_server_reaches_the_webhook_port(overlay);
    }
}

fn only_the_api_server_reaches_the_webhook_port(overlay: &str) {
    let objects = rendered(overlay);
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "NetworkPolicy")
        .expect("a NetworkPolicy");
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    // It selects the gate's pods, by labels they carry.
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&pod_labels[k], v, "{k}");
    }
    assert_eq!(policy["metadata"]["namespace"], "preflight-gate");
    assert_eq!(strings(&policy["spec"]["policyTypes"]), ["Ingress"]);
    // Named ports that the container declares.
    let declared: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let who_reaches = |port: &str| -> Vec<String> {
        policy["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| {
                rule["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["port"] == port)
            })
            .flat_map(|rule| rule["from"].as_array().unwrap().iter())
            .map(|from| from["namespaceSelector"]["matchLabels"].to_string())
            .collect()
    };
    for port in ["webhook", "admin"] {
        assert!(declared.contains(&port), "{port} is a declared port");
    }
    assert_eq!(
        who_reaches("webhook"),
        [r#"{"policy-group.network.openshift.io/host-network":""}"#]
    );
    assert_eq!(
        who_reaches("admin"),
        [
            r#"{"policy-group.network.openshift.io/host-network":""}"#,
            r#"{"kubernetes.io/metadata.name":"openshift-monitoring"}"#
        ]
    );
    // Every rule names its sources: none admits all.
    for rule in policy["spec"]["ingress"].as_array().unwrap() {
        assert!(!rule["from"].as_array().unwrap().is_empty(), "{rule}");
    }
}

#[test]
fn on_kubernetes_only_the_api_servers_client_certificate_gets_past_the_handshake() {
    let objects = rendered("kubernetes");
    let d = one(&objects, "Deployment", "preflight-gate");
    let pod = &d["spec"]["template"]["spec"];
    let container = &pod["containers"][0];

    // The gate verifies clients against a CA file from a mounted volume ...
    let ca_file = env(container, "PREFLIGHT_GATE_CLIENT_CA").expect("--client-ca is set");
    let ca_file = std::path::Path::new(ca_file);
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| ca_file.starts_with(m["mountPath"].as_str().unwrap()))
        .expect("the client CA file is on a mounted volume");
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    // ... that holds the CA's certificate alone, never its key.
    let items = volume["secret"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["key"], "ca.crt");
    assert!(ca_file.ends_with(items[0]["path"].as_str().unwrap()));
    let secret = volume["secret"]["secretName"].as_str().unwrap();

    // That CA is cert-manager's, a CA of its own: not the serving CA, and
    // it issues one certificate, for client auth: the API server's.
    let ca = objects
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["spec"]["secretName"] == secret)
        .expect("a Certificate makes the client CA");
    assert_eq!(ca["spec"]["isCA"], true);
    let serving = one(&objects, "Certificate", "preflight-gate");
    assert_ne!(
        serving["spec"]["issuerRef"]["name"], secret,
        "the serving CA is another"
    );
    let issuer = objects
        .iter()
        .find(|o| o["kind"] == "Issuer" && o["spec"]["ca"]["secretName"] == secret)
        .expect("an Issuer signs with the client CA");
    let issued: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["kind"] == "Certificate"
                && o["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
        })
        .collect();
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(
        strings(&issued[0]["spec"]["usages"]),
        ["client auth", "digital signature"]
    );

    // The admin port only from the monitoring namespace; the webhook port
    // is left to the handshake.
    let policy = one(&objects, "NetworkPolicy", "preflight-gate");
    for rule in policy["spec"]["ingress"].as_array().unwrap() {
        let ports: Vec<&Value> = rule["ports"].as_array().unwrap().iter().collect();
        if ports.iter().any(|p| p["port"] == "admin") {
            assert_eq!(
                rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
                "monitoring"
            );
            assert_eq!(rule["from"].as_array().unwrap().len(), 1);
        } else {
            assert!(ports.iter().all(|p| p["port"] == "webhook"), "{rule}");
        }
    }
}

/// The node overlay asks for the API server's client certificate as the
/// kubernetes overlay does (the node suite gives it the control plane's
/// webhook client CA), and its NetworkPolicy admits the gate's ports only
/// from address blocks: the node's.
#[test]
fn on_the_node_only_the_api_servers_client_certificate_gets_past_the_handshake() {
    let objects = rendered("node");
    let d = one(&objects, "Deployment", "preflight-gate");
    let pod = &d["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let ca_file = env(container, "PREFLIGHT_GATE_CLIENT_CA").expect("--client-ca is set");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| std::path::Path::new(ca_file).starts_with(m["mountPath"].as_str().unwrap()))
        .expect("the client CA file is on a mounted volume");
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let items = volume["secret"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "the CA's certificate alone");
    assert_eq!(items[0]["key"], "ca.crt");
    // The same Secret and path as the kubernetes overlay's.
    let kubernetes = rendered("kubernetes");
    let k = one(&kubernetes, "Deployment", "preflight-gate");
    assert_eq!(
        env(
            &k["spec"]["template"]["spec"]["containers"][0],
            "PREFLIGHT_GATE_CLIENT_CA"
        ),
        Some(ca_file)
    );
    assert_eq!(
        volume["secret"]["secretName"],
        "preflight-gate-webhook-client-ca"
    );

    let policy = one(&objects, "NetworkPolicy", "preflight-gate");
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&labels[k], v, "{k}");
    }
    assert_eq!(strings(&policy["spec"]["policyTypes"]), ["Ingress"]);
    for rule in policy["spec"]["ingress"].as_array().unwrap() {
        let from = rule["from"].as_array().unwrap();
        assert!(!from.is_empty(), "{rule}");
        assert!(
            from.iter().all(|f| f["ipBlock"]["cidr"].is_string()),
            "{rule}"
        );
        let ports: Vec<&str> = rule["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port"].as_str().unwrap())
            .collect();
        assert_eq!(ports, ["webhook", "admin"], "{rule}");
    }
}

/// The checks' namespace is held by the API server itself, in every
/// overlay: a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1),
/// bound to that namespace alone, judges every pod, Job and CronJob made
/// there, failing closed; its rules (the account, the token, images by
/// digest) are shown on a real API server by tests/e2e/deploy.rs.
#[test]
fn the_checks_namespace_admits_only_what_its_policy_allows_in_every_overlay() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let policy = one(
            &objects,
            "ValidatingAdmissionPolicy",
            "preflight-gate-checks",
        );
        assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail", "{overlay}");
        let rules = spec["matchConstraints"]["resourceRules"]
            .as_array()
            .unwrap();
        for (group, resource) in [
            ("", "pods"),
            ("", "pods/ephemeralcontainers"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
        ] {
            assert!(
                rules
                    .iter()
                    .any(|r| strings(&r["apiGroups"]).contains(&group)
                        && strings(&r["resources"]).contains(&resource)
                        && strings(&r["operations"]) == ["CREATE", "UPDATE"]),
                "{overlay}: the policy does not judge {resource}"
            );
        }
        let validations = spec["validations"].as_array().unwrap();
        assert_eq!(validations.len(), 4, "{overlay}");
        for v in validations {
            assert!(
                v["message"].is_string() || v["messageExpression"].is_string(),
                "{overlay}: a refusal without a reason: {v}"
            );
        }
        let text = policy.to_string();
        for rule in [
            "'preflight-check'",
            "automountServiceAccountToken",
            "serviceAccountToken",
            "@sha256:[0-9a-f]{64}$",
        ] {
            assert!(text.contains(rule), "{overlay}: the policy names no {rule}");
        }
        let binding = one(
            &objects,
            "ValidatingAdmissionPolicyBinding",
            "preflight-gate-checks",
        );
        assert_eq!(binding["spec"]["policyName"], "preflight-gate-checks");
        assert_eq!(strings(&binding["spec"]["validationActions"]), ["Deny"]);
        assert_eq!(
            binding["spec"]["matchResources"]["namespaceSelector"],
            serde_json::json!({"matchLabels": {"kubernetes.io/metadata.name": CHECKS_NAMESPACE}}),
            "{overlay}"
        );
        // The check account mounts no token unless the pod asks for one.
        let account = one(&objects, "ServiceAccount", "preflight-check");
        assert_eq!(account["automountServiceAccountToken"], false, "{overlay}");
    }
}

/// The check account reads no kind whose objects carry a pod template (their
/// containers' literal environment values): those are granted by an
/// administrator, namespace by namespace, with a ClusterRole bound to nobody
/// (docs/checks.md).
#[test]
fn the_check_account_reads_no_pod_template_unless_granted() {
    const TEMPLATES: [(&str, &str); 9] = [
        ("", "pods"),
        ("", "replicationcontrollers"),
        ("apps", "deployments"),
        ("apps", "daemonsets"),
        ("apps", "statefulsets"),
        ("apps", "replicasets"),
        ("apps", "controllerrevisions"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    ];
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let role = one(&objects, "ClusterRole", "preflight-check");
        for rule in role["rules"].as_array().unwrap() {
            for (group, resource) in TEMPLATES {
                assert!(
                    !(strings(&rule["apiGroups"]).contains(&group)
                        && strings(&rule["resources"]).contains(&resource)),
                    "{overlay}: the check account reads {resource}: {rule}"
                );
            }
        }
        let reads = one(&objects, "ClusterRole", "preflight-check-workload-reads");
        for (group, resource) in &TEMPLATES[1..] {
            assert!(
                reads["rules"].as_array().unwrap().iter().any(|r| {
                    strings(&r["apiGroups"]).contains(group)
                        && strings(&r["resources"]).contains(resource)
                        && strings(&r["verbs"]) == ["get", "list", "watch"]
                }),
                "{overlay}: preflight-check-workload-reads lacks {resource}"
            );
        }
        assert!(
            !objects
                .iter()
                .any(|o| o["roleRef"]["name"] == "preflight-check-workload-reads"),
            "{overlay}: bound by default"
        );
    }
}

/// In every overlay with a Deployment, the check Jobs and the extraction pod
/// run in a namespace of their own: the Deployment names it
/// (`--jobs-namespace`), Pod Security `restricted` holds there, the check
/// account lives there, and the gate's Role there is the only grant that
/// lets it create pods.
#[test]
fn check_jobs_run_in_a_namespace_of_their_own_in_every_overlay() {
    for overlay in [
        "openshift",
        "kubernetes",
        "hypershift",
        "fleet-member",
        "node",
    ] {
        let objects = rendered(overlay);
        let d = one(&objects, "Deployment", "preflight-gate");
        let container = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            env(container, "PREFLIGHT_GATE_JOBS_NAMESPACE"),
            Some(CHECKS_NAMESPACE),
            "{overlay}"
        );
        assert_eq!(d["metadata"]["namespace"], SA_NAMESPACE, "{overlay}");
        let ns = one(&objects, "Namespace", CHECKS_NAMESPACE);
        assert_eq!(
            ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
            "{overlay}"
        );
        let account = one(&objects, "ServiceAccount", "preflight-check");
        assert_eq!(account["metadata"]["namespace"], CHECKS_NAMESPACE);
        let grants = grants(&objects);
        let pod_creators: Vec<&Option<String>> = grants
            .iter()
            .filter(|(_, rule)| {
                strings(&rule["resources"]).contains(&"pods")
                    && strings(&rule["verbs"]).contains(&"create")
            })
            .map(|(scope, _)| scope)
            .collect();
        assert_eq!(
            pod_creators,
            [&Some(CHECKS_NAMESPACE.to_owned())],
            "{overlay}"
        );
    }
}

/// The HyperShift CRDs as the operator installs them (tests/data/hypershift-crds).
const HYPERSHIFT_CRDS: [(&str, &str); 2] = [
    (
        "hostedclusters",
        "hostedclusters-Hypershift-Default.crd.yaml",
    ),
    ("nodepools", "nodepools-Default.crd.yaml"),
];

/// The hosted control planes' webhooks, by name: the resource each sees,
/// the gate's path for it, and the fields whose change reaches the gate.
const HOSTED_WEBHOOKS: [(&str, &str, &str, &[&str]); 2] = [
    (
        "hostedclusters.preflight.dev",
        "hostedclusters",
        "/validate/hostedcluster",
        &[
            "spec.channel",
            "spec.controlPlaneRelease",
            "spec.release.image",
            "spec.updateService",
        ],
    ),
    (
        "nodepools.preflight.dev",
        "nodepools",
        "/validate/nodepool",
        &["spec.release.image"],
    ),
];

fn kind_and_name(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap().to_owned(),
        o["metadata"]["name"].as_str().unwrap().to_owned(),
    )
}

/// A management cluster is an OpenShift cluster: the hypershift overlay
/// renders every object of the openshift overlay as it is (the
/// ClusterVersion's webhook still guards the management cluster's own
/// updates), but for the Deployment, which gains --hosted-control-planes
/// alone, and the webhook configuration, which gains the two hosted
/// webhooks after its own; and adds the hosted reads, nothing else.
#[test]
fn the_hypershift_overlay_is_the_openshift_overlay_and_the_hosted_parts() {
    let openshift = rendered("openshift");
    let hypershift = rendered("hypershift");
    for o in &openshift {
        let (kind, name) = kind_and_name(o);
        let found = hypershift
            .iter()
            .find(|h| {
                kind_and_name(h) == (kind.clone(), name.clone())
                    && h["metadata"]["namespace"] == o["metadata"]["namespace"]
            })
            .unwrap_or_else(|| panic!("hypershift has no {kind} {name}"));
        match kind.as_str() {
            "Deployment" => {
                let mut expected = o.clone();
                expected["spec"]["template"]["spec"]["containers"][0]["env"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({
                        "name": "PREFLIGHT_GATE_HOSTED_CONTROL_PLANES",
                        "value": "true"
                    }));
                assert_eq!(found, &expected, "only --hosted-control-planes is added");
            }
            "ValidatingWebhookConfiguration" => {
                let mut head = found.clone();
                head["webhooks"].as_array_mut().unwrap().truncate(2);
                assert_eq!(
                    &head, o,
                    "the openshift overlay's webhooks come first, as they are"
                );
            }
            _ => assert_eq!(found, o, "{kind} {name}"),
        }
    }
    let mut added: Vec<(String, String)> = hypershift
        .iter()
        .filter(|h| {
            !openshift
                .iter()
                .any(|o| kind_and_name(o) == kind_and_name(h))
        })
        .map(kind_and_name)
        .collect();
    added.sort();
    let mut expected: Vec<(String, String)> = [
        ("ClusterRole", "preflight-gate-hosted-control-planes"),
        ("ClusterRoleBinding", "preflight-gate-hosted-control-planes"),
        ("Role", "preflight-gate-hypershift-supported-versions"),
        (
            "RoleBinding",
            "preflight-gate-hypershift-supported-versions",
        ),
        ("ClusterRole", "preflight-gate-hosted-kubeconfig"),
        ("RoleBinding", "preflight-gate-hosted-kubeconfig"),
    ]
    .iter()
    .map(|(k, n)| ((*k).to_owned(), (*n).to_owned()))
    .collect();
    expected.sort();
    assert_eq!(added, expected);
    // No other overlay turns hosted control planes on.
    for overlay in OVERLAYS.iter().filter(|o| **o != "hypershift") {
        let objects = rendered(overlay);
        if let Some(d) = find(&objects, "Deployment", "preflight-gate") {
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(
                env(c, "PREFLIGHT_GATE_HOSTED_CONTROL_PLANES"),
                None,
                "{overlay}"
            );
        }
        assert!(
            !objects
                .iter()
                .any(|o| o.to_string().contains("hypershift.openshift.io")),
            "{overlay} names hypershift.openshift.io"
        );
    }
}

/// The hosted webhooks (docs/install.md, "Hosted control planes"): writes
/// of a HostedCluster or a NodePool, never their status, UPDATE alone,
/// failing closed as the ClusterVersion's does, and only the writes that
/// change what the match conditions name.
#[test]
fn hosted_updates_reach_the_gate_through_their_own_webhooks() {
    let objects = rendered("hypershift");
    let config = one(&objects, "ValidatingWebhookConfiguration", "preflight-gate");
    let webhooks = &config["webhooks"].as_array().unwrap()[2..];
    assert_eq!(webhooks.len(), HOSTED_WEBHOOKS.len());
    for (w, (name, resource, path, _)) in webhooks.iter().zip(HOSTED_WEBHOOKS) {
        assert_eq!(w["name"], name);
        assert_eq!(w["failurePolicy"], "Fail", "{name}");
        assert_eq!(w["sideEffects"], "NoneOnDryRun", "{name}");
        assert_eq!(w["timeoutSeconds"], 5, "{name}");
        assert_eq!(strings(&w["admissionReviewVersions"]), ["v1"], "{name}");
        // The paths the gate serves them at (`serve --hosted-control-planes`).
        let service = &w["clientConfig"]["service"];
        assert_eq!(service["path"], path, "{name}");
        assert_eq!(service["name"], "preflight-gate", "{name}");
        assert_eq!(service["namespace"], SA_NAMESPACE, "{name}");
        let rules = w["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 1, "{name}: one rule only");
        let rule = &rules[0];
        assert_eq!(strings(&rule["apiGroups"]), ["hypershift.openshift.io"]);
        assert_eq!(strings(&rule["apiVersions"]), ["v1beta1"]);
        // Never the status or scale subresource, never a wildcard.
        assert_eq!(strings(&rule["resources"]), [resource], "{name}");
        assert_eq!(strings(&rule["operations"]), ["UPDATE"], "{name}");
        assert_eq!(rule["scope"], "Namespaced", "{name}");
        // No selector narrows them: every namespace's are gated.
        assert!(w.get("namespaceSelector").is_none(), "{name}");
        assert!(w.get("objectSelector").is_none(), "{name}");

        let conditions = w["matchConditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1, "{name}");
        let expression = conditions[0]["expression"].as_str().unwrap();
        // Claims written or changed reach the gate, as on a ClusterVersion,
        // and on a HostedCluster HyperShift's own force too.
        assert!(
            expression.contains("k.startsWith('preflight.dev/')"),
            "{name}: {expression}"
        );
        let force = "k == 'hypershift.openshift.io/force-upgrade-to'";
        assert_eq!(
            expression.contains(force),
            resource == "hostedclusters",
            "{name}: {expression}"
        );
        // A write that creates nothing new never needs the gate: no
        // condition matches a CREATE (the rules have none) or every write.
        assert!(!expression.contains("request.operation"), "{name}");
    }
}

/// The paths `object.<path>` and `oldObject.<path>` of a CEL expression,
/// without a trailing method call (`.exists(`), each as (root, path).
fn cel_paths(expression: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for root in ["object", "oldObject"] {
        let needle = format!("{root}.");
        let mut from = 0;
        while let Some(at) = expression[from..].find(&needle) {
            let start = from + at;
            from = start + needle.len();
            // `object.` inside another identifier is not the root.
            let before = expression[..start].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
                continue;
            }
            let rest = &expression[from..];
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let mut path = rest[..len].trim_end_matches('.').to_owned();
            if rest[len..].starts_with('(') {
                path = path.rsplit_once('.').map(|(p, _)| p.to_owned()).unwrap();
            }
            out.push((root, path));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The schema of `path` (`spec.release.image`) in a CRD's v1beta1, if it
/// defines it.
fn schema_of<'a>(crd: &'a Value, path: &str) -> Option<&'a Value> {
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1beta1")
        .expect("the CRD serves v1beta1");
    let mut schema = &version["schema"]["openAPIV3Schema"];
    for field in path.split('.') {
        schema = schema["properties"].get(field)?;
    }
    Some(schema)
}

/// A match condition that names a field the CRD does not define never
/// matches, silently: a misspelt `spec.controlplaneRelease` would let
/// every change of it past the gate. Every field the hosted webhooks'
/// conditions read is one the HyperShift CRDs define, and each is read
/// only behind has() guards, of itself and of every field above it, on
/// the object and on the old object alike, so an object without it never
/// makes the condition fail (and, failing closed, refuse the write).
#[test]
fn the_hosted_match_conditions_name_only_fields_the_hypershift_crds_define() {
    let objects = rendered("hypershift");
    let config = one(&objects, "ValidatingWebhookConfiguration", "preflight-gate");
    for (name, resource, _, fields) in HOSTED_WEBHOOKS {
        let file = HYPERSHIFT_CRDS
            .iter()
            .find(|(r, _)| *r == resource)
            .map(|(_, f)| f)
            .unwrap();
        let text =
            std::fs::read_to_string(format!("{ROOT}/tests/data/hypershift-crds/{file}")).unwrap();
        let crd: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(crd["spec"]["names"]["plural"], resource);
        assert_eq!(crd["spec"]["group"], "hypershift.openshift.io");
        assert_eq!(crd["spec"]["scope"], "Namespaced");

        let w = config["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no webhook {name}"));
        let expression = w["matchConditions"][0]["expression"].as_str().unwrap();
        let paths = cel_paths(expression);
        let mut spec_fields: Vec<&str> = Vec::new();
        for (root, path) in &paths {
            if path == "metadata.annotations" {
                continue;
            }
            assert!(
                path.starts_with("spec"),
                "{name}: {root}.{path} is neither spec nor the annotations"
            );
            assert!(
                schema_of(&crd, path).is_some(),
                "{name}: {root}.{path} is not a field of {resource}"
            );
            if path.contains('.') && !spec_fields.contains(&path.as_str()) {
                spec_fields.push(path);
            }
        }
        // The fields read, not the ones above them.
        let all = spec_fields.clone();
        spec_fields.retain(|f| !all.iter().any(|o| o.starts_with(&format!("{f}."))));
        spec_fields.sort();
        assert_eq!(
            spec_fields, fields,
            "{name}: the fields whose change reaches the gate"
        );
        for (_, path) in &paths {
            let segments: Vec<&str> = path.split('.').collect();
            for depth in 1..=segments.len() {
                let prefix = segments[..depth].join(".");
                if prefix == "metadata" {
                    continue;
                }
                for root in ["object", "oldObject"] {
                    let guard = format!("has({root}.{prefix})");
                    assert!(
                        expression.contains(&guard),
                        "{name}: no {guard} before {root}.{path} is read"
                    );
                }
            }
        }
    }
}

/// On a management cluster the gate reads HostedClusters and NodePools
/// everywhere, the HyperShift operator's supported-versions ConfigMap by
/// name, and hosted clusters' admin kubeconfigs by name (get alone) in the
/// namespaces bound for them; it writes none of them, and the kubeconfig
/// grant is never bound cluster-wide (docs/security.md, "Hosted control
/// planes").
#[test]
fn the_hosted_reads_are_the_least_the_gate_needs() {
    let objects = rendered("hypershift");
    let grants = grants(&objects);
    let may =
        |verb: &str, group: &str, resource: &str, namespace: Option<&str>, name: Option<&str>| {
            allowed(&grants, verb, group, resource, namespace, name)
        };
    const GROUP: &str = "hypershift.openshift.io";
    for resource in ["hostedclusters", "nodepools"] {
        for verb in ["get", "list", "watch"] {
            assert!(may(verb, GROUP, resource, None, None), "{verb} {resource}");
        }
        for verb in ["create", "update", "patch", "delete"] {
            assert!(!may(verb, GROUP, resource, None, None), "{verb} {resource}");
            assert!(
                !may(verb, GROUP, &format!("{resource}/status"), None, None),
                "{verb} {resource}/status"
            );
        }
    }
    // The operator's ConfigMap, by name, and no other of its namespace.
    for verb in ["get", "list", "watch"] {
        assert!(may(
            verb,
            "",
            "configmaps",
            Some("hypershift"),
            Some("supported-versions")
        ));
        assert!(
            !may(verb, "", "configmaps", Some("hypershift"), None),
            "{verb} all"
        );
        assert!(!may(
            verb,
            "",
            "configmaps",
            Some("hypershift"),
            Some("other")
        ));
    }
    // Admin kubeconfigs: get by name in `clusters`; never list or watch
    // (which would show every Secret there), never elsewhere.
    let kubeconfig = Some("prod-admin-kubeconfig");
    assert!(may(
        "get",
        "",
        "secrets",
        Some(HOSTED_CLUSTERS_NAMESPACE),
        kubeconfig
    ));
    for verb in ["list", "watch", "create", "update", "patch", "delete"] {
        assert!(
            !may(verb, "", "secrets", Some(HOSTED_CLUSTERS_NAMESPACE), None),
            "{verb} secrets in {HOSTED_CLUSTERS_NAMESPACE}"
        );
    }
    for namespace in [
        "hypershift",
        "kube-system",
        "openshift-config",
        "clusters-prod",
    ] {
        assert!(
            !may("get", "", "secrets", Some(namespace), kubeconfig),
            "get secrets in {namespace}"
        );
    }
    assert!(!may("get", "", "secrets", None, kubeconfig), "cluster-wide");
    // The kubeconfig grant is bound by RoleBindings alone.
    let role = one(&objects, "ClusterRole", "preflight-gate-hosted-kubeconfig");
    assert_eq!(role["rules"].as_array().unwrap().len(), 1);
    assert_eq!(strings(&role["rules"][0]["resources"]), ["secrets"]);
    assert_eq!(strings(&role["rules"][0]["verbs"]), ["get"]);
    let bindings: Vec<&Value> = objects
        .iter()
        .filter(|o| o["roleRef"]["name"] == "preflight-gate-hosted-kubeconfig")
        .collect();
    assert!(!bindings.is_empty());
    for b in bindings {
        assert_eq!(b["kind"], "RoleBinding", "{b}");
    }
    // The namespaces it reads in are HyperShift's: the overlay makes none.
    for namespace in ["hypershift", HOSTED_CLUSTERS_NAMESPACE] {
        assert!(
            find(&objects, "Namespace", namespace).is_none(),
            "{namespace}"
        );
    }
}

/// The API group of Open Cluster Management's clusters: ClusterClaims,
/// Placements, ManagedClusters.
const OCM_CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";

/// What the gate does with its ClusterClaims (serve --cluster-claims): it
/// lists them by its label, creates them, patches their values, and
/// deletes those of targets no longer offered.
const CLUSTER_CLAIM_VERBS: [&str; 4] = ["list", "create", "patch", "delete"];

/// The CRD of `group`/`kind` in tests/data/fleet-crds.
fn fleet_crd(group: &str, kind: &str) -> Value {
    let dir = format!("{ROOT}/tests/data/fleet-crds");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind {
            found.push(crd);
        }
    }
    assert_eq!(found.len(), 1, "one CRD of {group} {kind} in {dir}");
    found.pop().unwrap()
}

/// Where `value` breaks `schema` (a CRD version's openAPIV3Schema), at
/// `at`: a required field missing, a field the schema does not define (the
/// API server would prune it, silently), a value of another type or
/// outside an enum. Patterns and CEL rules are left to the API server
/// (tests/e2e applies the hub overlay to a hub's CRDs).
fn schema_errors(schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    let typed = match (schema["type"].as_str(), value) {
        _ if int_or_string => value.is_i64() || value.is_u64() || value.is_string(),
        (Some("object"), v) => v.is_object(),
        (Some("array"), v) => v.is_array(),
        (Some("string"), v) => v.is_string(),
        (Some("integer"), v) => v.is_i64() || v.is_u64(),
        (Some("boolean"), v) => v.is_boolean(),
        _ => true,
    };
    if !typed {
        errors.push(format!("{at}: {value} is not of type {}", schema["type"]));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        errors.push(format!("{at}: {value} is none of {allowed:?}"));
    }
    if let Some(object) = value.as_object() {
        for field in strings(&schema["required"]) {
            // The API server fills a defaulted field before it validates.
            let defaulted = schema["properties"][field].get("default").is_some();
            if !object.contains_key(field) && !defaulted {
                errors.push(format!("{at}: {field} is required"));
            }
        }
        let open = schema["x-kubernetes-preserve-unknown-fields"] == true
            || schema["x-kubernetes-embedded-resource"] == true;
        for (field, v) in object {
            // The API server checks an object's own metadata, not the CRD.
            let own = at.is_empty() && ["apiVersion", "kind", "metadata"].contains(&field.as_str());
            match (
                schema["properties"].get(field),
                schema.get("additionalProperties"),
            ) {
                _ if own => {}
                (Some(s), _) | (None, Some(s)) => {
                    schema_errors(s, v, &format!("{at}.{field}"), errors)
                }
                (None, None) if open => {}
                (None, None) => errors.push(format!("{at}.{field} is not in the schema")),
            }
        }
    }
    if let (Some(items), Some(values)) = (schema.get("items"), value.as_array()) {
        for (i, v) in values.iter().enumerate() {
            schema_errors(items, v, &format!("{at}[{i}]"), errors);
        }
    }
}

/// The hub's objects are the OCM CRDs' (tests/data/fleet-crds): each kind a
/// CRD of its group serves at its apiVersion, in a namespace the overlay
/// makes, with every required field and no field the schema would prune;
/// the ManifestWorkReplicaSet rolls out to the Placement of its namespace,
/// which selects the OpenShift clusters.
#[test]
fn the_hubs_objects_are_valid_against_the_ocm_crds() {
    let objects = rendered("fleet");
    let mut kinds: Vec<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["ManifestWorkReplicaSet", "Namespace", "Placement"],
        "nothing of the gate runs on the hub"
    );
    let namespace = one(&objects, "Namespace", "preflight-gate-fleet");
    for o in objects.iter().filter(|o| o["kind"] != "Namespace") {
        let (group, version) = o["apiVersion"].as_str().unwrap().split_once('/').unwrap();
        let kind = o["kind"].as_str().unwrap();
        let crd = fleet_crd(group, kind);
        assert_eq!(crd["spec"]["scope"], "Namespaced", "{kind}");
        assert_eq!(
            o["metadata"]["namespace"], namespace["metadata"]["name"],
            "{kind}"
        );
        let served = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == version && v["served"] == true)
            .unwrap_or_else(|| panic!("{group} {kind}: {version} is not served"));
        let mut errors = Vec::new();
        schema_errors(&served["schema"]["openAPIV3Schema"], o, "", &mut errors);
        assert!(errors.is_empty(), "{kind}:\n{}", errors.join("\n"));
    }
    let placement = one(&objects, "Placement", "preflight-gate");
    assert_eq!(
        placement["spec"]["predicates"],
        serde_json::json!([{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"vendor": "OpenShift"}}}}])
    );
    let set = one(&objects, "ManifestWorkReplicaSet", "preflight-gate");
    let refs = set["spec"]["placementRefs"].as_array().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0]["name"], placement["metadata"]["name"]);
    let rollout = &refs[0]["rolloutStrategy"];
    assert_eq!(rollout["type"], "Progressive");
    assert!(
        rollout["progressive"]["maxConcurrency"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "a few clusters at a time: {rollout}"
    );
    assert!(
        rollout["progressive"].get("maxFailures").is_none(),
        "no failure tolerated: {rollout}"
    );
}

/// The hub carries exactly the fleet-member release: the
/// ManifestWorkReplicaSet's manifests are the objects of the fleet-member
/// rendering, in its order, with its image; each has one manifestConfig,
/// naming it as the API server does, that applies it server-side.
#[test]
fn the_fleet_carries_exactly_the_fleet_member_release() {
    let hub = rendered("fleet");
    let set = one(&hub, "ManifestWorkReplicaSet", "preflight-gate");
    let member = rendered("fleet-member");
    assert!(
        carried(set) == member.as_slice(),
        "the manifests differ from deploy/rendered/fleet-member.yaml"
    );
    let configs = set["spec"]["manifestWorkTemplate"]["manifestConfigs"]
        .as_array()
        .unwrap();
    assert_eq!(configs.len(), member.len());
    for (config, o) in configs.iter().zip(&member) {
        let (group, resource, namespace, name) = identifier(o);
        let mut expected = serde_json::json!({
            "group": group, "resource": resource, "name": name
        });
        if let Some(namespace) = namespace {
            expected["namespace"] = namespace.into();
        }
        assert_eq!(config["resourceIdentifier"], expected);
        assert_eq!(
            config["updateStrategy"],
            serde_json::json!({"type": "ServerSideApply"}),
            "{expected}"
        );
    }
    // The image is the one set, and the hub's overlay sets it only there.
    assert_eq!(deployments(&hub).len(), 1);
    assert_eq!(
        hub.iter()
            .filter(|o| o.to_string().contains(TEST_IMAGE))
            .count(),
        1
    );
}

/// A cluster a hub manages: the fleet-member overlay renders every object
/// of the openshift overlay as it is but for the Deployment, which gains
/// --cluster-claims alone, and adds the ClusterClaims grant, nothing else:
/// every verb the gate uses on clusterclaims of
/// cluster.open-cluster-management.io, cluster-wide (RBAC cannot narrow it
/// to the claims with the gate's label), and nothing else of that group or
/// of the hub's. No other overlay turns the claims on.
#[test]
fn the_fleet_member_gate_may_write_cluster_claims_and_nothing_else_of_the_hubs() {
    let openshift = rendered("openshift");
    let member = rendered("fleet-member");
    let mut added = Vec::new();
    for o in &member {
        match find(
            &openshift,
            o["kind"].as_str().unwrap(),
            o["metadata"]["name"].as_str().unwrap(),
        ) {
            Some(before) if o["kind"] == "Deployment" => {
                let mut expected = before.clone();
                expected["spec"]["template"]["spec"]["containers"][0]["env"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!({"name": "PREFLIGHT_GATE_CLUSTER_CLAIMS", "value": "true"}));
                assert_eq!(o, &expected, "only --cluster-claims is added");
            }
            Some(before) => assert_eq!(o, before),
            None => added.push(kind_and_name(o)),
        }
    }
    assert_eq!(
        member.len(),
        openshift.len() + added.len(),
        "nothing is left out"
    );
    added.sort();
    assert_eq!(
        added,
        [
            (
                "ClusterRole".to_owned(),
                "preflight-gate-cluster-claims".to_owned()
            ),
            (
                "ClusterRoleBinding".to_owned(),
                "preflight-gate-cluster-claims".to_owned()
            ),
        ]
    );
    let role = one(&member, "ClusterRole", "preflight-gate-cluster-claims");
    assert_eq!(
        role["rules"],
        serde_json::json!([{
            "apiGroups": [OCM_CLUSTER_GROUP],
            "resources": ["clusterclaims"],
            "verbs": CLUSTER_CLAIM_VERBS,
        }, {
            // Their owner, read by name (preflight::cluster_claims::OWNER).
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles"],
            "resourceNames": ["preflight-gate-cluster-claims"],
            "verbs": ["get"],
        }])
    );
    // The resource is the CRD's, and cluster-scoped: a ClusterRole it is.
    let crd = fleet_crd(OCM_CLUSTER_GROUP, "ClusterClaim");
    assert_eq!(crd["spec"]["names"]["plural"], "clusterclaims");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    let grants = grants(&member);
    let may = |verb: &str| {
        allowed(
            &grants,
            verb,
            OCM_CLUSTER_GROUP,
            "clusterclaims",
            None,
            None,
        )
    };
    for verb in CLUSTER_CLAIM_VERBS {
        assert!(may(verb), "{verb}");
    }
    for verb in [
        "get",
        "watch",
        "update",
        "deletecollection",
        "escalate",
        "bind",
    ] {
        assert!(!may(verb), "{verb}");
    }
    let hubs: Vec<&Value> = grants
        .iter()
        .map(|(_, rule)| rule)
        .filter(|rule| {
            strings(&rule["apiGroups"])
                .iter()
                .any(|g| g.contains("open-cluster-management.io"))
        })
        .collect();
    assert_eq!(
        hubs,
        [&role["rules"][0]],
        "only the ClusterClaims of the hub's kinds"
    );

    let d = one(&member, "Deployment", "preflight-gate");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(env(c, "PREFLIGHT_GATE_CLUSTER_CLAIMS"), Some("true"));
    for overlay in OVERLAYS.iter().filter(|o| **o != "fleet-member") {
        let objects = rendered(overlay);
        if let Some(d) = find(&objects, "Deployment", "preflight-gate") {
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(env(c, "PREFLIGHT_GATE_CLUSTER_CLAIMS"), None, "{overlay}");
        }
        assert!(
            !objects
                .iter()
                .any(|o| o.to_string().contains("open-cluster-management.io")),
            "{overlay} names open-cluster-management.io"
        );
    }
}
