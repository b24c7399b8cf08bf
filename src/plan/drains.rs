//! What each batch's drains evict, and which PodDisruptionBudgets hold
//! them: whether an eviction is refused, and whether it can ever succeed.
//!
//! A drain evicts every pod on the node but DaemonSet pods, static pods'
//! mirrors, finished and terminating ones (`Pod::evicted_by_drain`, as the
//! drain checks count them). The API server refuses an eviction that
//! would leave a PDB below `desiredHealthy`; the machine-config daemon
//! retries. A refused eviction succeeds once an evicted pod's replacement
//! is healthy elsewhere, which needs room for it on the pool's other
//! nodes (their free requests, the pod's node selector and its required
//! anti-affinity); a PDB that needs every one of its pods healthy never
//! allows one, since a pod is replaced only after it is evicted.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use super::duration::REPLACEMENT_READY;
use crate::view::ClusterView;
use crate::view::k8s::{Node, Pod, PodDisruptionBudget};
use crate::view::quantity::Resources;

/// How a PDB holds a batch's drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// The drain waits for replacements to become healthy, then goes on.
    Waits,
    /// No eviction of these pods can ever succeed: the drain never ends.
    Never,
    /// The data does not say.
    Unknown,
}

/// One PDB that holds one batch's drain.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    /// `namespace/name`.
    pub pdb: String,
    /// The batch's nodes its evicted pods are on.
    pub nodes: Vec<String>,
    pub outcome: Outcome,
    /// Its pods the batch's drains evict.
    pub evicted: usize,
    /// Evictions it allows now (`currentHealthy - desiredHealthy`).
    pub allowed: i64,
    /// The expected wait, when it waits and the plan can tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
    /// Why, in words.
    pub reason: String,
}

/// The pods and budgets of the cluster, indexed once for every batch:
/// each evicted pod is matched against its namespace's PDBs once, so a
/// batch costs its own pods, never every pod or every PDB again.
pub struct Index<'a> {
    /// Each node's pods, read in one pass.
    on_node: HashMap<&'a str, OnNode<'a>>,
    pods: &'a [Pod],
    /// Running pods by namespace, for anti-affinity: built the first time
    /// a replacement with required anti-affinity is placed.
    by_namespace: OnceCell<HashMap<&'a str, Vec<&'a Pod>>>,
    /// Every PDB with a selector, by namespace then name.
    pdbs: Vec<&'a PodDisruptionBudget>,
    labels: HashMap<&'a str, &'a BTreeMap<String, String>>,
}

/// What one node holds: kept together, so that a batch reads each of its
/// nodes from one place.
#[derive(Default)]
struct OnNode<'a> {
    /// Requests of every pod on it (terminating ones are gone).
    used: Resources,
    /// The pods a drain of it evicts.
    evicted: Vec<&'a Pod>,
    /// Each PDB that selects an evicted pod: (the pod in `evicted`, the
    /// PDB in `Index::pdbs`).
    selected: Vec<(u32, u32)>,
}

/// The room on one pool's nodes for replacements: each Ready,
/// schedulable node's free allocatable, computed once per pool; a batch
/// leaves out its own nodes and takes room as it places pods.
pub struct Room<'a> {
    free: BTreeMap<&'a str, Resources>,
    /// Nodes of the pool that report allocatable resources.
    known: HashSet<&'a str>,
}

impl<'a> Room<'a> {
    pub fn new(index: &Index<'a>, pool: &[&'a Node]) -> Self {
        Self {
            free: pool
                .iter()
                .filter(|n| n.ready() && !n.spec.unschedulable)
                .map(|n| {
                    let used = index
                        .on_node
                        .get(n.name())
                        .map(|o| o.used)
                        .unwrap_or_default();
                    (n.name(), n.status.allocatable.saturating_sub(used))
                })
                .collect(),
            known: pool
                .iter()
                .filter(|n| n.status.allocatable != Resources::default())
                .map(|n| n.name())
                .collect(),
        }
    }
}

