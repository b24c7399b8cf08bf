//! CriticalAlertsFiring: no alert of severity `critical` is firing, as
//! `oc adm upgrade recommend` blocks on every one until it is accepted by
//! its name. Pending alerts are ignored. No alert data at all is a warning,
//! not a pass. Each alert is quoted in its own words (summary, description)
//! with its runbook, and its name is carried as the finding's OpenShift name.
//! The gate's own alerts (its PrometheusRule's, labelled
//! `preflight_gate_rule`) are left out and counted, so that the gate never
//! blocks on its own noise; so are alerts of namespaces other than the
//! platform's and those `--alert-namespaces` adds
//! ([`crate::view::alerts::AlertNamespaces`]), so that a tenant's rule
//! cannot block the cluster's update.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::view::alerts::{Alert, AlertNamespaces};

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

/// The firing alerts of a kind, and those of the kind left out.
pub(crate) struct Firing<'a> {
    /// The ones that count.
    pub alerts: Vec<&'a Alert>,
    /// The gate's own ([`Alert::is_the_gates_own`]), and those about the
    /// gate's namespace (its own PodDisruptionBudget at its limit, say).
    pub own: usize,
    /// Those of namespaces that do not count ([`AlertNamespaces`]).
    pub elsewhere: usize,
}

/// The firing alerts that `counts`, with a name, leaving out the gate's own
/// and those of namespaces that do not count, and counting both.
pub(crate) fn firing_of<'a>(
    alerts: &'a [Alert],
    view: &crate::view::ClusterView,
    counts: impl Fn(&Alert) -> bool,
) -> Firing<'a> {
    let namespaces = &view.alert_namespaces;
    let about_the_gate = |alert: &Alert| {
        view.gate_namespace
            .as_deref()
            .is_some_and(|ns| alert.label("namespace") == ns)
    };
    let mut firing = Firing {
        alerts: Vec::new(),
        own: 0,
        elsewhere: 0,
    };
    for alert in alerts
        .iter()
        .filter(|a| a.firing() && !a.name().is_empty() && counts(a))
    {
        if alert.is_the_gates_own() || about_the_gate(alert) {
            firing.own += 1;
        } else if !namespaces.counts(alert) {
            firing.elsewhere += 1;
        } else {
            firing.alerts.push(alert);
        }
    }
    firing
}

/// What a pass says of the alerts it left out, if any: the gate's own, and
/// those of other namespaces.
pub(crate) fn left_out(firing: &Firing, namespaces: &AlertNamespaces) -> String {
    let mut said = String::new();
    if firing.own > 0 {
        said.push_str(&format!(
            "; {} of the gate's own alerts left out: they report its findings, which the gate reads itself, or are about the gate, which an update does not need",
            firing.own
        ));
    }
    if firing.elsewhere > 0 {
        said.push_str(&format!(
            "; {} alerts of other namespaces left out: only alerts of {} (--alert-namespaces adds more) or of no namespace count",
            firing.elsewhere,
            namespaces.describe()
        ));
    }
    said
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
        let namespaces = &ctx.view.alert_namespaces;
        let firing = firing_of(alerts, ctx.view, |a| a.severity() == "critical");
        if firing.alerts.is_empty() {
            Finding::pass(format!(
                "no critical alert is firing ({} alerts read{})",
                alerts.len(),
                left_out(&firing, namespaces)
            ))
        } else {
            firing_alerts("critical alerts firing", &firing.alerts)
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

    fn in_namespace(name: &str, namespace: &str) -> Alert {
        let mut alert = alert(name, "critical", "firing");
        alert
            .labels
            .insert("namespace".to_owned(), namespace.to_owned());
        alert
    }

    /// A tenant's user-defined rule fires a critical alert in its own
    /// namespace (user-workload monitoring stamps it so): it does not
    /// block the cluster's update, and the pass says it was left out.
    #[rstest]
    #[case::a_tenants_alert(vec![in_namespace("ShopDown", "shop")], &[], Outcome::Pass,
        "no critical alert is firing (1 alerts read; 1 alerts of other namespaces left out: only alerts of openshift-*, kube-*, default (--alert-namespaces adds more) or of no namespace count)")]
    #[case::a_tenants_beside_the_platforms(vec![in_namespace("ShopDown", "shop"), in_namespace("etcdNoLeader", "openshift-etcd")], &[], Outcome::Fail,
        "critical alerts firing: etcdNoLeader (namespace=openshift-etcd)")]
    #[case::kube_system(vec![in_namespace("KubeAPIDown", "kube-system")], &[], Outcome::Fail, "KubeAPIDown (namespace=kube-system)")]
    #[case::default_namespace(vec![in_namespace("X", "default")], &[], Outcome::Fail, "X (namespace=default)")]
    #[case::no_namespace_counts(vec![{ let mut a = alert("Watchdog2", "critical", "firing"); a.labels.remove("namespace"); a }], &[], Outcome::Fail, "Watchdog2")]
    #[case::a_namespace_the_administrator_adds(vec![in_namespace("CephDown", "storage-ceph")], &["storage-*"], Outcome::Fail, "CephDown (namespace=storage-ceph)")]
    #[case::another_namespace_still_left_out(vec![in_namespace("ShopDown", "shop")], &["storage-*"], Outcome::Pass, "openshift-*, kube-*, default, storage-*")]
    fn alerts_count_from_the_platforms_namespaces_and_those_added(
        #[case] alerts: Vec<Alert>,
        #[case] added: &[&str],
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(alerts);
        view.alert_namespaces =
            AlertNamespaces::new(&added.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let finding = fixture::evaluate(&CriticalAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        if outcome == Outcome::Fail {
            assert!(!finding.message.contains("ShopDown"), "{}", finding.message);
        }
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
