//! Built-in preflight checks: pure, sync functions over a read-only
//! [`ClusterView`], one module per check. [`crate::suite`] runs a selection of the
//! catalogue and returns the results an `UpdatePreflight` records.

mod admin_acks;
mod certificates_expiring;
mod cluster_operators;
mod cluster_version;
mod critical_alerts;
mod drain_capacity;
mod drains_complete;
mod etcd;
pub mod hosted;
mod ingress_certificate;
mod machine_config_pools;
mod nodes_ready;
mod olm_operators;
mod operators_upgradeable;
mod pod_disruption_budgets;
mod precheck_alerts;
mod removed_apis;
mod target_recommended;
mod update_path;
mod x509;

#[cfg(test)]
mod fixture;

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use jiff::Timestamp;

use crate::model::Finding;
use crate::model::Target;
use crate::model::cluster_version::ArchitectureChange;
use crate::model::release::{ReleaseKey, UpdateKind, Version, describe_move};
use crate::model::{CheckResult, Severity};
use crate::view::ClusterView;
use crate::view::kinds::Kind;

/// What every check is given.
pub struct Context<'a> {
    pub view: &'a ClusterView,
    pub target: &'a Target,
    /// The target's version, when known.
    pub target_version: Option<Version>,
    /// The version the cluster last completed, else the one it is moving to
    /// (during an install, `status.desired`: the version being installed).
    pub current: Option<Version>,
    /// Patch, minor or major, when both versions are known.
    pub kind: Option<UpdateKind>,
    /// The time of the data, which every check judges by (durations,
    /// certificate expiry): a snapshot's own time, else the clock.
    pub now: Timestamp,
    /// How `now` was found, in words.
    pub now_source: &'a str,
    /// An update is in progress and the target stays within its minor
    /// version: the usual way out of a stuck update, to a fixed z-stream.
    /// Pools Updating and nodes cordoned by that update are then its
    /// doing, and warn rather than block.
    pub retarget_within_minor: bool,
    /// The target is the update in progress, asked for again: the CVO
    /// accepted it already and reads nothing anew (not `Upgradeable`).
    pub reasks_running_update: bool,
    /// The names accepted for this update, where they are known when the
    /// checks run (`check --accept`); empty for a run whose results are
    /// kept, which the policy weighs against each review's names.
    pub accepted: &'a BTreeSet<String>,
}

/// Nothing accepted.
static NONE_ACCEPTED: BTreeSet<String> = BTreeSet::new();

impl<'a> Context<'a> {
    /// A context for checking `view`; `clock` is the time to judge by when
    /// the data carries none of its own (live data).
    pub fn new(view: &'a ClusterView, target: &'a Target, clock: Timestamp) -> Self {
        // An install in progress has completed no version: the one it
        // installs (`status.desired`) is what an update starts from.
        let current = view
            .cluster_version
            .as_ref()
            .and_then(|cv| cv.completed_version().or_else(|| cv.desired_version()));
        let (now, now_source) = match &view.as_of {
            Some(as_of) => (as_of.time, as_of.found_by.as_str()),
            None => (clock, "the clock"),
        };
        let target_version = target.version.as_deref().and_then(Version::parse);
        let kind = match (&current, &target_version) {
            (Some(current), Some(target)) => Some(UpdateKind::between(current, target)),
            _ => None,
        };
        let update = view
            .cluster_version
            .as_ref()
            .and_then(|cv| cv.update_in_progress());
        let updating_to = update.and_then(|update| Version::parse(&update.version));
        let retarget_within_minor = updating_to
            .as_ref()
            .zip(target_version.as_ref())
            .is_some_and(|(updating, target)| updating.line() == target.line());
        // The same release by its image, or by its version where the
        // image is not known; on the same architecture.
        let reasks_running_update = update.is_some_and(|update| {
            target.architecture.is_none()
                && ((!update.image.is_empty()
                    && ReleaseKey::from_image(&update.image) == target.key)
                    || (updating_to.is_some() && updating_to == target_version))
        });
        Self {
            view,
            target,
            target_version,
            current,
            kind,
            now,
            now_source,
            retarget_within_minor,
            reasks_running_update,
            accepted: &NONE_ACCEPTED,
        }
    }

