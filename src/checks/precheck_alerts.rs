//! PrecheckAlertsFiring: the alerts `oc adm upgrade recommend` names
//! besides the critical ones (which are CriticalAlertsFiring's): the
//! PodDisruptionBudget, container, node and virtualization alerts of
//! [`risks::PRECHECK_ALERTS`], and any alert labelled
//! `openShiftUpdatePrecheck="true"` but the gate's own (its
//! `UpdatePreflightFailing` carries that label for oc, and would otherwise
//! keep every target blocked once one check failed). As oc does, a firing one blocks until
//! it is accepted by its name; pending ones are ignored; no alert data at
//! all is a warning. Each is quoted in its own words with its runbook, under
//! the name of oc's class for it ([`oc_class`]). As for the critical ones,
//! alerts of namespaces that do not count (a tenant's,
//! [`crate::view::alerts::AlertNamespaces`]) are left out and counted: a
//! tenant's rule labelled `openShiftUpdatePrecheck="true"` blocks nothing.

use super::critical_alerts::{firing_alerts, firing_of, left_out, no_alert_data};
use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::risks;
use crate::view::alerts::Alert;

pub struct PrecheckAlertsFiring;

/// Whether `alert` is one `oc adm upgrade recommend` names besides the
/// critical ones.
pub(crate) fn is_precheck(alert: &Alert) -> bool {
    alert.severity() != "critical"
        && (risks::PRECHECK_ALERTS.contains(&alert.name())
            || alert.label(risks::PRECHECK_LABEL) == "true")
}

/// The class `oc adm upgrade recommend` reports an alert under (its
/// conditions `recommended/<class>`): a PodDisruptionBudget at its limit
/// slows drains, a container waiting is an image pull, node alerts are the
/// nodes'; what else it names is an update precheck.
pub(crate) fn oc_class(alert: &Alert) -> &'static str {
    match alert.name() {
        "PodDisruptionBudgetAtLimit" => "PodDisruptionBudgetAlerts",
        "KubeContainerWaiting" => "PodImagePullAlerts",
        "KubeNodeNotReady"
        | "KubeNodeUnreachable"
        | "KubeNodeReadinessFlapping"
        | "KubeletHealthState" => "NodeAlerts",
        _ => "UpdatePrecheckAlerts",
    }
}

impl Check for PrecheckAlertsFiring {
    fn name(&self) -> &'static str {
        "PrecheckAlertsFiring"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(alerts) = &ctx.view.alerts else {
            return no_alert_data(ctx.view);
        };
        let namespaces = &ctx.view.alert_namespaces;
        let firing = firing_of(alerts, ctx.view, is_precheck);
        if firing.alerts.is_empty() {
            Finding::pass(format!(
                "no update precheck alert is firing{}",
                left_out(&firing, namespaces)
            ))
        } else {
            let mut classes: Vec<&str> = firing.alerts.iter().map(|a| oc_class(a)).collect();
            classes.sort_unstable();
            classes.dedup();
            firing_alerts(
                &format!("oc's {} firing", classes.join(", ")),
                &firing.alerts,
            )
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

    fn alert(name: &str, precheck: bool, state: &str) -> Alert {
        alert_of(name, "warning", precheck, state)
    }

    fn alert_of(name: &str, severity: &str, precheck: bool, state: &str) -> Alert {
        let mut labels = serde_json::json!({"alertname": name, "severity": severity, "node": "w1"});
        if precheck {
            labels["openShiftUpdatePrecheck"] = "true".into();
        }
        serde_json::from_value(serde_json::json!({"labels": labels, "state": state,
            "annotations": {"description": format!("{name} is firing"),
                            "runbook_url": format!("https://runbooks.example/{name}.md")}}))
        .unwrap()
    }

    /// oc's classes, with its severity: each blocks until accepted by name.
    #[test]
    fn an_alert_source_that_cannot_be_read_is_an_error_and_none_a_warning() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        let none = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(
            (none.outcome, none.severity),
            (Outcome::Fail, Some(Severity::Warning))
        );
        view.unreadable.insert(
            crate::view::alerts::KIND.to_owned(),
            "cannot ask https://thanos-querier.openshift-monitoring.svc:9091/api/v1/alerts for alerts: connection refused".to_owned(),
        );
        for check in [
            &crate::checks::critical_alerts::CriticalAlertsFiring as &dyn Check,
            &PrecheckAlertsFiring,
        ] {
            let finding = fixture::evaluate(check, &view, "4.15.4");
            assert_eq!(finding.outcome, Outcome::Error, "{}", check.name());
            assert!(
                finding.message.starts_with(
                    "cannot read the cluster's alerts: cannot ask https://thanos-querier"
                ),
                "{}",
                finding.message
            );
        }
    }

