//! The decision: given a parsed review, cached results and the policy, allow
//! or deny, with the message, warnings, audit annotations and side effects.
//! Pure and sync; the only outside input, whether the requester may
//! override, is asked for through [`Decision::NeedsAuthorization`].
//!
//! Each kind of object it gates has its file ([`cluster_version`]: what a
//! review of it carries, and the order of its steps). The other files are
//! the steps, which follow a decision (the target's first, then what else
//! the write changes):
//! - [`mod@write`]: what the write changes besides the target (`force`, what
//!   the cluster trusts, `preflight.dev/` claims), each a question for the
//!   `override` or `window` verb;
//! - [`target`]: the target the write asks for, and its decision from the
//!   results, the window and the claims;
//! - [`results`]: what the target's cached results say ([`results::Judgement`]);
//! - [`claims`]: who wrote the claims, four eyes, and a force override;
//! - [`window`]: the maintenance window's limits on the verdict;
//! - [`verdict`]: the answer and the question it may wait for.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;

use super::ports::ResultLookup;
use super::review::{Operation, Request, Reviewable};
use crate::model::meta::Metadata;

mod claims;
pub mod cluster_version;
pub mod hosted_cluster;
pub mod nodepool;
mod results;
mod target;
mod verdict;
mod window;
mod write;

pub use verdict::{Authorization, Decision, Effect, EventNote, PendingOverride, Reason, Verdict};

/// What to do while results are missing, stale or being computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnPending {
    #[default]
    Deny,
    Allow,
}

/// Administrator policy for the decision.
#[derive(Clone, Debug)]
pub struct Policy {
    pub on_pending: OnPending,
    pub honor_desired_update_force: bool,
    /// Completed results older than this are stale.
    pub max_result_age: Duration,
    /// Checks whose errors do not block (`--fail-open-checks`): they count
    /// as warnings.
    pub fail_open_checks: BTreeSet<String>,
    /// The retry hint given while a run is pending.
    pub retry_after: Duration,
    /// The four-eyes rule: an override or accept claim counts only when
    /// `preflight.dev/claimed-by` names someone other than the requester.
    pub require_distinct_approver: bool,
    /// How far ahead an override's or accept's `until` may be.
    pub max_override_duration: Duration,
    /// How far ahead a maintenance window's end may be: a window is
    /// planned days ahead, an override is not.
    pub max_window_ahead: Duration,
    /// Whether the cluster's ClusterVersion has `spec.desiredUpdate.acceptRisks`
    /// (its CRD's schema, read when the gate starts): only then does a
    /// denial offer `oc adm upgrade accept`.
    pub accept_risks_field: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            on_pending: OnPending::Deny,
            honor_desired_update_force: false,
            max_result_age: Duration::from_secs(6 * 3600),
            fail_open_checks: BTreeSet::new(),
            retry_after: Duration::from_secs(60),
            require_distinct_approver: false,
            max_override_duration: Duration::from_secs(24 * 3600),
            max_window_ahead: Duration::from_secs(14 * 24 * 3600),
            accept_risks_field: false,
        }
    }
}

/// A kind of object the gate decides on: one file under `decision/` each
/// ([`cluster_version`]), and a row in the webhook's kinds table, which
/// serves each kind's reviews at its [`Gated::PATH`].
pub trait Gated: Reviewable {
    /// The path the kind's reviews come to (its webhook in `deploy/`).
    const PATH: &'static str;

    /// Decides on a write of `new`, once [`decide`] has set aside what no
    /// kind gates (deletes, subresources, a request with no object).
    fn decide(
        request: &Request<Self>,
        new: &Self,
        source: &dyn ResultLookup,
        policy: &Policy,
        now: Timestamp,
    ) -> Decision;

    /// The object's name and uid, for the Events left on it.
    fn metadata(&self) -> &Metadata;
}

/// Decides on one review.
pub fn decide<K: Gated>(
    request: &Request<K>,
    source: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    if matches!(request.operation, Operation::Delete | Operation::Connect)
        || request.sub_resource.is_some()
    {
        return Decision::Final(Verdict::allow(Reason::NotGated));
    }
    let Some(new) = &request.object else {
        return Decision::Final(Verdict::deny(
            Reason::Malformed,
            400,
            format!(
                "the {} request carries no object",
                request.operation.as_str()
            ),
        ));
    };
    K::decide(request, new, source, policy, now)
}
