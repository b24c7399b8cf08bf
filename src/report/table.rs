//! The report as a table: one row per check, the failing ones first, with
//! the outcome coloured when printing to a terminal; remediation links
//! follow the table whole, so a terminal can still open them.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};
use owo_colors::OwoColorize;

use super::{Clearance, Report};
use crate::model::results::shown_check_name;
use crate::model::text::clean;

/// The longest message a table cell shows, in characters.
const MAX_TABLE_CELL: usize = 4000;
use crate::model::{CheckResult, Outcome, Severity};

/// Width of the table, so the output is the same on every terminal.
const WIDTH: u16 = 120;

/// Renders the header, the table and the verdict.
pub fn table(report: &Report, color: bool) -> String {
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH)
        .set_header(["Check", "Severity", "Result", "Message"]);
    if color {
        table.enforce_styling();
    } else {
        table.force_no_tty();
    }
    let shown = report.shown();
    let mut rows: Vec<&CheckResult> = shown.iter().collect();
    rows.sort_by_key(|r| rank(r));
    let mut links = String::new();
    for r in rows {
        if let Some(url) = r
            .remediation_url
            .as_deref()
            .filter(|_| r.outcome != Outcome::Pass)
        {
            links.push_str(&format!(
                "  {}: {}\n",
                shown_check_name(&r.name),
                clean(url, 200)
            ));
        }
        table.add_row(vec![
            // A name that is not a check name is shown escaped, saying so.
            Cell::new(shown_check_name(&r.name)),
            Cell::new(format!("{:?}", r.severity)),
            outcome(r),
            // The table keeps whole messages (a check's own findings, risk
            // names last); only control characters go, and a runaway one
            // is cut. The names OpenShift gives the finding follow, as
            // `--accept` takes them.
            Cell::new(message(r)),
        ]);
    }
    if !links.is_empty() {
        links.insert_str(0, "Remediation:\n");
    }
    let mut header = format!("Preflight for {}", clean(&report.target, 240));
    if !report.image.is_empty() && report.image != report.target {
        header.push_str(&format!(" ({})", clean(&report.image, 240)));
    }
    if let Some(current) = &report.current {
        header.push_str(&format!(" from {current}"));
    }
    match report.update_kind.as_deref() {
        _ if report.migration.is_some() => header.push_str(&format!(
            ", {}: no change",
            report.migration.as_deref().unwrap_or_default()
        )),
        _ if report.no_change.is_some() => header.push_str(&format!(
            ", {}: no change",
            report.no_change.unwrap_or_default()
        )),
        Some("rollback") => header.push_str(", a rollback"),
        Some("same") => header.push_str(", the release it runs"),
        Some("pre-release step") => header.push_str(", a pre-release step"),
        Some("multi-architecture migration") => {
            header.push_str(", a migration to the multi-architecture payload")
        }
        Some("migration abandoned") => {
            header.push_str(", which abandons the migration to multi-architecture under way")
        }
        Some("single-architecture move") => {
            header.push_str(", a move back to a single architecture")
        }
        Some(kind) => header.push_str(&format!(", a {kind} update")),
        None => {}
    }
    if let Some(as_of) = &report.as_of {
        header.push_str(&format!("\nas of {as_of}"));
        if let Some(source) = &report.as_of_source {
            header.push_str(&format!(" ({source})"));
        }
        if let Some(disagree) = &report.clocks_disagree {
            header.push_str(&format!("\nwarning: {disagree}"));
        }
    }
    if let Some(line) = skipped_line(report) {
        header.push('\n');
        header.push_str(&line);
    }
    let summary = report.summary_line();
    let summary = match (color, report.clearance()) {
        (false, _) => summary,
        (true, Clearance::Blocked) => summary.red().bold().to_string(),
        (true, Clearance::ClearWithWarnings) => summary.yellow().bold().to_string(),
        (true, Clearance::Clear) => summary.green().bold().to_string(),
        (true, Clearance::NoChange) => summary.bold().to_string(),
        (true, Clearance::Migrating) => summary.cyan().bold().to_string(),
    };
    // The update plan follows the checks.
    let plan = report
        .plan
        .as_ref()
        .map(|plan| super::plan_table(plan, color))
        .unwrap_or_default();
    format!("{header}\n{table}\n{links}{plan}{summary}\n")
}

