//! External checks, run as Jobs: `PreflightCheck`s that administrators and
//! vendors declare. The pure parts are the Job manifest ([`job_manifest`]),
//! reading a check's answer ([`parse_result`]) and telling from a Job and
//! its pods whether and how it ended ([`classify`]); [`run_external`] does
//! the API calls around them for one run.
//!
//! Protocol: exit 0 is a pass, 1 a fail, anything else an error. The message
//! is the container's termination message, plain text or JSON
//! `{"outcome": ..., "message": ..., "url": ...}`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use serde::Deserialize;
use serde_json::json;
use tracing::{Instrument, info, info_span, warn};

use super::release_checks::{Cache, discover};
use crate::model::CheckResult;
use crate::model::Finding;
use crate::model::Outcome;
use crate::model::UpdatePreflight;
use crate::model::preflight_check::{DEFAULT_TIMEOUT_SECONDS, NotApplicable, PreflightCheck};
use crate::model::release::{UpdateKind, Version};

/// The name of the check's container in the Job's pod.
pub const CONTAINER: &str = "check";
/// Label on Jobs and pods: the UID of the `UpdatePreflight` the run is for.
pub const OWNER_UID: &str = "preflight.dev/update-preflight-uid";
/// Label on Jobs and pods: the result name of the check.
pub const CHECK: &str = "preflight.dev/check";
/// Label on Jobs and pods: the `PreflightCheck` object.
pub const PREFLIGHT_CHECK: &str = "preflight.dev/preflight-check";
/// Annotation on Jobs: the name of the `UpdatePreflight` (names may be longer
/// than a label value).
pub const OWNER_NAME: &str = "preflight.dev/update-preflight";
/// The result name when the target release's declared checks cannot be listed.
pub const RELEASE_DISCOVERY: &str = "ReleaseDeclaredChecks";
/// The label the Job controller puts on a Job's pods.
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";

/// Where and how check Jobs run.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSettings {
    /// Namespace of the Jobs; never an operator's, so net-new operators are covered.
    pub namespace: String,
    /// ServiceAccount of the check pods, bound to a read-only ClusterRole.
    pub service_account: String,
    /// How long a pod may stay unscheduled (or a Job without a pod) before
    /// the check is an Error.
    pub schedule_timeout: Duration,
    /// Finished Jobs are deleted by the Job controller after this.
    pub ttl_after_finished: Duration,
    /// How often a running Job is looked at.
    pub poll: Duration,
    /// Run the checks the target release declares (an extraction pod per
    /// release digest). Off in `Default`, which tests and benchmarks use;
    /// the `serve` flag turns it on.
    pub release_checks: bool,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            namespace: "preflight-gate".into(),
            service_account: "preflight-check".into(),
            schedule_timeout: Duration::from_secs(120),
            ttl_after_finished: Duration::from_secs(3600),
            poll: Duration::from_secs(1),
            release_checks: false,
        }
    }
}

/// The update a run is for, as a check's environment tells it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    pub target_image: String,
    pub target_version: Option<Version>,
    pub current_image: String,
    pub current_version: Option<Version>,
}

impl Update {
    pub fn kind(&self) -> Option<UpdateKind> {
        match (&self.current_version, &self.target_version) {
            (Some(c), Some(t)) => Some(UpdateKind::between(c, t)),
            _ => None,
        }
    }
}

/// What a check's spec turns into before anything is created: the image to
/// run, or a result without running (skipped, or a spec that cannot run).
/// `images` are the target release's `image-references`, when known.
pub fn plan(
    check: &PreflightCheck,
    update: &Update,
    images: Option<&BTreeMap<String, String>>,
) -> Result<String, Finding> {
    let spec = &check.spec;
    match spec
        .applies_to
        .check(update.target_version.as_ref(), update.kind())
    {
        Ok(()) => {}
        Err(NotApplicable::BadRange(why)) => return Err(Finding::error(why)),
        Err(why) => return Err(Finding::skipped(why.to_string())),
    }
    match (&spec.image, &spec.from_release) {
        (Some(image), None) if !image.trim().is_empty() => Ok(image.trim().to_owned()),
        (None, Some(component)) => match images {
            Some(images) => images.get(component.trim()).cloned().ok_or_else(|| {
                Finding::error(format!(
                    "fromRelease {component:?}: the target release has no such component in its image-references"
                ))
            }),
            None => Err(Finding::error(format!(
                "fromRelease {component:?}: the target release's image-references are not known (release checks are off, or its extraction failed)"
            ))),
        },
        _ => Err(Finding::error(
            "the PreflightCheck must give exactly one of image and fromRelease",
        )),
    }
}

/// A label value, if the text is one (63 characters of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends).
fn label_value(text: &str) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= 63
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric());
    ok.then(|| text.to_owned())
}

