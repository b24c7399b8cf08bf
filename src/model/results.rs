//! The `UpdatePreflight` custom resource: one object per target release image,
//! both the request for a preflight run and the record of its result.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of an `UpdatePreflight`: which release to check.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "preflight.dev",
    version = "v1alpha1",
    kind = "UpdatePreflight",
    shortname = "upf",
    status = "UpdatePreflightStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Failing","type":"integer","jsonPath":".status.summary.failing"}"#,
    printcolumn = r#"{"name":"Result-Age","type":"date","jsonPath":".status.completionTime"}"#,
    printcolumn = r#"{"name":"Image","type":"string","priority":1,"jsonPath":".spec.image"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePreflightSpec {
    /// Pullspec of the target release image, preferably by digest.
    pub image: String,
    /// Version of the target release (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Names of the checks to run; all applicable checks when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
}

/// Observed state of a preflight run. Only the gate's service account writes it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePreflightStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The `metadata.generation` that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The `preflight.dev/requested-at` stamp the last run answered: each
    /// new stamp asks for one run, whatever time it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_request: Option<String>,
    /// The number of this run of the object, counted by the controller
    /// from 1 and signed with the result: an older run's status written
    /// back is told from the newest by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<CheckResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The update plan the run computed from the cluster it read
    /// (docs/plan.md), bounded; none when the run could not read the
    /// cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// How long the control plane took once the cluster completed the
    /// update to this release, against what the plan predicted; written
    /// once, when the controller sees the completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_duration: Option<UpdateDuration>,
    /// The gate's signature of this result: HMAC-SHA256, under the key in
    /// its namespace's Secret `preflight-gate-result-key`, of what the
    /// webhook decides by (`model::vouch`). A finished run without a
    /// signature that verifies is not the gate's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The update plan of a run (docs/plan.md), bounded in size: its figures,
/// each pool's, the first batches of each pool and every batch that can
/// never drain, each in full; counts for the rest. Durations are in
/// seconds.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    /// The time of the data it was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_at: Option<Time>,
    /// The whole update, until every node of a pool that updates runs the
    /// target: the control plane, then the slowest other pool.
    #[serde(default)]
    pub p50_seconds: u64,
    #[serde(default)]
    pub p90_seconds: u64,
    #[serde(default)]
    pub control_plane: ControlPlaneSummary,
    /// The master pool first, then by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolSummary>,
    /// Pools left out of `pools`.
    #[serde(default)]
    pub more_pools: u32,
    /// The first batches of each pool that updates, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<BatchSummary>,
    /// Batches of pools that update left out of `batches`.
    #[serde(default)]
    pub more_batches: u32,
    /// Batches that can never drain, each naming its pool, batch, node
    /// and PodDisruptionBudget.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
    /// Blockers left out of `blockers`.
    #[serde(default)]
    pub more_blockers: u32,
    /// Batches whose drain waits for a PodDisruptionBudget.
    #[serde(default)]
    pub waits: u32,
    /// What will hold the update up, or keep it from finishing.
    #[serde(default)]
    pub warnings: u32,
    /// What the plan cannot know from the data.
    #[serde(default)]
    pub unknowns: u32,
}

/// The control plane's part of the plan.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneSummary {
    #[serde(default)]
    pub p50_seconds: u64,
    #[serde(default)]
    pub p90_seconds: u64,
    /// `history` (the cluster's own completed updates) or `documented`
    /// (Red Hat's documented range).
    #[serde(default, rename = "source")]
    pub origin: String,
    /// How many completed updates it was computed from.
    #[serde(default)]
    pub samples: u32,
    /// What it was computed from, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub basis: String,
}

/// One MachineConfigPool's rollout in the plan.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolSummary {
    pub name: String,
    #[serde(default)]
    pub nodes: u32,
    /// Whether the update rolls it now (it is not paused).
    #[serde(default)]
    pub updates: bool,
    #[serde(default)]
    pub batches: u32,
    /// Nodes updated at once.
    #[serde(default)]
    pub batch_size: u32,
    /// Its rollout, batch after batch.
    #[serde(default)]
    pub seconds: u64,
    /// Some batch can never drain.
    #[serde(default)]
    pub blocked: bool,
}

