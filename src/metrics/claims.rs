//! Readiness published for an Open Cluster Management hub
//! (`serve --cluster-claims`): the ClusterClaims the leader writes, one per
//! offered target (at most 10) and a summary, and its writes of them.
//! Labels stay bounded: a claim's state or a write's outcome, never a
//! version (the claims themselves name them).

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::{PREFIX, register};

/// The one-word values a target's claim takes, in the order they are
/// exported.
pub const CLAIM_STATES: [&str; 4] = ["Cleared", "Blocked", "Pending", "Error"];

/// What a write of a claim came to.
const OUTCOMES: [&str; 4] = ["created", "updated", "deleted", "failed"];

/// The claims' series.
#[derive(Clone)]
pub struct ClaimMetrics {
    /// Targets published as claims, by state.
    published: IntGaugeVec,
    /// Offered targets beyond the claims, in the summary only.
    unpublished: IntGauge,
    /// Writes of claims, by outcome.
    writes: IntCounterVec,
}

impl ClaimMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let published = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "cluster_claims",
                    "Offered targets the leader publishes as ClusterClaims (--cluster-claims), by state (Cleared, Blocked, Pending, Error).",
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
                    "Offered targets beyond the 10 per-target ClusterClaims, named in the summary claim only.",
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
        for outcome in OUTCOMES {
            writes.with_label_values(&[outcome]);
        }
        let metrics = Self {
            published,
            unpublished,
            writes,
        };
        // Every state starts at 0, so a query sees none published.
        metrics.published([], 0);
        Ok(metrics)
    }

    /// The states of the targets published now, and how many offered
    /// targets are in the summary only.
    pub fn published<'a>(&self, states: impl IntoIterator<Item = &'a str>, unpublished: usize) {
        let mut counts = [0i64; CLAIM_STATES.len()];
        for state in states {
            if let Some(i) = CLAIM_STATES.iter().position(|s| *s == state) {
                counts[i] += 1;
            }
        }
        for (state, count) in CLAIM_STATES.iter().zip(counts) {
            self.published.with_label_values(&[state]).set(count);
        }
        self.unpublished
            .set(i64::try_from(unpublished).unwrap_or(i64::MAX));
    }

    /// A claim was created, updated or deleted.
    pub fn written(&self, outcome: ClaimWrite) {
        self.writes.with_label_values(&[outcome.label()]).inc();
    }
}

/// What a write of a claim came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimWrite {
    Created,
    Updated,
    Deleted,
    Failed,
}

impl ClaimWrite {
    fn label(self) -> &'static str {
        match self {
            Self::Created => OUTCOMES[0],
            Self::Updated => OUTCOMES[1],
            Self::Deleted => OUTCOMES[2],
            Self::Failed => OUTCOMES[3],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::value;
    use super::ClaimWrite;

    #[test]
    fn claims_are_counted_by_state_and_writes_by_outcome() {
        let m = Metrics::new().unwrap();
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_cluster_claim_writes_total{outcome="failed"}"#
            ),
            Some(0.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Cleared"}"#),
            Some(0.0)
        );
        m.claims
            .published(["Cleared", "Blocked", "Cleared", "Unknown"], 3);
        m.claims.written(ClaimWrite::Failed);
        m.claims.written(ClaimWrite::Created);
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Cleared"}"#),
            Some(2.0)
        );
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Pending"}"#),
            Some(0.0)
        );
        assert_eq!(
            value(&m, "preflight_gate_cluster_claims_unpublished"),
            Some(3.0)
        );
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_cluster_claim_writes_total{outcome="failed"}"#
            ),
            Some(1.0)
        );
        m.claims.published([], 0);
        assert_eq!(
            value(&m, r#"preflight_gate_cluster_claims{state="Cleared"}"#),
            Some(0.0)
        );
    }
}
