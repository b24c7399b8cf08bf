//! The decision: given a parsed review, cached results and the policy, allow
//! or deny, with the message, warnings, audit annotations and side effects.
//! Pure and sync; the only outside input, whether the requester may
//! override, is asked for through [`Decision::NeedsAuthorization`].
//!
//! Its files follow the steps of a decision (`decide` takes the target's
//! first, then what else the write changes):
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

use super::overrides;
use super::ports::ResultLookup;
use super::review::{Operation, Request};

mod claims;
mod results;
mod target;
mod verdict;
mod window;
mod write;

pub use verdict::{Authorization, Decision, Effect, EventNote, PendingOverride, Reason, Verdict};

/// The only ClusterVersion the cluster-version operator acts on.
pub(crate) const CLUSTER_VERSION_NAME: &str = "version";

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
    /// Checks whose errors count as passes.
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

/// Decides on one review.
pub fn decide(
    request: &Request,
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
    let name = if request.name.is_empty() {
        new.metadata.name.as_str()
    } else {
        request.name.as_str()
    };
    if name != CLUSTER_VERSION_NAME {
        return Decision::Final(Verdict::allow(Reason::NotGated));
    }
    let mut decision = target::decide_target(request, new, source, policy, now);
    if write::forces(request.old_object.as_ref(), new) {
        decision = write::force_write(request, decision);
    }
    let before = request.old_object.as_ref().map(|cv| &cv.spec);
    let trusts = new
        .spec
        .trust_changes(before.unwrap_or(&Default::default()));
    if !trusts.is_empty() {
        decision = write::trust_write(request, &trusts, decision);
    }
    let claims = overrides::written_claims(request.old_object.as_ref(), new);
    if claims.is_empty() {
        decision
    } else {
        write::claim_write(request, new, &claims, decision, policy, now)
    }
}
