//! bundle/, the OLM bundle for OperatorHub, is generated here from the
//! openshift overlay's rendering (deploy/rendered/openshift.yaml), so it
//! cannot drift from deploy/: the test fails when the checked-in bundle is
//! not what this generates (`PREFLIGHT_GATE_BLESS=1` rewrites it). The
//! operator framework's own validators check it (tests/olm/validate, a Go
//! wrapper around github.com/operator-framework/api/pkg/validation, built
//! and cached by tests/olm/build).
//!
//! What OLM does differently from the overlay, on purpose:
//! - OLM issues the webhook's serving certificate and injects its CA
//!   (`webhookdefinitions`), so the Deployment reads the certificate where
//!   OLM mounts it and has no volume of its own; OLM names the webhook's
//!   Service `preflight-gate-service`.
//! - The gate serves the admin port with the webhook's certificate, which
//!   is OLM's and not one Prometheus trusts: under OLM the admin port
//!   serves plain HTTP and the ServiceMonitor scrapes HTTP.
//! - OLM grants Roles only in the install namespace, makes no namespace,
//!   applies only the kinds it knows ([`OLM_KINDS`]), and rewrites a
//!   bundle's Secret on every upgrade. What of the overlay it cannot make is
//!   never widened into something it can (a Role elsewhere into a
//!   cluster-wide rule): it is written to bundle/after-install.yaml, which
//!   the administrator applies once after subscribing (docs/install.md):
//!   the checks' namespace with its account, the gate's Role there and its
//!   admission policy; the Roles in `default` and OpenShift's namespaces;
//!   the console dashboard; and the result key's empty Secret, which OLM
//!   would empty again with every upgrade, throwing the key away. Every
//!   object of the overlay is in exactly one place
//!   ([`every_object_of_the_overlay_is_in_one_place_under_olm`]).
//! - OLM's webhook descriptions have no matchConditions (operator-framework/api
//!   v0.39.0's `WebhookDescription` has no such field): every write of a
//!   ClusterVersion's spec reaches the gate, which allows the ones that
//!   leave the target alone at once, and refuses them while it is down.
//! - The CSV installs in its own namespace only (`OwnNamespace`), so the
//!   global OperatorGroup of `openshift-operators` (AllNamespaces) cannot
//!   install it; it suggests `preflight-gate`.
//! - The image is named by digest (relatedImages, the Deployment,
//!   `containerImage`), as `features.operators.openshift.io/disconnected`
//!   requires: the released one, from deploy/release/IMAGE. Until a release
//!   is cut there is no image to name, and bundle/ holds no manifests (its
//!   Dockerfile then fails on the missing `manifests/`); the tests check and
//!   validate a bundle made with a test image, in a temporary directory.
//! - The check Jobs run in `preflight-gate-checks` under OLM too
//!   (`--jobs-namespace`, as the overlay says): the gate's account may
//!   create no pod beside it. Until bundle/after-install.yaml makes that
//!   namespace, its account and the gate's Role there, the gate cannot
//!   start a check Job or the release's extraction pod, and says so in the
//!   result (an Error, never a silent pass).
//! - The NetworkPolicy of the overlay is a manifest of the bundle (OLM
//!   applies NetworkPolicy objects since operator-registry v1.55: OpenShift
//!   4.20, and 4.12 to 4.19 from the z-streams that carry its backport; an
//!   older OLM fails the install plan on it, saying the kind is not
//!   supported). No client CA, as on the overlay: OpenShift's kube-apiserver
//!   presents no client certificate to webhooks.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

// TEST_IMAGE: the image the tests' bundles name, never written to bundle/.
use crate::deploy::{TEST_IMAGE, rendered};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");
const NAMESPACE: &str = "preflight-gate";
/// The overlay's namespace of check Jobs, under OLM too.
const CHECKS_NAMESPACE: &str = "preflight-gate-checks";
const SA: &str = "preflight-gate";
/// Where OLM mounts the serving certificate it issues for webhookdefinitions.
const OLM_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// The oldest OpenShift the overlay supports (docs/install.md).
const MIN_OPENSHIFT: &str = "v4.15";
const MIN_KUBE: &str = "1.28.0";
/// The file of what the bundle cannot make, beside it.
const AFTER_INSTALL: &str = "after-install.yaml";
/// The Secret the gate keeps its result key in (deploy/base/result-key.yaml).
const KEY_SECRET: &str = "preflight-gate-result-key";

/// The kinds OLM's catalog operator applies from a bundle's manifests: the
/// core kinds it handles itself and those of its supportedresources.go
/// (operator-lifecycle-manager, pkg/controller/operators/catalog), with
/// NetworkPolicy since operator-registry v1.55. Any other kind fails the
/// install plan (`UnsupportedResource`); the operator framework's
/// validators do not check it, so this test does.
pub const OLM_KINDS: [&str; 21] = [
    "ClusterServiceVersion",
    "CustomResourceDefinition",
    "Secret",
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "ServiceAccount",
    "Service",
    "Role",
    "RoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
    "NetworkPolicy",
];

/// Where an object of the openshift overlay goes under OLM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// OLM makes it from the ClusterServiceVersion: the Deployment and its
    /// ServiceAccount, the gate's roles and bindings (cluster-wide and in
    /// the install namespace), the webhook configuration and its Service,
    /// the namespace it suggests.
    Csv,
    /// A manifest of the bundle, applied as it is (in the install namespace
    /// when namespaced); the CRDs too, which the CSV owns.
    Manifest,
    /// bundle/after-install.yaml, applied by the administrator.
    AfterInstall,
}

