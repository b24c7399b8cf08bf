//! ClusterOperatorsHealthy: every ClusterOperator is Available and not
//! Degraded. The message names each one, how long it has been down, and why.
//!
//! A cluster in motion passes through these states: an operator restarting
//! is not Available for seconds. A state younger than `oc adm upgrade
//! status`'s threshold ([`grace`]) only warns that it is settling; an
//! older one blocks. The finding carries the alert OpenShift raises for a
//! state (`ClusterOperatorDown`, `ClusterOperatorDegraded`) only once the
//! alert's `for` has passed. An operator that never reported `Available`
//! is not taken for an available one.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::grace;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::model::text::since;
use crate::view::kinds;
use crate::view::openshift::condition;

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
        if let Err(skip) = require(ctx.view, &[kinds::CLUSTER_OPERATOR]) {
            return skip;
        }
        let operators = &ctx.view.cluster_operators;
        if operators.is_empty() {
            return Finding::error("no ClusterOperators in the cluster data");
        }
        let mut problems = Vec::new();
        let mut settling = Vec::new();
        let mut alerts = Vec::new();
        // Each operator's state, by name, for an accept to record.
        let mut subjects = Vec::new();
        for co in operators {
            let name = &co.metadata.name;
            let conditions = &co.status.conditions;
            let Some(available) = condition(conditions, "Available") else {
                problems.push(format!("{name} has not reported Available"));
                subjects.push(format!("{name} not Available"));
                continue;
            };
            let unavailable = Some(available).filter(|c| c.status != "True");
            let degraded = condition(conditions, "Degraded").filter(|c| c.status == "True");
            for (state, c, threshold, alert, alert_for) in [
                (
                    "not Available",
                    unavailable,
                    grace::UNAVAILABLE,
                    "ClusterOperatorDown",
                    grace::CLUSTER_OPERATOR_DOWN_FOR,
                ),
                (
                    "Degraded",
                    degraded,
                    grace::DEGRADED,
                    "ClusterOperatorDegraded",
                    grace::CLUSTER_OPERATOR_DEGRADED_FOR,
                ),
            ] {
                let Some(c) = c else { continue };
                let began = c.last_transition_time;
                let said = format!(
                    "{name} is {state} for {}: {}",
                    since(began, ctx.now),
                    excerpt(c.message.as_deref(), EXCERPT)
                );
                if grace::settling(began, ctx.now, threshold) {
                    settling.push(said);
                    continue;
                }
                if grace::would_fire(began, ctx.now, alert_for) {
                    alerts.push(alert);
                }
                problems.push(said);
                subjects.push(format!("{name} {state}"));
            }
        }
        let settling_note = (!settling.is_empty()).then(|| {
            format!(
                "settling, younger than {} (oc adm upgrade status raises nothing sooner): {}",
                crate::model::text::short_duration(grace::UNAVAILABLE),
                list(&settling, 5)
            )
        });
        match (problems.is_empty(), settling_note) {
            (true, None) => Finding::pass(format!(
                "all {} ClusterOperators are Available and not Degraded",
                operators.len()
            )),
            (true, Some(note)) => Finding::warn(format!("{note}; check again in a few minutes"))
                .with_items(&settling, 5)
                .with_url(URL),
            (false, note) => {
                let mut message = list(&problems, 5);
                if let Some(note) = note {
                    message = format!("{message}; {note}");
                }
                problems.extend(settling);
                Finding::fail(message)
                    .with_items(&problems, 5)
                    .with_subjects(subjects)
                    .with_url(URL)
                    .with_risks(alerts)
            }
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

    /// An operator whose `type` condition turned `status` `ago` before the
    /// fixtures' time, the other one healthy.
    fn changed(name: &str, type_: &str, status: &str, ago: &str) -> serde_json::Value {
        let now: jiff::Timestamp = fixture::NOW.parse().unwrap();
        let since = now - ago.parse::<jiff::Span>().unwrap();
        let mut co = operator(name, "True", "False");
        let index = usize::from(type_ == "Degraded");
        co["status"]["conditions"][index]["status"] = json!(status);
        co["status"]["conditions"][index]["lastTransitionTime"] = json!(since.to_string());
        co
    }

    /// oc's thresholds and the alerts' `for`: seconds-old blips while pods
    /// roll warn and carry no alert name; older states block, named once
    /// the alert would fire.
    #[rstest]
    #[case::unavailable_for_a_second(changed("dns", "Available", "False", "1s"), Outcome::Fail, Some(Severity::Warning), &[])]
    #[case::degraded_for_no_time(changed("dns", "Degraded", "True", "0s"), Outcome::Fail, Some(Severity::Warning), &[])]
    #[case::unavailable_for_seven_minutes(changed("dns", "Available", "False", "7m"), Outcome::Fail, None, &[])]
    #[case::unavailable_past_the_alert_s_for(changed("dns", "Available", "False", "11m"), Outcome::Fail, None, &["ClusterOperatorDown"])]
    #[case::degraded_for_twenty_minutes(changed("dns", "Degraded", "True", "20m"), Outcome::Fail, None, &[])]
    #[case::degraded_past_the_alert_s_for(changed("dns", "Degraded", "True", "31m"), Outcome::Fail, None, &["ClusterOperatorDegraded"])]
    fn motion_settles_before_it_blocks(
        #[case] operator: serde_json::Value,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] risks: &[&str],
    ) {
        let view = fixture::view(vec![fixture::cluster_version("4.15.3"), operator]);
        let finding = fixture::evaluate(&ClusterOperatorsHealthy, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert_eq!(finding.risks, risks, "{}", finding.message);
        if severity.is_some() {
            assert!(
                finding.message.starts_with("settling, younger than 5m"),
                "{}",
                finding.message
            );
        }
    }

    #[test]
    fn an_operator_that_never_reported_is_not_taken_for_an_available_one() {
        let silent = json!({"kind": "ClusterOperator", "metadata": {"name": "insights"},
                            "status": {"conditions": []}});
        let view = fixture::view(vec![fixture::cluster_version("4.15.3"), silent]);
        let finding = fixture::evaluate(&ClusterOperatorsHealthy, &view, "4.15.4");
        assert_eq!((finding.outcome, finding.severity), (Outcome::Fail, None));
        assert_eq!(finding.message, "insights has not reported Available");
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
