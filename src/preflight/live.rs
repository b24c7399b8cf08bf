//! The live results source: a reflector of `UpdatePreflight` objects fed by
//! a watch, and the run triggers of the webhook's cache misses, which create
//! the object or stamp `preflight.dev/requested-at` on it, in the background.
//! A second watch, of the ClusterVersion, says which targets the update
//! graph offers: the only ones a review may start a run for (the trust
//! model: a review body never causes work by itself).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::admission::ports::{Lookup, ResultLookup, RunRequest, RunTrigger};
use crate::cluster::cluster_versions;
use crate::metrics::{EffectKind, Metrics};
use crate::model::ClusterVersion;
use crate::model::ResultCache;
use crate::model::UpdatePreflight;
use crate::model::UpdatePreflightSpec;
use crate::model::release::ReleaseKey;
use crate::model::vouch::StatusWriter;
use crate::preflight::result_key::SharedKey;

/// Stamped on an object to ask for a new run.
pub(crate) const REQUESTED_AT: &str = "preflight.dev/requested-at";
/// Labels objects the gate made itself, which it may garbage-collect.
pub(crate) const AUTO_CREATED: &str = "preflight.dev/auto-created";

/// How long a trigger for one release suppresses the next.
const TRIGGER_DEBOUNCE: Duration = Duration::from_secs(30);
/// How long one trigger may take against the API server.
const TRIGGER_TIMEOUT: Duration = Duration::from_secs(5);

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
    triggers: mpsc::Sender<RunRequest>,
    recent: Mutex<HashMap<ReleaseKey, Instant>>,
    /// The releases the ClusterVersion's update graph offers, from its
    /// watch (never from a review), each with the pullspec the graph gives.
    offered: RwLock<HashMap<ReleaseKey, String>>,
    metrics: Metrics,
    /// The key the gate's results are signed with (`model::vouch`).
    result_key: Arc<SharedKey>,
}

