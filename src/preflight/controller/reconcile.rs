//! One object's turn: whether a run is due, and the run itself (the
//! built-in suite over a fresh live view beside the external checks, the
//! update plan from the same view, one status written before and after, an
//! Event at the end).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{Instrument, info, info_span, warn};

use super::{Ctx, Error, Settings};
use crate::cluster::cluster_versions;
use crate::cluster::live;
use crate::model::annotations::REQUESTED_AT;
use crate::model::release::{ReleaseKey, Version};
use crate::model::results::PlanSummary;
use crate::model::status::{self, Ending, errored, good_for};
use crate::model::vouch::{ResultKey, finished};
use crate::model::{
    CheckResult, ClusterVersion, Phase, Target, UpdatePreflight, UpdatePreflightStatus,
};
use crate::preflight::jobs;
use crate::preflight::live::RunRequest;
use crate::preflight::live::{offered_pullspec, trigger};
use crate::suite::{self, Limits};

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
    // Each new stamp asks for one run: the run records the stamp it
    // answered, so a stamp in the future (a skewed clock, or `9999-…`)
    // cannot ask again and again. A stamp no run recorded (written before
    // runs recorded them) is answered if it is newer than the last run.
    // `startTime` is written to the second (a metav1.Time), while a request
    // is stamped finer: compared finely, the run a request started would
    // look older than it, and run again (with a Job per external check).
    let stamp = object.annotations().get(REQUESTED_AT);
    let requested = stamp.and_then(|v| v.parse::<Timestamp>().ok());
    if let (Some(stamp), Some(requested)) = (stamp, requested)
        && status.observed_request.as_deref() != Some(stamp.as_str())
        && (status.observed_request.is_some()
            || started.is_none_or(|s| requested.as_second() > s.as_second()))
    {
        return Some("a run was requested");
    }
    let completed = status.completion_time.as_ref().map(|t| t.0);
    let good_for = good_for(status, refresh);
    match completed {
        None => Some("no completed run"),
        Some(done)
            if !good_for.is_zero() && now.duration_since(done).unsigned_abs() >= good_for =>
        {
            Some(if errored(status) {
                "the last run errored"
            } else {
                "the results are old"
            })
        }
        Some(_) => None,
    }
}

pub(crate) async fn reconcile(
    object: Arc<UpdatePreflight>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    ctx.metrics.results.observe(&object);
    if let Some(action) = repair_own_spec(&object, &ctx).await {
        return Ok(action);
    }
    let settings = &ctx.settings;
    let now = Timestamp::now();
    let due = unsigned(&object, &ctx.key)
        .or_else(|| written_back(&object, ctx.as_ref()))
        .or_else(|| {
            run_due(
                &object,
                settings.refresh_interval,
                settings.run_timeout,
                ctx.leading_since,
                now,
            )
        });
    let Some(why) = due else {
        return Ok(next_check(&object, settings));
    };
    let name = object.name_any();
    let span = info_span!("run", %name, image = %object.spec.image);
    let status = async {
        info!(why, "preflight run starting");
        ask_for_the_result(&object, &ctx).await;
        run_suite(&object, &ctx).await
    }
    .instrument(span)
    .await?;
    // Back when the results just written go stale: sooner when they errored.
    let good_for = good_for(&status, settings.refresh_interval);
    Ok(Action::requeue(if good_for.is_zero() {
        Duration::from_secs(3600)
    } else {
        good_for
    }))
}

/// The gate owns the spec of its own result (the object named after its
/// release): an updater who narrowed its suite is repaired, not obeyed
/// (its version is repaired by the run, which alone knows it:
/// [`repair_own_version`]). The repair changes the generation, so the
/// result runs again; until then the webhook reads it as pending. Returns
/// what to do instead of this turn, when the spec needed repair.
async fn repair_own_spec(object: &UpdatePreflight, ctx: &Ctx) -> Option<Action> {
    if !is_own(object) || object.spec.checks.is_empty() {
        return None;
    }
    let patch = json!({"spec": {"checks": null}});
    let why = format!(
        "its suite was narrowed to {}",
        object.spec.checks.join(", ")
    );
    if !repair(object, ctx, &patch, &why).await {
        return Some(Action::requeue(Duration::from_secs(30)));
    }
    Some(Action::await_change())
}

/// After a run resolved the target's version from a trusted place: the
/// gate's own result whose spec says another version is given back the
/// resolved one. Where nothing trusted gives one, the spec stays as it is
/// (the webhook compares only known versions).
async fn repair_own_version(object: &UpdatePreflight, ctx: &Ctx, resolved: Option<&Version>) {
    let (Some(written), Some(resolved)) = (object.spec.version.as_deref(), resolved) else {
        return;
    };
    if !is_own(object) || Version::parse(written).as_ref() == Some(resolved) {
        return;
    }
    let patch = json!({"spec": {"version": resolved.to_string()}});
    let why = format!("its version was changed to {written}");
    repair(object, ctx, &patch, &why).await;
}

