//! PodDisruptionBudgetsAllowDrain: no PodDisruptionBudget at zero allowed
//! disruptions protects pods on a node the update will drain. Such a PDB
//! stalls the machine-config daemon's drain, and with it the update. The
//! finding carries the alerts OpenShift raises for such a PDB:
//! `PodDisruptionBudgetAtLimit` (as many healthy pods as it needs), which
//! `oc adm upgrade recommend` names, and `PodDisruptionBudgetLimit` (fewer).
//!
//! The gate's own budget is never a reason (`ClusterView::budgets`), and
//! an unready pod that the eviction API lets go past a spent budget
//! (`unhealthyPodEvictionPolicy: AlwaysAllow`, or the default while the
//! budget has the healthy pods it needs) holds no drain.
//!
//! Terminating pods (`deletionTimestamp`) are left out: a drain does not
//! wait for them. A PDB at zero while some of its pods terminate is a
//! rollout under way (the API server counts a terminating pod unhealthy,
//! so the budget is spent until the replacement is Ready): it warns to
//! check again after the rollout, rather than blocks.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{Check, Context, qualified, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;
use crate::view::k8s::Pod;
use crate::view::kinds;

pub struct PodDisruptionBudgetsAllowDrain;

const URL: &str = "https://docs.openshift.com/container-platform/latest/nodes/pods/nodes-pods-configuring.html#nodes-pods-pod-disruption-about_nodes-pods-configuring";

