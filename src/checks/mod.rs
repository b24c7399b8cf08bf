//! Built-in preflight checks: pure, sync functions over a read-only
//! [`ClusterView`], one module per check. [`run`] runs a selection of the
//! catalogue and returns the results an `UpdatePreflight` records.

mod admin_acks;
mod certificates_expiring;
mod cluster_operators;
mod cluster_version;
mod critical_alerts;
mod drain_capacity;
mod etcd;
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

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use jiff::Timestamp;

use crate::cluster::ClusterView;
use crate::preflight::{CheckResult, Outcome, Severity, Summary};
use crate::release::{UpdateKind, Version};

/// The release a run checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The pullspec; empty when only the version is known.
    pub image: String,
    pub version: Option<Version>,
}

impl Target {
    /// Resolves what a person asked for (`4.16.3`, or a pullspec) against
    /// the ClusterVersion, as the CVO does: an image stands for itself and
    /// its version is looked up; a version is looked up in
    /// `availableUpdates`, then `conditionalUpdates`, then the current
    /// release. A version found in none is still checked, by version only.
    /// Whether `to` is a pullspec rather than a version.
    pub fn is_image(to: &str) -> bool {
        to.contains('/') || to.contains('@')
    }

    pub fn resolve(view: &ClusterView, to: &str) -> Self {
        let to = to.trim();
        let releases: Vec<&crate::cluster::openshift::Release> = view
            .cluster_version
            .iter()
            .flat_map(|cv| {
                let s = &cv.status;
                s.available_updates
                    .iter()
                    .chain(s.conditional_updates.iter().map(|c| &c.release))
                    .chain(std::iter::once(&s.desired))
            })
            .collect();
        if Self::is_image(to) {
            let key = crate::release::ReleaseKey::from_image(to);
            let version = releases
                .iter()
                .find(|r| crate::release::ReleaseKey::from_image(&r.image) == key)
                .and_then(|r| Version::parse(&r.version));
            return Self {
                image: to.to_owned(),
                version,
            };
        }
        let version = Version::parse(to);
        let image = releases
            .iter()
            .find(|r| {
                !r.image.is_empty()
                    && (r.version == to
                        || Version::parse(&r.version) == version && version.is_some())
            })
            .map(|r| r.image.clone())
            .unwrap_or_default();
        Self { image, version }
    }
}

/// What every check is given.
pub struct Context<'a> {
    pub view: &'a ClusterView,
    pub target: &'a Target,
    /// The version the cluster last completed, else the one it is moving to.
    pub current: Option<Version>,
    /// Patch, minor or major, when both versions are known.
    pub kind: Option<UpdateKind>,
    /// The time of the data, which every check judges by (durations,
    /// certificate expiry): a snapshot's own time, else the clock.
    pub now: Timestamp,
    /// How `now` was found, in words.
    pub now_source: &'a str,
}

impl<'a> Context<'a> {
    /// A context for checking `view`; `clock` is the time to judge by when
    /// the data carries none of its own (live data).
    pub fn new(view: &'a ClusterView, target: &'a Target, clock: Timestamp) -> Self {
        // An install in progress has no current version: its one Partial
        // history entry is where it is going, not where it is.
        let current = view.cluster_version.as_ref().and_then(|cv| {
            cv.completed_version()
                .or_else(|| (!cv.installing()).then(|| cv.desired_version()).flatten())
        });
        let (now, now_source) = match &view.as_of {
            Some(as_of) => (as_of.time, as_of.source.as_str()),
            None => (clock, "the clock"),
        };
        let kind = match (&current, &target.version) {
            (Some(current), Some(target)) => Some(UpdateKind::between(current, target)),
            _ => None,
        };
        Self {
            view,
            target,
            current,
            kind,
            now,
            now_source,
        }
    }

    /// The target as a person names it.
    pub fn target_name(&self) -> String {
        self.target
            .version
            .as_ref()
            .map_or_else(|| self.target.image.clone(), Version::to_string)
    }
}

/// What a check concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub outcome: Outcome,
    pub message: String,
    pub url: Option<String>,
    /// A severity for this finding other than the check's own: a Blocking
    /// check may find something that only warrants a warning (a paused
    /// pool, a target unknown to the update graph, no alert data).
    pub severity: Option<Severity>,
}