/// The released image, `REPOSITORY@sha256:...`, that the release commit
/// writes to deploy/release/IMAGE; None until a release is cut.
pub fn released_image() -> Option<String> {
    let path = format!("{ROOT}/deploy/release/IMAGE");
    let text = std::fs::read_to_string(&path).ok()?;
    let image = text.trim().to_owned();
    let digest = image.rsplit_once("@sha256:").map(|(_, d)| d).unwrap_or("");
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "{path}: {image} is not named by digest"
    );
    Some(image)
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the openshift overlay has no {kind} {name}"))
}

/// An object as a bundle manifest: no namespace (OLM puts it in the install
/// namespace).
fn unplaced(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    object
}

fn is_ours(subject: &Value, account: &str) -> bool {
    subject["kind"] == "ServiceAccount"
        && subject["name"] == account
        && subject["namespace"] == NAMESPACE
}

fn namespace_of(object: &Value) -> Option<&str> {
    object["metadata"]["namespace"].as_str()
}

/// Whether `binding` binds the gate's account and nothing else.
fn binds_the_gate_alone(binding: &Value) -> bool {
    let subjects = binding["subjects"].as_array().unwrap();
    !subjects.is_empty() && subjects.iter().all(|s| is_ours(s, SA))
}

/// Where `object`, of `objects` (the openshift overlay), goes under OLM.
pub fn place(objects: &[Value], object: &Value) -> Place {
    let kind = object["kind"].as_str().unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let namespace = namespace_of(object);
    if !OLM_KINDS.contains(&kind)
        && !matches!(kind, "Deployment" | "ValidatingWebhookConfiguration")
    {
        // A namespace OLM suggests is made with the subscription; none other.
        return if kind == "Namespace" && name == NAMESPACE {
            Place::Csv
        } else {
            Place::AfterInstall
        };
    }
    if namespace.is_some_and(|n| n != NAMESPACE) || (kind == "Secret" && name == KEY_SECRET) {
        return Place::AfterInstall;
    }
    let bindings = || {
        objects.iter().filter(|o| {
            (o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
                && namespace_of(o) == namespace
        })
    };
    let csv = match kind {
        "Deployment" | "ValidatingWebhookConfiguration" => true,
        "Service" => name == "preflight-gate",
        "ServiceAccount" => name == SA,
        "ClusterRoleBinding" | "RoleBinding" => binds_the_gate_alone(object),
        "ClusterRole" | "Role" => {
            let mut refs = bindings()
                .filter(|b| b["roleRef"]["kind"] == kind && b["roleRef"]["name"] == name)
                .peekable();
            refs.peek().is_some() && refs.all(binds_the_gate_alone)
        }
        _ => false,
    };
    if csv { Place::Csv } else { Place::Manifest }
}

/// The rules the CSV grants the gate's account: (cluster-wide, in the
/// install namespace), from the roles [`place`] puts in it.
pub fn rules_of(objects: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let (mut cluster, mut own) = (Vec::new(), Vec::new());
    for binding in objects.iter().filter(|o| {
        (o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
            && place(objects, o) == Place::Csv
    }) {
        let namespace = namespace_of(binding);
        let role_ref = &binding["roleRef"];
        let role = objects
            .iter()
            .find(|o| {
                o["kind"] == role_ref["kind"]
                    && o["metadata"]["name"] == role_ref["name"]
                    && namespace_of(o) == namespace
            })
            .unwrap_or_else(|| panic!("the role of {}", binding["metadata"]["name"]));
        let rules = role["rules"].as_array().unwrap().iter().cloned();
        match namespace {
            Some(_) => own.extend(rules),
            None => cluster.extend(rules),
        }
    }
    (cluster, own)
}

/// The Deployment as OLM runs it: the certificate where OLM mounts it, the
/// admin port in plain HTTP.
fn olm_deployment(deployment: &Value, image: &str) -> Value {
    let mut spec = deployment["spec"].clone();
    let pod = &mut spec["template"]["spec"];
    let container = &mut pod["containers"][0];
    container["image"] = image.into();
    let env = container["env"].as_array_mut().unwrap();
    env.retain(|e| e["name"] != "PREFLIGHT_GATE_ADMIN_TLS");
    for e in env.iter_mut() {
        match e["name"].as_str().unwrap() {
            "PREFLIGHT_GATE_TLS_CERT" => e["value"] = format!("{OLM_CERT_DIR}/tls.crt").into(),
            "PREFLIGHT_GATE_TLS_KEY" => e["value"] = format!("{OLM_CERT_DIR}/tls.key").into(),
            _ => {}
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(get) = container[probe]["httpGet"].as_object_mut() {
            get.remove("scheme");
        }
    }
    let tls = "tls";
    if let Some(mounts) = container["volumeMounts"].as_array_mut() {
        mounts.retain(|m| m["name"] != tls);
        if mounts.is_empty() {
            container.as_object_mut().unwrap().remove("volumeMounts");
        }
    }
    if let Some(volumes) = pod["volumes"].as_array_mut() {
        volumes.retain(|v| v["name"] != tls);
        if volumes.is_empty() {
            pod.as_object_mut().unwrap().remove("volumes");
        }
    }
    spec
}

fn crd_description(crd: &Value) -> (String, String) {
    let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
    let description = match kind {
        "UpdatePreflight" => {
            "The preflight results for one target release: which checks ran, their findings, and whether an update to it is allowed. The gate creates one per offered target; create one to ask for a run."
        }
        _ => {
            "A check of your own or a vendor's: an image the gate runs as a Job in every preflight run, whose exit code is the check's outcome."
        }
    };
    (kind.to_owned(), description.to_owned())
}

const DESCRIPTION: &str = "\
preflight-gate keeps an OpenShift cluster from starting an update whose preflight checks fail.

It is a validating admission webhook on the ClusterVersion: a change of `spec.desiredUpdate` \
(`oc adm upgrade --to`, the console, GitOps) is allowed only when the target release passes the \
gate's checks: cluster operators healthy and upgradeable, machine config pools, nodes, drain \
capacity and PodDisruptionBudgets, etcd, removed APIs in use, OLM operators' maximum OpenShift \
version, certificates, critical alerts, and checks the release or you declare. The results are \
`UpdatePreflight` objects (`oc get upf`), computed ahead of time for every offered target.

Administrators with the `override` verb can override, and every override is recorded. \
The ClusterRole `preflight-gate-updater` lets people update without being able to override.

The webhook fails closed, and OLM's webhooks carry no match conditions: while the gate is down, \
every change of the ClusterVersion's spec is refused, `oc adm upgrade --clear` included. OLM puts \
back a webhook configuration that is deleted, so the break-glass is to remove the operator, which \
removes its webhook and keeps the CRDs and results: `oc delete subscription preflight-gate -n <namespace>`, \
then `oc delete csv preflight-gate.v<version> -n <namespace>`. Reinstall it to restore the gate.

Documentation: https://github.com/preflight-gate/preflight-gate/blob/main/docs/install.md";

/// A small icon: a gate, in SVG.
const ICON_SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="8" fill="#1f4e79"/><path d="M12 52V20h8v32M44 52V20h8v32M20 28h24M20 38h24" stroke="#fff" stroke-width="5" fill="none"/></svg>"##;

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap()
}

/// bundle/'s README, which says why it may hold no manifests.
const README: &str = "\
# bundle/

The OLM bundle of preflight-gate (`registry+v1`), generated by
`tests/it/bundle.rs` from the openshift overlay; do not edit.

Its ClusterServiceVersion names the gate's image by digest, the released
one that `deploy/release/IMAGE` holds, so `manifests/` is written only
once a release is cut (`deploy/release/cut --manifests-dir deploy/release`,
then `PREFLIGHT_GATE_BLESS=1 cargo test --locked --test it bundle`). Until
then there is no image to name: `manifests/` is absent, and building
`bundle.Dockerfile` fails on it. docs/install.md, \"Install with OLM\".

`after-install.yaml` is not part of the bundle image: it holds what of the
overlay OLM cannot make (the checks' namespace and what runs there, Roles
outside the install namespace, the admission policy, the result key's
empty Secret), for the administrator to apply once after subscribing.
";

/// bundle/after-install.yaml: the objects of the overlay OLM cannot make,
/// as the overlay has them, each saying why it is here.
fn after_install(objects: &[Value]) -> String {
    let mut text = String::from(
        "# Generated by tests/it/bundle.rs from deploy/rendered/openshift.yaml; do not edit.\n\
         # Regenerate: PREFLIGHT_GATE_BLESS=1 cargo test --test it bundle\n\
         #\n\
         # What of the openshift overlay the OLM bundle cannot make, for the administrator\n\
         # to apply once after subscribing, with the gate installed in the namespace\n\
         # preflight-gate (docs/install.md, \"Install with OLM\"):\n\
         #   oc apply -f bundle/after-install.yaml\n\
         # OLM makes no namespace, grants Roles only in the install namespace, applies\n\
         # no ValidatingAdmissionPolicy, and rewrites a bundle's Secret on every upgrade\n\
         # (which would throw the result key away). Until this is applied, the gate runs\n\
         # no check Job and no extraction pod, reads neither admin gates nor acks nor\n\
         # the ingress certificate, writes no Event, and vouches for no result: every\n\
         # target change is refused, saying what is missing.\n",
    );
    for object in objects
        .iter()
        .filter(|o| place(objects, o) == Place::AfterInstall)
    {
        let kind = object["kind"].as_str().unwrap();
        let why = if !OLM_KINDS.contains(&kind) {
            format!("a {kind}: OLM makes none from a bundle")
        } else if kind == "Secret" {
            "the result key's Secret, empty (the gate fills it): OLM would empty it again with every upgrade".to_owned()
        } else {
            format!(
                "in the namespace {}: OLM places objects in the install namespace only",
                namespace_of(object).unwrap()
            )
        };
        text.push_str(&format!("---\n# {why}\n{}", yaml(object)));
    }
    text
}

/// Every file of bundle/, by path relative to it, naming `image` (by
/// digest); without one, only the files that name no image.
pub fn generate(image: Option<&str>) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    files.insert("README.md".into(), README.into());
    let annotations = json!({"annotations": {
        "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
        "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
        "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
        "operators.operatorframework.io.bundle.package.v1": "preflight-gate",
        "operators.operatorframework.io.bundle.channels.v1": "candidate",
        "operators.operatorframework.io.bundle.channel.default.v1": "candidate",
        "com.redhat.openshift.versions": format!("{MIN_OPENSHIFT}"),
    }});
    let header = "# Generated by tests/it/bundle.rs from deploy/rendered/openshift.yaml; do not edit.\n# Regenerate: PREFLIGHT_GATE_BLESS=1 cargo test --test it bundle\n";
    files.insert(
        "metadata/annotations.yaml".into(),
        format!("{header}{}", yaml(&annotations)),
    );
    let mut dockerfile = String::from(
        "# The bundle image: `podman build -f bundle.Dockerfile -t <registry>/preflight-gate-bundle:<version> bundle/`.\n\
         # Generated by tests/it/bundle.rs; do not edit. Its labels are metadata/annotations.yaml.\n\
         # manifests/ is there once a release names the image (README.md).\n\
         FROM scratch\n",
    );
    for (key, value) in annotations["annotations"].as_object().unwrap() {
        dockerfile.push_str(&format!("LABEL {key}={value}\n"));
    }
    dockerfile.push_str("COPY manifests /manifests/\nCOPY metadata /metadata/\n");
    files.insert("bundle.Dockerfile".into(), dockerfile);
    let objects = rendered("openshift");
    files.insert(AFTER_INSTALL.into(), after_install(&objects));
    let Some(image) = image else {
        return files;
    };
    let digest = image.rsplit_once("@sha256:").map(|(_, d)| d).unwrap_or("");
    assert!(
        digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
        "the bundle names its image by digest, not {image}"
    );

    let deployment = find(&objects, "Deployment", "preflight-gate");
    let webhook_config = find(&objects, "ValidatingWebhookConfiguration", "preflight-gate");
    let service = find(&objects, "Service", "preflight-gate");
    let namespace = find(&objects, "Namespace", NAMESPACE);
    let crds: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();

    let (gate_cluster, gate_own) = rules_of(&objects);

    let webhook_definitions: Vec<Value> = webhook_config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|webhook| {
            let webhook_port = service["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["port"] == webhook["clientConfig"]["service"]["port"])
                .expect("the webhook's Service port");
            json!({
                "type": "ValidatingAdmissionWebhook",
                "generateName": webhook["name"],
                "deploymentName": deployment["metadata"]["name"],
                "containerPort": webhook_port["port"],
                "targetPort": 8443,
                "webhookPath": webhook["clientConfig"]["service"]["path"],
                "admissionReviewVersions": webhook["admissionReviewVersions"],
                "failurePolicy": webhook["failurePolicy"],
                "matchPolicy": "Equivalent",
                "rules": webhook["rules"],
                "sideEffects": webhook["sideEffects"],
                "timeoutSeconds": webhook["timeoutSeconds"],
            })
        })
        .collect();

    let suggested_namespace = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": namespace["metadata"]["labels"]},
    });
    let examples = json!([
        {
            "apiVersion": "preflight.dev/v1alpha1",
            "kind": "UpdatePreflight",
            "metadata": {"name": "manual-4.15.3"},
            "spec": {
                "version": "4.15.3",
                "image": "quay.io/openshift-release-dev/ocp-release:4.15.3-x86_64"
            }
        }
    ]);
    let owned: Vec<Value> = crds
        .iter()
        .map(|crd| {
            let (kind, description) = crd_description(crd);
            json!({
                "name": crd["metadata"]["name"],
                "version": crd["spec"]["versions"][0]["name"],
                "kind": kind,
                "displayName": kind,
                "description": description,
            })
        })
        .collect();
    // OperatorHub's architecture and OS filters: what the Deployment's node
    // affinity admits, which is what the release image is built for.
    let mut labels = deployment["metadata"]["labels"].clone();
    let admitted = |key: &str| -> Vec<String> {
        deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"]
            .as_array()
            .expect("the Deployment admits named architectures")
            .iter()
            .filter(|e| e["key"] == key && e["operator"] == "In")
            .flat_map(|e| e["values"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    for arch in admitted("kubernetes.io/arch") {
        labels[format!("operatorframework.io/arch.{arch}")] = "supported".into();
    }
    for os in admitted("kubernetes.io/os") {
        labels[format!("operatorframework.io/os.{os}")] = "supported".into();
    }
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": format!("preflight-gate.v{VERSION}"),
            "labels": labels,
            "annotations": {
                "alm-examples": serde_json::to_string_pretty(&examples).unwrap(),
                "capabilities": "Basic Install",
                "categories": "Security",
                "containerImage": image,
                "description": "Refuses a change of the ClusterVersion's update target while the target release fails its preflight checks.",
                "repository": "https://github.com/preflight-gate/preflight-gate",
                "support": "preflight-gate project",
                "operatorframework.io/suggested-namespace": NAMESPACE,
                "operatorframework.io/suggested-namespace-template": suggested_namespace.to_string(),
                // The console labels the namespace for cluster monitoring.
                "operatorframework.io/cluster-monitoring": "true",
                "features.operators.openshift.io/disconnected": "true",
                "features.operators.openshift.io/fips-compliant": "false",
                "features.operators.openshift.io/proxy-aware": "false",
                "features.operators.openshift.io/tls-profiles": "false",
                "features.operators.openshift.io/token-auth-aws": "false",
                "features.operators.openshift.io/token-auth-azure": "false",
                "features.operators.openshift.io/token-auth-gcp": "false",
                "features.operators.openshift.io/cnf": "false",
                "features.operators.openshift.io/cni": "false",
                "features.operators.openshift.io/csi": "false",
            },
        },
        "spec": {
            "displayName": "preflight-gate",
            "description": DESCRIPTION,
            "version": VERSION,
            "minKubeVersion": MIN_KUBE,
            "maturity": "alpha",
            "provider": {"name": "preflight-gate project", "url": "https://github.com/preflight-gate/preflight-gate"},
            "links": [
                {"name": "Source", "url": "https://github.com/preflight-gate/preflight-gate"},
                {"name": "Install guide", "url": "https://github.com/preflight-gate/preflight-gate/blob/main/docs/install.md"},
            ],
            "keywords": ["openshift", "update", "upgrade", "preflight", "admission webhook"],
            "icon": [{"base64data": base64(ICON_SVG.as_bytes()), "mediatype": "image/svg+xml"}],
            // Its own namespace only: the gate is cluster-wide by nature
            // (one webhook, one ClusterVersion), and the global
            // OperatorGroup of openshift-operators, AllNamespaces, must not
            // install it beside every other operator.
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": false},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": false},
            ],
            "customresourcedefinitions": {"owned": owned},
            "install": {
                "strategy": "deployment",
                "spec": {
                    "clusterPermissions": [{"serviceAccountName": SA, "rules": gate_cluster}],
                    "permissions": [{"serviceAccountName": SA, "rules": gate_own}],
                    "deployments": [{
                        "name": deployment["metadata"]["name"],
                        "label": deployment["metadata"]["labels"],
                        "spec": olm_deployment(deployment, image),
                    }],
                },
            },
            "webhookdefinitions": webhook_definitions,
            "relatedImages": [{"name": "preflight-gate", "image": image}],
        },
    });

    let mut put = |path: String, value: &Value| {
        files.insert(path, format!("{header}{}", yaml(value)));
    };
    put(
        "manifests/preflight-gate.clusterserviceversion.yaml".into(),
        &csv,
    );
    for crd in &crds {
        put(
            format!(
                "manifests/{}.crd.yaml",
                crd["metadata"]["name"].as_str().unwrap()
            ),
            crd,
        );
    }
    // The metrics Service (OLM makes the webhook's own), scraped over HTTP.
    let mut metrics = unplaced(service);
    metrics["metadata"]["name"] = "preflight-gate-metrics".into();
    metrics["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    metrics["spec"]["ports"]
        .as_array_mut()
        .unwrap()
        .retain(|p| p["name"] == "metrics");
    put(
        "manifests/preflight-gate-metrics.service.yaml".into(),
        &metrics,
    );
    // Every other object of the overlay that OLM can place, as it is in
    // the install namespace; the ServiceMonitor scrapes the metrics Service
    // over HTTP.
    let mut written = std::collections::BTreeSet::new();
    for object in objects.iter().filter(|o| {
        place(&objects, o) == Place::Manifest && o["kind"] != "CustomResourceDefinition"
    }) {
        let mut manifest = unplaced(object);
        if object["kind"] == "ServiceMonitor" {
            let spec = &mut manifest["spec"];
            spec.as_object_mut().unwrap().remove("namespaceSelector");
            spec["selector"] = json!({"matchLabels": metrics["metadata"]["labels"]});
            let endpoint = &mut spec["endpoints"][0];
            endpoint["scheme"] = "http".into();
            endpoint.as_object_mut().unwrap().remove("tlsConfig");
        }
        let path = format!(
            "manifests/{}.{}.yaml",
            object["metadata"]["name"].as_str().unwrap(),
            object["kind"].as_str().unwrap().to_ascii_lowercase()
        );
        assert!(written.insert(path.clone()), "{path} twice");
        put(path, &manifest);
    }

    files
}

