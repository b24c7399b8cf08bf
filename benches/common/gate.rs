//! The gate served on loopback with `serve`'s defaults and the example
//! results, and a TLS client that trusts it: what the connection benches
//! (starvation, flood) share. Included by each with `#[path]`, and each uses
//! part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use preflight_gate::admission::Policy;
use preflight_gate::cluster::NoCluster;
use preflight_gate::cluster::api_server::ApiServerAddresses;
use preflight_gate::cluster::witness::Witness;
use preflight_gate::metrics::Metrics;
use preflight_gate::preflight::DirectorySource;
use preflight_gate::server::{self, CertFiles, Gate, Health, Listen, MinBodyRate, ReloadingCert};

/// The example review a bench posts.
pub const REVIEW: &str = include_str!("../../examples/reviews/update-to-4.15.3.json");

/// A gate being served.
pub struct Running {
    pub addr: SocketAddr,
    pub ca: String,
    pub metrics: Metrics,
    _dir: tempfile::TempDir,
}

/// Serves the gate, and waits a moment for it to listen.
pub async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let ca = preflight_gate::certs::generate(dir.path(), &[])
        .unwrap()
        .ca_pem;
    let metrics = Metrics::new().unwrap();
    let source = Arc::new(
        DirectorySource::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/results"
        )))
        .unwrap(),
    );
    let gate = Arc::new(Gate {
        results: source.clone(),
        authorizer: Arc::new(NoCluster),
        events: None,
        witness: Witness::unwatched(metrics.clone()),
        run_requests: preflight_gate::admission::run_requests::RunRequests::new(10, "gate"),
        policy: Policy::default(),
        metrics: metrics.clone(),
    });
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = Arc::new(
        ReloadingCert::load(
            CertFiles {
                cert: dir.path().join("tls.crt"),
                key: dir.path().join("tls.key"),
            },
            provider.clone(),
            metrics.clone(),
        )
        .unwrap(),
    );
    let tls = server::tls::server_config(cert, provider, None).unwrap();
    let webhook = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = webhook.local_addr().unwrap();
    let listen = Listen {
        webhook,
        admin: std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        admin_tls: None,
        // The defaults of `serve`.
        max_concurrency: 256,
        max_connections: 1024,
        max_busy_per_peer: 16,
        reserved_connections: 64,
        // No cluster: nothing reserved.
        api_server: ApiServerAddresses::unknown(),
        min_body_rate: MinBodyRate::new(512),
        handshake_timeout: Duration::from_secs(5),
        header_read_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(120),
        shutdown_delay: Duration::ZERO,
        shutdown_grace: Duration::from_secs(1),
    };
    let health = Arc::new(Health {
        results: source,
        metrics: metrics.clone(),
        shutting_down: Default::default(),
        node_cordoned: Default::default(),
        scrape_access: None,
    });
    tokio::spawn(server::serve(
        listen,
        tls,
        gate,
        health,
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    Running {
        addr,
        ca,
        metrics,
        _dir: dir,
    }
}

/// A TLS client that trusts the gate's certificate.
pub fn connector(gate: &Running) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(gate.ca.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Posts the example review `reviews` times, one after another, as the
/// API server does (`?timeout=2s`), on one kept-alive connection or a new
/// one each time; the latencies and how many got a verdict.
pub async fn post_reviews(
    gate: &Running,
    reviews: usize,
    keep_alive: bool,
) -> (Vec<Duration>, usize) {
    post_reviews_for(gate, reviews, Duration::ZERO, keep_alive).await
}

/// As [`post_reviews`], and on past `reviews` until `at_least` has passed,
/// so that the reviews span an attack's cycles rather than a moment of it.
pub async fn post_reviews_for(
    gate: &Running,
    reviews: usize,
    at_least: Duration,
    keep_alive: bool,
) -> (Vec<Duration>, usize) {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(gate.ca.as_bytes()).unwrap())
        .timeout(Duration::from_secs(2));
    if !keep_alive {
        builder = builder.pool_max_idle_per_host(0);
    }
    let client = builder.build().unwrap();
    let url = format!(
        "https://localhost:{}/validate/clusterversion?timeout=2s",
        gate.addr.port()
    );
    let mut latencies = Vec::with_capacity(reviews);
    let mut verdicts = 0usize;
    let began = Instant::now();
    while latencies.len() < reviews || began.elapsed() < at_least {
        let started = Instant::now();
        let answer = client
            .post(&url)
            .header("content-type", "application/json")
            .body(REVIEW)
            .send()
            .await;
        let ok = match answer {
            Ok(r) if r.status() == 200 => r
                .json::<serde_json::Value>()
                .await
                .is_ok_and(|v| v["response"]["allowed"].is_boolean()),
            _ => false,
        };
        latencies.push(started.elapsed());
        verdicts += usize::from(ok);
    }
    (latencies, verdicts)
}
