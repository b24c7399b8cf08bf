//! What a target's cached results say: fresh, missing, running, or not
//! vouched for; and, when fresh, the verdict they give with the checks
//! accepted ([`Judgement`]).

use jiff::Timestamp;

use super::claims::Approval;
use super::verdict::{Effect, EventNote, Reason, Verdict};
use super::{OnPending, Policy};
use crate::admission::audit;
use crate::admission::message;
use crate::admission::ports::Lookup;
use crate::admission::review::Request;
use crate::model::cluster_version::Target;
use crate::model::release::Version;
use crate::model::results::PlanSummary;
use crate::model::standing::{Exemptions, OverrideKind};
use crate::model::vouch::{NotVouched, vouch};
use crate::model::window::WindowFit;
use crate::model::{Phase, UpdatePreflight};

/// What the cache says about a target.
pub(super) enum Results<'a> {
    Fresh(&'a UpdatePreflight),
    /// Missing or stale: a run is wanted.
    Missing(String),
    /// A run is under way.
    Running,
    /// The cache has lost its source (the watch is down): nothing in it can
    /// be trusted, and asking for a run would not reach the API server.
    Untrusted,
    /// The object under the release's name is not one the gate vouches for.
    NotVouched(NotVouched),
}

pub(super) fn results_for<'a>(
    lookup: &'a Lookup,
    target: &Target,
    policy: &Policy,
    now: Timestamp,
) -> Results<'a> {
    let (trusted, expires) = (lookup.trusted, lookup.expires);
    let Some(result) = lookup.result.as_deref() else {
        return Results::Missing("no results yet".into());
    };
    let version = target.version.as_deref().and_then(Version::parse);
    if let Err(refused) = vouch(
        result,
        &target.key,
        version.as_ref(),
        lookup.status_writer.as_ref(),
    ) {
        return Results::NotVouched(refused);
    }
    let Some(status) = &result.status else {
        return Results::Running;
    };
    if matches!(status.phase, None | Some(Phase::Pending | Phase::Running)) {
        return Results::Running;
    }
    if !trusted {
        return Results::Untrusted;
    }
    let generation = result.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Results::Missing("the results describe an older spec".into());
    }
    if expires {
        let age = status
            .completion_time
            .as_ref()
            .map(|done| now.duration_since(done.0).unsigned_abs());
        match age {
            Some(age) if age <= policy.max_result_age => {}
            Some(age) => {
                return Results::Missing(format!(
                    "the results are {} old",
                    crate::model::text::short_duration(age)
                ));
            }
            None => return Results::Missing("the results have no completion time".into()),
        }
    }
    Results::Fresh(result)
}

/// The verdict a target's results give, before any force override.
pub(super) struct Judgement<'r> {
    /// The verdict with the accepted checks that count.
    pub(super) verdict: Verdict,
    /// The verdict an accept claim gives once its writer is authorized:
    /// only when everything blocking is accepted.
    pub(super) if_accepted: Option<Verdict>,
    /// What the maintenance window has to go by.
    pub(super) basis: WindowBasis<'r>,
}

impl Judgement<'_> {
    /// A verdict reached without fresh results: the window has no plan to
    /// go by, and there is nothing to accept.
    pub(super) fn without_result(verdict: Verdict) -> Self {
        Self {
            verdict,
            if_accepted: None,
            basis: WindowBasis::NoResult,
        }
    }
}

/// What the maintenance window has to go by.
pub(super) enum WindowBasis<'a> {
    /// Fresh results with a plan, and how the plan meets the window when
    /// its end could be read.
    Plan(&'a PlanSummary, Option<WindowFit>),
    /// Fresh results written without a plan (by a gate from before plans).
    NoPlan,
    /// No fresh results: the verdict is pending, or the result is refused.
    NoResult,
}

/// A request judged by fresh results of its target.
pub(super) struct Fresh<'a> {
    pub(super) request: &'a Request,
    pub(super) target: &'a Target,
    pub(super) result: &'a UpdatePreflight,
    /// What the denial's suggested claims say.
    pub(super) terms: message::ClaimTerms,
    /// How the plan meets the maintenance window, when one is set.
    pub(super) fit: Option<WindowFit>,
    /// Whether the cluster's ClusterVersion has `acceptRisks`.
    pub(super) accept_risks_field: bool,
}