impl<'a> Index<'a> {
    pub fn new(view: &'a ClusterView) -> Self {
        let mut pdbs: Vec<&PodDisruptionBudget> = view
            .budgets()
            .filter(|p| p.spec.selector.is_some())
            .collect();
        pdbs.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        let mut in_namespace: HashMap<&str, Vec<u32>> = HashMap::new();
        for (i, pdb) in pdbs.iter().enumerate() {
            let ns = pdb.metadata.namespace.as_deref().unwrap_or("");
            in_namespace
                .entry(ns)
                .or_default()
                .push(u32::try_from(i).unwrap_or(u32::MAX));
        }
        let mut index = Self {
            on_node: HashMap::new(),
            pods: &view.pods,
            by_namespace: OnceCell::new(),
            pdbs,
            labels: view
                .nodes
                .iter()
                .map(|n| (n.name(), &n.metadata.labels))
                .collect(),
        };
        // Pods come grouped by namespace: the last one's PDBs, kept.
        let mut last: Option<(&str, &[u32])> = None;
        for pod in view.pods.iter().filter(|p| !p.terminating) {
            if pod.node_name.is_empty() {
                continue;
            }
            let on = index.on_node.entry(&pod.node_name).or_default();
            on.used = on.used + pod.requests;
            if !pod.evicted_by_drain() {
                continue;
            }
            let pdbs = match last {
                Some((ns, pdbs)) if ns == pod.namespace => pdbs,
                _ => {
                    let pdbs = in_namespace
                        .get(pod.namespace.as_str())
                        .map_or(&[][..], Vec::as_slice);
                    last = Some((&pod.namespace, pdbs));
                    pdbs
                }
            };
            let at = u32::try_from(on.evicted.len()).unwrap_or(u32::MAX);
            for i in pdbs {
                let selects = index.pdbs[*i as usize]
                    .spec
                    .selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels));
                if selects {
                    on.selected.push((at, *i));
                }
            }
            on.evicted.push(pod);
        }
        index
    }

    /// Running pods by namespace, built once.
    fn by_namespace(&self) -> &HashMap<&'a str, Vec<&'a Pod>> {
        self.by_namespace.get_or_init(|| {
            let mut by: HashMap<&str, Vec<&Pod>> = HashMap::new();
            for pod in self.pods.iter().filter(|p| !p.terminating) {
                by.entry(pod.namespace.as_str()).or_default().push(pod);
            }
            by
        })
    }

    /// The pods a drain of `node` evicts.
    pub fn evictions(&self, node: &str) -> &[&'a Pod] {
        self.on_node
            .get(node)
            .map_or(&[], |on| on.evicted.as_slice())
    }

    /// The PDBs that hold the drain of `batch`, whose pods' replacements
    /// may go to the rest of its pool (`room`).
    pub fn holds(&self, batch: &[&Node], room: &Room) -> Vec<Hold> {
        let in_batch: HashSet<&str> = batch.iter().map(|n| n.name()).collect();
        // The batch's evicted pods by the PDBs that select them, in the
        // PDBs' order (namespace, then name).
        let mut by_pdb: BTreeMap<u32, Vec<&Pod>> = BTreeMap::new();
        for node in batch {
            if let Some(on) = self.on_node.get(node.name()) {
                for (pod, pdb) in &on.selected {
                    by_pdb
                        .entry(*pdb)
                        .or_default()
                        .push(on.evicted[*pod as usize]);
                }
            }
        }
        if by_pdb.is_empty() {
            return Vec::new();
        }
        // Room taken by the batch's replacements, over the pool's.
        let mut taken: HashMap<&str, Resources> = HashMap::new();
        let allocatable_known = room.known.iter().any(|n| !in_batch.contains(n));
        let mut placed: Vec<(&Pod, &str)> = Vec::new();
        let mut holds = Vec::new();
        for (i, mut matched) in by_pdb {
            let pdb = self.pdbs[i as usize];
            let ns = pdb.metadata.namespace.as_deref().unwrap_or("");
            let evicted = matched.len();
            let s = &pdb.status;
            let allowed = s.current_healthy.saturating_sub(s.desired_healthy).max(0);
            if usize::try_from(allowed).is_ok_and(|a| evicted <= a) {
                continue;
            }
            let nodes: BTreeSet<String> = matched.iter().map(|p| p.node_name.clone()).collect();
            let mut hold = Hold {
                pdb: super::qualified(ns, &pdb.metadata.name),
                nodes: nodes.into_iter().collect(),
                outcome: Outcome::Unknown,
                evicted,
                allowed,
                wait_seconds: None,
                reason: String::new(),
            };
            if s.expected_pods <= 0 && s.current_healthy <= 0 && s.desired_healthy <= 0 {
                hold.reason = "its status is not in the data (no expectedPods): the plan cannot know whether it allows the evictions".to_owned();
            } else if s.expected_pods > 0 && s.desired_healthy >= s.expected_pods {
                hold.outcome = Outcome::Never;
                hold.reason = format!(
                    "needs all {} of its pods healthy (desiredHealthy {}): every eviction is refused, and a pod is replaced only after it is evicted",
                    s.expected_pods, s.desired_healthy
                );
            } else if allowed == 0 {
                hold.outcome = Outcome::Waits;
                hold.reason = format!(
                    "has {} healthy pods and needs {}: its evictions wait until its unhealthy pods recover, which the plan cannot know",
                    s.current_healthy, s.desired_healthy
                );
            } else {
                // The replacements that must be healthy before the
                // last eviction is allowed; the largest first.
                let waiting = evicted - usize::try_from(allowed).unwrap_or(0);
                matched.sort_by_key(|p| {
                    std::cmp::Reverse((p.requests.cpu_millis, p.requests.memory_bytes))
                });
                let mut homeless = 0;
                for pod in &matched[..waiting] {
                    match self.place(pod, room, &mut taken, &placed, &in_batch) {
                        Some(node) => placed.push((pod, node)),
                        None => homeless += 1,
                    }
                }
                if homeless == 0 {
                    let rounds = waiting.div_ceil(usize::try_from(allowed).unwrap_or(1));
                    let wait = (rounds as u64).saturating_mul(REPLACEMENT_READY);
                    hold.outcome = Outcome::Waits;
                    hold.wait_seconds = Some(wait);
                    hold.reason = format!(
                        "allows {allowed} of its {evicted} evictions at once: {rounds} round{} of replacements becoming healthy elsewhere",
                        if rounds == 1 { "" } else { "s" }
                    );
                } else if !allocatable_known {
                    hold.reason = "the pool's other nodes report no allocatable resources: the plan cannot know whether its pods have room elsewhere".to_owned();
                } else {
                    hold.outcome = Outcome::Never;
                    hold.reason = format!(
                        "allows {allowed} of its {evicted} evictions, and {homeless} of its pods' replacements have no room on the pool's other nodes (by requests, node selector and required anti-affinity)"
                    );
                }
            }
            holds.push(hold);
        }
        holds
    }

    /// The first node of the pool outside the batch with room for `pod`'s
    /// replacement, whose labels its node selector matches and where its
    /// required anti-affinity lets it run; takes the room.
    fn place<'n>(
        &self,
        pod: &Pod,
        room: &Room<'n>,
        taken: &mut HashMap<&'n str, Resources>,
        placed: &[(&Pod, &str)],
        in_batch: &HashSet<&str>,
    ) -> Option<&'n str> {
        let node = room
            .free
            .iter()
            .filter(|(name, _)| !in_batch.contains(*name))
            .filter(|(name, free)| {
                let left = taken.get(*name).map_or(**free, |t| free.saturating_sub(*t));
                left.covers(pod.requests)
            })
            .map(|(name, _)| *name)
            .find(|name| {
                let labels = self.labels.get(name).copied();
                let selected = pod
                    .node_selector
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
                selected && self.anti_affinity_allows(pod, name, placed, in_batch)
            })?;
        let used = taken.entry(node).or_default();
        *used = *used + pod.requests;
        Some(node)
    }

    /// Whether `pod`'s required anti-affinity lets it run on `node`: no
    /// pod it selects (staying, or a replacement already placed) runs on a
    /// node of the same topology value.
    fn anti_affinity_allows(
        &self,
        pod: &Pod,
        node: &str,
        placed: &[(&Pod, &str)],
        in_batch: &HashSet<&str>,
    ) -> bool {
        pod.required_anti_affinity.iter().all(|term| {
            let Some(selector) = &term.label_selector else {
                return true;
            };
            let value_of = |n: &str| {
                self.labels
                    .get(n)
                    .and_then(|l| l.get(&term.topology_key))
                    .cloned()
            };
            let Some(here) = value_of(node) else {
                return true;
            };
            let namespaces: Vec<&str> = if term.namespaces.is_empty() {
                vec![pod.namespace.as_str()]
            } else {
                term.namespaces.iter().map(String::as_str).collect()
            };
            let staying = namespaces
                .iter()
                .flat_map(|ns| self.by_namespace().get(ns).into_iter().flatten())
                .filter(|p| !in_batch.contains(p.node_name.as_str()))
                .map(|p| (*p, p.node_name.as_str()));
            let mut all = staying.chain(placed.iter().copied());
            !all.any(|(other, on)| {
                namespaces.contains(&other.namespace.as_str())
                    && selector.matches(&other.labels)
                    && value_of(on).as_deref() == Some(here.as_str())
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn node(name: &str, cpu: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name,
                "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": name}},
               "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"},
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn pod(name: &str, node: &str, cpu: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": {"app": "db"},
                "ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
               "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]}})
    }

    fn pdb(expected: i64, current: i64, desired: i64) -> Value {
        json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
               "spec": {"selector": {"matchLabels": {"app": "db"}}},
               "status": {"expectedPods": expected, "currentHealthy": current, "desiredHealthy": desired,
                          "disruptionsAllowed": (current - desired).max(0)}})
    }

    fn view(objects: Vec<Value>) -> ClusterView {
        let mut view = ClusterView::default();
        for o in objects {
            let kind = crate::view::kinds::named(o["kind"].as_str().unwrap()).unwrap();
            view.add(kind, o).unwrap();
        }
        view
    }

    /// The holds of a batch of node `a`, the others `b` and `c`.
    fn holds(objects: Vec<Value>) -> Vec<Hold> {
        let view = view(objects);
        let index = Index::new(&view);
        let batch: Vec<&Node> = view.nodes.iter().filter(|n| n.name() == "a").collect();
        let pool: Vec<&Node> = view.nodes.iter().collect();
        index.holds(&batch, &Room::new(&index, &pool))
    }

    fn anti_affine(mut pod: Value) -> Value {
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}});
        pod
    }

    #[rstest]
    #[case::allowed_now(vec![pdb(3, 3, 2), pod("p0", "a", "1")], None, None)]
    #[case::fits_elsewhere_waits(vec![pdb(3, 3, 2), pod("p0", "a", "1"), pod("p1", "a", "1")],
        Some(Outcome::Waits), Some(REPLACEMENT_READY))]
    #[case::two_rounds(vec![pdb(4, 4, 3), pod("p0", "a", "1"), pod("p1", "a", "1"), pod("p2", "a", "1")],
        Some(Outcome::Waits), Some(2 * REPLACEMENT_READY))]
    #[case::never_all_needed(vec![pdb(2, 2, 2), pod("p0", "a", "1"), pod("p1", "b", "1")], Some(Outcome::Never), None)]
    #[case::no_room_never(vec![pdb(3, 3, 2), pod("p0", "a", "3"), pod("p1", "a", "3")], Some(Outcome::Never), None)]
    #[case::unhealthy_waits_unknown_time(vec![pdb(3, 1, 2), pod("p0", "a", "1")], Some(Outcome::Waits), None)]
    #[case::no_status_unknown(vec![pdb(0, 0, 0), pod("p0", "a", "1")], Some(Outcome::Unknown), None)]
    #[case::daemonset_pods_are_not_evicted(vec![pdb(2, 2, 2),
        json!({"kind": "Pod", "metadata": {"name": "ds", "namespace": "shop", "labels": {"app": "db"},
               "ownerReferences": [{"kind": "DaemonSet", "controller": true}]}, "spec": {"nodeName": "a"}})],
        None, None)]
    #[case::anti_affinity_leaves_no_node(vec![pdb(3, 3, 2), anti_affine(pod("p0", "a", "1")), anti_affine(pod("p1", "a", "1")),
        pod("s1", "b", "0"), pod("s2", "c", "0")], Some(Outcome::Never), None)]
    #[case::anti_affinity_fits(vec![pdb(3, 3, 2), anti_affine(pod("p0", "a", "1")), anti_affine(pod("p1", "a", "1")),
        pod("s1", "b", "0")], Some(Outcome::Waits), Some(REPLACEMENT_READY))]
    fn pdb_outcomes(
        #[case] objects: Vec<Value>,
        #[case] outcome: Option<Outcome>,
        #[case] wait: Option<u64>,
    ) {
        let mut all = vec![node("a", "4"), node("b", "2"), node("c", "2")];
        all.extend(objects);
        let holds = holds(all);
        assert_eq!(holds.first().map(|h| h.outcome), outcome, "{holds:?}");
        assert_eq!(
            holds.first().and_then(|h| h.wait_seconds),
            wait,
            "{holds:?}"
        );
        if let Some(hold) = holds.first() {
            assert_eq!(
                (hold.pdb.as_str(), hold.nodes.as_slice()),
                ("shop/db", &["a".to_owned()][..])
            );
        }
    }

    #[test]
    fn a_node_selector_narrows_where_a_replacement_goes() {
        let mut p1 = pod("p1", "a", "2");
        p1["spec"]["nodeSelector"] = json!({"disk": "ssd"});
        let holds = holds(vec![
            node("a", "4"),
            node("b", "8"),
            pdb(3, 3, 2),
            pod("p0", "a", "1"),
            p1,
        ]);
        assert_eq!(holds[0].outcome, Outcome::Never, "{holds:?}");
        assert!(
            holds[0]
                .reason
                .contains("1 of its pods' replacements have no room"),
            "{}",
            holds[0].reason
        );
    }
}