/// `generateName` of a check's Job: `pfc-<check>-`, a DNS label prefix.
fn generate_name(check_name: &str) -> String {
    let mut name = String::from("pfc-");
    for c in check_name.chars().flat_map(char::to_lowercase) {
        if name.len() >= 40 {
            break;
        }
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && name.ends_with('-')) {
            name.push(c);
        }
    }
    format!("{}-", name.trim_end_matches('-'))
}

/// The Job that runs `check` from `image` for the run of `owner`.
pub fn job_manifest(
    check: &PreflightCheck,
    image: &str,
    owner: &UpdatePreflight,
    update: &Update,
    settings: &JobSettings,
) -> Result<Job, serde_json::Error> {
    let spec = &check.spec;
    let timeout = spec.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let mut labels = BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_owned(),
        "preflight-gate".to_owned(),
    )]);
    if let Some(uid) = owner.meta().uid.as_deref().and_then(label_value) {
        labels.insert(OWNER_UID.into(), uid);
    }
    if let Some(name) = label_value(&spec.check_name) {
        labels.insert(CHECK.into(), name);
    }
    if let Some(name) = label_value(&check.name_any()) {
        labels.insert(PREFLIGHT_CHECK.into(), name);
    }
    let version = |v: &Option<Version>| v.as_ref().map(Version::to_string).unwrap_or_default();
    let ours = [
        ("TARGET_VERSION", version(&update.target_version)),
        ("TARGET_IMAGE", update.target_image.clone()),
        ("CURRENT_VERSION", version(&update.current_version)),
        ("CURRENT_IMAGE", update.current_image.clone()),
    ];
    let env: Vec<serde_json::Value> = spec
        .env
        .iter()
        .filter(|e| !ours.iter().any(|(name, _)| *name == e.name))
        .map(|e| json!({"name": e.name, "value": e.value}))
        .chain(
            ours.iter()
                .map(|(name, value)| json!({"name": name, "value": value})),
        )
        .collect();
    let owner_ref = owner.controller_owner_ref(&()).map(|mut r| {
        // The Job must not hold up the deletion of its UpdatePreflight.
        r.block_owner_deletion = Some(false);
        r
    });
    let mut container = json!({
        "name": CONTAINER,
        "image": image,
        "env": env,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "64Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    });
    if !spec.command.is_empty() {
        container["command"] = json!(spec.command);
    }
    if !spec.args.is_empty() {
        container["args"] = json!(spec.args);
    }
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": generate_name(&spec.check_name),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {OWNER_NAME: owner.name_any()},
            "ownerReferences": owner_ref.into_iter().collect::<Vec<_>>(),
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": timeout,
            "ttlSecondsAfterFinished": settings.ttl_after_finished.as_secs(),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": settings.service_account,
                    "restartPolicy": "Never",
                    "securityContext": {
                        "runAsNonRoot": true,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }))
}

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
pub fn parse_result(exit_code: i32, message: &str) -> Finding {
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
    if let Some(url) = &url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return Finding::error(format!(
            "malformed output: url {url:?} is not an http(s) link"
        ));
    }
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
    let finding = Finding {
        outcome,
        message,
        url: None,
        severity: None,
    };
    match url {
        Some(url) => finding.with_url(&url),
        None => finding,
    }
}

/// Whether a Job has ended, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
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

fn check_container(pod: &Pod) -> Option<&ContainerStatus> {
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
pub fn classify(job: &Job, pods: &[Pod], settings: &JobSettings, now: Timestamp) -> Progress {
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

fn result(check: &PreflightCheck, finding: Finding, took: Duration) -> CheckResult {
    CheckResult {
        name: check.spec.check_name.clone(),
        severity: finding.severity.unwrap_or(check.spec.severity),
        outcome: finding.outcome,
        message: finding.message,
        remediation_url: finding.url,
        duration: Some(format!("{:.3}s", took.as_secs_f64())),
        failure_policy: Some(check.spec.failure_policy),
    }
}

/// The `PreflightCheck`s a run includes: those named in `selection`, or all
/// when it is empty.
pub fn selected<'a>(
    checks: &'a [PreflightCheck],
    selection: &[String],
) -> impl Iterator<Item = &'a PreflightCheck> {
    checks
        .iter()
        .filter(move |c| selection.is_empty() || selection.contains(&c.spec.check_name))
}

