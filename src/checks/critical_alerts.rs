//! CriticalAlertsFiring: no alert of severity `critical` is firing. Pending
//! alerts are ignored. No alert data at all is a warning, not a pass.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::list;

pub struct CriticalAlertsFiring;

const URL: &str = "https://docs.openshift.com/container-platform/latest/observability/monitoring/managing-alerts.html";

/// The finding when no alert data was loaded.
pub(crate) fn no_alert_data() -> Finding {
    Finding::warn(
        "no alert data: give --prometheus-url, or an alerts.json in the snapshot, to check firing alerts",
    )
    .with_url(URL)
}

impl Check for CriticalAlertsFiring {
    fn name(&self) -> &'static str {
        "CriticalAlertsFiring"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(alerts) = &ctx.view.alerts else {
            return no_alert_data();
        };
        let firing: Vec<String> = alerts
            .iter()
            .filter(|a| a.firing() && a.severity() == "critical")
            .map(|a| a.describe())
            .collect();
        if firing.is_empty() {
            Finding::pass(format!(
                "no critical alert is firing ({} alerts read)",
                alerts.len()
            ))
        } else {
            Finding::fail(format!("critical alerts firing: {}", list(&firing, 5))).with_url(URL)
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

    pub fn alert(name: &str, severity: &str, state: &str) -> Alert {
        serde_json::from_value(serde_json::json!({
            "labels": {"alertname": name, "severity": severity, "namespace": "openshift-etcd"},
            "annotations": {"summary": "something is wrong"},
            "state": state}))
        .unwrap()
    }

    #[rstest]
    #[case::none(vec![], Outcome::Pass, None, "no critical alert is firing (0 alerts read)")]
    #[case::critical_firing(vec![alert("etcdNoLeader", "critical", "firing")], Outcome::Fail, None,
        "etcdNoLeader (namespace=openshift-etcd): something is wrong")]
    #[case::critical_pending(vec![alert("etcdNoLeader", "critical", "pending")], Outcome::Pass, None, "no critical")]
    #[case::warning_firing(vec![alert("KubePodNotReady", "warning", "firing")], Outcome::Pass, None, "1 alerts read")]
    fn critical(
        #[case] alerts: Vec<Alert>,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(alerts);
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn no_data_is_a_warning() {
        let view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, Some(Severity::Warning))
        );
    }
}