impl Finding {
    pub fn pass(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Pass,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Fail,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    /// The check could not decide, e.g. for want of data.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    pub fn skipped(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Skipped,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    /// A failure that only warns, whatever the check's severity.
    pub fn warn(message: impl Into<String>) -> Self {
        Self {
            severity: Some(Severity::Warning),
            ..Self::fail(message)
        }
    }
    pub fn with_url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
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
    fn run(&self, ctx: &Context) -> Finding;
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
        Box::new(removed_apis::RemovedApisInUse),
        Box::new(admin_acks::AdminAcksMissing),
        Box::new(critical_alerts::CriticalAlertsFiring),
        Box::new(precheck_alerts::PrecheckAlertsFiring),
        Box::new(etcd::EtcdHealthy),
        Box::new(ingress_certificate::IngressCertificateCompatible),
        Box::new(certificates_expiring::CertificatesExpiringSoon),
    ]
}

/// Runs the checks named in `selection` (all when empty). A check that does
/// not apply to this kind of update is Skipped; one that panics is an Error.
pub fn run(checks: &[Box<dyn Check>], ctx: &Context, selection: &[String]) -> Vec<CheckResult> {
    checks
        .iter()
        .filter(|c| selection.is_empty() || selection.iter().any(|s| s == c.name()))
        .map(|check| {
            let started = Instant::now();
            let finding = match ctx.kind {
                Some(kind) if !check.applies_to().contains(&kind) => {
                    Finding::skipped(format!("does not apply to a {kind:?} update").to_lowercase())
                }
                _ => catch_unwind(AssertUnwindSafe(|| check.run(ctx))).unwrap_or_else(|_| {
                    Finding::error("the check failed unexpectedly; see the gate's log")
                }),
            };
            CheckResult {
                name: check.name().to_owned(),
                severity: finding.severity.unwrap_or_else(|| check.severity()),
                outcome: finding.outcome,
                message: finding.message,
                remediation_url: finding.url,
                duration: Some(format!("{:.3}s", started.elapsed().as_secs_f64())),
                failure_policy: None,
            }
        })
        .collect()
}

/// Counts over results.
pub fn summarize(results: &[CheckResult]) -> Summary {
    let mut s = Summary::default();
    for r in results {
        match (r.outcome, r.severity) {
            (Outcome::Pass, _) => s.passed += 1,
            (Outcome::Skipped, _) => s.skipped += 1,
            (Outcome::Fail, Severity::Blocking) => s.failing += 1,
            (Outcome::Fail, Severity::Warning) => s.warnings += 1,
            (Outcome::Error, severity) => {
                s.errored += 1;
                // A fail-open check's error does not block, as the webhook
                // decides it.
                let open = r.failure_policy == Some(crate::preflight::FailurePolicy::FailOpen);
                if severity == Severity::Blocking && !open {
                    s.failing += 1;
                }
            }
        }
    }
    s
}

/// Lists names for a message: `a, b, c and 4 more`.
pub fn list(names: &[String], max: usize) -> String {
    let shown = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        format!("{shown} and {} more", names.len() - max)
    } else {
        shown
    }
}

/// How much of an operator's message a finding quotes.
pub const EXCERPT: usize = 240;

/// The first line of `message`, cut to about `max` characters on a word
/// boundary: operators' messages can run to pages.
pub fn excerpt(message: Option<&str>, max: usize) -> String {
    let line = message
        .and_then(|m| m.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("no message");
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max).collect();
    let ends_a_word = line.chars().nth(max).is_some_and(char::is_whitespace);
    let cut = match cut.rsplit_once(' ') {
        Some((head, _)) if !ends_a_word => head,
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([',', ';', ':']))
}

/// `3h12m` since `then`.
pub fn since(then: Option<Timestamp>, now: Timestamp) -> String {
    match then {
        Some(then) => {
            crate::admission::message::short_duration(now.duration_since(then).unsigned_abs())
        }
        None => "an unknown time".to_owned(),
    }
}

/// Skips a check whose data was not loaded: `Err(Skipped)` naming the
/// first missing kind, or why it was not read.
pub fn require(view: &ClusterView, kinds: &[&str]) -> Result<(), Finding> {
    if let Some(why) = kinds.iter().find_map(|k| view.withheld.get(*k)) {
        return Err(Finding::skipped(why.clone()));
    }
    if let Some((kind, why)) = kinds
        .iter()
        .find_map(|k| view.unreadable.get(*k).map(|why| (k, why)))
    {
        return Err(Finding::error(format!("cannot list {kind} objects: {why}")));
    }
    match kinds.iter().find(|k| !view.has(k)) {
        Some(kind) => Err(Finding::skipped(format!(
            "no {kind} objects in the cluster data"
        ))),
        None => Ok(()),
    }
}

