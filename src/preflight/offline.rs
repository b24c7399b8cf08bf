//! Results computed from a snapshot of a cluster, for `serve` without a
//! cluster: the real engine over offline data. The targets the snapshot's
//! ClusterVersion offers or targets are checked at start-up, as the
//! controller checks them in a cluster; a review never starts a run, so any
//! other target is checked offline with `preflight-gate check`. Each result carries the
//! update plan in its status, as the controller writes it, so the webhook's
//! plan line and maintenance window work on a snapshot too.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::info;

use crate::admission::ports::{Lookup, ResultLookup};
use crate::model::UpdatePreflight;
use crate::model::UpdatePreflightSpec;
use crate::model::UpdatePreflightStatus;
use crate::model::release::ReleaseKey;
use crate::model::results::PlanSummary;
use crate::model::standing::Exemptions;
use crate::model::status::{self, Ending};
use crate::model::{Resolution, Target};
use crate::preflight::live::RunRequest;
use crate::preflight::result_cache::ResultCache;
use crate::suite::{self, Limits};
use crate::view::ClusterView;

/// Preflight results over a fixed snapshot.
pub struct SnapshotSource {
    view: Arc<ClusterView>,
    cache: Arc<ResultCache>,
    origin: String,
}

impl SnapshotSource {
    /// Checks every release the snapshot's ClusterVersion offers or targets.
    pub fn new(view: ClusterView, origin: impl Into<String>, limits: Limits) -> Self {
        let source = Self {
            view: Arc::new(view),
            cache: Arc::new(ResultCache::default()),
            origin: origin.into(),
        };
        let offered: Vec<RunRequest> = source
            .view
            .cluster_version
            .iter()
            .flat_map(super::live::checked_itself)
            .collect();
        for request in &offered {
            source
                .cache
                .apply(evaluate(&source.view, request, Timestamp::now(), limits));
        }
        info!(origin = %source.origin, targets = offered.len(), "checked the snapshot's offered targets");
        source
    }

    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

/// Runs the catalogue over the snapshot for one target, as an
/// `UpdatePreflight` a controller would have written.
pub fn evaluate(
    view: &Arc<ClusterView>,
    request: &RunRequest,
    now: Timestamp,
    limits: Limits,
) -> UpdatePreflight {
    // The request's version is the one the webhook resolved.
    let target = match view.resolve(&request.image) {
        Resolution::Target(known) if known.version.is_some() => known,
        _ => Target::image(&request.image, request.version.clone()),
    };
    let results = suite::run(view.clone(), &target, now, None, limits);
    // The plan of the same view, at the same time; a plan that panics is
    // no plan, never a lost result.
    let plan =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plan_of(view, &target, now))).ok();
    held_result(
        &request.image,
        request.version.clone(),
        results,
        &Exemptions::default(),
        plan,
        now,
    )
}

/// A finished run held in memory, as the controller would have written
/// it: the gate's own object for `image`, its results concluded by
/// `exemptions`, with its plan. The snapshot source and the hosted
/// clusters' results both hold theirs so.
pub(crate) fn held_result(
    image: &str,
    version: Option<String>,
    results: Vec<crate::model::CheckResult>,
    exemptions: &Exemptions,
    plan: Option<PlanSummary>,
    now: Timestamp,
) -> UpdatePreflight {
    let name = ReleaseKey::from_image(image).object_name();
    let mut object = UpdatePreflight::new(
        &name,
        UpdatePreflightSpec {
            image: image.to_owned(),
            version,
            checks: Vec::new(),
        },
    );
    object.metadata.generation = Some(1);
    let (phase, reason, message) = status::conclusion(&results, exemptions);
    let mut status = UpdatePreflightStatus {
        start_time: Some(Time(now)),
        ..Default::default()
    };
    status::complete(
        &mut status,
        results,
        exemptions,
        Ending {
            phase,
            reason,
            message,
            generation: Some(1),
            at: now,
        },
    );
    status.plan = plan;
    object.status = Some(status);
    object
}

/// The update plan to `target` over `view`, judged at the time the checks
/// are (the snapshot's own time, else `clock`), as the status keeps it.
fn plan_of(view: &ClusterView, target: &Target, clock: Timestamp) -> PlanSummary {
    let ctx = crate::checks::Context::new(view, target, clock);
    let plan = crate::plan::plan_to(view, target, ctx.kind, ctx.now);
    crate::plan::status::summary(&plan, ctx.now)
}

