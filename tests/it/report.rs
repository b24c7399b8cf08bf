//! The report over every real cluster capture (tests/data/real-clusters),
//! against golden files in tests/data/golden/, and our verdict against what
//! `oc adm upgrade recommend` said where its output sits beside a capture:
//! the issues it names, by their names, and what accepting them leaves.
//! Run with `PREFLIGHT_GATE_BLESS=1` to rewrite the goldens.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use preflight_gate::checks::Context;
use preflight_gate::cluster::snapshot;
use preflight_gate::model::standing::Exemptions;
use preflight_gate::model::{Outcome, Severity};
use preflight_gate::report::{Format, Report};
use preflight_gate::suite::{self, Limits};
use rstest::rstest;
use std::sync::Arc;

const CAPTURES: &str = "tests/data/real-clusters";
const NOW: &str = "2026-11-30T12:00:00Z";

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(CAPTURES)
        .join(name)
}

fn report(name: &str, to: &str) -> Report {
    report_accepting(name, to, &BTreeSet::new())
}

/// The report with `accepted` names, as `check --accept` takes them.
fn report_accepting(name: &str, to: &str, accepted: &BTreeSet<String>) -> Report {
    let view = snapshot::load(&capture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let target = view.target(to);
    let (view, now) = (Arc::new(view), NOW.parse::<Timestamp>().unwrap());
    let results = suite::run_accepting(view.clone(), &target, now, accepted, Limits::default());
    let exemptions = Exemptions {
        accepted: accepted.clone(),
        ..Exemptions::default()
    };
    Report::new(&Context::new(&view, &target, now), results, &exemptions)
}

fn blocking_failures(report: &Report) -> BTreeSet<String> {
    report
        .results
        .iter()
        .filter(|r| {
            r.severity == Severity::Blocking
                && matches!(r.outcome, Outcome::Fail | Outcome::Error)
                && !report.accepted.contains(&r.name)
        })
        .map(|r| r.name.clone())
        .collect()
}

/// One target per capture: the one oc was asked about where there is one,
/// else the next patch or the update the capture is moving to.
#[rstest]
#[case::longest_not_recommended("4.12.16-longest-not-recommended", "4.12.51")]
#[case::all_recommended_rollback("4.14.1-all-recommended", "4.12.51")]
#[case::degraded("4.14.1-degraded", "4.14.3")]
#[case::paused_worker_pool("4.14.1-paused-worker-pool", "4.14.2")]
#[case::unavailable_mco("4.15.0-ec2-unavailable-mco-20m", "4.15.0-ec.3")]
#[case::pdb_prohibits_draining(
    "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
    "4.16.0-ec.4"
)]
#[case::not_upgrading("not-upgrading", "4.15.3")]
fn golden_reports(#[case] name: &str, #[case] to: &str) {
    let report = report(name, to);
    let table = report.render(Format::Table, false);
    crate::golden::file(
        &format!("tests/data/golden/{name}.txt"),
        &table,
        "golden_reports",
    );
}

/// What `oc adm upgrade recommend --version` said of a capture.
struct OcVerdict {
    /// The issue names `--accept` would take: those of its `error: issues
    /// that apply ...` line, and those its output shows it found when it
    /// gave up on a version it does not offer before listing them (an
    /// update in progress, a Failing cluster, no alert data).
    names: BTreeSet<String>,
    /// It refused the version outright: no update to it is offered, which
    /// no `--accept` gets past.
    refused: bool,
}

