//! What the API server stored is the only ground of the gate's record. An
//! allowed decision's Events, its counted override and the targets it
//! unblocks wait here until the ClusterVersion's watch shows the change
//! stored. A review body alone (which, where the gate does not authenticate
//! its callers, anyone who reaches its port can write), or a write that a
//! later admission step or a conflict refused, leaves nothing but a count
//! of unstored decisions. Denials are not waited for: the API server stores
//! nothing of them.
//!
//! A decision is joined to the change it allowed by the object's uid, its
//! spec and its `preflight.dev/` annotations: when a watch event changes
//! those to what a decision allowed, the newest such decision is the one
//! stored. Without a cluster (`serve` on a snapshot) there is no API server
//! to witness anything, and decisions are recorded as they are made.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{Instrument, debug, info, info_span, warn};

use super::{EventRecorder, cluster_versions};
use crate::admission::EventNote;
use crate::metrics::{EffectKind, Metrics};
use crate::model::ClusterVersion;
use crate::model::standing::OverrideKind;

/// How long a decision waits for its change to be stored. The API server
/// gives a webhook at most 30 s and stores right after; the rest is room
/// for a watch that lags or reconnects.
pub const STORED_WITHIN: Duration = Duration::from_secs(120);

/// Most decisions kept waiting; beyond it the oldest is dropped as
/// unstored, so a flood of reviews cannot grow the table.
pub const MAX_AWAITED: usize = 256;

/// The annotations that are part of what a decision allowed.
const OWN_ANNOTATIONS: &str = "preflight.dev/";

/// What an allowed decision leaves once its change is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Who asked, as the review named them.
    pub user: String,
    /// Events to publish on the ClusterVersion.
    pub notes: Vec<EventNote>,
    /// The override honoured, counted once stored.
    pub override_kind: Option<OverrideKind>,
    /// The override's reason and the checks it overrode, for the log.
    pub override_reason: String,
    pub overridden: String,
    /// The target the change settled on, which unblocks every target.
    pub accepted: Option<Accepted>,
}

/// How a stored change settles the update target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// A target (its version, or its image) was set.
    Target(String),
    /// The target was cleared.
    Cleared,
}

impl Stored {
    /// Whether there is anything to record.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty() && self.override_kind.is_none() && self.accepted.is_none()
    }
}

/// A decision waiting for its change.
struct Awaited {
    fingerprint: u64,
    since: Instant,
    name: String,
    uid: String,
    stored: Stored,
}

#[derive(Default)]
struct Table {
    awaited: VecDeque<Awaited>,
    /// The fingerprint the watch last showed, once it showed one.
    last_seen: Option<u64>,
}

/// Records allowed decisions once the API server stored them.
pub struct Witness {
    table: Mutex<Table>,
    keys: RandomState,
    events: Option<EventRecorder>,
    metrics: Metrics,
    /// False without a cluster: decisions are recorded as made.
    watching: bool,
}

impl Witness {
    /// No API server to watch: every decision is recorded as it is made.
    pub fn unwatched(events: Option<EventRecorder>, metrics: Metrics) -> Arc<Self> {
        Arc::new(Self::new(events, metrics, false))
    }

    /// Watches the ClusterVersion `version` and records decisions as their
    /// changes show up in it.
    pub fn spawn(
        client: kube::Client,
        events: Option<EventRecorder>,
        metrics: Metrics,
    ) -> Arc<Self> {
        let witness = Arc::new(Self::new(events, metrics, true));
        tokio::spawn(
            witness
                .clone()
                .watch(client)
                .instrument(info_span!("stored_changes_watch")),
        );
        witness
    }

    fn new(events: Option<EventRecorder>, metrics: Metrics, watching: bool) -> Self {
        Self {
            table: Mutex::default(),
            keys: RandomState::new(),
            events,
            metrics,
            watching,
        }
    }

