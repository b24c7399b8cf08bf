//! A read-only view of a cluster, pure: what the checks and the plan read.
//! `crate::cluster` fills it once per preflight run, from the API server
//! (`cluster::live`), a snapshot or a must-gather (`cluster::snapshot`) and
//! the alert querier. Objects are kept in lean form (`openshift`, `k8s`,
//! `alerts`), and the view records which kinds were loaded at all, so that
//! a check can tell "none in the cluster" from "not in the data".

pub mod alerts;
pub mod k8s;
pub mod kinds;
pub mod openshift;
pub mod quantity;
pub mod selector;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde::{Deserialize, Deserializer};

use crate::model::{ClusterVersion, Resolution, Target};
use alerts::Alert;
use k8s::{ConfigMap, Node, Pod, PodDisruptionBudget, TlsSecret, read_pod, read_tls_secret};
use kinds::Kind;
use openshift::{
    ApiRequestCount, ClusterOperator, ClusterServiceVersion, Infrastructure, IngressController,
    MachineConfigNode, MachineConfigPool, newest_condition_time, read_api_request_count,
    read_cluster_service_version,
};

/// How the data shows a single-node cluster
/// ([`ClusterView::single_node_by`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleNode {
    /// The Infrastructure `cluster`: both topologies `SingleReplica`.
    Topology,
    /// No Infrastructure object: one node with both roles (and one etcd
    /// member where the data counts them).
    Nodes,
}

impl SingleNode {
    /// How it was found, in words for a person.
    pub fn evidence(self) -> &'static str {
        match self {
            Self::Topology => "Infrastructure topology SingleReplica",
            Self::Nodes => {
                "no Infrastructure object; its one node is both control plane and worker"
            }
        }
    }
}

/// Why the certificate checks have no data when TLS Secrets are not read
/// (`withheld`).
pub const TLS_SECRETS_WITHHELD: &str = "TLS Secrets are not read: the gate runs without --read-tls-secrets (docs/install.md, \"The sensitive grant: Secrets\")";

/// The label HyperShift gives a hosted cluster's nodes: the name of
/// their NodePool.
pub const NODEPOOL_LABEL: &str = "hypershift.openshift.io/nodePool";

/// When the data was taken, and how that was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsOf {
    pub time: Timestamp,
    /// How the time was found, in words: "the must-gather's timestamp
    /// file", "the newest time the ClusterVersion and ClusterOperators
    /// record", "--now".
    pub found_by: String,
    /// Objects whose own times run more than a day past it, in words: the
    /// data may mix captures taken at different times.
    pub disagreement: Option<String>,
}

impl AsOf {
    pub fn new(time: Timestamp, found_by: &str) -> Self {
        Self {
            time,
            found_by: found_by.to_owned(),
            disagreement: None,
        }
    }
}

/// Everything the checks read.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub cluster_version: Option<ClusterVersion>,
    pub cluster_operators: Vec<ClusterOperator>,
    pub nodes: Vec<Node>,
    /// Pods that have not finished.
    pub pods: Vec<Pod>,
    pub pod_disruption_budgets: Vec<PodDisruptionBudget>,
    pub machine_config_pools: Vec<MachineConfigPool>,
    /// One per node, where the cluster has them (4.19 and later).
    pub machine_config_nodes: Vec<MachineConfigNode>,
    pub api_request_counts: Vec<ApiRequestCount>,
    /// Only those [`kinds::CONFIG_MAP`] lists.
    pub config_maps: Vec<ConfigMap>,
    /// Only `kubernetes.io/tls` Secrets, without their keys.
    pub tls_secrets: Vec<TlsSecret>,
    pub ingress_controllers: Vec<IngressController>,
    /// Without OLM's copies.
    pub cluster_service_versions: Vec<ClusterServiceVersion>,
    /// `None` when no alert data was loaded at all.
    pub alerts: Option<Vec<Alert>>,
    /// Which namespaces' alerts count (the platform's unless told more).
    pub alert_namespaces: alerts::AlertNamespaces,
    /// The namespace the gate itself runs in, when known. Its own pods and
    /// PodDisruptionBudget never hold an update: the gate guards the start
    /// of an update and is not needed once the update runs, and its budget
    /// lets drains through one replica at a time.
    pub gate_namespace: Option<String>,
    /// The kinds that were loaded, even when there were none of them.
    pub loaded: BTreeSet<String>,
    /// Kinds the live source could not list, and why (e.g. RBAC).
    pub unreadable: BTreeMap<String, String>,
    /// Kinds the live source did not read, and why: told not to (TLS
    /// Secrets, unless `--read-tls-secrets`), or not served by the cluster
    /// (no such API). The checks that need them are Skipped, saying so.
    pub withheld: BTreeMap<String, String>,
    /// `config.openshift.io/v1` Infrastructure `cluster`.
    pub infrastructure: Option<Infrastructure>,
    /// When the data was taken; `None` for live data, which is judged by
    /// the clock.
    pub as_of: Option<AsOf>,
    /// The newest time the ClusterVersion and the ClusterOperators record:
    /// the clock `oc adm upgrade` judges a capture by.
    pub newest: Option<Timestamp>,
    /// The newest time other objects record (nodes, pools, alerts), by
    /// what they are: the time of the data when it has no ClusterVersion
    /// and no ClusterOperators, and a check of the clocks when it has.
    pub newest_elsewhere: BTreeMap<&'static str, Timestamp>,
    /// Objects a snapshot held that no check reads, by `kind (apiVersion)`.
    pub skipped: BTreeMap<String, u64>,
    /// Must-gather files not opened, since no check reads what they hold,
    /// by `resource (group)`.
    pub unread_files: BTreeMap<String, u64>,
    /// A second, different ClusterVersion: the data holds two clusters.
    pub other_cluster_version: Option<ClusterVersion>,
}

