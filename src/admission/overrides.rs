//! The two ways an administrator overrides the gate: the force annotation for
//! a whole target, and accepted risks for single checks. Both are claims
//! written as `preflight.dev/` annotations, and every write of one records
//! its writer in `preflight.dev/claimed-by`.

use std::collections::{BTreeMap, BTreeSet};

use std::time::Duration;

use jiff::Timestamp;

use crate::model::cluster_version::{ClusterVersion, Target};
use crate::model::standing::{BoundAccept, OverrideKind};
use crate::model::window::{self, TimeError, TimeKind};

// The claims' keys, spelt once for the whole gate.
pub(crate) use crate::model::annotations::{
    ACCEPT, ACCEPT_FINDINGS, ACCEPT_FOR, ACCEPT_REASON, ACCEPT_UNTIL, CLAIMED_BY,
    CLAIMED_GENERATION, OVERRIDE, OVERRIDE_REASON, OVERRIDE_UNTIL, PREFIX,
};

/// Why a claim does not count, or may not be written: each variant says, in
/// a sentence, what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    /// Under the four-eyes rule, `claimed-generation` is not the spec's
    /// generation; `found` is what it says, cleaned, if it is set.
    #[error(
        "{key} {}, and the ClusterVersion's spec is at generation {current}; under --require-distinct-approver a claim names the generation its approver saw, so it counts for one change of the target: write {key}={current} with the claims",
        generation_words(found.as_deref()),
        key = CLAIMED_GENERATION
    )]
    OtherGeneration { found: Option<String>, current: i64 },
    /// Under the four-eyes rule, the ClusterVersion has no generation.
    #[error(
        "the ClusterVersion carries no metadata.generation to bind a claim to under --require-distinct-approver"
    )]
    NoGeneration,
    /// The override names another target.
    #[error("{override_key} names {named}, not this target {target}", override_key = OVERRIDE)]
    OverrideForOther { named: String, target: String },
    /// The accept does not say which target it is for.
    #[error("{accept} needs the target it is for in {accept_for}", accept = ACCEPT, accept_for = ACCEPT_FOR)]
    AcceptForNone,
    /// The accept is for another target.
    #[error("{accept} is for {named} ({accept_for}), not this target {target}", accept = ACCEPT, accept_for = ACCEPT_FOR)]
    AcceptForOther { named: String, target: String },
    /// The claim `claim` gives no reason in `key`.
    #[error("{claim} needs a reason in {key}")]
    NoReason {
        claim: &'static str,
        key: &'static str,
    },
    /// The reason in `key` is a placeholder.
    #[error(
        "{key} {reason:?} is not a reason: say why this update goes ahead, for whoever audits it later (a change or ticket number and what was checked, e.g. 'CHG0012345: etcd member replaced, alert is stale')"
    )]
    Placeholder { key: &'static str, reason: String },
    /// The claim's `-until` annotation `key` is not set.
    #[error(
        "{key} is required (an RFC 3339 time at most {} ahead)",
        humantime::format_duration(*max)
    )]
    NoUntil { key: &'static str, max: Duration },
    /// The claim's `-until` time cannot be taken.
    #[error(transparent)]
    Until(#[from] TimeError),
    /// The accept does not record the findings it was written against.
    #[error(
        "{accept} needs the findings it was written against in {accept_findings} (the denial's command carries them), so that it asks again when a check finds more",
        accept = ACCEPT,
        accept_findings = ACCEPT_FINDINGS
    )]
    NoFindings,
    /// The accept's findings are not what the denial's command writes.
    #[error(
        "{accept_findings} is not a JSON object of check names to lists of findings ({0}); copy it from the denial's command",
        accept_findings = ACCEPT_FINDINGS
    )]
    BadFindings(serde_json::Error),
    /// `spec.desiredUpdate.force` is set, and the gate does not honor it.
    #[error(
        "spec.desiredUpdate.force does not bypass preflight; use the {override_key} annotation",
        override_key = OVERRIDE
    )]
    DesiredUpdateForce,
}

/// What `claimed-generation` says, in a [`ClaimError::OtherGeneration`].
fn generation_words(found: Option<&str>) -> String {
    match found {
        Some(text) => format!("says {text:?}"),
        None => "is not set".to_owned(),
    }
}

/// The `preflight.dev/` annotations that `new` adds or changes against
/// `old`, sorted. Removing one weakens no claim, so removals are not listed.
pub(crate) fn written_claims<'a>(
    old: Option<&ClusterVersion>,
    new: &'a ClusterVersion,
) -> Vec<&'a str> {
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

/// A claim to force the gate for the requested target, valid on its face; it
/// still needs the requester to be authorized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ForceClaim {
    /// How it forces: [`OverrideKind::Force`] or [`OverrideKind::DesiredUpdateForce`].
    pub kind: OverrideKind,
    pub reason: String,
}

