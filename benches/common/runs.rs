//! How many times a hand-timed bench runs: `cargo bench` passes `--bench`
//! and runs each figure `PREFLIGHT_GATE_BENCH_RUNS` times (5 unless told);
//! `cargo test --benches` does not, and then a bench only proves that it
//! runs, once.

/// Whether this is `cargo bench`, and how many runs each figure takes.
pub fn how_many() -> (bool, usize) {
    let benching = std::env::args().any(|a| a == "--bench");
    let runs = std::env::var("PREFLIGHT_GATE_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if benching { 5 } else { 1 });
    (benching, runs)
}
