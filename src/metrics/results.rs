//! Preflight results: the webhook's cache of them and its watch, and the
//! results and offered targets the controller's leader exports.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::{GaugeVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::{PREFIX, register, target_label};
use crate::model::release::Version;
use crate::model::standing::{Exemptions, Standing};
use crate::model::{Outcome, Severity, UpdatePreflight};

/// The results' series.
#[derive(Clone)]
pub struct ResultMetrics {
    /// UpdatePreflight objects in the webhook's cache.
    cached: IntGauge,
    /// 1 while the results watch is healthy.
    watch_up: IntGauge,
    /// 1 pass, 0 fail, -1 error, by `check`, `target_version` and `severity`;
    /// set by the controller's leader from the results it reconciles.
    check_status: IntGaugeVec,
    /// `completionTime` of each target's results, by `target_version`.
    completed_at: GaugeVec,
    /// Targets the update graph offers: 1 recommended (`availableUpdates`),
    /// 0 conditional only; set by the controller's leader.
    target_recommended: IntGaugeVec,
    /// The update plan's P50 and P90 of each target's newest result, by
    /// `target_version` and `estimate` (`p50`, `p90`; not `quantile`, which
    /// Prometheus keeps for summaries).
    plan_seconds: GaugeVec,
    series: Arc<Mutex<ResultSeries>>,
}

