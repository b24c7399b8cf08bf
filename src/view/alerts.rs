//! Alerts in the Prometheus `/api/v1/alerts` format, as an `alerts.json` in
//! a snapshot holds them and as Prometheus or Thanos answers, and in the
//! `/api/v1/rules` format a must-gather stores (`monitoring/alerts.json` in
//! 4.6 to 4.8, `monitoring/prometheus/rules.json` since 4.9): each alerting
//! rule with the alerts it has pending or firing.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::Deserialize;

use super::openshift::null_as_default;
use crate::model::text::{EXCERPT, clean, excerpt};

/// The name alerts go by among the kinds of a view (`ClusterView::unreadable`
/// says why they could not be read).
pub(crate) const KIND: &str = "Alert";

/// The label every alert of the gate's own PrometheusRule carries, its value
/// the rule's name (`deploy/monitoring/prometheusrule.yaml`; a test holds
/// every rule there to it). The alert checks leave such alerts out: they
/// report the gate's own findings, and counting them would let one failing
/// check keep every target blocked by its own alert.
pub const OWN_RULE_LABEL: &str = "preflight_gate_rule";

/// The response of `/api/v1/alerts`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AlertsResponse {
    pub status: String,
    pub data: AlertsData,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct AlertsData {
    #[serde(deserialize_with = "null_as_default")]
    pub alerts: Vec<Alert>,
}

