//! The `preflight-gate fleet` report: every cluster judged as `check`
//! judges one, summed up for a platform team. Which clusters are cleared
//! for the target, which are blocked and by what, which could not be
//! judged, and the causes they share, counted, so that a cause is fixed
//! once. Rendered as a table, as JSON (its shape in docs/fleet.md), or as
//! one self-contained HTML page (`html.rs`). Pure: the clusters come in
//! judged.

mod html;

use std::collections::{BTreeMap, BTreeSet};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement, Table};
use serde::Serialize;

use super::{Clearance, Report};
use crate::model::CheckResult;
use crate::model::text::{clean, list};
use crate::plan::Plan;
use crate::plan::duration::words;

/// The version of the fleet report's JSON shape; a change that removes or
/// renames a field raises it.
pub const SCHEMA_VERSION: u32 = 1;

/// Width of the table, so the output is the same on every terminal.
const WIDTH: u16 = 120;

/// The longest first line of a blocking result the report shows.
const MAX_LINE: usize = 300;

/// Exit code when some cluster is blocked, as `check`'s.
pub const EXIT_BLOCKED: u8 = 3;
/// Exit code when no cluster is blocked but some could not be judged, as
/// `check`'s for a cluster it cannot read.
pub const EXIT_UNJUDGED: u8 = 1;

/// How the fleet report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Html,
}

/// One cluster as it was given and what came of judging it: its report,
/// or why it could not be judged.
#[derive(Debug)]
pub struct Judged {
    /// Where it came from: the snapshot's path, or the kubeconfig's path
    /// and context.
    pub from: String,
    pub outcome: Result<Report, String>,
}

/// What the fleet report says of one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Nothing blocks the update (warnings perhaps, or no change).
    Cleared,
    /// A blocking result stops the update.
    Blocked,
    /// The cluster could not be read: no verdict, never a pass.
    Error,
}

/// The fleet's report.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    pub schema_version: u32,
    /// The target as given (`--to`).
    pub target: String,
    pub summary: Counts,
    /// In the order they were given.
    pub clusters: Vec<Cluster>,
    /// The causes the blocked clusters share, those blocking most first.
    pub causes: Vec<Cause>,
}

/// How many clusters came to each verdict.
#[derive(Clone, Copy, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub clusters: usize,
    pub cleared: usize,
    pub blocked: usize,
    pub errors: usize,
}

/// One cluster of the fleet.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Its ClusterVersion's `spec.clusterID` (with its source when two
    /// clusters share one), else its source.
    pub name: String,
    #[serde(rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Where it came from ([`Judged::from`]).
    #[serde(rename = "source")]
    pub from: String,
    pub verdict: Verdict,
    /// `check`'s verdict: `Blocked`, `AllowedWithWarnings`, `Allowed`,
    /// `NoChange` or `Migrating`; none for an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_verdict: Option<&'static str>,
    /// The release it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The results that block it, in the report's order.
    pub blocking: Vec<Blocker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// Why it could not be judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The whole plan, for the HTML page's timeline.
    #[serde(skip)]
    pub full_plan: Option<Plan>,
}

/// One blocking result of a cluster.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocker {
    pub check: String,
    /// The names it carries ([`cause_names`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The first line of its message.
    pub message: String,
}

/// A cluster's plan in figures.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    /// The same, in words (`1h31m`).
    pub p50: String,
    pub p90: String,
    pub control_plane_p50_seconds: u64,
    pub control_plane_p90_seconds: u64,
    /// Batches that can never drain.
    pub blockers: usize,
}

/// A cause of blocked updates, shared by `count` clusters.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cause {
    /// The check whose results block.
    pub check: String,
    /// The names its results carry that block exactly these clusters;
    /// empty when they carry none.
    pub names: Vec<String>,
    pub count: usize,
    /// The clusters' names, in the order they were given.
    pub clusters: Vec<String>,
}

