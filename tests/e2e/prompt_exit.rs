//! A gate whose Lease cannot be set up still exits promptly on SIGTERM: a pod
//! must not hang in Terminating for its whole grace period because leader
//! election is still retrying its setup.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cluster::{self, User};
use crate::support::free_port;

/// Starts `serve` with the controller on, waits until its log says the Lease
/// cannot be set up, sends SIGTERM and returns how long the exit took.
fn exit_after_sigterm(kubeconfig: &str, namespace: &str) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_preflight-gate"))
        .args(["serve", "--shutdown-delay", "1s", "--shutdown-grace", "2s"])
        .args(["--webhook-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--admin-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--kubeconfig", kubeconfig, "--namespace", namespace])
        .args(["--instance", "prompt-exit"])
        .current_dir(dir.path())
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log.contains("cannot set up leader election") {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => log.push_str(&(line + "\n")),
            Err(_) => {
                let _ = child.kill();
                panic!("the Lease setup never failed as expected:\n{log}");
            }
        }
    }
    let sent = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Far below the 30 s of a pod's default grace period; before the fix the
    // process never exited while the setup kept failing.
    let limit = Duration::from_secs(15);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if sent.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            log.extend(lines.try_iter().map(|l| l + "\n"));
            panic!("still running {limit:?} after SIGTERM:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = sent.elapsed();
    log.extend(lines.try_iter().map(|l| l + "\n"));
    assert!(exit.success(), "{exit:?}\n{log}");
    assert!(
        log.contains("stopping before leader election was set up"),
        "{log}"
    );
    took
}

#[test]
fn exits_promptly_on_sigterm_when_the_lease_namespace_is_missing() {
    let (_turn, world) = cluster::lock();
    let missing = "preflight-gate-no-such-namespace";
    let _ = world.kubectl(
        User::Admin,
        &["delete", "namespace", missing, "--ignore-not-found"],
    );
    let took = exit_after_sigterm(world.admin_kubeconfig(), missing);
    eprintln!("exited {took:?} after SIGTERM");
}

#[test]
fn exits_promptly_on_sigterm_when_rbac_is_not_bound() {
    let (_turn, world) = cluster::lock();
    // alice may not read or write Leases.
    let took = exit_after_sigterm(world.var("ALICE_KUBECONFIG"), "preflight-gate");
    eprintln!("exited {took:?} after SIGTERM");
}