    /// The context with the names accepted for this update.
    pub fn accepting(self, accepted: &'a BTreeSet<String>) -> Self {
        Self { accepted, ..self }
    }

    /// A pool rolling now (a MachineConfig change, with no update of the
    /// cluster in progress), before a patch update: to settle before the
    /// update starts, which warns, where across minors it blocks. The
    /// pools and the nodes their rollout cordons are judged by this one
    /// rule (MachineConfigPoolsHealthy, NodesReady).
    pub(crate) fn rollout_settles(&self) -> bool {
        !self.retarget_within_minor
            && matches!(self.kind, Some(UpdateKind::Patch))
            && self
                .view
                .cluster_version
                .as_ref()
                .is_none_or(|cv| cv.update_in_progress().is_none())
    }

    /// The target as a person names it.
    pub(crate) fn target_name(&self) -> String {
        self.target.display()
    }

    /// How a person names the move to the target (`patch`, `minor`,
    /// `pre-release step`, `rollback`, `same`, a change of architecture),
    /// when both versions are known.
    pub fn move_name(&self) -> Option<&'static str> {
        match self.target.architecture {
            Some(ArchitectureChange::ToMulti) => Some("multi-architecture migration"),
            Some(ArchitectureChange::FromMulti)
                if self
                    .view
                    .cluster_version
                    .as_ref()
                    .is_some_and(|cv| cv.multi_migration().is_some()) =>
            {
                Some("migration abandoned")
            }
            Some(ArchitectureChange::FromMulti) => Some("single-architecture move"),
            None => {
                let (current, target) = self.current.as_ref().zip(self.target_version.as_ref())?;
                Some(describe_move(current, target))
            }
        }
    }
}

/// One built-in check.
pub trait Check: Send + Sync {
    /// CamelCase, acceptable through `acceptRisks`.
    fn name(&self) -> &'static str;
    fn severity(&self) -> Severity;
    /// The update kinds this check applies to.
    fn applies_to(&self) -> &'static [UpdateKind] {
        UpdateKind::ALL
    }
    fn evaluate(&self, ctx: &Context) -> Finding;
}

/// Every built-in check.
pub fn catalogue() -> Vec<Box<dyn Check>> {
    vec![
        Box::new(cluster_version::ClusterVersionState),
        Box::new(update_path::UpdatePath),
        Box::new(target_recommended::TargetRecommended),
        Box::new(cluster_operators::ClusterOperatorsHealthy),
        Box::new(operators_upgradeable::ClusterOperatorsUpgradeable),
        Box::new(olm_operators::OlmOperatorsCompatible),
        Box::new(nodes_ready::NodesReady),
        Box::new(machine_config_pools::MachineConfigPoolsHealthy),
        Box::new(pod_disruption_budgets::PodDisruptionBudgetsAllowDrain),
        Box::new(drain_capacity::DrainCapacity),
        Box::new(drains_complete::DrainsComplete),
        Box::new(removed_apis::RemovedApisInUse),
        Box::new(admin_acks::AdminAcksMissing),
        Box::new(critical_alerts::CriticalAlertsFiring),
        Box::new(precheck_alerts::PrecheckAlertsFiring),
        Box::new(etcd::EtcdHealthy),
        Box::new(ingress_certificate::IngressCertificateCompatible),
        Box::new(certificates_expiring::CertificatesExpiringSoon),
    ]
}

/// Runs one check: Skipped when it does not apply to this kind of update,
/// an Error when it panics. Pure: the suite runner above times it and
/// bounds it.
pub(crate) fn result_of(check: &dyn Check, ctx: &Context) -> CheckResult {
    let finding = match ctx.kind {
        Some(kind) if !check.applies_to().contains(&kind) => {
            Finding::skipped(format!("does not apply to a {kind:?} update").to_lowercase())
        }
        _ => catch_unwind(AssertUnwindSafe(|| check.evaluate(ctx))).unwrap_or_else(|_| {
            Finding::error("the check failed unexpectedly; see the gate's log")
        }),
    };
    CheckResult {
        name: check.name().to_owned(),
        severity: finding.severity.unwrap_or_else(|| check.severity()),
        outcome: finding.outcome,
        message: finding.message,
        risks: finding.risks,
        items: finding.items,
        subjects: finding.subjects.into_vec(),
        remediation_url: finding.url,
        duration: None,
        failure_policy: None,
    }
    .entered()
}

