//! The built-in checks over real cluster captures (tests/data/real-clusters).

use std::path::PathBuf;

use jiff::Timestamp;
use preflight_gate::cluster::snapshot;
use preflight_gate::model::Outcome;
use preflight_gate::model::Target;
use preflight_gate::suite::{self, Limits};
use rstest::rstest;
use std::sync::Arc;

fn capture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real-clusters")
        .join(name)
}

/// Runs the catalogue on a capture for an update to `to`.
fn outcomes(name: &str, to: &str) -> Vec<(String, Outcome, String)> {
    let view = snapshot::load(&capture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let target = Target::image(&format!("quay.io/ocp/release:{to}"), Some(to.to_owned()));
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    suite::run(Arc::new(view), &target, now, None, Limits::default())
        .into_iter()
        .map(|r| (r.name, r.outcome, r.message))
        .collect()
}

fn find<'a>(
    results: &'a [(String, Outcome, String)],
    check: &str,
) -> &'a (String, Outcome, String) {
    results
        .iter()
        .find(|r| r.0 == check)
        .unwrap_or_else(|| panic!("no {check} in {results:?}"))
}

#[rstest]
#[case::healthy_at_rest("not-upgrading", "4.14.5", Outcome::Pass, Outcome::Pass)]
#[case::degraded_mid_update("4.14.1-degraded", "4.14.3", Outcome::Fail, Outcome::Fail)]
#[case::retarget_within_the_minor_warns(
    "4.14.1-paused-worker-pool",
    "4.14.2",
    Outcome::Fail,
    Outcome::Pass
)]
#[case::minor_change_mid_update(
    "4.14.1-paused-worker-pool",
    "4.15.0",
    Outcome::Fail,
    Outcome::Pass
)]
#[case::mco_unavailable_retarget_warns(
    "4.15.0-ec2-unavailable-mco-20m",
    "4.15.0-ec.3",
    Outcome::Fail,
    Outcome::Fail
)]
#[case::failing_after_update(
    "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
    "4.16.0-ec.4",
    Outcome::Fail,
    Outcome::Fail
)]
fn real_clusters(
    #[case] name: &str,
    #[case] to: &str,
    #[case] cluster_version: Outcome,
    #[case] operators: Outcome,
) {
    let results = outcomes(name, to);
    let cv = find(&results, "ClusterVersionState");
    assert_eq!(cv.1, cluster_version, "{name}: {}", cv.2);
    let co = find(&results, "ClusterOperatorsHealthy");
    assert_eq!(co.1, operators, "{name}: {}", co.2);
}

#[test]
fn messages_name_the_objects_and_the_rules() {
    let degraded = outcomes("4.14.1-degraded", "4.14.3");
    let co = &find(&degraded, "ClusterOperatorsHealthy").2;
    for operator in [
        "control-plane-machine-set is not Available",
        "etcd is Degraded",
        "kube-apiserver is Degraded",
    ] {
        assert!(co.contains(operator), "{co}");
    }
    let minor = outcomes("4.14.1-paused-worker-pool", "4.15.0");
    let cv = &find(&minor, "ClusterVersionState").2;
    assert!(
        cv.contains("an update to 4.14.1 is in progress (Working towards 4.14.1: 139 of 859 done"),
        "{cv}"
    );
    assert!(
        cv.contains("4.15.0 would replace it before it completes; oc refuses a new target"),
        "{cv}"
    );
}

#[test]
fn retargeting_mid_update_blocks_as_oc_does_naming_the_update_and_how_far_it_got() {
    let view = snapshot::load(&capture("4.14.1-all-recommended")).unwrap();
    let target = Target::image("quay.io/ocp/release@sha256:11", Some("4.14.11".into()));
    let results = suite::run(
        Arc::new(view),
        &target,
        "2026-11-30T12:00:00Z".parse().unwrap(),
        None,
        Limits::default(),
    );
    let cv = results
        .iter()
        .find(|r| r.name == "ClusterVersionState")
        .unwrap();
    // `oc adm upgrade --to` refuses it ("already upgrading"); accepted as
    // `Progressing`, by oc's name.
    assert_eq!(
        (cv.outcome, cv.severity),
        (Outcome::Fail, preflight_gate::model::Severity::Blocking),
        "{}",
        cv.message
    );
    assert_eq!(cv.risks, ["Progressing"], "{}", cv.message);
    assert!(
        cv.message.starts_with(
            "an update to 4.14.1 is in progress (Working towards 4.14.1: 139 of 859 done (16% complete)"
        ),
        "{}",
        cv.message
    );
    assert!(
        cv.message
            .contains("4.14.11 would replace it before it completes"),
        "{}",
        cv.message
    );
    // The kinds this capture lacks are named warnings, never silent skips.
    for (check, kind) in [
        ("NodesReady", "Node"),
        ("MachineConfigPoolsHealthy", "MachineConfigPool"),
        ("ClusterOperatorsHealthy", "ClusterOperator"),
    ] {
        let r = results.iter().find(|r| r.name == check).unwrap();
        assert_eq!(
            (r.outcome, r.severity, r.message.as_str()),
            (
                Outcome::Fail,
                preflight_gate::model::Severity::Warning,
                format!("no {kind} objects in the cluster data: this check could not look")
                    .as_str()
            )
        );
    }
    // The update asked for again is no change.
    let same = Target::image("quay.io/ocp/release@sha256:01", Some("4.14.1".into()));
    let view = snapshot::load(&capture("4.14.1-all-recommended")).unwrap();
    let results = suite::run(
        Arc::new(view),
        &same,
        Timestamp::now(),
        None,
        Limits::default(),
    );
    let cv = results
        .iter()
        .find(|r| r.name == "ClusterVersionState")
        .unwrap();
    assert_eq!(cv.outcome, Outcome::Pass, "{}", cv.message);
    assert!(
        cv.message.starts_with("4.14.1 is the update in progress"),
        "{}",
        cv.message
    );
}
