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
//!   handshakes included, and at most `busy_per_peer` of them busy with a
//!   review at once: a request past that is refused at once, so a few
//!   addresses cannot make every slot busy (a body that trickles is cut off
//!   by [`super::pace`], but while it arrives it is busy);
//! - while the API server's addresses are known
//!   ([`ApiServerAddresses`]), `reserved` slots are theirs alone: others
//!   share the rest, and never close one of the API server's connections
//!   to make room;
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

use crate::cluster::api_server::ApiServerAddresses;
use crate::metrics::TlsMetrics;

/// How many connections, and how many of them one peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections past their handshake at once; as many handshakes again.
    pub max: usize,
    /// Connections of one peer at once, handshakes included.
    pub per_peer: usize,
    /// Connections of one peer busy with a request at once.
    pub busy_per_peer: usize,
    /// Slots only the API server's addresses may take, while any is known.
    pub reserved: usize,
}

impl Limits {
    /// One peer may hold a quarter of the slots: the API server's replicas
    /// (one address each) fit many times over, and one flooding pod leaves
    /// the rest to everyone else. At most `busy_per_peer` of them busy (no
    /// more than its quarter), and at most half the slots reserved.
    pub fn new(max: usize, busy_per_peer: usize, reserved: usize) -> Self {
        let max = max.max(1);
        let per_peer = (max / 4).max(1);
        Self {
            max,
            per_peer,
            busy_per_peer: busy_per_peer.clamp(1, per_peer),
            reserved: reserved.min(max / 2),
        }
    }
}

/// What a connection is doing, read when choosing whom to close.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Requests being answered on it now.
    in_flight: AtomicUsize,
    /// Its peer's connections busy now, shared by them all, and how many
    /// may be. Taken when `in_flight` leaves 0, given back when it returns.
    peer_busy: Arc<AtomicUsize>,
    busy_per_peer: usize,
    /// Held while `in_flight` moves, so that it and `peer_busy` agree.
    moving: Mutex<()>,
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
    fn new(epoch: Instant, peer_busy: Arc<AtomicUsize>, busy_per_peer: usize) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            peer_busy,
            busy_per_peer,
            moving: Mutex::new(()),
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

    /// A request begins; it ends when the guard drops. `None` when the
    /// connection was idle and its peer already has as many busy as it may:
    /// the request must be refused.
    pub fn begin(self: &Arc<Self>) -> Option<Busy> {
        let _moving = self.moving.lock().unwrap_or_else(|e| e.into_inner());
        if self.in_flight.load(Ordering::Relaxed) == 0 {
            let cap = self.busy_per_peer;
            self.peer_busy
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |busy| {
                    (busy < cap).then_some(busy + 1)
                })
                .ok()?;
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.heard_since.store(0, Ordering::Relaxed);
        Some(Busy {
            activity: self.clone(),
        })
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
        let activity = &self.activity;
        let _moving = activity.moving.lock().unwrap_or_else(|e| e.into_inner());
        activity
            .idle_since
            .store(micros(activity.epoch), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            activity.peer_busy.fetch_sub(1, Ordering::AcqRel);
        }
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
    /// Its peer was one of the API server's addresses when it came.
    api_server: bool,
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

/// One peer's connections.
#[derive(Default)]
struct Peer {
    /// Counted until each one's task ends.
    connections: usize,
    /// Those busy with a request now ([`Activity::begin`]).
    busy: Arc<AtomicUsize>,
}

#[derive(Default)]
struct State {
    next: u64,
    entries: HashMap<u64, Entry>,
    /// Entries per stage; closed ones are out of both.
    handshakes: usize,
    open: usize,
    /// Of `open`, those of the API server's addresses.
    open_api_server: usize,
    peers: HashMap<IpAddr, Peer>,
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
        let mut entry = self.remove(id).expect("the victim is there");
        metrics.connection_closed(reason);
        if let Some(close) = entry.close.take() {
            let _ = close.send(why);
        }
        true
    }

    /// Takes the entry out of the table and the counts.
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        match entry.stage {
            Stage::Handshake => self.handshakes -= 1,
            Stage::Open => {
                self.open -= 1;
                self.open_api_server -= usize::from(entry.api_server);
            }
        }
        Some(entry)
    }
}

/// Every webhook connection, from its TCP accept to its close.
pub(crate) struct Table {
    limits: Limits,
    api_server: Arc<ApiServerAddresses>,
    state: Mutex<State>,
    epoch: Instant,
    metrics: TlsMetrics,
}

