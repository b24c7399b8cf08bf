//! The `preflight-gate check` report: what a run found, rendered as a
//! table for a person (coloured on a terminal) or as JSON or YAML for a
//! program, and the exit code that sums it up (0 all pass or no change, 3
//! blocking failures, 4 warnings only, as troubleshoot's preflight does).

pub mod fleet;
mod plan;
mod table;

use serde::Serialize;

use crate::checks::Context;
use crate::model::standing::{Exemptions, Standing};
use crate::model::{CheckResult, Severity, Summary};

pub use plan::plan_table;
pub use table::table;

/// The plan alone, as `check --plan-only` prints it: a table, or the
/// plan's own JSON or YAML document.
pub fn render_plan(plan: &crate::plan::Plan, format: Format, color: bool) -> String {
    match format {
        Format::Table => plan_table(plan, color),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(plan).unwrap_or_default();
            text.push('\n');
            text
        }
        Format::Yaml => serde_saphyr::to_string(plan).unwrap_or_default(),
    }
}

/// Whether the update may go ahead, as `check` concludes it: what its
/// summary line says and its exit code is. ("Verdict" is the webhook's
/// word, for one review.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clearance {
    /// Everything passed (or was skipped): exit 0.
    Clear,
    /// Only warnings, or errors of checks that only warn: exit 4.
    ClearWithWarnings,
    /// A blocking failure (a blocking check's error included): exit 3.
    Blocked,
    /// The target is what the cluster already runs or is updating to:
    /// asking for it changes nothing (oc says "already at"), so nothing is
    /// planned and what fails is the cluster's own problem, shown as a
    /// warning: exit 0.
    NoChange,
    /// The cluster is migrating to the multi-architecture payload, and the
    /// target is that migration's own payload: no change either (exit 0),
    /// said as the migration it is, with how far it has got.
    Migrating,
}

impl Clearance {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Clear | Self::NoChange | Self::Migrating => 0,
            Self::Blocked => 3,
            Self::ClearWithWarnings => 4,
        }
    }

    /// The word the JSON and YAML reports carry (`verdict`, schema 1).
    pub fn word(self) -> &'static str {
        match self {
            Self::Clear => "Allowed",
            Self::ClearWithWarnings => "AllowedWithWarnings",
            Self::Blocked => "Blocked",
            Self::NoChange => "NoChange",
            Self::Migrating => "Migrating",
        }
    }
}

/// The clearance of the plan alone: blocked when a batch can never drain
/// or the window is too short, with warnings when something will hold the
/// update up.
pub fn plan_clearance(plan: &crate::plan::Plan) -> Clearance {
    if !plan.blockers.is_empty() || plan.window.as_ref().is_some_and(|w| !w.fits) {
        Clearance::Blocked
    } else if !plan.warnings.is_empty() || waits_uncounted(plan) {
        Clearance::ClearWithWarnings
    } else {
        Clearance::Clear
    }
}

/// Whether some drain waits for a PDB for a time the plan cannot count (its
/// unhealthy pods must recover first): a hold. A wait the plan counts (a
/// round of replacements becoming healthy) is routine, in its figures.
fn waits_uncounted(plan: &crate::plan::Plan) -> bool {
    plan.pools
        .iter()
        .flat_map(|p| &p.batches)
        .flat_map(|b| &b.holds)
        .any(|h| h.outcome == crate::plan::Outcome::Waits && h.wait_seconds.is_none())
}

/// What a target that changes nothing is.
const RUNS: &str = "the release it runs";
const UNDER_WAY: &str = "the update under way";

const MIGRATION: &str = "the migration to multi-architecture under way";

/// Whether the target changes nothing: it is the ClusterVersion's
/// `status.desired`, the release it runs or the one it is updating to (the
/// CVO has it already), on the same architecture; or the payload of the
/// migration to multi-architecture under way, with how far it has got.
fn no_change(ctx: &Context) -> Option<(&'static str, Option<String>)> {
    let cv = ctx.view.cluster_version.as_ref()?;
    if let Some(migration) = cv
        .multi_migration()
        .filter(|m| m.is_asked_by(ctx.target) || (m.payload.is_none() && cv.is_desired(ctx.target)))
    {
        return Some((
            MIGRATION,
            Some(format!(
                "migrating to multi-architecture, {}",
                migration.progress()
            )),
        ));
    }
    if !cv.is_desired(ctx.target) {
        return None;
    }
    Some((
        if cv.update_in_progress().is_some() {
            UNDER_WAY
        } else {
            RUNS
        },
        None,
    ))
}

/// How the report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

