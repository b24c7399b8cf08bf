//! The target a write asks for, and its decision: the verdict its results
//! give with the checks accepted, the window's limits on it, then the
//! claims that override it, which wait for authorization.

use jiff::Timestamp;

use super::Policy;
use super::claims::{Approval, forced, spec_generation, suggested_until};
use super::results::{Fresh, Judgement, Results, WindowBasis, pending, results_for};
use super::verdict::{Decision, Reason, Verdict, needs_authorization};
use super::window::WindowLimits;
use crate::admission::message;
use crate::admission::overrides::{self, ForceClaim};
use crate::admission::ports::{Lookup, ResultLookup};
use crate::admission::review::Request;
use crate::model::cluster_version::{ClusterVersion, Resolution, Target, same_target};
use crate::model::standing::Exemptions;
use crate::model::window::{self, WINDOW_END, WindowFit};

/// Decides on the target a request asks for, claims aside.
pub(super) fn decide_target(
    request: &Request,
    new: &ClusterVersion,
    source: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    let resolution = new.resolve_target();
    let old_resolution = request
        .old_object
        .as_ref()
        .map_or(Resolution::None, ClusterVersion::resolve_target);
    let preflight_mode = new
        .spec
        .desired_update
        .as_ref()
        .is_some_and(|u| u.mode.as_deref() == Some("Preflight"));

    match resolution {
        _ if preflight_mode => {
            // Once stored, the change names its target, and the controller
            // checks it from there: the review itself starts nothing.
            let mut verdict = Verdict::allow(Reason::PreflightMode);
            if let Resolution::Target(target) = &resolution {
                verdict = verdict.for_target(target);
            }
            Decision::Final(verdict)
        }
        Resolution::None if matches!(old_resolution, Resolution::None) => {
            Decision::Final(Verdict::allow(Reason::NoTargetChange))
        }
        Resolution::None => Decision::Final(Verdict::allow(Reason::Cleared)),
        _ if same_target(&resolution, &old_resolution)
            && !payload_changed(request.old_object.as_ref(), new) =>
        {
            Decision::Final(Verdict::allow(Reason::NoTargetChange))
        }
        Resolution::Target(target) if new.is_desired(&target) => {
            let mut verdict = Verdict::allow(Reason::NoTargetChange).for_target(&target);
            verdict.warnings.push(message::already_desired(&target));
            Decision::Final(verdict)
        }
        Resolution::VersionMismatch {
            image,
            claimed,
            known,
        } => Decision::Final(Verdict::deny(
            Reason::UnknownVersion,
            400,
            message::version_mismatch(&image, &claimed, &known),
        )),
        Resolution::UnknownVersion(version) => Decision::Final(Verdict::deny(
            Reason::UnknownVersion,
            400,
            message::unknown_version(&version),
        )),
        Resolution::Target(target) if !target.key.is_digest() => Decision::Final(Verdict::deny(
            Reason::NotADigest,
            400,
            message::not_a_digest(&target.image),
        )),
        Resolution::Target(target) => decide_change(request, new, &target, source, policy, now),
    }
}

/// Whether `mode` or `architecture` changed: dropping `mode: Preflight`
/// turns a check into a real update, and `architecture: Multi` asks for
/// another payload. Either is a target change.
pub(super) fn payload_changed(old: Option<&ClusterVersion>, new: &ClusterVersion) -> bool {
    let payload = |cv: Option<&ClusterVersion>| {
        cv.and_then(|cv| cv.spec.desired_update.as_ref())
            .map(|u| (u.mode.clone(), u.architecture.clone()))
            .unwrap_or_default()
    };
    payload(old) != payload(Some(new))
}

/// The decision on a change to `target`: the verdict its results give
/// with the checks accepted, the window's limits on it, then the claims
/// that override it, which wait for authorization.
pub(super) fn decide_change(
    request: &Request,
    cv: &ClusterVersion,
    target: &Target,
    source: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    let approval = Approval::of(request, cv, policy);
    let max = policy.max_override_duration;
    let case = Case {
        request,
        target,
        source,
        policy,
        now,
        terms: message::ClaimTerms {
            until: suggested_until(now, max),
            generation: policy
                .require_distinct_approver
                .then(|| spec_generation(request))
                .flatten(),
        },
    };
    let (accepted, unbound) = overrides::accepted_checks(cv, target, now, max);
    // An accept by annotation gives its reason; acceptRisks has none.
    let accept_reason = (!accepted.in_annotation.names.is_empty())
        .then(|| overrides::accept_reason(cv))
        .flatten();
    let (accepted, mut ignored) = approval.accepted(accepted);
    ignored.extend(unbound.map(|why| why.to_string()));
    let window = cv
        .annotation(WINDOW_END)
        .map(|text| window::end(WINDOW_END, text, now, Some(policy.max_window_ahead)))
        .map(|end| end.map_err(|why| why.to_string()));

    let lookup = source.lookup(&target.key);
    let mut judgement = case.on_results(
        &lookup,
        accepted,
        accept_reason.as_deref(),
        window.as_ref(),
        &approval,
    );
    if let Some(window) = &window {
        let limits = WindowLimits {
            target,
            terms: case.terms,
            runs_itself: source.runs_checks() && source.checks_itself(&target.key),
            retry: policy.retry_after,
        };
        judgement = limits.apply(window, judgement);
    }
    let force = overrides::force_claim(cv, target, policy.honor_desired_update_force, now, max)
        .map_err(|why| why.to_string())
        .and_then(|claim| approval.force(claim))
        .unwrap_or_else(|why| {
            ignored.push(why);
            None
        });
    case.with_claims(judgement, force, &ignored, &approval)
}

