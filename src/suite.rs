//! The one suite runner. The controller, the offline snapshot source and
//! `preflight-gate check` all run the built-in catalogue through [`run`]:
//! each check on a thread of its own, with its own time limit, and all of
//! them within one budget. A check that hangs or panics becomes an errored
//! result; the run goes on and always returns one result per selected check.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::checks::{self, Check, Context};
use crate::model::release::Version;
use crate::model::{CheckResult, Outcome, Severity, Target};
use crate::view::ClusterView;

/// How long checks may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One check.
    pub per_check: Duration,
    /// The whole suite: a check not started when it is spent is not run.
    pub budget: Duration,
}

impl Default for Limits {
    /// The controller's defaults (`--check-timeout`, `--run-timeout`).
    fn default() -> Self {
        Self {
            per_check: Duration::from_secs(60),
            budget: Duration::from_secs(300),
        }
    }
}

/// Runs the catalogue's checks named in `selection` (all when `None`) over
/// `view` for `target`, with nothing accepted; `clock` is the time to judge
/// by when the data carries none of its own. A run whose results are kept
/// (the controller's, the snapshot source's) accepts nothing: what a review
/// accepts is the policy's to weigh when it reads them.
pub fn run(
    view: Arc<ClusterView>,
    target: &Target,
    clock: Timestamp,
    selection: Option<&[String]>,
    limits: Limits,
) -> Vec<CheckResult> {
    let accepted = Arc::new(BTreeSet::new());
    run_these(
        checks::catalogue(),
        view,
        target,
        clock,
        accepted,
        selection,
        limits,
    )
}

/// The suite of a hosted cluster's update: the catalogue over the hosted
/// cluster as its admin kubeconfig reads it (`guest`), then HyperShift's
/// checks from the management cluster ([`checks::hosted`]). For the
/// control plane's update (`pool` None), the whole catalogue; for a
/// NodePool's, the catalogue's checks of the workers it drains
/// ([`NODEPOOL_CHECKS`]) and HyperShift's of that pool
/// ([`checks::hosted::nodepool_checks`]). A hosted cluster that could not
/// be read is one Error ([`checks::hosted::REACHABLE`]) and none of its own
/// checks, never a pass for want of data.
pub fn run_hosted(
    hosted: &checks::hosted::Hosted,
    pool: Option<&crate::model::hosted::NodePool>,
    guest: Result<Arc<ClusterView>, String>,
    target: &Target,
    clock: Timestamp,
    limits: Limits,
) -> Vec<CheckResult> {
    let version = target.version.as_deref().and_then(Version::parse);
    let mut results = vec![checks::hosted::reachable(
        guest.as_ref().map(|_| ()).map_err(String::as_str),
        hosted.cluster,
    )];
    let selection = pool.map(|_| NODEPOOL_CHECKS.map(str::to_owned));
    if let Ok(view) = guest {
        results.extend(run(
            view,
            target,
            clock,
            selection.as_ref().map(|s| &s[..]),
            limits,
        ));
    }
    results.extend(match pool {
        None => checks::hosted::checks(hosted, version.as_ref()),
        Some(pool) => checks::hosted::nodepool_checks(hosted, pool, version.as_ref()),
    });
    results
}

/// The catalogue's checks of what a NodePool's update does to the hosted
/// cluster: its nodes drained, its workloads moved.
pub const NODEPOOL_CHECKS: [&str; 6] = [
    "NodesReady",
    "PodDisruptionBudgetsAllowDrain",
    "DrainCapacity",
    "DrainsComplete",
    "ClusterOperatorsHealthy",
    "CriticalAlertsFiring",
];

/// [`run`] of every check for one update whose accepted names are known
/// (`check --accept`): a check may judge by them, as TargetRecommended
/// passes a conditional update whose every applying risk is accepted.
pub fn run_accepting(
    view: Arc<ClusterView>,
    target: &Target,
    clock: Timestamp,
    accepted: &BTreeSet<String>,
    limits: Limits,
) -> Vec<CheckResult> {
    let accepted = Arc::new(accepted.clone());
    run_these(
        checks::catalogue(),
        view,
        target,
        clock,
        accepted,
        None,
        limits,
    )
}

