//! Results of hosted clusters (HyperShift), for a gate on their management
//! cluster (`serve --hosted-control-planes`): a [`HostedSource`] on every
//! replica watches the HostedClusters, the NodePools and the HyperShift
//! operator's supported versions, reads each hosted cluster (its guest)
//! through its admin kubeconfig, runs [`suite::run_hosted`] for the targets
//! it runs by itself ([`schedule::targets`]) and holds the results in
//! memory, where the decision reads them through [`HostedLookup`].
//!
//! Hosted results are never written as UpdatePreflight objects: each
//! replica computes and holds its own. Nothing stored means nothing to
//! forge or replay (no status to sign, no older run to write back), at the
//! cost of every replica reading every guest. Nothing here writes, to the
//! management cluster or to a guest; a review never starts a run.

pub mod schedule;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, Semaphore};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::admission::ports::{HostedLookup, Lookup, ResultLookup};
use crate::checks::hosted::Hosted;
use crate::metrics::Metrics;
use crate::model::cluster_version::DesiredUpdate;
use crate::model::hosted::{
    self as model, HostedCluster, HostedName, NodePool, SupportError, SupportedVersions,
};
use crate::model::release::{ReleaseKey, Version};
use crate::model::standing::Exemptions;
use crate::model::{Resolution, Target, UpdatePreflight};
use crate::preflight::Source;
use crate::preflight::live::RunRequest;
use crate::suite::{self, Limits};
use crate::view::ClusterView;

use crate::cluster::guest::{self, READ_LIMIT};
use crate::cluster::live::Reads;
use schedule::Ran;

/// Hosted clusters run at once by one replica.
pub const RUNS_AT_ONCE: usize = 2;
/// How often the runner looks again when nothing has changed: for results
/// aging and guests waiting out their backoff.
const TICK: Duration = Duration::from_secs(30);

/// How the runner runs.
#[derive(Clone, Debug)]
pub struct HostedSettings {
    /// A result older than this is run again: half of `--max-result-age`.
    pub refresh_after: Duration,
    pub limits: Limits,
    /// How results are counted into a phase, as the webhook counts them.
    pub exemptions: Exemptions,
    pub runs_at_once: usize,
    pub read_limit: Duration,
}

impl HostedSettings {
    /// Runs renewed at half of `max_result_age`, with the suite's `limits`.
    pub fn new(max_result_age: Duration, limits: Limits, exemptions: Exemptions) -> Self {
        Self {
            refresh_after: max_result_age / 2,
            limits,
            exemptions,
            runs_at_once: RUNS_AT_ONCE,
            read_limit: READ_LIMIT,
        }
    }
}

/// One hosted cluster's results, by release.
type Held = RwLock<HashMap<ReleaseKey, Arc<UpdatePreflight>>>;

/// The state of one watch.
#[derive(Default)]
struct WatchState {
    /// Its first list has been read whole.
    synced: AtomicBool,
    /// Its last word was an answer of the API server, not a failure.
    up: AtomicBool,
}

/// The three watches the results depend on.
#[derive(Default)]
struct Watches {
    clusters: WatchState,
    pools: WatchState,
    operator: WatchState,
}

impl Watches {
    fn each(&self) -> [&WatchState; 3] {
        [&self.clusters, &self.pools, &self.operator]
    }

    fn synced(&self) -> bool {
        self.each().iter().all(|w| w.synced.load(Ordering::Relaxed))
    }

    /// Every watch synced and up: what the results can be trusted by.
    fn healthy(&self) -> bool {
        self.synced() && self.each().iter().all(|w| w.up.load(Ordering::Relaxed))
    }
}

/// Objects of one kind as their watch last saw them, by namespace and name.
struct Mirror<T> {
    objects: RwLock<BTreeMap<(String, String), Arc<T>>>,
}

impl<T> Default for Mirror<T> {
    fn default() -> Self {
        Self {
            objects: RwLock::default(),
        }
    }
}

/// An object's namespace and name, and the object read as `T`; `None` (and
/// a warning) when it cannot be read so.
fn lean<T: DeserializeOwned>(object: DynamicObject) -> Option<((String, String), T)> {
    let at = (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    );
    match serde_json::to_value(object).and_then(serde_json::from_value) {
        Ok(lean) => Some((at, lean)),
        Err(e) => {
            warn!(namespace = %at.0, name = %at.1, error = %e, "cannot read an object the hosted watches delivered");
            None
        }
    }
}

