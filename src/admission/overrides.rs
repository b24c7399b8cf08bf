//! The two ways an administrator overrides the gate: the force annotation for
//! a whole target, and accepted risks for single checks. Both are claims
//! written as `preflight.dev/` annotations, and every write of one records
//! its writer in `preflight.dev/claimed-by`.

use std::collections::BTreeSet;

use jiff::Timestamp;

use super::clusterversion::{ClusterVersion, Target};

pub const OVERRIDE: &str = "preflight.dev/override";
pub const OVERRIDE_REASON: &str = "preflight.dev/override-reason";
pub const OVERRIDE_UNTIL: &str = "preflight.dev/override-until";
pub const ACCEPT: &str = "preflight.dev/accept";
/// Who wrote the claims beside it. Every write that adds or changes a
/// `preflight.dev/` annotation must set it to the writer's own name, so it
/// always names whoever last wrote a claim.
pub const CLAIMED_BY: &str = "preflight.dev/claimed-by";

/// The prefix of every annotation the gate reads as a claim.
pub const PREFIX: &str = "preflight.dev/";

/// The `preflight.dev/` annotations that `new` adds or changes against
/// `old`, sorted. Removing one weakens no claim, so removals are not listed.
pub fn written_claims<'a>(old: Option<&ClusterVersion>, new: &'a ClusterVersion) -> Vec<&'a str> {
    new.metadata
        .annotations
        .iter()
        .filter(|(key, _)| key.starts_with(PREFIX))
        .filter(|(key, value)| {
            old.and_then(|old| old.metadata.annotations.get(*key)) != Some(*value)
        })
        .map(|(key, _)| key.as_str())
        .collect()
}

/// How a whole target was forced through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceKind {
    /// The `preflight.dev/override` annotation.
    Annotation,
    /// `spec.desiredUpdate.force: true`, when `--honor-desired-update-force` is set.
    DesiredUpdateForce,
}

/// A claim to force the gate for the requested target, valid on its face; it
/// still needs the requester to be authorized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForceClaim {
    pub kind: ForceKind,
    pub reason: String,
}

/// Reads the force claim of `cv` for `target`. `Err` says why a claim that
/// was made is ignored; `Ok(None)` means no claim was made.
pub fn force_claim(
    cv: &ClusterVersion,
    target: &Target,
    honor_desired_update_force: bool,
    now: Timestamp,
) -> Result<Option<ForceClaim>, String> {
    if let Some(named) = cv.annotation(OVERRIDE) {
        if !target.is_named_by(named) {
            return Err(format!(
                "{OVERRIDE} names {named}, not this target {}",
                target.display()
            ));
        }
        let Some(reason) = cv.annotation(OVERRIDE_REASON) else {
            return Err(format!("{OVERRIDE} needs a reason in {OVERRIDE_REASON}"));
        };
        if let Some(until) = cv.annotation(OVERRIDE_UNTIL) {
            let until: Timestamp = until
                .parse()
                .map_err(|_| format!("{OVERRIDE_UNTIL} {until:?} is not an RFC 3339 time"))?;
            if until <= now {
                return Err(format!("{OVERRIDE_UNTIL} {until} has passed"));
            }
        }
        return Ok(Some(ForceClaim {
            kind: ForceKind::Annotation,
            reason: reason.to_owned(),
        }));
    }
    let forced = cv.spec.desired_update.as_ref().is_some_and(|u| u.force);
    match (forced, honor_desired_update_force) {
        (true, true) => Ok(Some(ForceClaim {
            kind: ForceKind::DesiredUpdateForce,
            reason: "spec.desiredUpdate.force is true".to_owned(),
        })),
        (true, false) => Err(
            "spec.desiredUpdate.force does not bypass preflight; use the preflight.dev/override annotation"
                .to_owned(),
        ),
        (false, _) => Ok(None),
    }
}

/// Check names accepted as risks, by where they were written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// `spec.desiredUpdate.acceptRisks[].name`, written with the target.
    pub in_spec: BTreeSet<String>,
    /// The comma-separated `preflight.dev/accept` annotation, a claim whose
    /// writer is recorded.
    pub in_annotation: BTreeSet<String>,
}

impl Accepted {
    /// Every accepted name.
    pub fn all(&self) -> BTreeSet<String> {
        self.in_spec.union(&self.in_annotation).cloned().collect()
    }
}

/// The check names `cv` accepts as risks.
pub fn accepted_checks(cv: &ClusterVersion) -> Accepted {
    let names = |names: &mut dyn Iterator<Item = &str>| -> BTreeSet<String> {
        names
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    };
    Accepted {
        in_spec: names(
            &mut cv
                .spec
                .desired_update
                .iter()
                .flat_map(|u| u.accept_risks.iter().map(|r| r.name.as_str())),
        ),
        in_annotation: names(&mut cv.annotation(ACCEPT).into_iter().flat_map(|v| v.split(','))),
    }
}
