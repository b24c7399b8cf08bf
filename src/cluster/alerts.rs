//! Alerts in the Prometheus `/api/v1/alerts` format, as an `alerts.json` in
//! a snapshot holds them and as Prometheus or Thanos answers.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;

use super::openshift::null_as_default;

/// The response of `/api/v1/alerts`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AlertsResponse {
    pub status: String,
    pub data: AlertsData,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AlertsData {
    #[serde(deserialize_with = "null_as_default")]
    pub alerts: Vec<Alert>,
}

/// One alert.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Alert {
    #[serde(deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
    /// `firing`, `pending` or `inactive`.
    pub state: String,
    pub active_at: Option<Timestamp>,
}

impl Alert {
    pub fn name(&self) -> &str {
        self.label("alertname")
    }

    pub fn severity(&self) -> &str {
        self.label("severity")
    }

    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }

    pub fn firing(&self) -> bool {
        self.state == "firing"
    }

    /// The alert and what it is about, e.g. `KubeNodeNotReady (node=worker-1)`.
    pub fn describe(&self) -> String {
        let about: Vec<String> = ["namespace", "name", "node", "pod", "poddisruptionbudget"]
            .iter()
            .filter_map(|k| self.labels.get(*k).map(|v| format!("{k}={v}")))
            .collect();
        let summary = self
            .annotations
            .get("summary")
            .or_else(|| self.annotations.get("message"))
            .map(|s| format!(": {s}"))
            .unwrap_or_default();
        if about.is_empty() {
            format!("{}{summary}", self.name())
        } else {
            format!("{} ({}){summary}", self.name(), about.join(", "))
        }
    }
}