impl<T: DeserializeOwned> Mirror<T> {
    fn replace(&self, objects: Vec<DynamicObject>) {
        let fresh = objects
            .into_iter()
            .filter_map(lean)
            .map(|(at, o)| (at, Arc::new(o)))
            .collect();
        *self.objects.write().unwrap_or_else(|e| e.into_inner()) = fresh;
    }

    fn apply(&self, object: DynamicObject) {
        if let Some((at, o)) = lean(object) {
            self.objects
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(at, Arc::new(o));
        }
    }

    fn delete(&self, object: &DynamicObject) {
        let at = (
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default(),
        );
        self.objects
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&at);
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn all(&self) -> Vec<Arc<T>> {
        self.objects
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    fn len(&self) -> usize {
        self.objects.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Which watch an event belongs to.
#[derive(Clone, Copy, Debug)]
enum Watched {
    Clusters,
    Pools,
    Operator,
}

/// The hosted clusters of a management cluster and the results this
/// replica holds for them.
#[derive(Default)]
pub struct HostedSource {
    clusters: Mirror<HostedCluster>,
    pools: Mirror<NodePool>,
    /// The HyperShift operator's supported-versions ConfigMap.
    operator: Mirror<ConfigMap>,
    results: RwLock<BTreeMap<HostedName, Arc<Held>>>,
    watches: Arc<Watches>,
    /// Woken by every change a watch delivers.
    changed: Notify,
}

/// The API of HostedClusters or NodePools, in every namespace.
fn hypershift(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(model::GROUP, "v1beta1", kind),
        plural,
    );
    Api::all_with(client.clone(), &resource)
}

impl HostedSource {
    /// Starts the watches and the runner.
    pub fn spawn(client: kube::Client, settings: HostedSettings, metrics: Metrics) -> Arc<Self> {
        let hosted = Arc::new(Self::default());
        let watches = [
            (
                Watched::Clusters,
                hypershift(&client, "HostedCluster", "hostedclusters"),
                watcher::Config::default(),
            ),
            (
                Watched::Pools,
                hypershift(&client, "NodePool", "nodepools"),
                watcher::Config::default(),
            ),
            (
                Watched::Operator,
                Api::namespaced_with(
                    client.clone(),
                    model::SUPPORTED_VERSIONS_NAMESPACE,
                    &ApiResource::erase::<ConfigMap>(&()),
                ),
                watcher::Config::default()
                    .fields(&format!("metadata.name={}", model::SUPPORTED_VERSIONS_NAME)),
            ),
        ];
        for (watched, api, config) in watches {
            tokio::spawn(
                hosted
                    .clone()
                    .follow(watched, api, config, metrics.clone())
                    .instrument(info_span!("hosted_watch", watched = ?watched)),
            );
        }
        tokio::spawn(
            hosted
                .clone()
                .run_all(client, settings, metrics)
                .instrument(info_span!("hosted_runs")),
        );
        hosted
    }

    fn mirror_of(&self, watched: Watched) -> (&WatchState, Box<dyn Fn(Change) + Send + '_>) {
        fn apply<T: DeserializeOwned>(mirror: &Mirror<T>, change: Change) {
            match change {
                Change::All(objects) => mirror.replace(objects),
                Change::Apply(object) => mirror.apply(object),
                Change::Delete(object) => mirror.delete(&object),
            }
        }
        match watched {
            Watched::Clusters => (
                &self.watches.clusters,
                Box::new(|c| apply(&self.clusters, c)),
            ),
            Watched::Pools => (&self.watches.pools, Box::new(|c| apply(&self.pools, c))),
            Watched::Operator => (
                &self.watches.operator,
                Box::new(|c| apply(&self.operator, c)),
            ),
        }
    }

    /// Keeps one kind's mirror to what its watch says. A watch that fails
    /// (HyperShift's CRDs not installed yet, no grant) is retried with
    /// backoff, and its failure logged once until it recovers.
    async fn follow(
        self: Arc<Self>,
        watched: Watched,
        api: Api<DynamicObject>,
        config: watcher::Config,
        metrics: Metrics,
    ) {
        let (state, apply) = self.mirror_of(watched);
        let mut buffer = Vec::new();
        // Whether this failure has been logged: once until the watch recovers.
        let mut failing = false;
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    state.up.store(false, Ordering::Relaxed);
                    if failing {
                        debug!(error = %e, "hosted watch still failing");
                    } else {
                        warn!(error = %e, "hosted watch failed; retrying with backoff, hosted results untrusted meanwhile");
                        failing = true;
                    }
                    metrics.hosted.watch_up(false);
                    continue;
                }
            };
            // Init comes before the list is even tried.
            if !matches!(event, Event::Init) && !state.up.swap(true, Ordering::Relaxed) {
                if failing {
                    info!("hosted watch recovered");
                }
                failing = false;
            }
            match event {
                Event::Init => {
                    buffer.clear();
                    continue;
                }
                Event::InitApply(object) => {
                    buffer.push(object);
                    continue;
                }
                Event::InitDone => {
                    apply(Change::All(std::mem::take(&mut buffer)));
                    state.synced.store(true, Ordering::Relaxed);
                }
                Event::Apply(object) => apply(Change::Apply(object)),
                Event::Delete(object) => apply(Change::Delete(object)),
            }
            metrics.hosted.watch_up(self.watches.healthy());
            metrics.hosted.clusters(self.clusters.len());
            self.changed.notify_one();
        }
    }

    /// The HyperShift operator's supported versions, or why they cannot be
    /// read.
    fn supported(&self) -> Result<SupportedVersions, SupportError> {
        let config_map = self
            .operator
            .get(
                model::SUPPORTED_VERSIONS_NAMESPACE,
                model::SUPPORTED_VERSIONS_NAME,
            )
            .ok_or(SupportError::Missing)?;
        let data = config_map.data.as_ref();
        let entry = |key: &str| data.and_then(|d| d.get(key)).map(String::as_str);
        SupportedVersions::from_data(entry("supported-versions"), entry("server-version"))
    }

    /// The results held for `name`, made when it has none yet.
    fn held(&self, name: &HostedName) -> Arc<Held> {
        let mut results = self.results.write().unwrap_or_else(|e| e.into_inner());
        results.entry(name.clone()).or_default().clone()
    }

    /// Stores results of `name`'s run.
    fn store(&self, held: &Held, objects: Vec<UpdatePreflight>) {
        let mut held = held.write().unwrap_or_else(|e| e.into_inner());
        for object in objects {
            held.insert(ReleaseKey::from_image(&object.spec.image), Arc::new(object));
        }
    }

    /// The phases of every result held.
    fn phases(&self) -> Vec<crate::model::Phase> {
        let results = self.results.read().unwrap_or_else(|e| e.into_inner());
        results
            .values()
            .flat_map(|held| {
                let held = held.read().unwrap_or_else(|e| e.into_inner());
                held.values()
                    .filter_map(|o| o.status.as_ref()?.phase)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Runs, for ever, whatever [`Self::pass`] finds due: when a watch
    /// says something changed, and every [`TICK`].
    async fn run_all(
        self: Arc<Self>,
        client: kube::Client,
        settings: HostedSettings,
        metrics: Metrics,
    ) {
        let runner = Arc::new(Runner {
            client,
            permits: Arc::new(Semaphore::new(settings.runs_at_once.max(1))),
            settings,
            metrics,
            runs: Arc::default(),
        });
        loop {
            self.pass(&runner, Timestamp::now());
            tokio::select! {
                () = self.changed.notified() => {
                    // Let a burst of changes settle into one pass.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                () = tokio::time::sleep(TICK) => {}
            }
        }
    }

    /// One look at every hosted cluster: forgets what is gone, and starts
    /// a run of each cluster that has targets due and is not already
    /// running or waiting out its backoff.
    fn pass(self: &Arc<Self>, runner: &Arc<Runner>, now: Timestamp) {
        if !self.watches.synced() {
            return;
        }
        let clusters = self.clusters.all();
        let pools: Arc<[NodePool]> = self.pools.all().iter().map(|p| (**p).clone()).collect();
        let supported = Arc::new(self.supported());
        let names: BTreeSet<HostedName> = clusters.iter().map(|c| c.hosted_name()).collect();
        self.results
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, _| names.contains(name));
        let mut runs = runner.runs.lock().unwrap_or_else(|e| e.into_inner());
        runs.retain(|name, _| names.contains(name));
        for cluster in clusters {
            let name = cluster.hosted_name();
            let wanted = schedule::targets(&cluster);
            let keys: HashSet<ReleaseKey> = wanted
                .iter()
                .map(|t| ReleaseKey::from_image(&t.image))
                .collect();
            let held = self.held(&name);
            held.write()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|key, _| keys.contains(key));
            let state = runs.entry(name.clone()).or_default();
            state.ran.retain(|key, _| keys.contains(key));
            if state.running || state.retry_at.is_some_and(|at| now < at) {
                continue;
            }
            let observed = schedule::observed(&cluster, &pools, supported.as_ref().as_ref());
            let due: Vec<RunRequest> = wanted
                .into_iter()
                .filter(|t| {
                    let ran = state.ran.get(&ReleaseKey::from_image(&t.image));
                    schedule::due(ran, observed, now, runner.settings.refresh_after)
                })
                .collect();
            if due.is_empty() {
                continue;
            }
            state.running = true;
            let job = Job {
                cluster,
                pools: pools.clone(),
                supported: supported.clone(),
                due,
                observed,
                held,
            };
            tokio::spawn(
                self.clone()
                    .run(runner.clone(), job)
                    .instrument(info_span!("hosted_run", hosted_cluster = %name)),
            );
        }
        drop(runs);
        runner.metrics.hosted.held(self.phases());
        runner.metrics.hosted.clusters(self.clusters.len());
    }

    /// Reads one hosted cluster's guest, runs its due targets over it and
    /// holds their results.
    async fn run(self: Arc<Self>, runner: Arc<Runner>, job: Job) {
        let name = job.cluster.hosted_name();
        let permit = runner.permits.clone().acquire_owned().await;
        let started = Timestamp::now();
        let guest = guest::read(
            &runner.client,
            &job.cluster,
            Reads { tls_secrets: false },
            runner.settings.read_limit,
        )
        .await;
        runner.metrics.hosted.read(guest.is_ok());
        let read = guest.is_ok();
        let guest = guest.map_err(|e| {
            warn!(error = %e, "cannot read the hosted cluster; its results say why");
            format!("{e}")
        });
        let (settings, cluster, pools, supported, due) = (
            runner.settings.clone(),
            job.cluster.clone(),
            job.pools.clone(),
            job.supported.clone(),
            job.due.clone(),
        );
        let evaluated = tokio::task::spawn_blocking(move || {
            let hosted = Hosted {
                cluster: &cluster,
                pools: &pools,
                supported: supported.as_ref().as_ref(),
            };
            due.iter()
                .map(|request| {
                    evaluate(&hosted, guest.clone(), request, Timestamp::now(), &settings)
                })
                .collect::<Vec<_>>()
        })
        .await;
        drop(permit);
        let mut runs = runner.runs.lock().unwrap_or_else(|e| e.into_inner());
        let state = runs.entry(name).or_default();
        state.running = false;
        match evaluated {
            Ok(objects) => {
                info!(targets = objects.len(), read, "hosted cluster checked");
                self.store(&job.held, objects);
            }
            Err(e) => warn!(error = %e, "a hosted run did not finish"),
        }
        for request in &job.due {
            let key = ReleaseKey::from_image(&request.image);
            if read {
                state.ran.insert(
                    key,
                    Ran {
                        at: started,
                        observed: job.observed,
                    },
                );
            } else {
                // Due again once the backoff is waited out.
                state.ran.remove(&key);
            }
        }
        state.failures = if read {
            0
        } else {
            state.failures.saturating_add(1)
        };
        state.retry_at = (!read).then(|| {
            let wait = jiff::SignedDuration::try_from(schedule::backoff(state.failures))
                .unwrap_or(jiff::SignedDuration::MAX);
            Timestamp::now()
                .saturating_add(wait)
                .unwrap_or(Timestamp::MAX)
        });
        drop(runs);
        runner.metrics.hosted.held(self.phases());
        // What changed while it ran is looked at now, not at the next tick.
        self.changed.notify_one();
    }
}

/// One batch of a watch's objects.
enum Change {
    /// The whole list, after a (re)list.
    All(Vec<DynamicObject>),
    Apply(DynamicObject),
    Delete(DynamicObject),
}

/// What the runner needs on every pass.
struct Runner {
    client: kube::Client,
    settings: HostedSettings,
    metrics: Metrics,
    runs: Arc<Mutex<BTreeMap<HostedName, Runs>>>,
    permits: Arc<Semaphore>,
}

/// The runner's record of one hosted cluster.
#[derive(Default)]
struct Runs {
    /// Each target's last run over a guest that was read.
    ran: HashMap<ReleaseKey, Ran>,
    /// A run of it is under way.
    running: bool,
    /// Reads of its guest that failed in a row.
    failures: u32,
    /// No run before then: the backoff after a failed read.
    retry_at: Option<Timestamp>,
}

/// One run of a hosted cluster's due targets, over one snapshot of the
/// management cluster.
struct Job {
    cluster: Arc<HostedCluster>,
    pools: Arc<[NodePool]>,
    supported: Arc<Result<SupportedVersions, SupportError>>,
    due: Vec<RunRequest>,
    observed: u64,
    held: Arc<Held>,
}

/// Runs the hosted suite for one target as an `UpdatePreflight` held in
/// memory, as `offline::evaluate` makes one: the target resolved against
/// the HostedCluster's own update graph, the guest's checks when it was
/// read (else `HostedClusterReachable`'s error, why), HyperShift's checks,
/// and the phase they conclude to.
pub fn evaluate(
    hosted: &Hosted,
    guest: Result<Arc<ClusterView>, String>,
    request: &RunRequest,
    now: Timestamp,
    settings: &HostedSettings,
) -> UpdatePreflight {
    let update = DesiredUpdate {
        image: Some(request.image.clone()),
        ..Default::default()
    };
    let target = match hosted.cluster.as_update().resolve(&update) {
        Resolution::Target(known) if known.version.is_some() => known,
        _ => Target::image(&request.image, request.version.clone()),
    };
    let view = guest.as_ref().ok().cloned();
    let results = suite::run_hosted(hosted, None, guest, &target, now, settings.limits);
    // The plan of the same hosted cluster, at the same time; a plan that
    // panics is no plan, never a lost result.
    let version = target.version.as_deref().and_then(Version::parse);
    let plan = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let plan = crate::plan::hosted::plan(
            hosted.cluster,
            hosted.pools,
            view.as_deref(),
            version.as_ref(),
            crate::plan::hosted::Part::ControlPlane,
            now,
        );
        crate::plan::status::summary(&plan, now)
    }))
    .ok();
    crate::preflight::offline::held_result(
        &request.image,
        target.version.clone(),
        results,
        &settings.exemptions,
        plan,
        now,
    )
}

