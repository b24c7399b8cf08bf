//! The plan's control-plane estimate, backtested: on every capture whose
//! history holds at least four completed updates, and on generated
//! histories, each update's duration is predicted from the ones before it
//! (the plan's rule: P50 of the same kind, else the documented 60
//! minutes) and beside it by `oc adm upgrade status`' rule (the last
//! completed update's duration, else 1 hour). Prints the median absolute
//! percentage error of each, and the P90's coverage (how often the real
//! duration fell at or under the predicted P90: the plan's, from the
//! recent updates of the kind, beside the whole history's P90 it used
//! before), as the table in docs/benchmarks.md.
//!
//! `cargo bench --bench plan_backtest`

use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use preflight_gate::model::cluster_version::UpdateHistory;
use preflight_gate::plan::control_plane::{
    Completed, MIN_SAMPLES, completed_updates, estimate, estimate_pre_release, percentile,
};

const CAPTURES: &str = "tests/data/real-clusters";
/// oc's estimate with no completed update to go by.
const OC_DEFAULT: u64 = 3600;

/// What each rule made of the updates that have one before them.
#[derive(Default)]
struct Scores {
    plan: Vec<f64>,
    oc: Vec<f64>,
    /// Whether the real duration fell at or under the plan's P90.
    covered: Vec<bool>,
    /// The same for the P90 of every earlier update of the kind.
    covered_all: Vec<bool>,
}

/// Whether `c` is of the same kind as `like`, as the plan samples it.
fn alike(c: &Completed, like: &Completed) -> bool {
    if like.pre_release {
        c.pre_release && !c.migration
    } else {
        c.kind == like.kind && (like.kind.is_some() || !c.migration)
    }
}

fn backtest(updates: &[Completed]) -> Scores {
    let mut scores = Scores::default();
    for i in 1..updates.len() {
        let this = &updates[i];
        let actual = this.seconds.max(1) as f64;
        let before = &updates[..i];
        let cp = if this.pre_release {
            estimate_pre_release(before)
        } else {
            estimate(before, this.kind)
        };
        let predicted = cp.p50_seconds as f64;
        let last = before.last().map_or(OC_DEFAULT, |c| c.seconds) as f64;
        scores.plan.push((predicted - actual).abs() / actual);
        scores.oc.push((last - actual).abs() / actual);
        scores.covered.push(this.seconds <= cp.p90_seconds);
        let mut all: Vec<u64> = before
            .iter()
            .filter(|c| alike(c, this))
            .map(|c| c.seconds)
            .collect();
        all.sort_unstable();
        let p90_all = if all.len() < MIN_SAMPLES {
            cp.p90_seconds
        } else {
            percentile(&all, 90)
        };
        scores.covered_all.push(this.seconds <= p90_all);
    }
    scores
}

fn share(covered: &[bool]) -> f64 {
    100.0 * covered.iter().filter(|c| **c).count() as f64 / covered.len().max(1) as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// A deterministic pseudo-random sequence in [0, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A generated history, newest first as the CVO writes it: `count`
/// updates, one minor update in every `minor_every`, durations drawn
/// around `patch` and `minor` minutes with a spread, a slow outlier in
/// every `outlier_every`.
fn generated(
    seed: u64,
    count: usize,
    minor_every: usize,
    (patch, minor): (f64, f64),
    spread: f64,
    outlier_every: usize,
) -> Vec<UpdateHistory> {
    let mut rng = Lcg(seed);
    let mut at: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let (mut y, mut z) = (12u32, 0u32);
    let mut entries = vec![UpdateHistory {
        state: "Completed".into(),
        version: format!("4.{y}.{z}"),
        started_time: Some(at),
        completion_time: Some(at + SignedDuration::from_mins(40)),
        ..Default::default()
    }];
    for i in 1..=count {
        at += SignedDuration::from_hours(24 * 14);
        let is_minor = i % minor_every == 0;
        if is_minor {
            y += 1;
            z = 0;
        } else {
            z += 1;
        }
        let base = if is_minor { minor } else { patch };
        let mut minutes = base * (1.0 + spread * (2.0 * rng.next() - 1.0));
        if outlier_every > 0 && i % outlier_every == 0 {
            minutes *= 3.0;
        }
        entries.push(UpdateHistory {
            state: "Completed".into(),
            version: format!("4.{y}.{z}"),
            started_time: Some(at),
            completion_time: Some(at + SignedDuration::from_secs((minutes * 60.0) as i64)),
            ..Default::default()
        });
    }
    entries.reverse();
    entries
}

fn main() {
    let far: Timestamp = "2100-01-01T00:00:00Z".parse().unwrap();
    let mut rows: Vec<(String, Vec<Completed>)> = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(CAPTURES);
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for dir in names {
        let Ok(view) = preflight_gate::cluster::snapshot::load(&dir) else {
            continue;
        };
        let history = view
            .cluster_version
            .as_ref()
            .map(|cv| cv.status.history.clone())
            .unwrap_or_default();
        let updates = completed_updates(&history, far);
        if updates.len() >= 4 {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            rows.push((format!("capture {name}"), updates));
        }
    }
    for (name, history) in [
        (
            "generated: steady (patch 70m, minor 110m, ±20%)",
            generated(1, 40, 8, (70.0, 110.0), 0.2, 0),
        ),
        (
            "generated: noisy (patch 70m, minor 110m, ±50%)",
            generated(2, 40, 8, (70.0, 110.0), 0.5, 0),
        ),
        (
            "generated: outliers (×3 every 7th)",
            generated(3, 40, 8, (70.0, 110.0), 0.2, 7),
        ),
        (
            "generated: minors twice as long, every 3rd",
            generated(4, 30, 3, (60.0, 120.0), 0.2, 0),
        ),
    ] {
        rows.push((name.to_owned(), completed_updates(&history, far)));
    }
    println!(
        "| history | updates predicted | plan (P50 of the last 5 of the kind) MdAPE | oc (last update) MdAPE | P90 (last 20 of the kind) coverage | P90 of the whole history's coverage |"
    );
    println!("|---|---|---|---|---|---|");
    let mut all = Scores::default();
    for (name, updates) in &rows {
        let s = backtest(updates);
        println!(
            "| {name} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% |",
            s.plan.len(),
            100.0 * median(s.plan.clone()),
            100.0 * median(s.oc.clone()),
            share(&s.covered),
            share(&s.covered_all),
        );
        all.plan.extend(s.plan);
        all.oc.extend(s.oc);
        all.covered.extend(s.covered);
        all.covered_all.extend(s.covered_all);
    }
    println!(
        "| all | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% |",
        all.plan.len(),
        100.0 * median(all.plan),
        100.0 * median(all.oc),
        share(&all.covered),
        share(&all.covered_all),
    );
}
