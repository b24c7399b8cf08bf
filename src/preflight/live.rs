//! The live results source: a reflector of `UpdatePreflight` objects fed by
//! a watch. A second watch, of the ClusterVersion, says which targets the
//! gate checks by itself (those its update graph offers or its stored
//! target names), so that a denial can say whether a result is on its way.
//! Nothing here starts a run: a review only ever asks a question (the trust
//! model: a review body never causes work), and runs start from stored
//! objects and the controller's own schedule. [`trigger`] is how the
//! controller and `preflight-gate run` ask for one.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::admission::ports::{Lookup, ResultLookup};
use crate::cluster::cluster_versions;
use crate::metrics::Metrics;
use crate::model::ClusterVersion;
use crate::model::UpdatePreflight;
use crate::model::UpdatePreflightSpec;
use crate::model::annotations::REQUESTED_AT;
use crate::model::release::ReleaseKey;
use crate::model::vouch::{NewestRuns, StatusWriter};
use crate::preflight::result_cache::ResultCache;
use crate::preflight::result_key::SharedKey;

/// Labels objects the gate made itself, which it may garbage-collect.
pub(crate) const AUTO_CREATED: &str = "preflight.dev/auto-created";

/// A request to run the preflight for a release: an object created, or the
/// one that describes it stamped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunRequest {
    pub image: String,
    pub version: Option<String>,
    /// The name of an object that already describes the release.
    pub existing: Option<String>,
}

/// Whether the watch can be trusted.
#[derive(Default)]
struct WatchHealth {
    synced: AtomicBool,
    /// When the watch last failed, if it has not recovered since.
    down_since: Mutex<Option<Instant>>,
}

/// Results from the cluster, kept current by a watch.
pub struct LiveSource {
    cache: ResultCache,
    health: WatchHealth,
    /// A watch down for longer than this makes every result stale.
    stale_after: Duration,
    /// The releases the gate checks by itself, from the ClusterVersion's
    /// watch (never from a review): those its update graph offers and its
    /// stored target.
    checked: RwLock<HashSet<ReleaseKey>>,
    /// The ClusterVersion `version` as that watch last saw it.
    cluster_version: RwLock<Option<Arc<ClusterVersion>>>,
    /// The newest signed run of each object the watch delivered, shared
    /// with this replica's controller.
    newest_runs: Arc<NewestRuns>,
    metrics: Metrics,
    /// The key the gate's results are signed with (`model::vouch`).
    result_key: Arc<SharedKey>,
}

impl LiveSource {
    /// Starts the watches.
    pub fn spawn(
        client: kube::Client,
        stale_after: Duration,
        metrics: Metrics,
        result_key: Arc<SharedKey>,
        newest_runs: Arc<NewestRuns>,
    ) -> Arc<Self> {
        let source = Arc::new(Self {
            cache: ResultCache::default(),
            health: WatchHealth::default(),
            stale_after,
            checked: RwLock::new(HashSet::new()),
            cluster_version: RwLock::new(None),
            newest_runs,
            metrics,
            result_key,
        });
        tokio::spawn(
            source
                .clone()
                .watch_offers(cluster_versions(&client))
                .instrument(info_span!("offers_watch")),
        );
        let api: Api<UpdatePreflight> = Api::all(client);
        tokio::spawn(
            source
                .clone()
                .watch(api)
                .instrument(info_span!("results_watch")),
        );
        source
    }