/// The names a blocking result is grouped by across clusters: OpenShift's
/// names for what it found (`risks`: an alert, a risk), else what it is
/// about (`subjects`: a node, an operator); none for a result that carries
/// neither, grouped by its check alone.
pub fn cause_names(result: &CheckResult) -> &[String] {
    if result.risks.is_empty() {
        &result.subjects
    } else {
        &result.risks
    }
}

impl Fleet {
    /// The report of `judged`, for the target `target`.
    pub fn new(target: &str, judged: Vec<Judged>) -> Self {
        let mut ids: BTreeMap<String, usize> = BTreeMap::new();
        for j in &judged {
            if let Some(id) = j.outcome.as_ref().ok().and_then(|r| r.cluster_id.clone()) {
                *ids.entry(id).or_default() += 1;
            }
        }
        let clusters: Vec<Cluster> = judged.into_iter().map(|j| Cluster::new(j, &ids)).collect();
        let mut summary = Counts {
            clusters: clusters.len(),
            ..Counts::default()
        };
        for c in &clusters {
            match c.verdict {
                Verdict::Cleared => summary.cleared += 1,
                Verdict::Blocked => summary.blocked += 1,
                Verdict::Error => summary.errors += 1,
            }
        }
        let causes = causes(&clusters);
        Self {
            schema_version: SCHEMA_VERSION,
            target: target.to_owned(),
            summary,
            clusters,
            causes,
        }
    }

    /// 3 when some cluster is blocked; else 1 when some could not be
    /// judged; else 0.
    pub fn exit_code(&self) -> u8 {
        if self.summary.blocked > 0 {
            EXIT_BLOCKED
        } else if self.summary.errors > 0 {
            EXIT_UNJUDGED
        } else {
            0
        }
    }