/// [`run`] over a catalogue of the caller's.
pub(crate) fn run_these(
    catalogue: Vec<Box<dyn Check>>,
    view: Arc<ClusterView>,
    target: &Target,
    clock: Timestamp,
    accepted: Arc<BTreeSet<String>>,
    selection: Option<&[String]>,
    limits: Limits,
) -> Vec<CheckResult> {
    let started = Instant::now();
    let selected = catalogue
        .into_iter()
        .filter(|c| selection.is_none_or(|s| s.iter().any(|name| name == c.name())));
    let mut results = Vec::new();
    for check in selected {
        let (name, severity) = (check.name(), check.severity());
        let left = limits.budget.saturating_sub(started.elapsed());
        if left.is_zero() {
            results.push(errored(
                name,
                severity,
                format!(
                    "not run: the run's budget of {} was spent",
                    humantime::format_duration(limits.budget)
                ),
                Duration::ZERO,
            ));
            continue;
        }
        let (limit, late) = if limits.per_check <= left {
            (
                limits.per_check,
                format!(
                    "the check did not finish within {}",
                    humantime::format_duration(limits.per_check)
                ),
            )
        } else {
            (
                left,
                format!(
                    "the check did not finish before the run's budget of {} was spent",
                    humantime::format_duration(limits.budget)
                ),
            )
        };
        results.push(run_one(
            check,
            (view.clone(), target.clone(), clock, accepted.clone()),
            limit,
            late,
        ));
    }
    results
}

/// One check on a thread of its own, waited for at most `limit`; `late`
/// is the message when it does not finish. Such a thread is left to end by
/// itself: its result is dropped.
fn run_one(
    check: Box<dyn Check>,
    (view, target, clock, accepted): (Arc<ClusterView>, Target, Timestamp, Arc<BTreeSet<String>>),
    limit: Duration,
    late: String,
) -> CheckResult {
    let (name, severity) = (check.name(), check.severity());
    let (tx, rx) = mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name(format!("check {name}"))
        .spawn(move || {
            let started = Instant::now();
            let ctx = Context::new(&view, &target, clock).accepting(&accepted);
            let mut result = checks::result_of(check.as_ref(), &ctx);
            result.duration = Some(format!("{:.3}s", started.elapsed().as_secs_f64()));
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return errored(
            name,
            severity,
            format!("cannot start the check: {e}"),
            Duration::ZERO,
        );
    }
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => errored(name, severity, late, limit),
        Err(RecvTimeoutError::Disconnected) => errored(
            name,
            severity,
            "the check failed unexpectedly; see the gate's log".to_owned(),
            Duration::ZERO,
        ),
    }
}

fn errored(name: &str, severity: Severity, message: String, took: Duration) -> CheckResult {
    CheckResult {
        duration: Some(format!("{:.3}s", took.as_secs_f64())),
        ..CheckResult::new(name, severity, Outcome::Error, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Finding;

    struct Sleeps(&'static str, Duration);
    impl Check for Sleeps {
        fn name(&self) -> &'static str {
            self.0
        }
        fn severity(&self) -> Severity {
            Severity::Blocking
        }
        fn evaluate(&self, _: &Context) -> Finding {
            std::thread::sleep(self.1);
            Finding::pass("done")
        }
    }

    /// A hanging check and a quick one, under these limits.
    fn hang_then_quick(per_check: Duration, budget: Duration) -> Vec<CheckResult> {
        suite(
            vec![
                Box::new(Sleeps("Hangs", Duration::from_secs(3600))),
                Box::new(Sleeps("Quick", Duration::ZERO)),
            ],
            Limits { per_check, budget },
        )
    }

    fn suite(checks: Vec<Box<dyn Check>>, limits: Limits) -> Vec<CheckResult> {
        let target = Target::image("q@sha256:aa", Some("4.16.1".into()));
        let clock = "2026-11-30T12:00:00Z".parse().unwrap();
        run_these(
            checks,
            Arc::new(ClusterView::default()),
            &target,
            clock,
            Arc::new(BTreeSet::new()),
            None,
            limits,
        )
    }

    #[test]
    fn a_check_that_hangs_errors_and_the_run_goes_on() {
        let results = hang_then_quick(Duration::from_millis(100), Duration::from_secs(10));
        assert_eq!(results[0].outcome, Outcome::Error);
        assert_eq!(results[0].message, "the check did not finish within 100ms");
        assert_eq!(results[1].outcome, Outcome::Pass);
    }

    #[test]
    fn checks_past_the_budget_are_not_run_and_say_so() {
        let results = hang_then_quick(Duration::from_secs(10), Duration::from_millis(150));
        // The first gets what is left of the budget, the second nothing.
        assert_eq!(
            results[0].message,
            "the check did not finish before the run's budget of 150ms was spent"
        );
        assert_eq!(results[1].outcome, Outcome::Error);
        assert!(
            results[1].message.starts_with("not run: the run's budget"),
            "{}",
            results[1].message
        );
    }

    #[test]
    fn a_selection_runs_only_the_checks_it_names() {
        let selection = ["UpdatePath".to_owned()];
        let results = run(
            Arc::new(ClusterView::default()),
            &Target::image("q@sha256:aa", None),
            "2026-11-30T12:00:00Z".parse().unwrap(),
            Some(&selection),
            Limits::default(),
        );
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].name, "UpdatePath");
    }
}
