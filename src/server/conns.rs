//! The webhook's connections: who may hold one, and which one gives way.
//!
//! A connection that sends nothing must not be able to keep the gate from
//! answering the API server. So:
//! - a TLS handshake has a deadline, and is no slot: at most `max`
//!   handshakes run at once, and past that the one waiting longest is
//!   closed (a real client's handshake takes milliseconds);
//! - a slot (at most `max` at once) is taken only once the handshake is
//!   done; the connection then has a deadline for its first request;
//! - one peer (source address) holds at most `per_peer` connections,
//!   handshakes included;
//! - when a new connection finds no room (its peer at its limit, or the
//!   gate full), the longest-idle connection in its way is closed: one that
//!   never sent a request before one that did, the one idle longest first.
//!   Only when every connection in the way is busy with a review is the new
//!   one refused.
//!
//! The table only decides; each connection's task ([`super::listener`])
//! closes itself when told, gracefully (HTTP/2 GOAWAY, or at once on an
//! idle HTTP/1 connection).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::debug;

use crate::metrics::TlsMetrics;

/// How many connections, and how many of them one peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections past their handshake at once; as many handshakes again.
    pub max: usize,
    /// Connections of one peer at once, handshakes included.
    pub per_peer: usize,
}

impl Limits {
    /// One peer may hold a quarter of the slots: the API server's replicas
    /// (one address each) fit many times over, and one flooding pod leaves
    /// the rest to everyone else.
    pub fn for_max(max: usize) -> Self {
        let max = max.max(1);
        Self {
            max,
            per_peer: (max / 4).max(1),
        }
    }
}

/// What a connection is doing, read when choosing whom to close.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Requests being answered on it now.
    in_flight: AtomicUsize,
    /// Requests it has sent so far.
    requests: AtomicU64,
    /// Since when it has been idle, in microseconds since `epoch`.
    idle_since: AtomicU64,
    /// When the first byte of a next request came while idle, in
    /// microseconds since `epoch` plus one; 0 while none has.
    heard_since: AtomicU64,
    /// The table's epoch.
    epoch: Instant,
}

/// Where a connection is between requests, for its deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// A request is being answered.
    Busy,
    /// A request's head is arriving, its first byte this long ago.
    Head(Duration),
    /// Nothing is arriving, for this long.
    Idle(Duration),
}

impl Activity {
    fn new(epoch: Instant) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            idle_since: AtomicU64::new(micros(epoch)),
            heard_since: AtomicU64::new(0),
            epoch,
        }
    }

    /// Whether it has sent any request.
    pub fn has_sent_a_request(&self) -> bool {
        self.requests.load(Ordering::Relaxed) > 0
    }

    /// A request begins; it ends when the guard drops.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.heard_since.store(0, Ordering::Relaxed);
        Busy {
            activity: self.clone(),
        }
    }

    /// Bytes came from the client: while idle, the head of a next request.
    pub fn heard(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.heard_since.load(Ordering::Relaxed) == 0
        {
            self.heard_since
                .store(micros(self.epoch) + 1, Ordering::Relaxed);
        }
    }

    pub fn waiting(&self) -> Waiting {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return Waiting::Busy;
        }
        let now = micros(self.epoch);
        let since = |at: u64| Duration::from_micros(now.saturating_sub(at));
        match self.heard_since.load(Ordering::Relaxed) {
            0 => Waiting::Idle(since(self.idle_since.load(Ordering::Relaxed))),
            heard => Waiting::Head(since(heard - 1)),
        }
    }
}

/// A request in flight on a connection.
pub(crate) struct Busy {
    activity: Arc<Activity>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.activity
            .idle_since
            .store(micros(self.activity.epoch), Ordering::Relaxed);
        self.activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn micros(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Why a connection is told to close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// Its peer was at its limit.
    PeerLimit,
    /// The gate was full.
    Full,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Handshake,
    Open,
}

struct Entry {
    peer: IpAddr,
    stage: Stage,
    activity: Arc<Activity>,
    close: Option<oneshot::Sender<Close>>,
}

impl Entry {
    /// Whether it may be closed to make room: a handshake, or a connection
    /// with no request in flight.
    fn idle(&self) -> bool {
        self.stage == Stage::Handshake || self.activity.in_flight.load(Ordering::Relaxed) == 0
    }