/// Runs every selected `PreflightCheck` as a Job, all at once, and returns
/// their results. Nothing here fails the run: a check that cannot be run
/// is an Error result. Unfinished checks are Errors at `deadline`.
pub async fn run_external(
    client: &kube::Client,
    owner: &UpdatePreflight,
    selection: &[String],
    update: &Update,
    settings: &JobSettings,
    deadline: Instant,
    releases: &Cache,
) -> Vec<CheckResult> {
    // What the target release declares: its checks, and the images
    // `fromRelease` names.
    let mut results = Vec::new();
    let mut declared = None;
    if settings.release_checks && !update.target_image.is_empty() {
        declared = releases.get(&update.target_image);
        if declared.is_none() {
            let limit = deadline.saturating_duration_since(Instant::now());
            match discover(client, &update.target_image, settings, limit).await {
                Ok(found) => {
                    info!(
                        checks = found.checks.len(),
                        "the target release's declared checks"
                    );
                    releases.insert(&update.target_image, found.clone());
                    declared = Some(found);
                }
                Err(e) => {
                    warn!(error = %e, "cannot list the target release's declared checks");
                    results.push(CheckResult {
                        name: RELEASE_DISCOVERY.into(),
                        severity: crate::model::Severity::Blocking,
                        outcome: Outcome::Error,
                        message: format!("cannot list the checks the target release declares: {e}"),
                        remediation_url: None,
                        duration: None,
                        failure_policy: None,
                    });
                }
            }
        }
    }
    let api: Api<PreflightCheck> = Api::all(client.clone());
    let checks = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // The CRD is not installed: there are no administrators' checks.
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => {
            warn!(error = %e, "cannot list PreflightChecks");
            results.push(CheckResult {
                name: "PreflightChecks".into(),
                severity: crate::model::Severity::Blocking,
                outcome: Outcome::Error,
                message: format!("cannot list the PreflightChecks to run: {e}"),
                remediation_url: None,
                duration: None,
                failure_policy: None,
            });
            Vec::new()
        }
    };
    let images = declared.as_ref().map(|d| &d.images);
    let from_release = declared
        .as_ref()
        .map(|d| d.checks.as_slice())
        .unwrap_or(&[]);
    let all: Vec<&PreflightCheck> = selected(from_release, selection)
        .chain(selected(&checks, selection))
        .collect();
    let runs = all.into_iter().map(|check| {
        let span = info_span!("external_check", check = %check.spec.check_name);
        run_one(client, check, owner, update, settings, deadline, images).instrument(span)
    });
    results.extend(futures::future::join_all(runs).await);
    results
}

async fn run_one(
    client: &kube::Client,
    check: &PreflightCheck,
    owner: &UpdatePreflight,
    update: &Update,
    settings: &JobSettings,
    deadline: Instant,
    images: Option<&BTreeMap<String, String>>,
) -> CheckResult {
    let started = Instant::now();
    let image = match plan(check, update, images) {
        Ok(image) => image,
        Err(finding) => return result(check, finding, started.elapsed()),
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), &settings.namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &settings.namespace);
    let manifest = match job_manifest(check, &image, owner, update, settings) {
        Ok(job) => job,
        Err(e) => {
            let finding = Finding::error(format!("cannot build the check's Job: {e}"));
            return result(check, finding, started.elapsed());
        }
    };
    let job = match jobs.create(&PostParams::default(), &manifest).await {
        Ok(job) => job,
        Err(e) => {
            let finding = Finding::error(format!(
                "cannot create the check's Job in namespace {}: {e}",
                settings.namespace
            ));
            return result(check, finding, started.elapsed());
        }
    };
    let name = job.name_any();
    info!(job = %name, %image, "check Job created");
    let by_job = ListParams::default().labels(&format!("{JOB_NAME}={name}"));
    let (finding, ended) = loop {
        let job = match jobs.get_opt(&name).await {
            Ok(Some(job)) => job,
            Ok(None) => {
                break (
                    Finding::error(format!("the Job {name} was deleted before it finished")),
                    true,
                );
            }
            Err(e) if Instant::now() + settings.poll < deadline => {
                warn!(error = %e, job = %name, "cannot read the check's Job; retrying");
                tokio::time::sleep(settings.poll).await;
                continue;
            }
            Err(e) => {
                break (
                    Finding::error(format!("cannot read the check's Job {name}: {e}")),
                    false,
                );
            }
        };
        let listed = match pods.list(&by_job).await {
            Ok(list) => list.items,
            Err(e) => {
                warn!(error = %e, job = %name, "cannot list the check's pods; retrying");
                Vec::new()
            }
        };
        let finished = job.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .flatten()
                .any(|c| matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True")
        });
        let terminated = listed.iter().any(|p| {
            check_container(p)
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.terminated.is_some())
        });
        if let Progress::Done(finding) = classify(&job, &listed, settings, Timestamp::now()) {
            break (finding, finished || terminated);
        }
        if Instant::now() + settings.poll >= deadline {
            break (
                Finding::error(format!(
                    "the run ended before the check's Job {name} finished"
                )),
                false,
            );
        }
        tokio::time::sleep(settings.poll).await;
    };
    // A Job given up on is stopped; a finished one stays for its TTL, so its
    // pod's log can be read.
    if !ended {
        let delete = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        if let Err(e) = jobs.delete(&name, &delete).await {
            warn!(error = %e, job = %name, "cannot delete the check's Job");
        }
    }
    info!(job = %name, outcome = ?finding.outcome, "check Job ended");
    result(check, finding, started.elapsed())
}

#[cfg(test)]
mod tests;
