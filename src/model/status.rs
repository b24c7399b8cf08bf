//! A finished run's results assembled into an `UpdatePreflight` status: the
//! phase, the summary and the `Passed` condition, all from the one
//! blocking rule ([`crate::model::standing`]).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::results::{CheckResult, Phase, UpdatePreflightStatus};
use super::standing::Exemptions;

/// How soon a run that errored, or has a check that errored, is run again:
/// an error is most often a passing glitch (a drained extraction pod, a
/// querier restarting), and waiting for the next refresh would block every
/// update on it for half an hour. The controller keeps to it and the
/// denial of an errored run says it.
pub const ERRORED_RERUN: std::time::Duration = std::time::Duration::from_secs(120);

/// Whether the last run errored, as a whole or in one of its checks.
pub fn errored(status: &UpdatePreflightStatus) -> bool {
    status.phase == Some(Phase::Error)
        || status
            .results
            .iter()
            .any(|r| r.outcome == super::Outcome::Error)
}

/// How long results stay good: the refresh interval (zero: until something
/// changes), or at most [`ERRORED_RERUN`] when the last run errored.
pub fn good_for(
    status: &UpdatePreflightStatus,
    refresh: std::time::Duration,
) -> std::time::Duration {
    match (errored(status), refresh.is_zero()) {
        (false, _) => refresh,
        (true, true) => ERRORED_RERUN,
        (true, false) => refresh.min(ERRORED_RERUN),
    }
}

/// How a finished suite concludes: its phase, the condition's reason and
/// its message.
pub fn conclusion(
    results: &[CheckResult],
    exemptions: &Exemptions,
) -> (Phase, &'static str, String) {
    let summary = exemptions.summarize(results);
    match summary.failing {
        0 => (
            Phase::Passed,
            "NoBlockingFailures",
            match summary.passed {
                1 => "1 check passed".to_owned(),
                n => format!("{n} checks passed"),
            },
        ),
        n => (
            Phase::Failed,
            "BlockingChecksFailed",
            format!("{n} blocking check{} failed", if n == 1 { "" } else { "s" }),
        ),
    }
}

/// How a run ended, for [`complete`].
pub struct Ending<'a> {
    pub phase: Phase,
    pub reason: &'a str,
    pub message: String,
    /// The spec generation the run was for.
    pub generation: Option<i64>,
    /// When it ended.
    pub at: Timestamp,
}

/// Records a finished run in `status`: phase, results (stamped with the
/// exemptions's fail-open checks), summary, the Passed condition, completion
/// time and observed generation.
pub fn complete(
    status: &mut UpdatePreflightStatus,
    mut results: Vec<CheckResult>,
    exemptions: &Exemptions,
    ending: Ending,
) {
    exemptions.stamp(&mut results);
    let now = Time(ending.at);
    status.phase = Some(ending.phase);
    status.summary = Some(exemptions.summarize(&results));
    status.results = results;
    status.completion_time = Some(now.clone());
    status.observed_generation = ending.generation;
    status.conditions = vec![Condition {
        type_: "Passed".into(),
        status: if ending.phase == Phase::Passed {
            "True"
        } else {
            "False"
        }
        .into(),
        reason: ending.reason.into(),
        message: ending.message,
        last_transition_time: now,
        observed_generation: ending.generation,
    }];
}
