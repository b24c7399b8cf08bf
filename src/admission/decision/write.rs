//! What a write changes besides its target: `spec.desiredUpdate.force`,
//! what the cluster trusts, and `preflight.dev/` claims. Each needs the
//! `override` verb (a window alone, the `window` verb), and the one access
//! review answers for the target change in the same write.

use jiff::Timestamp;

use super::Policy;
use super::claims::spec_generation;
use super::verdict::{
    Asked, Decision, Effect, EventNote, PendingOverride, Reason, Verdict, granted_if_authorized,
};
use crate::admission::audit;
use crate::admission::message;
use crate::admission::overrides;
use crate::admission::ports::Verb;
use crate::admission::review::Request;
use crate::model::cluster_version::ClusterVersion;
use crate::model::window::{self, WINDOW_END};

/// Whether the write sets `spec.desiredUpdate.force`, or asks for another
/// target with it set.
pub(super) fn forces(old: Option<&ClusterVersion>, new: &ClusterVersion) -> bool {
    let before = old.and_then(|cv| cv.spec.desired_update.as_ref());
    new.spec
        .desired_update
        .as_ref()
        .is_some_and(|now| now.force && before != Some(now))
}

/// `spec.desiredUpdate.force` makes the CVO skip its own preconditions and
/// the release's signature check: whoever sets it needs the `override`
/// verb, whatever the preflight says.
pub(super) fn force_write(request: &Request, decision: Decision) -> Decision {
    let refused = Verdict::deny(
        Reason::ForceRefused,
        403,
        message::force_refused(&request.user.username),
    );
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted: granted_if_authorized(decision),
        refused,
        asked: Asked::Force,
        verb: Verb::Override,
    }))
}

/// A write that changes what the cluster trusts: the update graph
/// (`spec.upstream`), where signatures are read, components taken from the
/// CVO, capabilities. Whoever chooses the graph chooses what the cluster is
/// offered, so such a write needs the `override` verb, as a target change
/// the checks refuse would; the same access review answers for the rest of
/// the write.
pub(super) fn trust_write(request: &Request, fields: &[&str], decision: Decision) -> Decision {
    let refused = Verdict::deny(
        Reason::TrustChangeRefused,
        403,
        message::trust_change_refused(&request.user.username, fields),
    );
    // Allowed, it is recorded as an override is: in the API server's audit
    // log and as an Event on the ClusterVersion.
    let user = &request.user.username;
    let mut granted = granted_if_authorized(decision);
    granted
        .audit
        .insert(audit::TRUST_CHANGED_BY.into(), user.clone());
    granted
        .audit
        .insert(audit::TRUST_CHANGED.into(), fields.join(","));
    granted.effects.push(Effect::Event(EventNote {
        warning: true,
        reason: "PreflightTrustChanged",
        message: format!(
            "{user} changed {}: what the cluster is offered and trusts",
            fields.join(", ")
        ),
        related: None,
    }));
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted,
        refused,
        asked: Asked::TrustChange,
        verb: Verb::Override,
    }))
}

/// A write that adds or changes `preflight.dev/` claims: it must record its
/// writer in `preflight.dev/claimed-by`, and the writer needs the `override`
/// verb, so nobody plants a claim for someone else to carry. The same access
/// review answers for a target change in the same write.
pub(super) fn claim_write(
    request: &Request,
    cv: &ClusterVersion,
    claims: &[&str],
    decision: Decision,
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    let user = request.user.username.as_str();
    let listed = claims.join(", ");
    let mut refused = Verdict::deny(
        Reason::ClaimRefused,
        403,
        message::claim_refused(&listed, user),
    );
    if cv.annotation(overrides::CLAIMED_BY) != Some(user) {
        message::add_note(
            &mut refused.message,
            &message::claim_unattributed(cv.annotation(overrides::CLAIMED_BY), user),
        );
        return Decision::Final(refused);
    }
    // A claim's bounds are checked as it is written, so none outlives
    // --max-override-duration, even unused, and a mistake is said at once.
    if let Some(why) = overrides::unbounded_claim(cv, claims, now, policy.max_override_duration) {
        message::add_note(&mut refused.message, &format!("{why}."));
        return Decision::Final(refused);
    }
    // A window is checked as it is written too, so a mistake is said at
    // once rather than at the update it would hold.
    if claims.contains(&WINDOW_END)
        && let Some(text) = cv.annotation(WINDOW_END)
        && let Err(why) = window::end(WINDOW_END, text, now, Some(policy.max_window_ahead))
    {
        message::add_note(&mut refused.message, &format!("{why}."));
        return Decision::Final(refused);
    }
    let window_only = claims
        .iter()
        .all(|c| *c == WINDOW_END || *c == overrides::CLAIMED_BY);
    // Under four eyes a claim names the generation its approver saw, so it
    // counts for one change of the target at most; a wrong one is said now.
    if policy.require_distinct_approver && !window_only {
        let current = spec_generation(request);
        if let Err(why) = overrides::claimed_generation_is(cv, current) {
            message::add_note(&mut refused.message, &format!("{why}."));
            return Decision::Final(refused);
        }
    }
    // Setting a window alone asks the window verb; anything more (another
    // claim, or a target change that itself asks for an override) asks the
    // override verb, which answers every question of the write.
    let window_only = window_only && matches!(decision, Decision::Final(_));
    let verb = if window_only {
        Verb::Window
    } else {
        Verb::Override
    };
    let mut granted = granted_if_authorized(decision);
    if matches!(granted.reason, Reason::NoTargetChange | Reason::NotGated) {
        granted.reason = Reason::ClaimWritten;
    }
    granted
        .audit
        .insert(audit::CLAIMS_WRITTEN_BY.into(), user.to_owned());
    granted.audit.insert(audit::CLAIMS.into(), claims.join(","));
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted,
        refused,
        asked: Asked::ClaimWrite,
        verb,
    }))
}
