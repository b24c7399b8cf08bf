//! Hosted control planes (HyperShift) as the gate reads them on the
//! management cluster, and HyperShift's own update rules, pure: which
//! versions its operator supports, how far a NodePool may lag its
//! HostedCluster, and when a NodePool's update waits for the control
//! plane's. The version arithmetic is the OpenShift 5 rules' own
//! ([`Minor::ordinal`]: 5.y stands at 4.(23+y)), as HyperShift counts it.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;

use super::cluster_version;
use super::meta::{Condition, Metadata, is_true, null_as_default};
use super::release::{Minor, UpdateKind, Version};

/// The API group of HostedCluster and NodePool.
pub const GROUP: &str = "hypershift.openshift.io";

/// HyperShift's own override of `ClusterVersionUpgradeable=False`: the
/// release pullspec it forces a HostedCluster to. The gate weighs it as the
/// override it is; these rules only report what it overrides.
pub const FORCE_UPGRADE_TO: &str = "hypershift.openshift.io/force-upgrade-to";

/// The check of `ClusterVersionUpgradeable`, the one HyperShift's
/// [`FORCE_UPGRADE_TO`] forces past.
pub const UPGRADEABLE_CHECK: &str = "HostedClusterUpgradeable";

/// How many minors a NodePool may be older than its HostedCluster
/// (HyperShift's `ValidateVersionSkew`).
pub const MAX_NODEPOOL_LAG: u64 = 3;

/// The HyperShift operator's ConfigMap of the versions it supports:
/// `data.supported-versions` is `{"versions":["5.1","5.0","4.22",…]}`,
/// `data.server-version` the operator's build.
pub const SUPPORTED_VERSIONS_NAMESPACE: &str = "hypershift";
pub const SUPPORTED_VERSIONS_NAME: &str = "supported-versions";

