//! The serving certificate: its reloads and when the pair in use expires;
//! the client CA's reloads; and the webhook's connections: how many hold a
//! slot, why the gate closed one (its saturation), the requests it cut off
//! before deciding, and the API server's share.

use prometheus::{Gauge, IntCounterVec, IntGauge, Opts, Registry};

use super::{PREFIX, register};

/// The serving certificate's series.
#[derive(Clone)]
pub struct TlsMetrics {
    /// Certificate reloads by result (`success`, `failure`).
    reloads: IntCounterVec,
    /// `notAfter` of the serving certificate, as a Unix timestamp.
    cert_expiry: Gauge,
    /// Webhook connections past their handshake, each holding a slot.
    connections_open: IntGauge,
    /// The most connections that may hold a slot at once.
    connections_limit: IntGauge,
    /// Connections the gate closed, by reason ([`CLOSE_REASONS`]).
    connections_closed: IntCounterVec,
    /// Requests answered at once, without a decision, by reason
    /// ([`REFUSED_REASONS`]).
    requests_refused: IntCounterVec,
    /// The API server's addresses known, whose connections may take the
    /// reserved slots.
    api_server_addresses: IntGauge,
    /// Connections from those addresses holding a slot.
    api_server_connections_open: IntGauge,
    /// Client CA reloads by result (`success`, `failure`).
    client_ca_reloads: IntCounterVec,
}

/// Why the gate answers a request at once, before any decision (the
/// `reason` label):
/// - `slow_body`: its body fell behind `--min-body-rate` (408);
/// - `peer_busy`: its source address already had `--max-busy-per-peer`
///   connections busy with a review (503).
pub const REFUSED_REASONS: [&str; 2] = ["slow_body", "peer_busy"];

