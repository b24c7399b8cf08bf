//! The OpenShift objects checks read, as lean serde types: only the fields
//! some check uses, so a large cluster fits in memory.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

pub(crate) use crate::model::meta::null_as_default;
pub use crate::model::meta::{Condition, Metadata, condition, is_true, newest_condition_time};

/// `config.openshift.io/v1` ClusterOperator.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterOperator {
    pub metadata: Metadata,
    pub status: ClusterOperatorStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterOperatorStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

/// `machineconfiguration.openshift.io/v1` MachineConfigPool.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MachineConfigPool {
    pub metadata: Metadata,
    pub spec: MachineConfigPoolSpec,
    pub status: MachineConfigPoolStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineConfigPoolSpec {
    pub paused: bool,
    pub node_selector: Option<super::selector::LabelSelector>,
    /// How many of the pool's nodes may update at once: a count or a
    /// percentage (`"10%"`); the MCO takes 1 when it is not set.
    pub max_unavailable: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    /// The rendered configuration the pool's nodes are to run.
    pub configuration: Option<RenderedConfig>,
}

/// A rendered MachineConfig, by name.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct RenderedConfig {
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MachineConfigPoolStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    pub machine_count: i64,
    pub updated_machine_count: i64,
    pub degraded_machine_count: i64,
    pub unavailable_machine_count: i64,
    /// The rendered configuration the pool's updated nodes run.
    pub configuration: Option<RenderedConfig>,
}

impl MachineConfigPool {
    /// The rendered configuration its nodes are to run: the spec's, else
    /// the status's.
    pub fn target_config(&self) -> Option<&str> {
        [&self.spec.configuration, &self.status.configuration]
            .into_iter()
            .flatten()
            .map(|c| c.name.as_str())
            .find(|n| !n.is_empty())
    }
}

impl MachineConfigPool {
    /// Whether the pool's node selector selects a node with these labels.
    /// A pool without a selector selects nothing.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.spec
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty() && s.matches(labels))
    }
}

/// `machineconfiguration.openshift.io/v1` MachineConfigNode (`v1alpha1`
/// before 4.19): one per node, named after it, whose conditions the
/// machine-config daemon moves through each phase of the node's update
/// (`UpdatePrepared`, `UpdateExecuted` with `Cordoned`, `Drained` and
/// `AppliedFilesAndOS`, `RebootedNode`, `UpdateComplete`, `Resumed`,
/// `Updated`), each with its `lastTransitionTime`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MachineConfigNode {
    pub metadata: Metadata,
    pub spec: MachineConfigNodeSpec,
    pub status: MachineConfigNodeStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MachineConfigNodeSpec {
    pub node: ObjectName,
    /// The node's MachineConfigPool.
    pub pool: ObjectName,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MachineConfigNodeStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

/// A reference by name (`MCOObjectReference`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ObjectName {
    pub name: String,
}

impl MachineConfigNode {
    /// The node's name: `spec.node.name`, which the API holds equal to the
    /// object's.
    pub fn node(&self) -> &str {
        if self.spec.node.name.is_empty() {
            &self.metadata.name
        } else {
            &self.spec.node.name
        }
    }
}

/// `apiserver.openshift.io/v1` APIRequestCount, reduced to its removal
/// release and its callers over the last 24 hours.
#[derive(Clone, Debug, Default)]
pub struct ApiRequestCount {
    /// `resource.version.group`, e.g. `flowschemas.v1beta2.flowcontrol.apiserver.k8s.io`.
    pub name: String,
    /// The Kubernetes release that removes the API, e.g. `1.29`.
    pub removed_in_release: Option<String>,
    /// Requests over the last 24 hours.
    pub request_count: u64,
    /// Callers over the last 24 hours, the busiest first, platform
    /// components ([`PLATFORM_CALLERS`]) left out.
    pub callers: Vec<Caller>,
    /// Requests over the last 24 hours by platform components.
    pub platform_request_count: u64,
}

impl ApiRequestCount {
    /// Requests over the last 24 hours by anyone but platform components.
    pub(crate) fn user_request_count(&self) -> u64 {
        self.request_count
            .saturating_sub(self.platform_request_count)
            .max(self.callers.iter().map(|c| c.request_count).sum())
    }
}

/// Callers of removed APIs that are OpenShift's own and need no action,
/// as Red Hat's guidance for the API removals says: the garbage collector
/// and namespace controller list every served API to find what to delete,
/// and kube-controller-manager and cluster-policy-controller walk every
/// resource to enforce policies. By user name, or by user agent prefix.
pub(crate) const PLATFORM_CALLERS: &[&str] = &[
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
    "system:kube-controller-manager",
    "system:cluster-policy-controller",
    "system:serviceaccount:openshift-infra:cluster-policy-controller",
];

/// User agents of the same components, when they run as a service account
/// of an `openshift-` namespace.
pub(crate) const PLATFORM_USER_AGENTS: &[&str] = &["cluster-policy-controller/"];

