//! The PrometheusRule of deploy/monitoring/ under promtool (Debian's
//! `prometheus` package). Its spec is checked in as a plain rules file,
//! tests/alerts/rules.yaml, generated here (`PREFLIGHT_GATE_BLESS=1`
//! rewrites it); `promtool check rules` lints it, and `promtool test rules`
//! runs tests/alerts/*.test.yaml, which must show every alert both firing
//! and not firing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use preflight_gate::metrics::{EffectKind, Metrics};
use preflight_gate::model::{Phase, UpdatePreflight};
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const RULE: &str = "deploy/monitoring/prometheusrule.yaml";
const RULES_FILE: &str = "tests/alerts/rules.yaml";

fn root() -> &'static Path {
    Path::new(ROOT)
}

fn yaml(relative: &str) -> Value {
    let text = std::fs::read_to_string(root().join(relative))
        .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{relative} is not YAML: {e}"))
}

/// The rules file promtool reads: the PrometheusRule's spec.
pub fn rules_file_text() -> String {
    let spec = &yaml(RULE)["spec"];
    assert!(spec["groups"].is_array(), "{RULE} has no spec.groups");
    format!(
        "# Generated from {RULE} (its spec); do not edit.\n# PREFLIGHT_GATE_BLESS=1 cargo test --test it alerts rewrites it.\n{}",
        serde_saphyr::to_string(spec).unwrap()
    )
}

/// Every alerting rule, in order.
fn alert_rules() -> Vec<Value> {
    yaml(RULE)["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// promtool, or a panic that says how to get it.
pub fn promtool(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}); install Debian's prometheus package (tests/run does)"
            )
        })
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_rules_file_is_the_prometheusrules_spec() {
    crate::golden::file(RULES_FILE, &rules_file_text(), "alerts");
}

#[test]
fn promtool_checks_the_rules() {
    let out = promtool(
        &["check", "rules", "rules.yaml"],
        &root().join("tests/alerts"),
    );
    assert!(
        out.status.success(),
        "promtool check rules failed:\n{}",
        text(&out)
    );
    assert!(text(&out).contains("SUCCESS"), "{}", text(&out));
}

fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/alerts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".test.yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no tests/alerts/*.test.yaml");
    files
}

#[test]
fn promtool_tests_every_alert_firing_and_not_firing() {
    let files = test_files();
    let mut args = vec!["test", "rules"];
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    args.extend(names.iter().map(String::as_str));
    let out = promtool(&args, &root().join("tests/alerts"));
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{}",
        text(&out)
    );

    // What the tests cover: alertname -> (seen firing, seen not firing).
    let mut covered: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for file in &files {
        let relative = file
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let tests = yaml(&relative);
        let rule_files = tests["rule_files"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            rule_files,
            [Value::from("rules.yaml")],
            "{relative} must test the generated rules file"
        );
        for test in tests["tests"].as_array().unwrap() {
            for case in test["alert_rule_test"].as_array().into_iter().flatten() {
                let name = case["alertname"].as_str().unwrap().to_owned();
                let fires = case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
                let entry = covered.entry(name).or_default();
                if fires {
                    entry.0 = true;
                } else {
                    entry.1 = true;
                }
            }
        }
    }
    let alerts: BTreeSet<String> = alert_rules()
        .iter()
        .map(|r| r["alert"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(alerts.len(), 10, "{alerts:?}");
    for alert in &alerts {
        let (fires, quiet) = covered.get(alert).copied().unwrap_or_default();
        assert!(fires, "no test shows {alert} firing");
        assert!(quiet, "no test shows {alert} not firing");
    }
}

/// The gate's alert checks leave its own alerts out by this label, so every
/// rule of the PrometheusRule must carry it, naming the object: a new alert
/// without it could latch every update on itself.
#[test]
fn every_alert_carries_its_prometheusrules_identity() {
    let name = yaml(RULE)["metadata"]["name"].as_str().unwrap().to_owned();
    for rule in alert_rules() {
        assert_eq!(
            rule["labels"][preflight_gate::view::alerts::OWN_RULE_LABEL].as_str(),
            Some(name.as_str()),
            "{}: no {}: {name} label",
            rule["alert"],
            preflight_gate::view::alerts::OWN_RULE_LABEL
        );
    }
}

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_a_runbook() {
    for rule in alert_rules() {
        let alert = rule["alert"].as_str().unwrap();
        let severity = rule["labels"]["severity"].as_str().unwrap_or("");
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "{alert}: severity {severity:?}"
        );
        for annotation in ["summary", "description"] {
            let text = rule["annotations"][annotation].as_str().unwrap_or("");
            assert!(text.len() > 20, "{alert}: {annotation} {text:?}");
        }
        let url = rule["annotations"]["runbook_url"].as_str().unwrap_or("");
        let runbook = format!("docs/runbooks/{alert}.md");
        assert!(url.ends_with(&runbook), "{alert}: runbook_url {url}");
        // The release's own runbook, not a branch that moves on (and that
        // a disconnected cluster reads from the release's tarball).
        let tag = format!("/blob/v{}/", env!("CARGO_PKG_VERSION"));
        assert!(
            url.contains(&tag),
            "{alert}: runbook_url {url} is not at {tag}"
        );
        let text = std::fs::read_to_string(root().join(&runbook))
            .unwrap_or_else(|_| panic!("{alert}: no {runbook}"));
        assert!(
            text.starts_with(&format!("# {alert}\n")),
            "{runbook} is not titled {alert}"
        );
    }
    let expected = [
        ("ClusterUpdateBlockedByPreflight", "warning"),
        ("UpdatePreflightFailing", "warning"),
        ("PreflightGateOverrideUsed", "info"),
        ("PreflightResultsStale", "warning"),
        ("PreflightGateDown", "warning"),
        ("PreflightGateDegraded", "warning"),
        ("PreflightGateCertificateExpiringSoon", "warning"),
        ("PreflightGateHostedClusterUnreadable", "warning"),
        ("PreflightGateConnectionsSaturated", "warning"),
        ("PreflightGateClusterClaimsFailing", "warning"),
    ];
    let rules = alert_rules();
    for (alert, severity) in expected {
        let rule = rules
            .iter()
            .find(|r| r["alert"] == alert)
            .unwrap_or_else(|| panic!("no alert {alert}"));
        assert_eq!(rule["labels"]["severity"], severity, "{alert}");
    }
    // oc adm upgrade recommend lists an alert with this label against every
    // target, and the cluster-version operator may turn it into a risk of
    // every target: the gate's own alerts would then hold updates.
    for rule in &rules {
        assert!(
            rule["labels"].get("openShiftUpdatePrecheck").is_none(),
            "{} carries openShiftUpdatePrecheck",
            rule["alert"]
        );
    }
}

