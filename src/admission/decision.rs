//! The decision: given a parsed review, cached results and the policy, allow
//! or deny, with the message, warnings, audit annotations and side effects.
//! Pure and sync; the only outside input, whether the requester may
//! override, is asked for through [`Decision::NeedsAuthorization`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::audit;
use super::message;
use super::overrides::{self, ForceClaim, ForceKind};
use super::ports::{Lookup, ResultLookup, Verb};
use super::review::{Operation, Request, UserInfo};
use crate::model::cluster_version::{ClusterVersion, Resolution, Target, same_target};
use crate::model::release::Version;
use crate::model::results::PlanSummary;
use crate::model::standing::{Exemptions, OverrideKind};
pub use crate::model::standing::{WINDOW_END, WindowFit};
use crate::model::vouch::{NotVouched, vouch};
use crate::model::{Phase, UpdatePreflight};

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

/// Why a request was decided as it was. A bounded set, used as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Not a request the gate decides on (status, delete, another object).
    NotGated,
    NoTargetChange,
    Cleared,
    PreflightMode,
    Passed,
    Overridden,
    RisksAccepted,
    PendingAllowed,
    Failed,
    Pending,
    UnknownVersion,
    Malformed,
    /// A write of `preflight.dev/` claims by someone allowed to override.
    ClaimWritten,
    /// A write of `preflight.dev/` claims that is refused.
    ClaimRefused,
    /// The release's object is not a result the gate vouches for.
    NotVouched,
    /// The target image is named by a tag, which can move after a check.
    NotADigest,
    /// The update may not finish within the maintenance window
    /// (`preflight.dev/window-end`), or the window cannot be read.
    OutsideWindow,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotGated => "not_gated",
            Self::NoTargetChange => "no_target_change",
            Self::Cleared => "cleared",
            Self::PreflightMode => "preflight_mode",
            Self::Passed => "passed",
            Self::Overridden => "overridden",
            Self::RisksAccepted => "risks_accepted",
            Self::PendingAllowed => "pending_allowed",
            Self::Failed => "failed",
            Self::Pending => "pending",
            Self::UnknownVersion => "unknown_version",
            Self::Malformed => "malformed",
            Self::ClaimWritten => "claim_written",
            Self::ClaimRefused => "claim_refused",
            Self::NotVouched => "not_vouched",
            Self::NotADigest => "not_a_digest",
            Self::OutsideWindow => "outside_window",
        }
    }
}

/// Something the decision wants done after answering, unless the request is
/// a dry run. Never a run: a review only ever asks a question, and runs
/// start from stored objects and the gate's own schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    Event(EventNote),
}

/// A Kubernetes Event to leave on the ClusterVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventNote {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
    /// The name of the target's `UpdatePreflight` (named after its digest):
    /// the Event's related object, so each target has Events of its own
    /// rather than one whose note keeps the first target's words. None for
    /// a write about no target.
    pub related: Option<String>,
}

/// The answer to a review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    pub reason: Reason,
    /// HTTP-style code of a denial (403 policy, 400 bad request).
    pub code: u16,
    pub message: String,
    pub warnings: Vec<String>,
    pub audit: BTreeMap<String, String>,
    pub effects: Vec<Effect>,
    /// Set when an override was honoured.
    pub override_kind: Option<OverrideKind>,
    /// The target's version or image, when the request changed the target.
    pub target: Option<String>,
    /// The target's release, when the request changed the target.
    pub release: Option<crate::model::ReleaseKey>,
}

impl Verdict {
    fn allow(reason: Reason) -> Self {
        Self {
            allowed: true,
            reason,
            code: 200,
            message: String::new(),
            warnings: Vec::new(),
            audit: BTreeMap::new(),
            effects: Vec::new(),
            override_kind: None,
            target: None,
            release: None,
        }
    }

    fn deny(reason: Reason, code: u16, message: String) -> Self {
        Self {
            allowed: false,
            code,
            message,
            ..Self::allow(reason)
        }
    }

    fn for_target(mut self, target: &Target) -> Self {
        self.target = Some(target.display().to_owned());
        self.release = Some(target.key.clone());
        self.audit
            .insert(audit::TARGET.into(), target.display().to_owned());
        self
    }
}

/// Whether the requester may use an override, as a SubjectAccessReview said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorization {
    Allowed,
    Denied,
    /// The question could not be answered (API server unreachable, timeout).
    Unavailable(String),
}

