//! NodesReady: every node is Ready and schedulable. A node cordoned by the
//! machine-config daemon (mid-update) is told apart from one cordoned by
//! hand: before a patch update, a Ready node its pool's rollout cordoned
//! warns, as MachineConfigPoolsHealthy warns of the pool; one cordoned by
//! hand blocks.
//! Nodes that are not Ready carry the alert OpenShift raises for them,
//! `KubeNodeNotReady`; a cordoned node has no OpenShift name, so a finding
//! with one is accepted by the check's name alone.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::model::text::since;
use crate::view::kinds;
use crate::view::openshift::condition;

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
        if let Err(skip) = require(ctx.view, &[kinds::NODE]) {
            return skip;
        }
        let nodes = &ctx.view.nodes;
        let mut problems = Vec::new();
        // Nodes the update in progress drained, when the target stays within
        // its minor: its doing, not a reason to stay on it.
        let mut by_update = Vec::new();
        // Ready nodes the machine-config daemon cordoned for their pool's
        // rollout, before a patch update: to settle, as the pool warns.
        let mut rolling = Vec::new();
        let settles = ctx.rollout_settles();
        let mut cordoned = false;
        // Each node's state, by name, for an accept to record.
        let mut subjects = Vec::new();
        for node in nodes {
            let problems = if ctx.retarget_within_minor && node.drained_by_mco() {
                &mut by_update
            } else {
                &mut problems
            };
            if !node.ready() {
                subjects.push(format!("{} NotReady", node.name()));
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
                subjects.push(format!("{} unschedulable", node.name()));
                let by = if node.drained_by_mco() {
                    "cordoned by the machine-config daemon for an update"
                } else {
                    "cordoned by hand"
                };
                let cordon = format!("{} is unschedulable ({by})", node.name());
                if settles && node.drained_by_mco() && node.ready() {
                    rolling.push(cordon);
                } else {
                    problems.push(cordon);
                    cordoned = true;
                }
            }
        }
        if nodes.is_empty() {
            Finding::error("no Nodes in the cluster data")
        } else if problems.is_empty() && by_update.is_empty() && rolling.is_empty() {
            Finding::pass(format!(
                "all {} nodes are Ready and schedulable",
                nodes.len()
            ))
        } else if problems.is_empty() && rolling.is_empty() {
            Finding::warn(format!(
                "{}, drained by the update in progress, which a retarget within its minor continues",
                list(&by_update, 5)
            ))
            .with_url(URL)
        } else if problems.is_empty() {
            Finding::warn(format!(
                "{}, by its pool's rollout: let it settle before the update starts (a node cordoned by hand blocks)",
                list(&rolling, 5)
            ))
            .with_items(&rolling, 5)
            .with_url(URL)
        } else {
            problems.extend(by_update);
            problems.extend(rolling);
            Finding::fail(list(&problems, 5))
                .with_items(&problems, 5)
                .with_subjects(subjects)
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

    /// What an accept records (trust, third pass, L3): each node's state by
    /// name, without the time the message gives, so a second run finds
    /// the same subjects and a second node a new one.
    #[test]
    fn its_subjects_name_each_node_and_state_and_not_how_long() {
        let judge = |nodes: Vec<serde_json::Value>| {
            let mut objects = vec![fixture::cluster_version("4.15.3")];
            objects.extend(nodes);
            fixture::evaluate(&NodesReady, &fixture::view(objects), "4.15.4")
        };
        let one = judge(vec![node("w1", "False", false, "")]);
        assert_eq!(&*one.subjects, ["w1 NotReady"]);
        let two = judge(vec![
            node("w1", "False", false, ""),
            node("w3", "True", true, "uncordon-rendered-worker-1"),
        ]);
        assert_eq!(&*two.subjects, ["w1 NotReady", "w3 unschedulable"]);
    }

    #[test]
    fn nodes_the_update_drained_warn_for_a_retarget_within_its_minor_only() {
        let drained = node("w1", "True", true, "drain-rendered-worker-2");
        let by_hand = node("w2", "True", true, "uncordon-rendered-worker-1");
        let during = |to: &str, nodes: Vec<serde_json::Value>| {
            let mut objects = vec![fixture::updating("4.15.3", "4.15.8")];
            objects.extend(nodes);
            fixture::evaluate(&NodesReady, &fixture::view(objects), to)
        };
        let retarget = during("4.15.9", vec![drained.clone()]);
        assert_eq!(
            (retarget.outcome, retarget.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            retarget.message
        );
        assert_eq!(
            retarget.message,
            "w1 is unschedulable (cordoned by the machine-config daemon for an update), drained by the update in progress, which a retarget within its minor continues"
        );
        // A node cordoned by hand still blocks; so does any across minors.
        let mixed = during("4.15.9", vec![drained.clone(), by_hand]);
        assert_eq!((mixed.outcome, mixed.severity), (Outcome::Fail, None));
        assert!(
            mixed
                .message
                .contains("w2 is unschedulable (cordoned by hand)")
        );
        let minor = during("4.16.1", vec![drained]);
        assert_eq!((minor.outcome, minor.severity), (Outcome::Fail, None));
    }

    /// Verdicts, third pass: after a MachineConfig change a pool rolls and
    /// the daemon cordons its nodes one by one. Before a patch update that
    /// warns here as MachineConfigPoolsHealthy warns of the pool; it used
    /// to block, and could be accepted only by the check's name, which
    /// would also have hidden a node cordoned by hand. Across minors, a
    /// node cordoned by hand, or one not Ready still block.
    #[test]
    fn a_node_its_pools_rollout_cordoned_warns_before_a_patch_update_as_the_pool_does() {
        let drained = || node("w1", "True", true, "drain-rendered-worker-2");
        let judge = |to: &str, nodes: Vec<serde_json::Value>| {
            let mut objects = vec![fixture::cluster_version("4.15.3")];
            objects.extend(nodes);
            fixture::evaluate(&NodesReady, &fixture::view(objects), to)
        };
        let patch = judge("4.15.4", vec![drained()]);
        assert_eq!(
            (patch.outcome, patch.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            patch.message
        );
        assert_eq!(
            patch.message,
            "w1 is unschedulable (cordoned by the machine-config daemon for an update), by its pool's rollout: let it settle before the update starts (a node cordoned by hand blocks)"
        );
        let by_hand = judge(
            "4.15.4",
            vec![
                drained(),
                node("w2", "True", true, "uncordon-rendered-worker-1"),
            ],
        );
        assert_eq!((by_hand.outcome, by_hand.severity), (Outcome::Fail, None));
        assert!(
            by_hand
                .message
                .contains("w2 is unschedulable (cordoned by hand)")
        );
        let not_ready = judge(
            "4.15.4",
            vec![node("w1", "False", true, "drain-rendered-worker-2")],
        );
        assert_eq!(
            (not_ready.outcome, not_ready.severity),
            (Outcome::Fail, None)
        );
        let minor = judge("4.16.1", vec![drained()]);
        assert_eq!((minor.outcome, minor.severity), (Outcome::Fail, None));
    }

    #[test]
    fn without_node_data_it_warns_that_it_could_not_look() {
        let finding = fixture::evaluate(
            &NodesReady,
            &fixture::view(vec![fixture::cluster_version("4.15.3")]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, Outcome::Fail);
        assert_eq!(finding.severity, Some(Severity::Warning));
        assert_eq!(
            finding.message,
            "no Node objects in the cluster data: this check could not look"
        );
    }

    #[test]
    fn a_hosted_cluster_judges_its_workers_and_wants_no_control_plane_node() {
        let view = fixture::view(vec![
            fixture::hosted_infrastructure(),
            fixture::hosted_worker("w-0", "workers"),
            fixture::hosted_worker("w-1", "workers"),
        ]);
        let finding = fixture::evaluate(&NodesReady, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        let down = fixture::view(vec![
            fixture::hosted_infrastructure(),
            node("w-0", "False", false, ""),
        ]);
        let finding = fixture::evaluate(&NodesReady, &down, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
    }
}