/// A HostedCluster, read only as far as its update needs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct HostedCluster {
    pub metadata: Metadata,
    pub spec: HostedClusterSpec,
    pub status: HostedClusterStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HostedClusterSpec {
    /// The control plane's release: a change of its image is an update.
    pub release: ReleaseImage,
    /// The control plane's components' own release, when set apart from
    /// `release` (which the NodePools and the guest's payload follow).
    pub control_plane_release: Option<ReleaseImage>,
    /// The update graph's channel and server, as a ClusterVersion's
    /// `channel` and `upstream`.
    pub channel: String,
    pub update_service: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ReleaseImage {
    pub image: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct HostedClusterStatus {
    /// The hosted cluster's ClusterVersion status, as HyperShift mirrors
    /// it: desired, history, offered updates.
    pub version: cluster_version::Status,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// The Secret (in the HostedCluster's namespace) holding the hosted
    /// cluster's admin kubeconfig.
    pub kubeconfig: Option<LocalObjectReference>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct LocalObjectReference {
    pub name: String,
}

/// A hosted cluster by its HostedCluster's namespace and name, as
/// `namespace/name`: what its results and its NodePools are held by.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostedName {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for HostedName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl HostedName {
    /// Reads `namespace/name`.
    pub fn parse(text: &str) -> Option<Self> {
        let (namespace, name) = text.split_once('/')?;
        (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then(|| Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl HostedCluster {
    /// Its name, as its results and NodePools know it.
    pub fn hosted_name(&self) -> HostedName {
        HostedName {
            namespace: self.metadata.namespace.clone().unwrap_or_default(),
            name: self.metadata.name.clone(),
        }
    }

    /// The ClusterVersion write this HostedCluster amounts to: its release
    /// as `desiredUpdate` (with the version its own update graph or history
    /// gives the image), its channel and update service as `channel` and
    /// `upstream`, its `status.version` as the status, its annotations
    /// (the `preflight.dev/` claims) as they are. A forced update
    /// ([`FORCE_UPGRADE_TO`] naming the release) accepts
    /// [`UPGRADEABLE_CHECK`]: what HyperShift's force skips, and nothing
    /// else. So one decision serves both kinds of cluster.
    pub fn as_update(&self) -> cluster_version::ClusterVersion {
        let image = self.spec.release.image.clone();
        let forced = self
            .metadata
            .annotations
            .get(FORCE_UPGRADE_TO)
            .is_some_and(|to| !image.is_empty() && *to == image);
        let desired_update = (!image.is_empty()).then(|| cluster_version::DesiredUpdate {
            image: Some(image),
            accept_risks: forced
                .then(|| cluster_version::AcceptRisk {
                    name: UPGRADEABLE_CHECK.to_owned(),
                })
                .into_iter()
                .collect(),
            ..Default::default()
        });
        let present = |text: &str| (!text.is_empty()).then(|| text.to_owned());
        cluster_version::ClusterVersion {
            metadata: self.metadata.clone(),
            spec: cluster_version::Spec {
                channel: present(&self.spec.channel),
                upstream: present(&self.spec.update_service),
                desired_update,
                ..Default::default()
            },
            status: self.status.version.clone(),
        }
    }
    /// The version the control plane runs: its newest completed update.
    pub fn control_plane_version(&self) -> Option<Version> {
        self.status
            .version
            .history
            .iter()
            .find(|h| h.state == "Completed")
            .and_then(|h| Version::parse(&h.version))
    }

    /// Whether the control plane's own update is under way: its newest
    /// history entry is not completed, or HyperShift says it progresses.
    pub fn control_plane_updating(&self) -> bool {
        let partial = self
            .status
            .version
            .history
            .first()
            .is_some_and(|h| h.state == "Partial");
        partial || is_true(&self.status.conditions, "ClusterVersionProgressing")
    }
}

/// A NodePool, read only as far as its update needs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodePool {
    pub metadata: Metadata,
    pub spec: NodePoolSpec,
    pub status: NodePoolStatus,
}

impl NodePool {
    /// The hosted cluster it belongs to.
    pub fn hosted_name(&self) -> HostedName {
        HostedName {
            namespace: self.metadata.namespace.clone().unwrap_or_default(),
            name: self.spec.cluster_name.clone(),
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodePoolSpec {
    /// The HostedCluster it belongs to, in its namespace.
    pub cluster_name: String,
    pub release: ReleaseImage,
    pub replicas: Option<u32>,
    pub management: Management,
}

/// How a NodePool's machines are updated.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Management {
    /// `Replace` (new machines) or `InPlace` (drained and updated).
    pub upgrade_type: String,
    pub replace: Option<Replace>,
    pub in_place: Option<InPlace>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Replace {
    pub strategy: String,
    pub rolling_update: Option<RollingUpdate>,
}

/// `maxSurge` and `maxUnavailable`: a count or a percentage.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RollingUpdate {
    pub max_surge: Option<IntOrString>,
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InPlace {
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodePoolStatus {
    /// The version its machines run.
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

/// Why a NodePool's version may not stand beside its control plane's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkewError {
    #[error("NodePool version {pool} is newer than its HostedCluster's {control_plane}")]
    NewerThanControlPlane {
        pool: Version,
        control_plane: Version,
    },
    #[error(
        "NodePool version {pool} is {behind} minors older than its HostedCluster's {control_plane}; HyperShift allows at most {MAX_NODEPOOL_LAG}"
    )]
    TooFarBehind {
        pool: Version,
        control_plane: Version,
        behind: u64,
    },
    #[error("{0} is not on OpenShift's line of minors, so its skew cannot be told")]
    OffTheLine(Version),
}

/// Whether a NodePool at `pool` may run under a control plane at
/// `control_plane`: never newer, and at most [`MAX_NODEPOOL_LAG`] minors
/// older, 5.y counted as 4.(23+y).
pub fn nodepool_skew(control_plane: &Version, pool: &Version) -> Result<(), SkewError> {
    if pool > control_plane {
        return Err(SkewError::NewerThanControlPlane {
            pool: pool.clone(),
            control_plane: control_plane.clone(),
        });
    }
    let place = |v: &Version| {
        v.line()
            .ordinal()
            .ok_or_else(|| SkewError::OffTheLine(v.clone()))
    };
    let behind = place(control_plane)?.saturating_sub(place(pool)?);
    if behind > MAX_NODEPOOL_LAG {
        return Err(SkewError::TooFarBehind {
            pool: pool.clone(),
            control_plane: control_plane.clone(),
            behind,
        });
    }
    Ok(())
}

/// The minors the HyperShift operator supports, from its ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupportedVersions {
    pub minors: Vec<Minor>,
    /// The operator's build, as `data.server-version` names it.
    pub server_version: String,
}

/// Why the supported-versions ConfigMap cannot be read, or a target is
/// not supported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SupportError {
    #[error(
        "the HyperShift operator's {SUPPORTED_VERSIONS_NAMESPACE}/{SUPPORTED_VERSIONS_NAME} ConfigMap has no supported-versions"
    )]
    Missing,
    #[error(
        "the HyperShift operator's supported-versions is not {{\"versions\":[\"<major>.<minor>\",…]}}: {0}"
    )]
    Unreadable(String),
    #[error("the HyperShift operator{} supports {}, not {target}", server(.server_version), minors(.supported))]
    Unsupported {
        target: Minor,
        supported: Vec<Minor>,
        server_version: String,
    },
}

fn server(version: &str) -> String {
    if version.is_empty() {
        String::new()
    } else {
        format!(" ({version})")
    }
}

fn minors(minors: &[Minor]) -> String {
    let words: Vec<String> = minors.iter().map(Minor::to_string).collect();
    words.join(", ")
}

impl SupportedVersions {
    /// Reads the ConfigMap's `data` entries.
    pub fn from_data(
        supported_versions: Option<&str>,
        server_version: Option<&str>,
    ) -> Result<Self, SupportError> {
        #[derive(Deserialize)]
        struct Listed {
            versions: Vec<String>,
        }
        let text = supported_versions.ok_or(SupportError::Missing)?;
        let listed: Listed =
            serde_json::from_str(text).map_err(|e| SupportError::Unreadable(e.to_string()))?;
        let minors = listed
            .versions
            .iter()
            .map(|v| {
                Minor::parse_exact(v)
                    .ok_or_else(|| SupportError::Unreadable(format!("{v:?} is no minor")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            minors,
            server_version: server_version.unwrap_or_default().to_owned(),
        })
    }

    /// Whether the operator supports hosted clusters at `target`.
    pub fn supports(&self, target: &Version) -> Result<(), SupportError> {
        let minor = target.line();
        if self.minors.contains(&minor) {
            return Ok(());
        }
        Err(SupportError::Unsupported {
            target: minor,
            supported: self.minors.clone(),
            server_version: self.server_version.clone(),
        })
    }
}

/// Why HyperShift would not take an update, or not yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The HyperShift operator does not support the target.
    #[error(transparent)]
    Unsupported(#[from] SupportError),
    /// A NodePool's version would not stand beside the control plane's.
    #[error("NodePool {pool}: {error}")]
    Skew { pool: String, error: SkewError },
    /// A NodePool update while the control plane's own is under way.
    #[error(
        "HostedCluster {cluster} is updating its control plane; a NodePool update waits until it completes"
    )]
    ControlPlaneUpdating { cluster: String },
    /// `ClusterVersionUpgradeable=False`, which holds minor and major
    /// updates (`hypershift.openshift.io/force-upgrade-to` overrides it).
    #[error("HostedCluster {cluster} is not upgradeable to another minor{}", said(.reason, .message))]
    NotUpgradeable {
        cluster: String,
        reason: String,
        message: String,
    },
    /// A condition of the HostedCluster or a NodePool that an update
    /// should not start under.
    #[error("{object} is {condition}={status}{}", said(.reason, .message))]
    Unhealthy {
        object: String,
        condition: &'static str,
        status: String,
        reason: String,
        message: String,
    },
    /// The control plane's version cannot be read from its history.
    #[error("HostedCluster {cluster} has completed no update, so its version is not known")]
    ControlPlaneUnknown { cluster: String },
}

/// A condition's reason and message, as a refusal ends: ` (Reason):
/// message`, or what there is of them.
fn said(reason: &str, message: &str) -> String {
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => String::new(),
        (false, true) => format!(" ({reason})"),
        (true, false) => format!(": {message}"),
        (false, false) => format!(" ({reason}): {message}"),
    }
}