/// The outcome of [`decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Final(Verdict),
    /// An override was claimed: the verdict depends on whether the requester
    /// is allowed the `override` verb on `updatepreflights.preflight.dev`.
    NeedsAuthorization(Box<PendingOverride>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingOverride {
    pub user: UserInfo,
    /// The verb the user must be allowed.
    pub verb: Verb,
    granted: Verdict,
    refused: Verdict,
    /// What is asked for: an override used, or claims written.
    asked: Asked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Override,
    /// `spec.desiredUpdate.force` set: its refusal says why first.
    Force,
    ClaimWrite,
    /// What the cluster trusts changed (`Spec::trust_changes`).
    TrustChange,
}

impl PendingOverride {
    pub(crate) fn resolve(self, authorization: Authorization) -> Verdict {
        let (lead, what) = match self.asked {
            Asked::Override | Asked::Force => ("Override ignored", "the override"),
            Asked::ClaimWrite | Asked::TrustChange => ("Write refused", "the write"),
        };
        let why = match authorization {
            Authorization::Allowed => return self.granted,
            Authorization::Denied => format!(
                "user {:?} is not allowed the \"{}\" verb on updatepreflights.preflight.dev",
                self.user.username,
                self.verb.as_str()
            ),
            Authorization::Unavailable(reason) => {
                format!("{what} could not be authorized: {reason}")
            }
        };
        let mut verdict = self.refused;
        let note = format!("{lead}: {why}.");
        match self.asked {
            Asked::Override => message::lead_with(&mut verdict.message, &note),
            Asked::Force | Asked::ClaimWrite | Asked::TrustChange => {
                message::add_note(&mut verdict.message, &note)
            }
        }
        verdict
    }
}

impl Decision {
    /// The verdict when no authorization is needed or it is refused up front.
    pub fn into_final(self) -> Option<Verdict> {
        match self {
            Self::Final(v) => Some(v),
            Self::NeedsAuthorization(_) => None,
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
    let mut decision = decide_target(request, new, source, policy, now);
    if forces(request.old_object.as_ref(), new) {
        decision = force_write(request, decision);
    }
    let before = request.old_object.as_ref().map(|cv| &cv.spec);
    let trusts = new
        .spec
        .trust_changes(before.unwrap_or(&Default::default()));
    if !trusts.is_empty() {
        decision = trust_write(request, &trusts, decision);
    }
    let claims = overrides::written_claims(request.old_object.as_ref(), new);
    if claims.is_empty() {
        decision
    } else {
        claim_write(request, new, &claims, decision, policy, now)
    }
}

/// Whether the write sets `spec.desiredUpdate.force`, or asks for another
/// target with it set.
fn forces(old: Option<&ClusterVersion>, new: &ClusterVersion) -> bool {
    let before = old.and_then(|cv| cv.spec.desired_update.as_ref());
    new.spec
        .desired_update
        .as_ref()
        .is_some_and(|now| now.force && before != Some(now))
}

/// `spec.desiredUpdate.force` makes the CVO skip its own preconditions and
/// the release's signature check: whoever sets it needs the `override`
/// verb, whatever the preflight says.
fn force_write(request: &Request, decision: Decision) -> Decision {
    let refused = Verdict::deny(
        Reason::Failed,
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
fn trust_write(request: &Request, fields: &[&str], decision: Decision) -> Decision {
    let refused = Verdict::deny(
        Reason::Failed,
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

/// The verdict a write gets once its requester is known to hold the
/// `override` verb; one access review answers every question of a write.
fn granted_if_authorized(decision: Decision) -> Verdict {
    match decision {
        Decision::Final(verdict) => verdict,
        Decision::NeedsAuthorization(pending) => pending.granted,
    }
}

/// A write that adds or changes `preflight.dev/` claims: it must record its
/// writer in `preflight.dev/claimed-by`, and the writer needs the `override`
/// verb, so nobody plants a claim for someone else to carry. The same access
/// review answers for a target change in the same write.
fn claim_write(
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
        && let Err(why) = window_end(WINDOW_END, text, now, Some(policy.max_window_ahead))
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

/// Decides on the target a request asks for, claims aside.
fn decide_target(
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
            // Stored, the change names its target, and the controller
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
        Resolution::Target(target) => gate(request, new, &target, source, policy, now),
    }
}

/// Whether `mode` or `architecture` changed: dropping `mode: Preflight`
/// turns a check into a real update, and `architecture: Multi` asks for
/// another payload. Either is a target change.
fn payload_changed(old: Option<&ClusterVersion>, new: &ClusterVersion) -> bool {
    let payload = |cv: Option<&ClusterVersion>| {
        cv.and_then(|cv| cv.spec.desired_update.as_ref())
            .map(|u| (u.mode.clone(), u.architecture.clone()))
            .unwrap_or_default()
    };
    payload(old) != payload(Some(new))
}

/// What the cache says about a target.
enum Results<'a> {
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

fn results_for<'a>(
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

/// The time limit the denial's commands suggest: four hours, or less when
/// the policy allows less, cut to the minute.
fn suggested_until(now: Timestamp, max: Duration) -> Timestamp {
    now.checked_add(max.min(Duration::from_secs(4 * 3600)))
        .and_then(|t| {
            t.round(
                jiff::TimestampRound::new()
                    .smallest(jiff::Unit::Minute)
                    .mode(jiff::RoundMode::Trunc),
            )
        })
        .unwrap_or(now)
}

/// A request judged by fresh results of its target.
struct Fresh<'a> {
    request: &'a Request,
    target: &'a Target,
    result: &'a UpdatePreflight,
    /// What the denial's suggested claims say.
    terms: message::ClaimTerms,
    /// How the plan meets the maintenance window, when one is set.
    fit: Option<WindowFit>,
    /// Whether the cluster's ClusterVersion has `acceptRisks`.
    accept_risks_field: bool,
}

impl Fresh<'_> {
    /// The verdict without any force override, and the one an accept
    /// gives if its writer is authorized (when everything blocking is
    /// accepted).
    fn judge(
        &self,
        blocking: &Exemptions,
        accept_reason: Option<&str>,
        approval: &Approval,
    ) -> (Verdict, Option<Verdict>) {
        let (target, result) = (self.target, self.result);
        let results = result.status.as_ref().map_or(&[][..], |s| &s.results[..]);
        let f = blocking.assess(results);
        let mut warnings: Vec<String> = f.warnings.iter().map(|c| message::warning(c)).collect();
        // An accepted name that names no check of this result, no name one
        // of them carries and none OpenShift is known to use accepts
        // nothing here: say so, rather than drop it without a word.
        let unknown = blocking.names_nothing(results);
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
            return (v, None);
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
        for (check, unseen) in blocking.outgrown(results).iter().rev() {
            let note = message::accept_outgrown(check, unseen.as_deref());
            message::lead_with(&mut denied.message, &note);
        }
        if !f.blocking.is_empty() {
            return (denied, None);
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
        (denied, Some(granted))
    }
}

/// The decision on a change to `target`: the verdict its results give
/// with the checks accepted, the window's limits on it, then the claims
/// that override it, which wait for authorization.
fn gate(
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
    ignored.extend(unbound);
    let window = cv
        .annotation(WINDOW_END)
        .map(|text| window_end(WINDOW_END, text, now, Some(policy.max_window_ahead)));

    let lookup = source.lookup(&target.key);
    let (base, accept_pending, judged) = case.on_results(
        &lookup,
        accepted,
        accept_reason.as_deref(),
        window.as_ref(),
        &approval,
    );
    let (base, accept_pending) = match &window {
        Some(window) => {
            let limits = WindowLimits {
                target,
                terms: case.terms,
                runs_itself: source.runs_checks() && source.checks_itself(&target.key),
                retry: policy.retry_after,
            };
            limits.apply(window, &judged, base, accept_pending)
        }
        None => (base, accept_pending),
    };
    let force = overrides::force_claim(cv, target, policy.honor_desired_update_force, now, max)
        .and_then(|claim| approval.force(claim))
        .unwrap_or_else(|why| {
            ignored.push(why);
            None
        });
    case.with_claims(
        base.for_target(target),
        accept_pending,
        force,
        &ignored,
        &judged,
        &approval,
    )
}

/// A target change being decided: the request, its target, where its
/// results come from, the policy, the time, and the terms a suggested
/// claim would carry.
struct Case<'a> {
    request: &'a Request,
    target: &'a Target,
    source: &'a dyn ResultLookup,
    policy: &'a Policy,
    now: Timestamp,
    terms: message::ClaimTerms,
}

impl Case<'_> {
    /// The verdict the target's results give, before any force override;
    /// the accept claim's verdict when one waits for authorization; and
    /// what the window has to go by (the plan of fresh results).
    fn on_results<'r>(
        &self,
        lookup: &'r Lookup,
        accepted: overrides::Accepted,
        accept_reason: Option<&str>,
        window: Option<&Result<Timestamp, String>>,
        approval: &Approval,
    ) -> (Verdict, Option<Verdict>, Judged<'r>) {
        let (target, policy) = (self.target, self.policy);
        let result = match results_for(lookup, target, policy, self.now) {
            Results::Fresh(result) => result,
            Results::Missing(why) if self.source.runs_checks() => {
                let why = if self.source.checks_itself(&target.key) {
                    message::Pending::Scheduled(why)
                } else {
                    message::Pending::NotOffered(why)
                };
                return with_no_result(pending(target, why, policy));
            }
            Results::Missing(why) => {
                return with_no_result(pending(target, message::Pending::CannotRun(why), policy));
            }
            Results::Running => {
                return with_no_result(pending(target, message::Pending::Running, policy));
            }
            Results::Untrusted => {
                return with_no_result(pending(target, message::Pending::Untrusted, policy));
            }
            Results::NotVouched(refused) if refused.runs_again => {
                // The controller runs it again on its own.
                let why = message::Pending::Unsigned(refused.why);
                return with_no_result(pending(target, why, policy));
            }
            Results::NotVouched(refused) => {
                let message = message::not_vouched(target, &refused.name, &refused.why);
                return with_no_result((Verdict::deny(Reason::NotVouched, 403, message), None));
            }
        };
        let exemptions = Exemptions {
            fail_open: policy.fail_open_checks.clone(),
            accepted: accepted.in_spec,
            bound: accepted.in_annotation,
        };
        let plan = result.status.as_ref().and_then(|s| s.plan.as_ref());
        let fit = match (window, plan) {
            (Some(Ok(end)), Some(plan)) => Some(window_fit(*end, self.now, plan.p90_seconds)),
            _ => None,
        };
        let judged = match plan {
            Some(plan) => Judged::Plan(plan, fit),
            None => Judged::NoPlan,
        };
        let fresh = Fresh {
            request: self.request,
            target,
            result,
            terms: self.terms,
            fit,
            accept_risks_field: policy.accept_risks_field,
        };
        let (verdict, accept_pending) = fresh.judge(&exemptions, accept_reason, approval);
        (verdict, accept_pending, judged)
    }

    /// The decision once the claims are weighed: why a claim was ignored
    /// leads the answer, in the order found; a force claim on a denial, or
    /// an accept claim, waits for authorization.
    fn with_claims(
        &self,
        mut base: Verdict,
        accept_pending: Option<Verdict>,
        force: Option<ForceClaim>,
        ignored: &[String],
        judged: &Judged,
        approval: &Approval,
    ) -> Decision {
        let (request, target) = (self.request, self.target);
        for why in ignored.iter().rev() {
            if base.allowed {
                base.warnings.insert(0, format!("preflight-gate: {why}"));
            } else {
                message::lead_with(&mut base.message, &format!("Override ignored: {why}."));
            }
        }
        match (force, accept_pending) {
            (Some(claim), _) if !base.allowed => {
                let mut granted = forced(request, target, &base, &claim, &approval.people());
                if let Judged::Plan(plan, fit) = judged {
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

/// A verdict reached without fresh results: the window has no plan to go by.
fn with_no_result<'r>(
    (verdict, accept_pending): (Verdict, Option<Verdict>),
) -> (Verdict, Option<Verdict>, Judged<'r>) {
    (verdict, accept_pending, Judged::NoResult)
}

/// Who wrote the claims a target change carries, and whether they count
/// under the four-eyes rule (`--require-distinct-approver`).
struct Approval<'a> {
    required: bool,
    requester: &'a str,
    /// `preflight.dev/claimed-by`: checked against the writer on every
    /// write of a claim, so it names who last wrote one.
    writer: Option<&'a str>,
    /// Why the claims were used already, under the four-eyes rule: their
    /// `preflight.dev/claimed-generation` is not the spec this write
    /// changes.
    spent: Option<String>,
}

impl<'a> Approval<'a> {
    fn of(request: &'a Request, cv: &'a ClusterVersion, policy: &Policy) -> Self {
        let required = policy.require_distinct_approver;
        Self {
            required,
            requester: &request.user.username,
            writer: cv.annotation(overrides::CLAIMED_BY),
            spent: required
                .then(|| overrides::claimed_generation_is(cv, spec_generation(request)).err())
                .flatten(),
        }
    }

    fn distinct(&self) -> bool {
        self.writer.is_some_and(|w| w != self.requester)
    }

    /// Why a claim another identity wrote does not count: it was used.
    fn unspent(&self, claim: &str) -> Result<(), String> {
        match &self.spent {
            Some(why) => Err(message::four_eyes_spent(claim, why)),
            None => Ok(()),
        }
    }

    /// The accepted names that count, and why the others do not.
    fn accepted(&self, accepted: overrides::Accepted) -> (overrides::Accepted, Vec<String>) {
        if !self.required {
            return (accepted, Vec::new());
        }
        let mut ignored = Vec::new();
        if !accepted.in_spec.is_empty() {
            ignored.push(message::four_eyes_spec_accept(&accepted.in_spec));
        }
        let none = overrides::Accepted::default();
        if accepted.in_annotation.names.is_empty() {
            return (none, ignored);
        }
        if !self.distinct() {
            ignored.push(message::four_eyes_same_writer(
                overrides::ACCEPT,
                self.writer,
                self.requester,
            ));
            return (none, ignored);
        }
        match self.unspent(overrides::ACCEPT) {
            Ok(()) => {
                let only_claimed = overrides::Accepted {
                    in_spec: BTreeSet::new(),
                    ..accepted
                };
                (only_claimed, ignored)
            }
            Err(why) => {
                ignored.push(why);
                (none, ignored)
            }
        }
    }

    /// Whether a force claim counts.
    fn force(&self, claim: Option<ForceClaim>) -> Result<Option<ForceClaim>, String> {
        match claim {
            Some(claim) if self.required => match claim.kind {
                ForceKind::DesiredUpdateForce => Err(message::four_eyes_desired_update_force()),
                ForceKind::Annotation if !self.distinct() => Err(message::four_eyes_same_writer(
                    overrides::OVERRIDE,
                    self.writer,
                    self.requester,
                )),
                ForceKind::Annotation => self.unspent(overrides::OVERRIDE).map(|()| Some(claim)),
            },
            claim => Ok(claim),
        }
    }

    /// Records the claim's writer in an honoured override's audit, and,
    /// where another person wrote it, that person as its approver.
    fn record(&self, verdict: &mut Verdict) {
        if let Some(writer) = self.writer {
            verdict
                .audit
                .insert(audit::CLAIMED_BY.into(), writer.to_owned());
        }
        if let Some(approver) = self.approver() {
            verdict
                .audit
                .insert(audit::APPROVED_BY.into(), approver.to_owned());
        }
    }

    /// The claim's writer, when someone other than the requester wrote it.
    fn approver(&self) -> Option<&str> {
        self.writer.filter(|_| self.distinct())
    }

    /// Who an override's Event names: the requester, and the approver
    /// where another person wrote the claim.
    fn people(&self) -> String {
        match self.approver() {
            Some(approver) => format!("{}, approved by {approver},", self.requester),
            None => self.requester.to_owned(),
        }
    }
}

/// The `metadata.generation` of the spec a write changes: the stored
/// object's (the API server bumps the new one's when the spec changes).
fn spec_generation(request: &Request) -> Option<i64> {
    request
        .old_object
        .as_ref()
        .or(request.object.as_ref())
        .and_then(|cv| cv.metadata.generation)
}

fn needs_authorization(request: &Request, granted: Verdict, refused: Verdict) -> Decision {
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted,
        refused,
        asked: Asked::Override,
        verb: Verb::Override,
    }))
}

/// The verdict while results are missing, stale or being computed.
fn pending(target: &Target, why: message::Pending, policy: &Policy) -> (Verdict, Option<Verdict>) {
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
    (verdict, None)
}

/// The verdict of an honoured force override.
fn forced(
    request: &Request,
    target: &Target,
    base: &Verdict,
    claim: &ForceClaim,
    people: &str,
) -> Verdict {
    let user = &request.user.username;
    let mut v = Verdict::allow(Reason::Overridden).for_target(target);
    v.override_kind = Some(match claim.kind {
        ForceKind::Annotation => OverrideKind::Force,
        ForceKind::DesiredUpdateForce => OverrideKind::DesiredUpdateForce,
    });
    v.warnings = base.warnings.clone();
    v.warnings.push(format!(
        "preflight-gate: override by {user} for {}: {}",
        target.display(),
        message::first_line(&base.message)
    ));
    v.audit.insert(audit::OVERRIDE_BY.into(), user.clone());
    v.audit
        .insert(audit::OVERRIDE_REASON.into(), claim.reason.clone());
    v.audit.insert(audit::OVERRIDDEN_CHECKS.into(), "*".into());
    v.effects.push(Effect::Event(EventNote {
        warning: true,
        reason: "PreflightOverridden",
        message: format!(
            "{people} overrode the preflight gate for {}: {}",
            target.display(),
            claim.reason
        ),
        related: Some(target.key.object_name()),
    }));
    v
}

/// The window rule, one for the webhook and `check --window-end`: an
/// update started at `now` fits a window ending at `end` when it ends by
/// then at its plan's P90 (`now + P90`).
pub fn window_fit(end: Timestamp, now: Timestamp, p90_seconds: u64) -> WindowFit {
    WindowFit::new(end, now, p90_seconds)
}

/// A window's end as `what` gives it (the annotation, or `--window-end`):
/// an RFC 3339 time after `now` and, with `max`, at most that far ahead,
/// as every claim's time is. `Err` says what is wrong with it.
pub fn window_end(
    what: &str,
    text: &str,
    now: Timestamp,
    max: Option<Duration>,
) -> Result<Timestamp, String> {
    let end: Timestamp = text.trim().parse().map_err(|_| {
        format!(
            "{what} {:?} is not an RFC 3339 time (such as 2026-11-30T22:00:00Z)",
            message::clean(text, 80)
        )
    })?;
    if end <= now {
        return Err(format!("{what} {end} has passed"));
    }
    if let Some(max) = max {
        let latest = now
            .checked_add(max)
            .map_err(|_| format!("--max-window-ahead {max:?} is out of range"))?;
        if end > latest {
            return Err(format!(
                "{what} {end} is more than {} ahead (--max-window-ahead)",
                humantime::format_duration(max)
            ));
        }
    }
    Ok(end)
}

/// What the maintenance window has to go by.
enum Judged<'a> {
    /// Fresh results with a plan, and how the plan meets the window when
    /// its end could be read.
    Plan(&'a PlanSummary, Option<WindowFit>),
    /// Fresh results written without a plan (by a gate from before plans).
    NoPlan,
    /// No fresh results: the verdict is pending, or the result is refused.
    NoResult,
}

/// What a window's verdict needs besides the window.
struct WindowLimits<'a> {
    target: &'a Target,
    terms: message::ClaimTerms,
    /// Whether a run may be asked for the target.
    /// Whether the gate checks the target by itself (the graph offers it).
    runs_itself: bool,
    retry: Duration,
}

impl WindowLimits<'_> {
    /// The verdict and the accept's, with the maintenance window applied:
    /// an update that may not finish within it, or a window that cannot be
    /// read, is denied; a denial for other reasons says so too. Only a
    /// force override goes past the window, as past everything else.
    fn apply(
        &self,
        window: &Result<Timestamp, String>,
        judged: &Judged,
        base: Verdict,
        accept: Option<Verdict>,
    ) -> (Verdict, Option<Verdict>) {
        let target = self.target;
        let (first, note) = match (window, judged) {
            (Err(why), _) => (
                message::window_unreadable(target, why),
                message::window_unreadable_note(why),
            ),
            (Ok(_), Judged::Plan(plan, Some(fit))) if !fit.fits() => (
                message::outside_window(target, fit, plan, self.terms),
                message::outside_window_note(fit),
            ),
            (Ok(_), Judged::Plan(..)) => return (base, accept),
            (Ok(end), Judged::NoPlan) => (
                message::window_without_plan(target, *end, self.runs_itself, self.retry),
                message::window_without_plan_note(*end),
            ),
            // Without fresh results the verdict is pending or refused:
            // allowed only by --on-pending=allow, which says the window
            // went unjudged.
            (Ok(end), Judged::NoResult) => {
                let mut base = base;
                if base.allowed {
                    base.warnings.push(message::window_unjudged(target, *end));
                }
                return (base, accept);
            }
        };
        if !base.allowed {
            let mut base = base;
            message::add_note(&mut base.message, &note);
            return (base, None);
        }
        let mut denied = Verdict::deny(Reason::OutsideWindow, 403, first);
        denied.warnings = base
            .warnings
            .into_iter()
            .filter(|w| !message::is_plan_warning(w))
            .collect();
        denied.effects = base.effects;
        denied.effects.push(Effect::Event(EventNote {
            warning: true,
            reason: "UpdateOutsideMaintenanceWindow",
            message: message::first_line(&denied.message).to_owned(),
            related: Some(target.key.object_name()),
        }));
        (denied, None)
    }
}
