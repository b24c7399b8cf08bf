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

/// Which namespaces' alerts count for the alert checks. OpenShift's
/// user-workload monitoring stamps every alert of a user-defined rule with
/// the namespace of its PrometheusRule, tenants cannot make `openshift-*`
/// namespaces, and the platform's rules about workloads look only at
/// `openshift-*`, `kube-*` and `default` (cluster-monitoring-operator's
/// `mixinNamespaceSelector`). So an alert counts when it has no `namespace`
/// label or one of those, or one the administrator adds
/// (`--alert-namespaces`); any other is a tenant's, which must not block
/// the cluster's update. The platform's PodDisruptionBudget alerts name the
/// budget's namespace, a tenant's too: PodDisruptionBudgetsAllowDrain
/// and DrainsComplete read the budgets themselves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlertNamespaces {
    /// Globs (`*` any run of characters) beside the platform's.
    added: Vec<String>,
}

/// The platform's namespaces, as globs.
pub const PLATFORM_NAMESPACES: [&str; 3] = ["openshift-*", "kube-*", "default"];

impl AlertNamespaces {
    /// The platform's namespaces and `added` (namespace names or globs with
    /// `*`); refused when one is neither.
    pub fn new(added: &[String]) -> Result<Self, String> {
        let added: Vec<String> = added
            .iter()
            .map(|g| g.trim().to_owned())
            .filter(|g| !g.is_empty())
            .collect();
        if let Some(bad) = added.iter().find(|g| {
            g.len() > 63
                || !g
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '*')
        }) {
            return Err(format!(
                "{bad:?} is not a namespace or a glob of one (lower-case letters, digits, '-' and '*')"
            ));
        }
        Ok(Self { added })
    }

    /// Whether `alert` counts: no namespace, or one of the platform's or
    /// the administrator's.
    pub fn counts(&self, alert: &Alert) -> bool {
        let Some(namespace) = alert.labels.get("namespace").filter(|n| !n.is_empty()) else {
            return true;
        };
        PLATFORM_NAMESPACES
            .iter()
            .copied()
            .chain(self.added.iter().map(String::as_str))
            .any(|glob| glob_matches(glob, namespace))
    }

    /// The namespaces that count, for a finding: `openshift-*, kube-*,
    /// default` and the added ones.
    pub fn describe(&self) -> String {
        PLATFORM_NAMESPACES
            .iter()
            .copied()
            .chain(self.added.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether `text` matches `glob`, whose `*` stands for any run of
/// characters, empty included.
fn glob_matches(glob: &str, text: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

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

    fn in_namespace(namespace: Option<&str>) -> Alert {
        let mut alert = annotated(&[]);
        match namespace {
            Some(ns) => alert.labels.insert("namespace".to_owned(), ns.to_owned()),
            None => alert.labels.remove("namespace"),
        };
        alert
    }

    #[rstest::rstest]
    #[case::no_namespace(None, &[], true)]
    #[case::empty_namespace(Some(""), &[], true)]
    #[case::openshift(Some("openshift-etcd"), &[], true)]
    #[case::kube(Some("kube-system"), &[], true)]
    #[case::default(Some("default"), &[], true)]
    #[case::a_tenant(Some("shop"), &[], false)]
    #[case::openshift_without_the_dash(Some("openshiftx"), &[], false)]
    #[case::default_as_a_prefix(Some("defaults"), &[], false)]
    #[case::a_tenant_added_by_name(Some("shop"), &["shop"], true)]
    #[case::added_by_glob(Some("storage-ceph"), &["storage-*"], true)]
    #[case::a_glob_in_the_middle(Some("team-a-infra"), &["team-*-infra"], true)]
    #[case::a_glob_that_does_not_match(Some("team-a-apps"), &["team-*-infra"], false)]
    #[case::a_name_is_whole(Some("shop-2"), &["shop"], false)]
    fn an_alert_counts_by_its_namespace(
        #[case] namespace: Option<&str>,
        #[case] added: &[&str],
        #[case] counts: bool,
    ) {
        let added: Vec<String> = added.iter().map(|s| s.to_string()).collect();
        let namespaces = AlertNamespaces::new(&added).unwrap();
        assert_eq!(namespaces.counts(&in_namespace(namespace)), counts);
    }

    /// Alerts captured from a real cluster (the oc project's test data):
    /// every one is the platform's, and every one still counts.
    #[test]
    fn a_real_clusters_alerts_all_count() {
        let file = read_alert_file(include_str!(
            "../../tests/data/real-clusters/4.15.0-ec2-unavailable-mco-20m/alerts.json"
        ))
        .unwrap();
        assert_eq!(file.alerts.len(), 15);
        let namespaces = AlertNamespaces::default();
        let left_out: Vec<&str> = file
            .alerts
            .iter()
            .filter(|a| !namespaces.counts(a))
            .map(|a| a.name())
            .collect();
        assert!(left_out.is_empty(), "{left_out:?}");
    }

    #[test]
    fn an_added_namespace_must_be_a_namespace_or_a_glob() {
        assert!(AlertNamespaces::new(&["Shop".into()]).is_err());
        assert!(AlertNamespaces::new(&["shop,x".into()]).is_err());
        assert!(AlertNamespaces::new(&["a".repeat(64)]).is_err());
        let ok = AlertNamespaces::new(&["storage-*".into(), " ".into()]).unwrap();
        assert_eq!(ok.describe(), "openshift-*, kube-*, default, storage-*");
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