    /// Closed first: the smallest key. Never-used connections go before
    /// used ones, then the one idle longest.
    fn eviction_key(&self) -> (bool, u64) {
        (
            self.activity.has_sent_a_request(),
            self.activity.idle_since.load(Ordering::Relaxed),
        )
    }
}

#[derive(Default)]
struct State {
    next: u64,
    entries: HashMap<u64, Entry>,
    /// Entries per stage; closed ones are out of both.
    handshakes: usize,
    open: usize,
    /// Connections per peer, counted until each one's task ends.
    peers: HashMap<IpAddr, usize>,
}

impl State {
    /// Tells the longest-idle entry matching `which` to close, and takes it
    /// out of the counts; counted under `reason` first. Whether there was one.
    fn evict(
        &mut self,
        which: impl Fn(&Entry) -> bool,
        why: Close,
        metrics: &TlsMetrics,
        reason: &'static str,
    ) -> bool {
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| which(e) && e.idle())
            .min_by_key(|(id, e)| (e.eviction_key(), **id))
            .map(|(id, _)| *id);
        let Some(id) = victim else { return false };
        let mut entry = self.entries.remove(&id).expect("the victim is there");
        match entry.stage {
            Stage::Handshake => self.handshakes -= 1,
            Stage::Open => self.open -= 1,
        }
        metrics.connection_closed(reason);
        if let Some(close) = entry.close.take() {
            let _ = close.send(why);
        }
        true
    }

    fn remove(&mut self, id: u64) {
        if let Some(entry) = self.entries.remove(&id) {
            match entry.stage {
                Stage::Handshake => self.handshakes -= 1,
                Stage::Open => self.open -= 1,
            }
        }
    }
}

/// Every webhook connection, from its TCP accept to its close.
pub(crate) struct Table {
    limits: Limits,
    state: Mutex<State>,
    epoch: Instant,
    metrics: TlsMetrics,
}

impl Table {
    pub fn new(limits: Limits, metrics: TlsMetrics) -> Arc<Self> {
        metrics.connections_limit(limits.max);
        metrics.connections_open(0);
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
            epoch: Instant::now(),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new TCP connection from `peer`, about to start its handshake; `None`
    /// when it must be closed at once.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Ticket> {
        let peer = peer.to_canonical();
        let mut state = self.lock();
        let of_peer = state.peers.get(&peer).copied().unwrap_or(0);
        let metrics = &self.metrics;
        if of_peer >= self.limits.per_peer
            && !state.evict(
                |e| e.peer == peer,
                Close::PeerLimit,
                metrics,
                "evicted_peer_limit",
            )
        {
            drop(state);
            debug!(%peer, "the peer's connections are all busy: a new one is refused");
            metrics.connection_closed("refused_peer_limit");
            return None;
        }
        // Handshakes are all idle: there is always one to close.
        if state.handshakes >= self.limits.max {
            state.evict(
                |e| e.stage == Stage::Handshake,
                Close::Full,
                metrics,
                "evicted_full",
            );
        }
        let (close, closed) = oneshot::channel();
        let id = state.next;
        state.next += 1;
        state.entries.insert(
            id,
            Entry {
                peer,
                stage: Stage::Handshake,
                activity: Arc::new(Activity::new(self.epoch)),
                close: Some(close),
            },
        );
        state.handshakes += 1;
        *state.peers.entry(peer).or_default() += 1;
        self.metrics.connections_open(state.open);
        Some(Ticket {
            table: self.clone(),
            id,
            peer,
            closed,
        })
    }

    /// Closes counted by reason.
    pub fn closed(&self, reason: &'static str) {
        self.metrics.connection_closed(reason);
    }

    /// Whether at least half the slots or handshakes are taken: then a
    /// connection that has sent nothing since its handshake is closed at
    /// the first-request deadline, not left to idle.
    pub fn under_pressure(&self) -> bool {
        let state = self.lock();
        2 * state.open.max(state.handshakes) >= self.limits.max
    }
}

/// One connection's place in the table; leaving it when dropped.
pub(crate) struct Ticket {
    table: Arc<Table>,
    id: u64,
    peer: IpAddr,
    /// Fires when the table wants this connection closed.
    pub closed: oneshot::Receiver<Close>,
}