#[test]
fn the_bundle_is_generated_from_the_openshift_overlay() {
    crate::golden::tree("bundle", &generate(released_image().as_deref()), "bundle");
}

#[test]
fn the_bundle_keeps_the_overlays_promises() {
    let files = generate(Some(TEST_IMAGE));
    let csv: Value =
        serde_saphyr::from_str(&files["manifests/preflight-gate.clusterserviceversion.yaml"])
            .unwrap();
    let annotations = &csv["metadata"]["annotations"];
    assert_eq!(
        annotations["operatorframework.io/cluster-monitoring"],
        "true"
    );
    assert_eq!(csv["spec"]["version"], VERSION);
    let deployment = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
    let template = &deployment["template"];
    assert_eq!(
        template["spec"]["priorityClassName"],
        "openshift-user-critical"
    );
    assert_eq!(
        template["metadata"]["annotations"]["openshift.io/required-scc"],
        "restricted-v2"
    );
    assert_eq!(deployment["replicas"], 2);
    // The CRDs are owned APIs, each shipped.
    let owned = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .unwrap();
    assert_eq!(owned.len(), 2);
    for api in owned {
        let name = api["name"].as_str().unwrap();
        assert!(
            files.contains_key(&format!("manifests/{name}.crd.yaml")),
            "{name}"
        );
    }
    // The webhook is the overlay's, with OLM's certificate.
    let webhook = &csv["spec"]["webhookdefinitions"][0];
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["sideEffects"], "NoneOnDryRun");
    assert_eq!(webhook["webhookPath"], "/validate/clusterversion");
    assert_eq!(webhook["rules"][0]["resources"], json!(["clusterversions"]));
    let env = template["spec"]["containers"][0]["env"].as_array().unwrap();
    let cert = env
        .iter()
        .find(|e| e["name"] == "PREFLIGHT_GATE_TLS_CERT")
        .unwrap();
    assert_eq!(cert["value"], format!("{OLM_CERT_DIR}/tls.crt"));
    // The image by digest, the same everywhere the CSV names it.
    let container = &template["spec"]["containers"][0];
    assert_eq!(container["image"], TEST_IMAGE);
    assert_eq!(annotations["containerImage"], TEST_IMAGE);
    assert_eq!(
        csv["spec"]["relatedImages"],
        json!([{"name": "preflight-gate", "image": TEST_IMAGE}])
    );
    assert_eq!(
        annotations["features.operators.openshift.io/disconnected"],
        "true"
    );
    // Its own namespace only, so the global OperatorGroup of
    // openshift-operators (AllNamespaces) cannot install it.
    let modes = csv["spec"]["installModes"].as_array().unwrap();
    let supported: Vec<&str> = modes
        .iter()
        .filter(|m| m["supported"] == true)
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(supported, ["OwnNamespace"]);
    assert_eq!(modes.len(), 4, "every install mode is said");
    assert_eq!(
        annotations["operatorframework.io/suggested-namespace"],
        NAMESPACE
    );
    // The gate's account has under OLM exactly what the overlay grants it
    // cluster-wide and in its own namespace: no Role elsewhere is widened
    // to the cluster (no read of ConfigMaps, no Events anywhere), and no
    // pod or Job may it make beside itself.
    let objects = rendered("openshift");
    let overlay_rules = |namespaced: bool| -> Vec<Value> {
        objects
            .iter()
            .filter(|b| {
                (b["kind"] == "ClusterRoleBinding" || b["kind"] == "RoleBinding")
                    && binds_the_gate_alone(b)
                    && match namespace_of(b) {
                        Some(n) => namespaced && n == NAMESPACE,
                        None => !namespaced,
                    }
            })
            .flat_map(|b| {
                let role = objects
                    .iter()
                    .find(|o| {
                        o["kind"] == b["roleRef"]["kind"]
                            && o["metadata"]["name"] == b["roleRef"]["name"]
                            && namespace_of(o) == namespace_of(b)
                    })
                    .unwrap();
                role["rules"].as_array().unwrap().clone()
            })
            .collect()
    };
    let install = &csv["spec"]["install"]["spec"];
    let cluster_permissions = install["clusterPermissions"].as_array().unwrap();
    assert_eq!(cluster_permissions.len(), 1, "the gate's account alone");
    assert_eq!(cluster_permissions[0]["serviceAccountName"], SA);
    assert_eq!(
        cluster_permissions[0]["rules"].as_array().unwrap(),
        &overlay_rules(false)
    );
    assert_eq!(
        install["permissions"][0]["rules"].as_array().unwrap(),
        &overlay_rules(true)
    );
    for rule in cluster_permissions[0]["rules"].as_array().unwrap() {
        let resources = rule["resources"].as_array().unwrap();
        for kept in ["configmaps", "events"] {
            assert!(
                !resources.contains(&json!(kept)),
                "cluster-wide {kept}: {rule}"
            );
        }
        let writes = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| !["get", "list", "watch"].contains(&v.as_str().unwrap()));
        for kept in ["pods", "jobs", "secrets"] {
            assert!(
                !(writes && resources.contains(&json!(kept))),
                "cluster-wide writes of {kept}: {rule}"
            );
        }
    }
    for rule in install["permissions"][0]["rules"].as_array().unwrap() {
        let resources = rule["resources"].as_array().unwrap();
        assert!(
            !resources.contains(&json!("pods")) && !resources.contains(&json!("jobs")),
            "pods or Jobs beside the gate: {rule}"
        );
    }
    // The check Jobs run in their own namespace, as the overlay says.
    let jobs_namespace = env
        .iter()
        .find(|e| e["name"] == "PREFLIGHT_GATE_JOBS_NAMESPACE")
        .expect("the Deployment names the checks' namespace");
    assert_eq!(jobs_namespace["value"], CHECKS_NAMESPACE);
    // Only the API server reaches the webhook port: the overlay's
    // NetworkPolicy, shipped.
    let network_policy: Value =
        serde_saphyr::from_str(&files["manifests/preflight-gate.networkpolicy.yaml"]).unwrap();
    let overlay_policy = find(&objects, "NetworkPolicy", "preflight-gate");
    assert_eq!(network_policy["spec"], overlay_policy["spec"]);
    assert!(network_policy["metadata"].get("namespace").is_none());
    // OLM's webhook descriptions have no matchConditions: the rules are the
    // overlay's, which name the ClusterVersion alone.
    assert!(webhook.get("matchConditions").is_none());
    let overlay = &crate::deploy::rendered("openshift")
        .into_iter()
        .find(|o| o["kind"] == "ValidatingWebhookConfiguration")
        .unwrap()["webhooks"][0];
    assert_eq!(webhook["rules"], overlay["rules"]);
    assert_eq!(
        webhook["rules"],
        json!([{"apiGroups": ["config.openshift.io"], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["clusterversions"], "scope": "Cluster"}])
    );
    // The gate never grants itself overrides, under OLM either.
    for permissions in ["clusterPermissions", "permissions"] {
        for entry in csv["spec"]["install"]["spec"][permissions]
            .as_array()
            .unwrap()
        {
            for rule in entry["rules"].as_array().unwrap() {
                let verbs = rule["verbs"].as_array().unwrap();
                assert!(!verbs.contains(&json!("override")), "{rule}");
                assert!(!verbs.contains(&json!("*")), "{rule}");
            }
        }
    }
}

