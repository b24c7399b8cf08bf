//! Where and how check Jobs run: the one part of `jobs` that the release's
//! own checks (`release_checks`) share.

use std::time::Duration;

/// Where and how check Jobs run.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSettings {
    /// Namespace of the Jobs; never an operator's, so net-new operators are covered.
    pub namespace: String,
    /// ServiceAccount of the check pods, bound to a read-only ClusterRole.
    pub service_account: String,
    /// How long a pod may stay unscheduled (or a Job without a pod) before
    /// the check is an Error.
    pub schedule_timeout: Duration,
    /// Finished Jobs are deleted by the Job controller after this.
    pub ttl_after_finished: Duration,
    /// How often a running Job is looked at.
    pub poll: Duration,
    /// Run the checks the target release declares (an extraction pod per
    /// release digest). Off in `Default`, which tests and benchmarks use;
    /// the `serve` flag turns it on.
    pub release_checks: bool,
    /// Releases whose pods may run without a verified signature, by
    /// digest (`--trusted-releases`).
    pub trusted_releases: Vec<String>,
    /// The checks a release declares that an administrator allows an API
    /// token (`--release-checks-api-access`): a release's word
    /// (`preflight.dev/needs-api`) is not enough.
    pub release_api_access: Vec<String>,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            namespace: "preflight-gate".into(),
            service_account: "preflight-check".into(),
            schedule_timeout: Duration::from_secs(120),
            ttl_after_finished: Duration::from_secs(3600),
            poll: Duration::from_secs(1),
            release_checks: false,
            trusted_releases: Vec::new(),
            release_api_access: Vec::new(),
        }
    }
}