    #[rstest]
    #[case::pdb_at_limit(alert("PodDisruptionBudgetAtLimit", false, "firing"), Outcome::Fail, "oc's PodDisruptionBudgetAlerts firing: PodDisruptionBudgetAtLimit (node=w1): PodDisruptionBudgetAtLimit is firing. Runbook: https://runbooks.example/PodDisruptionBudgetAtLimit.md", &["PodDisruptionBudgetAtLimit"])]
    #[case::container_waiting(alert("KubeContainerWaiting", false, "firing"), Outcome::Fail, "oc's PodImagePullAlerts firing: KubeContainerWaiting (node=w1)", &["KubeContainerWaiting"])]
    #[case::node_not_ready(alert("KubeNodeNotReady", false, "firing"), Outcome::Fail, "oc's NodeAlerts firing: KubeNodeNotReady (node=w1)", &["KubeNodeNotReady"])]
    #[case::node_unreachable(alert("KubeNodeUnreachable", false, "firing"), Outcome::Fail, "KubeNodeUnreachable", &["KubeNodeUnreachable"])]
    #[case::node_flapping(alert("KubeNodeReadinessFlapping", false, "firing"), Outcome::Fail, "KubeNodeReadinessFlapping", &["KubeNodeReadinessFlapping"])]
    #[case::kubelet_health(alert("KubeletHealthState", false, "firing"), Outcome::Fail, "KubeletHealthState", &["KubeletHealthState"])]
    #[case::virt_handler(alert("VirtHandlerDaemonSetRolloutFailing", false, "firing"), Outcome::Fail, "VirtHandlerDaemonSetRolloutFailing", &["VirtHandlerDaemonSetRolloutFailing"])]
    #[case::vm_not_evictable(alert("VMCannotBeEvicted", false, "firing"), Outcome::Fail, "VMCannotBeEvicted", &["VMCannotBeEvicted"])]
    #[case::labelled(alert("MyStorageBusy", true, "firing"), Outcome::Fail, "oc's UpdatePrecheckAlerts firing: MyStorageBusy", &["MyStorageBusy"])]
    #[case::class_pending(alert("KubeNodeNotReady", false, "pending"), Outcome::Pass, "no update precheck", &[])]
    #[case::similar_name(alert("PodDisruptionBudgetAtLimitWithMessage", false, "firing"), Outcome::Pass, "no update", &[])]
    #[case::critical_is_the_critical_checks(alert_of("KubeNodeNotReady", "critical", false, "firing"), Outcome::Pass, "no update", &[])]
    #[case::pdb_limit_below_critical_is_not_named(alert("PodDisruptionBudgetLimit", false, "firing"), Outcome::Pass, "no update", &[])]
    fn classes(
        #[case] alert: Alert,
        #[case] outcome: Outcome,
        #[case] says: &str,
        #[case] risks: &[&str],
    ) {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![alert]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, None),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
        assert_eq!(finding.risks, risks);
        assert_eq!(PrecheckAlertsFiring.severity(), Severity::Blocking);
    }

    /// The gate's own alert, as Prometheus fires it from the project's
    /// rule: `UpdatePreflightFailing` for a failing check, with oc's
    /// precheck label and the rule's identity.
    fn own(name: &str, severity: &str) -> Alert {
        let mut alert = alert_of(name, severity, true, "firing");
        alert.labels.insert(
            crate::view::alerts::OWN_RULE_LABEL.to_owned(),
            "preflight-gate".to_owned(),
        );
        alert
    }

    /// The latch: one check failing for 10 minutes fires
    /// `UpdatePreflightFailing{check="PrecheckAlertsFiring"}`, which must not
    /// make PrecheckAlertsFiring (or CriticalAlertsFiring, for the gate's
    /// critical `PreflightGateDown`) fail for every target from then on.
    #[test]
    fn the_gates_own_alerts_never_count_so_no_latch_forms() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![
            own("UpdatePreflightFailing", "warning"),
            own("PreflightGateDown", "critical"),
        ]);
        for check in [
            &PrecheckAlertsFiring as &dyn Check,
            &crate::checks::critical_alerts::CriticalAlertsFiring,
        ] {
            let finding = fixture::evaluate(check, &view, "4.15.4");
            assert_eq!(
                finding.outcome,
                Outcome::Pass,
                "{}: {}",
                check.name(),
                finding.message
            );
            assert!(
                finding
                    .message
                    .contains("1 of the gate's own alerts left out"),
                "{}",
                finding.message
            );
        }
    }

    /// A tenant's rule labelled as an update precheck fires in the
    /// tenant's namespace: left out, and said.
    #[test]
    fn a_tenants_precheck_alert_blocks_nothing() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        let mut tenant = alert("ShopBusy", true, "firing");
        tenant
            .labels
            .insert("namespace".to_owned(), "shop".to_owned());
        view.add_alerts(vec![tenant]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(
            finding
                .message
                .contains("1 alerts of other namespaces left out"),
            "{}",
            finding.message
        );
    }

    /// The gate's own budget at its limit (one replica unready, say) is
    /// about the gate, which an update does not need: installed in a
    /// platform namespace, its PodDisruptionBudgetAtLimit still holds
    /// nothing, where another budget's there does.
    #[test]
    fn the_gates_own_budget_alert_holds_no_update() {
        let at_limit = |namespace: &str| {
            let mut a = alert("PodDisruptionBudgetAtLimit", false, "firing");
            a.labels
                .insert("namespace".to_owned(), namespace.to_owned());
            a
        };
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.gate_namespace = Some("openshift-preflight-gate".to_owned());
        view.add_alerts(vec![at_limit("openshift-preflight-gate")]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(
            finding
                .message
                .contains("1 of the gate's own alerts left out"),
            "{}",
            finding.message
        );
        view.add_alerts(vec![at_limit("openshift-ingress")]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
    }

    /// Identity, not name: an alert of the same name from another rule
    /// counts, and the gate's own alert beside another still fails on that
    /// other alone.
    #[test]
    fn an_alert_counts_by_its_rule_not_by_its_name() {
        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![alert("UpdatePreflightFailing", true, "firing")]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);

        let mut view = fixture::view(vec![fixture::cluster_version("4.15.3")]);
        view.add_alerts(vec![
            own("UpdatePreflightFailing", "warning"),
            alert("KubeNodeNotReady", false, "firing"),
        ]);
        let finding = fixture::evaluate(&PrecheckAlertsFiring, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert_eq!(finding.risks, ["KubeNodeNotReady"]);
    }
}
