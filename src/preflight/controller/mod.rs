//! The preflight controller: runs a target's suite, and computes its update
//! plan, when its `UpdatePreflight` is new, changed, asked for or old
//! (`reconcile`); keeps the update graph's targets checked ahead of time
//! (`refresh`); compares a completed update with its plan (`completion`);
//! garbage-collects what the graph no longer offers (`gc`). Only the
//! replica holding the Lease runs it (see `leader`).

mod completion;
mod gc;
mod reconcile;
mod refresh;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use tracing::{Instrument, info, info_span, warn};

use crate::cluster::live;
use crate::metrics::Metrics;
use crate::model::UpdatePreflight;
use crate::model::standing::Exemptions;
use crate::model::vouch::{NewestRuns, ResultKey};
use crate::view::alerts::AlertNamespaces;

pub use reconcile::run_due;

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
    pub exemptions: Exemptions,
    /// Where each run reads the cluster's alerts; `None` reads none (the
    /// alert checks then warn that there is no alert data).
    pub alerts: Option<crate::cluster::prometheus::Prometheus>,
    /// The namespaces whose alerts count, besides the platform's.
    pub alert_namespaces: AlertNamespaces,
    /// The gate's namespace, whose Secret holds the key results are signed
    /// with (`preflight::result_key`).
    pub namespace: String,
    /// The newest run of each object seen signed, shared with the
    /// replica's own results watch (which has watched since the replica
    /// started, before it led): an older run is a status written back,
    /// and is run again.
    pub newest_runs: Arc<NewestRuns>,
}

/// What every reconcile and refresh shares.
pub(crate) struct Ctx {
    client: kube::Client,
    /// When this replica became the leader: a run still marked Running from
    /// before then belonged to a leader that is gone.
    leading_since: Timestamp,
    settings: Settings,
    recorder: Recorder,
    metrics: Metrics,
    /// What target releases declare, per digest.
    releases: super::release_checks::Cache,
    /// The key every result written is signed with.
    key: ResultKey,
}

impl Ctx {
    /// The context of a leader that starts leading now, reporting its
    /// Events as `instance`.
    pub(crate) fn new(
        client: kube::Client,
        settings: Settings,
        metrics: Metrics,
        instance: String,
        key: ResultKey,
    ) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "preflight-gate".into(),
                instance: Some(instance),
            },
        );
        Self {
            client,
            leading_since: Timestamp::now(),
            settings,
            recorder,
            metrics,
            releases: Default::default(),
            key,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("cannot write the status of {name}")]
    WriteStatus { name: String, source: kube::Error },
}

/// Runs the controller until the future is dropped: once it has the key
/// results are signed with, since a result it could not sign would be no
/// result.
pub async fn start(client: kube::Client, settings: Settings, metrics: Metrics, instance: String) {
    let key = super::result_key::load_until_read(&client, &settings.namespace, |_| {}).await;
    let concurrency = settings.concurrency;
    let ctx = Arc::new(Ctx::new(client.clone(), settings, metrics, instance, key));
    let api: Api<UpdatePreflight> = Api::all(client);
    // Aborted when this future is dropped (leadership lost), not detached:
    // only the Lease holder may write.
    let _refresher = AbortOnDrop(tokio::spawn(
        refresh::refresh_loop(ctx.clone()).instrument(info_span!("refresh")),
    ));
    // The leader alone exports results; they go when it stops leading.
    let _results = ClearResults(ctx.metrics.clone());
    if let Some(jobs) = &ctx.settings.jobs {
        match super::release_checks::collect_orphans(&ctx.client, jobs).await {
            Ok(0) => {}
            Ok(n) => info!(
                deleted = n,
                "extraction pods an earlier leader left were deleted"
            ),
            Err(e) => warn!(error = %e, "cannot look for extraction pods an earlier leader left"),
        }
    }
    Controller::new(api, watcher::Config::default())
        .with_config(Config::default().concurrency(concurrency))
        .run(reconcile::reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Stops exporting results when dropped (the controller is aborted when
/// leadership is lost).
struct ClearResults(Metrics);

impl Drop for ClearResults {
    fn drop(&mut self) {
        self.0.results.clear();
    }
}

fn error_policy(_object: Arc<UpdatePreflight>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(
        error = crate::model::text::chain(error),
        "reconcile failed; retrying"
    );
    Action::requeue(Duration::from_secs(10))
}
