//! Who wrote the claims a target change carries, whether they count under
//! the four-eyes rule, and the verdict of a force override honoured.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;

use super::Policy;
use super::verdict::{Effect, EventNote, Reason, Verdict};
use crate::admission::audit;
use crate::admission::message;
use crate::admission::overrides::{self, ForceClaim};
use crate::admission::review::Request;
use crate::model::cluster_version::{ClusterVersion, Target};

/// The time limit the denial's commands suggest: four hours, or less when
/// the policy allows less, cut to the minute.
pub(super) fn suggested_until(now: Timestamp, max: Duration) -> Timestamp {
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

/// Who wrote the claims a target change carries, and whether they count
/// under the four-eyes rule (`--require-distinct-approver`).
pub(super) struct Approval<'a> {
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
    pub(super) fn of(request: &'a Request, cv: &'a ClusterVersion, policy: &Policy) -> Self {
        let required = policy.require_distinct_approver;
        Self {
            required,
            requester: &request.user.username,
            writer: cv.annotation(overrides::CLAIMED_BY),
            spent: required
                .then(|| {
                    overrides::claimed_generation_is(cv, spec_generation(request))
                        .err()
                        .map(|why| why.to_string())
                })
                .flatten(),
        }
    }

    pub(super) fn distinct(&self) -> bool {
        self.writer.is_some_and(|w| w != self.requester)
    }

    /// Why a claim another identity wrote does not count: it was used.
    pub(super) fn unspent(&self, claim: &str) -> Result<(), String> {
        match &self.spent {
            Some(why) => Err(message::four_eyes_spent(claim, why)),
            None => Ok(()),
        }
    }

    /// The accepted names that count, and why the others do not.
    pub(super) fn accepted(
        &self,
        accepted: overrides::Accepted,
    ) -> (overrides::Accepted, Vec<String>) {
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
    pub(super) fn force(&self, claim: Option<ForceClaim>) -> Result<Option<ForceClaim>, String> {
        match claim {
            Some(claim) if self.required => match claim.kind.claimed_in() {
                None => Err(message::four_eyes_desired_update_force()),
                Some(key) if !self.distinct() => Err(message::four_eyes_same_writer(
                    key,
                    self.writer,
                    self.requester,
                )),
                Some(key) => self.unspent(key).map(|()| Some(claim)),
            },
            claim => Ok(claim),
        }
    }

    /// Records the claim's writer in an honoured override's audit, and,
    /// where another person wrote it, that person as its approver.
    pub(super) fn record(&self, verdict: &mut Verdict) {
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
    pub(super) fn approver(&self) -> Option<&str> {
        self.writer.filter(|_| self.distinct())
    }

    /// Who an override's Event names: the requester, and the approver
    /// where another person wrote the claim.
    pub(super) fn people(&self) -> String {
        match self.approver() {
            Some(approver) => format!("{}, approved by {approver},", self.requester),
            None => self.requester.to_owned(),
        }
    }
}

/// The `metadata.generation` of the spec a write changes: the stored
/// object's (the API server bumps the new one's when the spec changes).
pub(super) fn spec_generation(request: &Request) -> Option<i64> {
    request
        .old_object
        .as_ref()
        .or(request.object.as_ref())
        .and_then(|cv| cv.metadata.generation)
}

/// The verdict of an honoured force override.
pub(super) fn forced(
    request: &Request,
    target: &Target,
    base: &Verdict,
    claim: &ForceClaim,
    people: &str,
) -> Verdict {
    let user = &request.user.username;
    let mut v = Verdict::allow(Reason::Overridden).for_target(target);
    v.override_kind = Some(claim.kind);
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
