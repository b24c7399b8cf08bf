//! Side effects of decisions on non-dry-run reviews: the Events published,
//! and those that could not be carried out. A review never starts a run.

use prometheus::{IntCounterVec, Opts, Registry};

use super::{PREFIX, register};

/// What a decision asked for beside its answer (the `kind` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EffectKind {
    /// An Event about the ClusterVersion.
    Event,
}

impl EffectKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Event => "event",
        }
    }
}

/// The side effects' series.
#[derive(Clone)]
pub struct EffectMetrics {
    /// Side effects (Events) started for non-dry-run reviews, by kind.
    started: IntCounterVec,
    /// Side effects (Events) that could not be carried out, by kind.
    failures: IntCounterVec,
}

impl EffectMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let started = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "side_effects_total",
                    "Events asked for by decisions on non-dry-run reviews, by kind (event).",
                )
                .namespace(PREFIX),
                &["kind"],
            )?,
        )?;
        let failures = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "side_effect_failures_total",
                    "Events asked for by a decision that could not be carried out, by kind.",
                )
                .namespace(PREFIX),
                &["kind"],
            )?,
        )?;
        Ok(Self { started, failures })
    }

    /// A decision asked for a run or an Event, and it was handed on.
    pub fn asked_for(&self, kind: EffectKind) {
        self.started.with_label_values(&[kind.as_str()]).inc();
    }

    /// A run or an Event a decision asked for could not be carried out (a
    /// full queue, a failed or timed-out publication).
    pub fn failed(&self, kind: EffectKind) {
        self.failures.with_label_values(&[kind.as_str()]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::exported;
    use super::*;

    #[test]
    fn effects_and_their_failures_are_counted_apart_by_kind() {
        let m = Metrics::new().unwrap();
        assert!(
            exported(&m, "preflight_gate_side_effect").is_empty(),
            "no kind is exported before it happens"
        );
        m.effects.asked_for(EffectKind::Event);
        m.effects.asked_for(EffectKind::Event);
        m.effects.failed(EffectKind::Event);
        assert_eq!(
            exported(&m, "preflight_gate_side_effect"),
            [
                r#"preflight_gate_side_effect_failures_total{kind="event"} 1"#,
                r#"preflight_gate_side_effects_total{kind="event"} 2"#,
            ]
        );
    }
}
