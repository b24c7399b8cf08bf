//! `preflight-gate fleet` over 200 snapshots: the sample snapshot
//! (examples/snapshot/) written 200 times into a temporary directory,
//! each under its own clusterID, one in four without its firing alert
//! (cleared), one in ten with a second alert; then the binary run on all
//! of them, under `/usr/bin/time -v` when it is there, for its wall time
//! and peak RSS (the median of the runs, and the largest peak).
//!
//! `cargo bench --bench fleet`; figures in docs/benchmarks.md.
//! `PREFLIGHT_GATE_BENCH_RUNS` sets the number of timed runs (default 5),
//! `PREFLIGHT_GATE_BENCH_CLUSTERS` the number of snapshots (200; 8 under
//! `cargo test --benches`), and `PREFLIGHT_GATE_BENCH_JOBS` `--jobs`
//! (default: fleet's own, the number of CPUs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "common/runs.rs"]
mod runs;

const TIME: &str = "/usr/bin/time";

fn main() {
    let (benching, runs) = runs::how_many();
    let clusters: usize = std::env::var("PREFLIGHT_GATE_BENCH_CLUSTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 200 } else { 8 });
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let started = Instant::now();
    let dirs = write(tmp.path(), clusters);
    println!(
        "{clusters} snapshots written in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let time = Path::new(TIME).is_file();
    if !time {
        println!("{TIME} is missing (Debian's time package): no peak RSS");
    }
    let mut walls = Vec::new();
    let mut peak_kb = 0u64;
    for _ in 0..runs {
        let (wall, rss) = run(&dirs, time);
        walls.push(wall);
        peak_kb = peak_kb.max(rss.unwrap_or(0));
    }
    walls.sort();
    println!(
        "fleet of {clusters}: median of {runs}: {:.2}s wall; peak RSS {} MB",
        walls[walls.len() / 2].as_secs_f64(),
        peak_kb / 1024
    );
}

/// The sample snapshot, `n` times, each a cluster of its own.
fn write(root: &Path, n: usize) -> Vec<PathBuf> {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/snapshot");
    let files: Vec<PathBuf> = std::fs::read_dir(&sample)
        .expect("the sample snapshot")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    (0..n)
        .map(|i| {
            let dir = root.join(format!("cluster-{i:03}"));
            std::fs::create_dir(&dir).expect("a cluster's directory");
            for file in &files {
                let name = file.file_name().expect("a file name");
                let mut text = std::fs::read_to_string(file).expect("a sample file");
                if name == "clusterversion.yaml" {
                    text = text.replace(
                        "clusterID: ea006e73-1e7a-4fbc-a12d-ae4109affb3d",
                        &format!("clusterID: {i:08}-1e7a-4fbc-a12d-ae4109affb3d"),
                    );
                } else if name == "alerts.json" && i % 4 == 0 {
                    text = text.replace("\"KubeContainerWaiting\"", "\"Quiet\"");
                } else if name == "alerts.json" && i % 10 == 1 {
                    text = text.replace("\"KubeContainerWaiting\"", "\"KubeNodeNotReady\"");
                }
                std::fs::write(dir.join(name), text).expect("a snapshot file");
            }
            dir
        })
        .collect()
}

/// One run of `fleet -o json` on `dirs`: its wall time, and its peak RSS
/// in KB when `/usr/bin/time` measures it.
fn run(dirs: &[PathBuf], time: bool) -> (Duration, Option<u64>) {
    let binary = env!("CARGO_BIN_EXE_preflight-gate");
    let mut command = if time {
        let mut c = Command::new(TIME);
        c.arg("-v").arg(binary);
        c
    } else {
        Command::new(binary)
    };
    command
        .args(["fleet", "--to", "4.14.12", "-o", "json"])
        .args(dirs)
        .env_remove("PREFLIGHT_GATE_OUTPUT");
    if let Ok(jobs) = std::env::var("PREFLIGHT_GATE_BENCH_JOBS") {
        command.args(["--jobs", &jobs]);
    }
    let started = Instant::now();
    let out = command.output().expect("the binary runs");
    let wall = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(3),
        "some clusters are blocked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
    let summary = &report["summary"];
    assert_eq!(summary["clusters"], dirs.len(), "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
    assert_eq!(summary["cleared"], dirs.len().div_ceil(4), "{summary}");
    let rss = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|kb| kb.trim().parse().ok());
    (wall, rss)
}
