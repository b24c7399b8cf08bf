//! The dashboard: the OpenShift console's ConfigMap carries the Grafana JSON
//! of deploy/monitoring/ verbatim (generated here; `PREFLIGHT_GATE_BLESS=1`
//! rewrites it), and every query uses metrics the gate exports.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::alerts::{exercised, exported_families};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const GRAFANA: &str = "deploy/monitoring/grafana-dashboard.json";
const CONSOLE: &str = "deploy/monitoring/console-dashboard.yaml";

fn grafana_text() -> String {
    std::fs::read_to_string(Path::new(ROOT).join(GRAFANA)).unwrap()
}

fn console_text() -> String {
    let json = grafana_text();
    let indented: String = json.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "# Generated from {GRAFANA}; do not edit.\n\
         # PREFLIGHT_GATE_BLESS=1 cargo test --test it dashboard rewrites it.\n\
         # The OpenShift console shows ConfigMaps of openshift-config-managed\n\
         # labelled console.openshift.io/dashboard under Observe > Dashboards.\n\
         apiVersion: v1\n\
         kind: ConfigMap\n\
         metadata:\n  name: preflight-gate-dashboard\n  namespace: openshift-config-managed\n  \
         labels:\n    console.openshift.io/dashboard: \"true\"\n    app.kubernetes.io/name: preflight-gate\n\
         data:\n  preflight-gate.json: |\n{indented}"
    )
}

/// Every query of the dashboard.
pub fn queries() -> Vec<String> {
    let dashboard: Value = serde_json::from_str(&grafana_text()).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_console_dashboard_carries_the_grafana_json() {
    crate::golden::file(CONSOLE, &console_text(), "dashboard");
    let checked_in = std::fs::read_to_string(Path::new(ROOT).join(CONSOLE)).unwrap();
    // And it reads back as the same dashboard, with the console's label.
    let config_map: Value = serde_saphyr::from_str(&checked_in).unwrap();
    assert_eq!(
        config_map["metadata"]["labels"]["console.openshift.io/dashboard"],
        "true"
    );
    let embedded: Value =
        serde_json::from_str(config_map["data"]["preflight-gate.json"].as_str().unwrap()).unwrap();
    let grafana: Value = serde_json::from_str(&grafana_text()).unwrap();
    assert_eq!(embedded, grafana);
}

#[test]
fn every_panel_queries_metrics_the_gate_exports() {
    let families = exported_families(&exercised());
    let queries = queries();
    assert!(queries.len() >= 12, "{queries:?}");
    let used: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| {
            q.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("preflight_gate_"))
                .map(|w| w.strip_suffix("_bucket").unwrap_or(w).to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    for name in &used {
        assert!(
            families.contains(name),
            "a panel queries {name}, which the gate does not export"
        );
    }
    // The catalogue's headline series each have a panel.
    for wanted in [
        "preflight_gate_update_last_denied_timestamp_seconds",
        "preflight_gate_update_blocked",
        "preflight_gate_check_status",
        "preflight_gate_result_completion_timestamp_seconds",
        "preflight_gate_overrides_total",
        "preflight_gate_admission_reviews_total",
        "preflight_gate_tls_certificate_expiry_timestamp_seconds",
        "preflight_gate_results_watch_up",
    ] {
        assert!(used.contains(wanted), "no panel shows {wanted}");
    }
}