/// Parity with the openshift overlay (docs/security.md, M5): every object
/// of its rendering is in exactly one place under OLM, made from the CSV, a
/// manifest of the bundle, or bundle/after-install.yaml; every manifest is
/// of a kind OLM applies; and the after-install file holds only what OLM
/// cannot make: kinds it does not apply, objects outside the install
/// namespace, and the result key's Secret.
#[test]
fn every_object_of_the_overlay_is_in_one_place_under_olm() {
    let objects = rendered("openshift");
    let files = generate(Some(TEST_IMAGE));
    let manifests: Vec<Value> = files
        .iter()
        .filter(|(path, _)| path.starts_with("manifests/"))
        .map(|(_, text)| serde_saphyr::from_str(text).unwrap())
        .collect();
    for manifest in &manifests {
        let kind = manifest["kind"].as_str().unwrap();
        assert!(OLM_KINDS.contains(&kind), "OLM does not apply a {kind}");
        assert!(
            manifest["metadata"].get("namespace").is_none(),
            "OLM places {kind} {} in the install namespace",
            manifest["metadata"]["name"]
        );
    }
    let after: Vec<Value> = crate::deploy::objects(&files[AFTER_INSTALL]);
    let csv = &manifests
        .iter()
        .find(|m| m["kind"] == "ClusterServiceVersion")
        .unwrap()["spec"];
    let key = |o: &Value| {
        (
            o["kind"].as_str().unwrap().to_owned(),
            o["metadata"]["name"].as_str().unwrap().to_owned(),
        )
    };
    let mut places = BTreeMap::new();
    for object in &objects {
        let (kind, name) = key(object);
        let shipped = manifests.iter().filter(|m| key(m) == key(object)).count();
        let after_install = after.iter().filter(|a| *a == object).count();
        let in_csv = match place(&objects, object) {
            Place::Csv => 1,
            _ => 0,
        };
        assert_eq!(
            shipped + after_install + in_csv,
            1,
            "{kind} {name}: {shipped} manifests, {after_install} in {AFTER_INSTALL}, {in_csv} in the CSV"
        );
        if in_csv == 1 {
            // What the CSV stands for is in it.
            let found = match kind.as_str() {
                "Deployment" => csv["install"]["spec"]["deployments"][0]["name"] == name,
                "ValidatingWebhookConfiguration" => {
                    let names = |list: &Value, key: &str| -> Vec<Value> {
                        list.as_array()
                            .unwrap()
                            .iter()
                            .map(|w| w[key].clone())
                            .collect()
                    };
                    names(&csv["webhookdefinitions"], "generateName")
                        == names(&object["webhooks"], "name")
                }
                "ServiceAccount" => {
                    csv["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"]
                        == name
                }
                // OLM's webhook Service; the metrics port is a manifest.
                "Service" => files.contains_key("manifests/preflight-gate-metrics.service.yaml"),
                "Namespace" => {
                    let annotations = &manifests
                        .iter()
                        .find(|m| m["kind"] == "ClusterServiceVersion")
                        .unwrap()["metadata"]["annotations"];
                    annotations["operatorframework.io/suggested-namespace"] == name
                }
                // Roles and bindings: their rules, checked against the
                // overlay by the_bundle_keeps_the_overlays_promises.
                _ => ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
                    .contains(&kind.as_str()),
            };
            assert!(found, "{kind} {name} is not in the CSV");
        }
        if kind == "CustomResourceDefinition" {
            assert!(
                csv["customresourcedefinitions"]["owned"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|o| o["name"] == name),
                "the CSV does not own {name}"
            );
        }
        *places
            .entry(format!("{:?}", place(&objects, object)))
            .or_insert(0) += 1;
    }
    // What is only under OLM: the metrics Service; nothing else.
    for manifest in &manifests {
        let (kind, name) = key(manifest);
        let known = objects.iter().any(|o| key(o) == key(manifest))
            || kind == "ClusterServiceVersion"
            || (kind == "Service" && name == "preflight-gate-metrics");
        assert!(known, "{kind} {name} is in no overlay");
    }
    for object in &after {
        let kind = object["kind"].as_str().unwrap();
        let elsewhere = namespace_of(object).is_some_and(|n| n != NAMESPACE);
        let key_secret = kind == "Secret" && object["metadata"]["name"] == KEY_SECRET;
        assert!(
            !OLM_KINDS.contains(&kind) || elsewhere || key_secret,
            "{kind} {} could be in the bundle",
            object["metadata"]["name"]
        );
    }
    // What the file holds: the checks' namespace, what runs there and its
    // policy, the Roles OLM cannot grant, the key's Secret (no key in it).
    for (kind, name) in [
        ("Namespace", CHECKS_NAMESPACE),
        ("ServiceAccount", "preflight-check"),
        ("Role", "preflight-gate-check-jobs"),
        ("ValidatingAdmissionPolicy", "preflight-gate-checks"),
        ("ValidatingAdmissionPolicyBinding", "preflight-gate-checks"),
        ("Role", "preflight-gate-events"),
        ("Role", "preflight-gate-admin-gates"),
        ("Role", "preflight-gate-release-verification"),
        ("Secret", KEY_SECRET),
    ] {
        let found = after
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{AFTER_INSTALL} has no {kind} {name}"));
        if kind == "Secret" {
            assert!(found.get("data").is_none(), "{found}");
        }
    }
    eprintln!("{places:?}");
    assert!(places.len() == 3, "{places:?}");
}