/// Stops a check whose data was not loaded: a warning naming the first
/// missing kind, an Error when it could not be read, or Skipped with why it
/// was withheld (the operator chose not to read it).
pub fn require(view: &ClusterView, kinds: &[Kind]) -> Result<(), Finding> {
    if let Some(why) = kinds.iter().find_map(|k| view.withheld.get(k.name)) {
        return Err(Finding::skipped(why.clone()));
    }
    if let Some((kind, why)) = kinds
        .iter()
        .find_map(|k| view.unreadable.get(k.name).map(|why| (k.name, why)))
    {
        return Err(Finding::error(format!("cannot list {kind} objects: {why}")));
    }
    // Missing data is never a silent skip: the check could not look, and
    // the summary counts it among the warnings.
    match kinds.iter().find(|k| !view.has(k)) {
        Some(kind) => Err(Finding::warn(format!(
            "no {} objects in the cluster data: this check could not look",
            kind.name
        ))),
        None => Ok(()),
    }
}

/// What a hosted cluster (HyperShift; [`ClusterView::hosted`]) does not
/// have of its own, said once: its checks are skipped there, never a
/// look that found nothing nor a failure.
pub(crate) const NOT_IN_A_HOSTED_CLUSTER: &str = "does not apply: a hosted cluster's control plane and its machine configuration run on the management cluster";

/// The finding of a check of what a hosted cluster does not have: what
/// it lacks, and who looks after it instead.
pub(crate) fn not_in_a_hosted_cluster(instead: &str) -> Finding {
    Finding::skipped(format!("{NOT_IN_A_HOSTED_CLUSTER} ({instead})"))
}

/// The finding of a check that needs the target's version while it is
/// unknown: failing, never skipped, since what it would have found is not
/// known. The version is only ever taken from the update graph or the
/// release's own metadata.
pub(crate) fn version_unknown(needed_for: &str) -> Finding {
    Finding::fail(format!(
        "version unknown: the target's version is needed to {needed_for}, and neither the update graph nor the release's metadata gives it"
    ))
}