/// The HostedCluster's conditions an update should not start under, each
/// with the status that says so.
const CLUSTER_CONDITIONS: [(&str, &str); 5] = [
    ("Available", "False"),
    ("Degraded", "True"),
    ("ValidReleaseImage", "False"),
    ("SupportedHostedCluster", "False"),
    ("ClusterVersionFailing", "True"),
];

/// A NodePool's conditions an update should not start under.
const POOL_CONDITIONS: [(&str, &str); 2] =
    [("AllMachinesReady", "False"), ("AllNodesHealthy", "False")];

/// Each of `conditions` that is `type_=status` for one of `unhealthy`.
fn unhealthy(
    object: String,
    conditions: &[Condition],
    unhealthy: &[(&'static str, &'static str)],
) -> Vec<Refusal> {
    unhealthy
        .iter()
        .filter_map(|(type_, status)| {
            let c = conditions
                .iter()
                .find(|c| c.type_ == *type_ && c.status == *status)?;
            Some(Refusal::Unhealthy {
                object: object.clone(),
                condition: type_,
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            })
        })
        .collect()
}

/// What HyperShift's conditions say against updating `cluster`'s control
/// plane to `target`: [`unhealthy_conditions`], and, for a minor or major
/// update, `ClusterVersionUpgradeable=False` (whether [`FORCE_UPGRADE_TO`]
/// overrides it is the decision's to weigh).
pub fn control_plane_conditions(
    cluster: &HostedCluster,
    pools: &[NodePool],
    target: &Version,
) -> Vec<Refusal> {
    let mut refusals = unhealthy_conditions(cluster, pools);
    let minor_or_more = cluster
        .control_plane_version()
        .is_none_or(|current| UpdateKind::between(&current, target) != UpdateKind::Patch);
    if minor_or_more && let Some(refusal) = not_upgradeable(cluster) {
        refusals.push(refusal);
    }
    refusals
}

