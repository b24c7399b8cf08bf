//! The gate's Prometheus metrics. One registry is built in `serve`; every
//! label comes from a bounded set (never a user, an object name or an error).
//! The catalogue, with what each series means for an operator, is
//! `docs/metrics.md`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::model::policy::{Blocking, OverrideKind, Standing};
use crate::model::release::Version;
use crate::model::{Outcome, Severity, UpdatePreflight};

const PREFIX: &str = "preflight_gate";

/// Decision latency buckets: 100 µs up to the API server's 10 s webhook limit.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Most targets whose blocked state is kept. The update graph offers a
/// handful; a target given as a version outside it is denied before it gets
/// here, and targets named by image alone share the label `unknown`. The cap
/// bounds the series even so: beyond it, the target touched longest ago is
/// dropped.
pub const MAX_BLOCKED_TARGETS: usize = 64;

/// The `target_version` label of a target named `display` (a version, or an
/// image when the version is not known): the version, or `unknown`.
pub fn target_label(display: &str) -> &str {
    if Version::parse(display).is_some() {
        display
    } else {
        "unknown"
    }
}

/// Metrics of the webhook and its TLS.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// Reviews by operation, decision (allowed/denied) and reason.
    pub reviews: IntCounterVec,
    /// Time from a body being read to its answer being ready.
    pub decision_seconds: Histogram,
    pub in_flight: IntGauge,
    /// Honoured overrides by kind.
    pub overrides: IntCounterVec,
    /// Certificate reloads by result (`success`, `failure`).
    pub tls_reloads: IntCounterVec,
    /// `notAfter` of the serving certificate, as a Unix timestamp.
    pub tls_cert_expiry: Gauge,
    /// Side effects (runs, Events) started for non-dry-run reviews, by kind.
    pub effects: IntCounterVec,
    /// Side effects (runs, Events) that could not be carried out, by kind.
    pub effect_failures: IntCounterVec,
    /// UpdatePreflight objects in the webhook's cache.
    pub results_cached: IntGauge,
    /// 1 while the results watch is healthy.
    pub results_watch_up: IntGauge,
    /// 1 while this replica holds the controller's Lease.
    pub controller_leader: IntGauge,
    /// Preflight runs finished, by phase (Passed, Failed, Error).
    pub runs: IntCounterVec,
    /// Duration of preflight runs.
    pub run_seconds: Histogram,
    /// 1 while the last request for a target was denied, by `target_version`.
    pub update_blocked: IntGaugeVec,
    /// When a request for a target was last denied, by `target_version`.
    pub update_denied_at: GaugeVec,
    /// When a change of target was last allowed (or the target cleared).
    pub target_accepted_at: Gauge,
    /// 1 pass, 0 fail, -1 error, by `check`, `target_version` and `severity`;
    /// set by the controller's leader from the results it reconciles.
    pub check_status: IntGaugeVec,
    /// `completionTime` of each target's results, by `target_version`.
    pub result_completed_at: GaugeVec,
    /// Targets the update graph offers: 1 recommended (`availableUpdates`),
    /// 0 conditional only; set by the controller's leader.
    pub target_recommended: IntGaugeVec,
    blocked: Arc<Mutex<BlockedTargets>>,
    results: Arc<Mutex<ResultSeries>>,
}