impl ClusterView {
    /// What `to` (a version or a pullspec) names, by the one resolver the
    /// webhook uses, against this view's ClusterVersion (an empty one when
    /// the data has none: an image then stands for itself, and a version
    /// is unknown).
    pub(crate) fn resolve(&self, to: &str) -> Resolution {
        match &self.cluster_version {
            Some(cv) => cv.resolve_named(to),
            None => ClusterVersion::default().resolve_named(to),
        }
    }

    /// The target an offline report checks for `to`: as [`Self::resolve`]
    /// finds it, else by its version alone (TargetRecommended then says
    /// why the cluster would refuse it).
    pub fn target(&self, to: &str) -> Target {
        match self.resolve(to) {
            Resolution::Target(target) => target,
            _ => Target::version_only(to.trim()),
        }
    }
    /// Adds one object of `kind`; objects of kinds the view does not keep
    /// are ignored. Returns whether the object was kept.
    pub fn add(
        &mut self,
        kind: &Kind,
        object: serde_json::Value,
    ) -> Result<bool, serde_json::Error> {
        self.add_from(kind, object)
    }

    /// Adds one object of `kind` read from any serde deserializer, so that
    /// a large snapshot is read straight into the lean types.
    pub(crate) fn add_from<'de, D: Deserializer<'de>>(
        &mut self,
        kind: &Kind,
        object: D,
    ) -> Result<bool, D::Error> {
        let kept = match *kind {
            kinds::CLUSTER_VERSION => {
                let cv = ClusterVersion::deserialize(object)?;
                self.saw(cv.newest_time());
                match &self.cluster_version {
                    None => self.cluster_version = Some(cv),
                    // The same object, met again.
                    Some(first)
                        if first.metadata.name == cv.metadata.name
                            && first.spec.cluster_id == cv.spec.cluster_id => {}
                    Some(_) => {
                        self.other_cluster_version.get_or_insert(cv);
                    }
                }
                true
            }
            kinds::CLUSTER_OPERATOR => {
                let co: ClusterOperator = Deserialize::deserialize(object)?;
                self.saw(newest_condition_time(&co.status.conditions));
                push(&mut self.cluster_operators, Some(co))
            }
            kinds::NODE => {
                let node: Node = Deserialize::deserialize(object)?;
                self.saw_elsewhere(kind.name, newest_condition_time(&node.status.conditions));
                push(&mut self.nodes, Some(node))
            }
            kinds::INFRASTRUCTURE => {
                let infrastructure: Infrastructure = Deserialize::deserialize(object)?;
                if infrastructure.metadata.name == "cluster" {
                    self.infrastructure = Some(infrastructure);
                }
                true
            }
            kinds::POD => push(&mut self.pods, read_pod(object)?),
            kinds::POD_DISRUPTION_BUDGET => push(
                &mut self.pod_disruption_budgets,
                Some(Deserialize::deserialize(object)?),
            ),
            kinds::MACHINE_CONFIG_POOL => {
                let pool: MachineConfigPool = Deserialize::deserialize(object)?;
                self.saw_elsewhere(kind.name, newest_condition_time(&pool.status.conditions));
                push(&mut self.machine_config_pools, Some(pool))
            }
            kinds::MACHINE_CONFIG_NODE => {
                let mcn: MachineConfigNode = Deserialize::deserialize(object)?;
                self.saw_elsewhere(kind.name, newest_condition_time(&mcn.status.conditions));
                push(&mut self.machine_config_nodes, Some(mcn))
            }
            kinds::API_REQUEST_COUNT => push(
                &mut self.api_request_counts,
                Some(read_api_request_count(object)?),
            ),
            kinds::CONFIG_MAP => {
                let cm = ConfigMap::deserialize(object)?;
                let wanted = kinds::CONFIG_MAP.listings.iter().any(|listing| {
                    listing.namespace.is_some()
                        && cm.metadata.namespace.as_deref() == listing.namespace
                        && listing.name() == Some(cm.metadata.name.as_str())
                });
                push(&mut self.config_maps, wanted.then_some(cm))
            }
            kinds::SECRET => push(&mut self.tls_secrets, read_tls_secret(object)?),
            kinds::INGRESS_CONTROLLER => push(
                &mut self.ingress_controllers,
                Some(Deserialize::deserialize(object)?),
            ),
            kinds::CLUSTER_SERVICE_VERSION => push(
                &mut self.cluster_service_versions,
                read_cluster_service_version(object)?,
            ),
            _ => return Ok(false),
        };
        self.loaded.insert(kind.name.to_owned());
        Ok(kept)
    }