/// The conditions no update should start under, whatever its target: the
/// cluster unavailable, degraded, failing, on a release or a version
/// HyperShift calls invalid or unsupported, any of its NodePools not ready
/// or unhealthy.
pub fn unhealthy_conditions(cluster: &HostedCluster, pools: &[NodePool]) -> Vec<Refusal> {
    let name = named(&cluster.metadata);
    let mut refusals = unhealthy(
        format!("HostedCluster {name}"),
        &cluster.status.conditions,
        &CLUSTER_CONDITIONS,
    );
    // A NodePool rolling out has machines not ready by design: the
    // rollout's doing, not a fault to stop on.
    let rolling = |p: &NodePool| {
        is_true(&p.status.conditions, "UpdatingVersion")
            || is_true(&p.status.conditions, "UpdatingConfig")
    };
    for pool in pools
        .iter()
        .filter(|p| belongs_to(p, cluster) && !rolling(p))
    {
        refusals.extend(unhealthy(
            format!("NodePool {}", named(&pool.metadata)),
            &pool.status.conditions,
            &POOL_CONDITIONS,
        ));
    }
    refusals
}

/// `ClusterVersionUpgradeable=False`, which holds minor and major updates.
pub fn not_upgradeable(cluster: &HostedCluster) -> Option<Refusal> {
    let c = cluster
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "ClusterVersionUpgradeable" && c.status == "False")?;
    Some(Refusal::NotUpgradeable {
        cluster: named(&cluster.metadata),
        reason: c.reason.clone().unwrap_or_default(),
        message: c.message.clone().unwrap_or_default(),
    })
}

/// `namespace/name` of an object.
pub(crate) fn named(metadata: &Metadata) -> String {
    match &metadata.namespace {
        Some(namespace) => format!("{namespace}/{}", metadata.name),
        None => metadata.name.clone(),
    }
}

