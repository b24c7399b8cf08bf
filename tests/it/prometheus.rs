//! Alerts from a Prometheus-compatible `/api/v1/alerts` on loopback: the
//! bearer token is sent, failures are errors that name the URL, and the
//! check CLI uses the alerts in place of the snapshot's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use preflight_gate::cluster::prometheus::Prometheus;

const TOKEN: &str = "sha256~sekret";

async fn serve() -> SocketAddr {
    let body = serde_json::json!({"status": "success", "data": {"alerts": [
        {"labels": {"alertname": "etcdNoLeader", "severity": "critical", "namespace": "openshift-etcd"},
         "annotations": {"summary": "etcd has no leader"}, "state": "firing"},
        {"labels": {"alertname": "KubeNodeNotReady", "severity": "warning", "node": "w1"},
         "state": "pending"}]}});
    let app = Router::new().route(
        "/api/v1/alerts",
        get(move |headers: HeaderMap| {
            let body = body.clone();
            async move {
                match headers.get("authorization").and_then(|v| v.to_str().ok()) {
                    Some(v) if v == format!("Bearer {TOKEN}") => (StatusCode::OK, body.to_string()),
                    _ => (StatusCode::UNAUTHORIZED, String::new()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn token_file() -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{TOKEN}\n")).unwrap();
    file
}

#[tokio::test]
async fn alerts_are_read_with_the_bearer_token() {
    let addr = serve().await;
    let token = token_file();
    let prometheus = Prometheus {
        url: format!("http://{addr}/"),
        token_file: Some(token.path().to_owned()),
        ca_file: None,
    };
    let alerts = prometheus.alerts().await.unwrap();
    assert_eq!(alerts.len(), 2);
    assert_eq!(alerts[0].name(), "etcdNoLeader");
    assert!(alerts[0].firing() && !alerts[1].firing());

    let anonymous = Prometheus {
        token_file: None,
        ..prometheus
    };
    let err = anonymous.alerts().await.unwrap_err().to_string();
    assert_eq!(
        err,
        format!("http://{addr}/api/v1/alerts answered HTTP 401")
    );
}

/// A querier that answers `failures` times with `status`, then with one
/// alert; and how many requests it saw.
async fn flaky(status: StatusCode, failures: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let app = Router::new().route(
        "/api/v1/alerts",
        get(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < failures {
                    (status, String::new())
                } else {
                    (StatusCode::OK, serde_json::json!({"status": "success", "data": {"alerts": [
                        {"labels": {"alertname": "etcdNoLeader", "severity": "critical"}, "state": "firing"}]}}).to_string())
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

/// A querier restarting (503 twice) costs a run seconds, not an error; a
/// refused token is final at once, and so is a querier down for good,
/// after the last try.
#[tokio::test]
async fn a_querier_that_fails_for_a_moment_is_asked_again_and_a_refusal_is_not() {
    let source = |addr: SocketAddr| Prometheus {
        url: format!("http://{addr}"),
        token_file: None,
        ca_file: None,
    };
    let (addr, seen) = flaky(StatusCode::SERVICE_UNAVAILABLE, 2).await;
    let alerts = source(addr).alerts().await.expect("read on the third try");
    assert_eq!(alerts.len(), 1);
    assert_eq!(seen.load(Ordering::SeqCst), 3);

    let (addr, seen) = flaky(StatusCode::FORBIDDEN, 1).await;
    let err = source(addr).alerts().await.unwrap_err();
    assert!(!err.is_transient());
    assert_eq!(
        err.to_string(),
        format!("http://{addr}/api/v1/alerts answered HTTP 403")
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "a refusal is not asked again"
    );

    let (addr, seen) = flaky(StatusCode::BAD_GATEWAY, usize::MAX).await;
    let err = source(addr).alerts().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("http://{addr}/api/v1/alerts answered HTTP 502")
    );
    assert_eq!(seen.load(Ordering::SeqCst), 4, "one try and three more");
}

#[tokio::test]
async fn a_bad_ca_file_is_named() {
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), "not a certificate").unwrap();
    let prometheus = Prometheus {
        url: "https://127.0.0.1:1".to_owned(),
        token_file: None,
        ca_file: Some(ca.path().to_owned()),
    };
    let err = prometheus.alerts().await.unwrap_err().to_string();
    assert!(err.contains(&ca.path().display().to_string()), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_check_cli_blocks_on_a_critical_alert_from_prometheus() {
    let addr = serve().await;
    let token = token_file();
    let token_path = token.path().to_owned();
    let run = move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
            .args([
                "check",
                "--to",
                "4.14.12",
                "--output",
                "json",
                "--prometheus-url",
            ])
            .arg(format!("http://{addr}"))
            .arg("--prometheus-token-file")
            .arg(&token_path)
            .env_remove("PREFLIGHT_GATE_KUBECONFIG")
            .env_remove("PREFLIGHT_GATE_SNAPSHOT")
            .output()
            .unwrap()
    };
    let out = tokio::task::spawn_blocking(run).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let critical = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "CriticalAlertsFiring")
        .unwrap();
    assert_eq!(critical["outcome"], "Fail");
    assert!(
        critical["message"]
            .as_str()
            .unwrap()
            .contains("etcdNoLeader")
    );
    // The sample's own KubeContainerWaiting is replaced; the pending node alert is ignored.
    let precheck = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "PrecheckAlertsFiring")
        .unwrap();
    assert_eq!(precheck["outcome"], "Pass", "{precheck}");
}

/// A querier that answers with more than the gate reads, declared or
/// streamed without a length: refused at the cap, never read whole.
#[tokio::test]
async fn an_answer_past_the_cap_is_refused_not_read_whole() {
    use axum::body::Body;
    use preflight_gate::cluster::prometheus::MAX_BODY;
    let app = Router::new()
        .route(
            "/declared/api/v1/alerts",
            get(|| async { vec![b' '; MAX_BODY + 1] }),
        )
        .route(
            "/streamed/api/v1/alerts",
            get(|| async {
                // 1 MiB chunks, with no Content-Length, past the cap.
                let chunks = (0..=MAX_BODY / (1 << 20))
                    .map(|_| Ok::<_, std::io::Error>(vec![b' '; 1 << 20]));
                Body::from_stream(futures::stream::iter(chunks))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    for path in ["declared", "streamed"] {
        let prometheus = Prometheus {
            url: format!("http://{addr}/{path}"),
            token_file: None,
            ca_file: None,
        };
        let err = prometheus.alerts().await.unwrap_err();
        assert!(!err.is_transient(), "{path}");
        assert_eq!(
            err.to_string(),
            format!(
                "http://{addr}/{path}/api/v1/alerts answered more than {MAX_BODY} bytes of alerts: not read"
            ),
            "{path}"
        );
    }
}
