//! The names OpenShift gives what the checks find, one rule per row, on the
//! real captures (tests/data/real-clusters) where one shows the
//! rule and on small edits of them where none does: which names a finding
//! carries, and that accepting them, as `oc adm upgrade recommend --accept`
//! or `oc adm upgrade accept` (acceptRisks) would, turns it into a warning.

use std::collections::BTreeSet;
use std::path::Path;

use preflight_gate::model::standing::Exemptions;
use preflight_gate::model::{Outcome, Severity};
use rstest::rstest;
use serde_json::json;

use crate::captures::{Snapshot, alerts, blocks, edited, replace, report, result, set_state};

/// A check's finding on a capture: it blocks, carries `names`, says `says`;
/// accepting `accept` turns it into a warning, and accepting `not_enough`
/// does not.
#[rstest]
#[case::failing(
    Snapshot::Real("4.14.1-degraded"), "4.14.3", "ClusterVersionState",
    &["Failing", "Progressing"], "the ClusterVersion is Failing for",
    &["Failing", "Progressing"], &["Progressing"]
)]
#[case::a_stuck_update_retargeted_needs_both_guards_accepted(
    Snapshot::Real("4.14.1-degraded"), "4.14.3", "ClusterVersionState",
    &["Failing", "Progressing"], "4.14.3 would replace it before it completes",
    &["Failing", "Progressing"], &["Failing"]
)]
#[case::another_minor_mid_update(
    Snapshot::Real("4.14.1-paused-worker-pool"), "4.15.0", "ClusterVersionState",
    &["Progressing", "ClusterVersionUpdating"], "4.15.0 would replace it before it completes",
    &["ClusterVersionUpdating"], &["Failing"]
)]
#[case::ocs_name_for_an_update_in_progress(
    Snapshot::Real("4.14.1-paused-worker-pool"), "4.15.0", "ClusterVersionState",
    &["Progressing", "ClusterVersionUpdating"], "the cluster is already upgrading", &["Progressing"], &[]
)]
#[case::a_not_recommended_conditional_update_to_oc(
    Snapshot::Real("4.12.16-longest-not-recommended"), "4.12.51", "TargetRecommended",
    &["ConditionalUpdateRisk", "HighNodeStatusReportFrequency", "RHELKernelHighLoadIOWait"],
    "is not recommended (Recommended=False, MultipleReasons)",
    &["ConditionalUpdateRisk"], &["HighNodeStatusReportFrequency"]
)]
#[case::operators_not_upgradeable(
    Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"), "4.15.0-ec.3", "ClusterOperatorsUpgradeable",
    &["ConditionalUpdateRisk", "ClusterOperatorUpgradeable-control-plane-machine-set",
      "ClusterOperatorUpgradeable-machine-config"],
    "Upgradeable=False blocks a minor update",
    &["ClusterOperatorUpgradeable-control-plane-machine-set", "ClusterOperatorUpgradeable-machine-config"],
    &["ClusterOperatorUpgradeable-machine-config"]
)]
#[case::operators_down_and_degraded(
    Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"), "4.15.0-ec.3", "ClusterOperatorsHealthy",
    // machine-config down for 20 minutes; etcd Degraded for seconds is
    // settling and named by no alert.
    &["ClusterOperatorDown"], "machine-config is not Available for 20m",
    &["ClusterOperatorDown"], &["ClusterOperatorDegraded"]
)]
#[case::pdb_at_limit_alert(
    Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"), "4.15.0-ec.3", "PrecheckAlertsFiring",
    &["PodDisruptionBudgetAtLimit"],
    // The alert's own summary, description and runbook_url.
    "PodDisruptionBudgetAtLimit (namespace=openshift-monitoring): PodDisruptionBudgetAtLimit for pods <>. PodDisruptionBudgetAtLimit in namespace <>. Runbook: https://<mock_data>/PDB.md",
    &["PodDisruptionBudgetAtLimit"], &["PodDisruptionBudgetLimit"]
)]
#[case::a_critical_alert(
    edited("4.15.0-ec2-unavailable-mco-20m", |dir| alerts(dir, |a| set_state(a, "ClusterOperatorDown", "firing"))),
    "4.15.0-ec.3", "CriticalAlertsFiring", &["ClusterOperatorDown"],
    "ClusterOperatorDown (namespace=openshift-cluster-version, name=authentication): Cluster operator has not been available for 10 minutes. The authentication operator may be down or disabled because WellKnown_NotReady",
    &["ClusterOperatorDown"], &["ClusterOperatorDegraded"]
)]
#[case::an_alert_labelled_for_the_precheck(
    edited("4.15.0-ec2-unavailable-mco-20m", |dir| alerts(dir, |a| {
        let alert = a.iter_mut().find(|a| a["labels"]["alertname"] == "KubePodNotReady").unwrap();
        alert["labels"]["openShiftUpdatePrecheck"] = json!("true");
    })),
    "4.15.0-ec.3", "PrecheckAlertsFiring", &["KubePodNotReady", "PodDisruptionBudgetAtLimit"],
    "KubePodNotReady", &["KubePodNotReady", "PodDisruptionBudgetAtLimit"], &["PodDisruptionBudgetAtLimit"]
)]
#[case::a_node_not_ready(
    edited("not-upgrading", |dir| replace(dir, "node.yaml",
        "reason: KubeletReady\n          status: \"True\"", "reason: NodeStatusUnknown\n          status: \"Unknown\"")),
    "4.14.5", "NodesReady", &["KubeNodeNotReady"], "is not Ready for", &["KubeNodeNotReady"], &[]
)]
#[case::a_pdb_at_its_limit(
    edited("not-upgrading", |dir| std::fs::write(dir.join("pdb.yaml"), PDB).unwrap()),
    "4.14.5", "PodDisruptionBudgetsAllowDrain", &["PodDisruptionBudgetAtLimit"],
    "shop/db allows no disruption of its 2 pods", &["PodDisruptionBudgetAtLimit"], &["KubeNodeNotReady"]
)]
fn each_finding_carries_openshifts_names_and_is_accepted_by_them(
    #[case] snapshot: Snapshot,
    #[case] to: &str,
    #[case] check: &str,
    #[case] names: &[&str],
    #[case] says: &str,
    #[case] accept: &[&str],
    #[case] not_enough: &[&str],
) {
    let plain = report(&snapshot, to, &[]);
    let r = result(&plain, check);
    assert!(blocks(r), "{check} does not block: {r:?}");
    assert_eq!(r.risks, names, "{check}: {}", r.message);
    assert!(r.message.contains(says), "{check}: {}", r.message);

    let accepted = report(&snapshot, to, accept);
    let r = result(&accepted, check);
    // Accepted: it keeps its own severity; its standing says so.
    assert_eq!(
        r.severity,
        Severity::Blocking,
        "{check} by {accept:?}: {r:?}"
    );
    assert!(
        accepted.accepted.contains(&check.to_owned()),
        "{:?}",
        accepted.accepted
    );

    if !not_enough.is_empty() {
        let partly = report(&snapshot, to, not_enough);
        assert!(
            blocks(result(&partly, check)),
            "{check} accepted by {not_enough:?} alone"
        );
    }
}

