//! The names OpenShift gives the risks of an update, which findings carry
//! beside their check's own name: `oc adm upgrade recommend`'s issue names
//! (what its `--accept` takes) and the cluster-version operator's
//! conditional-update risk names (what `spec.desiredUpdate.acceptRisks`,
//! written by `oc adm upgrade accept`, takes). An accepted name accepts
//! every finding that carries it, by [`all_accepted`]; the table of which
//! check carries which name is in docs/checks.md.

use std::collections::BTreeSet;

/// oc: the ClusterVersion's `Failing` condition is not `False`.
pub const FAILING: &str = "Failing";
/// oc: an update is in progress (`Progressing=True`).
pub const PROGRESSING: &str = "Progressing";
/// oc: the ClusterVersion is `Invalid=True` (its spec cannot be acted on).
pub const INVALID: &str = "Invalid";
/// oc: the target is a conditional update that is not recommended (also
/// the ClusterVersion's `Upgradeable=False`, which oc adds to every minor
/// or major target as a risk).
pub const CONDITIONAL_UPDATE_RISK: &str = "ConditionalUpdateRisk";
/// oc: there was no alert data to judge the alerts by.
pub const ALERT_NO_TEST_DATA: &str = "AlertNoTestData";
/// oc: the ClusterVersion's `RetrievedUpdates` is not True. Known, but no
/// finding of the gate carries it.
pub const CANNOT_RETRIEVE_UPDATES: &str = "CannotRetrieveUpdates";
/// oc: a precheck of its own could not complete. Known, but no finding of
/// the gate carries it.
pub const FAILED_TO_COMPLETE_PRECHECK: &str = "FailedToCompletePrecheck";
/// The CVO: an update is in progress, a risk of a minor or major target.
pub const CLUSTER_VERSION_UPDATING: &str = "ClusterVersionUpdating";
/// The CVO: `spec.overrides` makes components unmanaged, a risk of a minor
/// or major target.
pub const CLUSTER_VERSION_OVERRIDES: &str = "ClusterVersionOverrides";
/// The CVO: manifests of the current release are still being deleted.
pub const RESOURCE_DELETION_IN_PROGRESS: &str = "ResourceDeletionInProgress";
/// The CVO's prefix for an admin gate without its ack: `AdminAck-<gate>`.
pub const ADMIN_ACK: &str = "AdminAck";
/// The CVO's prefix for an operator's `Upgradeable=False`:
/// `ClusterOperatorUpgradeable-<operator>`.
pub const CLUSTER_OPERATOR_UPGRADEABLE: &str = "ClusterOperatorUpgradeable";

/// The gate's own mark, not OpenShift's, on a target the cluster cannot
/// resolve to a release image: a version its update graph does not offer
/// (no channel, or not in the graph). The CVO refuses such a target
/// itself, so no accepted name may clear it (`standing::acceptable`): the
/// way on is the release image, an explicit update.
pub const UNRESOLVABLE_TARGET: &str = "UnresolvableTarget";

/// Whether `name` is a mark of the gate's own, never one of OpenShift's
/// names (the report does not show it as one).
pub fn is_gate_mark(name: &str) -> bool {
    name == UNRESOLVABLE_TARGET
}

/// The CVO's name for the admin gate `gate` (`ack-4.12-kube-1.26-...`)
/// that has no ack.
pub fn admin_ack(gate: &str) -> String {
    format!("{ADMIN_ACK}-{gate}")
}

/// Whether `name` is the CVO's name for an admin gate without its ack.
pub fn is_admin_ack(name: &str) -> bool {
    name.strip_prefix(ADMIN_ACK)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|gate| !gate.is_empty())
}

/// The CVO's name for the ClusterOperator `operator`'s `Upgradeable=False`.
pub fn cluster_operator_upgradeable(operator: &str) -> String {
    format!("{CLUSTER_OPERATOR_UPGRADEABLE}-{operator}")
}

/// The alerts `oc adm upgrade recommend` names whatever their severity
/// (besides every critical alert), each an issue until it is accepted by
/// its alert name. Alerts labelled `openShiftUpdatePrecheck="true"` are
/// named too.
pub const PRECHECK_ALERTS: &[&str] = &[
    "PodDisruptionBudgetAtLimit",
    "KubeContainerWaiting",
    "KubeNodeNotReady",
    "KubeNodeUnreachable",
    "KubeNodeReadinessFlapping",
    "KubeletHealthState",
    "VirtHandlerDaemonSetRolloutFailing",
    "VMCannotBeEvicted",
];

/// The label that makes any alert one `oc adm upgrade recommend` names.
pub const PRECHECK_LABEL: &str = "openShiftUpdatePrecheck";

/// Alert names the checks carry for what they find in objects: a PDB at
/// or below its limit, a node not Ready, an operator down or degraded.
pub const OBJECT_ALERTS: &[&str] = &[
    "PodDisruptionBudgetAtLimit",
    "PodDisruptionBudgetLimit",
    "KubeNodeNotReady",
    "ClusterOperatorDown",
    "ClusterOperatorDegraded",
];

/// oc's names for a whole concern: a finding that carries them is accepted
/// when each of them is, whatever else it carries. (A finding about an
/// update in progress is `Progressing` to oc and `ClusterVersionUpdating`
/// to the CVO; either tool's acceptance is enough.)
const WHOLE: &[&str] = &[
    FAILING,
    INVALID,
    PROGRESSING,
    CONDITIONAL_UPDATE_RISK,
    ALERT_NO_TEST_DATA,
];

