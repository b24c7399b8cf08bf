//! Verdicts on clusters in motion, one rule per row, on the real captures
//! and small edits of them, beside what `oc` says of the same cluster:
//! an update under way (`oc adm upgrade --to` refuses a new target, "the
//! cluster is already upgrading"), operators settling, pools rolling, a
//! move to or from the multi-architecture payload, pre-releases.

use preflight_gate::model::{Outcome, Severity};
use rstest::rstest;

use crate::captures::{Snapshot, edited, replace, report, result};

/// The Available condition of the `authentication` operator in
/// `not-upgrading`, whose time of the data is 2023-11-02T13:11:40Z.
const AUTHENTICATION_AVAILABLE: &str = "- lastTransitionTime: \"2023-11-02T13:09:10Z\"\n      message: All is well\n      reason: AsExpected\n      status: \"True\"\n      type: Available";

/// `authentication` not Available since `since`.
fn authentication_down(since: &'static str) -> Snapshot {
    edited("not-upgrading", move |dir| {
        replace(
            dir,
            "co.yaml",
            AUTHENTICATION_AVAILABLE,
            &format!(
                "- lastTransitionTime: \"{since}\"\n      message: 'OAuthServerDeploymentAvailable: no pods'\n      reason: OAuthServerDeployment_NoPod\n      status: \"False\"\n      type: Available"
            ),
        )
    })
}

/// The first pool of `not-upgrading` still rolling, with no update in
/// progress (a MachineConfig applied by hand).
fn pool_rolling() -> Snapshot {
    edited("not-upgrading", |dir| {
        replace(
            dir,
            "mcp.yaml",
            "status: \"False\"\n          type: Updating",
            "status: \"True\"\n          type: Updating",
        )
    })
}

/// `not-upgrading` on the multi-architecture payload.
fn multi() -> Snapshot {
    edited("not-upgrading", |dir| {
        replace(
            dir,
            "cv.yaml",
            "  desired:\n    channels:",
            "  desired:\n    architecture: Multi\n    channels:",
        )
    })
}

const X86_4_14_5: &str = "quay.io/openshift-release-dev/ocp-release:4.14.5-x86_64";

