//! The OpenShift objects checks read, as lean serde types: only the fields
//! some check uses, so a large cluster fits in memory.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Deserializer};

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    pub namespace: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
    pub creation_timestamp: Option<Timestamp>,
}

/// A status condition, as every OpenShift and Kubernetes object writes it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<Timestamp>,
}

/// Looks up a condition by type.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// `config.openshift.io/v1` ClusterVersion, as checks read it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterVersion {
    pub metadata: Metadata,
    pub spec: ClusterVersionSpec,
    pub status: ClusterVersionStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterVersionSpec {
    pub channel: Option<String>,
    pub desired_update: Option<Release>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClusterVersionStatus {
    pub desired: Release,
    #[serde(deserialize_with = "null_as_default")]
    pub history: Vec<UpdateHistory>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    #[serde(deserialize_with = "null_as_default")]
    pub available_updates: Vec<Release>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditional_updates: Vec<ConditionalUpdate>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default)]
pub struct Release {
    pub version: String,
    pub image: String,
    pub url: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateHistory {
    pub state: String,
    pub version: String,
    pub image: String,
    pub started_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConditionalUpdate {
    pub release: Release,
    #[serde(deserialize_with = "null_as_default")]
    pub risks: Vec<Risk>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Risk {
    pub name: String,
    pub message: String,
    pub url: String,
}

impl ClusterVersion {
    /// The version the cluster runs or is moving to (`status.desired`).
    pub fn desired_version(&self) -> Option<crate::release::Version> {
        crate::release::Version::parse(&self.status.desired.version)
    }

    /// The newest completed version in the history.
    pub fn completed_version(&self) -> Option<crate::release::Version> {
        self.status
            .history
            .iter()
            .find(|h| h.state == "Completed")
            .and_then(|h| crate::release::Version::parse(&h.version))
    }
}

/// `config.openshift.io/v1` ClusterOperator.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterOperator {
    pub metadata: Metadata,
    pub status: ClusterOperatorStatus,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterOperatorStatus {
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}