/// `namespace/name`.
pub(crate) fn qualified(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::release::is_image;
    use crate::model::{Outcome, Resolution};
    use crate::view::kinds;
    use rstest::rstest;
    use serde_json::json;

    fn view() -> ClusterView {
        let mut cv = fixture::cluster_version("4.15.3");
        cv["status"]["availableUpdates"] =
            json!([{"version": "4.15.10", "image": "quay.io/r@sha256:aa"}]);
        cv["status"]["conditionalUpdates"] =
            json!([{"release": {"version": "4.16.2", "image": "quay.io/r@sha256:bb"}}]);
        fixture::view(vec![cv])
    }

    #[rstest]
    #[case::available_version("4.15.10", Some(("quay.io/r@sha256:aa", Some("4.15.10"))))]
    #[case::conditional_version("4.16.2", Some(("quay.io/r@sha256:bb", Some("4.16.2"))))]
    #[case::unknown_version("4.16.9", None)]
    #[case::known_image(
        "mirror.example/r@sha256:bb",
        Some(("mirror.example/r@sha256:bb", Some("4.16.2")))
    )]
    #[case::unknown_image("quay.io/r@sha256:cc", Some(("quay.io/r@sha256:cc", None)))]
    fn a_name_on_the_command_line_resolves_as_the_webhook_resolves_desired_update(
        #[case] to: &str,
        #[case] expected: Option<(&str, Option<&str>)>,
    ) {
        let view = view();
        let named = view.resolve(to);
        // The same rule as a spec.desiredUpdate that names `to`.
        let mut cv = view.cluster_version.clone().unwrap();
        cv.spec.desired_update = Some(crate::model::cluster_version::DesiredUpdate {
            image: is_image(to).then(|| to.to_owned()),
            version: (!is_image(to)).then(|| to.to_owned()),
            ..Default::default()
        });
        assert_eq!(named, cv.resolve_target());
        match (named, expected) {
            (Resolution::Target(t), Some((image, version))) => {
                assert_eq!((t.image.as_str(), t.version.as_deref()), (image, version));
            }
            (Resolution::UnknownVersion(v), None) => assert_eq!(v, to),
            (other, expected) => panic!("{to}: {other:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn a_warning_finding_counts_as_a_warning_and_panics_are_errors() {
        struct Warns;
        impl Check for Warns {
            fn name(&self) -> &'static str {
                "Warns"
            }
            fn severity(&self) -> Severity {
                Severity::Blocking
            }
            fn evaluate(&self, _: &Context) -> Finding {
                Finding::warn("only a warning")
            }
        }
        struct Panics;
        impl Check for Panics {
            fn name(&self) -> &'static str {
                "Panics"
            }
            fn severity(&self) -> Severity {
                Severity::Blocking
            }
            fn evaluate(&self, _: &Context) -> Finding {
                panic!("bad data")
            }
        }
        let view = view();
        let target = Target::image("quay.io/r@sha256:aa", Some("4.15.10".into()));
        let ctx = Context::new(&view, &target, fixture::NOW.parse().unwrap());
        let checks: Vec<Box<dyn Check>> = vec![Box::new(Warns), Box::new(Panics)];
        let results: Vec<CheckResult> =
            checks.iter().map(|c| result_of(c.as_ref(), &ctx)).collect();
        assert_eq!(
            (results[0].outcome, results[0].severity),
            (Outcome::Fail, Severity::Warning)
        );
        assert_eq!(results[1].outcome, Outcome::Error);
        let summary = crate::model::standing::Exemptions::default().summarize(&results);
        assert_eq!(
            (summary.warnings, summary.failing, summary.errored),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_kind_that_could_not_be_listed_is_an_error_not_a_skip() {
        let mut view = view();
        view.unreadable.insert(
            kinds::SECRET.name.to_owned(),
            "secrets is forbidden: User \"support\" cannot list resource \"secrets\"".to_owned(),
        );
        let finding = require(&view, &[kinds::NODE, kinds::SECRET]).unwrap_err();
        assert_eq!(finding.outcome, Outcome::Error);
        assert!(
            finding
                .message
                .starts_with("cannot list Secret objects: secrets is forbidden")
        );
        let missing = require(&view, &[kinds::NODE]).unwrap_err();
        assert_eq!(
            (missing.outcome, missing.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "missing data warns, never a silent skip"
        );
        assert!(require(&view, &[kinds::CLUSTER_VERSION]).is_ok());
    }

    #[test]
    fn a_kind_the_gate_was_told_not_to_read_is_a_skip_that_says_why() {
        let mut view = view();
        view.withheld.insert(
            kinds::SECRET.name.to_owned(),
            crate::view::TLS_SECRETS_WITHHELD.to_owned(),
        );
        let finding = require(&view, &[kinds::SECRET]).unwrap_err();
        assert_eq!(finding.outcome, Outcome::Skipped);
        assert!(
            finding
                .message
                .starts_with("TLS Secrets are not read: the gate runs without --read-tls-secrets"),
            "{}",
            finding.message
        );
        // Both certificate checks say so, neither blocks.
        let target = Target::image("q@sha256:aa", None);
        let ctx = Context::new(&view, &target, "2026-11-30T12:00:00Z".parse().unwrap());
        for name in ["CertificatesExpiringSoon", "IngressCertificateCompatible"] {
            let check = catalogue().into_iter().find(|c| c.name() == name).unwrap();
            let finding = check.evaluate(&ctx);
            assert_eq!(
                finding.outcome,
                Outcome::Skipped,
                "{name}: {}",
                finding.message
            );
            assert!(finding.message.contains("--read-tls-secrets"), "{name}");
        }
    }

    #[test]
    fn every_check_name_is_acceptable_as_a_risk_name() {
        let mut names = std::collections::BTreeSet::new();
        for check in catalogue() {
            let name = check.name();
            assert!(name.starts_with(|c: char| c.is_ascii_uppercase()), "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'),
                "{name}"
            );
            assert!(names.insert(name), "{name} twice");
        }
    }
}