/// Whether `object` is the gate's own result: named after its release.
fn is_own(object: &UpdatePreflight) -> bool {
    let key = ReleaseKey::from_image(&object.spec.image);
    object.metadata.name.as_deref() == Some(key.object_name().as_str())
}

/// Patches the spec of the gate's own result back, saying why in the log
/// and an Event; false when the API server refused.
async fn repair(object: &UpdatePreflight, ctx: &Ctx, patch: &serde_json::Value, why: &str) -> bool {
    let name = object.name_any();
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    if let Err(e) = api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        warn!(%name, error = %e, "cannot repair the spec of the gate's own result");
        return false;
    }
    let message = format!(
        "The gate's own result for {} was changed: {why}. Repaired: the gate owns its results' spec (every configured check, the version the update graph or the release gives), and runs it again.",
        object.spec.image
    );
    warn!(%name, "{message}");
    let event = Event {
        type_: EventType::Warning,
        reason: "PreflightSpecRepaired".into(),
        note: Some(message),
        action: "Repair".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        warn!(error = %e, "cannot publish the repair's Event");
    }
    true
}

/// An object under another name than the release's own is a request: it
/// gets its run, and when it asks for the full suite the result the gate
/// vouches for is asked for under the release's name too
/// (model::vouch), under the pullspec the update graph gives the digest
/// when it offers it (the request's may name any host). A request that
/// narrows the suite is a report of its own, and asks for nothing more.
async fn ask_for_the_result(object: &UpdatePreflight, ctx: &Ctx) {
    let key = ReleaseKey::from_image(&object.spec.image);
    let own = key.object_name();
    if object.metadata.name.as_deref() == Some(own.as_str()) || !object.spec.checks.is_empty() {
        return;
    }
    let graph = match cluster_versions(&ctx.client).get_opt("version").await {
        Ok(found) => found
            .and_then(|cv| serde_json::to_value(cv).ok())
            .and_then(|cv| serde_json::from_value::<ClusterVersion>(cv).ok())
            .and_then(|cv| offered_pullspec(&cv, &key)),
        Err(e) => {
            warn!(error = %e, "cannot read the update graph; the request's pullspec is used");
            None
        }
    };
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let request = RunRequest {
        image: graph.unwrap_or_else(|| object.spec.image.clone()),
        version: None,
        existing: None,
    };
    match trigger(&api, &request).await {
        Ok(name) => info!(result = %name, "a request: the release's own result is asked for too"),
        Err(e) => warn!(error = %e, "cannot ask for the release's own result"),
    }
}

/// The number of a run started at `started`: past the object's last run
/// and any run `seen` signed, and at least the start's Unix second, so a
/// leader that never saw the newest run (every replica restarted since)
/// still numbers past it, while clocks agree.
pub(crate) fn next_run(object: &UpdatePreflight, seen: Option<u64>, started: Timestamp) -> u64 {
    let last = object.status.as_ref().and_then(|s| s.run).unwrap_or(0);
    let clock = u64::try_from(started.as_second()).unwrap_or(0);
    last.max(seen.unwrap_or(0)).saturating_add(1).max(clock)
}

/// Why a finished run is due again when its status is an older run of the
/// object than one this leader wrote or saw signed: written back by someone
/// who may write status (model::vouch refuses it meanwhile). Else the
/// object's run is remembered.
fn written_back(object: &UpdatePreflight, ctx: &Ctx) -> Option<&'static str> {
    let uid = object.metadata.uid.as_deref()?;
    let run = object.status.as_ref().and_then(|s| s.run).unwrap_or(0);
    if finished(object)
        && ctx
            .settings
            .newest_runs
            .newest(uid)
            .is_some_and(|newest| run < newest)
    {
        return Some("an older run's status was written back");
    }
    ctx.settings.newest_runs.observe(object, &ctx.key);
    None
}

/// Why a finished run is due again when the gate did not sign its result
/// (written by someone else, or by a gate before results were signed): the
/// webhook would not count it, so it is run and written anew.
fn unsigned(object: &UpdatePreflight, key: &ResultKey) -> Option<&'static str> {
    (finished(object) && key.verify(object).is_err())
        .then_some("its result is not signed by the gate")
}

/// The status fields a status write names, null when the status has none,
/// so that none is left from an earlier write (a merge patch keeps what it
/// does not name) and the object holds what was signed. Not
/// `updateDuration`, which `completion` writes between runs.
pub(super) const STATUS_FIELDS: &[&str] = &[
    "phase",
    "startTime",
    "completionTime",
    "observedGeneration",
    "observedRequest",
    "run",
    "results",
    "summary",
    "conditions",
    "plan",
    "signature",
];

