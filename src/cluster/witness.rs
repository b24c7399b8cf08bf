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
//! those to what a decision allowed, that change is recorded. One stored
//! change is recorded once across replicas: its Events are named after the
//! object's uid and the change's `resourceVersion`, which every replica's
//! watch shows alike, and only the replica whose Event the API server
//! created counts the override ([`Ledger`]). A forged review can predict a
//! stored change but not its requester's identity: where decisions of
//! different requesters claim one change (on one replica, or across
//! replicas), the record says so and names them all rather than pick one.
//! Without a cluster (`serve` on a snapshot) there is no API server to
//! witness anything, and decisions are recorded as they are made.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{Instrument, debug, info, info_span, warn};

use super::cluster_versions;
use crate::admission::EventNote;
use crate::metrics::Metrics;
use crate::model::ClusterVersion;
use crate::model::standing::OverrideKind;

/// How long a decision waits for its change to be stored. The API server
/// gives a webhook at most 30 s and stores right after; the rest is room
/// for a watch that lags or reconnects.
pub const STORED_WITHIN: Duration = Duration::from_secs(120);

/// Most decisions kept waiting; beyond it the oldest is dropped as
/// unstored, so a flood of reviews cannot grow the table.
pub const MAX_AWAITED: usize = 256;

/// The Event that says a stored change was claimed by several requesters.
pub const AMBIGUOUS: &str = "PreflightRecordAmbiguous";

/// What an allowed decision leaves once its change is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedChange {
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
    pub settled: Option<Settled>,
}

/// How a stored change settles the update target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settled {
    /// A target (its version, or its image) was set.
    Target(String),
    /// The target was cleared.
    Cleared,
}

impl AllowedChange {
    /// Whether there is anything to record.
    pub fn is_empty(&self) -> bool {
        self.notes.is_empty() && self.override_kind.is_none() && self.settled.is_none()
    }
}

/// One Event of a stored change's record, published once across replicas.
#[derive(Clone, Debug)]
pub struct Once<'a> {
    /// The Event's name: the same on every replica for the same change.
    pub name: String,
    pub note: &'a EventNote,
    /// The ClusterVersion the Event is about.
    pub regarding: (&'a str, &'a str),
    /// Who the deciding replica was told asked for the change.
    pub requester: &'a str,
}

/// What publishing an Event once found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This replica published it: it records the change.
    First,
    /// Another replica did, for the same requester.
    Same,
    /// Another replica did, for another requester (named).
    Other(String),
}

/// Where the replicas agree that a stored change is recorded once: the
/// API server, which creates an object of a given name only once.
pub trait Ledger: Send + Sync {
    /// Publishes `once.note` under `once.name` unless an Event of that
    /// name exists; then says whose it is. An error is the API server's,
    /// in words for the log.
    fn publish_once<'a>(&'a self, once: Once<'a>) -> BoxFuture<'a, Result<Claim, String>>;
}

/// A decision waiting for its change.
struct Awaited {
    fingerprint: u64,
    since: Instant,
    change: AllowedChange,
}

/// A stored change and the decisions that claim it, to be recorded.
#[derive(Debug)]
struct Record {
    /// Names this change alike on every replica.
    key: String,
    name: String,
    uid: String,
    resource_version: String,
    /// The newest claiming decision's record.
    change: AllowedChange,
    /// Every requester that claimed it, once each, in order.
    requesters: Vec<String>,
}

impl Record {
    fn requester(&self) -> String {
        self.requesters.join(" and ")
    }
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
    /// None without a cluster: decisions are recorded as made.
    ledger: Option<Arc<dyn Ledger>>,
    metrics: Metrics,
}

impl Witness {
    /// No API server to watch: every decision is recorded as it is made.
    pub fn unwatched(metrics: Metrics) -> Arc<Self> {
        Arc::new(Self::new(None, metrics))
    }

    /// Watches the ClusterVersion `version` and records decisions as their
    /// changes show up in it, through `ledger`.
    pub fn spawn(client: kube::Client, ledger: Arc<dyn Ledger>, metrics: Metrics) -> Arc<Self> {
        let witness = Arc::new(Self::new(Some(ledger), metrics));
        tokio::spawn(
            witness
                .clone()
                .watch(client)
                .instrument(info_span!("stored_changes_watch")),
        );
        witness
    }

    fn new(ledger: Option<Arc<dyn Ledger>>, metrics: Metrics) -> Self {
        Self {
            table: Mutex::default(),
            keys: RandomState::new(),
            ledger,
            metrics,
        }
    }

