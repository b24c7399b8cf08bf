//! The gate's Prometheus metrics. One registry is built in `serve`; every
//! label comes from a bounded set (never a user, an object name or an error).

use prometheus::{
    Gauge, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

const PREFIX: &str = "preflight_gate";

/// Decision latency buckets: 100 µs up to the API server's 10 s webhook limit.
const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

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
        })
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
    }
}
