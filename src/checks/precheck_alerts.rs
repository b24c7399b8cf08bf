//! PrecheckAlertsFiring: the alerts `oc adm upgrade recommend` warns
//! about: PodDisruptionBudgetAtLimit and PodDisruptionBudgetLimit,
//! KubeNodeNotReady, KubeNodeUnreachable, KubeNodeReadinessFlapping,
//! KubeletHealthState, KubeContainerWaiting, and any alert labelled
//! `openShiftUpdatePrecheck="true"`. Firing ones warn; pending ones are
//! ignored; no alert data at all is a warning too.

use super::critical_alerts::no_alert_data;
use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;

pub struct PrecheckAlertsFiring;

const URL: &str = "https://docs.openshift.com/container-platform/latest/observability/monitoring/managing-alerts.html";

/// The alert names `oc adm upgrade recommend` looks for.
pub(crate) const CLASSES: &[&str] = &[
    "PodDisruptionBudgetAtLimit",
    "PodDisruptionBudgetLimit",
    "KubeNodeNotReady",
    "KubeNodeUnreachable",
    "KubeNodeReadinessFlapping",
    "KubeletHealthState",
    "KubeContainerWaiting",
];

impl Check for PrecheckAlertsFiring {
    fn name(&self) -> &'static str {
        "PrecheckAlertsFiring"
    }

    fn severity(&self) -> Severity {
        Severity::Warning
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(alerts) = &ctx.view.alerts else {
            return no_alert_data();
        };
        let firing: Vec<String> = alerts
            .iter()
            .filter(|a| a.firing())
            .filter(|a| CLASSES.contains(&a.name()) || a.label("openShiftUpdatePrecheck") == "true")
            .map(|a| a.describe())
            .collect();
        if firing.is_empty() {
            Finding::pass("no update precheck alert is firing")
        } else {
            Finding::fail(format!(
                "update precheck alerts firing: {}",
                list(&firing, 5)
            ))
            .with_url(URL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::cluster::alerts::Alert;
    use crate::model::Outcome;
    use rstest::rstest;

    fn alert(name: &str, precheck: bool, state: &str) -> Alert {
        let mut labels =
            serde_json::json!({"alertname": name, "severity": "warning", "node": "w1"});
        if precheck {
            labels["openShiftUpdatePrecheck"] = "true".into();
        }
        serde_json::from_value(serde_json::json!({"labels": labels, "state": state})).unwrap()
    }

    #[rstest]
    #[case::class_firing(
        alert("KubeNodeNotReady", false, "firing"),
        Outcome::Fail,
        "KubeNodeNotReady (node=w1)"
    )]
    #[case::class_pending(
        alert("KubeNodeNotReady", false, "pending"),
        Outcome::Pass,
        "no update precheck"
    )]
    #[case::labelled(alert("MyStorageBusy", true, "firing"), Outcome::Fail, "MyStorageBusy")]
    #[case::similar_name(
        alert("PodDisruptionBudgetAtLimitWithMessage", false, "firing"),
        Outcome::Pass,
        "no update"
    )]
    fn classes(#[case] alert: Alert, #[case] outcome: Outcome, #[case] says: &str) {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![alert]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
