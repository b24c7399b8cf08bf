//! What the webhook decides: reviews and their latency, reviews in flight,
//! honoured overrides, and which targets are blocked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

use super::{PREFIX, register, target_label};
use crate::model::standing::OverrideKind;

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

/// The webhook's series.
#[derive(Clone)]
pub struct AdmissionMetrics {
    /// Reviews by operation, decision (allowed/denied) and reason.
    reviews: IntCounterVec,
    /// Time from a body being read to its answer being ready.
    decision_seconds: Histogram,
    in_flight: IntGauge,
    /// Honoured overrides by kind.
    overrides: IntCounterVec,
    /// Allowed decisions whose change was never stored.
    unstored: IntCounter,
    /// Stored changes that reviews of different requesters claimed.
    ambiguous: IntCounter,
    /// Run requests refused: their requester was past the limit.
    run_requests_refused: IntCounter,
    /// 1 while the last request for a target was denied, by `target_version`.
    update_blocked: IntGaugeVec,
    /// When a request for a target was last denied, by `target_version`.
    update_denied_at: GaugeVec,
    /// When a change of target was last allowed (or the target cleared).
    target_settled_at: Gauge,
    blocked: Arc<Mutex<BlockedTargets>>,
}

impl AdmissionMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let reviews = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "admission_reviews_total",
                    "Admission reviews answered, by operation, decision and reason.",
                )
                .namespace(PREFIX),
                &["operation", "decision", "reason"],
            )?,
        )?;
        let overrides = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "overrides_total",
                    "Overrides honoured, by kind (force, desired_update_force, accept_risks).",
                )
                .namespace(PREFIX),
                &["kind"],
            )?,
        )?;
        // From zero, so that `increase()` sees the first override too.
        for kind in <OverrideKind as strum::IntoEnumIterator>::iter() {
            overrides.with_label_values(&[kind.as_str()]);
        }
        let unstored = register(
            registry,
            IntCounter::with_opts(
                Opts::new(
                    "decisions_unstored_total",
                    "Allowed decisions whose change the ClusterVersion's watch did not show stored in time: a write refused after the gate, or a review the API server did not send. Their Events, override counts and unblocking were not recorded.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let ambiguous = register(
            registry,
            IntCounter::with_opts(
                Opts::new(
                    "decisions_ambiguous_total",
                    "Stored changes that allowed decisions of different requesters claimed (on this replica or across replicas): where the API server does not authenticate itself to the gate, a review may be forged, so the record names every requester and says it cannot tell which made the change.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let run_requests_refused = register(
            registry,
            IntCounter::with_opts(
                Opts::new(
                    "run_requests_refused_total",
                    "Run requests (UpdatePreflights created, stamped or changed) refused because their requester had asked for --max-run-requests in the last 10 minutes.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let decision_seconds = register(
            registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "admission_duration_seconds",
                    "Time to answer an admission review, from body read to answer.",
                )
                .namespace(PREFIX)
                .buckets(LATENCY_BUCKETS.to_vec()),
            )?,
        )?;
        let in_flight = register(
            registry,
            IntGauge::with_opts(
                Opts::new("admission_in_flight", "Admission reviews being answered.")
                    .namespace(PREFIX),
            )?,
        )?;
        let update_blocked = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "update_blocked",
                    "1 while the last request for the target was denied; 0 once one is allowed or the cluster accepted another target.",
                )
                .namespace(PREFIX),
                &["target_version"],
            )?,
        )?;
        let update_denied_at = register(
            registry,
            GaugeVec::new(
                Opts::new(
                    "update_last_denied_timestamp_seconds",
                    "When a request for the target was last denied by this replica, as a Unix timestamp.",
                )
                .namespace(PREFIX),
                &["target_version"],
            )?,
        )?;
        let target_settled_at = register(
            registry,
            Gauge::with_opts(
                Opts::new(
                    "target_change_last_accepted_timestamp_seconds",
                    "When this replica last allowed a change of the update target (or its removal), as a Unix timestamp; 0 if never.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        Ok(Self {
            reviews,
            decision_seconds,
            in_flight,
            overrides,
            unstored,
            ambiguous,
            run_requests_refused,
            update_blocked,
            update_denied_at,
            target_settled_at,
            blocked: Arc::default(),
        })
    }

    /// A review is being answered: it counts in flight until the guard is
    /// dropped.
    pub(crate) fn review_started(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// A review was answered `took` after its body was read. `operation` is
    /// `None` for a review too malformed to name one (label `unknown`);
    /// `reason` is the decision's reason label.
    pub fn review_decided(
        &self,
        operation: Option<&str>,
        allowed: bool,
        reason: &str,
        took: Duration,
    ) {
        let decision = if allowed { "allowed" } else { "denied" };
        self.reviews
            .with_label_values(&[operation.unwrap_or("unknown"), decision, reason])
            .inc();
        self.decision_seconds.observe(took.as_secs_f64());
    }

    /// An override of `kind` let a change through, and the change was
    /// stored (never on a dry run).
    pub(crate) fn override_honoured(&self, kind: OverrideKind) {
        self.overrides.with_label_values(&[kind.as_str()]).inc();
    }

    /// `count` allowed decisions were never stored.
    pub(crate) fn decisions_unstored(&self, count: u64) {
        self.unstored.inc_by(count);
    }

    /// A run request was refused: its requester was past the limit.
    pub(crate) fn run_request_refused(&self) {
        self.run_requests_refused.inc();
    }

    /// A stored change was claimed by decisions of different requesters.
    pub(crate) fn decision_ambiguous(&self) {
        self.ambiguous.inc();
    }

    /// A request for `target` (a version, or an image) was denied at `now`
    /// (Unix seconds).
    pub fn target_denied(&self, target: &str, now: f64) {
        let label = target_label(target);
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        self.forget(blocked.touch(label));
        self.update_blocked.with_label_values(&[label]).set(1);
        self.update_denied_at.with_label_values(&[label]).set(now);
    }

    /// A change of target was allowed (`target` is `None` when the target was
    /// cleared) at `now`: the cluster no longer waits on any blocked target.
    pub fn target_settled(&self, target: Option<&str>, now: f64) {
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(target) = target {
            let label = target_label(target);
            self.forget(blocked.touch(label));
            self.update_blocked.with_label_values(&[label]).set(0);
        }
        for label in blocked.order.keys() {
            self.update_blocked.with_label_values(&[label]).set(0);
        }
        self.target_settled_at.set(now);
    }

    /// Removes the blocked-state series of targets evicted by the cap.
    fn forget(&self, evicted: Vec<String>) {
        for label in evicted {
            let _ = self.update_blocked.remove_label_values(&[&label]);
            let _ = self.update_denied_at.remove_label_values(&[&label]);
        }
    }
}

/// Counts a review in flight for as long as it lives.
#[must_use = "the review counts in flight only while the guard lives"]
pub struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
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

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::{exported, value};
    use super::*;

    fn blocked(m: &Metrics, target: &str) -> Option<f64> {
        value(
            m,
            &format!(r#"preflight_gate_update_blocked{{target_version="{target}"}}"#),
        )
    }

    #[test]
    fn a_denial_blocks_its_target_until_a_target_change_is_allowed() {
        let m = Metrics::new().unwrap();
        let accepted_at = "preflight_gate_target_change_last_accepted_timestamp_seconds";
        m.admission.target_denied("4.15.3", 100.0);
        m.admission.target_denied("quay.io/x@sha256:ab", 101.0);
        assert_eq!(blocked(&m, "4.15.3"), Some(1.0));
        assert_eq!(blocked(&m, "unknown"), Some(1.0));
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_update_last_denied_timestamp_seconds{target_version="4.15.3"}"#
            ),
            Some(100.0)
        );
        assert_eq!(value(&m, accepted_at), Some(0.0));
        m.admission.target_settled(Some("4.14.12"), 200.0);
        assert_eq!(blocked(&m, "4.15.3"), Some(0.0));
        assert_eq!(blocked(&m, "unknown"), Some(0.0));
        assert_eq!(blocked(&m, "4.14.12"), Some(0.0));
        assert_eq!(value(&m, accepted_at), Some(200.0));
        m.admission.target_denied("4.15.3", 300.0);
        assert_eq!(blocked(&m, "4.15.3"), Some(1.0));
        m.admission.target_settled(None, 400.0);
        assert_eq!(blocked(&m, "4.15.3"), Some(0.0));
        assert_eq!(value(&m, accepted_at), Some(400.0));
    }

    #[test]
    fn blocked_targets_are_capped_by_dropping_the_oldest() {
        let m = Metrics::new().unwrap();
        for i in 0..MAX_BLOCKED_TARGETS + 10 {
            m.admission.target_denied(&format!("4.15.{i}"), i as f64);
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
    fn a_decided_review_is_counted_by_its_labels_and_timed() {
        let m = Metrics::new().unwrap();
        m.admission
            .review_decided(Some("UPDATE"), false, "failed", Duration::from_millis(3));
        m.admission
            .review_decided(Some("UPDATE"), true, "passed", Duration::from_millis(20));
        m.admission
            .review_decided(None, false, "malformed", Duration::from_micros(50));
        let reviews = exported(&m, "preflight_gate_admission_reviews_total{");
        assert_eq!(
            reviews,
            [
                r#"preflight_gate_admission_reviews_total{decision="allowed",operation="UPDATE",reason="passed"} 1"#,
                r#"preflight_gate_admission_reviews_total{decision="denied",operation="UPDATE",reason="failed"} 1"#,
                r#"preflight_gate_admission_reviews_total{decision="denied",operation="unknown",reason="malformed"} 1"#,
            ]
        );
        assert_eq!(
            value(&m, "preflight_gate_admission_duration_seconds_count"),
            Some(3.0)
        );
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_admission_duration_seconds_bucket{le="0.005"}"#
            ),
            Some(2.0)
        );
        let sum = value(&m, "preflight_gate_admission_duration_seconds_sum").unwrap();
        assert!((sum - 0.02305).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn a_review_is_in_flight_while_its_guard_lives() {
        let m = Metrics::new().unwrap();
        let in_flight = |m: &Metrics| value(m, "preflight_gate_admission_in_flight");
        let first = m.admission.review_started();
        let second = m.admission.review_started();
        assert_eq!(in_flight(&m), Some(2.0));
        drop(first);
        assert_eq!(in_flight(&m), Some(1.0));
        drop(second);
        assert_eq!(in_flight(&m), Some(0.0));
    }

    #[test]
    fn honoured_overrides_are_counted_by_kind() {
        let m = Metrics::new().unwrap();
        m.admission.override_honoured(OverrideKind::AcceptRisks);
        m.admission.override_honoured(OverrideKind::AcceptRisks);
        m.admission.override_honoured(OverrideKind::Force);
        assert_eq!(
            exported(&m, "preflight_gate_overrides_total{"),
            [
                r#"preflight_gate_overrides_total{kind="accept_risks"} 2"#,
                r#"preflight_gate_overrides_total{kind="desired_update_force"} 0"#,
                r#"preflight_gate_overrides_total{kind="force"} 1"#,
            ]
        );
    }
}