    /// The report in one line.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        format!(
            "{} clusters for {}: {} cleared, {} blocked, {} could not be judged.",
            s.clusters, self.target, s.cleared, s.blocked, s.errors
        )
    }

    /// Renders the report in `format`; `color` only affects the table.
    pub fn render(&self, format: Format, color: bool) -> String {
        match format {
            Format::Table => self.table(color),
            Format::Json => {
                let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
                text.push('\n');
                text
            }
            Format::Html => html::page(self),
        }
    }

    fn table(&self, color: bool) -> String {
        let mut out = format!("Fleet: {}\n", self.summary_line());
        if !self.causes.is_empty() {
            out.push_str("\nShared causes:\n");
            for cause in &self.causes {
                out.push_str(&format!(
                    "  {} of {} clusters: {} ({})\n",
                    cause.count,
                    self.summary.clusters,
                    cause.title(),
                    list(&cause.clusters, 5)
                ));
            }
        }
        let mut table = Table::new();
        table
            .load_style(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(WIDTH)
            .set_header(["Cluster", "Verdict", "Blocked by", "Plan"]);
        if color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        for c in &self.clusters {
            let name = if c.name == c.from {
                clean(&c.name, 200)
            } else {
                format!("{}\n{}", clean(&c.name, 200), clean(&c.from, 200))
            };
            let verdict = match c.verdict {
                Verdict::Cleared => Cell::new(match c.check_verdict {
                    Some(word) if word != "Allowed" => format!("cleared ({word})"),
                    _ => "cleared".to_owned(),
                })
                .fg(Color::Green),
                Verdict::Blocked => Cell::new("blocked").fg(Color::Red),
                Verdict::Error => Cell::new("could not be judged").fg(Color::Yellow),
            };
            let why = match &c.error {
                Some(error) => clean(error, 600),
                None => c
                    .blocking
                    .iter()
                    .map(Blocker::line)
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let plan = c.plan.as_ref().map_or(String::new(), |p| {
                format!("about {} (P90 {})", p.p50, p.p90)
            });
            table.add_row(vec![
                Cell::new(name),
                verdict,
                Cell::new(why),
                Cell::new(plan),
            ]);
        }
        out.push_str(&format!("\n{table}\n"));
        out
    }
}

impl Cause {
    /// `PrecheckAlertsFiring [KubeContainerWaiting]`.
    pub fn title(&self) -> String {
        title(&self.check, &self.names)
    }
}

impl Blocker {
    /// `Check [names]: first line`.
    fn line(&self) -> String {
        format!("{}: {}", title(&self.check, &self.names), self.message)
    }
}

fn title(check: &str, names: &[String]) -> String {
    let check = clean(check, 200);
    if names.is_empty() {
        check
    } else {
        let names: Vec<String> = names.iter().map(|n| clean(n, 200)).collect();
        format!("{check} [{}]", list(&names, 10))
    }
}

impl Cluster {
    fn new(judged: Judged, ids: &BTreeMap<String, usize>) -> Self {
        let Judged { from, outcome } = judged;
        let report = match outcome {
            Ok(report) => report,
            Err(error) => {
                return Self {
                    name: from.clone(),
                    cluster_id: None,
                    from,
                    verdict: Verdict::Error,
                    check_verdict: None,
                    current: None,
                    blocking: Vec::new(),
                    plan: None,
                    error: Some(error),
                    full_plan: None,
                };
            }
        };
        let name = match &report.cluster_id {
            Some(id) if ids.get(id).copied().unwrap_or(0) > 1 => format!("{id} ({from})"),
            Some(id) => id.clone(),
            None => from.clone(),
        };
        let clearance = report.clearance();
        let blocking = report
            .blocking()
            .map(|r| Blocker {
                check: r.name.clone(),
                names: cause_names(r).to_vec(),
                message: clean(r.message.lines().next().unwrap_or(""), MAX_LINE),
            })
            .collect();
        Self {
            name,
            cluster_id: report.cluster_id.clone(),
            from,
            verdict: if clearance == Clearance::Blocked {
                Verdict::Blocked
            } else {
                Verdict::Cleared
            },
            check_verdict: Some(clearance.word()),
            current: report.current.clone(),
            blocking,
            plan: report.plan.as_ref().map(PlanSummary::new),
            error: None,
            full_plan: report.plan,
        }
    }
}

impl PlanSummary {
    fn new(plan: &Plan) -> Self {
        Self {
            p50_seconds: plan.p50_seconds,
            p90_seconds: plan.p90_seconds,
            p50: words(plan.p50_seconds),
            p90: words(plan.p90_seconds),
            control_plane_p50_seconds: plan.control_plane.p50_seconds,
            control_plane_p90_seconds: plan.control_plane.p90_seconds,
            blockers: plan.blockers.len(),
        }
    }
}

/// The causes of the blocked clusters: each check's blocking results
/// grouped by the names they carry, the names that block the same
/// clusters together, those blocking most clusters first.
fn causes(clusters: &[Cluster]) -> Vec<Cause> {
    // (check, name) -> the clusters, by index; a result with no names
    // counts under its check alone.
    let mut by_name: BTreeMap<(&str, Option<&str>), BTreeSet<usize>> = BTreeMap::new();
    for (i, cluster) in clusters.iter().enumerate() {
        for b in &cluster.blocking {
            if b.names.is_empty() {
                by_name.entry((&b.check, None)).or_default().insert(i);
            }
            for name in &b.names {
                by_name.entry((&b.check, Some(name))).or_default().insert(i);
            }
        }
    }
    // Names of one check that block the same clusters are one cause.
    // A result that carries no name stays a cause of its own.
    let mut grouped: BTreeMap<(&str, bool, BTreeSet<usize>), Vec<String>> = BTreeMap::new();
    for ((check, name), set) in by_name {
        let names = grouped.entry((check, name.is_some(), set)).or_default();
        if let Some(name) = name {
            names.push(name.to_owned());
        }
    }
    let mut causes: Vec<Cause> = grouped
        .into_iter()
        .map(|((check, _, set), names)| Cause {
            check: check.to_owned(),
            names,
            count: set.len(),
            clusters: set.iter().map(|&i| clusters[i].name.clone()).collect(),
        })
        .collect();
    causes.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.check.cmp(&b.check))
            .then_with(|| a.names.cmp(&b.names))
    });
    causes
}

#[cfg(test)]
mod tests;