impl Ticket {
    /// The handshake is done: takes a slot, closing the longest-idle open
    /// connection when the gate is full. `None` when this connection must
    /// close instead: told to already, or every slot is busy.
    pub fn open(&mut self) -> Option<Arc<Activity>> {
        let table = &self.table;
        let mut state = table.lock();
        if !state.entries.contains_key(&self.id) {
            return None;
        }
        if state.open >= table.limits.max
            && !state.evict(
                |e| e.stage == Stage::Open,
                Close::Full,
                &table.metrics,
                "evicted_full",
            )
        {
            state.remove(self.id);
            drop(state);
            debug!(peer = %self.peer, "every slot is busy: a new connection is refused");
            table.metrics.connection_closed("refused_full");
            return None;
        }
        let now = micros(table.epoch);
        let entry = state.entries.get_mut(&self.id).expect("checked above");
        entry.stage = Stage::Open;
        entry.activity.idle_since.store(now, Ordering::Relaxed);
        let activity = entry.activity.clone();
        state.handshakes -= 1;
        state.open += 1;
        table.metrics.connections_open(state.open);
        Some(activity)
    }

    /// Gives the slot back now, while the connection closes.
    pub fn release(&self) {
        let mut state = self.table.lock();
        state.remove(self.id);
        self.table.metrics.connections_open(state.open);
    }

    pub fn table(&self) -> &Table {
        &self.table
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.table.lock();
        state.remove(self.id);
        if let Some(n) = state.peers.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                state.peers.remove(&self.peer);
            }
        }
        self.table.metrics.connections_open(state.open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn table(max: usize, per_peer: usize) -> Arc<Table> {
        Table::new(Limits { max, per_peer }, Metrics::new().unwrap().tls)
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn a_full_gate_closes_its_longest_idle_connection_never_a_busy_one() {
        let t = table(2, 10);
        let mut a = t.admit(ip(1)).unwrap();
        let mut b = t.admit(ip(2)).unwrap();
        let a_activity = a.open().unwrap();
        let b_activity = b.open().unwrap();
        let _b_busy = b_activity.begin();
        drop(a_activity.begin());
        // A third: `a` is idle (it answered one review), `b` is busy.
        let mut c = t.admit(ip(3)).unwrap();
        let c_activity = c.open().expect("a slot, made by closing `a`");
        assert_eq!(a.closed.try_recv(), Ok(Close::Full));
        assert!(b.closed.try_recv().is_err(), "the busy one stays");
        // `b` and `c` busy: a fourth is refused.
        let _c_busy = c_activity.begin();
        let mut d = t.admit(ip(4)).unwrap();
        assert!(d.open().is_none(), "refused when every slot is busy");
        assert!(b.closed.try_recv().is_err() && c.closed.try_recv().is_err());
    }

    #[test]
    fn a_connection_that_never_sent_a_request_gives_way_before_one_that_did() {
        let t = table(2, 10);
        let mut used = t.admit(ip(1)).unwrap();
        drop(used.open().unwrap().begin());
        let mut silent = t.admit(ip(2)).unwrap();
        silent.open().unwrap();
        let mut new = t.admit(ip(3)).unwrap();
        assert!(new.open().is_some());
        assert_eq!(
            silent.closed.try_recv(),
            Ok(Close::Full),
            "the newer, silent one"
        );
        assert!(used.closed.try_recv().is_err());
    }

    #[test]
    fn handshakes_hold_no_slot_and_the_longest_waiting_gives_way() {
        let t = table(2, 10);
        let mut stalled: Vec<_> = (1..=2).map(|i| t.admit(ip(i)).unwrap()).collect();
        let mut open = t.admit(ip(3)).unwrap();
        assert_eq!(stalled[0].closed.try_recv(), Ok(Close::Full));
        assert!(open.open().is_some(), "a slot, with handshakes pending");
        assert!(stalled[1].open().is_some());
        assert_eq!(t.lock().open, 2);
    }

    #[test]
    fn a_peer_at_its_limit_gives_way_with_its_own_connections_only() {
        let t = table(100, 2);
        let mut mine = [t.admit(ip(1)).unwrap(), t.admit(ip(1)).unwrap()];
        let mut other = t.admit(ip(2)).unwrap();
        other.open().unwrap();
        let _third = t.admit(ip(1)).unwrap();
        assert_eq!(
            mine[0].closed.try_recv(),
            Ok(Close::PeerLimit),
            "the oldest"
        );
        assert!(mine[1].closed.try_recv().is_err());
        assert!(
            other.closed.try_recv().is_err(),
            "another peer is untouched"
        );
    }
}
