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
