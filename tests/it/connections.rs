//! Connection floods on loopback, over real TLS: connections that send
//! nothing, handshakes that never start, one peer opening many, bodies that
//! trickle from several peers beside a client and the API server. Peers are
//! told apart by source address (127.0.0.0/8 is all loopback on Linux).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;

use preflight_gate::server::MinBodyRate;

use crate::harness::{Options, Running, start};
use crate::reviews::Review;
use crate::tls::client_config;

/// 127.0.0.`peer`, as a source address.
fn peer(peer: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, peer))
}

/// A TCP connection to the gate from 127.0.0.`from`.
async fn tcp_from(gate: &Running, from: u8) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(peer(from), 0)).unwrap();
    socket.connect(gate.addr).await.unwrap()
}

/// A completed TLS handshake from 127.0.0.`from`, then nothing.
async fn silent_from(gate: &Running, from: u8) -> TlsStream<TcpStream> {
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config(gate)));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector
        .connect(name, tcp_from(gate, from).await)
        .await
        .expect("the handshake completes")
}

/// Whether the gate closed the connection within `within` (an end of
/// stream, or an error: no close_notify on a connection never used).
async fn closed_within(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> bool {
    let mut buf = [0u8; 512];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Posts a review on a connection of its own, HTTP/1.1 kept alive.
async fn review_on(tls: &mut TlsStream<TcpStream>) -> String {
    let body = Review::merge_patch_to("4.14.12").body();
    let head = format!(
        "POST /validate/clusterversion HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes())
        .await
        .expect("the gate keeps the connection to read a review on it");
    tls.write_all(&body).await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    // Small answers, one read or a few: up to the end of the JSON body.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !reply.ends_with(b"}") {
        let n = tokio::time::timeout_at(deadline, tls.read(&mut buf))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(n > 0, "closed before the answer");
        reply.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&reply).into_owned()
}

/// Every count of closed connections, for failure messages.
fn all_closed(gate: &Running) -> String {
    gate.metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("preflight_gate_connections_"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn closed(gate: &Running, reason: &str) -> f64 {
    gate.metric(
        "preflight_gate_connections_closed_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_past_the_cap_do_not_keep_a_client_from_being_answered() {
    // 8 slots, 2 a peer; 10 peers hold 20 silent connections.
    let gate = start(Options {
        max_connections: 8,
        ..Options::default()
    })
    .await;
    let mut silent = Vec::new();
    for from in 10..20 {
        for _ in 0..2 {
            silent.push(silent_from(&gate, from).await);
        }
    }
    let (status, answer) = gate
        .post(&gate.client(), Review::merge_patch_to("4.15.3").body())
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert!(closed(&gate, "evicted_full") >= 12.0, "the oldest gave way");
    assert!(gate.metric("preflight_gate_connections_open", &[]) <= 8.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_hold_no_slot_and_are_closed_at_the_deadline() {
    let gate = start(Options {
        max_connections: 4,
        handshake_timeout: Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    // As many stalled handshakes as there are slots, each from its own peer:
    // TCP connected, no ClientHello.
    let mut stalled = Vec::new();
    for from in 30..34 {
        stalled.push(tcp_from(&gate, from).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        gate.metric("preflight_gate_connections_open", &[]),
        0.0,
        "a handshake holds no slot"
    );
    // A client is answered beside them.
    let (status, _) = gate
        .post(&gate.client(), Review::merge_patch_to("4.14.12").body())
        .await;
    assert_eq!(status, 200);
    // Each is closed, at its deadline or to make room.
    let started = Instant::now();
    for mut tcp in stalled {
        assert!(
            closed_within(&mut tcp, Duration::from_secs(5)).await,
            "a stalled handshake is closed"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // At least one at its deadline; each accounted for.
    let (timed_out, evicted) = (
        closed(&gate, "handshake_timeout"),
        closed(&gate, "evicted_full"),
    );
    assert!(
        timed_out >= 1.0 && timed_out + evicted >= 4.0,
        "{}",
        all_closed(&gate)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_silent_after_its_handshake_is_closed_at_the_first_request_deadline_when_the_gate_is_half_full()
 {
    // 2 slots: one silent connection fills half of them.
    let gate = start(Options {
        header_read_timeout: Duration::from_millis(500),
        max_connections: 2,
        ..Options::default()
    })
    .await;
    let mut silent = silent_from(&gate, 1).await;
    let started = Instant::now();
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)).await,
        "a connection that sends nothing is closed"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "not before the deadline"
    );
    assert_eq!(closed(&gate, "no_first_request"), 1.0);
    assert_eq!(gate.metric("preflight_gate_connections_open", &[]), 0.0);
    // A connection that does send a request is served.
    let mut used = silent_from(&gate, 1).await;
    assert!(review_on(&mut used).await.starts_with("HTTP/1.1 200"));
}

/// The API server keeps idle connections 90 s and sends a review on one
/// without asking whether the gate still holds it; the review on a
/// connection the gate closed that instant fails, and is never sent again
/// (the rollout test's `EOF` and "use of closed network connection"). So
/// the gate never closes a connection the client may reuse before the
/// idle deadline, longer than the client's: not a kept-alive one between
/// reviews, nor one the client opened and has not used yet (Go's client
/// pools a connection it dialled for a review another connection took),
/// while the gate has room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_between_reviews_is_kept_until_the_idle_deadline() {
    let gate = start(Options {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(2500),
        ..Options::default()
    })
    .await;
    let mut kept = silent_from(&gate, 1).await;
    assert!(review_on(&mut kept).await.starts_with("HTTP/1.1 200"));
    let mut unused = silent_from(&gate, 1).await;
    // Many header-read deadlines later, both are still open and the kept
    // one answers its next review.
    assert!(
        !closed_within(&mut unused, Duration::from_millis(1500)).await,
        "an unused connection was closed while the gate had room: {}",
        all_closed(&gate)
    );
    assert!(review_on(&mut kept).await.starts_with("HTTP/1.1 200"));
    assert!(review_on(&mut unused).await.starts_with("HTTP/1.1 200"));
    // Past the idle deadline, with nothing arriving, both are closed.
    let started = Instant::now();
    assert!(closed_within(&mut kept, Duration::from_secs(5)).await);
    assert!(closed_within(&mut unused, Duration::from_secs(5)).await);
    assert!(
        started.elapsed() >= Duration::from_millis(2000),
        "not before the idle deadline"
    );
    assert_eq!(closed(&gate, "idle_timeout"), 2.0, "{}", all_closed(&gate));
}

/// A request head that begins and never ends is cut off at the
/// header-read deadline, on a connection that has answered reviews too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_never_ends_is_closed_at_the_header_read_deadline() {
    let gate = start(Options {
        header_read_timeout: Duration::from_millis(500),
        ..Options::default()
    })
    .await;
    let mut slow = silent_from(&gate, 1).await;
    assert!(review_on(&mut slow).await.starts_with("HTTP/1.1 200"));
    slow.write_all(b"POST /validate/clusterversion HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    let started = Instant::now();
    assert!(closed_within(&mut slow, Duration::from_secs(5)).await);
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(
        closed(&gate, "header_timeout"),
        1.0,
        "{}",
        all_closed(&gate)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_gives_way_with_its_own_connections_only() {
    // 8 slots, 2 a peer.
    let gate = start(Options {
        max_connections: 8,
        ..Options::default()
    })
    .await;
    let mut other = silent_from(&gate, 41).await;
    let mut first = silent_from(&gate, 40).await;
    let _second = silent_from(&gate, 40).await;
    let _third = silent_from(&gate, 40).await;
    assert!(
        closed_within(&mut first, Duration::from_secs(3)).await,
        "the peer's oldest connection gave way to its third"
    );
    assert_eq!(
        closed(&gate, "evicted_peer_limit"),
        1.0,
        "{}",
        all_closed(&gate)
    );
    // Another peer's connection is untouched, and served.
    assert!(review_on(&mut other).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_full_the_longest_idle_connection_is_closed_not_the_new_one() {
    // 4 slots, 1 a peer.
    let gate = start(Options {
        max_connections: 4,
        ..Options::default()
    })
    .await;
    // One connection answered once and kept alive, then three silent ones.
    let mut used = silent_from(&gate, 50).await;
    assert!(review_on(&mut used).await.starts_with("HTTP/1.1 200"));
    let mut oldest_silent = silent_from(&gate, 51).await;
    let _b = silent_from(&gate, 52).await;
    let _c = silent_from(&gate, 53).await;
    // A fifth is served; the silent one idle longest made room.
    let mut new = silent_from(&gate, 54).await;
    assert!(
        closed_within(&mut oldest_silent, Duration::from_secs(3)).await,
        "the longest-idle silent connection is closed"
    );
    assert!(review_on(&mut new).await.starts_with("HTTP/1.1 200"));
    // The one that had sent a review went before none of them, and serves on.
    assert!(review_on(&mut used).await.starts_with("HTTP/1.1 200"));
    assert_eq!(closed(&gate, "evicted_full"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_slot_is_busy_a_new_connection_is_refused_and_the_busy_ones_served() {
    let gate = start(Options {
        max_connections: 3,
        // The bodies below wait as long as the test likes.
        min_body_rate: MinBodyRate::new(0),
        ..Options::default()
    })
    .await;
    // Three reviews whose bodies are still arriving: busy, not idle.
    let body = Review::merge_patch_to("4.14.12").body();
    let head = format!(
        "POST /validate/clusterversion HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut busy = Vec::new();
    for from in 60..63 {
        let mut tls = silent_from(&gate, from).await;
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(&body[..10]).await.unwrap();
        tls.flush().await.unwrap();
        busy.push(tls);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A fourth completes its handshake (a slot is taken only after it),
    // finds every slot busy, and is closed.
    let mut refused = silent_from(&gate, 63).await;
    assert!(closed_within(&mut refused, Duration::from_secs(3)).await);
    assert_eq!(closed(&gate, "refused_full"), 1.0);
    // The busy ones finish and are answered.
    for mut tls in busy {
        tls.write_all(&body[10..]).await.unwrap();
        let mut reply = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut reply))
            .await
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 200"));
    }
}

/// From 127.0.0.`from`, a review whose body has begun and stopped: once the
/// gate has begun to read it (its `100 Continue`), the first bytes of a
/// body of 100,000 that never ends. The connection is busy with it. An
/// error when the gate answered or closed the connection instead, with
/// what it said.
async fn slow_body_from(gate: &Running, from: u8) -> Result<TlsStream<TcpStream>, String> {
    let mut tls = silent_from(gate, from).await;
    let head = "POST /validate/clusterversion?timeout=10s HTTP/1.1\r\nHost: localhost\r\n\
                Content-Type: application/json\r\nContent-Length: 100000\r\n\
                Expect: 100-continue\r\n\r\n";
    if tls.write_all(head.as_bytes()).await.is_err() || tls.flush().await.is_err() {
        return Err("closed before the head".into());
    }
    let mut said = Vec::new();
    let mut buf = [0u8; 1024];
    while !said.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => said.extend_from_slice(&buf[..n]),
            _ => return Err(format!("closed: {}", String::from_utf8_lossy(&said))),
        }
    }
    if !said.starts_with(b"HTTP/1.1 100") {
        let rest = all_said(&mut tls).await;
        return Err(format!("{}{rest}", String::from_utf8_lossy(&said)));
    }
    tls.write_all(b"{\"apiVersion\":").await.unwrap();
    tls.flush().await.unwrap();
    Ok(tls)
}

/// Everything the gate sends on a connection until it closes it.
async fn all_said(tls: &mut (impl AsyncRead + Unpin)) -> String {
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut reply)).await;
    String::from_utf8_lossy(&reply).into_owned()
}

fn refused(gate: &Running, reason: &str) -> f64 {
    gate.metric(
        "preflight_gate_requests_refused_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

/// The red team's M3: each address may hold a quarter of the slots, so four
/// addresses sending bodies that trickle made every slot busy, and a busy
/// connection is never closed to make room. Now one address may have only
/// `--max-busy-per-peer` busy at once: its next request is answered 503
/// and its connection closed, and the client finds room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_from_several_addresses_do_not_keep_a_client_from_being_answered() {
    // 16 slots, 4 an address, 2 of them busy at most; no floor on the
    // bodies' rate, so that only the cap is at work.
    let gate = start(Options {
        max_connections: 16,
        max_busy_per_peer: 2,
        min_body_rate: MinBodyRate::new(0),
        ..Options::default()
    })
    .await;
    let (mut slow, mut turned_away) = (Vec::new(), Vec::new());
    for from in 90..94 {
        for _ in 0..4 {
            match slow_body_from(&gate, from).await {
                Ok(tls) => slow.push(tls),
                Err(said) => turned_away.push(said),
            }
        }
    }
    // A client from another address is answered beside them.
    let mut client = silent_from(&gate, 95).await;
    assert!(review_on(&mut client).await.starts_with("HTTP/1.1 200"));
    // Each address had two bodies busy; its next requests were refused.
    assert_eq!(slow.len(), 8, "two slow bodies an address: {turned_away:?}");
    for said in &turned_away {
        assert!(said.starts_with("HTTP/1.1 503"), "{said}");
        assert!(said.contains("reviews in flight already"), "{said}");
    }
    assert_eq!(refused(&gate, "peer_busy"), 8.0, "{}", all_closed(&gate));
}

/// The slots kept for the API server: others fill the rest with slow bodies
/// and a client of theirs is refused, while a connection from the API
/// server's address is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_from_several_addresses_do_not_keep_the_api_server_from_being_answered() {
    // 8 slots, 2 an address, both of them may be busy, 2 slots reserved for
    // the API server at 127.0.0.99; no floor on the rate.
    let api_server = peer(99);
    let gate = start(Options {
        max_connections: 8,
        max_busy_per_peer: 2,
        reserved_connections: 2,
        api_server: vec![api_server],
        min_body_rate: MinBodyRate::new(0),
        ..Options::default()
    })
    .await;
    let (mut slow, mut turned_away) = (Vec::new(), Vec::new());
    for from in 100..104 {
        for _ in 0..2 {
            match slow_body_from(&gate, from).await {
                Ok(tls) => slow.push(tls),
                Err(said) => turned_away.push(said),
            }
        }
    }
    // The API server is answered, and holds a reserved slot.
    let mut api = silent_from(&gate, 99).await;
    assert!(review_on(&mut api).await.starts_with("HTTP/1.1 200"));
    assert_eq!(
        gate.metric("preflight_gate_api_server_connections_open", &[]),
        1.0
    );
    // The others had the unreserved slots, all busy: the last two of them
    // were refused, and so is another client now.
    assert_eq!(slow.len(), 6, "the unreserved slots: {turned_away:?}");
    assert_eq!(closed(&gate, "refused_full"), 2.0, "{}", all_closed(&gate));
    let mut other = silent_from(&gate, 104).await;
    assert!(closed_within(&mut other, Duration::from_secs(3)).await);
    // The slow bodies still hold their slots: none was closed for it.
    assert_eq!(gate.metric("preflight_gate_connections_open", &[]), 7.0);
    assert_eq!(closed(&gate, "evicted_full"), 0.0, "{}", all_closed(&gate));
    drop(slow);
}

/// A body that trickles in below the floor is cut off once its grace and
/// the time its bytes paid for are over: 408, and the connection closed. A
/// body that pauses but has paid for its pauses is read and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_trickles_below_the_floor_is_answered_408_and_its_connection_closed() {
    let gate = start(Options {
        min_body_rate: MinBodyRate {
            bytes_per_second: 512,
            grace: Duration::from_millis(500),
        },
        ..Options::default()
    })
    .await;
    // A byte every 100 ms, 10 a second, of a 100,000-byte body.
    let slow = slow_body_from(&gate, 110).await.unwrap();
    let (mut read, mut write) = tokio::io::split(slow);
    let trickle = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b" ").await.is_err() || write.flush().await.is_err() {
                return;
            }
        }
    });
    let said = all_said(&mut read).await;
    assert!(said.starts_with("HTTP/1.1 408"), "{said}");
    assert!(
        said.contains("the review's body arrived slower than 512 bytes a second"),
        "{said}"
    );
    trickle.abort();
    assert_eq!(refused(&gate, "slow_body"), 1.0);

    // The whole review in three parts, 100 ms apart: its first part paid for
    // more than the pauses.
    let body = Review::merge_patch_to("4.14.12").body();
    let mut paused = silent_from(&gate, 111).await;
    let head = format!(
        "POST /validate/clusterversion HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    paused.write_all(head.as_bytes()).await.unwrap();
    let third = body.len() / 3;
    for part in [&body[..third], &body[third..2 * third], &body[2 * third..]] {
        paused.write_all(part).await.unwrap();
        paused.flush().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut reply = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), paused.read(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert!(reply[..n].starts_with(b"HTTP/1.1 200"));
    assert_eq!(refused(&gate, "slow_body"), 1.0, "only the trickle");
}