impl Check for PodDisruptionBudgetsAllowDrain {
    fn name(&self) -> &'static str {
        "PodDisruptionBudgetsAllowDrain"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &[kinds::POD_DISRUPTION_BUDGET]) {
            return skip;
        }
        let view = ctx.view;
        let stuck: Vec<_> = view
            .budgets()
            .filter(|p| p.status.disruptions_allowed <= 0 && p.spec.selector.is_some())
            .collect();
        let have_pods = view.has(&kinds::POD) && view.has(&kinds::NODE);
        let namespaces: HashSet<&str> = stuck
            .iter()
            .filter_map(|p| p.metadata.namespace.as_deref())
            .collect();
        let mut pods_by_namespace: HashMap<&str, Vec<&Pod>> = HashMap::new();
        if have_pods {
            for pod in &view.pods {
                if namespaces.contains(pod.namespace.as_str()) {
                    pods_by_namespace
                        .entry(&pod.namespace)
                        .or_default()
                        .push(pod);
                }
            }
        }
        let draining: HashSet<&str> = view
            .nodes
            .iter()
            .filter(|n| view.drains(n))
            .map(|n| n.name())
            .collect();
        let mut blocking = Vec::new();
        let mut rolling = Vec::new();
        let mut alerts = Vec::new();
        // Each blocking budget, by name, for an accept to record.
        let mut subjects = Vec::new();
        // The alert OpenShift raises for a PDB at zero allowed disruptions.
        let alert = |pdb: &crate::view::k8s::PodDisruptionBudget| {
            if pdb.status.current_healthy < pdb.status.desired_healthy {
                "PodDisruptionBudgetLimit"
            } else {
                "PodDisruptionBudgetAtLimit"
            }
        };
        for pdb in stuck {
            let name = qualified(
                pdb.metadata.namespace.as_deref().unwrap_or(""),
                &pdb.metadata.name,
            );
            let Some(selector) = &pdb.spec.selector else {
                continue;
            };
            if !have_pods {
                if pdb.status.expected_pods > 0 {
                    alerts.push(alert(pdb));
                    subjects.push(name.clone());
                    blocking.push(format!(
                        "{name} allows no disruption of its {} pods",
                        pdb.status.expected_pods
                    ));
                }
                continue;
            }
            let ns = pdb.metadata.namespace.as_deref().unwrap_or("");
            let (leaving, staying): (Vec<&Pod>, Vec<&Pod>) = pods_by_namespace
                .get(ns)
                .into_iter()
                .flatten()
                .filter(|pod| selector.matches(&pod.labels))
                .filter(|pod| !(pod.unready && pdb.evicts_unready()))
                .partition(|pod| pod.terminating);
            let nodes: BTreeSet<&str> = staying
                .iter()
                .filter(|pod| draining.contains(pod.node_name.as_str()))
                .map(|pod| pod.node_name.as_str())
                .collect();
            if !leaving.is_empty() && !nodes.is_empty() {
                rolling.push(format!(
                    "{name} allows no disruption while {} of its pods terminate{}",
                    leaving.len(),
                    if leaving.len() == 1 { "s" } else { "" }
                ));
            } else if !nodes.is_empty() {
                alerts.push(alert(pdb));
                subjects.push(name.clone());
                let nodes: Vec<String> = nodes.into_iter().map(str::to_owned).collect();
                blocking.push(format!(
                    "{name} allows no disruption and protects pods on {}",
                    list(&nodes, 3)
                ));
            }
        }
        if blocking.is_empty() && !rolling.is_empty() {
            Finding::warn(format!(
                "a rollout is under way: {}; check again after the rollout",
                list(&rolling, 5)
            ))
            .with_items(&rolling, 5)
        } else if blocking.is_empty() {
            Finding::pass(format!(
                "no PodDisruptionBudget blocks a drain ({} checked)",
                view.budgets().count()
            ))
        } else {
            let count = blocking.len();
            Finding::fail(format!(
                "{count} PodDisruptionBudget{} would block node drains: {}",
                if count == 1 { "" } else { "s" },
                list(&blocking, 5)
            ))
            .with_items(&blocking, 5)
            .with_subjects(subjects)
            .with_url(URL)
            .with_risks(alerts)
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

    fn pdb(allowed: i64, app: &str) -> Value {
        json!({"kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "shop"},
               "spec": {"selector": {"matchLabels": {"app": app}}},
               "status": {"disruptionsAllowed": allowed, "expectedPods": 2}})
    }

    fn pod(node: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": "db-0", "namespace": "shop", "labels": {"app": "db"}},
               "spec": {"nodeName": node}})
    }

    fn node(name: &str, role: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {format!("node-role.kubernetes.io/{role}"): ""}}})
    }

    fn pool(name: &str, paused: bool) -> Value {
        json!({"kind": "MachineConfigPool", "metadata": {"name": name},
               "spec": {"paused": paused, "nodeSelector": {"matchLabels": {format!("node-role.kubernetes.io/{name}"): ""}}}})
    }

    #[rstest]
    #[case::allows_disruption(vec![pdb(1, "db"), pod("w1")], Outcome::Pass, "no PodDisruptionBudget blocks")]
    #[case::at_zero(vec![pdb(0, "db"), pod("w1")], Outcome::Fail, "shop/db allows no disruption and protects pods on w1")]
    #[case::selects_nothing_here(vec![pdb(0, "web"), pod("w1")], Outcome::Pass, "1 checked")]
    #[case::paused_pool_does_not_drain(vec![pdb(0, "db"), pod("i1")], Outcome::Pass, "no PodDisruptionBudget")]
    fn budgets(#[case] objects: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut all = vec![
            node("w1", "worker"),
            node("i1", "infra"),
            pool("worker", false),
            pool("infra", true),
        ];
        all.extend(objects);
        let finding = fixture::evaluate(
            &PodDisruptionBudgetsAllowDrain,
            &fixture::view(all),
            "4.15.4",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    fn pod_named(name: &str, node: &str, terminating: bool) -> Value {
        let mut p = pod(node);
        p["metadata"]["name"] = json!(name);
        if terminating {
            p["metadata"]["deletionTimestamp"] = json!("2026-11-30T11:58:00Z");
        }
        p
    }

    /// Terminating pods are on their way out: a PDB spent by them is a
    /// rollout under way, which warns; one pod held by it still blocks.
    #[rstest]
    #[case::mid_rollout(vec![pdb(0, "db"), pod_named("db-0", "w1", true), pod_named("db-1", "w1", false)],
        Outcome::Fail, Some(Severity::Warning), "a rollout is under way: shop/db allows no disruption while 1 of its pods terminates; check again after the rollout")]
    #[case::only_terminating_pods_on_drained_nodes(vec![pdb(0, "db"), pod_named("db-0", "w1", true), pod_named("db-1", "i1", false)],
        Outcome::Pass, Some(Severity::Warning), "no PodDisruptionBudget blocks")]
    #[case::at_rest(vec![pdb(0, "db"), pod_named("db-0", "w1", false)],
        Outcome::Fail, None, "shop/db allows no disruption and protects pods on w1")]
    fn terminating_pods(
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let mut all = vec![
            node("w1", "worker"),
            node("i1", "infra"),
            pool("worker", false),
            pool("infra", true),
        ];
        all.extend(objects);
        let finding = fixture::evaluate(
            &PodDisruptionBudgetsAllowDrain,
            &fixture::view(all),
            "4.15.4",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        if outcome == Outcome::Fail {
            assert_eq!(finding.severity, severity, "{}", finding.message);
        }
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::at_its_limit(2, 2, &["PodDisruptionBudgetAtLimit"])]
    #[case::below_its_limit(1, 2, &["PodDisruptionBudgetLimit"])]
    fn the_finding_carries_the_alert_openshift_raises(
        #[case] healthy: i64,
        #[case] desired: i64,
        #[case] risks: &[&str],
    ) {
        let mut budget = pdb(0, "db");
        budget["status"]["currentHealthy"] = json!(healthy);
        budget["status"]["desiredHealthy"] = json!(desired);
        let finding = fixture::evaluate(
            &PodDisruptionBudgetsAllowDrain,
            &fixture::view(vec![budget]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert_eq!(finding.risks, risks);
    }

    /// The gate's own budget, spent while one of its replicas is unready,
    /// is no reason: the gate is not needed once the update runs.
    #[test]
    fn the_gates_own_budget_is_never_a_reason() {
        let mut budget = pdb(0, "preflight-gate");
        budget["metadata"] = json!({"name": "preflight-gate", "namespace": "preflight-gate"});
        let mut own = pod("w1");
        own["metadata"] = json!({"name": "preflight-gate-0", "namespace": "preflight-gate",
                                 "labels": {"app": "preflight-gate"}});
        let mut view = fixture::view(vec![
            node("w1", "worker"),
            pool("worker", false),
            budget,
            own,
        ]);
        let unknown = fixture::evaluate(&PodDisruptionBudgetsAllowDrain, &view, "4.15.4");
        assert_eq!(unknown.outcome, Outcome::Fail, "{}", unknown.message);
        view.gate_namespace = Some("preflight-gate".into());
        let finding = fixture::evaluate(&PodDisruptionBudgetsAllowDrain, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(finding.message.contains("0 checked"), "{}", finding.message);
    }

    /// An unready pod is evicted past a spent budget as Kubernetes' eviction
    /// API lets it: always under AlwaysAllow, and under the default policy
    /// only while the budget has the healthy pods it needs.
    #[rstest]
    #[case::always_allow(Some("AlwaysAllow"), 1, 2, true, Outcome::Pass)]
    #[case::always_allow_ready_pod(Some("AlwaysAllow"), 1, 2, false, Outcome::Fail)]
    #[case::if_healthy_budget_disrupted(None, 1, 2, true, Outcome::Fail)]
    #[case::if_healthy_budget_at_limit(Some("IfHealthyBudget"), 2, 2, true, Outcome::Pass)]
    fn unready_pods_as_the_eviction_api_judges_them(
        #[case] eviction_policy: Option<&str>,
        #[case] healthy: i64,
        #[case] desired: i64,
        #[case] unready: bool,
        #[case] outcome: Outcome,
    ) {
        let mut budget = pdb(0, "db");
        budget["spec"]["unhealthyPodEvictionPolicy"] = json!(eviction_policy);
        budget["status"]["currentHealthy"] = json!(healthy);
        budget["status"]["desiredHealthy"] = json!(desired);
        let mut held = pod("w1");
        held["status"] = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": if unready { "False" } else { "True" }}]});
        let finding = fixture::evaluate(
            &PodDisruptionBudgetsAllowDrain,
            &fixture::view(vec![
                node("w1", "worker"),
                pool("worker", false),
                budget,
                held,
            ]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
    }

    #[test]
    fn without_pods_the_expected_count_decides() {
        let finding = fixture::evaluate(
            &PodDisruptionBudgetsAllowDrain,
            &fixture::view(vec![pdb(0, "db")]),
            "4.15.4",
        );
        assert_eq!(finding.outcome, Outcome::Fail);
        assert!(
            finding
                .message
                .contains("allows no disruption of its 2 pods"),
            "{}",
            finding.message
        );
    }
}
