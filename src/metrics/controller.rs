//! The preflight controller: whether this replica leads, the runs it
//! finished, and how long completed updates took against the plan.

use std::time::Duration;

use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

use prometheus::core::Collector;

use super::{PREFIX, register};
use crate::model::Phase;

/// The controller's series.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// 1 while this replica holds the controller's Lease.
    leader: IntGauge,
    /// Preflight runs finished, by phase (Passed, Failed, Error).
    runs: IntCounterVec,
    /// Duration of preflight runs.
    run_seconds: Histogram,
    /// Completed updates: the control plane's duration over the plan's
    /// P50 for it, by the prediction's `source`.
    control_plane_ratio: HistogramVec,
}

/// The `source` label: where the control plane's prediction came from.
fn origin_label(origin: &str) -> &'static str {
    match origin {
        "history" => "history",
        "documented" => "documented",
        _ => "unknown",
    }
}

impl ControllerMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let leader = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "controller_leader",
                    "1 while this replica holds the preflight controller's Lease.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let runs = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "preflight_runs_total",
                    "Preflight runs finished, by phase (Passed, Failed, Error).",
                )
                .namespace(PREFIX),
                &["phase"],
            )?,
        )?;
        let run_seconds = register(
            registry,
            Histogram::with_opts(
                HistogramOpts::new(
                    "preflight_run_duration_seconds",
                    "Duration of preflight runs.",
                )
                .namespace(PREFIX)
                .buckets(vec![
                    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                ]),
            )?,
        )?;
        let control_plane_ratio = register(
            registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "control_plane_duration_ratio",
                    "Completed updates: how long the control plane took over the P50 the update plan predicted for it (1 as predicted, 2 twice as long), by the prediction's source (history, documented).",
                )
                .namespace(PREFIX)
                .buckets(vec![
                    0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0,
                ]),
                &["source"],
            )?,
        )?;
        Ok(Self {
            leader,
            runs,
            run_seconds,
            control_plane_ratio,
        })
    }

    /// An update completed, its control plane taking `actual` seconds where
    /// the plan (from `origin`, its `source` label) predicted a P50 of `predicted`.
    pub fn update_completed(&self, origin: &str, actual: u64, predicted: u64) {
        if predicted == 0 {
            return;
        }
        self.control_plane_ratio
            .with_label_values(&[origin_label(origin)])
            .observe(actual as f64 / predicted as f64);
    }

    /// Whether this replica holds the Lease now.
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Whether this replica was last said to hold the Lease.
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// A run ended in `phase` after `took`.
    pub fn run_finished(&self, phase: Phase, took: Duration) {
        self.runs.with_label_values(&[phase_label(phase)]).inc();
        self.run_seconds.observe(took.as_secs_f64());
    }

    /// Runs this replica finished, whatever their phase.
    pub fn runs_finished(&self) -> u64 {
        // Read from what is exported: asking for a phase's series by its
        // label would export it.
        self.runs
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|metric| metric.get_counter().get_value() as u64)
            .sum()
    }
}

/// The `phase` label: the phase's name, as the status writes it.
fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Running => "Running",
        Phase::Passed => "Passed",
        Phase::Failed => "Failed",
        Phase::Error => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::{exported, value};
    use super::*;

    #[test]
    fn leadership_is_one_while_held() {
        let m = Metrics::new().unwrap();
        assert!(!m.controller.is_leader());
        m.controller.leader(true);
        assert_eq!(value(&m, "preflight_gate_controller_leader"), Some(1.0));
        assert!(m.controller.is_leader());
        m.controller.leader(false);
        assert_eq!(value(&m, "preflight_gate_controller_leader"), Some(0.0));
        assert!(!m.controller.is_leader());
    }

    #[test]
    fn completed_updates_are_observed_as_actual_over_predicted_by_source() {
        let m = Metrics::new().unwrap();
        m.controller.update_completed("history", 4320, 3600);
        m.controller.update_completed("documented", 1800, 3600);
        m.controller.update_completed("made-up", 3600, 3600);
        m.controller.update_completed("history", 3600, 0);
        let bucket = |origin: &str, le: &str| {
            value(
                &m,
                &format!(
                    r#"preflight_gate_control_plane_duration_ratio_bucket{{source="{origin}",le="{le}"}}"#
                ),
            )
        };
        assert_eq!(bucket("history", "1.1"), Some(0.0));
        assert_eq!(bucket("history", "1.25"), Some(1.0));
        assert_eq!(bucket("documented", "0.5"), Some(1.0));
        assert_eq!(bucket("unknown", "1"), Some(1.0));
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_control_plane_duration_ratio_count{source="history"}"#
            ),
            Some(1.0),
            "no prediction, no ratio"
        );
    }

    #[test]
    fn finished_runs_are_counted_by_phase_and_timed() {
        let m = Metrics::new().unwrap();
        m.controller
            .run_finished(Phase::Passed, Duration::from_millis(800));
        m.controller
            .run_finished(Phase::Failed, Duration::from_secs(40));
        m.controller
            .run_finished(Phase::Failed, Duration::from_secs(3));
        assert_eq!(
            exported(&m, "preflight_gate_preflight_runs_total{"),
            [
                r#"preflight_gate_preflight_runs_total{phase="Failed"} 2"#,
                r#"preflight_gate_preflight_runs_total{phase="Passed"} 1"#,
            ]
        );
        assert_eq!(m.controller.runs_finished(), 3);
        assert_eq!(
            exported(&m, "preflight_gate_preflight_runs_total{").len(),
            2,
            "reading exports no other phase"
        );
        let bucket = |le: &str| {
            value(
                &m,
                &format!(r#"preflight_gate_preflight_run_duration_seconds_bucket{{le="{le}"}}"#),
            )
        };
        assert_eq!(bucket("1"), Some(1.0));
        assert_eq!(bucket("5"), Some(2.0));
        assert_eq!(bucket("60"), Some(3.0));
        let sum = value(&m, "preflight_gate_preflight_run_duration_seconds_sum").unwrap();
        assert!((sum - 43.8).abs() < 1e-9, "{sum}");
    }
}
