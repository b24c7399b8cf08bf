//! The serving certificate: its reloads and when the pair in use expires.

use prometheus::{Gauge, IntCounterVec, Opts, Registry};

use super::{PREFIX, register};

/// The serving certificate's series.
#[derive(Clone)]
pub struct TlsMetrics {
    /// Certificate reloads by result (`success`, `failure`).
    reloads: IntCounterVec,
    /// `notAfter` of the serving certificate, as a Unix timestamp.
    cert_expiry: Gauge,
}

impl TlsMetrics {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let reloads = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "tls_reloads_total",
                    "Serving certificate reloads, by result (success, failure).",
                )
                .namespace(PREFIX),
                &["result"],
            )?,
        )?;
        for result in ["success", "failure"] {
            reloads.with_label_values(&[result]);
        }
        let cert_expiry = register(
            registry,
            Gauge::with_opts(
                Opts::new(
                    "tls_certificate_expiry_timestamp_seconds",
                    "notAfter of the serving certificate in use, as a Unix timestamp.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        Ok(Self {
            reloads,
            cert_expiry,
        })
    }

    /// The pair in use expires at `not_after` (Unix seconds): the first one
    /// loaded, before any reload.
    pub(crate) fn certificate_expires_at(&self, not_after: i64) {
        self.cert_expiry.set(not_after as f64);
    }

    /// A new pair, expiring at `not_after`, replaced the one in use.
    pub fn reloaded(&self, not_after: i64) {
        self.certificate_expires_at(not_after);
        self.reloads.with_label_values(&["success"]).inc();
    }

    /// A changed pair was refused; the one in use stays.
    pub(crate) fn reload_failed(&self) {
        self.reloads.with_label_values(&["failure"]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::super::testing::value;

    const EXPIRY: &str = "preflight_gate_tls_certificate_expiry_timestamp_seconds";
    const SUCCESS: &str = r#"preflight_gate_tls_reloads_total{result="success"}"#;
    const FAILURE: &str = r#"preflight_gate_tls_reloads_total{result="failure"}"#;

    #[test]
    fn a_reload_counts_and_moves_the_expiry_a_refused_one_only_counts() {
        let m = Metrics::new().unwrap();
        m.tls.certificate_expires_at(4_000_000_000);
        assert_eq!(value(&m, EXPIRY), Some(4e9));
        assert_eq!(value(&m, SUCCESS), Some(0.0), "loading is no reload");

        m.tls.reload_failed();
        assert_eq!(value(&m, FAILURE), Some(1.0));
        assert_eq!(value(&m, EXPIRY), Some(4e9), "the pair in use stays");

        m.tls.reloaded(4_100_000_000);
        assert_eq!(value(&m, SUCCESS), Some(1.0));
        assert_eq!(value(&m, FAILURE), Some(1.0));
        assert_eq!(value(&m, EXPIRY), Some(4.1e9));
    }
}
