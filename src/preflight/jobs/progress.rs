//! Reading how a check ended, pure: [`parse_result`] (exit code and
//! termination message, by the protocol) and [`progress_of`] (a Job and its
//! pods to [`Progress`]: running, or a `Finding` for an answer, a pull
//! failure, a pod never scheduled, a deadline); [`result`] names the finding
//! after its check.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::Deserialize;

use super::manifest::CONTAINER;
use super::settings::JobSettings;
use crate::model::CheckResult;
use crate::model::Finding;
use crate::model::Outcome;
use crate::model::preflight_check::{DEFAULT_TIMEOUT_SECONDS, PreflightCheck};

/// The JSON form of a check's message.
#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    url: Option<String>,
}

/// Reads what a check's container said: its exit code and termination
/// message. Never fails: output that cannot be read is an Error saying so.
pub(super) fn parse_result(exit_code: i32, message: &str) -> Finding {
    let by_exit = match exit_code {
        0 => Outcome::Pass,
        1 => Outcome::Fail,
        _ => Outcome::Error,
    };
    let text = message.trim();
    let (said, message, url) = if text.starts_with('{') {
        match serde_json::from_str::<Answer>(text) {
            Ok(answer) => (
                answer.outcome,
                answer.message.unwrap_or_default(),
                answer.url,
            ),
            Err(e) => {
                return Finding::error(format!(
                    "malformed output: the termination message looks like JSON but is not {{outcome, message, url}} ({e}); it starts: {}",
                    crate::model::text::excerpt(Some(text), 120)
                ));
            }
        }
    } else {
        (None, text.to_owned(), None)
    };
    let url = match url.as_deref().map(crate::model::text::http_link) {
        None => None,
        Some(Ok(link)) => Some(link),
        Some(Err(why)) => {
            return Finding::error(format!(
                "malformed output: url {} is not an http(s) link: {why}",
                crate::model::text::escaped(url.as_deref().unwrap_or_default(), 120)
            ));
        }
    };
    let outcome = match said.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => by_exit,
        Some("pass") if by_exit == Outcome::Pass => Outcome::Pass,
        Some("skipped") if by_exit == Outcome::Pass => Outcome::Skipped,
        Some("fail") if by_exit == Outcome::Fail => Outcome::Fail,
        Some("error") if by_exit != Outcome::Pass => Outcome::Error,
        Some(other @ ("pass" | "skipped" | "fail" | "error")) => {
            return Finding::error(format!(
                "malformed output: the check exited with code {exit_code} but its message says {other:?}"
            ));
        }
        Some(other) => {
            return Finding::error(format!(
                "malformed output: unknown outcome {other:?} (expected Pass, Fail, Error or Skipped)"
            ));
        }
    };
    let message = match (outcome, message.is_empty()) {
        (Outcome::Error, true) if by_exit == Outcome::Error => {
            format!("the check exited with code {exit_code}")
        }
        (Outcome::Error, false) if by_exit == Outcome::Error && said.is_none() => {
            format!("the check exited with code {exit_code}: {message}")
        }
        (Outcome::Pass, true) => "passed".to_owned(),
        (Outcome::Fail, true) => "failed, without saying why".to_owned(),
        _ => message,
    };
    // Format characters (bidi overrides, zero-width ones) are dropped where
    // a check's words enter, whatever the printing does later.
    let finding = Finding {
        outcome,
        message: crate::model::text::strip_format(&message),
        url: None,
        severity: None,
        risks: Vec::new(),
        items: Vec::new(),
        subjects: Box::default(),
    };
    match url {
        Some(url) => finding.with_url(&url),
        None => finding,
    }
}

/// Whether a Job has ended, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Progress {
    Running,
    Done(Finding),
}

/// Waiting reasons of a container whose image cannot be pulled.
const PULL_FAILURES: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];
/// Waiting reasons of a container that cannot be started.
const START_FAILURES: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

pub(super) fn check_container(pod: &Pod) -> Option<&ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == CONTAINER)
}

