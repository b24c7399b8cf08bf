//! Built-in preflight checks: pure, sync functions over a read-only
//! [`ClusterView`], one module per check. [`run`] runs a selection of the
//! catalogue and returns the results an `UpdatePreflight` records.

mod cluster_operators;
mod cluster_version;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use jiff::Timestamp;

use crate::cluster::ClusterView;
use crate::preflight::{CheckResult, Outcome, Severity, Summary};
use crate::release::{UpdateKind, Version};

/// The release a run checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub image: String,
    pub version: Option<Version>,
}

/// What every check is given.
pub struct Context<'a> {
    pub view: &'a ClusterView,
    pub target: &'a Target,
    /// The version the cluster last completed, else the one it is moving to.
    pub current: Option<Version>,
    /// Patch, minor or major, when both versions are known.
    pub kind: Option<UpdateKind>,
    pub now: Timestamp,
}

impl<'a> Context<'a> {
    pub fn new(view: &'a ClusterView, target: &'a Target, now: Timestamp) -> Self {
        let current = view
            .cluster_version
            .as_ref()
            .and_then(|cv| cv.completed_version().or_else(|| cv.desired_version()));
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
}

impl Finding {
    pub fn pass(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Pass,
            message: message.into(),
            url: None,
        }
    }
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Fail,
            message: message.into(),
            url: None,
        }
    }
    /// The check could not decide, e.g. for want of data.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error,
            message: message.into(),
            url: None,
        }
    }
    pub fn skipped(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Skipped,
            message: message.into(),
            url: None,
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
        Box::new(cluster_operators::ClusterOperatorsHealthy),
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
                severity: check.severity(),
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
                if severity == Severity::Blocking {
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

/// `3h12m` since `then`.
pub fn since(then: Option<Timestamp>, now: Timestamp) -> String {
    match then {
        Some(then) => {
            crate::admission::message::short_duration(now.duration_since(then).unsigned_abs())
        }
        None => "an unknown time".to_owned(),
    }
}
