//! Starvation: a normal client's review latency while attackers hold
//! connections open. The gate runs in-process over TLS on loopback with the
//! example results; the attackers are
//! - slow-body clients: headers of a 7 MB review, then a byte every 2 s;
//! - idle clients: a TLS handshake, then nothing.
//!
//! For each scenario it prints the normal client's p50, p99 and max, how
//! many of its reviews got a verdict, and how the attackers fared.
//!
//!   cargo bench --bench starvation
//!
//! `PREFLIGHT_GATE_BENCH_REVIEWS` sets the normal client's reviews per
//! scenario (default 200). Figures go to docs/benchmarks.md.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[path = "common/gate.rs"]
mod gate;
use gate::{Running, connector, post_reviews, start};

struct Scenario {
    name: &'static str,
    slow_bodies: usize,
    idle: usize,
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reviews: usize = std::env::var("PREFLIGHT_GATE_BENCH_REVIEWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let gate = start().await;
    println!("normal client: {reviews} reviews in a row, 2 s API server timeout each");
    for scenario in [
        Scenario {
            name: "no attackers",
            slow_bodies: 0,
            idle: 0,
        },
        Scenario {
            name: "260 slow-body clients",
            slow_bodies: 260,
            idle: 0,
        },
        Scenario {
            name: "260 slow-body + 600 idle clients",
            slow_bodies: 260,
            idle: 600,
        },
    ] {
        run(&gate, &scenario, reviews).await;
    }
}

async fn tls(gate: &Running) -> Option<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(gate.addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector(gate).connect(name, tcp).await.ok()
}

/// Holds connections open as the scenario says until `stop`; each task
/// says whether its connection got through the TLS handshake.
async fn attack(
    gate: &Running,
    scenario: &Scenario,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<bool>> {
    let mut tasks = Vec::new();
    for i in 0..scenario.slow_bodies + scenario.idle {
        let slow = i < scenario.slow_bodies;
        let mut stop = stop.clone();
        let Some(mut stream) = tls(gate).await else {
            tasks.push(tokio::spawn(async { false }));
            continue;
        };
        tasks.push(tokio::spawn(async move {
            if slow {
                let head = "POST /validate/clusterversion?timeout=10s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 7000000\r\n\r\n{";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return true;
                }
            }
            loop {
                tokio::select! {
                    _ = stop.changed() => return true,
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {
                        if slow && stream.write_all(b" ").await.is_err() {
                            return true;
                        }
                    }
                }
            }
        }));
    }
    tasks
}

async fn run(gate: &Running, scenario: &Scenario, reviews: usize) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let attackers = attack(gate, scenario, stop_rx).await;
    // Let the slow bodies start and reserve what they would.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut latencies, verdicts) = post_reviews(gate, reviews, true).await;
    let _ = stop_tx.send(true);
    let mut connected = 0;
    for task in attackers {
        connected += usize::from(task.await.unwrap_or(false));
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "{:<34} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  verdicts {verdicts}/{reviews}  attackers connected {connected}/{}",
        scenario.name,
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3,
        scenario.slow_bodies + scenario.idle,
    );
}
