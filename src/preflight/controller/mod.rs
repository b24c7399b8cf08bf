//! The preflight controller: runs a target's suite when its `UpdatePreflight`
//! is new, changed, asked for or old; keeps the update graph's targets
//! checked ahead of time; garbage-collects what the graph no longer offers.
//! Only the replica holding the Lease runs it (see `leader`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{Instrument, info, info_span, warn};

use super::RunRequest;
use super::live::{AUTO_CREATED, REQUESTED_AT, cluster_versions, offered, trigger};
use crate::cluster::live;
use crate::metrics::Metrics;
use crate::model::CheckResult;
use crate::model::Phase;
use crate::model::UpdatePreflight;
use crate::model::UpdatePreflightStatus;
use crate::model::policy::Blocking;
use crate::model::release::{ReleaseKey, Version};
use crate::model::status::{self, Ending};
use crate::model::{ClusterVersion, Target};
use crate::suite::{self, Limits};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How often offered targets are rechecked; zero turns proactive refresh off.
    pub refresh_interval: Duration,
    pub run_timeout: Duration,
    pub check_timeout: Duration,
    pub concurrency: u16,
    /// How long an auto-created object whose target is no longer offered is kept.
    pub gc_grace: Duration,
    /// Built-in checks to run; all when empty.
    pub checks: Vec<String>,
    /// Where `PreflightCheck` Jobs run; `None` runs no external checks.
    pub jobs: Option<super::jobs::JobSettings>,
    /// What the live view reads beyond the cluster's state.
    pub reads: live::Reads,
    /// How results count (the fail-open checks); the status is written by it.
    pub blocking: Blocking,
}

struct Ctx {
    client: kube::Client,
    /// When this replica became the leader: a run still marked Running from
    /// before then belonged to a leader that is gone.
    leading_since: Timestamp,
    settings: Settings,
    recorder: Recorder,
    metrics: Metrics,
    /// What target releases declare, per digest.
    releases: super::release_checks::Cache,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write the status of {name}: {source}")]
    WriteStatus { name: String, source: kube::Error },
}

/// Why a run is due, if one is. `leading_since` is when this replica became
/// the leader.
pub fn run_due(
    object: &UpdatePreflight,
    refresh: Duration,
    run_timeout: Duration,
    leading_since: Timestamp,
    now: Timestamp,
) -> Option<&'static str> {
    let Some(status) = &object.status else {
        return Some("new");
    };
    let started = status.start_time.as_ref().map(|t| t.0);
    match status.phase {
        None => return Some("new"),
        Some(Phase::Pending) => return Some("pending"),
        Some(Phase::Running) => {
            // Started by an earlier leader, or running far past its timeout:
            // its replica is gone, so it is started again.
            let orphaned = started.is_none_or(|s| {
                s < leading_since || now.duration_since(s).unsigned_abs() > run_timeout * 2
            });
            return orphaned.then_some("an earlier run did not finish");
        }
        Some(_) => {}
    }
    if status.observed_generation.unwrap_or(0) < object.metadata.generation.unwrap_or(0) {
        return Some("the spec changed");
    }
    let requested = object
        .annotations()
        .get(REQUESTED_AT)
        .and_then(|v| v.parse::<Timestamp>().ok());
    // `startTime` is written to the second (a metav1.Time), while a request
    // is stamped finer: compared finely, the run a request started would
    // look older than it, and run again (with a Job per external check).
    if let Some(requested) = requested
        && started.is_none_or(|s| requested.as_second() > s.as_second())
    {
        return Some("a run was requested");
    }
    let completed = status.completion_time.as_ref().map(|t| t.0);
    match completed {
        None => Some("no completed run"),
        Some(done) if !refresh.is_zero() && now.duration_since(done).unsigned_abs() >= refresh => {
            Some("the results are old")
        }
        Some(_) => None,
    }
}

/// Runs the controller until the future is dropped.
pub async fn run(client: kube::Client, settings: Settings, metrics: Metrics, instance: String) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "preflight-gate".into(),
            instance: Some(instance),
        },
    );
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        leading_since: Timestamp::now(),
        settings: settings.clone(),
        recorder,
        metrics,
        releases: Default::default(),
    });
    let api: Api<UpdatePreflight> = Api::all(client.clone());
    let refresher = tokio::spawn(refresh_loop(ctx.clone()).instrument(info_span!("refresh")));
    // The leader alone exports results; they go when it stops leading.
    let _results = ClearResults(ctx.metrics.clone());
    Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(settings.concurrency))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
    refresher.abort();
}