fn oc_verdict(name: &str, version: &str) -> OcVerdict {
    let path = capture(name).join(format!("oc-recommend.version-{version}-output"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut names: BTreeSet<String> = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("error: issues that apply to this cluster but which were not included in --accept: ")
                .or_else(|| l.strip_prefix("error: There are issues that apply to this cluster and have not been accepted. `oc adm upgrade accept` can be used to accept them: "))
        })
        .map(|list| list.split(',').map(|s| s.trim().to_owned()).collect())
        .unwrap_or_default();
    if text.contains("An update is in progress") {
        names.insert("Progressing".to_owned());
    }
    if text
        .lines()
        .any(|l| l.starts_with("Failing=") && !l.starts_with("Failing=False"))
    {
        names.insert("Failing".to_owned());
    }
    if text.contains("recommended/Alert=Unknown") && text.contains("Reason: NoTestData") {
        names.insert("AlertNoTestData".to_owned());
    }
    if text.contains(&format!("Update to {version} Recommended=False")) {
        names.insert("ConditionalUpdateRisk".to_owned());
    }
    let refused = text.lines().any(|l| {
        (l.starts_with("error: no updates to") || l.starts_with("error: no update to"))
            && l.contains("cannot display context")
    });
    OcVerdict { names, refused }
}

/// For each capture oc judged: the gate blocks on every issue oc names
/// (by the same name), accepting oc's names turns each of those into a
/// warning, and what still blocks is what the gate adds (listed here) or
/// oc's own refusal of a version it does not offer.
#[rstest]
#[case::longest_not_recommended(
    "4.12.16-longest-not-recommended",
    "4.12.51",
    // Nothing beyond oc: its ConditionalUpdateRisk is our
    // TargetRecommended, its AlertNoTestData our warning.
    &[]
)]
#[case::all_recommended_rollback(
    "4.14.1-all-recommended",
    "4.12.51",
    // Beyond oc, which said an update is in progress (our
    // ClusterVersionState, Progressing) and that no update to 4.12 is
    // offered (our TargetRecommended): a rollback across minors is not a
    // supported path.
    &["UpdatePath"]
)]
fn the_gate_blocks_on_every_issue_oc_names_until_accepted_by_ocs_names(
    #[case] name: &str,
    #[case] version: &str,
    #[case] beyond_oc: &[&str],
) {
    let oc = oc_verdict(name, version);
    assert!(!oc.names.is_empty(), "{name}: oc named nothing");
    let plain = report(name, version);
    for issue in &oc.names {
        if issue == "AlertNoTestData" {
            // oc had no alert data for its run; neither have we, and say so
            // as a warning rather than blocking.
            for check in ["CriticalAlertsFiring", "PrecheckAlertsFiring"] {
                let r = plain.results.iter().find(|r| r.name == check).unwrap();
                assert_eq!((r.outcome, r.severity), (Outcome::Fail, Severity::Warning));
                assert!(r.message.starts_with("no alert data"), "{}", r.message);
            }
            continue;
        }
        let carrying: Vec<&str> = plain
            .results
            .iter()
            .filter(|r| r.risks.contains(issue))
            .map(|r| r.name.as_str())
            .collect();
        assert!(
            !carrying.is_empty(),
            "{name}: oc names {issue}; no finding of ours carries it"
        );
        for check in &carrying {
            assert!(
                blocking_failures(&plain).contains(*check),
                "{name}: our {check} carries {issue} but does not block"
            );
        }
    }
    if oc.refused {
        let r = plain
            .results
            .iter()
            .find(|r| r.name == "TargetRecommended")
            .unwrap();
        assert!(blocking_failures(&plain).contains("TargetRecommended"));
        assert!(
            r.risks
                .iter()
                .all(|n| preflight_gate::model::risks::is_gate_mark(n)),
            "no OpenShift name accepts an unknown version: {r:?}"
        );
    }

    let accepted = report_accepting(name, version, &oc.names);
    for r in accepted
        .results
        .iter()
        .filter(|r| r.risks.iter().any(|n| oc.names.contains(n)))
    {
        assert!(
            !blocking_failures(&accepted).contains(&r.name),
            "{name}: {} still blocks with oc's names accepted",
            r.name
        );
    }
    let mut expected: BTreeSet<String> = beyond_oc.iter().map(|s| s.to_string()).collect();
    if oc.refused {
        expected.insert("TargetRecommended".to_owned());
    }
    assert_eq!(
        blocking_failures(&accepted),
        expected,
        "{name}: what still blocks with oc's names {:?} accepted",
        oc.names
    );
}