/// Each row: the cluster, the target, the check that judges it, how
/// (outcome and severity: `None` is the check's own, Blocking), what it
/// says, and what oc does with the same cluster.
#[rstest]
// oc adm upgrade --to 4.14.11: "the cluster is already upgrading".
#[case::a_new_target_mid_update(
    Snapshot::Real("4.14.1-all-recommended"),
    "4.14.11",
    "ClusterVersionState",
    Outcome::Fail,
    None,
    "4.14.11 would replace it before it completes"
)]
// oc: "info: Cluster is already at version 4.14.1"-like no change.
#[case::the_update_under_way_again(
    Snapshot::Real("4.14.1-all-recommended"),
    "4.14.1",
    "ClusterVersionState",
    Outcome::Pass,
    None,
    "4.14.1 is the update in progress"
)]
#[case::the_update_under_way_is_offered_by_no_graph(
    Snapshot::Real("4.14.1-all-recommended"),
    "4.14.1",
    "TargetRecommended",
    Outcome::Pass,
    None,
    "which the update graph does not offer again"
)]
#[case::a_new_target_while_a_pool_is_paused_mid_update(
    Snapshot::Real("4.14.1-paused-worker-pool"),
    "4.14.2",
    "ClusterVersionState",
    Outcome::Fail,
    None,
    "an update to 4.14.1 is in progress"
)]
// The CVO does not read Upgradeable again for the update it runs.
#[case::its_own_pool_updating(
    Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"),
    "4.15.0-ec.2",
    "ClusterOperatorsUpgradeable",
    Outcome::Fail,
    Some(Severity::Warning),
    "machine-config (PoolUpdating"
)]
// oc adm upgrade status: an operator down for 20 minutes is an error.
#[case::an_operator_down_for_twenty_minutes(
    Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"),
    "4.15.0-ec.3",
    "ClusterOperatorsHealthy",
    Outcome::Fail,
    None,
    "machine-config is not Available for 20m"
)]
// oc adm upgrade status: "proceeding well" under 5 minutes.
#[case::an_operator_down_for_thirty_seconds(
    authentication_down("2023-11-02T13:11:10Z"),
    X86_4_14_5,
    "ClusterOperatorsHealthy",
    Outcome::Fail,
    Some(Severity::Warning),
    "settling, younger than 5m"
)]
#[case::an_operator_down_for_twenty_minutes_blocks(
    authentication_down("2023-11-02T12:51:40Z"),
    X86_4_14_5,
    "ClusterOperatorsHealthy",
    Outcome::Fail,
    None,
    "authentication is not Available for 20m"
)]
// Neither the CVO nor oc hold a target within the minor for a rolling pool.
#[case::a_pool_rolling_before_a_patch(
    pool_rolling(),
    X86_4_14_5,
    "MachineConfigPoolsHealthy",
    Outcome::Fail,
    Some(Severity::Warning),
    "with no update in progress: let it settle"
)]
#[case::a_pool_rolling_before_a_minor(
    pool_rolling(),
    "quay.io/openshift-release-dev/ocp-release:4.15.3-x86_64",
    "MachineConfigPoolsHealthy",
    Outcome::Fail,
    None,
    "is Updating"
)]
#[case::back_from_multi_architecture(
    multi(),
    X86_4_14_5,
    "ClusterVersionState",
    Outcome::Fail,
    None,
    "moving back from multi-architecture is unsupported"
)]
// A cluster that runs an engineering candidate has no supported update
// path, whatever the target: a pre-release step blocks too.
#[case::an_engineering_candidate(
    Snapshot::Real("4.16.0-ec2-control-plane-updated-pdb-prohibits-draining"),
    "4.16.0-ec.4",
    "UpdatePath",
    Outcome::Fail,
    None,
    "the cluster runs 4.16.0-ec.3, an engineering candidate: a cluster on a pre-release has no supported update path, to a release or to another pre-release; reinstall on a release for a cluster to keep (a pre-release step from 4.16.0-ec.3 to 4.16.0-ec.4"
)]
fn clusters_in_motion_are_judged_as_oc_judges_them(
    #[case] snapshot: Snapshot,
    #[case] to: &str,
    #[case] check: &str,
    #[case] outcome: Outcome,
    #[case] severity: Option<Severity>,
    #[case] says: &str,
) {
    let report = report(&snapshot, to, &[]);
    let r = result(&report, check);
    assert_eq!(
        (r.outcome, r.severity),
        (outcome, severity.unwrap_or(Severity::Blocking)),
        "{check}: {}",
        r.message
    );
    assert!(r.message.contains(says), "{check}: {}", r.message);
}

/// What the report calls the move: a migration to the multi-architecture
/// payload is its own kind, never "the release it runs"; a step between
/// pre-releases is not a patch.
#[rstest]
#[case::to_multi(
    Snapshot::Real("not-upgrading"),
    "quay.io/openshift-release-dev/ocp-release:4.14.1-multi",
    "multi-architecture migration"
)]
#[case::from_multi(multi(), X86_4_14_5, "single-architecture move")]
#[case::ec_to_ec(
    Snapshot::Real("4.16.0-ec2-control-plane-updated-pdb-prohibits-draining"),
    "4.16.0-ec.4",
    "pre-release step"
)]
#[case::the_release_it_runs(
    Snapshot::Real("not-upgrading"),
    "quay.io/openshift-release-dev/ocp-release:4.14.1-x86_64",
    "same"
)]
fn the_move_is_named_as_it_is(#[case] snapshot: Snapshot, #[case] to: &str, #[case] kind: &str) {
    let report = report(&snapshot, to, &[]);
    assert_eq!(report.update_kind.as_deref(), Some(kind));
}

/// oc takes its "now" from the ClusterVersion and the ClusterOperators:
/// `4.15.0-ec2-unavailable-mco-20m`'s nodes and pools were captured 75
/// days later, which the report says instead of judging by them.
#[test]
fn the_time_of_the_data_is_the_cluster_versions_and_operators() {
    let report = report(
        &Snapshot::Real("4.15.0-ec2-unavailable-mco-20m"),
        "4.15.0-ec.3",
        &[],
    );
    assert_eq!(report.as_of.as_deref(), Some("2023-11-24T15:48:28Z"));
    assert_eq!(
        report.clocks_disagree.as_deref(),
        Some(
            "MachineConfigPool times run 75d0h past it, Node times run 75d0h past it: the data may mix captures taken at different times"
        )
    );
}