impl LiveSource {
    /// Starts the watch and the trigger task.
    pub fn spawn(
        client: kube::Client,
        stale_after: Duration,
        metrics: Metrics,
        result_key: Arc<SharedKey>,
    ) -> Arc<Self> {
        let (triggers, rx) = mpsc::channel(64);
        let source = Arc::new(Self {
            cache: ResultCache::default(),
            health: WatchHealth::default(),
            stale_after,
            triggers,
            recent: Mutex::new(HashMap::new()),
            offered: RwLock::new(HashMap::new()),
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
                .watch(api.clone())
                .instrument(info_span!("results_watch")),
        );
        tokio::spawn(trigger_loop(api, rx).instrument(info_span!("run_triggers")));
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
                        Event::InitApply(object) => buffer.push(object),
                        Event::InitDone => {
                            self.cache.replace(std::mem::take(&mut buffer));
                            if !self.health.synced.swap(true, Ordering::Relaxed) {
                                info!(objects = self.cache.len(), "results cache synced");
                            }
                        }
                        Event::Apply(object) => self.cache.apply(object),
                        Event::Delete(object) => self
                            .cache
                            .delete(object.metadata.name.as_deref().unwrap_or("")),
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

    /// Keeps `offered` to what the ClusterVersion `version` offers.
    async fn watch_offers(self: Arc<Self>, api: Api<DynamicObject>) {
        let config = watcher::Config::default().fields("metadata.name=version");
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => object,
                Ok(Event::Delete(_)) => {
                    self.offered
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .clear();
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
            let keys: HashMap<ReleaseKey, String> = offered(&cv)
                .into_iter()
                .map(|r| (ReleaseKey::from_image(&r.image), r.image))
                .collect();
            *self.offered.write().unwrap_or_else(|e| e.into_inner()) = keys;
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
        Lookup {
            result: self.cache.get(key),
            trusted: self.trusted(),
            expires: true,
            status_writer: Some(StatusWriter {
                field_manager: crate::model::vouch::FIELD_MANAGER,
                key: self.result_key.get(),
            }),
        }
    }

    fn is_ready(&self) -> bool {
        self.health.synced.load(Ordering::Relaxed)
    }

    fn runs_on_miss(&self) -> bool {
        true
    }

    fn may_run(&self, key: &ReleaseKey) -> bool {
        self.offered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key)
    }
}

impl RunTrigger for LiveSource {
    fn request_run(&self, mut request: RunRequest) {
        let key = ReleaseKey::from_image(&request.image);
        let offered = self
            .offered
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let Some(pullspec) = offered else {
            // The decision asks only for offered targets; this is the
            // backstop should that ever change.
            warn!(%key, "a run for a target the update graph does not offer is not started");
            return;
        };
        // The gate's own object names the release as the graph does: a
        // review may name any host with the digest, and the extraction pod
        // pulls the object's image.
        request.image = pullspec;
        {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            recent.retain(|_, at| now.duration_since(*at) < TRIGGER_DEBOUNCE);
            if recent.contains_key(&key) {
                debug!(%key, "a run was asked for moments ago");
                return;
            }
            recent.insert(key.clone(), now);
        }
        // Stamp the object the cache holds for this release, if any.
        request.existing = self.cache.get(&key).and_then(|o| o.metadata.name.clone());
        if self.triggers.try_send(request).is_err() {
            self.metrics.effects.failed(EffectKind::Run);
            warn!(%key, "run trigger queue full; the next review will ask again");
            self.recent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&key);
        }
    }
}

async fn trigger_loop(api: Api<UpdatePreflight>, mut rx: mpsc::Receiver<RunRequest>) {
    while let Some(request) = rx.recv().await {
        match tokio::time::timeout(TRIGGER_TIMEOUT, trigger(&api, &request)).await {
            Ok(Ok(name)) => info!(image = %request.image, %name, "preflight run requested"),
            Ok(Err(e)) => {
                warn!(image = %request.image, error = %e, "cannot request a preflight run")
            }
            Err(_) => warn!(image = %request.image, "requesting a preflight run timed out"),
        }
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
    let status = &cv.status;
    status
        .available_updates
        .iter()
        .chain(status.conditional_updates.iter().map(|c| &c.release))
        .filter(|r| !r.image.is_empty())
        .map(|r| RunRequest {
            image: r.image.clone(),
            version: (!r.version.is_empty()).then(|| r.version.clone()),
            existing: None,
        })
        .collect()
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

    /// A source whose graph offers `offered`, and the runs it asks for.
    fn source(offered: &[&str]) -> (LiveSource, mpsc::Receiver<RunRequest>) {
        let (triggers, rx) = mpsc::channel(4);
        let source = LiveSource {
            cache: ResultCache::default(),
            health: WatchHealth::default(),
            stale_after: Duration::from_secs(60),
            triggers,
            recent: Mutex::new(HashMap::new()),
            offered: RwLock::new(
                offered
                    .iter()
                    .map(|image| (ReleaseKey::from_image(image), (*image).to_owned()))
                    .collect(),
            ),
            metrics: Metrics::new().unwrap(),
            result_key: SharedKey::fixed(Err("none in this test".into())),
        };
        (source, rx)
    }

    /// A review may name any host with an offered digest: the object the
    /// gate creates, whose image its extraction pod pulls, names the
    /// graph's pullspec.
    #[test]
    fn the_run_names_the_graphs_pullspec_not_the_reviews() {
        let graph = format!("quay.io/openshift-release-dev/ocp-release@{DIGEST}");
        let (source, mut rx) = source(&[&graph]);
        source.request_run(RunRequest {
            image: format!("evil.example/x@{DIGEST}"),
            version: Some("4.16.3".into()),
            existing: None,
        });
        let asked = rx.try_recv().expect("a run is asked for");
        assert_eq!(asked.image, graph);
        assert_eq!(asked.version.as_deref(), Some("4.16.3"));
    }

    #[test]
    fn a_digest_the_graph_does_not_offer_starts_nothing() {
        let (source, mut rx) = source(&[]);
        source.request_run(RunRequest {
            image: format!("evil.example/x@{DIGEST}"),
            ..Default::default()
        });
        assert!(rx.try_recv().is_err());
    }
}