/// A version the cluster cannot resolve to an image is refused by the
/// cluster itself (oc: "no update to 4.12.51"): accepting the check by its
/// name, with oc's names, leaves it blocking, and the summary says it
/// cannot be accepted.
#[test]
fn an_unresolvable_version_cannot_be_accepted_away() {
    let (name, version) = ("4.14.1-all-recommended", "4.12.51");
    assert!(oc_verdict(name, version).refused);
    let mut accepted = oc_verdict(name, version).names;
    accepted.insert("TargetRecommended".to_owned());
    let report = report_accepting(name, version, &accepted);
    assert!(
        blocking_failures(&report).contains("TargetRecommended"),
        "{}",
        report.summary_line()
    );
    assert!(!report.accepted.contains(&"TargetRecommended".to_owned()));
    assert_eq!(report.exit_code(), 3);
    let line = report.summary_line();
    assert!(
        line.contains("TargetRecommended cannot be accepted: its message says how"),
        "{line}"
    );
    // The gate's mark is not shown as one of OpenShift's names.
    let table = report.render(Format::Table, false);
    assert!(!table.contains("UnresolvableTarget"), "{table}");
}

#[test]
fn the_risks_oc_names_are_in_our_message() {
    let report = report("4.12.16-longest-not-recommended", "4.12.51");
    let r = report
        .results
        .iter()
        .find(|r| r.name == "TargetRecommended")
        .unwrap();
    for risk in [
        "HighNodeStatusReportFrequency",
        "RHELKernelHighLoadIOWait",
        "https://issues.redhat.com/browse/MCO-1094",
        "MultipleReasons",
    ] {
        assert!(r.message.contains(risk), "{}", r.message);
    }
    // The AMD risk's PromQL did not match, and oc does not name it either.
    assert!(!r.message.contains("AMD19hFirmware"), "{}", r.message);
}

#[test]
fn no_alert_data_is_a_warning_not_a_pass() {
    let report = report("4.12.16-longest-not-recommended", "4.12.51");
    let r = report
        .results
        .iter()
        .find(|r| r.name == "CriticalAlertsFiring")
        .unwrap();
    assert_eq!(
        (r.outcome, r.severity),
        (Outcome::Fail, Severity::Warning),
        "{}",
        r.message
    );
}

/// The release a capture's ClusterVersion runs or is updating to.
fn desired(name: &str) -> String {
    let view = snapshot::load(&capture(name)).unwrap();
    view.cluster_version.unwrap().status.desired.version
}

/// Verdicts, third pass: a request that changes nothing is no update.
/// Asking for the release the cluster runs, or for the update already
/// under way, is "no change" (exit 0, verdict `NoChange`): what fails is
/// shown as the cluster's own warning. Before, such a request was blocked
/// on the cluster's own problems, with a plan of a whole update. Nothing
/// is planned when nothing is left; when pools still roll (the CI
/// cluster: its control plane done, 37 of its 59 workers not yet on their
/// pool's target), the plan is of those nodes alone.
#[rstest]
#[case::the_release_it_runs("not-upgrading", "the cluster already runs", None)]
#[case::the_update_under_way("4.15.0-ec2-unavailable-mco-20m", "is already under way", None)]
#[case::the_control_plane_done_and_the_pools_rolling(
    "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining",
    "the cluster already runs",
    Some(37)
)]
fn a_target_that_changes_nothing_is_no_change_planning_only_what_is_left(
    #[case] name: &str,
    #[case] says: &str,
    #[case] left: Option<usize>,
) {
    let to = desired(name);
    let report = report(name, &to);
    assert_eq!(report.exit_code(), 0, "{}", report.summary_line());
    let planned = report.plan.as_ref().map(|p| {
        p.pools
            .iter()
            .flat_map(|p| &p.batches)
            .map(|b| b.nodes.len())
            .sum::<usize>()
    });
    assert_eq!(planned, left);
    assert_eq!(report.summary.failing, 0);
    let line = report.summary_line();
    assert!(line.contains("No change: "), "{line}");
    assert!(line.contains(says), "{line}");
    let json: serde_json::Value =
        serde_json::from_str(&report.render(Format::Json, false)).unwrap();
    assert_eq!(json["verdict"], "NoChange");
    assert_eq!(json.get("plan").is_some(), left.is_some());
    let table = report.render(Format::Table, false);
    assert!(
        table.lines().next().unwrap().ends_with(": no change"),
        "{table}"
    );
    assert_eq!(table.contains("Plan:"), left.is_some(), "{table}");
    if left.is_some() {
        assert!(
            line.contains("what is left of it, the nodes still to roll, is planned"),
            "{line}"
        );
        assert_eq!(report.plan.as_ref().unwrap().control_plane.origin, "done");
    }
}