/// Names the gate knows OpenShift to use, whether or not a result carries
/// them now: an accepted one is never "a name that names nothing".
pub fn well_known(name: &str) -> bool {
    const FIXED: &[&str] = &[
        FAILING,
        INVALID,
        PROGRESSING,
        CONDITIONAL_UPDATE_RISK,
        ALERT_NO_TEST_DATA,
        CANNOT_RETRIEVE_UPDATES,
        FAILED_TO_COMPLETE_PRECHECK,
        CLUSTER_VERSION_UPDATING,
        CLUSTER_VERSION_OVERRIDES,
        RESOURCE_DELETION_IN_PROGRESS,
    ];
    let prefixed = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|rest| !rest.is_empty())
    };
    FIXED.contains(&name)
        || PRECHECK_ALERTS.contains(&name)
        || OBJECT_ALERTS.contains(&name)
        || prefixed(ADMIN_ACK)
        || prefixed(CLUSTER_OPERATOR_UPGRADEABLE)
}

/// Whether `accepted` accepts everything a finding carrying `risks` is
/// about: each of oc's names for a whole concern it carries (a stuck
/// update retargeted is both `Failing` and `Progressing`: accepting one
/// does not accept the other), or every other name it carries. A finding
/// that carries no name is accepted by its check's name alone.
pub fn all_accepted(risks: &[String], accepted: &BTreeSet<String>) -> bool {
    let whole = |r: &&String| WHOLE.contains(&r.as_str());
    let mut wholes = risks.iter().filter(whole).peekable();
    if wholes.peek().is_some() && wholes.all(|r| accepted.contains(r)) {
        return true;
    }
    let mut parts = risks.iter().filter(|r| !whole(r)).peekable();
    parts.peek().is_some() && parts.all(|r| accepted.contains(r))
}

/// The fewest names that accept a finding carrying `risks`: the CVO's
/// and the alerts' where it carries any (both oc and the CVO take those),
/// else oc's name for the whole concern.
pub fn to_accept(risks: &[String]) -> Vec<&str> {
    let (whole, parts): (Vec<&String>, Vec<&String>) =
        risks.iter().partition(|r| WHOLE.contains(&r.as_str()));
    let chosen = if parts.is_empty() { whole } else { parts };
    chosen.into_iter().map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[rstest]
    #[case::nothing_carried(&[], &["A"], false)]
    #[case::the_one_name(&["PodDisruptionBudgetAtLimit"], &["PodDisruptionBudgetAtLimit"], true)]
    #[case::every_alert(&["etcdNoLeader", "ClusterOperatorDown"], &["ClusterOperatorDown", "etcdNoLeader"], true)]
    #[case::one_alert_of_two(&["etcdNoLeader", "ClusterOperatorDown"], &["ClusterOperatorDown"], false)]
    #[case::ocs_name_for_the_whole(&["ConditionalUpdateRisk", "RiskA", "RiskB"], &["ConditionalUpdateRisk"], true)]
    #[case::every_cvo_risk(&["ConditionalUpdateRisk", "RiskA", "RiskB"], &["RiskA", "RiskB"], true)]
    #[case::one_cvo_risk_of_two(&["ConditionalUpdateRisk", "RiskA", "RiskB"], &["RiskA"], false)]
    #[case::progressing_to_oc(&["Progressing", "ClusterVersionUpdating"], &["Progressing"], true)]
    #[case::updating_to_the_cvo(&["Progressing", "ClusterVersionUpdating"], &["ClusterVersionUpdating"], true)]
    #[case::only_whole_names_carried(&["Failing"], &["Progressing"], false)]
    #[case::a_stuck_update_retargeted(&["Failing", "Progressing"], &["Progressing"], false)]
    #[case::both_guards_accepted(&["Failing", "Progressing"], &["Failing", "Progressing"], true)]
    #[case::case_matters(&["Failing"], &["failing"], false)]
    fn acceptance(#[case] risks: &[&str], #[case] accepted: &[&str], #[case] expected: bool) {
        let accepted: BTreeSet<String> = accepted.iter().map(|s| s.to_string()).collect();
        assert_eq!(all_accepted(&names(risks), &accepted), expected);
    }

    #[rstest]
    #[case("Failing", true)]
    #[case("PodDisruptionBudgetAtLimit", true)]
    #[case("AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13", true)]
    #[case("ClusterOperatorUpgradeable-storage", true)]
    #[case("ClusterOperatorUpgradeable-", false)]
    #[case("AdminAck", false)]
    #[case("etcdNoLeader", false)]
    fn known_names(#[case] name: &str, #[case] known: bool) {
        assert_eq!(well_known(name), known, "{name}");
    }

    #[rstest]
    #[case(&["ConditionalUpdateRisk", "RiskA", "RiskB"], &["RiskA", "RiskB"])]
    #[case(&["Progressing", "ClusterVersionUpdating"], &["ClusterVersionUpdating"])]
    #[case(&["Failing"], &["Failing"])]
    #[case(&[], &[])]
    fn the_names_to_accept_are_the_fewest_that_do(
        #[case] risks: &[&str],
        #[case] expected: &[&str],
    ) {
        let risks = names(risks);
        assert_eq!(to_accept(&risks), expected);
        let accepted: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(all_accepted(&risks, &accepted), !risks.is_empty());
    }

    #[test]
    fn the_cvos_names_are_its_prefix_and_the_object() {
        assert_eq!(
            admin_ack("ack-4.12-kube-1.26-api-removals-in-4.13"),
            "AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"
        );
        assert_eq!(
            cluster_operator_upgradeable("storage"),
            "ClusterOperatorUpgradeable-storage"
        );
    }
}