    /// An allowed decision about `object` (the ClusterVersion as the review
    /// carried it): recorded once the watch shows `object` stored.
    pub fn expect(&self, object: &ClusterVersion, change: AllowedChange) {
        if change.is_empty() {
            return;
        }
        if self.ledger.is_none() {
            self.settle(&change);
            self.count_override(&change);
            return;
        }
        let awaited = Awaited {
            fingerprint: self.fingerprint(object),
            since: Instant::now(),
            change,
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
    /// joined by changed to what waiting decisions allowed, that change is
    /// to be recorded, with the newest decision's record and every
    /// requester that claimed it.
    fn observed(&self, object: &ClusterVersion, now: Instant) -> Option<Record> {
        let fingerprint = self.fingerprint(object);
        let mut table = self.lock();
        self.expire(&mut table, now);
        let changed = table
            .last_seen
            .replace(fingerprint)
            .is_some_and(|last| last != fingerprint);
        if !changed {
            return None;
        }
        let (matching, rest): (Vec<Awaited>, Vec<Awaited>) = table
            .awaited
            .drain(..)
            .partition(|a| a.fingerprint == fingerprint);
        table.awaited = rest.into();
        drop(table);
        let Some(newest) = matching.last() else {
            debug!("a stored change no decision of this replica allowed");
            return None;
        };
        // Decisions beyond the newest recorded nothing of their own.
        self.unstored(matching.len() - 1);
        let mut requesters: Vec<String> = Vec::new();
        for awaited in &matching {
            if !requesters.contains(&awaited.change.user) {
                requesters.push(awaited.change.user.clone());
            }
        }
        let meta = &object.metadata;
        let resource_version = meta.resource_version.clone().unwrap_or_default();
        Some(Record {
            key: record_key(&meta.name, &meta.uid, &resource_version),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            resource_version,
            change: newest.change.clone(),
            requesters,
        })
    }

    /// Records a stored change: this replica's metrics at once; its Events
    /// and the override's count once across replicas; and, where decisions
    /// of different requesters claimed it, that it is ambiguous.
    async fn record(&self, record: Record) {
        self.settle(&record.change);
        let Some(ledger) = &self.ledger else {
            self.count_override(&record.change);
            return;
        };
        let requester = record.requester();
        let publish = |i: usize, note| {
            let once = Once {
                name: format!("{}-{i}", record.key),
                note,
                regarding: (record.name.as_str(), record.uid.as_str()),
                requester: &requester,
            };
            async move {
                ledger.publish_once(once).await.unwrap_or_else(|e| {
                    warn!(error = %e, reason = note.reason, "cannot publish Event");
                    // Recorded here, as without a ledger.
                    Claim::First
                })
            }
        };
        // The first Event decides who records the rest.
        let mut claim = Claim::First;
        if let Some((first, rest)) = record.change.notes.split_first() {
            claim = publish(0, first).await;
            if claim == Claim::First {
                for (i, note) in rest.iter().enumerate() {
                    publish(i + 1, note).await;
                }
            }
        }
        if claim == Claim::First {
            self.count_override(&record.change);
        }
        let mut claimants = record.requesters.clone();
        if let Claim::Other(theirs) = &claim {
            claimants.push(theirs.clone());
        }
        if claimants.len() > 1 {
            self.ambiguous(ledger.as_ref(), &record, &claimants).await;
        }
    }

    /// Says that decisions of different requesters claimed one stored
    /// change, once across replicas.
    async fn ambiguous(&self, ledger: &dyn Ledger, record: &Record, claimants: &[String]) {
        let note = EventNote {
            warning: true,
            reason: AMBIGUOUS,
            message: crate::admission::message::record_ambiguous(
                claimants,
                &record.resource_version,
            ),
            related: None,
        };
        warn!(
            requesters = %claimants.join(", "),
            resource_version = %record.resource_version,
            "decisions of different requesters claim one stored change"
        );
        let once = Once {
            name: format!("{}-ambiguous", record.key),
            note: &note,
            regarding: (&record.name, &record.uid),
            requester: &record.requester(),
        };
        match ledger.publish_once(once).await {
            Ok(Claim::First) => self.metrics.admission.decision_ambiguous(),
            Ok(_) => debug!("another replica said the change is ambiguous"),
            Err(e) => warn!(error = %e, "cannot publish the ambiguity's Event"),
        }
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

    /// Settles this replica's blocked targets.
    fn settle(&self, change: &AllowedChange) {
        if let Some(settled) = &change.settled {
            let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
            let target = match settled {
                Settled::Target(target) => Some(target.as_str()),
                Settled::Cleared => None,
            };
            self.metrics.admission.target_settled(target, now);
        }
    }

    fn count_override(&self, change: &AllowedChange) {
        if let Some(kind) = change.override_kind {
            self.metrics.admission.override_honoured(kind);
            info!(
                user = %change.user,
                kind = kind.as_str(),
                reason = %change.override_reason,
                checks = %change.overridden,
                "override honoured and stored"
            );
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
            .filter(|(k, _)| k.starts_with(crate::model::annotations::PREFIX))
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
            let cv = match serde_json::to_value(object).and_then(serde_json::from_value) {
                Ok(cv) => cv,
                Err(e) => {
                    warn!(error = %e, "cannot read the ClusterVersion");
                    continue;
                }
            };
            if let Some(record) = self.observed(&cv, Instant::now()) {
                self.record(record).await;
            }
        }
    }
}

/// The name every replica gives one stored change's Events: the object's
/// name, and a digest of its uid and the change's `resourceVersion`.
fn record_key(name: &str, uid: &str, resource_version: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{uid}/{resource_version}").as_bytes(),
    );
    let hex = crate::model::text::hex(&digest.as_ref()[..8]);
    format!("{name}.record-{hex}")
}

#[cfg(test)]
mod tests;