/// `namespace/name`.
pub fn qualified(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
    #[case::available_version("4.15.10", "quay.io/r@sha256:aa", Some("4.15.10"))]
    #[case::conditional_version("4.16.2", "quay.io/r@sha256:bb", Some("4.16.2"))]
    #[case::unknown_version("4.16.9", "", Some("4.16.9"))]
    #[case::known_image(
        "mirror.example/r@sha256:bb",
        "mirror.example/r@sha256:bb",
        Some("4.16.2")
    )]
    #[case::unknown_image("quay.io/r@sha256:cc", "quay.io/r@sha256:cc", None)]
    fn targets_resolve_like_the_cvo(
        #[case] to: &str,
        #[case] image: &str,
        #[case] version: Option<&str>,
    ) {
        let target = Target::resolve(&view(), to);
        assert_eq!(target.image, image);
        assert_eq!(target.version, version.and_then(Version::parse));
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
            fn run(&self, _: &Context) -> Finding {
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
            fn run(&self, _: &Context) -> Finding {
                panic!("bad data")
            }
        }
        let view = view();
        let target = Target::resolve(&view, "4.15.10");
        let ctx = Context::new(&view, &target, fixture::NOW.parse().unwrap());
        let checks: Vec<Box<dyn Check>> = vec![Box::new(Warns), Box::new(Panics)];
        let results = run(&checks, &ctx, &[]);
        assert_eq!(
            (results[0].outcome, results[0].severity),
            (Outcome::Fail, Severity::Warning)
        );
        assert_eq!(results[1].outcome, Outcome::Error);
        let summary = summarize(&results);
        assert_eq!(
            (summary.warnings, summary.failing, summary.errored),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_fail_open_error_is_counted_but_does_not_block() {
        let errored = |policy| CheckResult {
            name: "VendorCheck".into(),
            severity: Severity::Blocking,
            outcome: Outcome::Error,
            message: "cannot pull".into(),
            remediation_url: None,
            duration: None,
            failure_policy: policy,
        };
        let open = summarize(&[errored(Some(crate::preflight::FailurePolicy::FailOpen))]);
        assert_eq!((open.errored, open.failing), (1, 0));
        let closed = summarize(&[errored(Some(crate::preflight::FailurePolicy::FailClosed))]);
        assert_eq!((closed.errored, closed.failing), (1, 1));
        let unset = summarize(&[errored(None)]);
        assert_eq!((unset.errored, unset.failing), (1, 1));
    }

    #[rstest]
    #[case(Some("short"), "short")]
    #[case(Some("\nfirst line\nsecond"), "first line")]
    #[case(None, "no message")]
    #[case(Some("aaaa bbbb, cccc dddd"), "aaaa bbbb…")]
    #[case(Some("ééééééééééééééé"), "éééééééééé…")]
    fn excerpts(#[case] message: Option<&str>, #[case] expected: &str) {
        assert_eq!(excerpt(message, 10), expected);
    }

    #[test]
    fn a_kind_that_could_not_be_listed_is_an_error_not_a_skip() {
        let mut view = view();
        view.unreadable.insert(
            "Secret".to_owned(),
            "secrets is forbidden: User \"support\" cannot list resource \"secrets\"".to_owned(),
        );
        let finding = require(&view, &["Node", "Secret"]).unwrap_err();
        assert_eq!(finding.outcome, Outcome::Error);
        assert!(
            finding
                .message
                .starts_with("cannot list Secret objects: secrets is forbidden")
        );
        assert_eq!(
            require(&view, &["Node"]).unwrap_err().outcome,
            Outcome::Skipped
        );
        assert!(require(&view, &["ClusterVersion"]).is_ok());
    }

    #[test]
    fn a_kind_the_gate_was_told_not_to_read_is_a_skip_that_says_why() {
        let mut view = view();
        view.withheld.insert(
            "Secret".to_owned(),
            crate::cluster::live::TLS_SECRETS_WITHHELD.to_owned(),
        );
        let finding = require(&view, &["Secret"]).unwrap_err();
        assert_eq!(finding.outcome, Outcome::Skipped);
        assert!(
            finding
                .message
                .starts_with("TLS Secrets are not read: the gate runs without --read-tls-secrets"),
            "{}",
            finding.message
        );
        // Both certificate checks say so, neither blocks.
        let target = Target {
            image: "q@sha256:aa".into(),
            version: None,
        };
        let ctx = Context::new(&view, &target, "2026-11-30T12:00:00Z".parse().unwrap());
        for name in ["CertificatesExpiringSoon", "IngressCertificateCompatible"] {
            let check = catalogue().into_iter().find(|c| c.name() == name).unwrap();
            let finding = check.run(&ctx);
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