impl ResultMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            register(
                registry,
                IntGauge::with_opts(Opts::new(name, help).namespace(PREFIX))?,
            )
        };
        let cached = gauge(
            "results_cached_objects",
            "UpdatePreflight objects in the webhook's results cache.",
        )?;
        let watch_up = gauge(
            "results_watch_up",
            "1 while the watch feeding the results cache is healthy.",
        )?;
        let check_status = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "check_status",
                    "Latest result of a check for a target: 1 pass, 0 fail, -1 error. Exported by the controller's leader.",
                )
                .namespace(PREFIX),
                &["check", "target_version", "severity"],
            )?,
        )?;
        let completed_at = register(
            registry,
            GaugeVec::new(
                Opts::new(
                    "result_completion_timestamp_seconds",
                    "When the latest preflight run for the target completed, as a Unix timestamp. Exported by the controller's leader.",
                )
                .namespace(PREFIX),
                &["target_version"],
            )?,
        )?;
        let target_recommended = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "target_recommended",
                    "Targets the update graph offers the cluster: 1 recommended (availableUpdates), 0 only conditional. Exported by the controller's leader.",
                )
                .namespace(PREFIX),
                &["target_version"],
            )?,
        )?;
        let plan_seconds = register(
            registry,
            GaugeVec::new(
                Opts::new(
                    "plan_duration_seconds",
                    "How long the update to the target is expected to take by the update plan of its latest result: estimate p50 and p90. Exported by the controller's leader.",
                )
                .namespace(PREFIX),
                &["target_version", "estimate"],
            )?,
        )?;
        Ok(Self {
            cached,
            watch_up,
            check_status,
            completed_at,
            target_recommended,
            plan_seconds,
            series: Arc::default(),
        })
    }

    /// The webhook's cache holds `objects` UpdatePreflights now.
    pub fn cached(&self, objects: usize) {
        self.cached.set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    /// Whether the watch feeding the webhook's cache is healthy now.
    pub(crate) fn watch_up(&self, up: bool) {
        self.watch_up.set(i64::from(up));
    }

    /// Exports the results of one `UpdatePreflight` (the controller calls
    /// this for every object it reconciles).
    pub fn observe(&self, object: &UpdatePreflight) {
        let mut series = self.lock();
        series.set(object);
        series.publish(self);
    }

    /// A mark to take before listing objects, for `retain`.
    pub fn mark(&self) -> u64 {
        self.lock().seq
    }

    /// After a full list taken since `mark`, forgets the objects not in it
    /// (deleted ones), except those observed after the mark.
    pub fn retain<'a>(&self, names: impl IntoIterator<Item = &'a str>, mark: u64) {
        let names: HashSet<&str> = names.into_iter().collect();
        let mut series = self.lock();
        series
            .objects
            .retain(|name, o| o.seen > mark || names.contains(name.as_str()));
        series.publish(self);
    }

    /// Stops exporting results and offered targets (leadership lost: the
    /// next leader exports them).
    pub fn clear(&self) {
        let mut series = self.lock();
        series.objects.clear();
        series.publish(self);
        self.target_recommended.reset();
    }

    /// The targets the update graph offers now, by version, and whether
    /// each is recommended. Targets without a version are left out.
    pub fn offered_targets<'a>(&self, offered: impl IntoIterator<Item = (&'a str, bool)>) {
        let mut now: HashMap<&str, bool> = HashMap::new();
        for (version, recommended) in offered {
            if Version::parse(version).is_some() {
                *now.entry(version).or_default() |= recommended;
            }
        }
        // Remove what is no longer offered, then set the rest: no series is
        // ever missing from a scrape while it is still offered.
        for family in self.target_recommended.collect() {
            for metric in family.get_metric() {
                let label = metric
                    .get_label()
                    .iter()
                    .find(|l| l.name() == "target_version")
                    .map(|l| l.value().to_owned());
                if let Some(label) = label
                    && !now.contains_key(label.as_str())
                {
                    let _ = self.target_recommended.remove_label_values(&[&label]);
                }
            }
        }
        for (version, recommended) in now {
            self.target_recommended
                .with_label_values(&[version])
                .set(i64::from(recommended));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ResultSeries> {
        self.series.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one object contributes: its target, completion and check results.
struct ObjectSeries {
    /// When it was observed (`ResultSeries::seq`).
    seen: u64,
    target: String,
    completed: f64,
    checks: Vec<(String, &'static str, i64)>,
    /// The plan's P50 and P90, in seconds, when the result has one.
    plan: Option<(u64, u64)>,
}

/// The result series and which label sets are exported now, so that series
/// of deleted objects and vanished checks are removed, never left behind.
#[derive(Default)]
struct ResultSeries {
    /// By object name (never a label).
    objects: HashMap<String, ObjectSeries>,
    /// Counts observations.
    seq: u64,
    checks: HashSet<[String; 3]>,
    targets: HashSet<String>,
    /// Targets whose plan is exported.
    planned: HashSet<String>,
}

impl ResultSeries {
    fn set(&mut self, object: &UpdatePreflight) {
        self.seq += 1;
        let name = object.metadata.name.clone().unwrap_or_default();
        let completed = object
            .status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .map(|t| t.0.as_millisecond() as f64 / 1000.0);
        let Some(completed) = completed else {
            self.objects.remove(&name);
            return;
        };
        let results = object.status.iter().flat_map(|s| &s.results);
        let checks = results
            .filter_map(|r| {
                let value = match r.outcome {
                    Outcome::Pass => 1,
                    Outcome::Fail => 0,
                    Outcome::Error => -1,
                    Outcome::Skipped => return None,
                };
                // As the one policy counts it: an error that fails open
                // does not block, whatever the check's severity.
                let warns = r.severity == Severity::Warning
                    || Exemptions::default().standing(r) == Standing::Warns;
                let severity = if warns { "warning" } else { "blocking" };
                Some((r.name.clone(), severity, value))
            })
            .collect();
        let target = target_label(object.spec.version.as_deref().unwrap_or("")).to_owned();
        let plan = object
            .status
            .as_ref()
            .and_then(|s| s.plan.as_ref())
            .map(|p| (p.p50_seconds, p.p90_seconds));
        self.objects.insert(
            name,
            ObjectSeries {
                seen: self.seq,
                target,
                completed,
                checks,
                plan,
            },
        );
    }

    /// Sets the series of the newest result per target; removes the rest.
    fn publish(&mut self, metrics: &ResultMetrics) {
        let mut newest: HashMap<&str, &ObjectSeries> = HashMap::new();
        for o in self.objects.values() {
            let slot = newest.entry(o.target.as_str()).or_insert(o);
            if o.completed > slot.completed {
                *slot = o;
            }
        }
        let mut checks = HashSet::new();
        let mut targets = HashSet::new();
        let mut planned = HashSet::new();
        for (target, o) in &newest {
            if let Some((p50, p90)) = o.plan {
                for (estimate, seconds) in [("p50", p50), ("p90", p90)] {
                    metrics
                        .plan_seconds
                        .with_label_values(&[target, estimate])
                        .set(seconds as f64);
                }
                planned.insert((*target).to_owned());
            }
            metrics
                .completed_at
                .with_label_values(&[target])
                .set(o.completed);
            targets.insert((*target).to_owned());
            for (check, severity, value) in &o.checks {
                metrics
                    .check_status
                    .with_label_values(&[check.as_str(), target, severity])
                    .set(*value);
                checks.insert([check.clone(), (*target).to_owned(), (*severity).to_owned()]);
            }
        }
        for gone in self.checks.difference(&checks) {
            let [check, target, severity] = gone;
            let _ = metrics
                .check_status
                .remove_label_values(&[check, target, severity]);
        }
        for gone in self.targets.difference(&targets) {
            let _ = metrics.completed_at.remove_label_values(&[gone]);
        }
        for gone in self.planned.difference(&planned) {
            for estimate in ["p50", "p90"] {
                let _ = metrics.plan_seconds.remove_label_values(&[gone, estimate]);
            }
        }
        self.checks = checks;
        self.targets = targets;
        self.planned = planned;
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::{exported, value};
    use super::*;
    use crate::model::{CheckResult, FailurePolicy, UpdatePreflightSpec, UpdatePreflightStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn result(name: &str, severity: Severity, outcome: Outcome) -> CheckResult {
        CheckResult::new(name, severity, outcome, "")
    }

    fn object(
        name: &str,
        version: &str,
        completed: &str,
        results: Vec<CheckResult>,
    ) -> UpdatePreflight {
        let mut o = UpdatePreflight::new(
            name,
            UpdatePreflightSpec {
                image: format!("q@sha256:{name}"),
                version: Some(version.into()),
                checks: Vec::new(),
            },
        );
        o.status = Some(UpdatePreflightStatus {
            completion_time: Some(Time(completed.parse().unwrap())),
            results,
            ..Default::default()
        });
        o
    }

    fn status(m: &Metrics, check: &str, target: &str, severity: &str) -> Option<f64> {
        value(
            m,
            &format!(
                r#"preflight_gate_check_status{{check="{check}",severity="{severity}",target_version="{target}"}}"#
            ),
        )
    }

    fn recommended(m: &Metrics, target: &str) -> Option<f64> {
        value(
            m,
            &format!(r#"preflight_gate_target_recommended{{target_version="{target}"}}"#),
        )
    }

    #[test]
    fn check_status_follows_the_newest_result_and_forgets_deleted_objects() {
        let m = Metrics::new().unwrap();
        let failing = object(
            "a",
            "4.15.3",
            "2026-11-30T10:00:00Z",
            vec![
                result("ClusterOperatorsHealthy", Severity::Blocking, Outcome::Fail),
                result("EtcdHealthy", Severity::Blocking, Outcome::Error),
                result("NodesReady", Severity::Warning, Outcome::Pass),
                result("RemovedAPIs", Severity::Blocking, Outcome::Skipped),
            ],
        );
        m.results.observe(&failing);
        let status = |check: &str, severity: &str| status(&m, check, "4.15.3", severity);
        assert_eq!(status("ClusterOperatorsHealthy", "blocking"), Some(0.0));
        assert_eq!(status("EtcdHealthy", "blocking"), Some(-1.0));
        assert_eq!(status("NodesReady", "warning"), Some(1.0));
        assert_eq!(
            exported(&m, "preflight_gate_check_status{").len(),
            3,
            "skipped checks are not exported"
        );
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_result_completion_timestamp_seconds{target_version="4.15.3"}"#
            ),
            Some(1_796_032_800.0)
        );
        // A newer result for the same target, from another object, wins; an
        // older one does not.
        let newer = object(
            "b",
            "4.15.3",
            "2026-11-30T11:00:00Z",
            vec![result(
                "ClusterOperatorsHealthy",
                Severity::Blocking,
                Outcome::Pass,
            )],
        );
        m.results.observe(&newer);
        let lines = exported(&m, "preflight_gate_check_status{");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with(" 1"), "{lines:?}");
        // Object b deleted: a full list without it brings a's results back;
        // an empty one removes every series, but for objects seen since the
        // list was taken.
        let mark = m.results.mark();
        m.results.retain(["a"], mark);
        assert_eq!(exported(&m, "preflight_gate_check_status{").len(), 3);
        let mark = m.results.mark();
        m.results.observe(&newer);
        m.results.retain([], mark);
        assert_eq!(exported(&m, "preflight_gate_check_status{").len(), 1);
        let mark = m.results.mark();
        m.results.retain([], mark);
        assert!(exported(&m, "preflight_gate_check_status{").is_empty());
        assert!(exported(&m, "preflight_gate_result_completion_timestamp_seconds{").is_empty());
        m.results.observe(&failing);
        m.results.clear();
        assert!(exported(&m, "preflight_gate_check_status{").is_empty());
    }

    fn planned_seconds(m: &Metrics, target: &str, estimate: &str) -> Option<f64> {
        value(
            m,
            &format!(
                r#"preflight_gate_plan_duration_seconds{{estimate="{estimate}",target_version="{target}"}}"#
            ),
        )
    }

    #[test]
    fn the_plan_of_each_targets_newest_result_is_exported_and_withdrawn_with_it() {
        let m = Metrics::new().unwrap();
        let mut planned = object("a", "4.15.3", "2026-11-30T10:00:00Z", Vec::new());
        planned.status.as_mut().unwrap().plan = Some(crate::model::results::PlanSummary {
            p50_seconds: 7800,
            p90_seconds: 11100,
            ..Default::default()
        });
        m.results.observe(&planned);
        assert_eq!(planned_seconds(&m, "4.15.3", "p50"), Some(7800.0));
        assert_eq!(planned_seconds(&m, "4.15.3", "p90"), Some(11100.0));
        // A result without a plan (an older gate's, or a run that could
        // not read the cluster) exports none.
        m.results
            .observe(&object("b", "4.14.12", "2026-11-30T10:00:00Z", Vec::new()));
        assert_eq!(
            exported(&m, "preflight_gate_plan_duration_seconds{").len(),
            2
        );
        // A newer result for the target without a plan withdraws it; the
        // object's deletion too.
        m.results
            .observe(&object("c", "4.15.3", "2026-11-30T11:00:00Z", Vec::new()));
        assert!(exported(&m, "preflight_gate_plan_duration_seconds{").is_empty());
        let mark = m.results.mark();
        m.results.retain(["a"], mark);
        assert_eq!(planned_seconds(&m, "4.15.3", "p90"), Some(11100.0));
        m.results.clear();
        assert!(exported(&m, "preflight_gate_plan_duration_seconds{").is_empty());
    }

    #[test]
    fn an_error_that_fails_open_is_exported_as_a_warning() {
        let m = Metrics::new().unwrap();
        let mut open = result("EtcdHealthy", Severity::Blocking, Outcome::Error);
        open.failure_policy = Some(FailurePolicy::FailOpen);
        m.results
            .observe(&object("a", "4.15.3", "2026-11-30T10:00:00Z", vec![open]));
        assert_eq!(
            exported(&m, "preflight_gate_check_status{"),
            [
                r#"preflight_gate_check_status{check="EtcdHealthy",severity="warning",target_version="4.15.3"} -1"#
            ]
        );
    }

    #[test]
    fn an_object_without_a_completed_run_exports_nothing_and_withdraws_its_results() {
        let m = Metrics::new().unwrap();
        let done = object(
            "a",
            "4.15.3",
            "2026-11-30T10:00:00Z",
            vec![result("NodesReady", Severity::Blocking, Outcome::Pass)],
        );
        m.results.observe(&done);
        assert_eq!(status(&m, "NodesReady", "4.15.3", "blocking"), Some(1.0));
        // Rerun: the status loses its completion time until the run ends.
        let mut running = done.clone();
        running.status.as_mut().unwrap().completion_time = None;
        m.results.observe(&running);
        assert!(exported(&m, "preflight_gate_check_status{").is_empty());
        assert!(exported(&m, "preflight_gate_result_completion_timestamp_seconds{").is_empty());
    }

    #[test]
    fn offered_targets_follow_the_graph() {
        let m = Metrics::new().unwrap();
        m.results.offered_targets([
            ("4.14.12", true),
            ("4.15.3", true),
            ("4.15.16", false),
            ("", true),
        ]);
        assert_eq!(recommended(&m, "4.15.3"), Some(1.0));
        assert_eq!(recommended(&m, "4.15.16"), Some(0.0));
        assert_eq!(exported(&m, "preflight_gate_target_recommended{").len(), 3);
        // 4.15.3 withdrawn, 4.15.16 now recommended.
        m.results
            .offered_targets([("4.14.12", true), ("4.15.16", false), ("4.15.16", true)]);
        let lines = exported(&m, "preflight_gate_target_recommended{");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(recommended(&m, "4.15.16"), Some(1.0));
        m.results.clear();
        assert!(exported(&m, "preflight_gate_target_recommended{").is_empty());
    }

    #[test]
    fn the_cache_and_its_watch_are_exported_as_set() {
        let m = Metrics::new().unwrap();
        m.results.cached(7);
        m.results.watch_up(true);
        assert_eq!(
            value(&m, "preflight_gate_results_cached_objects"),
            Some(7.0)
        );
        assert_eq!(value(&m, "preflight_gate_results_watch_up"), Some(1.0));
        m.results.cached(0);
        m.results.watch_up(false);
        assert_eq!(
            value(&m, "preflight_gate_results_cached_objects"),
            Some(0.0)
        );
        assert_eq!(value(&m, "preflight_gate_results_watch_up"), Some(0.0));
    }
}
