//! Shutdown: readiness turns false, in-flight reviews finish, the process
//! exits; and a `serve` that cannot start for its flags exits 2 at once.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use preflight_gate::admission::Authorization;

use crate::harness::{FixedAuthorizer, Options, start};
use crate::reviews::Review;
use crate::support::{free_port, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_reviews_finish_after_shutdown_begins() {
    // An access review that takes a second keeps an override review in flight.
    let mut gate = start(Options {
        authorizer: FixedAuthorizer::slow(Authorization::Allowed, Duration::from_secs(1)),
        shutdown_delay: Duration::from_millis(300),
        ..Options::default()
    })
    .await;
    let client = gate.client();
    let body = Review::merge_patch_to("4.15.3")
        .overridden("4.15.3", "drain test")
        .body();
    let url = gate.url.clone();
    let in_flight = tokio::spawn(async move {
        client
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    gate.trigger_stop();
    // Unready while draining.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ready = reqwest::get(format!("{}/readyz", gate.admin))
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 503);

    let response = in_flight
        .await
        .unwrap()
        .expect("the in-flight review is answered");
    assert_eq!(response.status().as_u16(), 200);
    let json: serde_json::Value = response.json().await.unwrap();
    assert_eq!(json["response"]["allowed"], true, "{json}");
    gate.stop().await.expect("a clean stop");
    assert!(
        std::net::TcpStream::connect(gate.addr).is_err(),
        "no longer listening"
    );
}

/// The API server's way with webhooks: HTTP/1.1, one keep-alive connection
/// reused review after review, no retry of a POST whose connection closed
/// under it. Draining never closes a connection under a review the client
/// may have sent: each answer after SIGTERM says `Connection: close`, so
/// the client leaves on that boundary, and a connection that comes during
/// the drain (the Service still routing here while endpoints catch up,
/// slower on a busy node than the delay) is answered its review too, even
/// when its handshake straddles the delay's end (the `EOF` a rollout
/// showed). Reviews are sent, each on a new connection as the API server
/// sends them after `Connection: close`, through the delay and past it:
/// none is lost; the listener closes once they stop, and the gate stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_answers_every_review_sent_through_and_past_the_delay() {
    let delay = Duration::from_secs(2);
    let mut gate = start(Options {
        shutdown_delay: delay,
        ..Options::default()
    })
    .await;
    let client = gate.client_builder().http1_only().build().unwrap();
    let (url, body) = (gate.url.clone(), Review::merge_patch_to("4.15.3").body());
    let post = || {
        client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    };
    let closes = |response: &reqwest::Response| {
        response
            .headers()
            .get(reqwest::header::CONNECTION)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
    };
    let before = post().await.expect("the gate answers");
    assert!(!closes(&before), "a serving gate keeps connections alive");
    before.bytes().await.unwrap();

    gate.trigger_stop();
    let began = Instant::now();
    let until = began + delay + delay / 2;
    let (mut answered, mut closing, mut after_delay, mut lost) = (0, 0, 0, Vec::new());
    while Instant::now() < until {
        match post().await {
            Ok(response) => {
                answered += 1;
                closing += usize::from(closes(&response));
                after_delay += usize::from(began.elapsed() > delay);
                response.bytes().await.unwrap();
            }
            Err(e) => lost.push(format!("{:?}: {e:?}", began.elapsed())),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(lost.is_empty(), "reviews lost while draining: {lost:#?}");
    assert!(answered >= 20, "too few reviews while draining: {answered}");
    assert!(
        after_delay >= 5,
        "too few reviews after the delay: {after_delay}"
    );
    // The first answer may have been written before the drain began.
    assert!(
        closing + 1 >= answered,
        "{closing} of {answered} answers during the drain closed their connection"
    );
    // Once the reviews stop, the listener closes and the gate stops.
    gate.stop().await.expect("a clean stop");
    let after = post().await.expect_err("the drained gate still answers");
    assert!(after.is_connect(), "{after:?}");
    eprintln!(
        "{answered} reviews answered while draining ({after_delay} after the delay), then: {after}"
    );
}

#[test]
fn the_binary_drains_and_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (webhook, admin) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args(["serve", "--shutdown-delay", "1s"])
        .args(["--webhook-addr", &format!("127.0.0.1:{webhook}")])
        .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
        .current_dir(dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let readyz = format!("http://127.0.0.1:{admin}/readyz");
    let status = |url: &str| -> Option<u16> {
        let mut stream =
            std::net::TcpStream::connect(url.trim_start_matches("http://").split('/').next()?)
                .ok()?;
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).ok()?;
        reply.split(' ').nth(1)?.parse().ok()
    };
    wait_for(
        "the binary to become ready",
        Duration::from_secs(20),
        || (status(&readyz) == Some(200)).then_some(()),
    );
    assert!(
        dir.path().join("certs/tls.crt").exists(),
        "development certificates were made"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        status(&readyz),
        Some(503),
        "unready during the shutdown delay"
    );
    let exit = wait_for(
        "the binary to exit after SIGTERM",
        Duration::from_secs(20),
        || child.try_wait().unwrap(),
    );
    assert!(exit.success(), "{exit:?}");
    let mut logs = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(logs.contains("SIGTERM"), "{logs}");
    assert!(logs.contains("stopped"), "{logs}");
}

/// Flags that need a cluster, given none: a clear error and exit 2 (bad
/// input), before anything listens.
#[test]
fn serve_refuses_flags_that_need_a_cluster_without_one_with_exit_2() {
    for (flag, says) in [
        ("--cluster-claims", "--cluster-claims needs a cluster"),
        (
            "--hosted-control-planes",
            "--hosted-control-planes needs a cluster to watch",
        ),
        (
            "--metrics-auth=kubernetes",
            "--metrics-auth=kubernetes needs a cluster to ask",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
            .args(["serve", flag])
            .args(["--webhook-addr", &format!("127.0.0.1:{}", free_port())])
            .args(["--admin-addr", &format!("127.0.0.1:{}", free_port())])
            .current_dir(dir.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }
}
