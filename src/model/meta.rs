//! Object metadata and status conditions, as every lean type reads them,
//! and the serde helper that reads `null` as empty.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Deserializer};

pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
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
    pub uid: String,
    /// Bumped by the API server on every change of the spec.
    pub generation: Option<i64>,
    /// The API server's version of the object: every replica's watch
    /// shows one stored write with the same one.
    pub resource_version: Option<String>,
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
    /// Set by the kubelet on Node conditions: the freshest clock in a
    /// snapshot.
    pub last_heartbeat_time: Option<Timestamp>,
}

/// The newest time among conditions, for the time of a snapshot's data.
pub fn newest_condition_time(conditions: &[Condition]) -> Option<Timestamp> {
    conditions
        .iter()
        .flat_map(|c| [c.last_transition_time, c.last_heartbeat_time])
        .flatten()
        .max()
}

/// Looks up a condition by type.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    condition(conditions, type_).is_some_and(|c| c.status == "True")
}