/// Metrics with a series each, as a gate that has decided and reconciled.
pub fn exercised() -> String {
    let metrics = Metrics::new().unwrap();
    metrics.admission.target_denied("4.15.3", 1.0);
    metrics.admission.target_settled(Some("4.14.12"), 2.0);
    let object: UpdatePreflight =
        yaml("examples/results/4.15.3-failing.yaml").pipe(|v| serde_json::from_value(v).unwrap());
    metrics.results.observe(&object);
    metrics.results.offered_targets([("4.15.3", true)]);
    metrics
        .admission
        .review_decided(Some("UPDATE"), false, "failed", Duration::from_millis(2));
    metrics.effects.asked_for(EffectKind::Event);
    metrics.effects.failed(EffectKind::Event);
    metrics
        .controller
        .run_finished(Phase::Passed, Duration::from_secs(1));
    metrics.render()
}

trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}
impl<T> Pipe for T {}

/// Names of the metric families the gate exports.
pub fn exported_families(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_rules_use_only_metrics_the_gate_exports() {
    let families = exported_families(&exercised());
    let exprs: String = alert_rules()
        .iter()
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect();
    let used: BTreeSet<&str> = exprs
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("preflight_gate_"))
        .collect();
    assert!(used.len() >= 6, "{used:?}");
    for name in used {
        assert!(
            families.contains(name),
            "the rules use {name}, which the gate does not export"
        );
    }
}

#[test]
fn the_catalogue_documents_every_metric() {
    let families = exported_families(&exercised());
    let docs = std::fs::read_to_string(root().join("docs/metrics.md")).unwrap();
    for name in &families {
        assert!(
            docs.contains(&format!("`{name}`")),
            "docs/metrics.md does not document {name}"
        );
    }
    assert!(families.len() >= 18, "{families:?}");
}

#[test]
fn the_runbooks_need_only_oc() {
    // An administrator paged at night has `oc`, not the gate's binary: every
    // command in a runbook's shell blocks is an `oc` command.
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("docs/runbooks")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for block in text.split("```sh\n").skip(1) {
            let block = block.split("```").next().unwrap();
            let joined = block.replace("\\\n", " ");
            for line in joined.lines().map(str::trim) {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                assert!(
                    line.split_whitespace().next() == Some("oc"),
                    "{name}: `{line}` is not an oc command"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} commands in the runbooks");
}
