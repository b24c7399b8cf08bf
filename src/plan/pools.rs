//! Each MachineConfigPool's rollout as the machine-config operator's node
//! controller does it: which pools update, how many nodes at once, and in
//! what order.
//!
//! - A version update renders a new configuration for every pool; a
//!   paused pool takes none of it until it is unpaused.
//! - At most `maxUnavailable` nodes update at once (a count, or a
//!   percentage of the pool's nodes rounded down, at least 1), less the
//!   nodes already unavailable.
//! - Candidates go by `topology.kubernetes.io/zone`, then oldest
//!   `creationTimestamp`; nodes without a zone last, oldest first. In the
//!   master pool the node running the machine-config-operator pod is
//!   deferred while any other candidate is left: it goes last.

use std::cmp::Reverse;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::view::ClusterView;
use crate::view::k8s::Node;

/// The label the MCO orders candidates by.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The label of the machine-config-operator pod, and its namespace.
pub const OPERATOR_POD_LABEL: (&str, &str) = ("k8s-app", "machine-config-operator");
pub const OPERATOR_NAMESPACE: &str = "openshift-machine-config-operator";

/// The pool of the control plane.
pub const MASTER: &str = "master";

/// How many of `nodes` may update at once, as the MCO computes it: an
/// integer as it is, a percentage of `nodes` rounded down
/// (`GetScaledValueFromIntOrPercent` with `roundUp` false), 1 when not set,
/// and at least 1. Anything else is refused, as the MCO refuses to sync
/// the pool.
pub fn max_unavailable(given: Option<&IntOrString>, nodes: usize) -> Result<usize, String> {
    let value = match given {
        None => 1,
        Some(given) => scaled("maxUnavailable", given, nodes, false)?,
    };
    Ok(value.max(1))
}

/// A count or a percentage of `total`, as Kubernetes scales one
/// (`GetScaledValueFromIntOrPercent`): a percentage rounded up or down as
/// `round_up` says. `field` names it in a refusal.
pub fn scaled(
    field: &str,
    given: &IntOrString,
    total: usize,
    round_up: bool,
) -> Result<usize, String> {
    match given {
        IntOrString::Int(n) => usize::try_from(*n).map_err(|_| format!("{field} {n} is negative")),
        IntOrString::String(s) => {
            let percent = s
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<usize>().ok())
                .ok_or_else(|| format!("{field} {s:?} is neither a count nor a percentage"))?;
            let share = percent.saturating_mul(total);
            Ok(if round_up {
                share.div_ceil(100)
            } else {
                share / 100
            })
        }
    }
}

/// `maxUnavailable` as the pool gives it, in words.
pub fn said(given: Option<&IntOrString>) -> String {
    match given {
        None => "1 (not set)".to_owned(),
        Some(IntOrString::Int(n)) => n.to_string(),
        Some(IntOrString::String(s)) => s.clone(),
    }
}

/// The MCO's order of `nodes`: by zone, then oldest first; nodes without
/// a zone last, oldest first (a node whose age is not known after those
/// whose is); `operator_node` last. Names break ties, so the order is the
/// same every time.
pub fn order<'a>(mut nodes: Vec<&'a Node>, operator_node: Option<&str>) -> Vec<&'a Node> {
    // Each key once: a pool of thousands of nodes sorts in a few
    // milliseconds.
    nodes.sort_by_cached_key(|n| {
        let zone = n.metadata.labels.get(ZONE_LABEL);
        let created = n.metadata.creation_timestamp;
        (
            operator_node == Some(n.name()),
            zone.is_none(),
            zone.cloned(),
            created.is_none(),
            created,
            n.name().to_owned(),
        )
    });
    nodes
}

/// Whether a node counts as unavailable to the MCO: not Ready, or
/// cordoned.
pub fn unavailable(node: &Node) -> bool {
    !node.ready() || node.spec.unschedulable
}

/// The pools and their nodes: each node in its one pool (a custom pool
/// over `worker`, as the MCO has it). Without MachineConfigPool data, the
/// default pools by the nodes' roles (`master` or `control-plane` in
/// master, every other node in worker); the bool says so.
///
/// A hosted cluster (HyperShift) has neither MachineConfigPools nor
/// control-plane nodes: its pools are its NodePools, by the label
/// HyperShift gives their nodes, and no master pool is made up.
pub fn members(view: &ClusterView) -> (Vec<(String, Vec<&Node>)>, bool) {
    if view.hosted() {
        let mut pools: Vec<(String, Vec<&Node>)> = Vec::new();
        for node in &view.nodes {
            let pool = ClusterView::nodepool_of(node).unwrap_or("worker");
            match pools.iter_mut().find(|(name, _)| name == pool) {
                Some((_, nodes)) => nodes.push(node),
                None => pools.push((pool.to_owned(), vec![node])),
            }
        }
        pools.sort_by(|a, b| a.0.cmp(&b.0));
        return (pools, false);
    }
    let inferred = view.machine_config_pools.is_empty();
    let mut pools: Vec<(String, Vec<&Node>)> = if inferred {
        vec![
            (MASTER.to_owned(), Vec::new()),
            ("worker".to_owned(), Vec::new()),
        ]
    } else {
        view.machine_config_pools
            .iter()
            .map(|p| (p.metadata.name.clone(), Vec::new()))
            .collect()
    };
    for node in &view.nodes {
        let pool = if inferred {
            let labels = &node.metadata.labels;
            let has = |role: &str| labels.contains_key(&format!("node-role.kubernetes.io/{role}"));
            if has("master") || has("control-plane") {
                MASTER
            } else {
                "worker"
            }
        } else {
            match view.pool_of(node) {
                Some(pool) => pool.metadata.name.as_str(),
                None => continue,
            }
        };
        if let Some((_, nodes)) = pools.iter_mut().find(|(name, _)| name == pool) {
            nodes.push(node);
        }
    }
    if inferred {
        pools.retain(|(_, nodes)| !nodes.is_empty());
    }
    // The master pool first, then by name.
    pools.sort_by_key(|(name, _)| (Reverse(name == MASTER), name.clone()));
    (pools, inferred)
}