fn next_check(object: &UpdatePreflight, settings: &Settings) -> Action {
    let Some(status) = &object.status else {
        return Action::requeue(Duration::from_secs(1));
    };
    let good_for = good_for(status, settings.refresh_interval);
    if good_for.is_zero() {
        return Action::await_change();
    }
    let age = status.completion_time.as_ref().map_or(Duration::ZERO, |t| {
        Timestamp::now().duration_since(t.0).unsigned_abs()
    });
    Action::requeue(good_for.saturating_sub(age).max(Duration::from_secs(1)))
}

async fn write_status(
    api: &Api<UpdatePreflight>,
    name: &str,
    status: &UpdatePreflightStatus,
) -> Result<(), Error> {
    let mut patch = json!({ "status": status });
    // A run without a plan, results or signature removes the last one.
    if let Some(fields) = patch["status"].as_object_mut() {
        for field in STATUS_FIELDS {
            fields.entry(*field).or_insert(serde_json::Value::Null);
        }
    }
    let patch = Patch::Merge(patch);
    // The field manager is how the webhook tells the gate's status writes
    // from anyone else's (model::vouch).
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

/// Runs the suite for one object and records its result, which it returns.
async fn run_suite(object: &UpdatePreflight, ctx: &Ctx) -> Result<UpdatePreflightStatus, Error> {
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let name = object.name_any();
    let started = Instant::now();
    let start_time = Time(Timestamp::now());
    let seen = object
        .metadata
        .uid
        .as_deref()
        .and_then(|uid| ctx.settings.newest_runs.newest(uid));
    let mut status = UpdatePreflightStatus {
        phase: Some(Phase::Running),
        start_time: Some(start_time.clone()),
        observed_request: object.annotations().get(REQUESTED_AT).cloned(),
        run: Some(next_run(object, seen, start_time.0)),
        signature: None,
        ..object.status.clone().unwrap_or_default()
    };
    write_status(&api, &name, &status).await?;

    // The cluster, read once: for the built-in checks, the release it runs
    // and the target's version.
    let deadline = started + ctx.settings.run_timeout;
    let view = match tokio::time::timeout(
        ctx.settings.run_timeout,
        live::load(&ctx.client, ctx.settings.reads),
    )
    .await
    {
        Ok(Ok(mut view)) => {
            view.alert_namespaces = ctx.settings.alert_namespaces.clone();
            view.gate_namespace = Some(ctx.settings.namespace.clone());
            read_alerts(&mut view, ctx).await;
            Ok(Arc::new(view))
        }
        Ok(Err(e)) => Err(("ClusterUnreadable", format!("cannot read the cluster: {e}"))),
        Err(_) => Err(("RunTimedOut", timed_out(ctx))),
    };
    let mut plan = None;
    let (phase, results, reason, message) = match view {
        Ok(view) => {
            let results = run_checks(object, ctx, view, deadline).await;
            match results {
                Some((results, planned)) => {
                    plan = planned;
                    let (phase, reason, message) =
                        status::conclusion(&results, &ctx.settings.exemptions);
                    (phase, results, reason, message)
                }
                None => (Phase::Error, Vec::new(), "RunTimedOut", timed_out(ctx)),
            }
        }
        Err((reason, message)) => (Phase::Error, Vec::new(), reason, message),
    };
    status::complete(
        &mut status,
        results,
        &ctx.settings.exemptions,
        Ending {
            phase,
            reason,
            message: message.clone(),
            generation: object.metadata.generation,
            at: Timestamp::now(),
        },
    );
    // The plan of this run, or none: an earlier run's plan describes a
    // cluster this run could not read.
    status.plan = plan;
    status.signature = Some(signature_of(object, &status, &ctx.key));
    write_status(&api, &name, &status).await?;
    let mut written = object.clone();
    written.status = Some(status.clone());
    ctx.settings.newest_runs.observe(&written, &ctx.key);

    let elapsed = started.elapsed();
    let phase_name = format!("{phase:?}");
    ctx.metrics.controller.run_finished(phase, elapsed);
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
    Ok(status)
}

/// The gate's signature of `status` as the result of `object`.
fn signature_of(
    object: &UpdatePreflight,
    status: &UpdatePreflightStatus,
    key: &ResultKey,
) -> String {
    let mut signed = object.clone();
    signed.status = Some(status.clone());
    key.sign(&signed)
}

/// Adds the cluster's alerts to `view`, from the configured source; when
/// the source cannot be read, the alert checks are Errors that say why.
async fn read_alerts(view: &mut crate::view::ClusterView, ctx: &Ctx) {
    let Some(source) = &ctx.settings.alerts else {
        return;
    };
    let read = source.alerts().await;
    if let Err(e) = &read {
        warn!(error = %e, "cannot read the cluster's alerts");
    }
    view.add_alerts_read(read);
}

fn timed_out(ctx: &Ctx) -> String {
    format!(
        "the run did not finish within {}",
        humantime::format_duration(ctx.settings.run_timeout)
    )
}

/// Runs the suite over `view`, each built-in check with its own timeout,
/// and the external checks beside it, all within the run's deadline, and
/// computes the update plan from the same view; None when the built-ins
/// did not finish by then.
///
/// The target's version comes from a trusted place only, never from the
/// object, whoever wrote it: the update graph, matched by digest; else the
/// release's own metadata, read by its extraction pod (verified releases
/// only, `jobs::release_declared`).
async fn run_checks(
    object: &UpdatePreflight,
    ctx: &Ctx,
    view: Arc<crate::view::ClusterView>,
    deadline: Instant,
) -> Option<(Vec<CheckResult>, Option<PlanSummary>)> {
    let mut update = update_of(view.cluster_version.as_ref(), &object.spec.image);
    let mut results = Vec::new();
    let declared = match &ctx.settings.jobs {
        Some(jobs) => jobs::release_declared(
            &ctx.client,
            view.cluster_version.as_ref(),
            object,
            &update,
            jobs,
            deadline,
            &ctx.releases,
        )
        .await
        .unwrap_or_else(|not_run| {
            results.push(not_run);
            None
        }),
        None => None,
    };
    if update.target_version.is_none() {
        update.target_version = declared
            .as_ref()
            .and_then(|d| d.version.as_deref())
            .and_then(Version::parse);
    }
    repair_own_version(object, ctx, update.target_version.as_ref()).await;
    let target = Target::image(
        &object.spec.image,
        update.target_version.as_ref().map(ToString::to_string),
    );
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
    let limits = Limits {
        per_check: ctx.settings.check_timeout,
        budget: deadline.saturating_duration_since(Instant::now()),
    };
    let built_in = tokio::task::spawn_blocking(move || {
        let clock = Timestamp::now();
        let results = suite::run(view.clone(), &target, clock, selection.as_deref(), limits);
        // The plan of the same view, at the same time; a plan that panics
        // is no plan, never a lost run.
        let plan = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            plan_of(&view, &target, clock)
        }))
        .ok();
        (results, plan)
    });
    let built_in = tokio::time::timeout_at(deadline.into(), built_in);
    // External checks run beside the built-ins, bounded by the same
    // deadline; their results sit in the same status.
    let external = async {
        match &ctx.settings.jobs {
            Some(jobs) => {
                jobs::run_external(
                    &ctx.client,
                    object,
                    &object.spec.checks,
                    &update,
                    jobs,
                    deadline,
                    declared.as_ref(),
                )
                .await
            }
            None => Vec::new(),
        }
    };
    let (built_in, mut external) = tokio::join!(built_in, external);
    let (mut built_in, plan) = match built_in {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => {
            warn!(error = %e, "the suite runner failed");
            (Vec::new(), None)
        }
        Err(_) => return None,
    };
    built_in.append(&mut results);
    built_in.append(&mut external);
    Some((built_in, plan))
}

