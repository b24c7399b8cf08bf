//! The Kubernetes objects checks read (Nodes, Pods, PodDisruptionBudgets,
//! ConfigMaps, TLS Secrets), as lean types: a Pod keeps its node, labels,
//! owner kind and summed requests, and nothing else, so that 150,000 of
//! them fit in a few tens of megabytes.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use super::openshift::{Condition, Metadata, null_as_default};
use super::quantity::{Resources, deserialize_resources};
use super::selector::LabelSelector;

/// A Node.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    pub metadata: Metadata,
    pub spec: NodeSpec,
    pub status: NodeStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeSpec {
    pub unschedulable: bool,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    #[serde(deserialize_with = "deserialize_resources")]
    pub allocatable: Resources,
    /// The node's host names and IPs, as an APIRequestCount names the API
    /// server that served a request.
    #[serde(deserialize_with = "null_as_default")]
    pub addresses: Vec<NodeAddress>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeAddress {
    pub address: String,
}

/// The annotation the machine-config daemon sets while it drains a node for
/// an update (`drain-<config>`; `uncordon-<config>` once done).
pub(crate) const DESIRED_DRAIN: &str = "machineconfiguration.openshift.io/desiredDrain";

/// The machine-config daemon's annotations of a node: its state, why
/// (when Degraded), and the rendered configuration it runs.
pub(crate) const MCO_STATE: &str = "machineconfiguration.openshift.io/state";
pub(crate) const MCO_REASON: &str = "machineconfiguration.openshift.io/reason";
pub(crate) const CURRENT_CONFIG: &str = "machineconfiguration.openshift.io/currentConfig";

impl Node {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    pub fn ready(&self) -> bool {
        super::openshift::is_true(&self.status.conditions, "Ready")
    }

    /// The machine-config daemon's state of the node
    /// (`machineconfiguration.openshift.io/state`: `Done`, `Working`,
    /// `Degraded`), when it says.
    pub fn mco_state(&self) -> Option<&str> {
        self.metadata.annotations.get(MCO_STATE).map(String::as_str)
    }

    /// The rendered configuration the node runs
    /// (`machineconfiguration.openshift.io/currentConfig`).
    pub fn current_config(&self) -> Option<&str> {
        self.metadata
            .annotations
            .get(CURRENT_CONFIG)
            .map(String::as_str)
    }

    /// The machine-config daemon's message when the node's drain is
    /// failing now ("failed to drain node … after 1 hour", with the state
    /// `Degraded`).
    pub fn drain_failure(&self) -> Option<&str> {
        let reason = self.metadata.annotations.get(MCO_REASON)?;
        (self.mco_state() == Some("Degraded") && reason.contains("failed to drain"))
            .then_some(reason.as_str())
    }

    /// Cordoned by the machine-config daemon for an update, rather than by hand.
    pub(crate) fn drained_by_mco(&self) -> bool {
        self.metadata
            .annotations
            .get(DESIRED_DRAIN)
            .is_some_and(|d| d.starts_with("drain-"))
    }
}

/// A Pod, reduced to what the drain checks need.
#[derive(Clone, Debug, Default)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub node_name: String,
    pub labels: BTreeMap<String, String>,
    /// Kind of the controlling owner (`ReplicaSet`, `DaemonSet`, ...).
    pub owner_kind: Option<String>,
    /// Requests of the pod: the sum over containers, or the largest init
    /// container if that is more.
    pub requests: Resources,
    /// Being deleted (`metadata.deletionTimestamp`): on its way out, as a
    /// rollout replaces it, so no drain waits for it and no node keeps it.
    pub terminating: bool,
    /// `spec.terminationGracePeriodSeconds`, when set (Kubernetes takes 30).
    pub termination_grace_period_seconds: Option<i64>,
    /// Its `Ready` condition is `False`: the eviction API may let such a
    /// pod go past a spent budget (see [`PodDisruptionBudget::evicts_unready`]).
    /// A pod whose status says nothing counts as ready.
    pub unready: bool,
    /// `spec.nodeSelector`: the labels a node must have to run it.
    pub node_selector: BTreeMap<String, String>,
    /// The pod's required pod anti-affinity terms
    /// (`requiredDuringSchedulingIgnoredDuringExecution`).
    pub required_anti_affinity: Vec<AntiAffinityTerm>,
}

/// One required pod anti-affinity term: no two pods it selects share a
/// value of `topology_key`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct AntiAffinityTerm {
    pub label_selector: Option<LabelSelector>,
    pub topology_key: String,
    /// The namespaces whose pods it selects; the pod's own when empty.
    #[serde(deserialize_with = "null_as_default")]
    pub namespaces: Vec<String>,
}

impl Pod {
    /// DaemonSet pods stay on their node during a drain.
    pub(crate) fn moves_on_drain(&self) -> bool {
        self.owner_kind.as_deref() != Some("DaemonSet")
    }

