//! A read-only view of a cluster, loaded once per preflight run from the API
//! server (`live`) or from a snapshot directory (`snapshot`). Checks read
//! only this.

use super::openshift::{ClusterOperator, ClusterVersion};

/// Everything the checks read.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub cluster_version: Option<ClusterVersion>,
    pub cluster_operators: Vec<ClusterOperator>,
}

impl ClusterView {
    /// Adds one object, by kind; objects of other kinds are ignored.
    /// Returns whether the object was kept.
    pub fn add(
        &mut self,
        kind: &str,
        object: serde_json::Value,
    ) -> Result<bool, serde_json::Error> {
        match kind {
            "ClusterVersion" => {
                let cv: ClusterVersion = serde_json::from_value(object)?;
                // The CVO acts only on `version`.
                if cv.metadata.name == "version" || self.cluster_version.is_none() {
                    self.cluster_version = Some(cv);
                }
            }
            "ClusterOperator" => self.cluster_operators.push(serde_json::from_value(object)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}