/// The update plan to `target` (`crate::plan`) over `view`, judged at the
/// time the checks are (`checks::Context`), as the status keeps it.
pub(crate) fn plan_of(
    view: &crate::view::ClusterView,
    target: &Target,
    clock: Timestamp,
) -> PlanSummary {
    let ctx = crate::checks::Context::new(view, target, clock);
    let plan = crate::plan::plan_to(view, target, ctx.kind, ctx.now);
    crate::plan::status::summary(&plan, ctx.now)
}

/// The update as external checks are told it: the target, at the version
/// the update graph gives its digest, and the release the cluster runs (the
/// newest completed one, else the desired one). Whether the graph offers
/// the target says nothing of whether it may run (`jobs::trusted`).
fn update_of(cv: Option<&ClusterVersion>, image: &str) -> jobs::Update {
    let completed = cv.and_then(|cv| cv.status.history.iter().find(|h| h.state == "Completed"));
    let (current_image, current_version) = match (completed, cv) {
        (Some(h), _) => (h.image.clone(), Version::parse(&h.version)),
        (None, Some(cv)) => (
            cv.status.desired.image.clone(),
            Version::parse(&cv.status.desired.version),
        ),
        (None, None) => (String::new(), None),
    };
    let graph_version = cv.and_then(|cv| cv.version_of_image(image));
    jobs::Update {
        target_image: image.to_owned(),
        target_version: graph_version.and_then(|v| Version::parse(&v)),
        current_image,
        current_version,
    }
}