/// User agents of the controllers the installer's bootstrap host runs as
/// `system:admin` (its kubeconfig is the installer's admin one) while the
/// cluster is installed: their calls are the install's, not anyone's to act
/// on, so a fresh cluster is not held back by them.
pub(crate) const BOOTSTRAP_USER_AGENTS: &[&str] =
    &["kube-controller-manager/", "cluster-policy-controller/"];

/// Whether a caller is a platform component whose calls need no action.
/// The user agent is whatever the client sends, so it counts only beside an
/// identity of the platform's own namespaces: a workload that claims a
/// platform user agent is still counted.
pub(crate) fn is_platform_caller(username: &str, user_agent: &str) -> bool {
    let platform_account = username
        .strip_prefix("system:serviceaccount:")
        .is_some_and(|account| account.starts_with("openshift-"));
    let bootstrap = username == "system:admin"
        && BOOTSTRAP_USER_AGENTS
            .iter()
            .any(|prefix| user_agent.starts_with(prefix));
    PLATFORM_CALLERS.contains(&username)
        || bootstrap
        || platform_account
            && PLATFORM_USER_AGENTS
                .iter()
                .any(|prefix| user_agent.starts_with(prefix))
}

/// Who called an API, and how often.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub username: String,
    pub user_agent: String,
    pub request_count: u64,
    /// The requests by the API server that served them (`byNode`'s
    /// `nodeName`, a node's name or address; empty when not said).
    pub served_by: BTreeMap<String, u64>,
}

/// How many callers each APIRequestCount keeps.
const CALLERS_KEPT: usize = 10;

