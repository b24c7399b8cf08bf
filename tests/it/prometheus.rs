//! Alerts from a Prometheus-compatible `/api/v1/alerts` on loopback: the
//! bearer token is sent, failures are errors that name the URL, and the
//! check CLI uses the alerts in place of the snapshot's.

use std::net::SocketAddr;

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