impl Metrics {
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntCounterVec> {
                let c = IntCounterVec::new(Opts::new(name, help).namespace(PREFIX), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let reviews = counter(
            "admission_reviews_total",
            "Admission reviews answered, by operation, decision and reason.",
            &["operation", "decision", "reason"],
        )?;
        let overrides = counter(
            "overrides_total",
            "Overrides honoured, by kind (force, desired_update_force, accept_risks).",
            &["kind"],
        )?;
        let tls_reloads = counter(
            "tls_reloads_total",
            "Serving certificate reloads, by result (success, failure).",
            &["result"],
        )?;
        let effects = counter(
            "side_effects_total",
            "Runs and Events asked for by decisions on non-dry-run reviews, by kind (run, event).",
            &["kind"],
        )?;
        let effect_failures = counter(
            "side_effect_failures_total",
            "Runs or Events asked for by a decision that could not be carried out, by kind.",
            &["kind"],
        )?;
        let decision_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "admission_duration_seconds",
                "Time to answer an admission review, from body read to answer.",
            )
            .namespace(PREFIX)
            .buckets(LATENCY_BUCKETS.to_vec()),
        )?;
        registry.register(Box::new(decision_seconds.clone()))?;
        let in_flight = IntGauge::with_opts(
            Opts::new("admission_in_flight", "Admission reviews being answered.").namespace(PREFIX),
        )?;
        registry.register(Box::new(in_flight.clone()))?;
        let tls_cert_expiry = Gauge::with_opts(
            Opts::new(
                "tls_certificate_expiry_timestamp_seconds",
                "notAfter of the serving certificate in use, as a Unix timestamp.",
            )
            .namespace(PREFIX),
        )?;
        registry.register(Box::new(tls_cert_expiry.clone()))?;
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            let g = IntGauge::with_opts(Opts::new(name, help).namespace(PREFIX))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let results_cached = gauge(
            "results_cached_objects",
            "UpdatePreflight objects in the webhook's results cache.",
        )?;
        let results_watch_up = gauge(
            "results_watch_up",
            "1 while the watch feeding the results cache is healthy.",
        )?;
        let controller_leader = gauge(
            "controller_leader",
            "1 while this replica holds the preflight controller's Lease.",
        )?;
        let runs = counter(
            "preflight_runs_total",
            "Preflight runs finished, by phase (Passed, Failed, Error).",
            &["phase"],
        )?;
        let run_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "preflight_run_duration_seconds",
                "Duration of preflight runs.",
            )
            .namespace(PREFIX)
            .buckets(vec![
                0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
            ]),
        )?;
        registry.register(Box::new(run_seconds.clone()))?;
        for result in ["success", "failure"] {
            tls_reloads.with_label_values(&[result]);
        }
        // From zero, so that `increase()` sees the first override too.
        for kind in [
            OverrideKind::Force,
            OverrideKind::DesiredUpdateForce,
            OverrideKind::AcceptRisks,
        ] {
            overrides.with_label_values(&[kind.as_str()]);
        }
        let update_blocked = IntGaugeVec::new(
            Opts::new(
                "update_blocked",
                "1 while the last request for the target was denied; 0 once one is allowed or the cluster accepted another target.",
            )
            .namespace(PREFIX),
            &["target_version"],
        )?;
        registry.register(Box::new(update_blocked.clone()))?;
        let update_denied_at = GaugeVec::new(
            Opts::new(
                "update_last_denied_timestamp_seconds",
                "When a request for the target was last denied by this replica, as a Unix timestamp.",
            )
            .namespace(PREFIX),
            &["target_version"],
        )?;
        registry.register(Box::new(update_denied_at.clone()))?;
        let target_accepted_at = Gauge::with_opts(
            Opts::new(
                "target_change_last_accepted_timestamp_seconds",
                "When this replica last allowed a change of the update target (or its removal), as a Unix timestamp; 0 if never.",
            )
            .namespace(PREFIX),
        )?;
        registry.register(Box::new(target_accepted_at.clone()))?;
        let check_status = IntGaugeVec::new(
            Opts::new(
                "check_status",
                "Latest result of a check for a target: 1 pass, 0 fail, -1 error. Exported by the controller's leader.",
            )
            .namespace(PREFIX),
            &["check", "target_version", "severity"],
        )?;
        registry.register(Box::new(check_status.clone()))?;
        let result_completed_at = GaugeVec::new(
            Opts::new(
                "result_completion_timestamp_seconds",
                "When the latest preflight run for the target completed, as a Unix timestamp. Exported by the controller's leader.",
            )
            .namespace(PREFIX),
            &["target_version"],
        )?;
        registry.register(Box::new(result_completed_at.clone()))?;
        let target_recommended = IntGaugeVec::new(
            Opts::new(
                "target_recommended",
                "Targets the update graph offers the cluster: 1 recommended (availableUpdates), 0 only conditional. Exported by the controller's leader.",
            )
            .namespace(PREFIX),
            &["target_version"],
        )?;
        registry.register(Box::new(target_recommended.clone()))?;
        Ok(Self {
            registry,
            reviews,
            decision_seconds,
            in_flight,
            overrides,
            tls_reloads,
            tls_cert_expiry,
            effects,
            effect_failures,
            results_cached,
            results_watch_up,
            controller_leader,
            runs,
            run_seconds,
            update_blocked,
            update_denied_at,
            target_accepted_at,
            check_status,
            result_completed_at,
            target_recommended,
            blocked: Arc::default(),
            results: Arc::default(),
        })
    }

    /// A request for `target` (a version, or an image) was denied at `now`
    /// (Unix seconds).
    pub fn target_denied(&self, target: &str, now: f64) {
        let label = target_label(target);
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        for evicted in blocked.touch(label) {
            let _ = self.update_blocked.remove_label_values(&[&evicted]);
            let _ = self.update_denied_at.remove_label_values(&[&evicted]);
        }
        self.update_blocked.with_label_values(&[label]).set(1);
        self.update_denied_at.with_label_values(&[label]).set(now);
    }

    /// A change of target was allowed (`target` is `None` when the target was
    /// cleared) at `now`: the cluster no longer waits on any blocked target.
    pub fn target_accepted(&self, target: Option<&str>, now: f64) {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(target) = target {
            let label = target_label(target);
            for evicted in blocked.touch(label) {
                let _ = self.update_blocked.remove_label_values(&[&evicted]);
                let _ = self.update_denied_at.remove_label_values(&[&evicted]);
            }
            self.update_blocked.with_label_values(&[label]).set(0);
        }
        for label in blocked.order.keys() {
            self.update_blocked.with_label_values(&[label]).set(0);
        }
        self.target_accepted_at.set(now);
    }

    /// Exports the results of one `UpdatePreflight` (the controller calls
    /// this for every object it reconciles).
    pub fn observe_result(&self, object: &UpdatePreflight) {
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        results.set(object);
        results.publish(self);
    }

    /// A mark to take before listing objects, for `retain_results`.
    pub fn results_mark(&self) -> u64 {
        self.results.lock().unwrap_or_else(|e| e.into_inner()).seq
    }

    /// After a full list taken since `mark`, forgets the objects not in it
    /// (deleted ones), except those observed after the mark.
    pub fn retain_results<'a>(&self, names: impl IntoIterator<Item = &'a str>, mark: u64) {
        let names: HashSet<&str> = names.into_iter().collect();
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        results
            .objects
            .retain(|name, o| o.seen > mark || names.contains(name.as_str()));
        results.publish(self);
    }

    /// Stops exporting results and offered targets (leadership lost: the
    /// next leader exports them).
    pub fn clear_results(&self) {
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        results.objects.clear();
        results.publish(self);
        self.target_recommended.reset();
    }

    /// The targets the update graph offers now, by version, and whether
    /// each is recommended. Targets without a version are left out.
    pub fn offered_targets<'a>(&self, offered: impl IntoIterator<Item = (&'a str, bool)>) {
        use prometheus::core::Collector;
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

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}

