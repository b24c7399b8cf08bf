//! Hosted control planes (`serve --hosted-control-planes`): the hosted
//! clusters this replica follows, the results it holds for them, and its
//! reads of their guests. Labels stay bounded: a phase or a result, never
//! a hosted cluster's name (the log and the results themselves name it).

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::{PREFIX, register};
use crate::model::Phase;

/// The phases a held result is counted by.
const PHASES: [Phase; 3] = [Phase::Passed, Phase::Failed, Phase::Error];

/// The hosted results' series.
#[derive(Clone)]
pub struct HostedMetrics {
    /// HostedClusters the watch holds.
    clusters: IntGauge,
    /// 1 while the watches of HostedClusters, NodePools and the HyperShift
    /// operator's supported versions are all healthy.
    watch_up: IntGauge,
    /// Results held, by phase.
    results: IntGaugeVec,
    /// Reads of a hosted cluster through its admin kubeconfig, by result.
    reads: IntCounterVec,
}

impl HostedMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            register(
                registry,
                IntGauge::with_opts(Opts::new(name, help).namespace(PREFIX))?,
            )
        };
        let clusters = gauge(
            "hosted_clusters",
            "HostedClusters this replica's watch holds (with --hosted-control-planes).",
        )?;
        let watch_up = gauge(
            "hosted_watch_up",
            "1 while the watches of HostedClusters, NodePools and HyperShift's supported versions are healthy.",
        )?;
        let results = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "hosted_results",
                    "Results this replica holds for the targets of its hosted clusters, by phase (Passed, Failed, Error).",
                )
                .namespace(PREFIX),
                &["phase"],
            )?,
        )?;
        let reads = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "hosted_reads_total",
                    "Reads of a hosted cluster through its admin kubeconfig, by result (success, failure).",
                )
                .namespace(PREFIX),
                &["result"],
            )?,
        )?;
        for result in ["success", "failure"] {
            reads.with_label_values(&[result]);
        }
        let metrics = Self {
            clusters,
            watch_up,
            results,
            reads,
        };
        // Every phase starts at 0, so a query sees none held.
        metrics.held([]);
        Ok(metrics)
    }

    /// The watch holds `count` HostedClusters now.
    pub fn clusters(&self, count: usize) {
        self.clusters.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Whether the watches are all healthy now.
    pub fn watch_up(&self, up: bool) {
        self.watch_up.set(i64::from(up));
    }

    /// The phases of every result held now (a result still without one is
    /// not counted).
    pub fn held(&self, phases: impl IntoIterator<Item = Phase>) {
        let mut counts = [0i64; PHASES.len()];
        for phase in phases {
            if let Some(i) = PHASES.iter().position(|p| *p == phase) {
                counts[i] += 1;
            }
        }
        for (phase, count) in PHASES.iter().zip(counts) {
            self.results
                .with_label_values(&[&format!("{phase:?}")])
                .set(count);
        }
    }

    /// A read of a hosted cluster ended.
    pub fn read(&self, succeeded: bool) {
        let result = if succeeded { "success" } else { "failure" };
        self.reads.with_label_values(&[result]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::value;
    use crate::model::Phase;

    #[test]
    fn results_are_counted_by_phase_and_reads_by_result() {
        let m = Metrics::new().unwrap();
        assert_eq!(
            value(&m, r#"preflight_gate_hosted_reads_total{result="failure"}"#),
            Some(0.0)
        );
        m.hosted
            .held([Phase::Failed, Phase::Passed, Phase::Failed, Phase::Running]);
        m.hosted.read(true);
        assert_eq!(
            value(&m, r#"preflight_gate_hosted_results{phase="Failed"}"#),
            Some(2.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_hosted_results{phase="Error"}"#),
            Some(0.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_hosted_reads_total{result="success"}"#),
            Some(1.0)
        );
        m.hosted.held([]);
        assert_eq!(
            value(&m, r#"preflight_gate_hosted_results{phase="Failed"}"#),
            Some(0.0)
        );
    }
}