/// Stops exporting results when dropped (the controller is aborted when
/// leadership is lost).
struct ClearResults(Metrics);

impl Drop for ClearResults {
    fn drop(&mut self) {
        self.0.clear_results();
    }
}

fn error_policy(_object: Arc<UpdatePreflight>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(%error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(10))
}

async fn reconcile(object: Arc<UpdatePreflight>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    ctx.metrics.observe_result(&object);
    let settings = &ctx.settings;
    let now = Timestamp::now();
    let due = run_due(
        &object,
        settings.refresh_interval,
        settings.run_timeout,
        ctx.leading_since,
        now,
    );
    let Some(why) = due else {
        return Ok(next_check(&object, settings));
    };
    let name = object.name_any();
    let span = info_span!("run", %name, image = %object.spec.image);
    async {
        info!(why, "preflight run starting");
        ask_for_the_result(&object, &ctx).await;
        run_suite(&object, &ctx).await
    }
    .instrument(span)
    .await?;
    Ok(Action::requeue(if settings.refresh_interval.is_zero() {
        Duration::from_secs(3600)
    } else {
        settings.refresh_interval
    }))
}

/// An object under another name than the release's own is a request: it
/// gets its run, and when it asks for the full suite the result the gate
/// vouches for is asked for under the release's name too
/// (preflight::vouch). A request that narrows the suite is a report of its
/// own, and asks for nothing more.
async fn ask_for_the_result(object: &UpdatePreflight, ctx: &Ctx) {
    let own = ReleaseKey::from_image(&object.spec.image).object_name();
    if object.metadata.name.as_deref() == Some(own.as_str()) || !object.spec.checks.is_empty() {
        return;
    }
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let request = RunRequest {
        image: object.spec.image.clone(),
        version: None,
        existing: None,
    };
    match trigger(&api, &request).await {
        Ok(name) => info!(result = %name, "a request: the release's own result is asked for too"),
        Err(e) => warn!(error = %e, "cannot ask for the release's own result"),
    }
}

fn next_check(object: &UpdatePreflight, settings: &Settings) -> Action {
    if settings.refresh_interval.is_zero() {
        return Action::await_change();
    }
    let age = object
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .map_or(Duration::ZERO, |t| {
            Timestamp::now().duration_since(t.0).unsigned_abs()
        });
    Action::requeue(
        settings
            .refresh_interval
            .saturating_sub(age)
            .max(Duration::from_secs(1)),
    )
}

