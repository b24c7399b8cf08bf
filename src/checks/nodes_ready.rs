//! NodesReady: every node is Ready and schedulable. A node cordoned by the
//! machine-config daemon (mid-update) is told apart from one cordoned by hand.
//! Nodes that are not Ready carry the alert OpenShift raises for them,
//! `KubeNodeNotReady`; a cordoned node has no OpenShift name, so a finding
//! with one is accepted by the check's name alone.

use super::{Check, Context, require};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::model::text::since;

pub struct NodesReady;

const URL: &str = "https://docs.openshift.com/container-platform/latest/support/troubleshooting/verifying-node-health.html";

impl Check for NodesReady {
    fn name(&self) -> &'static str {
        "NodesReady"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["Node"]) {
            return skip;
        }
        let nodes = &ctx.view.nodes;
        let mut problems = Vec::new();
        let mut cordoned = false;
        for node in nodes {
            if !node.ready() {
                let ready = condition(&node.status.conditions, "Ready");
                problems.push(format!(
                    "{} is not Ready for {} ({})",
                    node.name(),
                    since(ready.and_then(|c| c.last_transition_time), ctx.now),
                    ready
                        .and_then(|c| c.message.as_deref().or(c.reason.as_deref()))
                        .unwrap_or("no Ready condition")
                ));
            }
            if node.spec.unschedulable {
                let by = if node.drained_by_mco() {
                    "cordoned by the machine-config daemon for an update"
                } else {
                    "cordoned by hand"
                };
                problems.push(format!("{} is unschedulable ({by})", node.name()));
                cordoned = true;
            }
        }
        if nodes.is_empty() {
            Finding::error("no Nodes in the cluster data")
        } else if problems.is_empty() {
            Finding::pass(format!(
                "all {} nodes are Ready and schedulable",
                nodes.len()
            ))
        } else {
            Finding::fail(list(&problems, 5))
                .with_url(URL)
                .with_risks((!cordoned).then_some("KubeNodeNotReady"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, condition};
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::json;

    fn node(name: &str, ready: &str, unschedulable: bool, drain: &str) -> serde_json::Value {
        json!({"kind": "Node",
               "metadata": {"name": name, "annotations": {"machineconfiguration.openshift.io/desiredDrain": drain}},
               "spec": {"unschedulable": unschedulable},
               "status": {"conditions": [condition("Ready", ready, "kubelet stopped posting node status")]}})
    }

    #[rstest]
    #[case::healthy(node("w1", "True", false, ""), Outcome::Pass, "all 1 nodes are Ready", &[])]
    #[case::not_ready(
        node("w1", "Unknown", false, ""),
        Outcome::Fail,
        "w1 is not Ready for 2h0m (kubelet stopped posting node status)",
        &["KubeNodeNotReady"]
    )]
    #[case::cordoned_by_hand(
        node("w1", "True", true, "uncordon-rendered-worker-1"),
        Outcome::Fail,
        "w1 is unschedulable (cordoned by hand)",
        &[]
    )]
    #[case::drained_by_mco(
        node("w1", "True", true, "drain-rendered-worker-2"),
        Outcome::Fail,
        "cordoned by the machine-config daemon",
        &[]
    )]
    #[case::not_ready_and_cordoned(
        node("w1", "False", true, "drain-rendered-worker-2"),
        Outcome::Fail,
        "w1 is not Ready",
        &[]
    )]
    fn nodes(
        #[case] node: serde_json::Value,
        #[case] outcome: Outcome,
        #[case] says: &str,
        #[case] risks: &[&str],
    ) {
        let finding = fixture::evaluate(
            &NodesReady,
            &fixture::view(vec![fixture::cluster_version("4.15.3"), node]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        assert_eq!(finding.risks, risks, "{}", finding.message);
    }

    #[test]
    fn without_node_data_it_is_skipped() {
        let finding = fixture::evaluate(
            &NodesReady,
            &fixture::view(vec![fixture::cluster_version("4.15.3")]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, Outcome::Skipped);
    }
}