/// One hosted cluster's results, as the decision reads them.
struct HostedResults {
    held: Arc<Held>,
    watches: Arc<Watches>,
    /// The targets the gate runs for it by itself.
    checked: HashSet<ReleaseKey>,
}

impl ResultLookup for HostedResults {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup {
            result: self
                .held
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(key)
                .cloned(),
            trusted: self.watches.healthy(),
            expires: true,
            status_writer: None,
        }
    }

    fn is_ready(&self) -> bool {
        self.watches.synced()
    }

    fn runs_checks(&self) -> bool {
        true
    }

    fn checks_itself(&self, key: &ReleaseKey) -> bool {
        self.checked.contains(key)
    }

    /// Its update graph alone names what it runs: no UpdatePreflight asks
    /// for a run of a hosted cluster.
    fn takes_run_requests(&self) -> bool {
        false
    }
}

impl HostedLookup for HostedSource {
    fn cluster(&self, name: &HostedName) -> Option<Arc<HostedCluster>> {
        self.clusters.get(&name.namespace, &name.name)
    }

    /// Its results, or none for a name the watch does not know (nothing is
    /// kept for it: a review's name makes no entry).
    fn results(&self, name: &HostedName) -> Arc<dyn ResultLookup> {
        let held = self
            .results
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default();
        let checked = self
            .cluster(name)
            .map(|c| {
                schedule::targets(&c)
                    .iter()
                    .map(|t| ReleaseKey::from_image(&t.image))
                    .collect()
            })
            .unwrap_or_default();
        Arc::new(HostedResults {
            held,
            watches: self.watches.clone(),
            checked,
        })
    }
}

