//! The full offline suite on generated large clusters: read the snapshot,
//! run every check, at 1× (5,000 nodes, 150,000 pods, 10,000 PDBs, 1,000
//! APIRequestCounts) and 2× the data. Prints medians, the 2×/1× ratio and
//! the peak RSS of each size.
//!
//! `cargo bench --bench offline_suite`; figures in docs/benchmarks.md.
//! `PREFLIGHT_GATE_BENCH_RUNS` sets the number of timed runs (default 5).

mod large_cluster;
mod rss;

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use preflight_gate::cluster::snapshot;
use preflight_gate::suite::{self, Limits};
use rss::{peak_rss_mb, reset_peak_rss};
use std::sync::Arc;

struct Figures {
    load: Duration,
    checks: Duration,
    total: Duration,
    peak_rss_mb: Option<u64>,
}

#[path = "common/runs.rs"]
mod runs;

fn main() {
    let (benching, runs) = runs::how_many();
    let mut results = Vec::new();
    for scale in [1, 2] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let started = Instant::now();
        let counts = large_cluster::write(dir.path(), scale).expect("the snapshot is written");
        let bytes = size(dir.path());
        println!(
            "{scale}x: {} nodes, {} pods, {} PDBs, {} APIRequestCounts, {:.0} MB of JSON, written in {:.1}s",
            counts.nodes,
            counts.pods,
            counts.pdbs,
            counts.api_request_counts,
            bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        if !benching && scale == 2 {
            break;
        }
        let figures = suite(dir.path(), runs);
        println!(
            "{scale}x: median of {runs}: load {:.0} ms + checks {:.0} ms = {:.0} ms; peak RSS {} MB",
            ms(figures.load),
            ms(figures.checks),
            ms(figures.total),
            figures
                .peak_rss_mb
                .map_or("unknown".to_owned(), |m| m.to_string())
        );
        results.push(figures);
    }
    if let [one, two] = &results[..] {
        println!(
            "2x / 1x time: {:.2} (load {:.2}, checks {:.2})",
            two.total.as_secs_f64() / one.total.as_secs_f64(),
            two.load.as_secs_f64() / one.load.as_secs_f64(),
            two.checks.as_secs_f64() / one.checks.as_secs_f64()
        );
    }
}

/// Runs load + checks `runs` times after one warm-up, and returns medians
/// and the peak RSS over those runs.
fn suite(dir: &Path, runs: usize) -> Figures {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let once = || {
        let started = Instant::now();
        let view = snapshot::load(dir).expect("the snapshot loads");
        let loaded = started.elapsed();
        let target = view.target("4.16.5");
        let results = suite::run(Arc::new(view), &target, now, None, Limits::default());
        black_box(&results);
        (loaded, started.elapsed() - loaded, started.elapsed())
    };
    once();
    reset_peak_rss();
    let mut samples: Vec<_> = (0..runs.max(1)).map(|_| once()).collect();
    let peak_rss_mb = peak_rss_mb();
    let mut median = |f: fn(&(Duration, Duration, Duration)) -> Duration| {
        samples.sort_by_key(f);
        f(&samples[samples.len() / 2])
    };
    Figures {
        load: median(|s| s.0),
        checks: median(|s| s.1),
        total: median(|s| s.2),
        peak_rss_mb,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
