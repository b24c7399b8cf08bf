//! Connection flood: a normal client's review latency while attackers hold
//! connections that send nothing. The gate runs in-process over TLS on
//! loopback with `serve`'s defaults (1,024 connections, a quarter a peer,
//! 5 s handshake and first-request deadlines) and the example results. The
//! attackers, from 60 loopback addresses (50 connections each), open again
//! 100 ms after the gate closes one, for the whole run:
//! - silent TLS clients: a handshake, then nothing;
//! - stalled handshakes: TCP connected, no ClientHello.
//!
//! Two normal clients post the example review of `oc adm upgrade --to
//! 4.15.3` one after another, with the API server's `?timeout=2s`: one
//! keeps its connection alive (as the API server does), one opens a new
//! connection for every review (and so needs a handshake and a slot while
//! the flood goes on). For each it prints p50, p99 and max, how many reviews
//! got a verdict, and how many connections the gate closed, and why.
//!
//!   cargo bench --bench flood
//!
//! `PREFLIGHT_GATE_BENCH_REVIEWS` sets each client's reviews per scenario
//! (default 200); `PREFLIGHT_GATE_BENCH_SILENT` and
//! `PREFLIGHT_GATE_BENCH_STALLED` the attackers (default 1,500 each).
//! Figures go to docs/benchmarks.md.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::watch;

#[path = "common/gate.rs"]
mod gate;
use gate::{Running, connector, post_reviews, start};

/// Connections per attacking address: under the gate's per-peer share.
const PER_ADDRESS: usize = 50;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reviews = env("PREFLIGHT_GATE_BENCH_REVIEWS", 200);
    let silent = env("PREFLIGHT_GATE_BENCH_SILENT", 1500);
    let stalled = env("PREFLIGHT_GATE_BENCH_STALLED", 1500);
    let gate = start().await;
    println!("each client: {reviews} reviews in a row, 2 s API server timeout each");
    run(&gate, "no attackers", 0, 0, reviews).await;
    let name = format!("{silent} silent TLS + {stalled} stalled handshakes");
    run(&gate, &name, silent, stalled, reviews).await;
}

/// The attacker's `n`th address: 127.0.`block`.x, `PER_ADDRESS` apiece.
fn address(block: u8, n: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, block, (1 + n / PER_ADDRESS) as u8))
}

async fn tcp_from(from: IpAddr, to: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    let tcp = socket.connect(to).await.ok()?;
    let _ = tcp.set_nodelay(true);
    Some(tcp)
}

/// One attacker: connects (and shakes hands, when `silent`), then sends
/// nothing until the gate closes it, and again, until `stop`.
async fn attacker(
    from: IpAddr,
    to: SocketAddr,
    silent: Option<tokio_rustls::TlsConnector>,
    mut stop: watch::Receiver<bool>,
) {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    loop {
        let held = async {
            let tcp = tcp_from(from, to).await?;
            let mut buf = [0u8; 64];
            match &silent {
                Some(connector) => {
                    let mut tls = connector.connect(name.clone(), tcp).await.ok()?;
                    while tls.read(&mut buf).await.ok()? > 0 {}
                }
                None => {
                    let mut tcp = tcp;
                    while tcp.read(&mut buf).await.ok()? > 0 {}
                }
            }
            Some(())
        };
        tokio::select! {
            _ = stop.changed() => return,
            _ = held => {}
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

fn closed(gate: &Running) -> String {
    gate.metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("preflight_gate_connections_closed_total{"))
        .filter(|l| !l.ends_with(" 0"))
        .map(|l| {
            let reason = l.split('"').nth(1).unwrap_or("?");
            let n = l.rsplit(' ').next().unwrap_or("?");
            format!("{reason} {n}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn run(gate: &Running, scenario: &str, silent: usize, stalled: usize, reviews: usize) {
    let (stop_tx, stop_rx) = watch::channel(false);
    let connector = connector(gate);
    let mut attackers = Vec::new();
    for n in 0..silent {
        attackers.push(tokio::spawn(attacker(
            address(1, n),
            gate.addr,
            Some(connector.clone()),
            stop_rx.clone(),
        )));
    }
    for n in 0..stalled {
        attackers.push(tokio::spawn(attacker(
            address(2, n),
            gate.addr,
            None,
            stop_rx.clone(),
        )));
    }
    // Let the flood build up.
    if silent + stalled > 0 {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let open = gate
        .metrics
        .render()
        .lines()
        .find_map(|l| {
            l.strip_prefix("preflight_gate_connections_open ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    for keep_alive in [true, false] {
        let (mut latencies, verdicts) = post_reviews(gate, reviews, keep_alive).await;
        latencies.sort();
        let at =
            |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
        println!(
            "{scenario:<44} {:<15} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  verdicts {verdicts}/{reviews}",
            if keep_alive {
                "kept alive"
            } else {
                "new each time"
            },
            at(0.50).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3,
            latencies.last().unwrap().as_secs_f64() * 1e3,
        );
    }
    let _ = stop_tx.send(true);
    for task in attackers {
        let _ = task.await;
    }
    println!(
        "  slots held when the clients began: {open}; closed by the gate: {}",
        closed(gate)
    );
}