/// One batch of the plan: nodes that update together.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BatchSummary {
    pub pool: String,
    /// From 1.
    pub number: u32,
    /// The first of its nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// All of its nodes.
    #[serde(default)]
    pub node_count: u32,
    /// Pods its drains evict; none without Pod data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evictions: Option<u32>,
    /// What holds its drain: `PDB <namespace>/<name>: never drains`,
    /// `waits 4m`, `waits, how long unknown`, `unknown`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// Its slowest node.
    #[serde(default)]
    pub seconds: u64,
}

/// An update the cluster completed to this release, against the plan's
/// prediction for it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateDuration {
    /// `status.history`'s `startedTime` and `completionTime` of the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// `completionTime - startedTime`: the control plane, master pool
    /// included.
    #[serde(default)]
    pub control_plane_seconds: u64,
    /// The control plane's P50 and P90 the plan predicted.
    #[serde(default)]
    pub predicted_p50_seconds: u64,
    #[serde(default)]
    pub predicted_p90_seconds: u64,
    /// The prediction's source: `history` or `documented`.
    #[serde(default, rename = "source")]
    pub origin: String,
}

/// A duration as a person reads it: `1h05m`, `12m`, `45s`. The plan, the
/// report and the webhook's line all say durations this way.
pub fn duration_words(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        _ => format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

/// Lifecycle of a preflight run.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Passed,
    Failed,
    Error,
}

/// Whether a failing check blocks the update or only warns.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum Severity {
    #[default]
    Blocking,
    Warning,
}

/// What one check concluded.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Error,
    Skipped,
}

/// How an errored check counts: as a failure (the default) or as a pass.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum FailurePolicy {
    #[default]
    FailClosed,
    FailOpen,
}

/// Most characters of a result's message kept where it enters.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// Most characters of a risk's or an item's name kept where it enters.
pub const MAX_NAME_CHARS: usize = 253;

/// The result of one check in one run.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// CamelCase check name, acceptable through `acceptRisks`, beside the
    /// names in `risks`.
    pub name: String,
    #[serde(default)]
    pub severity: Severity,
    pub outcome: Outcome,
    #[serde(default)]
    pub message: String,
    /// The names OpenShift gives what this result is about:
    /// `oc adm upgrade recommend`'s issue names (`Failing`, an alert's
    /// name) and the cluster-version operator's risk names
    /// (`ClusterOperatorUpgradeable-<name>`, a conditional update's risks).
    /// Accepting them, like accepting the check's name, accepts the result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risks: Vec<String>,
    /// The whole list the message shortens ("a, b and 4 more"), so that
    /// programs see every item; empty when the message names them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
    /// What the result is about, by name (a node, an operator, a pool),
    /// the same from run to run: with `risks`, its findings, which an
    /// accept records ([`super::standing::BoundAccept`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    #[serde(
        default,
        rename = "remediationURL",
        skip_serializing_if = "Option::is_none"
    )]
    pub remediation_url: Option<String>,
    /// How long the check took, e.g. `1.2s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// How an error of this check counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<FailurePolicy>,
}

impl CheckResult {
    /// What the result found: the names it carries and what it is about.
    /// An accept records them, and asks again when one is new
    /// ([`super::standing::BoundAccept`]).
    pub fn findings(&self) -> std::collections::BTreeSet<&str> {
        self.risks
            .iter()
            .chain(&self.subjects)
            .map(String::as_str)
            .collect()
    }

