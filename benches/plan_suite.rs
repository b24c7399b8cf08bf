//! What the update plan adds to the offline suite on the generated large
//! cluster (benches/large_cluster/: 5,000 nodes, 150,000 pods, 10,000
//! PDBs, plus a MachineConfigNode per node) at 1× and 2× the data: the
//! suite without the plan (every built-in check but DrainsComplete, which
//! computes it) against the suite as the snapshot source now runs it (every
//! check, then the plan summary its results carry), each after reading the
//! snapshot. Prints medians, the overhead and the 2×/1× ratios.
//!
//! `cargo bench --bench plan_suite`; figures in docs/benchmarks.md.
//! `PREFLIGHT_GATE_BENCH_RUNS` sets the number of timed runs (default 5).

mod large_cluster;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use preflight_gate::checks;
use preflight_gate::cluster::snapshot;
use preflight_gate::suite::{self, Limits};

/// The check that computes the plan.
const PLAN_CHECK: &str = "DrainsComplete";

/// Medians of one size.
struct Figures {
    load: Duration,
    /// The checks without the plan.
    without: Duration,
    /// Every check, and the plan summary.
    with: Duration,
    /// The plan alone, and its summary.
    plan: Duration,
    batches: usize,
}

#[path = "common/runs.rs"]
mod runs;

fn main() {
    let (benching, runs) = runs::how_many();
    let mut results = Vec::new();
    for scale in [1, 2] {
        if !benching && scale == 2 {
            break;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let counts = large_cluster::write(dir.path(), scale).expect("the snapshot is written");
        let mcns = large_cluster::write_machine_config_nodes(dir.path(), scale)
            .expect("the MachineConfigNodes are written");
        println!(
            "{scale}x: {} nodes, {} pods, {} PDBs, {} APIRequestCounts, {mcns} MachineConfigNodes",
            counts.nodes, counts.pods, counts.pdbs, counts.api_request_counts
        );
        let f = measure(dir.path(), runs);
        let suite_without = f.load + f.without;
        let suite_with = f.load + f.with;
        println!(
            "{scale}x: median of {runs}: load {:.0} ms; checks without the plan {:.0} ms, with it {:.0} ms; the plan alone {:.0} ms ({} batches)",
            ms(f.load),
            ms(f.without),
            ms(f.with),
            ms(f.plan),
            f.batches
        );
        println!(
            "{scale}x: suite {:.0} ms without the plan, {:.0} ms with it: +{:.1}%",
            ms(suite_without),
            ms(suite_with),
            100.0 * (ms(suite_with) / ms(suite_without) - 1.0)
        );
        results.push(f);
    }
    if let [one, two] = &results[..] {
        let ratio = |f: fn(&Figures) -> Duration| f(two).as_secs_f64() / f(one).as_secs_f64();
        println!(
            "2x / 1x: the plan alone {:.2}, checks with the plan {:.2}, without {:.2}, load {:.2}",
            ratio(|f| f.plan),
            ratio(|f| f.with),
            ratio(|f| f.without),
            ratio(|f| f.load)
        );
    }
}

/// Loads the snapshot and runs each variant `runs` times after one
/// warm-up; medians.
fn measure(dir: &Path, runs: usize) -> Figures {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
    let without: Vec<String> = checks::catalogue()
        .iter()
        .map(|c| c.name().to_owned())
        .filter(|n| n != PLAN_CHECK)
        .collect();
    let mut batches = 0;
    let mut once = || {
        let started = Instant::now();
        let view = Arc::new(snapshot::load(dir).expect("the snapshot loads"));
        let load = started.elapsed();
        let target = view.target("4.16.5");

        let started = Instant::now();
        let results = suite::run(
            view.clone(),
            &target,
            now,
            Some(&without),
            Limits::default(),
        );
        black_box(&results);
        let without = started.elapsed();

        // As the snapshot source evaluates a target: every check, then the
        // plan its result carries.
        let started = Instant::now();
        let results = suite::run(view.clone(), &target, now, None, Limits::default());
        let summary = plan_summary(&view, &target, now);
        black_box((&results, &summary));
        let with = started.elapsed();
        assert!(
            results
                .iter()
                .any(|r| r.name == PLAN_CHECK && r.outcome != preflight_gate::model::Outcome::Error),
            "{PLAN_CHECK} ran within its time limit"
        );

        let started = Instant::now();
        let summary = plan_summary(&view, &target, now);
        let plan = started.elapsed();
        batches = summary.pools.iter().map(|p| p.batches as usize).sum();
        black_box(summary);
        [load, without, with, plan]
    };
    once();
    let mut samples: Vec<[Duration; 4]> = (0..runs.max(1)).map(|_| once()).collect();
    let mut median = |i: usize| {
        samples.sort_by_key(|s| s[i]);
        samples[samples.len() / 2][i]
    };
    Figures {
        load: median(0),
        without: median(1),
        with: median(2),
        plan: median(3),
        batches,
    }
}

/// The plan summary a result carries, computed as the snapshot source and
/// the controller compute it.
fn plan_summary(
    view: &preflight_gate::view::ClusterView,
    target: &preflight_gate::model::Target,
    clock: Timestamp,
) -> preflight_gate::model::results::PlanSummary {
    let ctx = checks::Context::new(view, target, clock);
    let plan = preflight_gate::plan::plan_to(view, target, ctx.kind, ctx.now);
    assert!(
        plan.pools
            .iter()
            .all(|p| p.node_phases.update.origin == "machineconfignodes"),
        "the plan times nodes by the MachineConfigNodes"
    );
    preflight_gate::plan::status::summary(&plan, ctx.now)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