impl Table {
    pub fn new(
        limits: Limits,
        api_server: Arc<ApiServerAddresses>,
        metrics: TlsMetrics,
    ) -> Arc<Self> {
        metrics.connections_limit(limits.max);
        metrics.connections_open(0);
        metrics.api_server_connections_open(0);
        Arc::new(Self {
            limits,
            api_server,
            state: Mutex::new(State::default()),
            epoch: Instant::now(),
            metrics,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slots others may not take now: none while no address of the
    /// API server is known.
    fn reserved(&self) -> usize {
        if self.api_server.any() {
            self.limits.reserved
        } else {
            0
        }
    }

    fn publish(&self, state: &State) {
        self.metrics.connections_open(state.open);
        self.metrics
            .api_server_connections_open(state.open_api_server);
    }

    /// A new TCP connection from `peer`, about to start its handshake; `None`
    /// when it must be closed at once.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Ticket> {
        let peer = peer.to_canonical();
        let api_server = self.api_server.contains(peer);
        let mut state = self.lock();
        let of_peer = state.peers.get(&peer).map_or(0, |p| p.connections);
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
        // Handshakes are all idle: there is always one to close, the API
        // server's last.
        if state.handshakes >= self.limits.max {
            let _ = state.evict(
                |e| e.stage == Stage::Handshake && !e.api_server,
                Close::Full,
                metrics,
                "evicted_full",
            ) || state.evict(
                |e| e.stage == Stage::Handshake,
                Close::Full,
                metrics,
                "evicted_full",
            );
        }
        let (close, closed) = oneshot::channel();
        let id = state.next;
        state.next += 1;
        let of_peer = state.peers.entry(peer).or_default();
        of_peer.connections += 1;
        let activity = Activity::new(self.epoch, of_peer.busy.clone(), self.limits.busy_per_peer);
        state.entries.insert(
            id,
            Entry {
                peer,
                api_server,
                stage: Stage::Handshake,
                activity: Arc::new(activity),
                close: Some(close),
            },
        );
        state.handshakes += 1;
        self.publish(&state);
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

    /// Requests answered at once, counted by reason.
    pub fn refused(&self, reason: &'static str) {
        self.metrics.request_refused(reason);
    }

    /// How many connections of one peer may be busy at once.
    pub fn busy_per_peer(&self) -> usize {
        self.limits.busy_per_peer
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
    /// close instead: told to already, or every slot in its way is busy.
    ///
    /// The API server's connections may take any slot; others only those
    /// left when the reserve is set aside, and they make room only by
    /// closing each other's. The API server makes room by closing another's
    /// idle connection first, one of its own only when none is left.
    pub fn open(&mut self) -> Option<Arc<Activity>> {
        let table = &self.table;
        let max = table.limits.max;
        let others_max = max - table.reserved();
        let mut state = table.lock();
        let api_server = state.entries.get(&self.id).map(|e| e.api_server)?;
        let others = state.open - state.open_api_server;
        let room = state.open < max && (api_server || others < others_max);
        let evict_open = |state: &mut State, which: fn(&Entry) -> bool| {
            state.evict(
                |e| e.stage == Stage::Open && which(e),
                Close::Full,
                &table.metrics,
                "evicted_full",
            )
        };
        let made_room = room
            || evict_open(&mut state, |e| !e.api_server)
            || (api_server && evict_open(&mut state, |_| true));
        if !made_room {
            state.remove(self.id);
            drop(state);
            debug!(peer = %self.peer, "every slot in the way is busy: a new connection is refused");
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
        state.open_api_server += usize::from(api_server);
        table.publish(&state);
        Some(activity)
    }

    /// Gives the slot back now, while the connection closes.
    pub fn release(&self) {
        let mut state = self.table.lock();
        state.remove(self.id);
        self.table.publish(&state);
    }

    pub fn table(&self) -> &Table {
        &self.table
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.table.lock();
        state.remove(self.id);
        if let Some(peer) = state.peers.get_mut(&self.peer) {
            peer.connections -= 1;
            if peer.connections == 0 {
                state.peers.remove(&self.peer);
            }
        }
        self.table.publish(&state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn table(max: usize, per_peer: usize) -> Arc<Table> {
        let limits = Limits {
            max,
            per_peer,
            busy_per_peer: per_peer,
            reserved: 0,
        };
        Table::new(
            limits,
            ApiServerAddresses::unknown(),
            Metrics::new().unwrap().tls,
        )
    }

    /// `max` slots, `reserved` of them for 10.0.0.100, each peer holding as
    /// many connections as it likes, all of them busy if it likes.
    fn with_reserve(max: usize, reserved: usize, api_server: &[IpAddr]) -> Arc<Table> {
        let limits = Limits {
            max,
            per_peer: max,
            busy_per_peer: max,
            reserved,
        };
        let known = ApiServerAddresses::fixed(api_server.iter().copied());
        Table::new(limits, known, Metrics::new().unwrap().tls)
    }

    /// A connection from `peer` past its handshake, busy with a request.
    fn busy(t: &Arc<Table>, peer: IpAddr) -> (Ticket, Busy) {
        let mut ticket = t.admit(peer).unwrap();
        let busy = ticket.open().unwrap().begin().unwrap();
        (ticket, busy)
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

    #[test]
    fn limits_keep_the_busy_cap_within_a_peers_share_and_reserve_at_most_half() {
        let l = Limits::new(1024, 16, 64);
        assert_eq!(
            (l.max, l.per_peer, l.busy_per_peer, l.reserved),
            (1024, 256, 16, 64)
        );
        let small = Limits::new(8, 16, 64);
        assert_eq!(
            (small.per_peer, small.busy_per_peer, small.reserved),
            (2, 2, 4)
        );
        assert_eq!(Limits::new(8, 0, 0).busy_per_peer, 1, "never 0");
    }

    #[test]
    fn a_peer_past_its_busy_cap_is_refused_a_request_until_one_of_its_own_ends() {
        let t = Table::new(
            Limits::new(100, 2, 0),
            ApiServerAddresses::unknown(),
            Metrics::new().unwrap().tls,
        );
        let (_a, first) = busy(&t, ip(1));
        let (_b, _second) = busy(&t, ip(1));
        let mut third = t.admit(ip(1)).unwrap();
        let third = third
            .open()
            .expect("a slot: idle connections are no busy ones");
        assert!(
            third.begin().is_none(),
            "a third busy connection is refused"
        );
        // Another peer is not held to this one's count (`busy` unwraps).
        let _other = busy(&t, ip(2));
        // One request ends: the third may begin.
        drop(first);
        let taken = third.begin().expect("room once one ended");
        // A second request on a connection already busy (HTTP/2 streams)
        // takes nothing more of the peer's count.
        let stream = third.begin().expect("the same connection, busy already");
        drop((taken, stream));
        assert!(third.begin().is_some());
    }

    #[test]
    fn the_api_servers_addresses_keep_their_reserve_when_others_fill_the_rest_with_busy_connections()
     {
        let api_server = ip(100);
        let t = with_reserve(4, 2, &[api_server]);
        let _others: Vec<_> = (1..=2).map(|i| busy(&t, ip(i))).collect();
        // The other slots are reserved: another peer is refused...
        let mut refused = t.admit(ip(3)).unwrap();
        assert!(refused.open().is_none(), "others share what is left");
        // ...and the API server is not.
        let mut api = [t.admit(api_server).unwrap(), t.admit(api_server).unwrap()];
        assert!(api[0].open().is_some() && api[1].open().is_some());
        assert_eq!(t.lock().open_api_server, 2);
    }

    #[test]
    fn nothing_is_reserved_while_the_api_servers_addresses_are_unknown() {
        let t = with_reserve(4, 2, &[]);
        let held: Vec<_> = (1..=4).map(|i| busy(&t, ip(i))).collect();
        assert_eq!(held.len(), 4, "every slot taken by others");
        let mut fifth = t.admit(ip(5)).unwrap();
        assert!(fifth.open().is_none());
    }

    #[test]
    fn others_never_close_the_api_servers_connections_to_make_room() {
        let api_server = ip(100);
        let t = with_reserve(3, 1, &[api_server]);
        // The API server holds two idle connections (one past its reserve),
        // another peer a busy one: the gate is full.
        let mut api: Vec<_> = (0..2).map(|_| t.admit(api_server).unwrap()).collect();
        for ticket in &mut api {
            drop(ticket.open().unwrap().begin());
        }
        let _other = busy(&t, ip(1));
        let mut new = t.admit(ip(2)).unwrap();
        assert!(
            new.open().is_none(),
            "refused rather than close the API server's"
        );
        assert!(api.iter_mut().all(|a| a.closed.try_recv().is_err()));
        // The API server, full as it is, makes room by closing its own
        // longest-idle connection.
        let mut again = t.admit(api_server).unwrap();
        assert!(again.open().is_some());
        assert_eq!(api[0].closed.try_recv(), Ok(Close::Full));
    }

    #[test]
    fn the_api_server_makes_room_by_closing_anothers_idle_connection_first() {
        let api_server = ip(100);
        let t = with_reserve(2, 1, &[api_server]);
        let mut own = t.admit(api_server).unwrap();
        drop(own.open().unwrap().begin());
        let mut other = t.admit(ip(1)).unwrap();
        other.open().unwrap();
        let mut new = t.admit(api_server).unwrap();
        assert!(new.open().is_some());
        assert_eq!(other.closed.try_recv(), Ok(Close::Full));
        assert!(own.closed.try_recv().is_err());
    }

    #[test]
    fn the_api_servers_handshakes_give_way_last() {
        let api_server = ip(100);
        let t = with_reserve(2, 1, &[api_server]);
        let mut api = t.admit(api_server).unwrap();
        let mut stalled = t.admit(ip(1)).unwrap();
        // A third handshake: the other peer's gives way, older as the API
        // server's is.
        let _new = t.admit(ip(2)).unwrap();
        assert_eq!(stalled.closed.try_recv(), Ok(Close::Full));
        assert!(api.closed.try_recv().is_err());
    }
}
