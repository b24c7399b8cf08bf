//! The fleet's readiness ClusterClaims (`serve --cluster-claims`): what the
//! leader publishes to the hub, what OCM's limit leaves in the summary
//! alone, its writes, and when it last brought them all up to date, so that
//! a hub whose view of this cluster goes stale is seen here first
//! (`PreflightGateClusterClaimsFailing`).

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use strum::IntoEnumIterator;

use super::{PREFIX, register};
use crate::model::cluster_claim::Readiness;

/// What became of one write of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum ClusterClaimWrite {
    Created,
    Updated,
    Deleted,
    Failed,
}

impl ClusterClaimWrite {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The claims' series.
#[derive(Clone)]
pub struct ClusterClaimMetrics {
    /// Targets published, by readiness.
    published: IntGaugeVec,
    /// Offered targets beyond the claim limit: in the summary only.
    unpublished: IntGauge,
    /// Writes of ClusterClaims, by what became of them.
    writes: IntCounterVec,
    /// When the ClusterClaims were last all up to date (Unix seconds);
    /// when publishing began until then; 0 where this replica does not
    /// publish.
    last_published: IntGauge,
}

impl ClusterClaimMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let published = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "cluster_claims",
                    "Offered targets this cluster publishes as ClusterClaims, by readiness (Cleared, Blocked, Pending, Error); the leader's, with --cluster-claims.",
                )
                .namespace(PREFIX),
                &["state"],
            )?,
        )?;
        let unpublished = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "cluster_claims_unpublished",
                    "Offered targets beyond the ClusterClaim limit, named in the summary claim only.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let writes = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "cluster_claim_writes_total",
                    "Writes of the gate's ClusterClaims, by outcome (created, updated, deleted, failed).",
                )
                .namespace(PREFIX),
                &["outcome"],
            )?,
        )?;
        for outcome in ClusterClaimWrite::iter() {
            writes.with_label_values(&[outcome.as_str()]);
        }
        let last_published = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "cluster_claims_last_published_timestamp_seconds",
                    "When the leader last brought every ClusterClaim up to date (Unix seconds); when it began publishing, until then; 0 on a replica that does not publish.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let metrics = Self {
            published,
            unpublished,
            writes,
            last_published,
        };
        metrics.set_published(&[], 0);
        Ok(metrics)
    }

    /// Publishing begins (this replica leads): its clock starts.
    pub fn started(&self) {
        self.last_published.set(jiff::Timestamp::now().as_second());
    }

    /// Every ClusterClaim is up to date now: the targets published, and
    /// how many are in the summary alone.
    pub fn published(&self, readiness: &[Readiness], unpublished: usize) {
        self.set_published(readiness, unpublished);
        self.last_published.set(jiff::Timestamp::now().as_second());
    }

    fn set_published(&self, readiness: &[Readiness], unpublished: usize) {
        for state in Readiness::iter() {
            let count = readiness
                .iter()
                .filter(|r| r.word() == state.word())
                .count();
            self.published
                .with_label_values(&[state.word()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.unpublished
            .set(i64::try_from(unpublished).unwrap_or(i64::MAX));
    }

    /// A write of a claim ended so.
    pub fn wrote(&self, outcome: ClusterClaimWrite) {
        self.writes.with_label_values(&[outcome.as_str()]).inc();
    }

    /// This replica stopped publishing (it no longer leads): its figures go.
    pub fn stopped(&self) {
        self.set_published(&[], 0);
        self.last_published.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::value;
    use super::ClusterClaimWrite;
    use crate::model::cluster_claim::Readiness;

    #[test]
    fn targets_are_counted_by_readiness_and_writes_by_outcome() {
        let m = Metrics::new().unwrap();
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_cluster_claim_writes_total{outcome="failed"}"#
            ),
            Some(0.0)
        );
        m.cluster_claims.published(
            &[
                Readiness::Cleared,
                Readiness::Blocked(vec!["EtcdHealthy".into()]),
                Readiness::Cleared,
            ],
            3,
        );
        m.cluster_claims.wrote(ClusterClaimWrite::Created);
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Cleared"}"#),
            Some(2.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Blocked"}"#),
            Some(1.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Pending"}"#),
            Some(0.0)
        );
        assert_eq!(
            value(&m, "preflight_gate_cluster_claims_unpublished"),
            Some(3.0)
        );
        let last = "preflight_gate_cluster_claims_last_published_timestamp_seconds";
        let now = jiff::Timestamp::now().as_second() as f64;
        assert!(
            value(&m, last).is_some_and(|t| (now - t).abs() < 5.0),
            "{:?}",
            value(&m, last)
        );
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_cluster_claim_writes_total{outcome="created"}"#
            ),
            Some(1.0)
        );
        m.cluster_claims.stopped();
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Cleared"}"#),
            Some(0.0)
        );
        assert_eq!(value(&m, last), Some(0.0));
    }
}