/// The outcome of a run, ready to print.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The target as given or resolved: its version, else its image.
    pub target: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_kind: Option<String>,
    /// The time the data was judged at (RFC 3339), and how it was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_of_source: Option<String>,
    /// Objects whose clocks run more than a day past that time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clocks_disagree: Option<String>,
    /// Objects of the snapshot no check reads, by `kind (apiVersion)`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Must-gather files not opened, by `resource (group)`.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub unread_files: std::collections::BTreeMap<String, u64>,
    /// Checks accepted with `--accept` whose failures count as warnings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<String>,
    /// Every result, each with its check's own severity (an accepted one
    /// keeps `Blocking`; its standing says it was accepted).
    #[serde(skip)]
    pub results: Vec<CheckResult>,
    /// How each result counts, in the order of `results`.
    #[serde(skip)]
    standings: Vec<Standing>,
    pub summary: Summary,
    /// The update plan (`crate::plan`), with its own schema version; none
    /// for results read back from an `UpdatePreflight`, and none when the
    /// target changes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::plan::Plan>,
    /// Set when the target changes nothing: `the release it runs`, `the
    /// update under way`, or `the migration to multi-architecture under
    /// way`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_change: Option<&'static str>,
    /// Set when the cluster is migrating to the multi-architecture payload
    /// and the target is that migration's: `migrating to
    /// multi-architecture, 47% done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub migration: Option<String>,
    /// The ClusterVersion's `spec.clusterID`, which names the cluster in a
    /// fleet's report; not part of `check`'s document.
    #[serde(skip)]
    pub cluster_id: Option<String>,
}

/// The version of the JSON and YAML report's shape; a change that removes
/// or renames a field raises it.
pub const SCHEMA_VERSION: u32 = 1;

/// The report as programs read it: its schema version and verdict first,
/// then the report, every result beside the standing it got.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    schema_version: u32,
    /// `Blocked`, `AllowedWithWarnings`, `Allowed`, `NoChange` or
    /// `Migrating`: what the exit code says.
    verdict: &'static str,
    #[serde(flatten)]
    report: &'a Report,
    results: Vec<Entry<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry<'a> {
    #[serde(flatten)]
    result: &'a CheckResult,
    /// `Passed`, `Skipped`, `Warns`, `Accepted` or `Blocks`.
    standing: String,
}

impl Report {
    /// Builds the report by the one blocking rule: failures of the checks
    /// `exemptions` accept become warnings, as an accepted risk does at the
    /// webhook, and errors of its fail-open checks do not block.
    pub fn new(ctx: &Context, mut results: Vec<CheckResult>, exemptions: &Exemptions) -> Self {
        exemptions.stamp(&mut results);
        let (no_change, migration) = no_change(ctx).unzip();
        let migration = migration.flatten();
        let standings: Vec<Standing> = results
            .iter()
            .map(|r| match exemptions.standing(r) {
                // Asking again for what the cluster runs or is updating to
                // changes nothing: its failures are the cluster's own.
                Standing::Blocks if no_change.is_some() => Standing::Warns,
                standing => standing,
            })
            .collect();
        let accepted = results
            .iter()
            .zip(&standings)
            .filter(|(_, s)| **s == Standing::Accepted)
            .map(|(r, _)| r.name.clone())
            .collect();
        Self {
            target: ctx.target_name(),
            image: ctx.target.image.clone(),
            current: ctx.current.as_ref().map(ToString::to_string),
            update_kind: ctx.move_name().map(str::to_owned),
            as_of: Some(ctx.now.to_string()),
            as_of_source: Some(ctx.now_source.to_owned()),
            clocks_disagree: ctx.view.as_of.as_ref().and_then(|a| a.disagreement.clone()),
            skipped: ctx.view.skipped.clone(),
            unread_files: ctx.view.unread_files.clone(),
            accepted,
            summary: crate::model::standing::summary(&results, &standings),
            results,
            standings,
            // A target the cluster runs or updates to plans what is left
            // of it, when anything is (pools still rolling), else nothing.
            plan: Some(crate::plan::plan_to(
                ctx.view, ctx.target, ctx.kind, ctx.now,
            ))
            .filter(|p| no_change.is_none() || p.pools.iter().any(|p| !p.batches.is_empty())),
            no_change,
            migration,
            cluster_id: ctx
                .view
                .cluster_version
                .as_ref()
                .and_then(|cv| cv.spec.cluster_id.clone())
                .filter(|id| !id.trim().is_empty()),
        }
    }

    /// The report of results a controller wrote to an `UpdatePreflight`.
    pub(crate) fn from_results(target: String, image: String, results: Vec<CheckResult>) -> Self {
        let exemptions = Exemptions::default();
        Self {
            standings: results.iter().map(|r| exemptions.standing(r)).collect(),
            target,
            image,
            current: None,
            update_kind: None,
            as_of: None,
            as_of_source: None,
            clocks_disagree: None,
            skipped: Default::default(),
            unread_files: Default::default(),
            accepted: Vec::new(),
            summary: exemptions.summarize(&results),
            results,
            plan: None,
            no_change: None,
            migration: None,
            cluster_id: None,
        }
    }

    /// The results that block the update (standing `Blocks`), in order.
    pub fn blocking(&self) -> impl Iterator<Item = &CheckResult> {
        self.results
            .iter()
            .zip(&self.standings)
            .filter(|(_, s)| **s == Standing::Blocks)
            .map(|(r, _)| r)
    }