/// Whether `preflight.dev/claimed-generation` names `current`, the
/// generation of the spec being changed; why not, in a sentence, otherwise.
pub(crate) fn claimed_generation_is(
    cv: &ClusterVersion,
    current: Option<i64>,
) -> Result<(), ClaimError> {
    let claimed = cv.annotation(CLAIMED_GENERATION);
    match (claimed.and_then(|c| c.trim().parse::<i64>().ok()), current) {
        (Some(claimed), Some(current)) if claimed == current => Ok(()),
        (_, Some(current)) => Err(ClaimError::OtherGeneration {
            found: claimed.map(|text| crate::model::text::clean(text, 40)),
            current,
        }),
        (_, None) => Err(ClaimError::NoGeneration),
    }
}

/// What is wrong with the bounds of the claims a write adds or changes:
/// an override needs its `override-until`, an accept its `accept-for`,
/// `accept-reason` and `accept-until`, each within `max`. `None` when all
/// hold.
pub(crate) fn unbounded_claim(
    cv: &ClusterVersion,
    written: &[&str],
    now: Timestamp,
    max: Duration,
) -> Option<ClaimError> {
    let touches = |keys: &[&str]| keys.iter().any(|k| written.contains(k));
    let present = |key: &str| cv.annotation(key).is_some();
    if present(OVERRIDE) && touches(&[OVERRIDE, OVERRIDE_REASON, OVERRIDE_UNTIL]) {
        if let Err(why) = reason_in(cv, OVERRIDE, OVERRIDE_REASON) {
            return Some(why);
        }
        if let Err(why) = claim_until(cv, OVERRIDE_UNTIL, now, max) {
            return Some(why);
        }
    }
    let accept_keys = [
        ACCEPT,
        ACCEPT_FOR,
        ACCEPT_REASON,
        ACCEPT_UNTIL,
        ACCEPT_FINDINGS,
    ];
    if present(ACCEPT) && touches(&accept_keys) {
        if !present(ACCEPT_FOR) {
            return Some(ClaimError::AcceptForNone);
        }
        if let Err(why) = reason_in(cv, ACCEPT, ACCEPT_REASON) {
            return Some(why);
        }
        if let Err(why) = claim_until(cv, ACCEPT_UNTIL, now, max) {
            return Some(why);
        }
        if let Err(why) = accept_findings(cv) {
            return Some(why);
        }
    }
    None
}

/// When a claim stops counting: the `until` annotation is required, and at
/// most `max` ahead of `now`, so no claim outlives the change it was for.
/// The time is read as every claimed time is ([`window::claimed_time`]).
/// `Err` says what is wrong with it.
pub(crate) fn claim_until(
    cv: &ClusterVersion,
    until: &'static str,
    now: Timestamp,
    max: Duration,
) -> Result<Timestamp, ClaimError> {
    let Some(text) = cv.annotation(until) else {
        return Err(ClaimError::NoUntil { key: until, max });
    };
    Ok(window::claimed_time(
        TimeKind::ClaimUntil,
        until,
        text,
        now,
        Some(max),
    )?)
}

/// Reads the force claim of `cv` for `target`. `Err` says why a claim that
/// was made is ignored; `Ok(None)` means no claim was made.
pub(crate) fn force_claim(
    cv: &ClusterVersion,
    target: &Target,
    honor_desired_update_force: bool,
    now: Timestamp,
    max: Duration,
) -> Result<Option<ForceClaim>, ClaimError> {
    if let Some(named) = cv.annotation(OVERRIDE) {
        if !target.is_named_by(named) {
            return Err(ClaimError::OverrideForOther {
                named: named.to_owned(),
                target: target.display(),
            });
        }
        let reason = reason_in(cv, OVERRIDE, OVERRIDE_REASON)?;
        claim_until(cv, OVERRIDE_UNTIL, now, max)?;
        return Ok(Some(ForceClaim {
            kind: OverrideKind::Force,
            reason,
        }));
    }
    let forced = cv.spec.desired_update.as_ref().is_some_and(|u| u.force);
    match (forced, honor_desired_update_force) {
        (true, true) => Ok(Some(ForceClaim {
            kind: OverrideKind::DesiredUpdateForce,
            reason: "spec.desiredUpdate.force is true".to_owned(),
        })),
        (true, false) => Err(ClaimError::DesiredUpdateForce),
        (false, _) => Ok(None),
    }
}

/// Check names accepted as risks, by where they were written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// `spec.desiredUpdate.acceptRisks[].name`, written with the target:
    /// OpenShift's own field, which has no place to say what it saw.
    pub in_spec: BTreeSet<String>,
    /// The comma-separated `preflight.dev/accept` annotation, a claim whose
    /// writer is recorded, bound to the findings in
    /// `preflight.dev/accept-findings`.
    pub in_annotation: BoundAccept,
}