fn seconds(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Tells from a Job and its pods whether the check has ended and what it
/// concluded. `now` is passed in, so that tests fix it.
pub(super) fn progress_of(
    job: &Job,
    pods: &[Pod],
    settings: &JobSettings,
    now: Timestamp,
) -> Progress {
    let image = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let deadline = job
        .spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .unwrap_or(i64::from(DEFAULT_TIMEOUT_SECONDS));
    let age_of = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or(Duration::ZERO, |t| now.duration_since(t.0).unsigned_abs())
    };

    // A container that ended says what the check concluded.
    for pod in pods {
        let Some(status) = check_container(pod) else {
            continue;
        };
        let state = status.state.as_ref();
        if let Some(done) = state.and_then(|s| s.terminated.as_ref()) {
            let mut finding = parse_result(done.exit_code, done.message.as_deref().unwrap_or(""));
            if done.reason.as_deref() == Some("OOMKilled") {
                finding.message = format!(
                    "the check ran out of memory (OOMKilled): {}",
                    finding.message
                );
            }
            return Progress::Done(finding);
        }
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.as_deref().unwrap_or("");
            let detail = waiting
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            if PULL_FAILURES.contains(&reason) {
                return Progress::Done(Finding::error(format!(
                    "cannot pull the check's image {image} ({reason}){detail}"
                )));
            }
            if START_FAILURES.contains(&reason) {
                return Progress::Done(Finding::error(format!(
                    "the check's container cannot start ({reason}){detail}"
                )));
            }
        }
    }

    // The Job controller's verdict, when no container told us more.
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let holds = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
    };
    if let Some(failed) = holds("Failed").or_else(|| holds("FailureTarget")) {
        let reason = failed.reason.as_deref().unwrap_or("");
        return Progress::Done(Finding::error(if reason == "DeadlineExceeded" {
            format!(
                "timed out: the check did not finish within its deadline of {deadline} s (DeadlineExceeded)"
            )
        } else {
            format!(
                "the Job failed ({reason}): {}",
                failed.message.as_deref().unwrap_or("no message")
            )
        }));
    }
    if holds("Complete").is_some() {
        return Progress::Done(Finding::error(
            "the Job completed, but its pod is gone: no result to read",
        ));
    }

    // A pod that never gets a node, or no pod at all.
    let job_age = age_of(job.metadata.creation_timestamp.as_ref());
    let unscheduled = pods.iter().find_map(|pod| {
        pod.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .map(|c| (pod, c))
    });
    if let Some((pod, condition)) = unscheduled
        && age_of(pod.metadata.creation_timestamp.as_ref()) >= settings.schedule_timeout
    {
        return Progress::Done(Finding::error(format!(
            "never scheduled: the check's pod found no node within {} ({}): {}",
            seconds(settings.schedule_timeout),
            condition.reason.as_deref().unwrap_or("Unschedulable"),
            condition.message.as_deref().unwrap_or("no message")
        )));
    }
    if pods.is_empty() && job_age >= settings.schedule_timeout {
        return Progress::Done(Finding::error(format!(
            "never scheduled: no pod was created for the Job within {}",
            seconds(settings.schedule_timeout)
        )));
    }
    // Past the deadline and then some, with nobody saying so: the Job
    // controller is not keeping up, or not running.
    let limit = Duration::from_secs(deadline.max(0).unsigned_abs()) + settings.schedule_timeout;
    if job_age >= limit {
        return Progress::Done(Finding::error(format!(
            "timed out: the check did not finish within its deadline of {deadline} s"
        )));
    }
    Progress::Running
}

pub(super) fn result(check: &PreflightCheck, finding: Finding, took: Duration) -> CheckResult {
    CheckResult {
        name: check.spec.check_name.clone(),
        severity: finding.severity.unwrap_or(check.spec.severity),
        outcome: finding.outcome,
        message: finding.message,
        risks: finding.risks,
        items: finding.items,
        subjects: finding.subjects.into_vec(),
        remediation_url: finding.url,
        duration: Some(format!("{:.3}s", took.as_secs_f64())),
        failure_policy: Some(check.spec.failure_policy),
    }
    .entered()
}