impl ResultLookup for SnapshotSource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup::fixed(self.cache.get(key))
    }

    fn is_ready(&self) -> bool {
        true
    }

    /// Everything it checks was checked at start-up.
    fn runs_checks(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Phase;

    const FAILS: &str = "quay.io/openshift-release-dev/ocp-release@sha256:5e3a6c1f0b2748d9e1c7a0b8f6d3e2c1b0a9f8e7d6c5b4a39281706f5e4d3c2b";
    /// 4.14.12, a patch update.
    const PATCH: &str = "quay.io/openshift-release-dev/ocp-release@sha256:9d1c2b3a4f5e60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";

    #[test]
    fn the_sample_snapshots_offered_targets_are_checked_up_front() {
        let source = SnapshotSource::new(
            crate::cluster::snapshot::sample::load().unwrap(),
            "sample",
            Limits::default(),
        );
        let phase = |image: &str| {
            let found = source
                .lookup(&ReleaseKey::from_image(image))
                .result
                .expect("checked at start-up");
            found.status.as_ref().and_then(|s| s.phase)
        };
        assert_eq!(phase(FAILS), Some(Phase::Failed));
        // The patch update is blocked only by the sample's firing
        // KubeContainerWaiting, as `oc adm upgrade recommend` blocks on it.
        assert_eq!(phase(PATCH), Some(Phase::Failed));
        let patch = source
            .lookup(&ReleaseKey::from_image(PATCH))
            .result
            .unwrap();
        let blocking: Vec<(&str, &[String])> = patch
            .status
            .as_ref()
            .unwrap()
            .results
            .iter()
            .filter(|r| r.outcome == crate::model::Outcome::Fail)
            .map(|r| (r.name.as_str(), &r.risks[..]))
            .collect();
        assert_eq!(
            blocking,
            [(
                "PrecheckAlertsFiring",
                &["KubeContainerWaiting".to_owned()][..]
            )]
        );
        let lookup = source.lookup(&ReleaseKey::from_image(FAILS));
        assert!(lookup.trusted && !lookup.expires);
    }

    /// The review of examples/reviews/ for 4.14.12, with the maintenance
    /// window already on the ClusterVersion, ending `minutes` from `now`.
    fn windowed_review(now: Timestamp, minutes: i64) -> crate::admission::Request {
        let mut review: serde_json::Value = serde_json::from_str(include_str!(
            "../../examples/reviews/update-to-4.14.12.json"
        ))
        .unwrap();
        let end = (now + jiff::SignedDuration::from_mins(minutes))
            .round(jiff::Unit::Second)
            .unwrap()
            .to_string();
        for object in ["object", "oldObject"] {
            review["request"][object]["metadata"]["annotations"]
                [crate::model::annotations::WINDOW_END] = serde_json::json!(end);
        }
        crate::admission::review::parse(review.to_string().as_bytes()).unwrap()
    }

    /// Served from a snapshot, the results carry the plan, and the
    /// maintenance window is judged by it: never "no plan".
    #[test]
    fn the_snapshots_results_carry_the_plan_the_window_is_judged_by() {
        let source = SnapshotSource::new(
            crate::cluster::snapshot::sample::load().unwrap(),
            "sample",
            Limits::default(),
        );
        let result = source
            .lookup(&ReleaseKey::from_image(PATCH))
            .result
            .unwrap();
        let plan = result
            .status
            .as_ref()
            .unwrap()
            .plan
            .clone()
            .expect("a plan");
        // The sample's history holds no completed update: the documented
        // control plane, then its worker pool.
        assert_eq!(plan.control_plane.origin, "documented");
        assert!(
            plan.p90_seconds > plan.control_plane.p90_seconds,
            "{plan:?}"
        );
        assert!(
            plan.pools
                .iter()
                .any(|p| p.name == "worker" && p.batches > 0)
        );

        let now = Timestamp::now();
        let policy = crate::admission::Policy::default();
        let verdict = |minutes| {
            crate::admission::decide(&windowed_review(now, minutes), &source, &policy, now)
                .into_final()
                .expect("no override claimed")
        };
        // A window shorter than the plan's P90 is denied by it (or, when
        // checks fail too, said beside them)...
        let short = verdict(30);
        assert!(!short.allowed);
        assert!(
            short.message.contains("its P90 of") && short.message.contains("maintenance window"),
            "{}",
            short.message
        );
        // ...one that holds it is not, and neither is ever "no plan".
        let long = verdict(23 * 60);
        for v in [&short, &long] {
            assert!(!v.message.contains("carry no update plan"), "{}", v.message);
        }
        assert!(
            !long.message.contains("may not finish") && !long.message.contains("Nor may it finish"),
            "{}",
            long.message
        );
        if long.allowed {
            assert!(
                long.warnings
                    .iter()
                    .any(|w| w.contains("within the maintenance window")),
                "{:?}",
                long.warnings
            );
        }
    }

    /// A review never starts a run, not even in memory: a target the
    /// snapshot neither offers nor targets has no result, and the denial
    /// says how to check it.
    #[test]
    fn a_target_the_snapshot_does_not_offer_is_not_checked_by_a_review() {
        let source = SnapshotSource::new(
            crate::cluster::snapshot::sample::load().unwrap(),
            "sample",
            Limits::default(),
        );
        let image = "quay.io/openshift-release-dev/ocp-release@sha256:1234";
        let key = ReleaseKey::from_image(image);
        assert!(source.lookup(&key).result.is_none());
        assert!(!source.runs_checks());
        let review = review_to(image);
        let verdict = crate::admission::decide(
            &review,
            &source,
            &crate::admission::Policy::default(),
            Timestamp::now(),
        )
        .into_final()
        .unwrap();
        assert!(!verdict.allowed);
        assert!(verdict.effects.is_empty(), "{:?}", verdict.effects);
        assert!(
            verdict.message.contains("starts no run"),
            "{}",
            verdict.message
        );
        assert!(source.lookup(&key).result.is_none());
    }

    /// A cluster at `current` whose update graph offers `offered`, each
    /// `(version, image)`.
    fn cluster_at(current: &str, offered: &[(&str, &str)]) -> ClusterView {
        let updates: Vec<serde_json::Value> = offered
            .iter()
            .map(|(version, image)| serde_json::json!({"version": version, "image": image}))
            .collect();
        let mut view = ClusterView::default();
        view.add(
            &crate::view::kinds::CLUSTER_VERSION,
            serde_json::json!({
                "kind": "ClusterVersion", "metadata": {"name": "version"},
                "spec": {"channel": "candidate-5.0"},
                "status": {
                    "desired": {"version": current, "image": format!("quay.io/ocp/release:{current}")},
                    "history": [{"state": "Completed", "version": current, "verified": true}],
                    "availableUpdates": updates,
                }
            }),
        )
        .unwrap();
        view
    }

    /// A review of the ClusterVersion's target changed to `image`.
    fn review_to(image: &str) -> crate::admission::Request {
        crate::admission::review::parse(
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u", "name": "version", "operation": "UPDATE",
                    "resource": {"group": "config.openshift.io", "version": "v1", "resource": "clusterversions"},
                    "userInfo": {"username": "alice"},
                    "object": {"metadata": {"name": "version"},
                               "spec": {"desiredUpdate": {"image": image}}},
                    "oldObject": {"metadata": {"name": "version"}, "spec": {}}
                }
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap()
    }

    /// The webhook's denial of a hop the CVO refuses carries the CVO's
    /// reason, and the update to 5.0 from 4.22 is not refused for its
    /// path.
    #[test]
    fn the_denial_of_a_hop_the_cvo_refuses_names_the_cvos_reason() {
        const TO_5_0: &str = "quay.io/ocp/release@sha256:50";
        const TO_5_1: &str = "quay.io/ocp/release@sha256:51";
        let cases = [
            ("4.22.3", TO_5_1, Some("MajorVersionUpdate")),
            ("4.21.7", TO_5_0, Some("MultipleMinorVersionsUpdate")),
            ("4.22.3", TO_5_0, None),
        ];
        for (current, image, reason) in cases {
            let view = cluster_at(current, &[("5.0.1", TO_5_0), ("5.1.0", TO_5_1)]);
            let source = SnapshotSource::new(view, "test", Limits::default());
            let path = source
                .lookup(&ReleaseKey::from_image(image))
                .result
                .expect("offered, so checked")
                .status
                .clone()
                .unwrap()
                .results
                .into_iter()
                .find(|r| r.name == "UpdatePath")
                .unwrap();
            let verdict = crate::admission::decide(
                &review_to(image),
                &source,
                &crate::admission::Policy::default(),
                Timestamp::now(),
            )
            .into_final()
            .unwrap();
            match reason {
                Some(reason) => {
                    assert_eq!(
                        path.outcome,
                        crate::model::Outcome::Fail,
                        "{}",
                        path.message
                    );
                    assert!(!verdict.allowed);
                    assert!(
                        verdict.message.contains("UpdatePath") && verdict.message.contains(reason),
                        "{current} to {image}: {}",
                        verdict.message
                    );
                }
                None => {
                    assert_eq!(
                        path.outcome,
                        crate::model::Outcome::Pass,
                        "{}",
                        path.message
                    );
                    assert!(
                        !verdict.message.contains("MajorVersionUpdate")
                            && !verdict.message.contains("MultipleMinorVersionsUpdate"),
                        "{}",
                        verdict.message
                    );
                }
            }
        }
    }
}