/// The check names `cv` accepts as risks for `target`. The annotation
/// counts only while it names this target in `preflight.dev/accept-for`
/// and its `preflight.dev/accept-until` holds; otherwise its names are left
/// out, and the error says why.
pub(crate) fn accepted_checks(
    cv: &ClusterVersion,
    target: &Target,
    now: Timestamp,
    max: Duration,
) -> (Accepted, Option<ClaimError>) {
    let mut accepted = accepted_names(cv);
    if accepted.in_annotation.names.is_empty() {
        return (accepted, None);
    }
    let bound = match cv.annotation(ACCEPT_FOR) {
        None => Err(ClaimError::AcceptForNone),
        Some(named) if !target.is_named_by(named) => Err(ClaimError::AcceptForOther {
            named: named.to_owned(),
            target: target.display(),
        }),
        Some(_) => reason_in(cv, ACCEPT, ACCEPT_REASON)
            .and_then(|_| claim_until(cv, ACCEPT_UNTIL, now, max))
            .and_then(|_| accept_findings(cv)),
    };
    match bound {
        Ok(findings) => {
            accepted.in_annotation.findings = findings;
            (accepted, None)
        }
        Err(why) => {
            accepted.in_annotation = BoundAccept::default();
            (accepted, Some(why))
        }
    }
}

/// The findings `preflight.dev/accept` was written against, by check, or
/// why there are none to go by.
fn accept_findings(cv: &ClusterVersion) -> Result<BTreeMap<String, BTreeSet<String>>, ClaimError> {
    let Some(text) = cv.annotation(ACCEPT_FINDINGS) else {
        return Err(ClaimError::NoFindings);
    };
    serde_json::from_str(text).map_err(ClaimError::BadFindings)
}

/// Why `preflight.dev/accept`'s checks are accepted, if a reason is given.
pub(crate) fn accept_reason(cv: &ClusterVersion) -> Option<String> {
    reason_in(cv, ACCEPT, ACCEPT_REASON).ok()
}

/// The reason a claim (`claim`) gives in the annotation `key`, trimmed, or
/// why it is none: an auditor reads it later, so an empty one, the `<why>`
/// a denial's command leaves to fill in, and other placeholders are
/// refused, saying what to write instead.
pub(crate) fn reason_in(
    cv: &ClusterVersion,
    claim: &'static str,
    key: &'static str,
) -> Result<String, ClaimError> {
    let Some(text) = cv.annotation(key) else {
        return Err(ClaimError::NoReason { claim, key });
    };
    let reason = text.trim();
    if is_placeholder(reason) {
        return Err(ClaimError::Placeholder {
            key,
            reason: reason.to_owned(),
        });
    }
    Ok(reason.to_owned())
}

/// Words that stand where a reason should be.
const PLACEHOLDERS: &[&str] = &[
    "why",
    "reason",
    "because",
    "todo",
    "tbd",
    "tba",
    "fixme",
    "xxx",
    "none",
    "na",
    "n/a",
    "nil",
    "null",
    "test",
    "testing",
    "asdf",
    "foo",
    "bar",
    "placeholder",
    "override",
    "accept",
    "ok",
    "yes",
    "no",
    "x",
    "-",
    "?",
    "...",
];

/// An empty text, one with no letter, one in angle brackets (`<why>`,
/// `<reason>`), or a word of [`PLACEHOLDERS`] alone.
fn is_placeholder(reason: &str) -> bool {
    let bare = reason
        .trim_matches(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '.' | '!'))
        .to_ascii_lowercase();
    bare.chars().filter(|c| c.is_alphabetic()).count() < 2
        || (bare.starts_with('<') && bare.ends_with('>'))
        || PLACEHOLDERS.contains(&bare.as_str())
}

/// Every name `cv` accepts, wherever it was written, bound or not.
fn accepted_names(cv: &ClusterVersion) -> Accepted {
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
        in_annotation: BoundAccept {
            names: names(&mut cv.annotation(ACCEPT).into_iter().flat_map(|v| v.split(','))),
            findings: BTreeMap::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::is_placeholder;
    use rstest::rstest;

    #[rstest]
    #[case::empty("", true)]
    #[case::spaces("   ", true)]
    #[case::the_denials_own("<why>", true)]
    #[case::quoted_placeholder("'<why>'", true)]
    #[case::any_angle_brackets("<reason here>", true)]
    #[case::a_word("TODO", true)]
    #[case::dashes("--", true)]
    #[case::na("n/a", true)]
    #[case::a_ticket("CHG0012345", false)]
    #[case::short_but_real("CVE fix", false)]
    #[case::a_sentence("known issue, tracked", false)]
    #[case::mentions_why("why: etcd alert is stale after the member swap", false)]
    fn a_reason_is_a_reason(#[case] text: &str, #[case] placeholder: bool) {
        assert_eq!(is_placeholder(text), placeholder, "{text:?}");
    }
}
