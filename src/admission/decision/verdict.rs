//! The answer to a review, and the question it may wait for: whether the
//! requester holds the verb a claim or an override needs.

use std::collections::BTreeMap;

use crate::admission::audit;
use crate::admission::message;
use crate::admission::ports::Verb;
use crate::admission::review::{Request, UserInfo};
use crate::model::cluster_version::Target;
use crate::model::standing::OverrideKind;

/// Why a request was decided as it was. A bounded set, used as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
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
    /// `spec.desiredUpdate.force` set by someone not allowed to override:
    /// the gate's own refusal, not a preflight failure.
    ForceRefused,
    /// A change of what the cluster trusts (`spec.upstream`, signature
    /// stores, overrides, capabilities) by someone not allowed to override.
    TrustChangeRefused,
    /// The release's object is not a result the gate vouches for.
    NotVouched,
    /// The target image is named by a tag, which can move after a check.
    NotADigest,
    /// The update may not finish within the maintenance window
    /// (`preflight.dev/window-end`), or the window cannot be read.
    OutsideWindow,
    /// A hosted cluster's write the gate cannot decide: it does not serve
    /// hosted control planes, or has not seen the HostedCluster.
    NotServed,
    /// HyperShift would not take the update (a NodePool's version skew, or
    /// its control plane updating).
    HypershiftRefuses,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        self.into()
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
    pub(super) fn allow(reason: Reason) -> Self {
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

    pub(super) fn deny(reason: Reason, code: u16, message: String) -> Self {
        Self {
            allowed: false,
            code,
            message,
            ..Self::allow(reason)
        }
    }

    pub(super) fn for_target(mut self, target: &Target) -> Self {
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

/// The outcome of [`super::decide`].
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
    pub(super) granted: Verdict,
    pub(super) refused: Verdict,
    /// What is asked for: an override used, or claims written.
    pub(super) asked: Asked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Asked {
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

impl Verdict {
    fn address(mut self, address: &message::Address) -> Self {
        let target = self.target.as_deref();
        self.message = address.apply(&self.message, target);
        self.warnings = self
            .warnings
            .iter()
            .map(|w| address.apply(w, target))
            .collect();
        self
    }
}

impl Decision {
    /// The decision with its commands acting on another object than the
    /// ClusterVersion (a HostedCluster, a NodePool).
    pub(super) fn address(self, address: &message::Address) -> Self {
        match self {
            Self::Final(verdict) => Self::Final(verdict.address(address)),
            Self::NeedsAuthorization(mut pending) => {
                pending.granted = pending.granted.address(address);
                pending.refused = pending.refused.address(address);
                Self::NeedsAuthorization(pending)
            }
        }
    }

    /// The verdict when no authorization is needed or it is refused up front.
    pub fn into_final(self) -> Option<Verdict> {
        match self {
            Self::Final(v) => Some(v),
            Self::NeedsAuthorization(_) => None,
        }
    }
}

/// The verdict a write gets once its requester is known to hold the
/// `override` verb; one access review answers every question of a write.
pub(super) fn granted_if_authorized(decision: Decision) -> Verdict {
    match decision {
        Decision::Final(verdict) => verdict,
        Decision::NeedsAuthorization(pending) => pending.granted,
    }
}

pub(super) fn needs_authorization(
    request: &Request,
    granted: Verdict,
    refused: Verdict,
) -> Decision {
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted,
        refused,
        asked: Asked::Override,
        verb: Verb::Override,
    }))
}

#[cfg(test)]
mod tests {
    use super::Reason;
    use crate::model::standing::OverrideKind;
    use strum::IntoEnumIterator;

    /// The metric labels are the names docs/metrics.md gives, in its order,
    /// each once: a new reason or override kind is documented as it lands.
    #[test]
    fn every_reason_and_override_kind_is_the_label_docs_metrics_lists() {
        let docs = include_str!("../../../docs/metrics.md");
        let row = |label: &str| -> Vec<String> {
            let line = docs
                .lines()
                .find(|l| l.starts_with(&format!("| {label} |")))
                .unwrap_or_else(|| panic!("docs/metrics.md has no {label} row"));
            line.split('|')
                .nth(2)
                .unwrap()
                .split(',')
                .map(|v| v.trim().trim_matches('`').to_owned())
                .collect()
        };
        let reasons: Vec<String> = Reason::iter().map(|r| r.as_str().to_owned()).collect();
        assert_eq!(reasons, row("`reason`"));
        let kinds: Vec<String> = OverrideKind::iter()
            .map(|k| k.as_str().to_owned())
            .collect();
        assert_eq!(kinds, row("`kind` (overrides)"));
    }
}