    /// Whether a drain evicts it: not a DaemonSet's, not a static pod's
    /// mirror (owned by its Node), not already terminating (finished pods
    /// are never read).
    pub fn evicted_by_drain(&self) -> bool {
        self.moves_on_drain() && self.owner_kind.as_deref() != Some("Node") && !self.terminating
    }
}

/// Reads a Pod; returns `None` for pods that have finished (Succeeded or
/// Failed), which hold no resources and need no disruption budget.
pub(crate) fn read_pod<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Pod>, D::Error> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Raw {
        metadata: RawMeta,
        spec: RawSpec,
        status: RawStatus,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct RawMeta {
        name: String,
        namespace: String,
        #[serde(deserialize_with = "null_as_default")]
        labels: BTreeMap<String, String>,
        #[serde(deserialize_with = "null_as_default")]
        owner_references: Vec<Owner>,
        deletion_timestamp: Option<String>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Owner {
        kind: String,
        controller: Option<bool>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct RawSpec {
        node_name: String,
        termination_grace_period_seconds: Option<i64>,
        #[serde(deserialize_with = "null_as_default")]
        node_selector: BTreeMap<String, String>,
        affinity: Option<Affinity>,
        #[serde(deserialize_with = "null_as_default")]
        containers: Vec<Container>,
        #[serde(deserialize_with = "null_as_default")]
        init_containers: Vec<Container>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Affinity {
        pod_anti_affinity: Option<PodAntiAffinity>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct PodAntiAffinity {
        #[serde(
            rename = "requiredDuringSchedulingIgnoredDuringExecution",
            deserialize_with = "null_as_default"
        )]
        required: Vec<AntiAffinityTerm>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Container {
        resources: ContainerResources,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ContainerResources {
        #[serde(deserialize_with = "deserialize_resources")]
        requests: Resources,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RawStatus {
        phase: String,
        #[serde(deserialize_with = "null_as_default")]
        conditions: Vec<Condition>,
    }

    let raw = Raw::deserialize(deserializer)?;
    if matches!(raw.status.phase.as_str(), "Succeeded" | "Failed") {
        return Ok(None);
    }
    let sum = raw
        .spec
        .containers
        .iter()
        .fold(Resources::default(), |a, c| a + c.resources.requests);
    let init = raw
        .spec
        .init_containers
        .iter()
        .fold(Resources::default(), |a, c| a.max(c.resources.requests));
    let owners = raw.metadata.owner_references;
    let owner_kind = owners
        .iter()
        .find(|o| o.controller == Some(true))
        .or(owners.first())
        .map(|o| o.kind.clone());
    Ok(Some(Pod {
        namespace: raw.metadata.namespace,
        name: raw.metadata.name,
        node_name: raw.spec.node_name,
        labels: raw.metadata.labels,
        owner_kind,
        requests: sum.max(init),
        terminating: raw.metadata.deletion_timestamp.is_some(),
        termination_grace_period_seconds: raw.spec.termination_grace_period_seconds,
        unready: crate::model::meta::condition(&raw.status.conditions, "Ready")
            .is_some_and(|c| c.status == "False"),
        node_selector: raw.spec.node_selector,
        required_anti_affinity: raw
            .spec
            .affinity
            .and_then(|a| a.pod_anti_affinity)
            .map(|a| a.required)
            .unwrap_or_default(),
    }))
}

/// A `policy/v1` PodDisruptionBudget.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct PodDisruptionBudget {
    pub metadata: Metadata,
    pub spec: PdbSpec,
    pub status: PdbStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
#[serde(rename_all = "camelCase")]
pub struct PdbSpec {
    pub selector: Option<LabelSelector>,
    /// `IfHealthyBudget` (Kubernetes' default when unset) or `AlwaysAllow`.
    pub unhealthy_pod_eviction_policy: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PdbStatus {
    pub disruptions_allowed: i64,
    pub expected_pods: i64,
    pub current_healthy: i64,
    pub desired_healthy: i64,
}

impl PodDisruptionBudget {
    /// Whether the eviction API lets an unready pod of this budget go even
    /// when no disruption is allowed, as Kubernetes judges it: always under
    /// `AlwaysAllow`; under `IfHealthyBudget` (the default) only while the
    /// budget's application is not itself disrupted (as many healthy pods
    /// as it needs).
    pub fn evicts_unready(&self) -> bool {
        self.spec.unhealthy_pod_eviction_policy.as_deref() == Some("AlwaysAllow")
            || (self.status.desired_healthy > 0
                && self.status.current_healthy >= self.status.desired_healthy)
    }
}

/// A ConfigMap. Only the ones checks read are kept (see `ClusterView`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConfigMap {
    pub metadata: Metadata,
    #[serde(deserialize_with = "null_as_default")]
    pub data: BTreeMap<String, String>,
}

/// A `kubernetes.io/tls` Secret, reduced to its certificate chain (PEM).
/// The private key is never kept.
#[derive(Clone, Debug, Default)]
pub struct TlsSecret {
    pub namespace: String,
    pub name: String,
    /// `tls.crt`, decoded from base64; empty when it is missing or not base64.
    pub certificate: String,
    /// Who renews the certificate without a person, when something does.
    pub rotated_by: Option<&'static str>,
    /// When OLM rotates it (`rotated_by` is [`OLM`]): the
    /// ClusterServiceVersion that owns it, when an ownerReference names one.
    pub olm_csv: Option<String>,
}

/// Who rotates the certificates OLM issues for an operator's webhooks and
/// API services: those owned by a ClusterServiceVersion, or carrying OLM's
/// `olmcahash` annotation (`olm.operatorframework.io/olmcahash`, the hash
/// of the CA it signed them with).
pub(crate) const OLM: &str = "OLM";

/// The suffix of the annotation OLM writes on the certificates it issues.
const OLM_CA_HASH: &str = "olmcahash";

/// Annotations that say who renews a certificate by itself: the service CA
/// operator for serving certificates it issues to Services, library-go's
/// certificate rotation (kube-apiserver, etcd and other operators) that
/// records the expiry it manages, and cert-manager.
pub(crate) const ROTATION_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "service.beta.openshift.io/originating-service-name",
        "the service CA operator",
    ),
    (
        "service.alpha.openshift.io/originating-service-name",
        "the service CA operator",
    ),
    (
        "auth.openshift.io/certificate-not-after",
        "an OpenShift operator's certificate rotation",
    ),
    (
        "auth.openshift.io/certificate-issuer",
        "an OpenShift operator's certificate rotation",
    ),
    ("cert-manager.io/certificate-name", "cert-manager"),
    // The platform's own certificates name the component that owns and
    // renews them (the certificate ownership registry in openshift/origin,
    // `tls/ownership`); OLM's `pprof-cert`, rewritten daily, carries it.
    (
        "openshift.io/owning-component",
        "the OpenShift component that owns it",
    ),
];

/// Platform certificates renewed by their operator that older releases
/// ship without any of [`ROTATION_ANNOTATIONS`], by namespace and name:
/// OLM's `pprof-cert`, which the `collect-profiles` CronJob rewrites daily
/// (operator-framework-olm, `manifests/0000_50_olm_07-collect-profiles.*`),
/// and the CSR signer the kube-controller-manager operator rotates
/// (cluster-kube-controller-manager-operator, `pkg/operator/certrotationcontroller`)
/// and copies to the controller manager's namespace.
pub(crate) const PLATFORM_ROTATED: &[(&str, &str, &str)] = &[
    (
        "openshift-operator-lifecycle-manager",
        "pprof-cert",
        "OLM's collect-profiles job",
    ),
    (
        "openshift-kube-controller-manager-operator",
        "csr-signer",
        "the kube-controller-manager operator",
    ),
    (
        "openshift-kube-controller-manager",
        "csr-signer",
        "the kube-controller-manager operator",
    ),
];

/// Reads a Secret; returns `None` unless it is of type `kubernetes.io/tls`.
pub(crate) fn read_tls_secret<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<TlsSecret>, D::Error> {
    use base64::Engine;
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        metadata: RawMeta,
        #[serde(rename = "type")]
        type_: String,
        #[serde(deserialize_with = "null_as_default")]
        data: BTreeMap<String, String>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct RawMeta {
        name: String,
        #[serde(deserialize_with = "null_as_default")]
        namespace: String,
        #[serde(deserialize_with = "null_as_default")]
        annotations: BTreeMap<String, String>,
        #[serde(deserialize_with = "null_as_default")]
        owner_references: Vec<Owner>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Owner {
        api_version: String,
        kind: String,
        name: String,
    }
    let raw = Raw::deserialize(deserializer)?;
    if raw.type_ != "kubernetes.io/tls" {
        return Ok(None);
    }
    let certificate = raw
        .data
        .get("tls.crt")
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    let RawMeta {
        name,
        namespace,
        annotations,
        owner_references,
    } = raw.metadata;
    let olm_csv = owner_references
        .into_iter()
        .find(|o| {
            o.kind == "ClusterServiceVersion" && o.api_version.starts_with("operators.coreos.com/")
        })
        .map(|o| o.name);
    let olm = olm_csv.is_some() || annotations.keys().any(|k| k.ends_with(OLM_CA_HASH));
    let rotated_by = if olm {
        Some(OLM)
    } else {
        ROTATION_ANNOTATIONS
            .iter()
            .find(|(annotation, _)| annotations.contains_key(*annotation))
            .map(|(_, by)| *by)
            .or_else(|| {
                PLATFORM_ROTATED
                    .iter()
                    .find(|(ns, n, _)| *ns == namespace && *n == name)
                    .map(|(_, _, by)| *by)
            })
    };
    Ok(Some(TlsSecret {
        namespace,
        name,
        certificate,
        rotated_by,
        olm_csv,
    }))
}