/// HyperShift's refusals of an update of `cluster`'s control plane to
/// `target`: a target its operator does not support, and each of the
/// cluster's NodePools that would be left too far behind (or ahead).
pub fn control_plane_update(
    cluster: &HostedCluster,
    pools: &[NodePool],
    supported: &SupportedVersions,
    target: &Version,
) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    if let Err(error) = supported.supports(target) {
        refusals.push(error.into());
    }
    for pool in pools.iter().filter(|p| belongs_to(p, cluster)) {
        let Some(version) = Version::parse(&pool.status.version) else {
            continue;
        };
        if let Err(error) = nodepool_skew(target, &version) {
            refusals.push(Refusal::Skew {
                pool: named(&pool.metadata),
                error,
            });
        }
    }
    refusals
}

/// HyperShift's refusals of an update of `pool`, of `cluster`, to
/// `target`: while the control plane updates it waits, and it may not
/// pass the control plane nor lag it by more than [`MAX_NODEPOOL_LAG`]
/// minors.
pub fn nodepool_update(cluster: &HostedCluster, pool: &NodePool, target: &Version) -> Vec<Refusal> {
    let name = named(&cluster.metadata);
    if cluster.control_plane_updating() {
        return vec![Refusal::ControlPlaneUpdating { cluster: name }];
    }
    let Some(control_plane) = cluster.control_plane_version() else {
        return vec![Refusal::ControlPlaneUnknown { cluster: name }];
    };
    match nodepool_skew(&control_plane, target) {
        Ok(()) => Vec::new(),
        Err(error) => vec![Refusal::Skew {
            pool: named(&pool.metadata),
            error,
        }],
    }
}