/// Targets with a blocked-state series, oldest touch first.
#[derive(Default)]
struct BlockedTargets {
    /// Label → when it was last touched (a counter, not a clock).
    order: HashMap<String, u64>,
    clock: u64,
}

impl BlockedTargets {
    /// Marks `label` as just touched; returns the labels evicted by the cap.
    fn touch(&mut self, label: &str) -> Vec<String> {
        self.clock += 1;
        self.order.insert(label.to_owned(), self.clock);
        let mut evicted = Vec::new();
        while self.order.len() > MAX_BLOCKED_TARGETS {
            let Some(oldest) = self
                .order
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(l, _)| l.clone())
            else {
                break;
            };
            self.order.remove(&oldest);
            evicted.push(oldest);
        }
        evicted
    }
}

/// What one object contributes: its target, completion and check results.
struct ObjectSeries {
    /// When it was observed (`ResultSeries::seq`).
    seen: u64,
    target: String,
    completed: f64,
    checks: Vec<(String, &'static str, i64)>,
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
                    || Blocking::default().standing(r) == Standing::Warns;
                let severity = if warns { "warning" } else { "blocking" };
                Some((r.name.clone(), severity, value))
            })
            .collect();
        let target = target_label(object.spec.version.as_deref().unwrap_or("")).to_owned();
        self.objects.insert(
            name,
            ObjectSeries {
                seen: self.seq,
                target,
                completed,
                checks,
            },
        );
    }

    /// Sets the series of the newest result per target; removes the rest.
    fn publish(&mut self, metrics: &Metrics) {
        let mut newest: HashMap<&str, &ObjectSeries> = HashMap::new();
        for o in self.objects.values() {
            let slot = newest.entry(o.target.as_str()).or_insert(o);
            if o.completed > slot.completed {
                *slot = o;
            }
        }
        let mut checks = HashSet::new();
        let mut targets = HashSet::new();
        for (target, o) in &newest {
            metrics
                .result_completed_at
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
            let _ = metrics.result_completed_at.remove_label_values(&[gone]);
        }
        self.checks = checks;
        self.targets = targets;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CheckResult, UpdatePreflightSpec, UpdatePreflightStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn result(name: &str, severity: Severity, outcome: Outcome) -> CheckResult {
        CheckResult {
            name: name.into(),
            severity,
            outcome,
            message: String::new(),
            remediation_url: None,
            duration: None,
            failure_policy: None,
        }
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

    fn exported(m: &Metrics, name: &str) -> Vec<String> {
        let mut lines: Vec<String> = m
            .render()
            .lines()
            .filter(|l| l.starts_with(name))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_denial_blocks_its_target_until_a_target_change_is_allowed() {
        let m = Metrics::new().unwrap();
        m.target_denied("4.15.3", 100.0);
        m.target_denied("quay.io/x@sha256:ab", 101.0);
        assert_eq!(m.update_blocked.with_label_values(&["4.15.3"]).get(), 1);
        assert_eq!(m.update_blocked.with_label_values(&["unknown"]).get(), 1);
        assert_eq!(
            m.update_denied_at.with_label_values(&["4.15.3"]).get(),
            100.0
        );
        assert_eq!(m.target_accepted_at.get(), 0.0);
        m.target_accepted(Some("4.14.12"), 200.0);
        assert_eq!(m.update_blocked.with_label_values(&["4.15.3"]).get(), 0);
        assert_eq!(m.update_blocked.with_label_values(&["unknown"]).get(), 0);
        assert_eq!(m.update_blocked.with_label_values(&["4.14.12"]).get(), 0);
        assert_eq!(m.target_accepted_at.get(), 200.0);
        m.target_denied("4.15.3", 300.0);
        assert_eq!(m.update_blocked.with_label_values(&["4.15.3"]).get(), 1);
        m.target_accepted(None, 400.0);
        assert_eq!(m.update_blocked.with_label_values(&["4.15.3"]).get(), 0);
    }

    #[test]
    fn blocked_targets_are_capped_by_dropping_the_oldest() {
        let m = Metrics::new().unwrap();
        for i in 0..MAX_BLOCKED_TARGETS + 10 {
            m.target_denied(&format!("4.15.{i}"), i as f64);
        }
        let series = exported(&m, "preflight_gate_update_blocked{");
        assert_eq!(series.len(), MAX_BLOCKED_TARGETS);
        assert!(
            !series.iter().any(|l| l.contains("\"4.15.9\"")),
            "{series:?}"
        );
        assert!(series.iter().any(|l| l.contains("\"4.15.10\"")));
        let stamps = exported(&m, "preflight_gate_update_last_denied_timestamp_seconds{");
        assert_eq!(stamps.len(), MAX_BLOCKED_TARGETS);
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
        m.observe_result(&failing);
        let status = |check: &str, severity: &str| {
            m.check_status
                .with_label_values(&[check, "4.15.3", severity])
                .get()
        };
        assert_eq!(status("ClusterOperatorsHealthy", "blocking"), 0);
        assert_eq!(status("EtcdHealthy", "blocking"), -1);
        assert_eq!(status("NodesReady", "warning"), 1);
        assert_eq!(
            exported(&m, "preflight_gate_check_status{").len(),
            3,
            "skipped checks are not exported"
        );
        assert_eq!(
            m.result_completed_at.with_label_values(&["4.15.3"]).get(),
            1_796_032_800.0
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
        m.observe_result(&newer);
        let lines = exported(&m, "preflight_gate_check_status{");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with(" 1"), "{lines:?}");
        // Object b deleted: a full list without it brings a's results back;
        // an empty one removes every series, but for objects seen since the
        // list was taken.
        let mark = m.results_mark();
        m.retain_results(["a"], mark);
        assert_eq!(exported(&m, "preflight_gate_check_status{").len(), 3);
        let mark = m.results_mark();
        m.observe_result(&newer);
        m.retain_results([], mark);
        assert_eq!(exported(&m, "preflight_gate_check_status{").len(), 1);
        let mark = m.results_mark();
        m.retain_results([], mark);
        assert!(exported(&m, "preflight_gate_check_status{").is_empty());
        assert!(exported(&m, "preflight_gate_result_completion_timestamp_seconds{").is_empty());
        m.observe_result(&failing);
        m.clear_results();
        assert!(exported(&m, "preflight_gate_check_status{").is_empty());
    }

    #[test]
    fn offered_targets_follow_the_graph() {
        let m = Metrics::new().unwrap();
        m.offered_targets([
            ("4.14.12", true),
            ("4.15.3", true),
            ("4.15.16", false),
            ("", true),
        ]);
        assert_eq!(m.target_recommended.with_label_values(&["4.15.3"]).get(), 1);
        assert_eq!(
            m.target_recommended.with_label_values(&["4.15.16"]).get(),
            0
        );
        assert_eq!(exported(&m, "preflight_gate_target_recommended{").len(), 3);
        // 4.15.3 withdrawn, 4.15.16 now recommended.
        m.offered_targets([("4.14.12", true), ("4.15.16", false), ("4.15.16", true)]);
        let lines = exported(&m, "preflight_gate_target_recommended{");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            m.target_recommended.with_label_values(&["4.15.16"]).get(),
            1
        );
        m.clear_results();
        assert!(exported(&m, "preflight_gate_target_recommended{").is_empty());
    }

    #[test]
    fn target_labels_are_versions_or_unknown() {
        assert_eq!(target_label("4.15.3"), "4.15.3");
        assert_eq!(target_label("4.16.0-ec.2"), "4.16.0-ec.2");
        assert_eq!(
            target_label("quay.io/openshift-release-dev/ocp-release@sha256:ab"),
            "unknown"
        );
        assert_eq!(target_label(""), "unknown");
    }
}