/// bundle/after-install.yaml is a stream of YAML documents `oc apply -f`
/// takes, says how to apply it, and says before each object why OLM does
/// not make it.
#[test]
fn the_after_install_file_parses_and_each_object_says_why_it_is_there() {
    let files = generate(None);
    let text = &files[AFTER_INSTALL];
    assert!(
        text.contains("oc apply -f bundle/after-install.yaml"),
        "{text}"
    );
    let docs: Vec<&str> = text.split("\n---\n").skip(1).collect();
    let objects = crate::deploy::objects(text);
    assert_eq!(docs.len(), objects.len());
    for doc in docs {
        let why = doc.lines().next().unwrap();
        assert!(
            why.starts_with("# ") && why.contains(": "),
            "an object without its reason: {doc}"
        );
    }
}

/// tests/olm/build's validator, built once (cached outside the repository).
/// The `job` label the Prometheus Operator gives the targets of a
/// ServiceMonitor that selects `service`: the value of the Service's label
/// named by `spec.jobLabel`, else the Service's name.
fn scrape_job(monitor: &Value, service: &Value) -> String {
    monitor["spec"]["jobLabel"]
        .as_str()
        .and_then(|label| service["metadata"]["labels"][label].as_str())
        .unwrap_or_else(|| service["metadata"]["name"].as_str().unwrap())
        .to_owned()
}