/// A missing admin ack carries OpenShift's names, but neither they nor the
/// check's name accept it: the CVO waits for the ack whatever is accepted.
#[rstest]
#[case::by_the_cvos_name(&["AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"])]
#[case::by_ocs_name(&["ConditionalUpdateRisk"])]
#[case::by_the_checks_name(&["AdminAcksMissing"])]
#[case::by_all_of_them(&["AdminAcksMissing", "ConditionalUpdateRisk", "AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"])]
fn an_admin_ack_is_given_never_accepted(#[case] accept: &[&str]) {
    let snapshot = edited("4.12.16-longest-not-recommended", |dir| {
        std::fs::write(dir.join("admin-gates.yaml"), ADMIN_GATES).unwrap()
    });
    let report = report(&snapshot, "4.13.0", accept);
    let r = result(&report, "AdminAcksMissing");
    assert!(blocks(r), "accepted by {accept:?}: {r:?}");
    assert_eq!(
        r.risks,
        [
            "ConditionalUpdateRisk",
            "AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"
        ]
    );
    assert!(
        r.message.contains(r#"give them: oc -n openshift-config patch cm admin-acks --patch '{"data":{"ack-4.12-kube-1.26-api-removals-in-4.13":"true"}}' --type=merge"#),
        "{}",
        r.message
    );
    assert!(!report.accepted.contains(&"AdminAcksMissing".to_owned()));
    let line = report.summary_line();
    assert!(
        line.contains("AdminAcksMissing cannot be accepted"),
        "{line}"
    );
}

/// A PodDisruptionBudget at zero allowed disruptions, with no pods in the
/// snapshot: it stops a drain on its own.
const PDB: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: db
  namespace: shop
spec:
  selector:
    matchLabels:
      app: db
status:
  currentHealthy: 2
  desiredHealthy: 2
  disruptionsAllowed: 0
  expectedPods: 2
";

/// The admin gate OpenShift 4.12 sets before 4.13, not acknowledged.
const ADMIN_GATES: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: admin-gates
  namespace: openshift-config-managed
data:
  ack-4.12-kube-1.26-api-removals-in-4.13: Kubernetes 1.26 and therefore OpenShift 4.13 remove several APIs which require admin consideration.
";

/// Each alert `oc adm upgrade recommend` names besides the critical ones
/// blocks until accepted by its name, as oc's severity has it.
#[rstest]
#[case("PodDisruptionBudgetAtLimit")]
#[case("KubeContainerWaiting")]
#[case("KubeNodeNotReady")]
#[case("KubeNodeUnreachable")]
#[case("KubeNodeReadinessFlapping")]
#[case("KubeletHealthState")]
#[case("VirtHandlerDaemonSetRolloutFailing")]
#[case("VMCannotBeEvicted")]
fn ocs_alert_classes_block_until_accepted_by_name(#[case] name: &str) {
    // The capture's firing warning alert, renamed; its PDB alerts go.
    let snapshot = edited("4.15.0-ec2-unavailable-mco-20m", |dir| {
        alerts(dir, |a| {
            a.retain(|a| a["labels"]["alertname"] != "PodDisruptionBudgetAtLimit");
            let alert = a
                .iter_mut()
                .find(|a| a["labels"]["alertname"] == "KubePodNotReady")
                .unwrap();
            alert["labels"]["alertname"] = json!(name);
        })
    });
    let plain = report(&snapshot, "4.15.0-ec.3", &[]);
    let r = result(&plain, "PrecheckAlertsFiring");
    assert!(blocks(r), "{r:?}");
    assert_eq!(r.risks, [name]);
    // Quoted with its runbook, which is also the remediation link.
    assert!(r.message.contains("Runbook: https://"), "{}", r.message);
    assert_eq!(
        r.remediation_url.as_deref(),
        Some(
            "https://github.com/openshift/runbooks/blob/master/alerts/cluster-monitoring-operator/KubePodNotReady.md"
        )
    );
    let accepted = report(&snapshot, "4.15.0-ec.3", &[name]);
    assert!(
        accepted
            .accepted
            .contains(&"PrecheckAlertsFiring".to_owned()),
        "{:?}",
        accepted.accepted
    );
}

/// The CVO's own acceptance: a conditional update whose every applying
/// risk is accepted passes TargetRecommended, as `AllExposedRisksAccepted`.
#[test]
fn every_applying_risk_accepted_passes_target_recommended() {
    let snapshot = Snapshot::Real("4.12.16-longest-not-recommended");
    let accepted = report(
        &snapshot,
        "4.12.51",
        &["HighNodeStatusReportFrequency", "RHELKernelHighLoadIOWait"],
    );
    let r = result(&accepted, "TargetRecommended");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert!(
        r.message.contains("AllExposedRisksAccepted"),
        "{}",
        r.message
    );
    // The risk whose PromQL did not match is not one to accept.
    assert!(!r.message.contains("AMD19hFirmware"), "{}", r.message);
    assert_eq!(accepted.summary.failing, 0, "{}", accepted.summary_line());
}

/// A ClusterVersion the CVO wrote after `oc adm upgrade accept`: the
/// target's `Recommended=True` with `AllExposedRisksAccepted` passes.
#[test]
fn the_cvos_all_exposed_risks_accepted_passes() {
    let snapshot = edited("4.12.16-longest-not-recommended", |dir| {
        // The 4.12.51 update's Recommended condition, as the CVO rewrites it.
        let path = dir.join("cv.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let image = text
            .find("sha256:158ced797e49f6caf7862acccef58484be63b642fdd2f66e6416295fa7958ab0")
            .unwrap();
        let was = "reason: MultipleReasons\n      status: \"False\"\n      type: Recommended";
        let at = text[..image].rfind(was).unwrap();
        let now =
            "reason: AllExposedRisksAccepted\n      status: \"True\"\n      type: Recommended";
        let text = format!("{}{now}{}", &text[..at], &text[at + was.len()..]);
        std::fs::write(&path, text).unwrap();
    });
    let report = report(&snapshot, "4.12.51", &[]);
    let r = result(&report, "TargetRecommended");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert!(
        r.message
            .contains("(Recommended=True, AllExposedRisksAccepted)"),
        "{}",
        r.message
    );
}

/// Every name a result carries, and OpenShift's well-known ones, are known
/// to the one policy: none is said to name nothing.
#[test]
fn the_names_a_report_carries_are_known() {
    let snapshot = Snapshot::Real("4.15.0-ec2-unavailable-mco-20m");
    let plain = report(&snapshot, "4.15.0-ec.3", &[]);
    let carried: BTreeSet<String> = plain
        .results
        .iter()
        .flat_map(|r| r.risks.iter().cloned())
        .collect();
    assert!(
        carried.contains("PodDisruptionBudgetAtLimit"),
        "{carried:?}"
    );
    let exemptions = Exemptions {
        accepted: carried
            .iter()
            .cloned()
            .chain(["Failing".to_owned(), "NoSuchRisk".to_owned()])
            .collect(),
        ..Exemptions::default()
    };
    assert_eq!(exemptions.names_nothing(&plain.results), ["NoSuchRisk"]);
}

/// docs/checks.md's table names every name the checks may carry.
#[test]
fn the_docs_table_names_every_openshift_name() {
    use preflight_gate::model::risks;
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/checks.md"))
            .unwrap();
    let (_, section) = docs.split_once("## OpenShift's names").unwrap();
    let names = [
        risks::FAILING,
        risks::PROGRESSING,
        risks::CONDITIONAL_UPDATE_RISK,
        risks::ALERT_NO_TEST_DATA,
        risks::CANNOT_RETRIEVE_UPDATES,
        risks::FAILED_TO_COMPLETE_PRECHECK,
        risks::CLUSTER_VERSION_UPDATING,
        risks::CLUSTER_VERSION_OVERRIDES,
        risks::RESOURCE_DELETION_IN_PROGRESS,
        "AdminAck-<gate>",
        "ClusterOperatorUpgradeable-<operator>",
    ];
    for name in names
        .iter()
        .chain(risks::PRECHECK_ALERTS)
        .chain(risks::OBJECT_ALERTS)
    {
        assert!(
            section.contains(&format!("`{name}`")),
            "docs/checks.md's OpenShift's names do not name {name}"
        );
    }
}
