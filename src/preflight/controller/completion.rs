//! Predicted against actual: once the ClusterVersion's history says an
//! update completed, how long its control plane took against what the plan
//! in the target's result predicted. Recorded once in that result's
//! status (`updateDuration`, which is also how a later leader knows it was
//! said), then observed as a ratio (`preflight_gate_control_plane_duration_ratio`)
//! and said in an Event on the ClusterVersion.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use serde_json::json;
use tracing::{info, warn};

use super::Ctx;
use crate::model::ClusterVersion;
use crate::model::UpdatePreflight;
use crate::model::release::ReleaseKey;
use crate::model::results::{UpdateDuration, duration_words};

/// The reason of the Event that compares them.
pub(crate) const REASON: &str = "UpdateDurationPredicted";

/// An update the history says completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Completed {
    pub version: String,
    pub image: String,
    pub started: Timestamp,
    pub completed: Timestamp,
}

impl Completed {
    pub fn seconds(&self) -> u64 {
        self.completed
            .duration_since(self.started)
            .as_secs()
            .unsigned_abs()
    }
}

/// The newest entry of `cv`'s history when it is a completed update: not
/// the install (the oldest entry), with both times, in order, and an image
/// to find its result by.
pub(crate) fn newest_completed(cv: &ClusterVersion) -> Option<Completed> {
    let history = &cv.status.history;
    let newest = history.first().filter(|_| history.len() > 1)?;
    if newest.state != "Completed" || newest.image.is_empty() {
        return None;
    }
    let (started, completed) = (newest.started_time?, newest.completion_time?);
    (completed >= started).then(|| Completed {
        version: newest.version.clone(),
        image: newest.image.clone(),
        started,
        completed,
    })
}

/// What to record of `done` in `result` (the target's own result): the
/// actual duration beside the plan's prediction. None when it is recorded
/// already, when the result holds no plan, or when its plan was computed
/// after the update completed (it may count the update itself).
pub(crate) fn record(done: &Completed, result: &UpdatePreflight) -> Option<UpdateDuration> {
    let status = result.status.as_ref()?;
    if status
        .update_duration
        .as_ref()
        .and_then(|d| d.completed_at.as_ref())
        .is_some_and(|at| at.0 == done.completed)
    {
        return None;
    }
    let plan = status.plan.as_ref()?;
    if plan
        .computed_at
        .as_ref()
        .is_none_or(|at| at.0 > done.completed)
    {
        return None;
    }
    let cp = &plan.control_plane;
    Some(UpdateDuration {
        started_at: Some(Time(done.started)),
        completed_at: Some(Time(done.completed)),
        control_plane_seconds: done.seconds(),
        predicted_p50_seconds: cp.p50_seconds,
        predicted_p90_seconds: cp.p90_seconds,
        origin: cp.origin.clone(),
    })
}

/// The Event's words: how long it took, what was predicted, and how the
/// two compare. A Warning when it took longer than the P90.
pub(crate) fn note(done: &Completed, record: &UpdateDuration) -> (EventType, String) {
    let actual = record.control_plane_seconds;
    let (p50, p90) = (record.predicted_p50_seconds, record.predicted_p90_seconds);
    let origin = match record.origin.as_str() {
        "history" => "from this cluster's own updates",
        "documented" => "from the documented 60 to 120 minutes",
        _ => "from an unknown source",
    };
    let ratio = if p50 == 0 {
        String::new()
    } else {
        format!(", {:.2} times the P50", actual as f64 / p50 as f64)
    };
    let over = actual > p90;
    let text = format!(
        "The control plane's update to {} took {}; the plan predicted about {} (P90 {}, {origin}){ratio}{}",
        crate::model::text::clean(&done.version, 60),
        duration_words(actual),
        duration_words(p50),
        duration_words(p90),
        if over { ": longer than its P90" } else { "" }
    );
    (
        if over {
            EventType::Warning
        } else {
            EventType::Normal
        },
        text,
    )
}