/// Why the gate closes a webhook connection (the `reason` label):
/// - `handshake_timeout`, `handshake_failed`: no TLS session came of it;
/// - `no_first_request`: the handshake done, no request came in time while
///   the gate was half full or draining;
/// - `header_timeout`: a request's head began and did not end in time;
/// - `idle_timeout`: nothing arrived for the idle deadline (longer than
///   the API server's keep-alive);
/// - `evicted_peer_limit`: its peer (source address) was at its limit and
///   this was the peer's longest-idle connection;
/// - `evicted_full`: the gate was full and this was its longest-idle;
/// - `refused_peer_limit`, `refused_full`: a new connection, closed because
///   every connection in the way was busy with a review.
pub const CLOSE_REASONS: [&str; 9] = [
    "handshake_timeout",
    "handshake_failed",
    "no_first_request",
    "header_timeout",
    "idle_timeout",
    "evicted_peer_limit",
    "evicted_full",
    "refused_peer_limit",
    "refused_full",
];

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
        let connections_open = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "connections_open",
                    "Webhook connections past their TLS handshake, each holding a slot.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let connections_limit = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "connections_limit",
                    "The most webhook connections that may hold a slot at once (--max-connections).",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let connections_closed = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "connections_closed_total",
                    "Webhook connections the gate closed, by reason (handshake_timeout, handshake_failed, no_first_request, header_timeout, idle_timeout, evicted_peer_limit, evicted_full, refused_peer_limit, refused_full).",
                )
                .namespace(PREFIX),
                &["reason"],
            )?,
        )?;
        for reason in CLOSE_REASONS {
            connections_closed.with_label_values(&[reason]);
        }
        let requests_refused = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "requests_refused_total",
                    "Webhook requests answered at once, before any decision, by reason (slow_body: 408, the body arrived slower than --min-body-rate; peer_busy: 503, the source address had --max-busy-per-peer connections busy). On HTTP/1 the connection closes with the answer.",
                )
                .namespace(PREFIX),
                &["reason"],
            )?,
        )?;
        for reason in REFUSED_REASONS {
            requests_refused.with_label_values(&[reason]);
        }
        let api_server_addresses = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "api_server_addresses",
                    "Addresses of the API server the gate knows (the kubernetes Service's endpoints); while there are none, no connection slots are reserved.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let api_server_connections_open = register(
            registry,
            IntGauge::with_opts(
                Opts::new(
                    "api_server_connections_open",
                    "Webhook connections from the API server's known addresses holding a slot.",
                )
                .namespace(PREFIX),
            )?,
        )?;
        let client_ca_reloads = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "client_ca_reloads_total",
                    "Client CA bundle (--client-ca) reloads, by result (success, failure).",
                )
                .namespace(PREFIX),
                &["result"],
            )?,
        )?;
        for result in ["success", "failure"] {
            client_ca_reloads.with_label_values(&[result]);
        }
        Ok(Self {
            reloads,
            cert_expiry,
            connections_open,
            connections_limit,
            connections_closed,
            requests_refused,
            api_server_addresses,
            api_server_connections_open,
            client_ca_reloads,
        })
    }

    /// A request was answered at once, for `reason` (one of
    /// [`REFUSED_REASONS`]).
    pub(crate) fn request_refused(&self, reason: &'static str) {
        debug_assert!(REFUSED_REASONS.contains(&reason), "{reason}");
        self.requests_refused.with_label_values(&[reason]).inc();
    }

    /// `known` addresses of the API server are known now.
    pub(crate) fn api_server_addresses(&self, known: usize) {
        self.api_server_addresses
            .set(i64::try_from(known).unwrap_or(i64::MAX));
    }

    /// `open` connections from the API server's addresses hold a slot now.
    pub(crate) fn api_server_connections_open(&self, open: usize) {
        self.api_server_connections_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// A new client CA bundle replaced the one in use.
    pub(crate) fn client_ca_reloaded(&self) {
        self.client_ca_reloads.with_label_values(&["success"]).inc();
    }

    /// A changed client CA bundle was refused; the one in use stays.
    pub(crate) fn client_ca_reload_failed(&self) {
        self.client_ca_reloads.with_label_values(&["failure"]).inc();
    }

    /// At most `limit` webhook connections hold a slot at once.
    pub(crate) fn connections_limit(&self, limit: usize) {
        self.connections_limit
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    /// `open` webhook connections hold a slot now.
    pub(crate) fn connections_open(&self, open: usize) {
        self.connections_open
            .set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// The gate closed a webhook connection, for `reason` (one of
    /// [`CLOSE_REASONS`]).
    pub(crate) fn connection_closed(&self, reason: &'static str) {
        debug_assert!(CLOSE_REASONS.contains(&reason), "{reason}");
        self.connections_closed.with_label_values(&[reason]).inc();
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

    #[test]
    fn connections_are_counted_open_against_the_limit_and_closed_by_reason() {
        let m = Metrics::new().unwrap();
        for reason in super::CLOSE_REASONS {
            let series = format!(r#"preflight_gate_connections_closed_total{{reason="{reason}"}}"#);
            assert_eq!(value(&m, &series), Some(0.0), "{reason} starts at 0");
        }
        m.tls.connections_limit(1024);
        m.tls.connections_open(3);
        m.tls.connection_closed("evicted_full");
        assert_eq!(value(&m, "preflight_gate_connections_limit"), Some(1024.0));
        assert_eq!(value(&m, "preflight_gate_connections_open"), Some(3.0));
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_connections_closed_total{reason="evicted_full"}"#
            ),
            Some(1.0)
        );
        for reason in super::REFUSED_REASONS {
            let series = format!(r#"preflight_gate_requests_refused_total{{reason="{reason}"}}"#);
            assert_eq!(value(&m, &series), Some(0.0), "{reason} starts at 0");
        }
        m.tls.request_refused("slow_body");
        assert_eq!(
            value(
                &m,
                r#"preflight_gate_requests_refused_total{reason="slow_body"}"#
            ),
            Some(1.0)
        );
        m.tls.api_server_addresses(3);
        m.tls.api_server_connections_open(2);
        assert_eq!(value(&m, "preflight_gate_api_server_addresses"), Some(3.0));
        assert_eq!(
            value(&m, "preflight_gate_api_server_connections_open"),
            Some(2.0)
        );
    }
}