/// A Prometheus answer in either format, as a snapshot file holds it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AnyResponse {
    status: String,
    data: AnyData,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct AnyData {
    alerts: Option<Vec<Alert>>,
    groups: Option<Vec<RuleGroup>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RuleGroup {
    #[serde(deserialize_with = "null_as_default")]
    rules: Vec<Rule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Rule {
    #[serde(rename = "type")]
    type_: String,
    name: String,
    #[serde(deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    annotations: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    alerts: Vec<Alert>,
    last_evaluation: Option<Timestamp>,
}

/// Alerts read from a snapshot file, and the newest time the file records
/// (an alert's `activeAt`, a rule's last evaluation).
#[derive(Debug, Default)]
pub(crate) struct AlertFile {
    pub alerts: Vec<Alert>,
    pub newest: Option<Timestamp>,
}

/// Reads a Prometheus `/api/v1/alerts` or `/api/v1/rules` response.
pub(crate) fn read_alert_file(text: &str) -> Result<AlertFile, String> {
    let response: AnyResponse = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if response.status != "success" {
        return Err(
            "not a successful Prometheus /api/v1/alerts or /api/v1/rules response".to_owned(),
        );
    }
    let newest_active = |alerts: &[Alert]| alerts.iter().filter_map(|a| a.active_at).max();
    match response.data {
        AnyData {
            alerts: Some(alerts),
            ..
        } => Ok(AlertFile {
            newest: newest_active(&alerts),
            alerts,
        }),
        AnyData {
            groups: Some(groups),
            ..
        } => {
            let mut file = AlertFile {
                ..AlertFile::default()
            };
            for rule in groups.into_iter().flat_map(|g| g.rules) {
                file.newest = file.newest.max(rule.last_evaluation);
                if rule.type_ != "alerting" {
                    continue;
                }
                file.newest = file.newest.max(newest_active(&rule.alerts));
                for mut alert in rule.alerts {
                    // An alert carries its rule's labels and annotations;
                    // fill in any a writer left out.
                    alert
                        .labels
                        .entry("alertname".to_owned())
                        .or_insert_with(|| rule.name.clone());
                    for (k, v) in &rule.labels {
                        alert.labels.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                    for (k, v) in &rule.annotations {
                        alert
                            .annotations
                            .entry(k.clone())
                            .or_insert_with(|| v.clone());
                    }
                    file.alerts.push(alert);
                }
            }
            Ok(file)
        }
        _ => Err("a Prometheus response with neither data.alerts nor data.groups".to_owned()),
    }
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

    /// Whether the alert comes from the gate's own PrometheusRule.
    pub fn is_the_gates_own(&self) -> bool {
        !self.label(OWN_RULE_LABEL).is_empty()
    }

    /// Firing before pending before anything else, when one alert was read twice.
    fn rank(&self) -> u8 {
        match self.state.as_str() {
            "firing" => 0,
            "pending" => 1,
            _ => 2,
        }
    }

    /// The alert and what it is about, e.g. `KubeNodeNotReady (node=worker-1)`,
    /// each label cleaned as the alert's own words are.
    fn about(&self) -> String {
        let about: Vec<String> = ["namespace", "name", "node", "pod", "poddisruptionbudget"]
            .iter()
            .filter_map(|k| {
                self.labels
                    .get(*k)
                    .map(|v| format!("{k}={}", clean(v, 120)))
            })
            .collect();
        let name = clean(self.name(), 120);
        if about.is_empty() {
            name
        } else {
            format!("{name} ({})", about.join(", "))
        }
    }

    /// The alert's `runbook_url` annotation, when it has one.
    pub(crate) fn runbook(&self) -> Option<&str> {
        self.annotations
            .get("runbook_url")
            .map(|u| u.trim())
            .filter(|u| !u.is_empty())
    }

    /// The alert as a finding quotes it: what it is about, its own words
    /// (its `summary`, then its `description` or older `message`, each
    /// once, cleaned and cut to an excerpt) and its `runbook_url`, e.g.
    /// `PodDisruptionBudgetAtLimit (namespace=shop): The pod disruption
    /// budget is preventing further disruption to pods. The number of
    /// current healthy pods is equal to the desired healthy pods. Runbook:
    /// https://...`.
    pub(crate) fn quote(&self) -> String {
        let mut said: Vec<String> = Vec::new();
        for key in ["summary", "description", "message"] {
            let Some(text) = self.annotations.get(key).filter(|t| !t.trim().is_empty()) else {
                continue;
            };
            // Cleaned first, so that a description's lines run on.
            let mut text = excerpt(Some(&clean(text, 4 * EXCERPT)), EXCERPT);
            if said.iter().any(|s| s.contains(text.trim_end_matches('.'))) {
                continue;
            }
            if !text.ends_with(['.', '!', '?', '…']) {
                text.push('.');
            }
            said.push(text);
        }
        let mut quote = self.about();
        if said.is_empty() {
            quote.push_str(": the alert has no summary or description");
        } else {
            quote.push_str(": ");
            quote.push_str(&said.join(" "));
        }
        if let Some(url) = self.runbook() {
            quote.push_str(" Runbook: ");
            quote.push_str(&clean(url, 200));
        }
        quote
    }
}

/// Keeps each alert (by its labels) once, in the most urgent state it was
/// read in: a must-gather may hold the same alerts in more than one file.
pub(crate) fn dedup(alerts: &mut Vec<Alert>) {
    alerts.sort_by(|a, b| a.labels.cmp(&b.labels).then(a.rank().cmp(&b.rank())));
    alerts.dedup_by(|later, first| later.labels == first.labels);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_format_gives_each_alert_its_rule_labels_and_state() {
        let text = r#"{"status":"success","data":{"groups":[{"name":"etcd","rules":[
            {"type":"alerting","name":"etcdNoLeader","state":"firing",
             "labels":{"severity":"critical"},"annotations":{"summary":"no leader"},
             "lastEvaluation":"2021-06-10T12:59:30Z",
             "alerts":[{"labels":{"namespace":"openshift-etcd"},"state":"firing","activeAt":"2021-06-10T12:40:00Z"}]},
            {"type":"recording","name":"x:sum","lastEvaluation":"2021-06-10T12:59:45Z"}]}]}}"#;
        let file = read_alert_file(text).unwrap();
        assert_eq!(file.alerts.len(), 1);
        let alert = &file.alerts[0];
        assert_eq!(
            (alert.name(), alert.severity(), alert.state.as_str()),
            ("etcdNoLeader", "critical", "firing")
        );
        assert_eq!(alert.annotations["summary"], "no leader");
        assert_eq!(file.newest, Some("2021-06-10T12:59:45Z".parse().unwrap()));
    }

    #[test]
    fn an_alert_read_twice_is_kept_once_in_its_most_urgent_state() {
        let alert = |state: &str| Alert {
            labels: [("alertname".to_owned(), "X".to_owned())].into(),
            state: state.to_owned(),
            ..Alert::default()
        };
        let mut alerts = vec![alert("pending"), alert("firing"), alert("pending")];
        dedup(&mut alerts);
        assert_eq!(alerts.len(), 1);
        assert!(alerts[0].firing());
    }

    fn annotated(annotations: &[(&str, &str)]) -> Alert {
        Alert {
            labels: [
                (
                    "alertname".to_owned(),
                    "PodDisruptionBudgetAtLimit".to_owned(),
                ),
                ("namespace".to_owned(), "shop".to_owned()),
            ]
            .into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            state: "firing".to_owned(),
            ..Alert::default()
        }
    }

    #[rstest::rstest]
    #[case::summary_description_runbook(
        &[("summary", "The pod disruption budget is preventing further disruption to pods."),
          ("description", "The number of current healthy pods is equal to the desired healthy pods"),
          ("runbook_url", "https://runbooks.example/PodDisruptionBudgetAtLimit.md")],
        "PodDisruptionBudgetAtLimit (namespace=shop): The pod disruption budget is preventing further disruption to pods. The number of current healthy pods is equal to the desired healthy pods. Runbook: https://runbooks.example/PodDisruptionBudgetAtLimit.md"
    )]
    #[case::a_message_instead(&[("message", "Budget at its limit")],
        "PodDisruptionBudgetAtLimit (namespace=shop): Budget at its limit.")]
    #[case::said_twice_is_quoted_once(&[("summary", "At its limit."), ("description", "At its limit")],
        "PodDisruptionBudgetAtLimit (namespace=shop): At its limit.")]
    #[case::nothing_said(&[], "PodDisruptionBudgetAtLimit (namespace=shop): the alert has no summary or description")]
    #[case::control_characters_go(&[("summary", "At\u{1b}[31m its\nlimit")],
        "PodDisruptionBudgetAtLimit (namespace=shop): At [31m its limit.")]
    #[case::bidi_and_zero_width_characters_go(
        &[("summary", "Budget \u{202e}timil sti ta\u{202c} ok"),
          ("description", "At\u{200b} its\u{2066} limit\u{2069}\u{feff}\u{200d}"),
          ("runbook_url", "https://runbooks.example/\u{202e}x")],
        "PodDisruptionBudgetAtLimit (namespace=shop): Budget timil sti ta ok. At its limit. Runbook: https://runbooks.example/x")]
    fn an_alert_is_quoted_in_its_own_words_with_its_runbook(
        #[case] annotations: &[(&str, &str)],
        #[case] quoted: &str,
    ) {
        assert_eq!(annotated(annotations).quote(), quoted);
    }

    #[test]
    fn format_characters_in_labels_go_too() {
        let mut alert = annotated(&[("summary", "At its limit.")]);
        alert.labels.insert(
            "alertname".to_owned(),
            "PodDisruption\u{202e}BudgetAtLimit".to_owned(),
        );
        alert
            .labels
            .insert("namespace".to_owned(), "sh\u{200b}op\u{2067}".to_owned());
        assert_eq!(
            alert.quote(),
            "PodDisruptionBudgetAtLimit (namespace=shop): At its limit."
        );
    }

    #[test]
    fn a_long_description_is_cut_to_an_excerpt() {
        let long = "word ".repeat(200);
        let quote = annotated(&[("description", &long)]).quote();
        assert!(quote.chars().count() < 300, "{quote}");
        assert!(quote.contains('…'), "{quote}");
    }

    #[test]
    fn other_json_is_refused_with_a_reason() {
        assert!(read_alert_file(r#"{"status":"error"}"#).is_err());
        assert!(
            read_alert_file(r#"{"status":"success","data":{}}"#)
                .unwrap_err()
                .contains("neither")
        );
    }
}