impl Fresh<'_> {
    /// The verdict without any force override, and the one an accept
    /// gives if its writer is authorized (when everything blocking is
    /// accepted); `basis` is what the window goes by.
    pub(super) fn judge<'r>(
        &self,
        exemptions: &Exemptions,
        accept_reason: Option<&str>,
        approval: &Approval,
        basis: WindowBasis<'r>,
    ) -> Judgement<'r> {
        let (target, result) = (self.target, self.result);
        let results = result.status.as_ref().map_or(&[][..], |s| &s.results[..]);
        let f = exemptions.assess(results);
        let mut warnings: Vec<String> = f.warnings.iter().map(|c| message::warning(c)).collect();
        // An accepted name that names no check of this result, no name one
        // of them carries and none OpenShift is known to use accepts
        // nothing here: say so, rather than drop it without a word.
        let unknown = exemptions.names_nothing(results);
        if !unknown.is_empty() {
            warnings.push(message::unknown_accepts(&unknown));
        }
        let run_errored = result.status.as_ref().and_then(|s| s.phase) == Some(Phase::Error);
        // What the update will do and how long it takes, in one line: a
        // warning when it goes ahead, a line of the denial otherwise.
        let plan = result.status.as_ref().and_then(|s| s.plan.as_ref());
        let plan_warning = plan.map(|p| message::plan_warning(p, self.fit.as_ref()));
        if f.blocking.is_empty() && f.accepted.is_empty() {
            let mut v = if run_errored {
                // The run as a whole failed, with no check to blame.
                Verdict::deny(
                    Reason::Failed,
                    403,
                    message::run_error(target, result, self.terms),
                )
            } else {
                Verdict::allow(Reason::Passed)
            };
            v.warnings = warnings;
            if v.allowed {
                v.warnings.extend(plan_warning);
            }
            return Judgement {
                verdict: v,
                if_accepted: None,
                basis,
            };
        }
        // List what still blocks; when everything is accepted, the accepted
        // checks are what a refused override leaves blocking.
        let listed = if f.blocking.is_empty() {
            &f.accepted
        } else {
            &f.blocking
        };
        let mut denied = Verdict::deny(
            Reason::Failed,
            403,
            message::failed(
                target,
                result,
                listed,
                &f.accepted,
                self.terms,
                self.accept_risks_field,
            ),
        );
        denied.warnings = warnings.clone();
        denied.effects.push(Effect::Event(EventNote {
            warning: true,
            reason: "UpdateBlockedByPreflight",
            message: message::first_line(&denied.message).to_owned(),
            related: Some(target.key.object_name()),
        }));
        // An accept that no longer covers what a check finds says so first
        // (after the Event, which names the failure).
        for (check, unseen) in exemptions.outgrown(results).iter().rev() {
            let note = message::accept_outgrown(check, unseen.as_deref());
            message::lead_with(&mut denied.message, &note);
        }
        if !f.blocking.is_empty() {
            return Judgement {
                verdict: denied,
                if_accepted: None,
                basis,
            };
        }
        // Every blocking failure is accepted: allowed if authorized.
        let names: Vec<&str> = f.accepted.iter().map(|c| c.name.as_str()).collect();
        let mut granted = Verdict::allow(Reason::RisksAccepted);
        granted.warnings = warnings;
        granted
            .warnings
            .extend(f.accepted.iter().map(|c| message::accepted(c)));
        granted.warnings.extend(plan_warning);
        let user = &self.request.user.username;
        granted
            .audit
            .insert(audit::OVERRIDDEN_CHECKS.into(), names.join(","));
        granted
            .audit
            .insert(audit::OVERRIDE_BY.into(), user.clone());
        granted.audit.insert(
            audit::OVERRIDE_REASON.into(),
            accept_reason.unwrap_or("accepted risks").to_owned(),
        );
        approval.record(&mut granted);
        granted.override_kind = Some(OverrideKind::AcceptRisks);
        granted.effects.push(Effect::Event(EventNote {
            warning: true,
            reason: "PreflightChecksAccepted",
            message: format!(
                "{} accepted failing preflight checks {} for {}{}",
                approval.people(),
                names.join(", "),
                target.display(),
                accept_reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
            related: Some(target.key.object_name()),
        }));
        Judgement {
            verdict: denied,
            if_accepted: Some(granted),
            basis,
        }
    }
}

/// The verdict while results are missing, stale or being computed.
pub(super) fn pending<'r>(
    target: &Target,
    why: message::Pending,
    policy: &Policy,
) -> Judgement<'r> {
    let text = message::pending(target, &why, policy.retry_after);
    let verdict = match policy.on_pending {
        OnPending::Deny => Verdict::deny(Reason::Pending, 403, text),
        OnPending::Allow => {
            let mut v = Verdict::allow(Reason::PendingAllowed);
            v.warnings.push(format!(
                "preflight-gate: {} (allowed by --on-pending=allow)",
                message::first_line(&text)
            ));
            v
        }
    };
    Judgement::without_result(verdict)
}