/// Records, observes and says the newest completed update of `cv`, once:
/// `objects` are every UpdatePreflight (just listed), `reference` the
/// ClusterVersion the Event is about.
pub(super) async fn observe(
    ctx: &Ctx,
    api: &Api<UpdatePreflight>,
    cv: &ClusterVersion,
    reference: &ObjectReference,
    objects: &[UpdatePreflight],
) {
    let Some(done) = newest_completed(cv) else {
        return;
    };
    let name = ReleaseKey::from_image(&done.image).object_name();
    let Some(result) = objects
        .iter()
        .find(|o| o.metadata.name.as_deref() == Some(name.as_str()))
    else {
        return;
    };
    let Some(record) = record(&done, result) else {
        return;
    };
    // Written first: the record is how any later leader knows it was
    // said; a write that fails is tried again at the next refresh.
    let params = PatchParams {
        field_manager: Some(crate::model::vouch::FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(json!({"status": {"updateDuration": record}}));
    if let Err(e) = api.patch_status(&name, &params, &patch).await {
        warn!(%name, error = %e, "cannot record the completed update's duration");
        return;
    }
    ctx.metrics.controller.update_completed(
        &record.origin,
        record.control_plane_seconds,
        record.predicted_p50_seconds,
    );
    let (type_, text) = note(&done, &record);
    info!(version = %done.version, actual = record.control_plane_seconds,
        predicted = record.predicted_p50_seconds, "{text}");
    let event = Event {
        type_,
        reason: REASON.into(),
        note: Some(text),
        action: "UpdateCompleted".into(),
        secondary: Some(ObjectReference {
            api_version: Some("preflight.dev/v1alpha1".into()),
            kind: Some("UpdatePreflight".into()),
            name: Some(name),
            ..Default::default()
        }),
    };
    if let Err(e) = ctx.recorder.publish(&event, reference).await {
        warn!(error = %e, "cannot publish the completed update's Event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const IMAGE: &str = "quay.io/ocp/release@sha256:4444";

    fn cv(history: Value) -> ClusterVersion {
        serde_json::from_value(json!({"metadata": {"name": "version"}, "spec": {},
            "status": {"desired": {"version": "4.15.4", "image": IMAGE}, "history": history}}))
        .unwrap()
    }

    fn entry(state: &str, version: &str, image: &str, started: &str, done: Option<&str>) -> Value {
        json!({"state": state, "version": version, "image": image,
               "startedTime": started, "completionTime": done, "verified": true})
    }

    fn install() -> Value {
        entry(
            "Completed",
            "4.15.3",
            "quay.io/ocp/release@sha256:3333",
            "2026-10-01T10:00:00Z",
            Some("2026-10-01T10:40:00Z"),
        )
    }

    fn completed() -> Completed {
        Completed {
            version: "4.15.4".into(),
            image: IMAGE.into(),
            started: "2026-11-30T10:00:00Z".parse().unwrap(),
            completed: "2026-11-30T11:12:00Z".parse().unwrap(),
        }
    }

    #[test]
    fn the_newest_completed_update_is_found_and_nothing_else() {
        let done = entry(
            "Completed",
            "4.15.4",
            IMAGE,
            "2026-11-30T10:00:00Z",
            Some("2026-11-30T11:12:00Z"),
        );
        assert_eq!(
            newest_completed(&cv(json!([done, install()]))),
            Some(completed())
        );
        assert_eq!(completed().seconds(), 72 * 60);
        // Under way, the install alone, or times out of order: nothing.
        let partial = entry("Partial", "4.15.4", IMAGE, "2026-11-30T10:00:00Z", None);
        assert_eq!(newest_completed(&cv(json!([partial, install()]))), None);
        assert_eq!(newest_completed(&cv(json!([install()]))), None);
        let backwards = entry(
            "Completed",
            "4.15.4",
            IMAGE,
            "2026-11-30T12:00:00Z",
            Some("2026-11-30T11:12:00Z"),
        );
        assert_eq!(newest_completed(&cv(json!([backwards, install()]))), None);
    }

    fn result(plan_at: Option<&str>, recorded: Option<&str>) -> UpdatePreflight {
        let mut status = json!({"phase": "Passed"});
        if let Some(at) = plan_at {
            status["plan"] = json!({"computedAt": at, "p50Seconds": 5400, "p90Seconds": 9000,
                "controlPlane": {"p50Seconds": 3600, "p90Seconds": 6000, "source": "history", "samples": 4}});
        }
        if let Some(at) = recorded {
            status["updateDuration"] = json!({"completedAt": at, "controlPlaneSeconds": 1});
        }
        serde_json::from_value(
            json!({"metadata": {"name": ReleaseKey::from_image(IMAGE).object_name()},
            "spec": {"image": IMAGE}, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn the_prediction_is_the_control_planes_of_a_plan_made_before_the_completion() {
        let r = record(&completed(), &result(Some("2026-11-30T09:00:00Z"), None)).unwrap();
        assert_eq!(
            (
                r.control_plane_seconds,
                r.predicted_p50_seconds,
                r.predicted_p90_seconds
            ),
            (4320, 3600, 6000)
        );
        assert_eq!(r.origin, "history");
        assert_eq!(r.completed_at, Some(Time(completed().completed)));
        // A plan made after the update completed may count it: no record.
        assert_eq!(
            record(&completed(), &result(Some("2026-11-30T11:30:00Z"), None)),
            None
        );
        // Nor without a plan.
        assert_eq!(record(&completed(), &result(None, None)), None);
    }

    #[test]
    fn a_completion_is_recorded_once() {
        let said = result(Some("2026-11-30T09:00:00Z"), Some("2026-11-30T11:12:00Z"));
        assert_eq!(record(&completed(), &said), None);
        // An older record is of another update.
        let older = result(Some("2026-11-30T09:00:00Z"), Some("2026-10-01T10:40:00Z"));
        assert!(record(&completed(), &older).is_some());
    }

    #[test]
    fn the_event_compares_them_and_warns_past_the_p90() {
        let r = record(&completed(), &result(Some("2026-11-30T09:00:00Z"), None)).unwrap();
        let (type_, text) = note(&completed(), &r);
        assert_eq!(type_, EventType::Normal);
        assert_eq!(
            text,
            "The control plane's update to 4.15.4 took 1h12m; the plan predicted about 1h00m (P90 1h40m, from this cluster's own updates), 1.20 times the P50"
        );
        let slow = UpdateDuration {
            control_plane_seconds: 7200,
            ..r
        };
        let (type_, text) = note(&completed(), &slow);
        assert_eq!(type_, EventType::Warning);
        assert!(
            text.ends_with("2.00 times the P50: longer than its P90"),
            "{text}"
        );
    }
}