    /// An allowed decision about `object` (the ClusterVersion as the review
    /// carried it): recorded once the watch shows `object` stored.
    pub fn expect(&self, object: &ClusterVersion, stored: Stored) {
        if stored.is_empty() {
            return;
        }
        if !self.watching {
            self.record(&stored, &object.metadata.name, &object.metadata.uid);
            return;
        }
        let awaited = Awaited {
            fingerprint: self.fingerprint(object),
            since: Instant::now(),
            name: object.metadata.name.clone(),
            uid: object.metadata.uid.clone(),
            stored,
        };
        let mut table = self.lock();
        self.expire(&mut table, Instant::now());
        if table.awaited.len() >= MAX_AWAITED {
            table.awaited.pop_front();
            self.unstored(1);
        }
        table.awaited.push_back(awaited);
    }

    /// The ClusterVersion as the watch shows it: when what a decision is
    /// joined by changed to what a waiting decision allowed, the newest such
    /// decision is recorded and older ones for the same change are dropped.
    fn observed(&self, object: &ClusterVersion, now: Instant) {
        let fingerprint = self.fingerprint(object);
        let mut table = self.lock();
        self.expire(&mut table, now);
        let changed = table
            .last_seen
            .replace(fingerprint)
            .is_some_and(|last| last != fingerprint);
        if !changed {
            return;
        }
        let (matching, rest): (Vec<Awaited>, Vec<Awaited>) = table
            .awaited
            .drain(..)
            .partition(|a| a.fingerprint == fingerprint);
        table.awaited = rest.into();
        drop(table);
        let Some((newest, older)) = matching.split_last() else {
            debug!("a stored change no decision of this replica allowed");
            return;
        };
        self.unstored(older.len());
        self.record(&newest.stored, &newest.name, &newest.uid);
    }

    /// Drops decisions whose change was not stored in time.
    fn expire(&self, table: &mut Table, now: Instant) {
        let before = table.awaited.len();
        table
            .awaited
            .retain(|a| now.saturating_duration_since(a.since) < STORED_WITHIN);
        self.unstored(before - table.awaited.len());
    }

    fn unstored(&self, count: usize) {
        if count > 0 {
            warn!(
                count,
                "allowed decisions never stored: not recorded (a write refused after the gate, or a review the API server did not send)"
            );
            self.metrics.admission.decisions_unstored(count as u64);
        }
    }

    /// Publishes the Events, counts the override and settles the target.
    fn record(&self, stored: &Stored, name: &str, uid: &str) {
        if let Some(accepted) = &stored.accepted {
            let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
            let target = match accepted {
                Accepted::Target(target) => Some(target.as_str()),
                Accepted::Cleared => None,
            };
            self.metrics.admission.target_accepted(target, now);
        }
        if let Some(kind) = stored.override_kind {
            self.metrics.admission.override_honoured(kind);
            info!(
                user = %stored.user,
                kind = kind.as_str(),
                reason = %stored.override_reason,
                checks = %stored.overridden,
                "override honoured and stored"
            );
        }
        for note in &stored.notes {
            match &self.events {
                Some(events) => {
                    self.metrics.effects.asked_for(EffectKind::Event);
                    events.publish(note.clone(), name, uid);
                }
                None => debug!(reason = note.reason, "no cluster: Event not published"),
            }
        }
    }

    /// What joins a decision to its stored change: the object's identity,
    /// its spec and the gate's own annotations, hashed with this process's
    /// random keys (so that no caller can make two of them collide).
    fn fingerprint(&self, object: &ClusterVersion) -> u64 {
        let own: Vec<(&String, &String)> = object
            .metadata
            .annotations
            .iter()
            .filter(|(k, _)| k.starts_with(OWN_ANNOTATIONS))
            .collect();
        let joined =
            serde_json::to_vec(&(&object.metadata.uid, &object.spec, own)).unwrap_or_default();
        self.keys.hash_one(joined)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn watch(self: Arc<Self>, client: kube::Client) {
        let config = watcher::Config::default().fields("metadata.name=version");
        let mut events = watcher::watcher(cluster_versions(&client), config)
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(Event::Apply(object) | Event::InitApply(object)) => object,
                Ok(_) => continue,
                Err(e) => {
                    debug!(error = %e, "ClusterVersion watch failed; decisions wait for it");
                    continue;
                }
            };
            match serde_json::to_value(object).and_then(serde_json::from_value) {
                Ok(cv) => self.observed(&cv, Instant::now()),
                Err(e) => warn!(error = %e, "cannot read the ClusterVersion"),
            }
        }
    }
}

#[cfg(test)]
mod tests;
