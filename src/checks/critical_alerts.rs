//! CriticalAlertsFiring: no alert of severity `critical` is firing, as
//! `oc adm upgrade recommend` blocks on every one until it is accepted by
//! its name. Pending alerts are ignored. No alert data at all is a warning,
//! not a pass. Each alert is quoted in its own words (summary, description)
//! with its runbook, and its name is carried as the finding's OpenShift name.
//! The gate's own alerts (its PrometheusRule's, labelled
//! `preflight_gate_rule`) are left out and counted, so that the gate never
//! blocks on its own noise.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::view::alerts::Alert;

pub struct CriticalAlertsFiring;

const URL: &str = "https://docs.openshift.com/container-platform/latest/observability/monitoring/managing-alerts.html";

/// How many alerts a finding quotes before "and N more".
const QUOTED: usize = 5;

/// The finding when no alert data was loaded: an Error when the configured
/// source could not be read (blocking, unless the check fails open), else a
/// warning that there is none. (`oc adm upgrade recommend` names a run of
/// its own without alert data `AlertNoTestData` and blocks on it; the gate
/// warns, and takes the name as known.)
pub(crate) fn no_alert_data(view: &crate::view::ClusterView) -> Finding {
    if let Some(why) = view.unreadable.get(crate::view::alerts::KIND) {
        return Finding::error(format!("cannot read the cluster's alerts: {why}")).with_url(URL);
    }
    Finding::warn(
        "no alert data: give --prometheus-url, or an alerts.json in the snapshot, to check firing alerts",
    )
    .with_url(URL)
}

/// The firing alerts that `counts`, with a name, leaving out the gate's own
/// ([`Alert::is_the_gates_own`]); and how many of its own were left out.
pub(crate) fn firing_of(alerts: &[Alert], counts: impl Fn(&Alert) -> bool) -> (Vec<&Alert>, usize) {
    let (own, others): (Vec<&Alert>, Vec<&Alert>) = alerts
        .iter()
        .filter(|a| a.firing() && !a.name().is_empty() && counts(a))
        .partition(|a| a.is_the_gates_own());
    (others, own.len())
}

/// What a pass says of the gate's own alerts it left out, if any.
pub(crate) fn own_left_out(own: usize) -> String {
    match own {
        0 => String::new(),
        n => format!(
            "; {n} of the gate's own alerts left out: they report its findings, which the gate reads itself"
        ),
    }
}

/// The failure for `firing` alerts: each quoted with its runbook, the
/// first runbook as the link, every alert's name carried.
pub(crate) fn firing_alerts(what: &str, firing: &[&Alert]) -> Finding {
    let mut quotes: Vec<String> = firing.iter().take(QUOTED).map(|a| a.quote()).collect();
    if firing.len() > QUOTED {
        quotes.push(format!("and {} more", firing.len() - QUOTED));
    }
    let url = firing.iter().find_map(|a| a.runbook()).unwrap_or(URL);
    let all: Vec<String> = firing.iter().map(|a| a.quote()).collect();
    Finding::fail(format!("{what}: {}", quotes.join("; ")))
        .with_items(&all, QUOTED)
        .with_url(url)
        .with_risks(firing.iter().map(|a| a.name()))
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
            return no_alert_data(ctx.view);
        };
        let (firing, own) = firing_of(alerts, |a| a.severity() == "critical");
        if firing.is_empty() {
            Finding::pass(format!(
                "no critical alert is firing ({} alerts read{})",
                alerts.len(),
                own_left_out(own)
            ))
        } else {
            firing_alerts("critical alerts firing", &firing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use crate::view::alerts::Alert;
    use rstest::rstest;

    pub fn alert(name: &str, severity: &str, state: &str) -> Alert {
        serde_json::from_value(serde_json::json!({
            "labels": {"alertname": name, "severity": severity, "namespace": "openshift-etcd"},
            "annotations": {"summary": "something is wrong",
                            "description": format!("{name} says more"),
                            "runbook_url": format!("https://runbooks.example/{name}.md")},
            "state": state}))
        .unwrap()
    }

    #[rstest]
    #[case::none(vec![], Outcome::Pass, None, "no critical alert is firing (0 alerts read)", &[])]
    #[case::critical_firing(vec![alert("etcdNoLeader", "critical", "firing")], Outcome::Fail, None,
        "critical alerts firing: etcdNoLeader (namespace=openshift-etcd): something is wrong. etcdNoLeader says more. Runbook: https://runbooks.example/etcdNoLeader.md",
        &["etcdNoLeader"])]
    #[case::two_critical(vec![alert("etcdNoLeader", "critical", "firing"), alert("ClusterOperatorDown", "critical", "firing")],
        Outcome::Fail, None, "; ClusterOperatorDown (namespace=openshift-etcd)", &["etcdNoLeader", "ClusterOperatorDown"])]
    #[case::critical_pending(vec![alert("etcdNoLeader", "critical", "pending")], Outcome::Pass, None, "no critical", &[])]
    #[case::warning_firing(vec![alert("KubePodNotReady", "warning", "firing")], Outcome::Pass, None, "1 alerts read", &[])]
    #[case::a_critical_precheck_class(vec![alert("PodDisruptionBudgetLimit", "critical", "firing")], Outcome::Fail, None,
        "PodDisruptionBudgetLimit", &["PodDisruptionBudgetLimit"])]
    fn critical(
        #[case] alerts: Vec<Alert>,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
        #[case] risks: &[&str],
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
        assert_eq!(finding.risks, risks);
    }

    #[test]
    fn the_link_is_the_first_alerts_runbook() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![alert("etcdNoLeader", "critical", "firing")]);
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert_eq!(
            finding.url.as_deref(),
            Some("https://runbooks.example/etcdNoLeader.md")
        );
    }

    #[test]
    fn more_than_five_alerts_are_counted() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(
            (0..7)
                .map(|i| alert(&format!("Alert{i}"), "critical", "firing"))
                .collect(),
        );
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert!(
            finding.message.ends_with("; and 2 more"),
            "{}",
            finding.message
        );
        assert_eq!(finding.risks.len(), 7);
        // The whole list, for programs: every alert quoted.
        assert_eq!(finding.items.len(), 7);
        assert!(
            finding.items[6].starts_with("Alert6"),
            "{:?}",
            finding.items
        );
    }

    #[test]
    fn no_data_is_a_warning() {
        let view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, Some(Severity::Warning))
        );
        assert!(finding.risks.is_empty());
    }
}