    /// Takes a time the ClusterVersion or a ClusterOperator records into
    /// the time of the data.
    pub(crate) fn saw(&mut self, time: Option<Timestamp>) {
        self.newest = self.newest.max(time);
    }

    /// Takes a time another object (`what`) records.
    pub(crate) fn saw_elsewhere(&mut self, what: &'static str, time: Option<Timestamp>) {
        if let Some(time) = time {
            let newest = self.newest_elsewhere.entry(what).or_insert(time);
            *newest = (*newest).max(time);
        }
    }

    /// The time of the data without a timestamp file, as `oc adm upgrade`
    /// takes it: the newest time the ClusterVersion and ClusterOperators
    /// record, else the newest any object records. Other objects more than
    /// a day past it are named.
    pub(crate) fn time_of_the_data(&self) -> Option<AsOf> {
        match self.newest {
            Some(time) => Some(AsOf {
                disagreement: self.clocks_past(time),
                ..AsOf::new(
                    time,
                    "the newest time the ClusterVersion and ClusterOperators record",
                )
            }),
            None => {
                let time = self.newest_elsewhere.values().max()?;
                Some(AsOf::new(*time, "the newest timestamp in the data"))
            }
        }
    }

    /// Objects whose newest time runs more than a day past `time`.
    pub(crate) fn clocks_past(&self, time: Timestamp) -> Option<String> {
        const DAY: jiff::SignedDuration = jiff::SignedDuration::from_hours(24);
        let past: Vec<String> = self
            .newest_elsewhere
            .iter()
            .filter(|(_, t)| t.duration_since(time) > DAY)
            .map(|(what, t)| {
                format!(
                    "{what} times run {} past it",
                    crate::model::text::since(Some(time), *t)
                )
            })
            .collect();
        (!past.is_empty()).then(|| {
            format!(
                "{}: the data may mix captures taken at different times",
                past.join(", ")
            )
        })
    }

    /// Counts an object no check reads.
    pub fn skip(&mut self, kind: &str, api_version: Option<&str>) {
        let key = match api_version {
            Some(v) => format!("{kind} ({v})"),
            None => kind.to_owned(),
        };
        *self.skipped.entry(key).or_default() += 1;
    }

    /// Whether the data shows an OpenShift cluster: objects only
    /// OpenShift's own operators write, a ClusterOperator or the
    /// Infrastructure `cluster`. (A ClusterVersion alone says nothing: a
    /// plain Kubernetes cluster may serve the gate one to guard.)
    pub fn shows_openshift(&self) -> bool {
        !self.cluster_operators.is_empty() || self.infrastructure.is_some()
    }

    /// A hosted cluster (HyperShift): its Infrastructure `cluster` says
    /// its control plane is `External`, on a management cluster. It has no
    /// control-plane nodes, etcd members or MachineConfigPools of its own,
    /// so the checks of them do not apply, rather than find nothing.
    pub fn hosted(&self) -> bool {
        self.infrastructure
            .as_ref()
            .is_some_and(crate::view::openshift::Infrastructure::hosted)
    }

    /// The NodePool a hosted cluster's node belongs to, by the label
    /// HyperShift gives its nodes ([`NODEPOOL_LABEL`]).
    pub fn nodepool_of(node: &Node) -> Option<&str> {
        node.metadata
            .labels
            .get(NODEPOOL_LABEL)
            .map(String::as_str)
            .filter(|pool| !pool.is_empty())
    }

    /// Whether the cluster runs on a single node ([`Self::single_node_by`]).
    pub fn single_node(&self) -> bool {
        self.single_node_by().is_some()
    }