    /// The result as it is stored, cleaned where it enters (trust, third
    /// pass, L4): its message, risks and items lose control and format
    /// characters (a message keeps its line breaks) and are bounded; its
    /// remediation link is kept only as an http(s) URL with a host and no
    /// credentials, in the form it parses to, and otherwise dropped, the
    /// message saying why. Every result the gate writes passes here, the
    /// built-in checks' and the check Jobs' alike.
    pub fn entered(mut self) -> Self {
        use super::text;
        self.message = text::entered(&self.message, MAX_MESSAGE_CHARS);
        for name in self
            .risks
            .iter_mut()
            .chain(self.items.iter_mut())
            .chain(self.subjects.iter_mut())
        {
            *name = text::clean(name, MAX_NAME_CHARS);
        }
        if let Some(url) = self.remediation_url.take() {
            match text::http_link(&url) {
                Ok(link) => self.remediation_url = Some(link),
                Err(why) => {
                    let _ = std::fmt::Write::write_fmt(
                        &mut self.message,
                        format_args!(" (its remediation link was dropped: {why})"),
                    );
                }
            }
        }
        self
    }

    /// A result with a message and nothing else: no link, no duration, the
    /// default failure policy.
    pub fn new(
        name: impl Into<String>,
        severity: Severity,
        outcome: Outcome,
        message: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            severity,
            outcome,
            message: message.into(),
            risks: Vec::new(),
            items: Vec::new(),
            subjects: Vec::new(),
            remediation_url: None,
            duration: None,
            failure_policy: None,
        }
    }
}

/// The form of a check name: `^[A-Z][A-Za-z0-9.-]{0,62}$`, a word that
/// `acceptRisks`, `preflight.dev/accept`, a label value and a shell take
/// as it is.
pub const CHECK_NAME_PATTERN: &str = "^[A-Z][A-Za-z0-9.-]{0,62}$";

/// The longest check name, in characters.
pub const MAX_CHECK_NAME: usize = 63;

/// A name that is not a check name ([`CHECK_NAME_PATTERN`]), and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a check name: {why} (a check name matches {CHECK_NAME_PATTERN})", crate::model::text::escaped(.name, 80))]
pub struct InvalidCheckName {
    pub name: String,
    pub why: String,
}

/// Whether `name` is a check name ([`CHECK_NAME_PATTERN`]). Names are
/// checked where they enter (a release's declared checks, PreflightChecks,
/// results read back) and again where they are printed.
pub fn check_name(name: &str) -> Result<(), InvalidCheckName> {
    let refuse = |why: String| {
        Err(InvalidCheckName {
            name: name.to_owned(),
            why,
        })
    };
    let count = name.chars().count();
    match name.chars().next() {
        None => return refuse("it is empty".to_owned()),
        Some(c) if !c.is_ascii_uppercase() => {
            return refuse(format!(
                "it starts with {}, not a capital letter A-Z",
                crate::model::text::escaped(&c.to_string(), 1)
            ));
        }
        Some(_) => {}
    }
    if count > MAX_CHECK_NAME {
        return refuse(format!(
            "it has {count} characters, more than {MAX_CHECK_NAME}"
        ));
    }
    if let Some((i, c)) = name
        .chars()
        .enumerate()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-')))
    {
        return refuse(format!(
            "character {} is {}, not a letter, digit, '.' or '-'",
            i + 1,
            crate::model::text::escaped(&c.to_string(), 1)
        ));
    }
    Ok(())
}

/// A check name as a message shows it: as it is when it is one, else
/// escaped and marked, so that no text a check chose reaches a terminal as
/// a name.
pub fn shown_check_name(name: &str) -> String {
    match check_name(name) {
        Ok(()) => name.to_owned(),
        Err(_) => format!(
            "{} (not a check name)",
            crate::model::text::escaped(name, MAX_CHECK_NAME)
        ),
    }
}