    async fn watch(self: Arc<Self>, api: Api<UpdatePreflight>) {
        let mut buffer = Vec::new();
        let mut events = watcher(api).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    // Init is emitted before the list is even tried: only
                    // what came from the API server proves it answered.
                    if !matches!(event, Event::Init) {
                        self.mark_up();
                    }
                    match event {
                        Event::Init => buffer.clear(),
                        Event::InitApply(object) => {
                            self.remember_run(&object);
                            buffer.push(object);
                        }
                        Event::InitDone => {
                            self.cache.replace(std::mem::take(&mut buffer));
                            if !self.health.synced.swap(true, Ordering::Relaxed) {
                                info!(objects = self.cache.len(), "results cache synced");
                            }
                        }
                        Event::Apply(object) => {
                            self.remember_run(&object);
                            self.cache.apply(object);
                        }
                        Event::Delete(object) => {
                            if let Some(uid) = &object.metadata.uid {
                                self.newest_runs.forget(uid);
                            }
                            self.cache
                                .delete(object.metadata.name.as_deref().unwrap_or(""));
                        }
                    }
                    self.metrics.results.cached(self.cache.len());
                }
                Err(e) => {
                    let mut down = self
                        .health
                        .down_since
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if down.is_none() {
                        warn!(error = %e, "results watch failed; serving cached results until they turn stale");
                        *down = Some(Instant::now());
                    }
                    self.metrics.results.watch_up(false);
                }
            }
        }
    }

    /// Keeps `checked` to what the ClusterVersion `version` offers and
    /// targets.
    async fn watch_offers(self: Arc<Self>, api: Api<DynamicObject>) {
        let config = watcher::Config::default().fields("metadata.name=version");
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => object,
                Ok(Event::Delete(_)) => {
                    self.checked
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .clear();
                    *self
                        .cluster_version
                        .write()
                        .unwrap_or_else(|e| e.into_inner()) = None;
                    continue;
                }
                Ok(_) => continue,
                Err(e) => {
                    debug!(error = %e, "ClusterVersion watch failed; keeping the offers known");
                    continue;
                }
            };
            let cv: ClusterVersion =
                match serde_json::to_value(object).and_then(serde_json::from_value) {
                    Ok(cv) => cv,
                    Err(e) => {
                        warn!(error = %e, "cannot read the ClusterVersion's offers");
                        continue;
                    }
                };
            let keys = checked_itself(&cv)
                .iter()
                .map(|r| ReleaseKey::from_image(&r.image))
                .collect();
            *self.checked.write().unwrap_or_else(|e| e.into_inner()) = keys;
            *self
                .cluster_version
                .write()
                .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(cv));
        }
    }

    /// The ClusterVersion `version` as the watch last saw it, once it has.
    pub fn cluster_version(&self) -> Option<Arc<ClusterVersion>> {
        self.cluster_version
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remembers the object's run when the gate signed it, so that an
    /// older run written back later is refused (`model::vouch`).
    fn remember_run(&self, object: &UpdatePreflight) {
        if let Ok(key) = self.result_key.get() {
            self.newest_runs.observe(object, &key);
        }
    }

    fn mark_up(&self) {
        let mut down = self
            .health
            .down_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(since) = down.take() {
            info!(down_for = ?since.elapsed(), "results watch recovered");
        }
        self.metrics.results.watch_up(true);
    }

    /// Whether cached results can be trusted now.
    fn trusted(&self) -> bool {
        let down = self
            .health
            .down_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.health.synced.load(Ordering::Relaxed)
            && down.is_none_or(|since| since.elapsed() < self.stale_after)
    }
}

/// A watcher over every object.
fn watcher(
    api: Api<UpdatePreflight>,
) -> impl futures::Stream<Item = Result<Event<UpdatePreflight>, watcher::Error>> {
    watcher::watcher(api, watcher::Config::default())
}

impl ResultLookup for LiveSource {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        let result = self.cache.get(key);
        Lookup {
            trusted: self.trusted(),
            expires: true,
            status_writer: Some(StatusWriter {
                field_manager: crate::model::vouch::FIELD_MANAGER,
                key: self.result_key.get(),
                newest_run: result
                    .as_ref()
                    .and_then(|r| r.metadata.uid.as_ref())
                    .and_then(|uid| self.newest_runs.newest(uid)),
            }),
            result,
        }
    }

    fn is_ready(&self) -> bool {
        self.health.synced.load(Ordering::Relaxed)
    }

    fn runs_checks(&self) -> bool {
        true
    }

    fn checks_itself(&self, key: &ReleaseKey) -> bool {
        self.checked
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }
}