/// Whether `monitor` selects `service` (matchLabels, the only kind used).
fn selects(monitor: &Value, service: &Value) -> bool {
    monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| &service["metadata"]["labels"][k] == v)
        && service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == monitor["spec"]["endpoints"][0]["port"])
}

/// Every series selector in the rule's expressions, as (metric, the value
/// of its `label="…"` matcher), for the selectors that have one.
fn matchers(rule: &Value, label: &str) -> Vec<(String, String)> {
    let needle = format!("{label}=\"");
    let mut found = Vec::new();
    let groups = rule["spec"]["groups"].as_array().unwrap();
    for expr in groups
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["expr"].as_str().unwrap())
    {
        for (before, after) in expr.split('{').zip(expr.split('{').skip(1)) {
            let metric: String = before
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let selector = after.split('}').next().unwrap();
            if let Some(value) = selector.split(needle.as_str()).nth(1) {
                found.push((metric, value.split('"').next().unwrap().to_owned()));
            }
        }
    }
    found
}

/// A ServiceMonitor's targets get the job its Service makes, and every
/// alert selects that job: otherwise PreflightGateDown (critical) fires
/// from the first minute and CriticalAlertsFiring blocks every update.
/// Checked for the bundle (its metrics Service is not the webhook's, and
/// OLM installs it in a namespace of the administrator's choosing) and
/// the openshift overlay.
#[test]
fn every_alert_selects_the_job_and_namespace_its_scrape_makes() {
    let files = generate(Some(TEST_IMAGE));
    let parse = |path: &str| -> Value { serde_saphyr::from_str(&files[path]).unwrap() };
    let mut setups = vec![(
        "bundle".to_owned(),
        parse("manifests/preflight-gate.servicemonitor.yaml"),
        vec![parse("manifests/preflight-gate-metrics.service.yaml")],
        parse("manifests/preflight-gate.prometheusrule.yaml"),
    )];
    // The one overlay that ships monitoring; the others leave it to
    // deploy/monitoring/, applied as it is.
    let objects = rendered("openshift");
    setups.push((
        "openshift".to_owned(),
        find(&objects, "ServiceMonitor", "preflight-gate").clone(),
        objects
            .iter()
            .filter(|o| o["kind"] == "Service")
            .cloned()
            .collect(),
        find(&objects, "PrometheusRule", "preflight-gate").clone(),
    ));
    for (name, monitor, services, rule) in setups {
        let scraped: Vec<&Value> = services.iter().filter(|s| selects(&monitor, s)).collect();
        assert_eq!(
            scraped.len(),
            1,
            "{name}: the ServiceMonitor scrapes one Service"
        );
        let job = scrape_job(&monitor, scraped[0]);
        // The gate's own series and its targets' `up` come from the scrape;
        // others (kube-state-metrics' `kube_…`) from their own job.
        let jobs: Vec<(String, String)> = matchers(&rule, "job")
            .into_iter()
            .filter(|(metric, _)| metric.starts_with("preflight_gate_") || metric == "up")
            .collect();
        assert!(jobs.len() >= 8, "{name}: {jobs:?}");
        for (metric, selected) in jobs {
            assert_eq!(
                selected, job,
                "{name}: an alert selects {metric} of job {selected:?}, the scrape makes {job:?}"
            );
        }
        // No series is pinned to a namespace, and the bundle's monitor looks
        // in its own: the alerts hold wherever the gate is installed.
        let pinned = matchers(&rule, "namespace");
        assert!(pinned.is_empty(), "{name}: {pinned:?}");
        if name == "bundle" {
            assert!(monitor["spec"].get("namespaceSelector").is_none());
        }
    }
}