/// The node the machine-config-operator pod runs on, when the data says.
pub fn operator_node(view: &ClusterView) -> Option<&str> {
    let (key, value) = OPERATOR_POD_LABEL;
    let mut pods = view.pods.iter().filter(|p| {
        p.namespace == OPERATOR_NAMESPACE
            && !p.terminating
            && p.labels.get(key).map(String::as_str) == Some(value)
    });
    // The MCO defers no node when it does not find exactly one pod.
    match (pods.next(), pods.next()) {
        (Some(pod), None) if !pod.node_name.is_empty() => Some(pod.node_name.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    #[rstest]
    #[case::unset(None, 10, Ok(1))]
    #[case::count(Some(IntOrString::Int(3)), 10, Ok(3))]
    #[case::zero_is_one(Some(IntOrString::Int(0)), 10, Ok(1))]
    #[case::percent_rounds_down(Some(IntOrString::String("25%".into())), 10, Ok(2))]
    #[case::percent_exact(Some(IntOrString::String("20%".into())), 59, Ok(11))]
    #[case::small_percent_is_one(Some(IntOrString::String("10%".into())), 3, Ok(1))]
    #[case::all(Some(IntOrString::String("100%".into())), 7, Ok(7))]
    #[case::more_than_the_pool(Some(IntOrString::Int(20)), 3, Ok(20))]
    #[case::negative(Some(IntOrString::Int(-1)), 3, Err("maxUnavailable -1 is negative".to_owned()))]
    #[case::garbage(Some(IntOrString::String("two".into())), 3, Err("maxUnavailable \"two\" is neither a count nor a percentage".to_owned()))]
    fn batch_sizes(
        #[case] given: Option<IntOrString>,
        #[case] nodes: usize,
        #[case] expected: Result<usize, String>,
    ) {
        assert_eq!(max_unavailable(given.as_ref(), nodes), expected);
    }

    fn node(name: &str, zone: Option<&str>, created: Option<&str>) -> Node {
        let mut labels = serde_json::Map::new();
        if let Some(zone) = zone {
            labels.insert(ZONE_LABEL.into(), json!(zone));
        }
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels,
            "creationTimestamp": created}}))
        .unwrap()
    }

    #[rstest]
    #[case::by_zone_then_age(
        vec![node("c", Some("b"), Some("2024-01-01T00:00:00Z")), node("a", Some("a"), Some("2024-03-01T00:00:00Z")),
             node("b", Some("a"), Some("2024-02-01T00:00:00Z"))],
        None, &["b", "a", "c"])]
    #[case::no_zone_last_oldest_first(
        vec![node("new", None, Some("2024-05-01T00:00:00Z")), node("old", None, Some("2020-01-01T00:00:00Z")),
             node("zoned", Some("z"), Some("2025-01-01T00:00:00Z"))],
        None, &["zoned", "old", "new"])]
    #[case::age_unknown_after_known(
        vec![node("x", None, None), node("y", None, Some("2024-05-01T00:00:00Z"))],
        None, &["y", "x"])]
    #[case::operator_node_last(
        vec![node("m0", Some("a"), Some("2024-01-01T00:00:00Z")), node("m1", Some("b"), Some("2024-01-01T00:00:00Z")),
             node("m2", Some("c"), Some("2024-01-01T00:00:00Z"))],
        Some("m0"), &["m1", "m2", "m0"])]
    #[case::ties_by_name(
        vec![node("q", Some("a"), Some("2024-01-01T00:00:00Z")), node("p", Some("a"), Some("2024-01-01T00:00:00Z"))],
        None, &["p", "q"])]
    fn the_order(
        #[case] nodes: Vec<Node>,
        #[case] operator: Option<&str>,
        #[case] expected: &[&str],
    ) {
        let ordered = order(nodes.iter().collect(), operator);
        let names: Vec<&str> = ordered.iter().map(|n| n.name()).collect();
        assert_eq!(names, expected);
    }
}
