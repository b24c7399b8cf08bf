//! ClusterOperatorsHealthy: every ClusterOperator is Available and not
//! Degraded. The message names each one, how long it has been down, and why.
//! The finding carries the alerts OpenShift raises for the same states:
//! `ClusterOperatorDown` (not Available) and `ClusterOperatorDegraded`.

use super::{Check, Context, require};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::model::text::since;

pub struct ClusterOperatorsHealthy;

const URL: &str = "https://docs.openshift.com/container-platform/latest/support/troubleshooting/troubleshooting-operator-issues.html";

impl Check for ClusterOperatorsHealthy {
    fn name(&self) -> &'static str {
        "ClusterOperatorsHealthy"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["ClusterOperator"]) {
            return skip;
        }
        let operators = &ctx.view.cluster_operators;
        if operators.is_empty() {
            return Finding::error("no ClusterOperators in the cluster data");
        }
        let mut problems = Vec::new();
        let mut alerts = Vec::new();
        for co in operators {
            let conditions = &co.status.conditions;
            let unavailable = condition(conditions, "Available").filter(|c| c.status != "True");
            let degraded = condition(conditions, "Degraded").filter(|c| c.status == "True");
            for (state, alert, c) in [
                ("not Available", "ClusterOperatorDown", unavailable),
                ("Degraded", "ClusterOperatorDegraded", degraded),
            ] {
                if let Some(c) = c {
                    alerts.push(alert);
                    problems.push(format!(
                        "{} is {state} for {}: {}",
                        co.metadata.name,
                        since(c.last_transition_time, ctx.now),
                        excerpt(c.message.as_deref(), EXCERPT)
                    ));
                }
            }
        }
        if problems.is_empty() {
            Finding::pass(format!(
                "all {} ClusterOperators are Available and not Degraded",
                operators.len()
            ))
        } else {
            Finding::fail(list(&problems, 5))
                .with_items(&problems, 5)
                .with_url(URL)
                .with_risks(alerts)
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

    fn operator(name: &str, available: &str, degraded: &str) -> serde_json::Value {
        json!({"kind": "ClusterOperator", "metadata": {"name": name},
               "status": {"conditions": [
                   condition("Available", available, "the operator says so"),
                   condition("Degraded", degraded, "the operator says so")]}})
    }

    #[rstest]
    #[case::healthy(&[("dns", "True", "False")], Outcome::Pass, &[])]
    #[case::down(&[("monitoring", "False", "False")], Outcome::Fail, &["ClusterOperatorDown"])]
    #[case::degraded(&[("dns", "True", "True")], Outcome::Fail, &["ClusterOperatorDegraded"])]
    #[case::both(&[("monitoring", "False", "True"), ("dns", "True", "True")], Outcome::Fail,
        &["ClusterOperatorDown", "ClusterOperatorDegraded"])]
    fn findings_carry_the_alerts_openshift_raises(
        #[case] operators: &[(&str, &str, &str)],
        #[case] outcome: Outcome,
        #[case] risks: &[&str],
    ) {
        let mut objects = vec![fixture::cluster_version("4.15.3")];
        objects.extend(operators.iter().map(|(n, a, d)| operator(n, a, d)));
        let finding =
            fixture::evaluate(&ClusterOperatorsHealthy, &fixture::view(objects), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert_eq!(finding.risks, risks, "{}", finding.message);
    }
}