fn validator() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(format!("{ROOT}/tests/olm/build"))
            .output()
            .expect("tests/olm/build runs");
        assert!(
            out.status.success(),
            "tests/olm/build failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

#[test]
fn the_operator_frameworks_validators_accept_the_bundle() {
    // The bundle of this tree with the test image, and bundle/ itself once
    // a release has written its manifests.
    let dir = tempfile::Builder::new()
        .prefix("bundle-")
        .tempdir()
        .unwrap();
    for (path, text) in generate(Some(TEST_IMAGE)) {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut bundles = vec![dir.path().to_path_buf()];
    if released_image().is_some() {
        bundles.push(format!("{ROOT}/bundle").into());
    }
    for bundle in bundles {
        validate(&bundle);
    }
}

fn validate(bundle: &std::path::Path) {
    // The removed-API check cannot tell an RBAC rule (which names a group
    // and resource, never a version) from a use of a removed version: it
    // flags the gate's rules on events.k8s.io events and policy
    // poddisruptionbudgets. Accepted, and only where it points at
    // permissions; the manifests themselves are checked below.
    let out = Command::new(validator())
        .args(["-allow-warning", "Migrate the API(s) for"])
        .arg(bundle)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}");
    for line in report.lines().filter(|l| l.contains("(accepted)")) {
        let paths: Vec<&str> = line
            .split('"')
            .filter(|p| p.starts_with("ClusterServiceVersion."))
            .collect();
        assert!(!paths.is_empty(), "{line}");
        assert!(
            paths
                .iter()
                .all(|p| p.contains(".ClusterPermissions[") || p.contains(".Permissions[")),
            "a removed API outside RBAC rules: {line}"
        );
    }
    for (path, text) in generate(Some(TEST_IMAGE)) {
        for removed in [
            "policy/v1beta1",
            "events.k8s.io/v1beta1",
            "apiextensions.k8s.io/v1beta1",
        ] {
            assert!(
                !text.contains(&format!("apiVersion: {removed}")),
                "{path}: {removed}"
            );
        }
    }
    assert!(
        out.status.success(),
        "{} does not validate:\n{report}{}",
        bundle.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    for suite in [
        "default",
        "operatorhub",
        "openshift",
        "objects",
        "good-practices",
    ] {
        assert!(
            report.contains(&format!("{suite}: ok")),
            "{suite}:\n{report}"
        );
    }
}

#[test]
fn the_validators_catch_a_broken_bundle() {
    // A CSV that owns a CRD the bundle does not ship, with a capability
    // level OperatorHub does not know: the validators must say so, or their
    // "ok" above means nothing.
    // Not a hidden directory: the bundle loader skips those.
    let dir = tempfile::Builder::new()
        .prefix("bundle-")
        .tempdir()
        .unwrap();
    let files = generate(Some(TEST_IMAGE));
    for (path, text) in &files {
        if path.ends_with(".crd.yaml") && path.contains("updatepreflights") {
            continue;
        }
        let text = if path.ends_with("clusterserviceversion.yaml") {
            text.replace("capabilities: Basic Install", "capabilities: Fully Magic")
        } else {
            text.clone()
        };
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let out = Command::new(validator()).arg(dir.path()).output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "a broken bundle passed:\n{report}");
    assert!(
        report.contains(r#"owned CRD "preflight.dev/v1alpha1, Kind=UpdatePreflight" not found"#),
        "{report}"
    );
    assert!(report.contains("Fully Magic"), "{report}");
}