    /// How the data shows a single-node cluster, if it does. The
    /// Infrastructure `cluster` decides where there is one (both topologies
    /// `SingleReplica`); without it, the nodes: exactly one, carrying both
    /// the control-plane (`master` or `control-plane`) and the `worker`
    /// role, with one etcd member where the data counts them (the etcd
    /// operator's `EtcdMembersAvailable`, else the etcd pods' nodes).
    pub fn single_node_by(&self) -> Option<SingleNode> {
        if let Some(infrastructure) = &self.infrastructure {
            return infrastructure.single_node().then_some(SingleNode::Topology);
        }
        let [node] = &self.nodes[..] else {
            return None;
        };
        let has = |role: &str| {
            node.metadata
                .labels
                .contains_key(&format!("node-role.kubernetes.io/{role}"))
        };
        let both_roles = (has("master") || has("control-plane")) && has("worker");
        (both_roles && self.etcd_members().is_none_or(|n| n == 1)).then_some(SingleNode::Nodes)
    }

    /// How many etcd members the data shows: the etcd operator's count
    /// (`EtcdMembersAvailable: 1 members are available`), else the nodes
    /// the etcd pods of `openshift-etcd` run on; none when it shows
    /// neither.
    pub fn etcd_members(&self) -> Option<usize> {
        let said = self
            .cluster_operators
            .iter()
            .find(|co| co.metadata.name == "etcd")
            .and_then(|co| crate::model::meta::condition(&co.status.conditions, "Available"))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.trim().strip_prefix("EtcdMembersAvailable:"))
            })
            .and_then(|l| l.split_whitespace().next()?.parse().ok());
        if said.is_some() {
            return said;
        }
        let nodes: BTreeSet<&str> = self
            .pods
            .iter()
            .filter(|p| {
                p.namespace == "openshift-etcd"
                    && p.labels.get("app").map(String::as_str) == Some("etcd")
                    && !p.node_name.is_empty()
            })
            .map(|p| p.node_name.as_str())
            .collect();
        (!nodes.is_empty()).then_some(nodes.len())
    }

    /// Records that `kind` was loaded, e.g. from an empty List.
    pub(crate) fn mark_loaded(&mut self, kind: &Kind) {
        if kinds::ALL.contains(kind) {
            self.loaded.insert(kind.name.to_owned());
        }
    }

    /// Whether objects of `kind` were loaded (possibly none).
    pub fn has(&self, kind: &Kind) -> bool {
        self.loaded.contains(kind.name)
    }

    /// Adds alerts; several sources add up.
    pub(crate) fn add_alerts(&mut self, alerts: Vec<Alert>) {
        self.alerts.get_or_insert_with(Vec::new).extend(alerts);
    }

    /// Adds what an alert source answered: its alerts, or, when it could
    /// not be read, why, so that the alert checks are Errors saying so
    /// (never a run, or `check`, that fails whole).
    pub(crate) fn add_alerts_read(&mut self, read: Result<Vec<Alert>, impl std::error::Error>) {
        match read {
            Ok(alerts) => self.add_alerts(alerts),
            Err(e) => {
                self.unreadable
                    .insert(alerts::KIND.to_owned(), crate::model::text::chain(&e));
            }
        }
    }

    /// A ConfigMap by namespace and name.
    pub fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps.iter().find(|cm| {
            cm.metadata.namespace.as_deref() == Some(namespace) && cm.metadata.name == name
        })
    }
}

impl ClusterView {
    /// The MachineConfigPool a node belongs to: the pool whose selector
    /// matches it, preferring a custom pool over `worker`, as the
    /// machine-config operator does.
    pub(crate) fn pool_of(&self, node: &Node) -> Option<&MachineConfigPool> {
        let mut pools = self
            .machine_config_pools
            .iter()
            .filter(|p| p.selects(&node.metadata.labels));
        let first = pools.next()?;
        if first.metadata.name != "worker" {
            return Some(first);
        }
        Some(pools.next().unwrap_or(first))
    }

    /// Whether an update drains `node`: it is in a pool that is not paused,
    /// or, with no MachineConfigPools in the data, always.
    /// The PodDisruptionBudgets that can hold a drain: all but the gate's own.
    pub fn budgets(&self) -> impl Iterator<Item = &PodDisruptionBudget> {
        self.pod_disruption_budgets.iter().filter(|pdb| {
            self.gate_namespace.is_none()
                || pdb.metadata.namespace.as_deref() != self.gate_namespace.as_deref()
        })
    }

    pub fn drains(&self, node: &Node) -> bool {
        if self.machine_config_pools.is_empty() {
            return true;
        }
        self.pool_of(node).is_some_and(|p| !p.spec.paused)
    }
}

fn push<T>(list: &mut Vec<T>, item: Option<T>) -> bool {
    match item {
        Some(item) => {
            list.push(item);
            true
        }
        None => false,
    }
}