#[test]
fn the_update_under_way_is_still_judged_for_any_other_target() {
    let name = "4.16.0-ec2-control-plane-updated-pdb-prohibits-draining";
    let report = report(name, "4.16.0-ec.4");
    assert!(report.plan.is_some());
    assert_ne!(desired(name), "4.16.0-ec.4");
    assert!(!report.summary_line().contains("No change"));
}

/// The `not-upgrading` capture (4.14.1, at rest), its ClusterVersion
/// edited as the CVO writes it once `oc adm upgrade --to-multi-arch` is
/// taken up: the migration's payload `Partial` in the history, desired and
/// accepted as Multi, 47% done. `asked`: asked for only; `done`: the
/// migration completed.
fn migrating_capture(stage: &str) -> (tempfile::TempDir, String, String) {
    let source = capture("not-upgrading");
    let dir = tempfile::tempdir().unwrap();
    for file in ["co.yaml", "mcp.yaml", "node.yaml"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    let mut cv: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(source.join("cv.yaml")).unwrap()).unwrap();
    let single = cv["status"]["desired"]["image"]
        .as_str()
        .unwrap()
        .to_owned();
    let multi = "registry.build05.ci.openshift.org/ci-ln-b1s4wtb/release@sha256:8f3c1d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c".to_owned();
    cv["spec"]["desiredUpdate"] =
        serde_json::json!({"version": "4.14.1", "architecture": "Multi", "force": false});
    if stage != "asked" {
        let status = &mut cv["status"];
        status["desired"]["image"] = multi.clone().into();
        status["desired"]["architecture"] = "Multi".into();
        let mut partial = status["history"][0].clone();
        partial["state"] = "Partial".into();
        partial["image"] = multi.clone().into();
        partial["startedTime"] = "2023-11-02T14:00:00Z".into();
        partial["completionTime"] = serde_json::Value::Null;
        if stage == "done" {
            partial["state"] = "Completed".into();
            partial["completionTime"] = "2023-11-02T15:00:00Z".into();
        }
        status["history"].as_array_mut().unwrap().insert(0, partial);
        for c in status["conditions"].as_array_mut().unwrap() {
            match c["type"].as_str().unwrap() {
                "ReleaseAccepted" => {
                    c["message"] = format!(
                        "Payload loaded version=\"4.14.1\" image=\"{multi}\" architecture=\"Multi\""
                    )
                    .into();
                }
                "Progressing" if stage != "done" => {
                    c["status"] = "True".into();
                    c["message"] = "Working towards 4.14.1: 412 of 863 done (47% complete)".into();
                    c["lastTransitionTime"] = "2023-11-02T14:00:00Z".into();
                }
                _ => {}
            }
        }
    }
    std::fs::write(dir.path().join("cv.json"), cv.to_string()).unwrap();
    (dir, single, multi)
}

