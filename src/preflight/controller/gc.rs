//! Garbage collection, within each refresh: an auto-created object whose
//! target the update graph no longer offers (nor the cluster runs or is
//! asked to run) is deleted once it has been idle for `gc_grace`, and its
//! results are exported no longer.

use std::collections::HashSet;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use tracing::info;

use super::Ctx;
use crate::model::annotations::REQUESTED_AT;
use crate::model::release::ReleaseKey;
use crate::model::{ClusterVersion, Resolution, UpdatePreflight};
use crate::preflight::live::AUTO_CREATED;
use crate::preflight::live::RunRequest;

/// Deletes what is no longer wanted among `objects` (all of them, listed
/// after `mark` was taken), and keeps exporting the results of the rest.
pub(super) async fn collect(
    ctx: &Ctx,
    api: &Api<UpdatePreflight>,
    cv: &ClusterVersion,
    offered: &[RunRequest],
    objects: Vec<UpdatePreflight>,
    mark: u64,
) -> Result<(), kube::Error> {
    let mut wanted: HashSet<ReleaseKey> = offered
        .iter()
        .map(|t| ReleaseKey::from_image(&t.image))
        .collect();
    wanted.insert(ReleaseKey::from_image(&cv.status.desired.image));
    if let Resolution::Target(target) = cv.resolve_target() {
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
                .and_then(|v| v.parse::<Timestamp>().ok())
                // A stamp in the future keeps nothing alive for longer.
                .map(|t| t.min(now)),
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
        .results
        .retain(kept.iter().map(String::as_str), mark);
    Ok(())
}
