//! The update plan as the report prints it: its figures (and the
//! maintenance window, when one is given), a table per pool that updates
//! (batch, nodes, evictions, blockers, duration), then what holds it up and
//! what it cannot know.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};

use crate::model::text::{clean, list};
use crate::plan::duration::words;
use crate::plan::{Outcome, Plan};

/// Width of each table, as the report's.
const WIDTH: u16 = 120;

/// The most lines each of the plan's lists shows.
const MAX_LINES: usize = 10;

/// The plan as text; `color` only affects the tables.
pub fn plan_table(plan: &Plan, color: bool) -> String {
    let cp = &plan.control_plane;
    let control_plane = match cp.origin {
        "done" => format!("done: {}", clean(&cp.basis, 300)),
        "none" => format!(
            "N/A (shown as P50 {}, P90 {}): {}",
            words(cp.p50_seconds),
            words(cp.p90_seconds),
            clean(&cp.basis, 300)
        ),
        _ => format!(
            "P50 {}, P90 {}, from {}",
            words(cp.p50_seconds),
            words(cp.p90_seconds),
            clean(&cp.basis, 300)
        ),
    };
    let mut out = format!(
        "Plan: about {} (P90 {}), the control plane then the slowest pool\n  control plane: {control_plane}\n",
        words(plan.p50_seconds),
        words(plan.p90_seconds),
    );
    if let Some(window) = &plan.window {
        out.push_str(&format!(
            "  maintenance window: ends {}; started now, the update ends at its P90 {}: {}\n",
            window.end,
            window
                .p90_end
                .round(jiff::Unit::Second)
                .unwrap_or(window.p90_end),
            if window.fits {
                "it fits"
            } else {
                "it may not finish within it"
            }
        ));
    }
    for pool in &plan.pools {
        out.push_str(&format!(
            "  pool {}: {} nodes",
            clean(&pool.name, 100),
            pool.nodes
        ));
        if !pool.updates {
            out.push_str(", paused: not updated\n");
            continue;
        }
        let done = if pool.done > 0 {
            format!(", {} already on the target configuration", pool.done)
        } else {
            String::new()
        };
        if pool.batches.is_empty() {
            out.push_str(&format!("{done}, nothing planned\n"));
            continue;
        }
        out.push_str(&format!(
            "{done}, maxUnavailable {}, {} unavailable, {} at a time, about {} (P90 {}){}\n",
            clean(&pool.max_unavailable, 20),
            pool.unavailable,
            pool.batch_size,
            words(pool.seconds),
            words(pool.p90_seconds),
            if pool.blocked {
                ", never completes"
            } else {
                ""
            }
        ));
        out.push_str(&format!("{}\n", batches(pool, color)));
    }
    for pool in &plan.node_pools {
        out.push_str(&node_pool(pool));
    }
    for (title, lines) in [
        ("Downtime", &plan.downtime),
        ("Blocked", &plan.blockers),
        ("Waits", &plan.waits),
        ("Holds", &plan.warnings),
        ("The plan cannot know", &plan.unknowns),
    ] {
        if lines.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n"));
        for line in lines.iter().take(MAX_LINES) {
            out.push_str(&format!("  - {}\n", clean(line, 600)));
        }
        if lines.len() > MAX_LINES {
            out.push_str(&format!("  … and {} more\n", lines.len() - MAX_LINES));
        }
    }
    out
}

/// One NodePool's rollout, in a line.
fn node_pool(pool: &crate::plan::hosted::NodePoolPlan) -> String {
    let name = clean(&pool.name, 200);
    match (&pool.rollout, &pool.problem) {
        (Some(r), _) => format!(
            "  NodePool {name}: {} machines, {:?}, {} wave(s) of {}, about {} (P90 {}): {}\n",
            r.replicas,
            r.upgrade_type,
            r.waves,
            r.at_once,
            words(pool.seconds),
            words(pool.p90_seconds),
            clean(&pool.basis, 600)
        ),
        (None, problem) => format!(
            "  NodePool {name}: not rolled out: {}\n",
            clean(problem.as_deref().unwrap_or("unknown"), 600)
        ),
    }
}

/// One pool's batches as a table.
fn batches(pool: &crate::plan::PoolPlan, color: bool) -> Table {
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH)
        .set_header(["Batch", "Nodes", "Evictions", "Blockers", "Duration"]);
    if color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    for batch in &pool.batches {
        let nodes: Vec<String> = batch.nodes.iter().map(|n| clean(&n.name, 100)).collect();
        let holds: Vec<String> = batch
            .holds
            .iter()
            .map(|h| {
                let how = match (h.outcome, h.wait_seconds) {
                    (Outcome::Never, _) => "never drains".to_owned(),
                    (Outcome::Waits, Some(wait)) => format!("waits {}", words(wait)),
                    (Outcome::Waits, None) => "waits, how long unknown".to_owned(),
                    (Outcome::Unknown, _) => "unknown".to_owned(),
                };
                format!("PDB {}: {how}", clean(&h.pdb, 200))
            })
            .chain(
                batch
                    .failing
                    .iter()
                    .map(|n| format!("drain failing on {}", clean(n, 200))),
            )
            .collect();
        let failing = !batch.failing.is_empty();
        let blockers = match batch
            .holds
            .iter()
            .map(|h| h.outcome)
            .min_by_key(|o| match o {
                Outcome::Never => 0,
                Outcome::Waits => 1,
                Outcome::Unknown => 2,
            }) {
            _ if failing && batch.holds.iter().all(|h| h.outcome != Outcome::Never) => {
                Cell::new(holds.join("\n")).fg(Color::Yellow)
            }
            None => Cell::new("none"),
            Some(Outcome::Never) => Cell::new(holds.join("\n")).fg(Color::Red),
            Some(_) => Cell::new(holds.join("\n")).fg(Color::Yellow),
        };
        table.add_row(vec![
            Cell::new(batch.number),
            Cell::new(list(&nodes, 5)),
            Cell::new(
                batch
                    .evictions
                    .map_or("unknown".to_owned(), |e| e.to_string()),
            ),
            blockers,
            Cell::new(format!(
                "{} (P90 {})",
                words(batch.seconds),
                words(batch.p90_seconds)
            )),
        ]);
    }
    table
}
