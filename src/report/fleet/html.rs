//! The fleet report as one self-contained HTML page, to read offline or
//! attach to a change request: the summary, the shared causes, a table of
//! the clusters with their blockers, and each cluster's plan as an inline
//! SVG timeline (its control plane, then each pool's batches). Inline CSS,
//! no script, no external style, font or image. Every string that comes
//! from the data is escaped ([`esc`]).

use std::borrow::Cow;
use std::fmt::Write;

use super::{Cluster, Fleet, Verdict, title};
use crate::plan::duration::words;
use crate::plan::{Outcome, Plan, PoolPlan};

/// Text for HTML, in an element or a quoted attribute alike: `&`, `<`,
/// `>`, `"`, `'` and `/` as entities (html-escape's `encode_safe`).
pub(super) fn esc(text: &str) -> Cow<'_, str> {
    html_escape::encode_safe(text)
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2rem;color:#1d1d1f;max-width:72rem}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}h3{font-size:1rem;margin-bottom:.25rem}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}small{color:#555}ul{margin:0;padding-left:1.1rem}td.figures{white-space:nowrap}
.cleared{color:#176f2c;font-weight:600}.blocked{color:#b3261e;font-weight:600}.error{color:#8a5a00;font-weight:600}
.summary strong{font-size:1.2rem}.plan{margin:1rem 0 1.5rem}
svg text{font-family:inherit;font-size:11px;fill:#1d1d1f}
@media print{body{margin:0}}
";

/// The page.
pub(super) fn page(fleet: &Fleet) -> String {
    let s = &fleet.summary;
    let target = esc(&fleet.target);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Fleet update to {target}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <h1>Fleet update to {target}</h1>\n\
         <p class=\"summary\" id=\"summary\">Of <strong id=\"clusters\">{}</strong> clusters, \
         <strong id=\"cleared\" class=\"cleared\">{}</strong> cleared, \
         <strong id=\"blocked\" class=\"blocked\">{}</strong> blocked, \
         <strong id=\"errors\" class=\"error\">{}</strong> could not be judged.</p>\n",
        s.clusters, s.cleared, s.blocked, s.errors
    );
    out.push_str("<h2>Shared causes</h2>\n");
    if fleet.causes.is_empty() {
        out.push_str("<p>No cluster is blocked.</p>\n");
    } else {
        out.push_str(
            "<table id=\"causes\">\n<thead><tr><th>Clusters</th><th>Cause</th><th>Blocks</th></tr></thead>\n<tbody>\n",
        );
        for cause in &fleet.causes {
            let _ = writeln!(
                out,
                "<tr class=\"cause\" data-check=\"{}\" data-count=\"{}\"><td class=\"count\">{} of {}</td><td>{}</td><td>{}</td></tr>",
                esc(&cause.check),
                cause.count,
                cause.count,
                s.clusters,
                esc(&cause.title()),
                esc(&cause.clusters.join(", ")),
            );
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str(
        "<h2>Clusters</h2>\n<table id=\"cluster-table\">\n<thead><tr><th>Cluster</th><th>Verdict</th><th>Blocked by</th><th>Plan</th></tr></thead>\n<tbody>\n",
    );
    for c in &fleet.clusters {
        row(&mut out, c);
    }
    out.push_str("</tbody>\n</table>\n<h2>Plans</h2>\n");
    let mut plans = 0;
    for c in &fleet.clusters {
        if let Some(plan) = &c.full_plan {
            plans += 1;
            let summary = c.plan.as_ref().map_or(String::new(), |p| {
                format!("about {} (P90 {})", p.p50, p.p90)
            });
            let _ = writeln!(
                out,
                "<section class=\"plan\">\n<h3>{}</h3>\n<p><small>{}</small> {}</p>",
                esc(&c.name),
                esc(&c.from),
                esc(&summary)
            );
            timeline(&mut out, &c.name, plan);
            out.push_str("</section>\n");
        }
    }
    if plans == 0 {
        out.push_str("<p>No cluster has a plan.</p>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn row(out: &mut String, c: &Cluster) {
    let (class, verdict) = match c.verdict {
        Verdict::Cleared => (
            "cleared",
            match c.check_verdict {
                Some(word) if word != "Allowed" => format!("cleared ({word})"),
                _ => "cleared".to_owned(),
            },
        ),
        Verdict::Blocked => ("blocked", "blocked".to_owned()),
        Verdict::Error => ("error", "could not be judged".to_owned()),
    };
    let name = if c.name == c.from {
        esc(&c.name).into_owned()
    } else {
        format!("{}<br><small>{}</small>", esc(&c.name), esc(&c.from))
    };
    let why = match &c.error {
        Some(error) => esc(error).into_owned(),
        None if c.blocking.is_empty() => String::new(),
        None => {
            let items: String = c
                .blocking
                .iter()
                .map(|b| {
                    format!(
                        "<li><strong>{}</strong>: {}</li>",
                        esc(&title(&b.check, &b.names)),
                        esc(&b.message)
                    )
                })
                .collect();
            format!("<ul>{items}</ul>")
        }
    };
    let plan = c.plan.as_ref().map_or(String::new(), |p| {
        format!("about {} (P90 {})", esc(&p.p50), esc(&p.p90))
    });
    let _ = writeln!(
        out,
        "<tr class=\"cluster\" data-verdict=\"{:?}\"><td>{name}</td><td class=\"{class}\">{verdict}</td><td>{why}</td><td class=\"figures\">{plan}</td></tr>",
        c.verdict
    );
}

/// Where the label column ends and the bars begin, and the bars' width.
const LABEL: f64 = 160.0;
const BARS: f64 = 600.0;
const ROW: f64 = 24.0;

/// The plan as a timeline: the control plane from 0 (P50 solid, up to its
/// P90 pale), then each pool from the control plane's P50, its batches one
/// after another across the pool's rollout, up to its P90 pale; a line at
/// the whole update's P50 and P90.
fn timeline(out: &mut String, name: &str, plan: &Plan) {
    let cp = &plan.control_plane;
    let end = plan
        .pools
        .iter()
        .map(|p| cp.p50_seconds + p.p90_seconds.max(p.seconds))
        .chain([cp.p90_seconds, plan.p90_seconds, 1])
        .max()
        .unwrap_or(1) as f64;
    let x = |seconds: u64| LABEL + BARS * seconds as f64 / end;
    let rows = 1 + plan.pools.len();
    let height = ROW * rows as f64 + 36.0;
    let width = LABEL + BARS + 20.0;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"{}\" data-p50-seconds=\"{}\" data-p90-seconds=\"{}\">",
        esc(&format!(
            "update plan of {name}: about {} (P90 {})",
            words(plan.p50_seconds),
            words(plan.p90_seconds)
        )),
        plan.p50_seconds,
        plan.p90_seconds
    );
    // The control plane.
    let y = 4.0;
    label(out, y, "control plane");
    bar(
        out,
        x(0),
        x(cp.p50_seconds),
        y,
        "#3b6fc4",
        1.0,
        &format!(
            "control plane: P50 {}, P90 {}",
            words(cp.p50_seconds),
            words(cp.p90_seconds)
        ),
    );
    bar(
        out,
        x(cp.p50_seconds),
        x(cp.p90_seconds),
        y,
        "#3b6fc4",
        0.3,
        &format!("control plane up to its P90 {}", words(cp.p90_seconds)),
    );
    for (i, pool) in plan.pools.iter().enumerate() {
        let y = 4.0 + ROW * (i + 1) as f64;
        label(out, y, &format!("pool {}", pool.name));
        pool_row(out, pool, cp.p50_seconds, y, &x);
    }
    // The whole update's P50 and P90, and the axis.
    let bottom = 4.0 + ROW * rows as f64;
    for (seconds, what, dash) in [
        (plan.p50_seconds, "P50", ""),
        (plan.p90_seconds, "P90", " stroke-dasharray=\"4 3\""),
    ] {
        let at = x(seconds);
        let _ = writeln!(
            out,
            "<line x1=\"{at:.1}\" y1=\"2\" x2=\"{at:.1}\" y2=\"{bottom:.1}\" stroke=\"#1d1d1f\"{dash}><title>{what} {}</title></line>",
            esc(&words(seconds))
        );
    }
    let _ = writeln!(
        out,
        "<line x1=\"{LABEL}\" y1=\"{bottom:.1}\" x2=\"{:.1}\" y2=\"{bottom:.1}\" stroke=\"#888\"/>",
        LABEL + BARS
    );
    let _ = writeln!(
        out,
        "<text x=\"{LABEL}\" y=\"{:.1}\">0</text><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        bottom + 14.0,
        LABEL + BARS,
        bottom + 14.0,
        esc(&words(end as u64))
    );
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">P50 {} · P90 {}</text>",
        LABEL + BARS / 2.0,
        bottom + 28.0,
        esc(&words(plan.p50_seconds)),
        esc(&words(plan.p90_seconds))
    );
    out.push_str("</svg>\n");
}

fn pool_row(out: &mut String, pool: &PoolPlan, start: u64, y: f64, x: &dyn Fn(u64) -> f64) {
    if !pool.updates || pool.batches.is_empty() {
        let why = if pool.updates {
            "nothing planned"
        } else {
            "paused: not updated"
        };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{why}</text>",
            x(start) + 4.0,
            y + 14.0
        );
        return;
    }
    // The MCO starts a node as soon as one returns: the batches share the
    // pool's rollout in proportion to their own durations.
    let sum: u64 = pool.batches.iter().map(|b| b.seconds).sum::<u64>().max(1);
    let mut at = start as f64;
    for batch in &pool.batches {
        let length = pool.seconds as f64 * batch.seconds as f64 / sum as f64;
        let color = if batch.holds.iter().any(|h| h.outcome == Outcome::Never) {
            "#b3261e"
        } else if !batch.failing.is_empty() || !batch.holds.is_empty() {
            "#c98a00"
        } else {
            "#2e8b57"
        };
        let nodes: Vec<String> = batch.nodes.iter().map(|n| n.name.clone()).collect();
        bar(
            out,
            x(at.round() as u64),
            x((at + length).round() as u64),
            y,
            color,
            1.0,
            &format!(
                "pool {}, batch {}: {}; about {} (P90 {}){}",
                pool.name,
                batch.number,
                crate::model::text::list(&nodes, 5),
                words(batch.seconds),
                words(batch.p90_seconds),
                if batch.holds.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; held by {}",
                        batch
                            .holds
                            .iter()
                            .map(|h| h.pdb.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        );
        at += length;
    }
    bar(
        out,
        x(start + pool.seconds),
        x(start + pool.p90_seconds.max(pool.seconds)),
        y,
        "#2e8b57",
        0.3,
        &format!(
            "pool {} up to its P90 {}",
            pool.name,
            words(pool.p90_seconds)
        ),
    );
}

fn label(out: &mut String, y: f64, text: &str) {
    let _ = writeln!(
        out,
        "<text x=\"4\" y=\"{:.1}\">{}</text>",
        y + 14.0,
        esc(&crate::model::text::clean(text, 28))
    );
}

/// A bar from `from` to `to` (pixels), with `title` as its tooltip; none
/// when it has no width.
fn bar(out: &mut String, from: f64, to: f64, y: f64, fill: &str, opacity: f64, title: &str) {
    if to - from < 0.05 {
        return;
    }
    let _ = writeln!(
        out,
        "<rect x=\"{from:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\" fill-opacity=\"{opacity}\" stroke=\"#fff\"><title>{}</title></rect>",
        (to - from).max(1.0),
        ROW - 6.0,
        esc(title)
    );
}
