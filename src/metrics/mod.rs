//! The gate's Prometheus metrics. One registry is built in `serve`; every
//! label comes from a bounded set (never a user, an object name or an error).
//! The catalogue, with what each series means for an operator, is
//! `docs/metrics.md`.
//!
//! `Metrics` is the handle every part of the gate shares. It holds one value
//! per subsystem, each with its series kept private behind methods that say
//! what happened: callers never touch a series or its labels. The module
//! knows the model (`crate::model`) and the prometheus crate, nothing else.

mod admission;
mod cluster_claims;
mod controller;
mod effects;
mod hosted;
mod results;
mod tls;

use prometheus::core::Collector;
use prometheus::{Registry, TextEncoder};

use crate::model::release::Version;

pub use admission::{AdmissionMetrics, InFlight, MAX_BLOCKED_TARGETS};
pub use cluster_claims::{ClusterClaimMetrics, ClusterClaimWrite};
pub use controller::ControllerMetrics;
pub use effects::{EffectKind, EffectMetrics};
pub use hosted::HostedMetrics;
pub use results::ResultMetrics;
pub use tls::TlsMetrics;

const PREFIX: &str = "preflight_gate";

/// The `target_version` label of a target named `display` (a version, or an
/// image when the version is not known): the version, or `unknown`.
pub(crate) fn target_label(display: &str) -> &str {
    if Version::parse(display).is_some() {
        display
    } else {
        "unknown"
    }
}

/// Every series the gate exports, by the subsystem that sets them. Cheap to
/// clone: clones share the series.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Reviews, their latency, overrides and blocked targets (the webhook).
    pub admission: AdmissionMetrics,
    /// The serving certificate (its reloads and expiry).
    pub tls: TlsMetrics,
    /// Runs and Events asked for by decisions.
    pub effects: EffectMetrics,
    /// The webhook's results cache, and the results and offered targets the
    /// controller's leader exports.
    pub results: ResultMetrics,
    /// The controller: leadership and finished runs.
    pub controller: ControllerMetrics,
    /// Hosted control planes: the hosted clusters followed, their results
    /// held in memory and the reads of their guests.
    pub hosted: HostedMetrics,
    /// The readiness ClusterClaims the leader publishes to a fleet's hub
    /// (`--cluster-claims`).
    pub cluster_claims: ClusterClaimMetrics,
}

impl Metrics {
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        Ok(Self {
            admission: AdmissionMetrics::new(&registry)?,
            tls: TlsMetrics::new(&registry)?,
            effects: EffectMetrics::new(&registry)?,
            results: ResultMetrics::new(&registry)?,
            controller: ControllerMetrics::new(&registry)?,
            hosted: HostedMetrics::new(&registry)?,
            cluster_claims: ClusterClaimMetrics::new(&registry)?,
            registry,
        })
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}

/// Registers `collector` and hands it back, for the subsystems' `new`.
fn register<C: Collector + Clone + 'static>(
    registry: &Registry,
    collector: C,
) -> prometheus::Result<C> {
    registry.register(Box::new(collector.clone()))?;
    Ok(collector)
}

/// Helpers for the subsystems' tests: they read the text exposition, as a
/// scrape would.
#[cfg(test)]
pub(crate) mod testing {
    use super::Metrics;

    /// The exposition lines of `m` that start with `prefix`, sorted.
    pub fn exported(m: &Metrics, prefix: &str) -> Vec<String> {
        let mut lines: Vec<String> = m
            .render()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    }

    /// The value of the one sample written exactly `sample` (a name and its
    /// labels, as exposed), if it is exported.
    pub fn value(m: &Metrics, sample: &str) -> Option<f64> {
        m.render().lines().find_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            (series == sample).then(|| value.parse().ok()).flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_fresh_registry_exports_the_series_that_start_at_zero() {
        let m = Metrics::new().unwrap();
        let text = m.render();
        for line in [
            r#"preflight_gate_overrides_total{kind="force"} 0"#,
            r#"preflight_gate_overrides_total{kind="desired_update_force"} 0"#,
            r#"preflight_gate_overrides_total{kind="accept_risks"} 0"#,
            r#"preflight_gate_tls_reloads_total{result="success"} 0"#,
            r#"preflight_gate_tls_reloads_total{result="failure"} 0"#,
            "preflight_gate_admission_in_flight 0",
            "preflight_gate_controller_leader 0",
            "preflight_gate_results_watch_up 0",
            "preflight_gate_target_change_last_accepted_timestamp_seconds 0",
            r#"preflight_gate_hosted_results{phase="Failed"} 0"#,
            r#"preflight_gate_hosted_reads_total{result="failure"} 0"#,
            "preflight_gate_hosted_watch_up 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
