//! What every test binary shares (tests/it, tests/e2e and tests/node each
//! include this file as `support`): a free port, waiting for something to
//! happen, and saying why a test could not run.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// A port on 127.0.0.1 nothing listens on now: the OS's pick, released
/// at once for the caller to bind.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` until it returns `Some`, for at most `limit`; panics naming
/// `what` on giving up.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    poll(what, limit, || f().ok_or_else(String::new))
}

/// Polls `f` until it returns `Ok`, for at most `limit`; on giving up,
/// says its last `Err` (say, the last command's stderr).
pub fn poll<T>(what: &str, limit: Duration, f: impl FnMut() -> Result<T, String>) -> T {
    poll_every(what, limit, Duration::from_millis(200), f)
}

/// [`poll`], trying every `every` rather than every 200 ms (for a `f` that
/// costs the system under test some work).
pub fn poll_every<T>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match f() {
            Ok(done) => return done,
            Err(last) => last,
        };
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}{}{last}",
            if last.is_empty() { "" } else { ": " }
        );
        std::thread::sleep(every);
    }
}

/// Whether this is a CI run (`CI=true`), where every test must run.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// A test cannot run here, for want of a tool or a file (`why` says which,
/// and how to get it). Under `CI=true` that fails the test; elsewhere the
/// caller returns after this has said so on stderr, past the test
/// harness's capture, so that a passing run shows it too.
pub fn not_run_here(test: &str, why: &str) {
    use std::io::Write;
    assert!(
        !in_ci(),
        "{test}: cannot run, and CI=true requires every test to run: {why}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "\n*** NOT RUN: {test}: {why} (under CI=true this fails) ***\n"
    );
}
