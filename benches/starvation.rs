//! Starvation: a normal client's review latency while attackers hold
//! connections open. The gate runs in-process over TLS on loopback with
//! `serve`'s defaults and the example results; the attackers come from
//! loopback addresses of their own (127.0.0.10 and up), never the normal
//! client's (127.0.0.1), and are
//! - slow-body clients: headers of a 7 MB review, then a byte every 2 s;
//! - idle clients: a TLS handshake, then nothing.
//!
//! In the scenarios that say so, an attacker comes back 0.5 to 1.5 s after
//! the gate closes its connection (a slow body cut off below `--min-body-rate`, a
//! request past `--max-busy-per-peer` refused), for as long as the normal
//! client posts, which it does one review after another for at least 5 s,
//! so that its reviews span the attack's cycles.
//!
//! For each scenario it prints the normal client's p50, p99 and max, how
//! many of its reviews got a verdict, how many attackers got through the
//! TLS handshake, and what the gate refused meanwhile.
//!
//!   cargo bench --bench starvation
//!
//! `PREFLIGHT_GATE_BENCH_REVIEWS` sets the least number of the normal
//! client's reviews per scenario (default 200). Figures go to
//! docs/benchmarks.md.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[path = "common/gate.rs"]
mod gate;
use gate::{Running, connector, post_reviews_for, start};

struct Scenario {
    name: &'static str,
    slow_bodies: usize,
    idle: usize,
    /// Source addresses the attackers are spread over.
    addresses: u8,
    /// Whether an attacker comes back once the gate closes its connection.
    persistent: bool,
}

/// How long the `i`th attacker waits before it comes back: 0.5 to 1.5 s,
/// spread over the attackers, so that they do not come back all at once
/// (a burst of handshakes is the flood bench's business).
fn come_back(i: usize) -> Duration {
    Duration::from_millis(500 + (i as u64 * 7919) % 1000)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reviews: usize = std::env::var("PREFLIGHT_GATE_BENCH_REVIEWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let gate = start().await;
    println!(
        "normal client: at least {reviews} reviews and 5 s, one after another on one kept-alive connection, 2 s API server timeout each"
    );
    for scenario in [
        Scenario {
            name: "no attackers",
            slow_bodies: 0,
            idle: 0,
            addresses: 1,
            persistent: false,
        },
        Scenario {
            name: "260 slow-body clients",
            slow_bodies: 260,
            idle: 0,
            addresses: 1,
            persistent: false,
        },
        Scenario {
            name: "260 slow-body + 600 idle clients",
            slow_bodies: 260,
            idle: 600,
            addresses: 1,
            persistent: false,
        },
        Scenario {
            name: "slow bodies, 16 addresses x 16, back",
            slow_bodies: 256,
            idle: 0,
            addresses: 16,
            persistent: true,
        },
        Scenario {
            name: "slow bodies, 8 addresses x 32, back",
            slow_bodies: 256,
            idle: 0,
            addresses: 8,
            persistent: true,
        },
        Scenario {
            name: "slow bodies, 4 addresses x 256, back",
            slow_bodies: 1024,
            idle: 0,
            addresses: 4,
            persistent: true,
        },
    ] {
        run(&gate, &scenario, reviews).await;
    }
}

/// The `i`th attacker's source address.
fn source(scenario: &Scenario, i: usize) -> IpAddr {
    let spread = i % usize::from(scenario.addresses.max(1));
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + spread as u8))
}

async fn tls(gate: &Running, from: IpAddr) -> Option<tokio_rustls::client::TlsStream<TcpStream>> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    let tcp = socket.connect(gate.addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector(gate).connect(name, tcp).await.ok()
}

/// What one attacker saw: connections that got through the handshake, and
/// how many of them the gate closed.
#[derive(Default)]
struct Fared {
    connected: usize,
    closed: usize,
}

/// Holds connections open as the scenario says until `stop`.
async fn attack(
    gate: &Running,
    scenario: &Scenario,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<Fared>> {
    let mut tasks = Vec::new();
    for i in 0..scenario.slow_bodies + scenario.idle {
        let slow = i < scenario.slow_bodies;
        let from = source(scenario, i);
        let persistent = scenario.persistent;
        let mut stop = stop.clone();
        // The first connection is made here, one after another, so that
        // the scenario is in place before the normal client starts.
        let mut first = tls(gate, from).await;
        let gate_addr = gate.addr;
        let connector = connector(gate);
        tasks.push(tokio::spawn(async move {
            let mut fared = Fared::default();
            loop {
                let stream = match first.take() {
                    Some(stream) => Some(stream),
                    None if !persistent => None,
                    None => {
                        let socket = TcpSocket::new_v4().unwrap();
                        let _ = socket.bind(SocketAddr::new(from, 0));
                        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                        match socket.connect(gate_addr).await {
                            Ok(tcp) => connector.connect(name, tcp).await.ok(),
                            Err(_) => None,
                        }
                    }
                };
                if let Some(stream) = stream {
                    fared.connected += 1;
                    if hold(stream, slow, &mut stop).await {
                        return fared;
                    }
                    fared.closed += 1;
                }
                if !persistent {
                    return fared;
                }
                tokio::select! {
                    _ = stop.changed() => return fared,
                    _ = tokio::time::sleep(come_back(i)) => {}
                }
            }
        }));
    }
    tasks
}

/// Holds one connection until `stop` (true) or until the gate closes it
/// (false).
async fn hold(
    stream: tokio_rustls::client::TlsStream<TcpStream>,
    slow: bool,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    let (mut read, mut write) = tokio::io::split(stream);
    if slow {
        let head = "POST /validate/clusterversion?timeout=10s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 7000000\r\n\r\n{";
        if write.write_all(head.as_bytes()).await.is_err() {
            return false;
        }
    }
    let mut buf = [0u8; 1024];
    loop {
        tokio::select! {
            _ = stop.changed() => return true,
            // An answer (408, 503) is followed by the close; either ends it.
            read = read.read(&mut buf) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return false;
                }
            }
            _ = tokio::time::sleep(Duration::from_secs(2)) => {
                if slow && write.write_all(b" ").await.is_err() {
                    return false;
                }
            }
        }
    }
}

/// A counter's value in the gate's metrics.
fn counter(gate: &Running, series: &str) -> f64 {
    gate.metrics
        .render()
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

async fn run(gate: &Running, scenario: &Scenario, reviews: usize) {
    let slow_body = r#"preflight_gate_requests_refused_total{reason="slow_body"}"#;
    let peer_busy = r#"preflight_gate_requests_refused_total{reason="peer_busy"}"#;
    let before = (counter(gate, slow_body), counter(gate, peer_busy));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let attackers = attack(gate, scenario, stop_rx).await;
    // Let the slow bodies start and reserve what they would.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut latencies, verdicts) =
        post_reviews_for(gate, reviews, Duration::from_secs(5), true).await;
    let posted = latencies.len();
    let _ = stop_tx.send(true);
    let (mut connected, mut closed) = (0, 0);
    for task in attackers {
        let fared = task.await.unwrap_or_default();
        connected += usize::from(fared.connected > 0);
        closed += fared.closed;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{:<37} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  verdicts {verdicts}/{posted}  attackers connected {connected}/{}  their connections the gate closed {closed}  refused: slow_body {}, peer_busy {}",
        scenario.name,
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3,
        scenario.slow_bodies + scenario.idle,
        counter(gate, slow_body) - before.0,
        counter(gate, peer_busy) - before.1,
    );
    // The next scenario starts on a quiet gate.
    tokio::time::sleep(Duration::from_secs(3)).await;
}
