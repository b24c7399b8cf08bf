//! DrainsComplete: every batch of the update plan (`crate::plan`) can
//! drain. A batch whose drain a PodDisruptionBudget can never let through
//! (it needs every one of its pods healthy, or its pods' replacements have
//! no room on the pool's other nodes) blocks, naming the PDB and the node;
//! one that must wait for a PDB's unhealthy pods to recover warns; rounds
//! of replacements becoming healthy are routine, counted in the plan's
//! duration, and pass saying so.
//! PodDisruptionBudgetsAllowDrain looks at one PDB's allowed disruptions
//! now; this check follows the plan's batches, where several of a PDB's
//! pods may drain at once.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::view::kinds;

pub struct DrainsComplete;

const URL: &str = "https://docs.openshift.com/container-platform/latest/nodes/pods/nodes-pods-configuring.html#nodes-pods-pod-disruption-about_nodes-pods-configuring";

impl Check for DrainsComplete {
    fn name(&self) -> &'static str {
        "DrainsComplete"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(
            ctx.view,
            &[kinds::NODE, kinds::POD, kinds::POD_DISRUPTION_BUDGET],
        ) {
            return skip;
        }
        let plan = crate::plan::plan_to(ctx.view, ctx.target, ctx.kind, ctx.now);
        let batches: usize = plan
            .pools
            .iter()
            .filter(|p| p.updates)
            .map(|p| p.batches.len())
            .sum();
        if !plan.blockers.is_empty() {
            let count = plan.blockers.len();
            Finding::fail(format!(
                "{count} batch{} of the update plan can never drain: {}",
                if count == 1 { "" } else { "es" },
                list(&plan.blockers, 3)
            ))
            .with_items(&plan.blockers, 5)
            .with_url(URL)
        } else if plan
            .pools
            .iter()
            .flat_map(|p| &p.batches)
            .flat_map(|b| &b.holds)
            .any(|h| h.outcome == crate::plan::Outcome::Waits && h.wait_seconds.is_none())
        {
            // A wait for unhealthy pods to recover: how long, the plan
            // cannot know.
            Finding::warn(format!(
                "every batch drains, some after a wait: {}",
                list(&plan.waits, 3)
            ))
            .with_items(&plan.waits, 5)
        } else if !plan.waits.is_empty() {
            // Rounds of replacements becoming healthy: routine, and in the
            // plan's figures.
            Finding::pass(format!(
                "every one of the plan's {batches} batches drains; {} {} for replacements to become healthy, counted in the plan's duration: {}",
                plan.waits.len(),
                if plan.waits.len() == 1 {
                    "waits"
                } else {
                    "wait"
                },
                list(&plan.waits, 3)
            ))
        } else {
            Finding::pass(format!(
                "every one of the plan's {batches} batches drains without waiting for a PodDisruptionBudget"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn node(name: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
               "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn pdb(current: i64, desired: i64) -> Value {
        json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
               "spec": {"selector": {"matchLabels": {"app": "db"}}},
               "status": {"expectedPods": 2, "currentHealthy": current, "desiredHealthy": desired}})
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "shop", "labels": {"app": "db"},
                "ownerReferences": [{"kind": "ReplicaSet", "controller": true}]},
               "spec": {"nodeName": node}})
    }

    fn pool(max_unavailable: u32) -> Value {
        json!({"kind": "MachineConfigPool", "metadata": {"name": "worker"},
               "spec": {"maxUnavailable": max_unavailable,
                        "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}})
    }

    /// A paused master pool holds the update ("the machine-config
    /// operator waits for the master pool"), which is no drain's wait.
    #[test]
    fn a_paused_pool_is_no_drain_wait() {
        let master = json!({"kind": "MachineConfigPool", "metadata": {"name": "master"},
            "spec": {"paused": true,
                     "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/master": ""}}}});
        let mut m = node("m");
        m["metadata"]["labels"] = json!({"node-role.kubernetes.io/master": ""});
        let view = fixture::view(vec![
            pool(1),
            master,
            m,
            node("a"),
            node("b"),
            node("c"),
            pdb(2, 1),
            pod("db-0", "a"),
            pod("db-1", "b"),
        ]);
        let finding = fixture::evaluate(&DrainsComplete, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
    }

    #[rstest]
    #[case::drains(
        pool(1),
        pdb(2, 1),
        Outcome::Pass,
        None,
        "every one of the plan's 3 batches drains"
    )]
    #[case::never(
        pool(1),
        pdb(2, 2),
        Outcome::Fail,
        None,
        "2 batches of the update plan can never drain: worker batch 1 (a) cannot drain: PDB shop/db needs all 2"
    )]
    // Both pods drain at once and the PDB allows one: a round of
    // replacements, counted in the plan, routine.
    #[case::a_counted_wait_when_both_drain_at_once(
        pool(2),
        pdb(2, 1),
        Outcome::Pass,
        None,
        "1 waits for replacements to become healthy, counted in the plan's duration: worker batch 1 (a, b) waits about 2m for PDB shop/db"
    )]
    // One of its two pods unhealthy: a wait the plan cannot count.
    #[case::a_wait_for_unhealthy_pods(
        pool(2),
        pdb(1, 1),
        Outcome::Fail,
        Some(Severity::Warning),
        "every batch drains, some after a wait"
    )]
    fn drains(
        #[case] pool: Value,
        #[case] pdb: Value,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let view = fixture::view(vec![
            pool,
            node("a"),
            node("b"),
            node("c"),
            pdb,
            pod("db-0", "a"),
            pod("db-1", "b"),
        ]);
        let finding = fixture::evaluate(&DrainsComplete, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn a_hosted_cluster_plans_drains_by_nodepool() {
        let worker = |name: &str| fixture::hosted_worker(name, "workers");
        let view = fixture::view(vec![
            fixture::hosted_infrastructure(),
            worker("w0"),
            worker("w1"),
            pod("db-0", "w0"),
            pod("db-1", "w1"),
            pdb(2, 1),
        ]);
        let finding = fixture::evaluate(&DrainsComplete, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(finding.message.contains("2 batches"), "{}", finding.message);
    }
}