    /// Whether the update may go ahead: blocked by a blocking failure
    /// (errors of blocking checks included), clear with warnings, or clear.
    pub fn clearance(&self) -> Clearance {
        if self.migration.is_some() {
            Clearance::Migrating
        } else if self.no_change.is_some() {
            Clearance::NoChange
        } else if self.summary.failing > 0 {
            Clearance::Blocked
        } else if self.summary.warnings > 0 || self.summary.errored > 0 {
            Clearance::ClearWithWarnings
        } else {
            Clearance::Clear
        }
    }

    /// 0 all pass, 3 blocked, 4 warnings only ([`Clearance::exit_code`]).
    pub fn exit_code(&self) -> u8 {
        self.clearance().exit_code()
    }

    /// The report in one line: the counts and whether the update may go
    /// ahead.
    pub fn summary_line(&self) -> String {
        let s = &self.summary;
        let counts = format!(
            "{} passed, {} failing, {} warnings, {} errored, {} skipped",
            s.passed, s.failing, s.warnings, s.errored, s.skipped
        );
        match self.clearance() {
            Clearance::Blocked => {
                // A missing admin ack is given, never accepted
                // (`standing::acceptable`): the hint never offers it.
                let (acceptable, not): (Vec<&CheckResult>, Vec<&CheckResult>) = self
                    .results
                    .iter()
                    .zip(&self.standings)
                    .filter(|(_, s)| **s == Standing::Blocks)
                    .map(|(r, _)| r)
                    .partition(|r| crate::model::standing::acceptable(r));
                let names: Vec<String> = not
                    .iter()
                    .map(|r| crate::model::results::shown_check_name(&r.name))
                    .collect();
                let how = match (acceptable.is_empty(), names.is_empty()) {
                    (_, true) => "fix the failures, or accept them with --accept NAME".to_owned(),
                    (true, false) => format!(
                        "fix the failures ({} cannot be accepted: its message says how)",
                        crate::model::text::list(&names, 3)
                    ),
                    (false, false) => format!(
                        "fix the failures, or accept them with --accept NAME ({} cannot be accepted: its message says how)",
                        crate::model::text::list(&names, 3)
                    ),
                };
                format!("{counts}. The update to {} is blocked: {how}.", self.target)
            }
            Clearance::ClearWithWarnings => format!(
                "{counts}. The update to {} may go ahead; read the warnings first.",
                self.target
            ),
            Clearance::Clear => format!("{counts}. The update to {} may go ahead.", self.target),
            Clearance::Migrating => {
                let problems = if s.warnings + s.errored > 0 {
                    " What fails is the cluster's own, shown as warnings: fix it for the migration's sake."
                } else {
                    ""
                };
                format!(
                    "{counts}. Migration: the cluster is {}; asking for its payload again changes nothing, and nothing is planned. Let it complete before asking for another release.{problems}",
                    self.migration
                        .as_deref()
                        .unwrap_or("migrating to multi-architecture")
                )
            }
            Clearance::NoChange => {
                let already = match self.no_change {
                    Some(UNDER_WAY) => {
                        format!("the update to {} is already under way", self.target)
                    }
                    _ => format!("the cluster already runs {}", self.target),
                };
                let problems = if s.warnings + s.errored > 0 {
                    " What fails is the cluster's own, shown as warnings: fix it for the cluster's sake."
                } else {
                    ""
                };
                let planned = if self.plan.is_some() {
                    "nothing to update; what is left of it, the nodes still to roll, is planned"
                } else {
                    "nothing to update, and nothing is planned"
                };
                format!("{counts}. No change: {already}; {planned}.{problems}")
            }
        }
    }

    /// The results as the table shows them: an accepted failure as a
    /// warning that says it was accepted.
    pub(crate) fn shown(&self) -> Vec<CheckResult> {
        self.results
            .iter()
            .zip(&self.standings)
            .map(|(r, standing)| match standing {
                Standing::Accepted => CheckResult {
                    severity: Severity::Warning,
                    message: format!("accepted: {}", r.message),
                    ..r.clone()
                },
                Standing::Warns if self.no_change.is_some() && r.severity == Severity::Blocking => {
                    CheckResult {
                        severity: Severity::Warning,
                        message: format!("the cluster's own, no change blocks: {}", r.message),
                        ..r.clone()
                    }
                }
                _ => r.clone(),
            })
            .collect()
    }

    fn document(&self) -> Document<'_> {
        Document {
            schema_version: SCHEMA_VERSION,
            verdict: self.clearance().word(),
            report: self,
            results: self
                .results
                .iter()
                .zip(&self.standings)
                .map(|(result, standing)| Entry {
                    result,
                    standing: format!("{standing:?}"),
                })
                .collect(),
        }
    }

    /// Renders the report in `format`; `color` only affects the table.
    pub fn render(&self, format: Format, color: bool) -> String {
        match format {
            Format::Table => table(self, color),
            Format::Json => {
                let mut text = serde_json::to_string_pretty(&self.document()).unwrap_or_default();
                text.push('\n');
                text
            }
            Format::Yaml => serde_saphyr::to_string(&self.document()).unwrap_or_default(),
        }
    }
}