/// Whether `pool` is one of `cluster`'s: named by it, in its namespace.
pub fn belongs_to(pool: &NodePool, cluster: &HostedCluster) -> bool {
    pool.spec.cluster_name == cluster.metadata.name
        && pool.metadata.namespace == cluster.metadata.namespace
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    #[rstest]
    #[case::same("4.18.5", "4.18.5")]
    #[case::older_patch("4.18.5", "4.18.4")]
    #[case::three_behind("4.18.5", "4.15.0")]
    #[case::across_five("5.1.0", "4.22.9")]
    #[case::three_behind_five("5.2.0", "4.22.1")]
    fn a_nodepool_within_the_skew_may_stand(#[case] control_plane: &str, #[case] pool: &str) {
        assert_eq!(nodepool_skew(&v(control_plane), &v(pool)), Ok(()));
    }

    #[test]
    fn a_nodepool_newer_than_its_control_plane_may_not() {
        let err = nodepool_skew(&v("4.18.5"), &v("4.18.6")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "NodePool version 4.18.6 is newer than its HostedCluster's 4.18.5"
        );
    }

    #[rstest]
    #[case::four_behind("4.18.0", "4.14.9", 4)]
    #[case::five_counts_as_4_23("5.1.0", "4.20.3", 4)]
    fn a_nodepool_too_far_behind_may_not(
        #[case] control_plane: &str,
        #[case] pool: &str,
        #[case] behind: u64,
    ) {
        let err = nodepool_skew(&v(control_plane), &v(pool)).unwrap_err();
        assert_eq!(
            err,
            SkewError::TooFarBehind {
                pool: v(pool),
                control_plane: v(control_plane),
                behind
            }
        );
        assert!(
            err.to_string().ends_with("HyperShift allows at most 3"),
            "{err}"
        );
    }

    #[test]
    fn supported_versions_are_read_from_the_operators_config_map() {
        let supported = SupportedVersions::from_data(
            Some(r#"{"versions":["5.1","5.0","4.22","4.21"]}"#),
            Some("4.22.0-hypershift"),
        )
        .unwrap();
        assert_eq!(supported.supports(&v("5.0.2")), Ok(()));
        assert_eq!(
            supported.supports(&v("5.2.0")).unwrap_err().to_string(),
            "the HyperShift operator (4.22.0-hypershift) supports 5.1, 5.0, 4.22, 4.21, not 5.2"
        );
        assert_eq!(
            SupportedVersions::from_data(None, None),
            Err(SupportError::Missing)
        );
        assert!(matches!(
            SupportedVersions::from_data(Some(r#"{"versions":["five"]}"#), None),
            Err(SupportError::Unreadable(_))
        ));
    }

    #[test]
    fn the_control_plane_reads_its_version_and_whether_it_updates() {
        let hc: HostedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "prod", "namespace": "clusters"},
            "spec": {"release": {"image": "quay.io/openshift-release-dev/ocp-release:4.22.3-x86_64"}},
            "status": {
                "version": {"history": [
                    {"state": "Partial", "version": "4.22.3"},
                    {"state": "Completed", "version": "4.22.1"}
                ]},
                "kubeconfig": {"name": "prod-admin-kubeconfig"}
            }
        }))
        .unwrap();
        assert_eq!(hc.control_plane_version(), Some(v("4.22.1")));
        assert!(hc.control_plane_updating());
        assert_eq!(hc.status.kubeconfig.unwrap().name, "prod-admin-kubeconfig");
    }

    fn cluster(history: serde_json::Value) -> HostedCluster {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "prod", "namespace": "clusters"},
            "status": {"version": {"history": history}}
        }))
        .unwrap()
    }

    fn pool(name: &str, cluster: &str, version: &str) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "clusters"},
            "spec": {"clusterName": cluster},
            "status": {"version": version}
        }))
        .unwrap()
    }

    #[test]
    fn a_control_plane_update_names_what_hypershift_refuses() {
        let hc = cluster(serde_json::json!([{"state": "Completed", "version": "4.20.3"}]));
        let supported =
            SupportedVersions::from_data(Some(r#"{"versions":["5.0","4.22","4.21"]}"#), None)
                .unwrap();
        let pools = [
            pool("workers", "prod", "4.20.3"),
            pool("old", "prod", "4.18.9"),
            pool("elsewhere", "staging", "4.12.0"),
        ];
        assert_eq!(
            control_plane_update(&hc, &pools, &supported, &v("4.21.2")),
            Vec::new()
        );
        let words: Vec<String> = control_plane_update(&hc, &pools, &supported, &v("5.0.1"))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            words,
            [
                "NodePool clusters/old: NodePool version 4.18.9 is 5 minors older than its HostedCluster's 5.0.1; HyperShift allows at most 3"
            ]
        );
        let refusals = control_plane_update(&hc, &pools, &supported, &v("5.1.0"));
        assert_eq!(
            refusals[0].to_string(),
            "the HyperShift operator supports 5.0, 4.22, 4.21, not 5.1"
        );
    }

    #[test]
    fn a_nodepool_update_waits_for_the_control_plane_and_stays_behind_it() {
        let settled = cluster(serde_json::json!([{"state": "Completed", "version": "4.21.4"}]));
        let workers = pool("workers", "prod", "4.20.3");
        assert_eq!(
            nodepool_update(&settled, &workers, &v("4.21.4")),
            Vec::new()
        );
        assert_eq!(
            nodepool_update(&settled, &workers, &v("4.21.5"))[0].to_string(),
            "NodePool clusters/workers: NodePool version 4.21.5 is newer than its HostedCluster's 4.21.4"
        );
        let updating = cluster(serde_json::json!([
            {"state": "Partial", "version": "4.22.0"},
            {"state": "Completed", "version": "4.21.4"}
        ]));
        assert_eq!(
            nodepool_update(&updating, &workers, &v("4.21.4")),
            [Refusal::ControlPlaneUpdating {
                cluster: "clusters/prod".into()
            }]
        );
        let new = cluster(serde_json::json!([{"state": "Partial", "version": "4.22.0"}]));
        assert!(matches!(
            nodepool_update(&new, &workers, &v("4.22.0"))[0],
            Refusal::ControlPlaneUpdating { .. }
        ));
        assert_eq!(
            nodepool_update(&cluster(serde_json::json!([])), &workers, &v("4.22.0")),
            [Refusal::ControlPlaneUnknown {
                cluster: "clusters/prod".into()
            }]
        );
    }

    #[test]
    fn conditions_say_what_an_update_should_not_start_under() {
        let mut hc = cluster(serde_json::json!([{"state": "Completed", "version": "4.21.4"}]));
        hc.status.conditions = serde_json::from_value(serde_json::json!([
            {"type": "Available", "status": "True"},
            {"type": "Degraded", "status": "True", "reason": "UnavailableReplicas", "message": "kube-apiserver has 1 of 3 replicas"},
            {"type": "ClusterVersionUpgradeable", "status": "False", "reason": "AdminAckRequired", "message": "Kubernetes 1.35 removes APIs"}
        ]))
        .unwrap();
        let mut workers = pool("workers", "prod", "4.21.4");
        workers.status.conditions = serde_json::from_value(serde_json::json!([
            {"type": "AllMachinesReady", "status": "True"},
            {"type": "AllNodesHealthy", "status": "False", "reason": "NodeNotReady"}
        ]))
        .unwrap();
        let words = |target: &str| -> Vec<String> {
            control_plane_conditions(&hc, std::slice::from_ref(&workers), &v(target))
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            words("4.22.0"),
            [
                "HostedCluster clusters/prod is Degraded=True (UnavailableReplicas): kube-apiserver has 1 of 3 replicas",
                "NodePool clusters/workers is AllNodesHealthy=False (NodeNotReady)",
                "HostedCluster clusters/prod is not upgradeable to another minor (AdminAckRequired): Kubernetes 1.35 removes APIs",
            ]
        );
        // A patch update is not held by ClusterVersionUpgradeable=False.
        assert_eq!(words("4.21.5").len(), 2, "{:?}", words("4.21.5"));
    }

    #[test]
    fn a_nodepool_rolling_out_is_not_unhealthy_for_its_machines_not_ready() {
        let hc: HostedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "prod", "namespace": "clusters"}
        }))
        .unwrap();
        let mut workers = pool("workers", "prod", "4.21.4");
        workers.status.conditions = serde_json::from_value(serde_json::json!([
            {"type": "AllMachinesReady", "status": "False", "reason": "Replacing"},
            {"type": "UpdatingVersion", "status": "True"}
        ]))
        .unwrap();
        assert_eq!(
            unhealthy_conditions(&hc, std::slice::from_ref(&workers)),
            []
        );
        workers.status.conditions.pop();
        assert_eq!(unhealthy_conditions(&hc, &[workers]).len(), 1);
    }

    /// Every field the lean types read is one HyperShift's own CRDs
    /// define (tests/data/hypershift-crds), so none is read from a place
    /// the API server would prune.
    #[rstest]
    #[case::hosted_cluster(
        include_str!("../../tests/data/hypershift-crds/hostedclusters-Hypershift-Default.crd.yaml"),
        &["spec.release.image", "spec.controlPlaneRelease.image", "spec.channel", "spec.updateService", "status.version.history", "status.version.availableUpdates",
          "status.version.conditionalUpdates", "status.conditions", "status.kubeconfig.name"]
    )]
    #[case::node_pool(
        include_str!("../../tests/data/hypershift-crds/nodepools-Default.crd.yaml"),
        &["spec.clusterName", "spec.release.image", "spec.replicas", "spec.management.upgradeType",
          "spec.management.replace.strategy", "spec.management.replace.rollingUpdate.maxSurge",
          "spec.management.replace.rollingUpdate.maxUnavailable", "spec.management.inPlace.maxUnavailable",
          "status.version", "status.conditions"]
    )]
    fn the_fields_read_are_hypershifts(#[case] crd: &str, #[case] fields: &[&str]) {
        let crd: serde_json::Value = serde_saphyr::from_str(crd).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        for field in fields {
            let found = field
                .split('.')
                .try_fold(schema, |node, part| node["properties"].get(part));
            assert!(found.is_some(), "the {kind} CRD defines no {field}");
        }
    }
}