/// A target change being decided: the request, its target, where its
/// results come from, the policy, the time, and the terms a suggested
/// claim would carry.
pub(super) struct Case<'a> {
    request: &'a Request,
    target: &'a Target,
    source: &'a dyn ResultLookup,
    policy: &'a Policy,
    now: Timestamp,
    terms: message::ClaimTerms,
}

impl Case<'_> {
    /// The verdict the target's results give, before any force override.
    pub(super) fn on_results<'r>(
        &self,
        lookup: &'r Lookup,
        accepted: overrides::Accepted,
        accept_reason: Option<&str>,
        window: Option<&Result<Timestamp, String>>,
        approval: &Approval,
    ) -> Judgement<'r> {
        let (target, policy) = (self.target, self.policy);
        let result = match results_for(lookup, target, policy, self.now) {
            Results::Fresh(result) => result,
            Results::Missing(why) if self.source.runs_checks() => {
                let why = if self.source.checks_itself(&target.key) {
                    message::Pending::Scheduled(why)
                } else if self.source.takes_run_requests() {
                    message::Pending::NotOffered(why)
                } else {
                    message::Pending::OutsideGraph(why)
                };
                return pending(target, why, policy);
            }
            Results::Missing(why) => {
                return pending(target, message::Pending::CannotRun(why), policy);
            }
            Results::Running => {
                return pending(target, message::Pending::Running, policy);
            }
            Results::Untrusted => {
                return pending(target, message::Pending::Untrusted, policy);
            }
            Results::NotVouched(refused) if refused.runs_again => {
                // The controller runs it again on its own.
                let why = message::Pending::Unsigned(refused.why.to_string());
                return pending(target, why, policy);
            }
            Results::NotVouched(refused) => {
                let message = message::not_vouched(target, &refused.name, &refused.why.to_string());
                let verdict = Verdict::deny(Reason::NotVouched, 403, message);
                return Judgement::without_result(verdict);
            }
        };
        let exemptions = Exemptions {
            fail_open: policy.fail_open_checks.clone(),
            accepted: accepted.in_spec,
            bound: accepted.in_annotation,
        };
        let plan = result.status.as_ref().and_then(|s| s.plan.as_ref());
        let fit = match (window, plan) {
            (Some(Ok(end)), Some(plan)) => Some(WindowFit::new(*end, self.now, plan.p90_seconds)),
            _ => None,
        };
        let basis = match plan {
            Some(plan) => WindowBasis::Plan(plan, fit),
            None => WindowBasis::NoPlan,
        };
        let fresh = Fresh {
            request: self.request,
            target,
            result,
            terms: self.terms,
            fit,
            accept_risks_field: policy.accept_risks_field,
        };
        fresh.judge(&exemptions, accept_reason, approval, basis)
    }

    /// The decision once the claims are weighed: why a claim was ignored
    /// leads the answer, in the order found; a force claim on a denial, or
    /// an accept claim, waits for authorization.
    pub(super) fn with_claims(
        &self,
        judgement: Judgement,
        force: Option<ForceClaim>,
        ignored: &[String],
        approval: &Approval,
    ) -> Decision {
        let (request, target) = (self.request, self.target);
        let mut base = judgement.verdict.for_target(target);
        for why in ignored.iter().rev() {
            if base.allowed {
                base.warnings.insert(0, format!("preflight-gate: {why}"));
            } else {
                message::lead_with(&mut base.message, &format!("Override ignored: {why}."));
            }
        }
        match (force, judgement.if_accepted) {
            (Some(claim), _) if !base.allowed => {
                let mut granted = forced(request, target, &base, &claim, &approval.people());
                if let WindowBasis::Plan(plan, fit) = judgement.basis {
                    granted
                        .warnings
                        .push(message::plan_warning(plan, fit.as_ref()));
                }
                approval.record(&mut granted);
                needs_authorization(request, granted, base)
            }
            (_, Some(granted)) => needs_authorization(request, granted.for_target(target), base),
            (_, None) => Decision::Final(base),
        }
    }
}
