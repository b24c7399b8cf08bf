//! Real cluster captures (tests/data/real-clusters) and small edits of
//! them, and the report the offline engine gives for one: what the table
//! tests of the rules read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use preflight_gate::checks::Context;
use preflight_gate::cluster::snapshot;
use preflight_gate::model::standing::Exemptions;
use preflight_gate::model::{CheckResult, Outcome, Severity};
use preflight_gate::report::Report;
use preflight_gate::suite::{self, Limits};
use serde_json::{Value, json};

pub const NOW: &str = "2026-11-30T12:00:00Z";

pub fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real-clusters")
        .join(name)
}

/// A capture as it is, or a copy of it with an edit.
pub enum Snapshot {
    Real(&'static str),
    Edited(tempfile::TempDir),
}

impl Snapshot {
    pub fn path(&self) -> PathBuf {
        match self {
            Self::Real(name) => capture(name),
            Self::Edited(dir) => dir.path().to_owned(),
        }
    }
}

/// A copy of capture `name` with `edit` applied to its files.
pub fn edited(name: &str, edit: impl FnOnce(&Path)) -> Snapshot {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(capture(name)).unwrap() {
        let entry = entry.unwrap();
        let file = entry.file_name();
        // oc's own output is not cluster data.
        if !file.to_string_lossy().starts_with("oc-recommend") {
            std::fs::copy(entry.path(), dir.path().join(file)).unwrap();
        }
    }
    edit(dir.path());
    Snapshot::Edited(dir)
}

/// Edits a text file of a copied capture: `from` must be in it.
pub fn replace(dir: &Path, file: &str, from: &str, to: &str) {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// Edits the alerts of a copied capture.
pub fn alerts(dir: &Path, edit: impl FnOnce(&mut Vec<Value>)) {
    let path = dir.join("alerts.json");
    let mut response: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|_| json!({"status": "success", "data": {"alerts": []}}));
    let list = response["data"]["alerts"].as_array_mut().unwrap();
    edit(list);
    std::fs::write(&path, response.to_string()).unwrap();
}

/// Sets the state of the first alert named `name`.
pub fn set_state(alerts: &mut [Value], name: &str, state: &str) {
    let alert = alerts
        .iter_mut()
        .find(|a| a["labels"]["alertname"] == name)
        .unwrap_or_else(|| panic!("no {name}"));
    alert["state"] = json!(state);
}

/// The report for `to`, `accepted` as `check --accept` takes them.
pub fn report(snapshot: &Snapshot, to: &str, accepted: &[&str]) -> Report {
    let view = snapshot::load(&snapshot.path()).unwrap();
    let target = view.target(to);
    let now: Timestamp = NOW.parse().unwrap();
    let exemptions = Exemptions {
        accepted: accepted.iter().map(|s| s.to_string()).collect(),
        ..Exemptions::default()
    };
    let view = Arc::new(view);
    let results = suite::run_accepting(
        view.clone(),
        &target,
        now,
        &exemptions.accepted,
        Limits::default(),
    );
    Report::new(&Context::new(&view, &target, now), results, &exemptions)
}

pub fn result<'a>(report: &'a Report, check: &str) -> &'a CheckResult {
    report
        .results
        .iter()
        .find(|r| r.name == check)
        .unwrap_or_else(|| panic!("no {check}"))
}

pub fn blocks(r: &CheckResult) -> bool {
    r.severity == Severity::Blocking && matches!(r.outcome, Outcome::Fail | Outcome::Error)
}