/// Stamps `requested-at` on the existing object, or creates one named after
/// the release's digest. Returns the object's name.
pub async fn trigger(
    api: &Api<UpdatePreflight>,
    request: &RunRequest,
) -> Result<String, kube::Error> {
    let name = request
        .existing
        .clone()
        .unwrap_or_else(|| ReleaseKey::from_image(&request.image).object_name());
    let now = jiff::Timestamp::now().to_string();
    let stamp = Patch::Merge(json!({"metadata": {"annotations": {REQUESTED_AT: now}}}));
    match api.patch(&name, &PatchParams::default(), &stamp).await {
        Ok(_) => return Ok(name),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e),
    }
    let mut object = UpdatePreflight::new(
        &name,
        UpdatePreflightSpec {
            image: request.image.clone(),
            version: request.version.clone(),
            checks: Vec::new(),
        },
    );
    object.metadata.labels = Some([(AUTO_CREATED.to_owned(), "true".to_owned())].into());
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(name),
        // Created meanwhile by another replica: that is a run requested too.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(name),
        Err(e) => Err(e),
    }
}

/// Targets the update graph offers the cluster, with their versions.
pub fn offered(cv: &ClusterVersion) -> Vec<RunRequest> {
    cv.offered()
        .map(|r| RunRequest {
            image: r.image.clone(),
            version: (!r.version.is_empty()).then(|| r.version.clone()),
            existing: None,
        })
        .collect()
}

/// The targets the gate checks by itself: those the update graph offers,
/// and the stored target change (`spec.desiredUpdate`, by its image), which
/// may name a release the graph does not offer (set while the gate was
/// down, or forced). Each is then run by the controller's schedule.
pub fn checked_itself(cv: &ClusterVersion) -> Vec<RunRequest> {
    let mut targets = offered(cv);
    let stored = cv
        .spec
        .desired_update
        .as_ref()
        .and_then(|u| u.image.as_deref())
        .filter(|image| ReleaseKey::from_image(image).is_digest());
    if let Some(image) = stored {
        let key = ReleaseKey::from_image(image);
        if !targets
            .iter()
            .any(|t| ReleaseKey::from_image(&t.image) == key)
        {
            targets.push(RunRequest {
                image: image.to_owned(),
                version: None,
                existing: None,
            });
        }
    }
    targets
}

/// The pullspec the update graph gives the release `key`, when it offers it.
pub(crate) fn offered_pullspec(cv: &ClusterVersion, key: &ReleaseKey) -> Option<String> {
    offered(cv)
        .into_iter()
        .map(|r| r.image)
        .find(|image| ReleaseKey::from_image(image) == *key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:4f2e0d3c1b0a99887766554433221100ffeeddccbbaa99887766554433221100";

    fn cluster_version(offered: &str, stored: serde_json::Value) -> ClusterVersion {
        serde_json::from_value(json!({
            "metadata": {"name": "version"},
            "spec": {"desiredUpdate": stored},
            "status": {"availableUpdates": [{"version": "4.16.3", "image": offered}]}
        }))
        .unwrap()
    }

    /// What the gate checks by itself: the graph's offers, and a stored
    /// target by its digest; never a tag, and one object per release.
    #[test]
    fn the_gate_checks_the_graphs_offers_and_the_stored_target_by_itself() {
        let graph = format!("quay.io/openshift-release-dev/ocp-release@{DIGEST}");
        let images = |stored| -> Vec<String> {
            checked_itself(&cluster_version(&graph, stored))
                .into_iter()
                .map(|r| r.image)
                .collect()
        };
        let only_the_graph = vec![graph.clone()];
        assert_eq!(images(serde_json::Value::Null), only_the_graph);
        assert_eq!(
            images(json!({"image": "mirror.local/ocp@sha256:bb"})),
            [graph.clone(), "mirror.local/ocp@sha256:bb".to_owned()]
        );
        assert_eq!(
            images(json!({"image": "mirror.local/ocp:4.16.9"})),
            only_the_graph
        );
        assert_eq!(
            images(json!({"image": format!("mirror.local/ocp@{DIGEST}")})),
            only_the_graph
        );
    }
}
