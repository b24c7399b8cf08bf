//! The ground floor: the gate's data and its pure rules, which every layer
//! above reads and none below exists. No tokio, no API client, no HTTP, and
//! no clock: a caller passes the time in.
//!
//! - [`release`]: a release's identity ([`ReleaseKey`]) and OpenShift's
//!   version ordering ([`Version`]);
//! - [`cluster_version`]: the `ClusterVersion` the gate reads, and the one
//!   target resolver (`spec.desiredUpdate` or a name given on the command
//!   line, to a [`Target`]);
//! - [`results`] and [`preflight_check`]: the `UpdatePreflight` and
//!   `PreflightCheck` APIs;
//! - [`finding`]: what one check concluded, and [`grace`]: how long a
//!   cluster in motion may be in a state before it counts;
//! - [`standing`]: how each result stands for an update (the one blocking
//!   rule), which the status, the report, the metrics and the webhook all
//!   read, and [`risks`]: the names OpenShift
//!   gives what a check finds, which accept it beside the check's name;
//! - [`status`]: a run's results assembled into an `UpdatePreflight` status;
//! - [`vouch`]: which object the gate takes as a release's result;
//! - [`text`]: words for a person (lists, excerpts, durations, clean text);
//! - [`annotations`]: every `preflight.dev/` annotation key, the wire
//!   contract in one place;
//! - [`hosted`]: HostedCluster and NodePool (hosted control planes) and
//!   HyperShift's update rules: supported versions, NodePool skew.

pub mod annotations;
pub mod cluster_claim;
pub mod cluster_version;
pub mod finding;
pub mod grace;
pub mod hosted;
pub mod meta;
pub mod preflight_check;
pub mod release;
pub mod results;
pub mod risks;
pub mod standing;
pub mod status;
pub mod text;
pub mod vouch;
pub mod window;

pub use cluster_version::{ClusterVersion, Resolution, Target};
pub use finding::Finding;
pub use preflight_check::{AppliesTo, EnvVar, NotApplicable, PreflightCheck, PreflightCheckSpec};
pub use release::{ReleaseKey, UpdateKind, Version};
pub use results::{
    CheckResult, FailurePolicy, Outcome, Phase, Severity, Summary, UpdatePreflight,
    UpdatePreflightSpec, UpdatePreflightStatus,
};
