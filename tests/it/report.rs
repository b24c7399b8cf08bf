//! The report over every real cluster capture (../shared/fixtures/real-clusters),
//! against golden files in tests/data/golden/, and our verdict against what
//! `oc adm upgrade recommend` said where its output sits beside a capture.
//! Run with `PREFLIGHT_GATE_BLESS=1` to rewrite the goldens.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use preflight_gate::checks::Context;
use preflight_gate::cluster::snapshot;
use preflight_gate::model::{Outcome, Severity};
use preflight_gate::report::{Format, Report};
use preflight_gate::suite::{self, Limits};
use rstest::rstest;
use std::sync::Arc;

const CAPTURES: &str = "../shared/fixtures/real-clusters";
const NOW: &str = "2026-11-30T12:00:00Z";

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(CAPTURES)
        .join(name)
}

fn report(name: &str, to: &str) -> Report {
    let view = snapshot::load(&capture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let target = view.target(to);
    let (view, now) = (Arc::new(view), NOW.parse::<Timestamp>().unwrap());
    let results = suite::run(view.clone(), &target, now, None, Limits::default());
    Report::new(
        &Context::new(&view, &target, now),
        results,
        &Default::default(),
    )
}

fn blocking_failures(report: &Report) -> BTreeSet<String> {
    report
        .results
        .iter()
        .filter(|r| {
            r.severity == Severity::Blocking && matches!(r.outcome, Outcome::Fail | Outcome::Error)
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
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/golden")
        .join(format!("{name}.txt"));
    if std::env::var_os("PREFLIGHT_GATE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &table).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with PREFLIGHT_GATE_BLESS=1", path.display()));
    assert!(
        golden == table,
        "{name}: the report changed; run with PREFLIGHT_GATE_BLESS=1 and review the diff\n{table}"
    );
}

/// What `oc adm upgrade recommend` named for a capture.
struct OcVerdict {
    /// The issue names of its `error: issues that apply ...` line.
    issues: BTreeSet<String>,
    /// Whether it said an update is in progress.
    update_in_progress: bool,
}

fn oc_verdict(name: &str, version: &str) -> OcVerdict {
    let path = capture(name).join(format!("oc-recommend.version-{version}-output"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut issues: BTreeSet<String> = text
        .lines()
        .find_map(|l| l.strip_prefix("error: issues that apply to this cluster but which were not included in --accept: "))
        .map(|list| list.split(',').map(|s| s.trim().to_owned()).collect())
        .unwrap_or_default();
    // oc refuses a version the update graph does not offer.
    if text
        .lines()
        .any(|l| l.starts_with("error: no updates to ") && l.contains("cannot display context"))
    {
        issues.insert("NotOffered".to_owned());
    }
    OcVerdict {
        issues,
        update_in_progress: text.contains("An update is in progress"),
    }
}

/// Which of our checks covers an issue oc names; `None` where oc had no
/// data to judge (its `NoTestData` alert issue), which the comparison
/// leaves out.
fn our_check_for(oc_issue: &str) -> Option<&'static str> {
    match oc_issue {
        "AlertNoTestData" => None,
        "ConditionalUpdateRisk" => Some("TargetRecommended"),
        "Failing" => Some("ClusterVersionState"),
        "NotOffered" => Some("TargetRecommended"),
        other => panic!("oc names {other}, which this test does not know; map it to a check"),
    }
}

#[rstest]
#[case::longest_not_recommended(
    "4.12.16-longest-not-recommended",
    "4.12.51",
    // Beyond oc: no alert data is our warning, not a blocking failure, so nothing else blocks.
    &[]
)]
#[case::all_recommended_rollback(
    "4.14.1-all-recommended",
    "4.12.51",
    // Beyond oc, which said an update is in progress and that no update to
    // 4.12 is offered (our TargetRecommended): a rollback across minors is
    // not a supported path.
    &["UpdatePath"]
)]
fn our_blocking_reasons_include_everything_oc_names(
    #[case] name: &str,
    #[case] version: &str,
    #[case] beyond_oc: &[&str],
) {
    let oc = oc_verdict(name, version);
    let report = report(name, version);
    let ours = blocking_failures(&report);
    let mut covered = BTreeSet::new();
    for issue in &oc.issues {
        if let Some(check) = our_check_for(issue) {
            assert!(
                ours.contains(check),
                "{name}: oc names {issue}; our {check} does not fail: {ours:?}"
            );
            covered.insert(check.to_owned());
        }
    }
    if oc.update_in_progress {
        assert!(
            ours.contains("ClusterVersionState"),
            "{name}: oc says an update is in progress"
        );
        covered.insert("ClusterVersionState".to_owned());
    }
    let beyond: BTreeSet<String> = ours.difference(&covered).cloned().collect();
    let expected: BTreeSet<String> = beyond_oc.iter().map(|s| s.to_string()).collect();
    assert_eq!(beyond, expected, "{name}: what we find beyond oc changed");
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