async fn write_status(
    api: &Api<UpdatePreflight>,
    name: &str,
    status: &UpdatePreflightStatus,
) -> Result<(), Error> {
    let patch = Patch::Merge(json!({ "status": status }));
    // The field manager is how the webhook tells the gate's status writes
    // from anyone else's (preflight::vouch).
    let params = PatchParams {
        field_manager: Some(crate::model::vouch::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch_status(name, &params, &patch)
        .await
        .map(|_| ())
        .map_err(|source| Error::WriteStatus {
            name: name.to_owned(),
            source,
        })
}

/// Runs the suite for one object and records its result.
async fn run_suite(object: &UpdatePreflight, ctx: &Ctx) -> Result<(), Error> {
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let name = object.name_any();
    let started = Instant::now();
    let start_time = Time(Timestamp::now());
    let mut status = UpdatePreflightStatus {
        phase: Some(Phase::Running),
        start_time: Some(start_time.clone()),
        ..object.status.clone().unwrap_or_default()
    };
    write_status(&api, &name, &status).await?;

    let target = Target::image(&object.spec.image, object.spec.version.clone());
    // The object's own selection, within what the gate is configured to run
    // (`None`: every built-in). A selection naming only external checks
    // runs no built-in.
    let selection: Option<Vec<String>> = match (
        object.spec.checks.is_empty(),
        ctx.settings.checks.is_empty(),
    ) {
        (true, true) => None,
        (true, false) => Some(ctx.settings.checks.clone()),
        (false, true) => Some(object.spec.checks.clone()),
        (false, false) => Some(
            object
                .spec
                .checks
                .iter()
                .filter(|c| ctx.settings.checks.contains(c))
                .cloned()
                .collect(),
        ),
    };
    // External checks run beside the built-ins, bounded by the same run
    // timeout; their results sit in the same status.
    let external = async {
        let Some(jobs) = &ctx.settings.jobs else {
            return Vec::new();
        };
        let update = external_update(&ctx.client, &target).await;
        let deadline = started + ctx.settings.run_timeout;
        super::jobs::run_external(
            &ctx.client,
            object,
            &object.spec.checks,
            &update,
            jobs,
            deadline,
            &ctx.releases,
        )
        .await
    };
    let suite = tokio::time::timeout(
        ctx.settings.run_timeout,
        run_checks(ctx, target.clone(), selection),
    );
    let (suite, mut external) = tokio::join!(suite, external);
    let (phase, results, reason, message) = match suite {
        Ok(Ok(mut results)) => {
            results.append(&mut external);
            let (phase, reason, message) = status::verdict(&results, &ctx.settings.blocking);
            (phase, results, reason, message)
        }
        Ok(Err(e)) => (
            Phase::Error,
            external,
            "ClusterUnreadable",
            format!("cannot read the cluster: {e}"),
        ),
        Err(_) => (
            Phase::Error,
            external,
            "RunTimedOut",
            format!(
                "the run did not finish within {}",
                humantime::format_duration(ctx.settings.run_timeout)
            ),
        ),
    };
    status::complete(
        &mut status,
        results,
        &ctx.settings.blocking,
        Ending {
            phase,
            reason,
            message: message.clone(),
            generation: object.metadata.generation,
            at: Timestamp::now(),
        },
    );
    write_status(&api, &name, &status).await?;

    let elapsed = started.elapsed();
    let phase_name = format!("{phase:?}");
    ctx.metrics.runs.with_label_values(&[&phase_name]).inc();
    ctx.metrics.run_seconds.observe(elapsed.as_secs_f64());
    info!(phase = %phase_name, took = ?elapsed, "{message}");
    let event = Event {
        type_: if phase == Phase::Passed {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: format!("Preflight{phase_name}"),
        note: Some(message),
        action: "Run".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        warn!(error = %e, "cannot publish the run's Event");
    }
    Ok(())
}

/// Loads the cluster once and runs the suite over it, each check with its
/// own timeout, within what is left of the run's.
async fn run_checks(
    ctx: &Ctx,
    target: Target,
    selection: Option<Vec<String>>,
) -> Result<Vec<CheckResult>, kube::Error> {
    let started = Instant::now();
    let view = Arc::new(live::load(&ctx.client, ctx.settings.reads).await?);
    let limits = Limits {
        per_check: ctx.settings.check_timeout,
        budget: ctx.settings.run_timeout.saturating_sub(started.elapsed()),
    };
    let suite = tokio::task::spawn_blocking(move || {
        suite::run(
            view,
            &target,
            Timestamp::now(),
            selection.as_deref(),
            limits,
        )
    });
    Ok(suite.await.unwrap_or_else(|e| {
        warn!(error = %e, "the suite runner failed");
        Vec::new()
    }))
}

/// The update as external checks are told it: the target, and the release
/// the cluster runs (the newest completed one, else the desired one).
async fn external_update(client: &kube::Client, target: &Target) -> super::jobs::Update {
    let cv = match cluster_versions(client).get_opt("version").await {
        Ok(cv) => cv
            .and_then(|cv| serde_json::to_value(cv).ok())
            .and_then(|v| serde_json::from_value::<ClusterVersion>(v).ok()),
        Err(e) => {
            warn!(error = %e, "cannot read the ClusterVersion for external checks");
            None
        }
    };
    let completed = cv
        .as_ref()
        .and_then(|cv| cv.status.history.iter().find(|h| h.state == "Completed"));
    let (current_image, current_version) = match (completed, &cv) {
        (Some(h), _) => (h.image.clone(), Version::parse(&h.version)),
        (None, Some(cv)) => (
            cv.status.desired.image.clone(),
            Version::parse(&cv.status.desired.version),
        ),
        (None, None) => (String::new(), None),
    };
    super::jobs::Update {
        target_image: target.image.clone(),
        target_version: target.version.as_deref().and_then(Version::parse),
        current_image,
        current_version,
    }
}

/// Refreshes when the ClusterVersion changes (a new target offered, one
/// withdrawn) and periodically besides, for garbage collection.
async fn refresh_loop(ctx: Arc<Ctx>) {
    if ctx.settings.refresh_interval.is_zero() {
        return;
    }
    let config = watcher::Config::default().fields("metadata.name=version");
    let mut changes = watcher::watcher(cluster_versions(&ctx.client), config)
        .default_backoff()
        .boxed();
    let period = ctx
        .settings
        .gc_grace
        .clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(change) = changes.next() => {
                if !matches!(change, Ok(watcher::Event::Apply(_) | watcher::Event::InitDone)) {
                    continue;
                }
            }
        }
        if let Err(e) = refresh(&ctx).await {
            warn!(error = %e, "proactive refresh failed");
        }
    }
}

/// Makes sure every offered target has an object (the controller then keeps
/// it fresh), and deletes auto-created objects no longer offered.
async fn refresh(ctx: &Ctx) -> Result<(), kube::Error> {
    let Some(cv) = cluster_versions(&ctx.client).get_opt("version").await? else {
        return Ok(());
    };
    let cv: ClusterVersion =
        serde_json::from_value(serde_json::to_value(cv).map_err(kube::Error::SerdeError)?)
            .map_err(kube::Error::SerdeError)?;
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let mark = ctx.metrics.results_mark();
    let objects = api.list(&Default::default()).await?.items;
    let known: HashSet<ReleaseKey> = objects
        .iter()
        .map(|o| ReleaseKey::from_image(&o.spec.image))
        .collect();
    let offered = offered(&cv);
    let recommended = cv
        .status
        .available_updates
        .iter()
        .map(|r| (r.version.as_str(), true));
    let conditional = cv
        .status
        .conditional_updates
        .iter()
        .map(|c| (c.release.version.as_str(), false));
    ctx.metrics.offered_targets(recommended.chain(conditional));
    for target in &offered {
        if !known.contains(&ReleaseKey::from_image(&target.image)) {
            let name = trigger(&api, target).await?;
            info!(%name, image = %target.image, "checking an offered target ahead of time");
        }
    }

    let mut wanted: HashSet<ReleaseKey> = offered
        .iter()
        .map(|t| ReleaseKey::from_image(&t.image))
        .collect();
    wanted.insert(ReleaseKey::from_image(&cv.status.desired.image));
    if let crate::model::Resolution::Target(target) = cv.resolve_target() {
        wanted.insert(target.key);
    }
    let now = Timestamp::now();
    let mut kept = Vec::new();
    for object in objects {
        let auto = object
            .labels()
            .get(AUTO_CREATED)
            .is_some_and(|v| v == "true");
        let last_touched = [
            object.metadata.creation_timestamp.as_ref().map(|t| t.0),
            object
                .status
                .as_ref()
                .and_then(|s| s.completion_time.as_ref())
                .map(|t| t.0),
            object
                .annotations()
                .get(REQUESTED_AT)
                .and_then(|v| v.parse().ok()),
        ]
        .into_iter()
        .flatten()
        .max();
        let idle = last_touched
            .is_none_or(|t| now.duration_since(t).unsigned_abs() >= ctx.settings.gc_grace);
        if auto && idle && !wanted.contains(&ReleaseKey::from_image(&object.spec.image)) {
            let name = object.name_any();
            api.delete(&name, &DeleteParams::default()).await?;
            info!(%name, "deleted: its target is no longer offered");
        } else {
            kept.push(object.name_any());
        }
    }
    // Results of deleted objects are exported no longer.
    ctx.metrics
        .retain_results(kept.iter().map(String::as_str), mark);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case(1, "1 check passed")]
    #[case(2, "2 checks passed")]
    fn a_passed_suite_counts_its_checks_in_words(#[case] n: usize, #[case] says: &str) {
        let results: Vec<CheckResult> = (0..n)
            .map(|i| {
                serde_json::from_value(json!({"name": format!("C{i}"), "outcome": "Pass"})).unwrap()
            })
            .collect();
        let (phase, _, message) = status::verdict(&results, &Blocking::default());
        assert_eq!(phase, Phase::Passed);
        assert_eq!(message, says);
    }

    fn object(
        phase: Option<&str>,
        started: &str,
        completed: Option<&str>,
        generation: i64,
        observed: i64,
        requested: Option<&str>,
    ) -> UpdatePreflight {
        let mut o: UpdatePreflight = serde_json::from_value(json!({
            "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
            "metadata": {"name": "x", "generation": generation},
            "spec": {"image": "q@sha256:aa"},
        }))
        .unwrap();
        if let Some(requested) = requested {
            o.metadata.annotations = Some([(REQUESTED_AT.to_owned(), requested.to_owned())].into());
        }
        if let Some(phase) = phase {
            o.status = serde_json::from_value(json!({
                "phase": phase, "startTime": started, "completionTime": completed, "observedGeneration": observed
            }))
            .unwrap();
        }
        o
    }

    #[rstest]
    #[case::new(None, None, 1, 0, None, Some("new"))]
    #[case::fresh(Some("Passed"), Some("2026-11-30T11:50:00Z"), 1, 1, None, None)]
    #[case::spec_changed(
        Some("Passed"),
        Some("2026-11-30T11:50:00Z"),
        2,
        1,
        None,
        Some("the spec changed")
    )]
    #[case::requested(
        Some("Failed"),
        Some("2026-11-30T11:50:00Z"),
        1,
        1,
        Some("2026-11-30T11:57:00Z"),
        Some("a run was requested")
    )]
    #[case::requested_before_the_last_run(
        Some("Failed"),
        Some("2026-11-30T11:50:00Z"),
        1,
        1,
        Some("2026-11-30T11:40:00Z"),
        None
    )]
    #[case::requested_within_the_second_the_run_started(
        Some("Failed"),
        Some("2026-11-30T11:56:30Z"),
        1,
        1,
        Some("2026-11-30T11:56:00.700Z"),
        None
    )]
    #[case::old(
        Some("Passed"),
        Some("2026-11-30T10:00:00Z"),
        1,
        1,
        None,
        Some("the results are old")
    )]
    #[case::running(Some("Running"), None, 1, 1, None, None)]
    fn runs_are_due_when_new_changed_requested_or_old(
        #[case] phase: Option<&str>,
        #[case] completed: Option<&str>,
        #[case] generation: i64,
        #[case] observed: i64,
        #[case] requested: Option<&str>,
        #[case] due: Option<&str>,
    ) {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        let o = object(
            phase,
            "2026-11-30T11:56:00Z",
            completed,
            generation,
            observed,
            requested,
        );
        assert_eq!(
            run_due(
                &o,
                Duration::from_secs(3600),
                Duration::from_secs(300),
                "2026-11-30T11:00:00Z".parse().unwrap(),
                now
            ),
            due
        );
    }

    #[test]
    fn a_run_abandoned_by_a_dead_leader_is_started_again() {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        let o = object(Some("Running"), "2026-11-30T11:00:00Z", None, 1, 0, None);
        assert_eq!(
            run_due(
                &o,
                Duration::from_secs(3600),
                Duration::from_secs(300),
                "2026-11-30T11:00:00Z".parse().unwrap(),
                now
            ),
            Some("an earlier run did not finish")
        );
        // Recent, but started before this replica led: its leader is gone.
        let recent = object(Some("Running"), "2026-11-30T11:59:00Z", None, 1, 0, None);
        let took_over: Timestamp = "2026-11-30T11:59:30Z".parse().unwrap();
        let due = run_due(
            &recent,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            took_over,
            now,
        );
        assert_eq!(due, Some("an earlier run did not finish"));
        let ours = run_due(
            &recent,
            Duration::from_secs(3600),
            Duration::from_secs(300),
            "2026-11-30T11:58:00Z".parse().unwrap(),
            now,
        );
        assert_eq!(ours, None, "a run this leader started is left to finish");
    }

    #[test]
    fn refresh_zero_never_reruns_for_age() {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        let o = object(
            Some("Passed"),
            "2025-01-01T00:00:00Z",
            Some("2025-01-01T00:00:00Z"),
            1,
            1,
            None,
        );
        assert_eq!(
            run_due(
                &o,
                Duration::ZERO,
                Duration::from_secs(300),
                "2025-01-01T00:00:00Z".parse().unwrap(),
                now
            ),
            None
        );
    }

    #[test]
    fn offered_targets_come_from_available_and_conditional_updates() {
        let cv: ClusterVersion = serde_json::from_value(json!({
            "metadata": {"name": "version"},
            "status": {
                "desired": {"version": "4.14.1", "image": "q@sha256:00"},
                "availableUpdates": [{"version": "4.14.12", "image": "q@sha256:11"}, {"version": "4.15.0", "image": ""}],
                "conditionalUpdates": [{"release": {"version": "4.15.16", "image": "q@sha256:33"}, "risks": [], "conditions": []}]
            }
        }))
        .unwrap();
        let images: Vec<String> = offered(&cv).into_iter().map(|r| r.image).collect();
        assert_eq!(images, ["q@sha256:11", "q@sha256:33"]);
    }
}
