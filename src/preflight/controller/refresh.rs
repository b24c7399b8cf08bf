//! Proactive refresh: whenever the ClusterVersion changes, and periodically
//! besides, every target its update graph offers, and its stored target,
//! gets an object (which the
//! reconciler then keeps fresh), the offered targets are exported, an update
//! that completed is compared with its plan (`completion`), and what the
//! graph no longer offers is collected (`gc`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tracing::{info, warn};

use k8s_openapi::api::core::v1::ObjectReference;

use super::{Ctx, completion, gc};
use crate::cluster::cluster_versions;
use crate::model::release::ReleaseKey;
use crate::model::{ClusterVersion, UpdatePreflight};
use crate::preflight::live::{checked_itself, trigger};

/// Refreshes when the ClusterVersion changes (a new target offered, one
/// withdrawn) and periodically besides, for garbage collection. Always on,
/// even with `--refresh-interval` 0 (results then never age into a new
/// run): no review starts a run, so this is how an offered or stored
/// target gets its object.
pub(super) async fn refresh_loop(ctx: Arc<Ctx>) {
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
    let reference = ObjectReference {
        api_version: Some("config.openshift.io/v1".into()),
        kind: Some("ClusterVersion".into()),
        name: Some("version".into()),
        uid: cv.metadata.uid.clone(),
        ..Default::default()
    };
    let cv: ClusterVersion =
        serde_json::from_value(serde_json::to_value(cv).map_err(kube::Error::SerdeError)?)
            .map_err(kube::Error::SerdeError)?;
    let api: Api<UpdatePreflight> = Api::all(ctx.client.clone());
    let mark = ctx.metrics.results.mark();
    let objects = api.list(&Default::default()).await?.items;
    // An update completed since: how long it took against its plan.
    completion::observe(ctx, &api, &cv, &reference, &objects).await;
    let known: HashSet<ReleaseKey> = objects
        .iter()
        .map(|o| ReleaseKey::from_image(&o.spec.image))
        .collect();
    let checked = checked_itself(&cv);
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
    ctx.metrics
        .results
        .offered_targets(recommended.chain(conditional));
    for target in &checked {
        if !known.contains(&ReleaseKey::from_image(&target.image)) {
            let name = trigger(&api, target).await?;
            info!(%name, image = %target.image, "checking a target the cluster offers or targets");
        }
    }
    gc::collect(ctx, &api, &cv, &checked, objects, mark).await
}