fn report_of(dir: &Path, to: &str) -> Report {
    let view = snapshot::load(dir).unwrap();
    let target = view.target(to);
    let (view, now) = (Arc::new(view), NOW.parse::<Timestamp>().unwrap());
    let results = suite::run_accepting(
        view.clone(),
        &target,
        now,
        &BTreeSet::new(),
        Limits::default(),
    );
    Report::new(
        &Context::new(&view, &target, now),
        results,
        &Exemptions::default(),
    )
}

/// Verdicts, third pass: a migration to multi-architecture is tracked.
/// Asking for its own payload again (by version or by digest) is the
/// migration, with how far it got, never "the release it runs"; moving to
/// a single-architecture payload abandons it and is blocked.
#[test]
fn a_migration_to_multi_architecture_is_tracked_and_never_abandoned() {
    let (dir, single, multi) = migrating_capture("taken");
    for to in ["4.14.1", multi.as_str()] {
        let report = report_of(dir.path(), to);
        assert_eq!(
            report.clearance(),
            preflight_gate::report::Clearance::Migrating
        );
        assert_eq!(report.exit_code(), 0);
        assert!(report.plan.is_none(), "nothing is planned");
        let line = report.summary_line();
        assert!(
            line.contains("Migration: the cluster is migrating to multi-architecture, 47% done; asking for its payload again changes nothing"),
            "{line}"
        );
        let table = report.render(Format::Table, false);
        assert!(
            table
                .lines()
                .next()
                .unwrap()
                .ends_with(", migrating to multi-architecture, 47% done: no change"),
            "{table}"
        );
        assert!(!table.contains("the release it runs"), "{table}");
        let json: serde_json::Value =
            serde_json::from_str(&report.render(Format::Json, false)).unwrap();
        assert_eq!(json["verdict"], "Migrating");
        assert_eq!(
            json["migration"],
            "migrating to multi-architecture, 47% done"
        );
    }
    let arch_tag = "registry.build05.ci.openshift.org/ci-ln-b1s4wtb/release:4.14.1-x86_64";
    for to in [arch_tag, single.as_str()] {
        let report = report_of(dir.path(), to);
        assert_eq!(
            report.clearance(),
            preflight_gate::report::Clearance::Blocked,
            "{to}"
        );
        let state = report
            .results
            .iter()
            .find(|r| r.name == "ClusterVersionState")
            .unwrap();
        assert_eq!(state.outcome, Outcome::Fail);
        assert!(
            state.message.starts_with(
                "the cluster is migrating to multi-architecture (4.14.1, 47% done), and "
            ) && state.message.contains("it abandons the migration"),
            "{}",
            state.message
        );
        let table = report.render(Format::Table, false);
        assert!(
            table
                .lines()
                .next()
                .unwrap()
                .ends_with(", which abandons the migration to multi-architecture under way"),
            "{table}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&report.render(Format::Json, false)).unwrap();
        assert_eq!(json["verdict"], "Blocked");
    }
}

/// Asked for and not yet taken up by the CVO, the migration is still the
/// migration, not the release the cluster runs; once complete, asking for
/// its payload is plain no change.
#[test]
fn a_migration_asked_for_is_a_migration_and_one_done_is_no_change() {
    let (asked, _, _) = migrating_capture("asked");
    let report = report_of(asked.path(), "4.14.1");
    assert_eq!(
        report.clearance(),
        preflight_gate::report::Clearance::Migrating
    );
    assert!(
        report
            .summary_line()
            .contains("migrating to multi-architecture, asked for, not yet taken up by the CVO"),
        "{}",
        report.summary_line()
    );
    let (done, _, multi) = migrating_capture("done");
    for to in ["4.14.1", multi.as_str()] {
        let report = report_of(done.path(), to);
        assert_eq!(
            report.clearance(),
            preflight_gate::report::Clearance::NoChange
        );
        assert!(report.migration.is_none());
        assert!(
            report.summary_line().contains("the cluster already runs"),
            "{}",
            report.summary_line()
        );
    }
}