/// A result's message, with the names OpenShift gives what it found.
fn message(r: &CheckResult) -> String {
    let message = clean(&r.message, MAX_TABLE_CELL);
    // The gate's own marks are not OpenShift's names.
    let risks: Vec<String> = r
        .risks
        .iter()
        .filter(|n| !crate::model::risks::is_gate_mark(n))
        .map(|n| clean(n, 120))
        .collect();
    if risks.is_empty() {
        return message;
    }
    format!("{message} [OpenShift: {}]", risks.join(", "))
}

/// How many objects the snapshot held that no check reads; those of a kind
/// the checks read, but in another API group, are named.
fn skipped_line(report: &Report) -> Option<String> {
    let total: u64 = report.skipped.values().sum();
    let unread: u64 = report.unread_files.values().sum();
    if total == 0 && unread == 0 {
        return None;
    }
    let named: Vec<String> = report
        .skipped
        .iter()
        .filter(|(key, _)| {
            let kind = key.split(' ').next().unwrap_or("");
            crate::view::kinds::named(kind).is_some()
        })
        .map(|(key, n)| format!("{n} {key}"))
        .collect();
    let mut parts = Vec::new();
    if total > 0 {
        let mut part = format!(
            "skipped {total} objects of {} kinds no check reads",
            report.skipped.len()
        );
        if !named.is_empty() {
            part.push_str(&format!(
                ", among them {} (not the kind of the same name the checks read)",
                named.join(", ")
            ));
        }
        parts.push(part);
    }
    if unread > 0 {
        parts.push(format!(
            "did not open {unread} must-gather files of {} resources no check reads",
            report.unread_files.len()
        ));
    }
    let line = parts.join("; ");
    Some(line)
}

/// Blocking failures first, then warnings, errors, passes, skips.
fn rank(r: &CheckResult) -> u8 {
    match (r.outcome, r.severity) {
        (Outcome::Fail, Severity::Blocking) => 0,
        (Outcome::Error, _) => 1,
        (Outcome::Fail, Severity::Warning) => 2,
        (Outcome::Pass, _) => 3,
        (Outcome::Skipped, _) => 4,
    }
}

fn outcome(r: &CheckResult) -> Cell {
    let (text, color) = match (r.outcome, r.severity) {
        (Outcome::Fail, Severity::Warning) => ("WARN", Color::Yellow),
        (Outcome::Fail, Severity::Blocking) => ("FAIL", Color::Red),
        (Outcome::Error, _) => ("ERROR", Color::Red),
        (Outcome::Pass, _) => ("pass", Color::Green),
        (Outcome::Skipped, _) => ("skipped", Color::DarkGrey),
    };
    let cell = Cell::new(text).fg(color);
    if matches!(color, Color::Red | Color::Yellow) {
        cell.add_attribute(Attribute::Bold)
    } else {
        cell
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::alerts::Alert;

    /// Bidi overrides and zero-width characters, in an alert's description
    /// as a finding quotes it and in a check's message, never reach the
    /// report; a name that is not a check name is shown escaped.
    #[test]
    fn format_characters_do_not_reach_the_report() {
        let alert = Alert {
            labels: [("alertname".to_owned(), "KubeNodeNotReady".to_owned())].into(),
            annotations: [(
                "description".to_owned(),
                "Node \u{202e}1-rekrow\u{202c} is \u{2066}not\u{2069} ready\u{200b}".to_owned(),
            )]
            .into(),
            state: "firing".to_owned(),
            ..Alert::default()
        };
        let results = vec![
            CheckResult::new(
                "CriticalAlertsFiring",
                Severity::Blocking,
                Outcome::Fail,
                alert.quote(),
            ),
            CheckResult::new(
                "VendorCheck",
                Severity::Blocking,
                Outcome::Fail,
                "driver \u{feff}too\u{200d} old\u{2067}",
            ),
            CheckResult::new("Nodes\u{202e}Ready", Severity::Warning, Outcome::Fail, "x"),
        ];
        let report = Report::from_results("4.15.3".into(), String::new(), results);
        let text = table(&report, false);
        assert!(!text.chars().any(crate::model::text::is_format), "{text:?}");
        assert!(
            text.contains("KubeNodeNotReady: Node 1-rekrow is not ready."),
            "{text}"
        );
        assert!(text.contains("driver too old"), "{text}");
        assert!(text.contains(r#""Nodes\u{202e}Ready""#), "{text}");
    }
}