/// The gate's results with its hosted clusters': every answer is the
/// standalone source's, and [`ResultLookup::hosted`] the hosted clusters'.
pub struct WithHosted {
    pub results: Arc<dyn Source>,
    pub hosted: Arc<HostedSource>,
}

impl ResultLookup for WithHosted {
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        self.results.lookup(key)
    }

    /// Readiness is the standalone source's: a management cluster without
    /// HyperShift's CRDs yet still serves.
    fn is_ready(&self) -> bool {
        self.results.is_ready()
    }

    fn runs_checks(&self) -> bool {
        self.results.runs_checks()
    }

    fn checks_itself(&self, key: &ReleaseKey) -> bool {
        self.results.checks_itself(key)
    }

    fn takes_run_requests(&self) -> bool {
        self.results.takes_run_requests()
    }

    fn hosted(&self) -> Option<&dyn HostedLookup> {
        Some(self.hosted.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::api_mock;
    use crate::model::{Outcome, Phase};
    use serde_json::json;

    const OFFERED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:aa11";
    const STORED: &str = "quay.io/openshift-release-dev/ocp-release@sha256:cc33";
    const ELSEWHERE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:dd44";

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn hosted_cluster(name: &str) -> DynamicObject {
        object(json!({
            "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
            "metadata": {"name": name, "namespace": "clusters", "generation": 2},
            "spec": {"release": {"image": STORED}},
            "status": {
                "version": {
                    "availableUpdates": [{"version": "4.22.4", "image": OFFERED}],
                    "history": [{"state": "Completed", "version": "4.22.3", "image": STORED}]
                },
                "kubeconfig": {"name": format!("{name}-admin-kubeconfig")}
            }
        }))
    }

    fn prod() -> HostedName {
        HostedName::parse("clusters/prod").unwrap()
    }

    /// A source whose watches have synced `prod` and are up.
    fn synced() -> Arc<HostedSource> {
        let hosted = Arc::new(HostedSource::default());
        hosted.clusters.replace(vec![hosted_cluster("prod")]);
        hosted.operator.replace(vec![object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "supported-versions", "namespace": "hypershift"},
            "data": {"supported-versions": r#"{"versions":["4.23","4.22"]}"#}
        }))]);
        for state in hosted.watches.each() {
            state.synced.store(true, Ordering::Relaxed);
            state.up.store(true, Ordering::Relaxed);
        }
        hosted
    }

    /// A run of [`OFFERED`] over `view`, its guest unread for `why`.
    fn evaluate_offered(view: &Hosted, why: &str) -> UpdatePreflight {
        let request = RunRequest {
            image: OFFERED.to_owned(),
            version: None,
            existing: None,
        };
        evaluate(
            view,
            Err(why.to_owned()),
            &request,
            Timestamp::now(),
            &settings(),
        )
    }

    fn settings() -> HostedSettings {
        HostedSettings::new(
            Duration::from_secs(6 * 3600),
            Limits::default(),
            Exemptions::default(),
        )
    }

    #[test]
    fn the_lookup_answers_from_memory_and_trusts_only_watches_that_are_up() {
        let hosted = synced();
        let cluster = hosted.cluster(&prod()).expect("watched");
        let supported = hosted.supported().unwrap();
        let view = Hosted {
            cluster: &cluster,
            pools: &[],
            supported: Ok(&supported),
        };
        let result = evaluate_offered(&view, "unreachable");
        hosted.store(&hosted.held(&prod()), vec![result]);

        let results = hosted.results(&prod());
        let key = ReleaseKey::from_image(OFFERED);
        let found = results.lookup(&key);
        assert!(found.result.is_some() && found.trusted && found.expires);
        assert!(found.status_writer.is_none());
        assert!(results.runs_checks() && results.is_ready());
        assert!(!results.takes_run_requests());
        assert!(results.checks_itself(&key));
        assert!(results.checks_itself(&ReleaseKey::from_image(STORED)));
        assert!(!results.checks_itself(&ReleaseKey::from_image(ELSEWHERE)));
        assert!(
            results
                .lookup(&ReleaseKey::from_image(STORED))
                .result
                .is_none()
        );

        hosted.watches.pools.up.store(false, Ordering::Relaxed);
        assert!(!results.lookup(&key).trusted, "a watch is down");

        // A name the watch does not know has nothing, and is kept nowhere.
        let unknown = HostedName::parse("clusters/ghost").unwrap();
        let results = hosted.results(&unknown);
        assert!(results.lookup(&key).result.is_none());
        assert!(!results.checks_itself(&key));
        assert!(hosted.cluster(&unknown).is_none());
        assert_eq!(hosted.results.read().unwrap().len(), 1);
    }

    /// The gate's results answer as the standalone source's, and lead to
    /// the hosted clusters'.
    #[test]
    fn the_gates_results_lead_to_the_hosted_clusters() {
        let standalone = Arc::new(crate::preflight::DirectorySource::embedded());
        let gate = WithHosted {
            results: standalone.clone(),
            hosted: synced(),
        };
        assert!(gate.is_ready() && !gate.runs_checks() && gate.takes_run_requests());
        let key = ReleaseKey::from_image(OFFERED);
        assert_eq!(
            gate.lookup(&key).result.is_some(),
            standalone.lookup(&key).result.is_some()
        );
        let hosted = gate.hosted().expect("served");
        assert!(hosted.cluster(&prod()).is_some());
        assert!(hosted.results(&prod()).checks_itself(&key));
        assert!(standalone.hosted().is_none());
    }

    #[test]
    fn a_result_carries_the_plan_of_the_control_plane_and_its_nodepools() {
        let hosted = synced();
        let cluster = hosted.cluster(&prod()).unwrap();
        let supported = hosted.supported().unwrap();
        let pools: Vec<NodePool> = vec![
            serde_json::from_value(json!({
                "metadata": {"name": "workers", "namespace": "clusters"},
                "spec": {"clusterName": "prod", "replicas": 6,
                         "management": {"upgradeType": "InPlace", "inPlace": {"maxUnavailable": 2}}},
                "status": {"version": "4.21.4"}
            }))
            .unwrap(),
        ];
        let view = Hosted {
            cluster: &cluster,
            pools: &pools,
            supported: Ok(&supported),
        };
        let result = evaluate_offered(&view, "unreachable");
        let plan = result.status.unwrap().plan.expect("a plan");
        let pool = plan
            .pools
            .iter()
            .find(|p| p.name.contains("clusters/workers"))
            .unwrap_or_else(|| panic!("no NodePool in {plan:#?}"));
        assert_eq!(pool.nodes, 6);
        assert_eq!(pool.batches, 3, "{pool:#?}");
    }

    #[test]
    fn an_unreadable_guest_is_an_error_that_says_why_never_a_pass() {
        let hosted = synced();
        let cluster = hosted.cluster(&prod()).unwrap();
        let supported = hosted.supported().unwrap();
        let view = Hosted {
            cluster: &cluster,
            pools: &[],
            supported: Ok(&supported),
        };
        let why = guest::GuestError::NoKey("prod-admin-kubeconfig".into()).to_string();
        let result = evaluate_offered(&view, &why);
        assert_eq!(
            result.metadata.name.as_deref(),
            Some(ReleaseKey::from_image(OFFERED).object_name().as_str())
        );
        // The version is the hosted cluster's update graph's.
        assert_eq!(result.spec.version.as_deref(), Some("4.22.4"));
        let status = result.status.unwrap();
        assert_eq!(status.phase, Some(Phase::Failed));
        assert!(status.completion_time.is_some());
        let reachable = &status.results[0];
        assert_eq!(reachable.name, crate::checks::hosted::REACHABLE);
        assert_eq!(reachable.outcome, Outcome::Error);
        assert!(
            reachable
                .message
                .ends_with("the Secret prod-admin-kubeconfig holds no kubeconfig key"),
            "{}",
            reachable.message
        );
    }

    /// Against a scripted API server: HyperShift's API not served at
    /// first is retried, not fatal; once every watch has listed, the
    /// hosted cluster is run (its kubeconfig's Secret read, and only read)
    /// and its results held, trusted while the watches are up.
    #[tokio::test]
    async fn the_watches_survive_an_api_not_served_and_feed_the_runs() {
        let (client, mut api) = api_mock::client();
        let hosted = HostedSource::spawn(client, settings(), Metrics::new().unwrap());
        let list = |items: Vec<serde_json::Value>| json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "7"}, "items": items});
        // Watch requests are held open, as the API server holds them.
        let mut open = Vec::new();
        let mut refused_once = false;
        let secret = loop {
            let mut seen = api.next().await;
            assert_eq!(seen.method, http::Method::GET, "{}", seen.path);
            if seen.has_query("watch", "true") {
                open.push(seen);
                continue;
            }
            match seen.path.as_str() {
                "/apis/hypershift.openshift.io/v1beta1/hostedclusters" if !refused_once => {
                    refused_once = true;
                    seen.fail(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    );
                }
                "/apis/hypershift.openshift.io/v1beta1/hostedclusters" => {
                    seen.ok(&list(vec![
                        serde_json::to_value(hosted_cluster("prod")).unwrap(),
                    ]));
                }
                "/apis/hypershift.openshift.io/v1beta1/nodepools" => seen.ok(&list(Vec::new())),
                "/api/v1/namespaces/hypershift/configmaps" => {
                    assert!(
                        seen.has_query("fieldSelector", "metadata.name%3Dsupported-versions"),
                        "{}",
                        seen.query
                    );
                    seen.ok(&list(Vec::new()));
                }
                "/api/v1/namespaces/clusters/secrets/prod-admin-kubeconfig" => break seen,
                other => panic!("unexpected request {other}"),
            }
        };
        assert!(refused_once);
        let mut secret = secret;
        secret.fail(
            404,
            "NotFound",
            "secrets \"prod-admin-kubeconfig\" not found",
        );
        let results = hosted.results(&prod());
        let key = ReleaseKey::from_image(OFFERED);
        let mut held = None;
        for _ in 0..100 {
            held = results.lookup(&key).result;
            if held.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let held = held.expect("a result held");
        let reachable = &held.status.as_ref().unwrap().results[0];
        assert_eq!(reachable.outcome, Outcome::Error);
        assert!(results.lookup(&key).trusted);
        // HyperShift's supported versions were not found: said, not passed.
        assert!(hosted.supported().is_err());
        drop(open);
    }

    /// A pass reads the guest's kubeconfig (the only request it makes, a
    /// read), holds an error result for each target when it cannot, and
    /// waits out the backoff; a HostedCluster gone takes its results along.
    #[tokio::test]
    async fn a_pass_runs_each_target_holds_the_result_and_forgets_what_is_gone() {
        let (client, mut api) = api_mock::client();
        let hosted = synced();
        let runner = Arc::new(Runner {
            client,
            settings: settings(),
            metrics: Metrics::new().unwrap(),
            runs: Arc::default(),
            permits: Arc::new(Semaphore::new(1)),
        });
        let now = Timestamp::now();
        hosted.pass(&runner, now);
        let mut seen = api.next().await;
        assert_eq!(seen.method, http::Method::GET);
        assert_eq!(
            seen.path,
            "/api/v1/namespaces/clusters/secrets/prod-admin-kubeconfig"
        );
        seen.fail(403, "Forbidden", "secrets is forbidden");
        let results = hosted.results(&prod());
        let phase = |image: &str| {
            results
                .lookup(&ReleaseKey::from_image(image))
                .result
                .and_then(|r| r.status.as_ref()?.phase)
        };
        for _ in 0..100 {
            if phase(STORED).is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(phase(OFFERED), Some(Phase::Failed));
        assert_eq!(phase(STORED), Some(Phase::Failed));
        {
            let runs = runner.runs.lock().unwrap();
            let state = &runs[&prod()];
            assert!(!state.running && state.failures == 1 && state.ran.is_empty());
            assert!(state.retry_at.is_some_and(|at| at > now));
        }
        assert_eq!(
            crate::metrics::testing::value(
                &runner.metrics,
                r#"preflight_gate_hosted_reads_total{result="failure"}"#
            ),
            Some(1.0)
        );
        // Within the backoff, nothing is read again.
        hosted.pass(&runner, now);
        assert!(api.next_within(Duration::from_millis(200)).await.is_none());

        hosted.clusters.replace(Vec::new());
        hosted.pass(&runner, now);
        assert!(hosted.results.read().unwrap().is_empty());
        assert!(runner.runs.lock().unwrap().is_empty());
        assert!(
            hosted
                .results(&prod())
                .lookup(&ReleaseKey::from_image(OFFERED))
                .result
                .is_none()
        );
    }
}