/// Reads an APIRequestCount, summing its per-hour, per-node callers.
pub(crate) fn read_api_request_count<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<ApiRequestCount, D::Error> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        metadata: Metadata,
        status: RawStatus,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct RawStatus {
        removed_in_release: Option<String>,
        request_count: u64,
        #[serde(deserialize_with = "null_as_default")]
        last24h: Vec<Hour>,
        current_hour: Hour,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Hour {
        #[serde(deserialize_with = "null_as_default")]
        by_node: Vec<ByNode>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct ByNode {
        node_name: String,
        #[serde(deserialize_with = "null_as_default")]
        by_user: Vec<ByUser>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct ByUser {
        username: String,
        user_agent: String,
        request_count: u64,
    }

    let raw = Raw::deserialize(deserializer)?;
    let mut totals: BTreeMap<(String, String), (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    let hours = if raw.status.last24h.is_empty() {
        std::slice::from_ref(&raw.status.current_hour)
    } else {
        &raw.status.last24h[..]
    };
    for (node, user) in hours
        .iter()
        .flat_map(|h| &h.by_node)
        .flat_map(|n| n.by_user.iter().map(move |u| (&n.node_name, u)))
    {
        let (total, by_node) = totals
            .entry((user.username.clone(), user.user_agent.clone()))
            .or_default();
        *total = total.saturating_add(user.request_count);
        let served = by_node.entry(node.clone()).or_default();
        *served = served.saturating_add(user.request_count);
    }
    let mut platform_request_count = 0u64;
    let mut callers: Vec<Caller> = totals
        .into_iter()
        .filter(|((username, user_agent), (count, _))| {
            let platform = is_platform_caller(username, user_agent);
            if platform {
                platform_request_count = platform_request_count.saturating_add(*count);
            }
            !platform
        })
        .map(
            |((username, user_agent), (request_count, served_by))| Caller {
                username,
                user_agent,
                request_count,
                served_by,
            },
        )
        .collect();
    callers.sort_by_key(|c| std::cmp::Reverse(c.request_count));
    callers.truncate(CALLERS_KEPT);
    let counted = callers
        .iter()
        .map(|c| c.request_count)
        .fold(platform_request_count, u64::saturating_add);
    Ok(ApiRequestCount {
        name: raw.metadata.name,
        removed_in_release: raw
            .status
            .removed_in_release
            .filter(|r| !r.trim().is_empty()),
        request_count: raw.status.request_count.max(counted),
        callers,
        platform_request_count,
    })
}

/// `operators.coreos.com/v1alpha1` ClusterServiceVersion, reduced to what
/// OLM's own upgrade check reads.
#[derive(Clone, Debug, Default)]
pub struct ClusterServiceVersion {
    pub namespace: String,
    pub name: String,
    /// Every `olm.maxOpenShiftVersion` the CSV declares, as written, each
    /// value once: from `operatorframework.io/properties`, which OLM writes
    /// on an installed CSV and its incompatible-operator controller reads
    /// (operator-framework/operator-lifecycle-manager,
    /// `pkg/controller/operators/openshift/helpers.go`), and from
    /// `olm.properties`, the bundle's own.
    pub max_openshift_versions: Vec<String>,
    /// What could not be read, as OLM fails on it: an annotation that is
    /// not a property list, a value that is not a string.
    pub property_errors: Vec<String>,
}

/// The annotation OLM writes the properties of an installed CSV in:
/// `{"properties":[{"type":…,"value":…}]}`.
const PROPERTIES: &str = "operatorframework.io/properties";
/// The bundle's own annotation: `[{"type":…,"value":…}]`.
const OLM_PROPERTIES: &str = "olm.properties";
const MAX_OPENSHIFT_VERSION: &str = "olm.maxOpenShiftVersion";

/// Reads a CSV; returns `None` for the copies OLM places in every watched
/// namespace (labelled `olm.copiedFrom`), so no operator counts twice.
pub(crate) fn read_cluster_service_version<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ClusterServiceVersion>, D::Error> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        metadata: RawMeta,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RawMeta {
        name: String,
        namespace: String,
        #[serde(deserialize_with = "null_as_default")]
        labels: BTreeMap<String, String>,
        annotations: RawAnnotations,
    }
    /// Only these annotations are read; `alm-examples` and the rest are
    /// skipped.
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RawAnnotations {
        #[serde(rename = "operatorframework.io/properties")]
        properties: Option<String>,
        #[serde(rename = "olm.properties")]
        olm_properties: Option<String>,
    }

    let raw = Raw::deserialize(deserializer)?;
    if raw.metadata.labels.contains_key("olm.copiedFrom") {
        return Ok(None);
    }
    let mut csv = ClusterServiceVersion {
        namespace: raw.metadata.namespace,
        name: raw.metadata.name,
        ..Default::default()
    };
    let annotations = raw.metadata.annotations;
    for (annotation, text, wrapped) in [
        (PROPERTIES, annotations.properties, true),
        (OLM_PROPERTIES, annotations.olm_properties, false),
    ] {
        let Some(text) = text else { continue };
        match max_openshift_versions(&text, wrapped) {
            Ok(values) => {
                for value in values {
                    if !csv.max_openshift_versions.contains(&value) {
                        csv.max_openshift_versions.push(value);
                    }
                }
            }
            Err(why) => csv.property_errors.push(format!("{annotation}: {why}")),
        }
    }
    Ok(Some(csv))
}

/// The `olm.maxOpenShiftVersion` values of a property list: `wrapped` in
/// `{"properties": […]}`, or the bare list. An annotation that is not such
/// a list, or a value that is not a string, is the error OLM stops at.
fn max_openshift_versions(text: &str, wrapped: bool) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct Wrapped {
        #[serde(default)]
        properties: Vec<Property>,
    }
    #[derive(Deserialize)]
    struct Property {
        #[serde(rename = "type")]
        type_: String,
        #[serde(default)]
        value: serde_json::Value,
    }
    let properties = if wrapped {
        serde_json::from_str::<Wrapped>(text).map(|w| w.properties)
    } else {
        serde_json::from_str::<Vec<Property>>(text)
    }
    .map_err(|e| format!("not a property list ({e})"))?;
    properties
        .into_iter()
        .filter(|p| p.type_ == MAX_OPENSHIFT_VERSION)
        .map(|p| match p.value {
            serde_json::Value::String(value) => Ok(value),
            other => Err(format!(
                "{MAX_OPENSHIFT_VERSION} {} is not a string",
                crate::model::text::clean(&other.to_string(), 40)
            )),
        })
        .collect()
}

/// `operator.openshift.io/v1` IngressController, for its default certificate.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct IngressController {
    pub metadata: Metadata,
    pub spec: IngressControllerSpec,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IngressControllerSpec {
    pub default_certificate: Option<LocalObjectReference>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LocalObjectReference {
    pub name: String,
}

/// `config.openshift.io/v1` Infrastructure `cluster`, for its topology.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Infrastructure {
    pub metadata: Metadata,
    pub status: InfrastructureStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InfrastructureStatus {
    /// `HighlyAvailable`, `SingleReplica` or `External`.
    pub control_plane_topology: Option<String>,
    /// `HighlyAvailable` or `SingleReplica`.
    pub infrastructure_topology: Option<String>,
}

impl Infrastructure {
    /// A hosted cluster: its control plane runs elsewhere (`External`).
    pub fn hosted(&self) -> bool {
        self.status.control_plane_topology.as_deref() == Some("External")
    }

    /// A single-node cluster: both topologies `SingleReplica`.
    pub fn single_node(&self) -> bool {
        let single = |t: &Option<String>| t.as_deref() == Some("SingleReplica");
        single(&self.status.control_plane_topology) && single(&self.status.infrastructure_topology)
    }
}

#[cfg(test)]
mod tests {
    use super::is_platform_caller;

    #[test]
    fn a_platform_user_agent_counts_only_from_a_platform_account() {
        let agent = "cluster-policy-controller/v0.0.0";
        assert!(is_platform_caller(
            "system:kube-controller-manager",
            "kubectl/1.31"
        ));
        assert!(is_platform_caller(
            "system:serviceaccount:openshift-infra:default",
            agent
        ));
        assert!(!is_platform_caller(
            "system:serviceaccount:ci:deployer",
            agent
        ));
        assert!(!is_platform_caller("alice", agent));
    }
}
