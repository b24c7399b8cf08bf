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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<CheckResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
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