/// Counts over `results`, for printer columns and a quick look.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub passed: u32,
    /// Blocking checks that failed or errored.
    pub failing: u32,
    pub warnings: u32,
    pub errored: u32,
    pub skipped: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trust, third pass, L4: a result is cleaned where it enters, not
    /// only where it is printed, so every reader of `status.results` (oc,
    /// the console, a dashboard) gets the same clean words.
    #[test]
    fn a_result_is_cleaned_where_it_enters() {
        let mut raw = CheckResult::new(
            "Driver",
            Severity::Blocking,
            Outcome::Fail,
            "driver \u{1b}[31mtoo old\u{1b}[0m\u{7}\n\u{202e}see\tbelow\u{0}",
        );
        raw.risks = vec!["Risk\u{1b}[2J".into()];
        raw.items = vec!["node-a\u{202e}".into()];
        raw.remediation_url = Some("https://docs.example.com/a b?x=\u{202e}".into());
        let entered = raw.entered();
        assert_eq!(entered.message, "driver [31mtoo old[0m\nsee below");
        assert_eq!(entered.risks, ["Risk [2J"]);
        assert_eq!(entered.items, ["node-a"]);
        assert_eq!(
            entered.remediation_url.as_deref(),
            Some("https://docs.example.com/a%20b?x=%E2%80%AE")
        );

        let long = CheckResult::new("Long", Severity::Warning, Outcome::Fail, "x".repeat(5000));
        let message = long.entered().message;
        assert!(message.starts_with(&"x".repeat(MAX_MESSAGE_CHARS)));
        assert!(
            message.ends_with("… (904 more characters cut)"),
            "{message}"
        );

        for (url, why) in [
            ("javascript:alert(1)", "a javascript link, not http(s)"),
            (
                "https://user:secret@docs.example.com/",
                "a link carrying credentials",
            ),
            (
                "docs.example.com/x",
                "not a URL: relative URL without a base",
            ),
        ] {
            let mut result = CheckResult::new("Link", Severity::Warning, Outcome::Fail, "see");
            result.remediation_url = Some(url.into());
            let entered = result.entered();
            assert_eq!(entered.remediation_url, None, "{url}");
            assert_eq!(
                entered.message,
                format!("see (its remediation link was dropped: {why})")
            );
        }
    }

    use super::{check_name, shown_check_name};
    use rstest::rstest;

    #[rstest]
    #[case::plain("NodesReady")]
    #[case::with_dots_and_dashes("Vendor.Storage-Check2")]
    #[case::one_letter("A")]
    #[case::longest("A234567890123456789012345678901234567890123456789012345678901x3")]
    fn check_names(#[case] name: &str) {
        assert_eq!(check_name(name), Ok(()));
        assert_eq!(shown_check_name(name), name);
    }

    #[rstest]
    #[case::empty("", "\"\" is not a check name: it is empty")]
    #[case::shell(
        "ReleaseCheck;touch${IFS}x;#",
        "\"ReleaseCheck;touch${IFS}x;#\" is not a check name: character 13 is \";\", not a letter, digit, '.' or '-'"
    )]
    #[case::lower_case("nodesReady", "it starts with \"n\", not a capital letter A-Z")]
    #[case::space("Nodes Ready", "character 6 is \" \"")]
    #[case::bidi(
        "Nodes\u{202e}Ready",
        "\"Nodes\\u{202e}Ready\" is not a check name: character 6 is \"\\u{202e}\""
    )]
    #[case::zero_width("\u{200b}Nodes", "it starts with \"\\u{200b}\"")]
    #[case::too_long(
        "A2345678901234567890123456789012345678901234567890123456789012x3",
        "it has 64 characters, more than 63"
    )]
    #[case::not_ascii("NodesRéady", "character 7 is \"\\u{e9}\"")]
    fn names_that_are_not_check_names_are_refused_saying_why(
        #[case] name: &str,
        #[case] says: &str,
    ) {
        let refused = check_name(name).unwrap_err().to_string();
        assert!(refused.contains(says), "{refused}");
        assert!(
            refused.ends_with("(a check name matches ^[A-Z][A-Za-z0-9.-]{0,62}$)"),
            "{refused}"
        );
        assert!(
            shown_check_name(name).ends_with(" (not a check name)"),
            "{}",
            shown_check_name(name)
        );
        assert!(!refused.contains(['\u{202e}', '\u{200b}']), "{refused}");
    }
}
