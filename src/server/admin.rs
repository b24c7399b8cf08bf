//! The plain-HTTP admin port: `/metrics`, `/healthz` (the process is alive)
//! and `/readyz` (certificates loaded, results ready, not shutting down).
//! Probes are kept out of request tracing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::admission::ports::ResultLookup;
use crate::metrics::Metrics;

/// What readiness is made of.
pub struct Health {
    pub results: Arc<dyn ResultLookup>,
    pub metrics: Metrics,
    /// Set on SIGTERM, so the Service stops sending new reviews.
    pub shutting_down: AtomicBool,
}

impl Health {
    pub fn is_ready(&self) -> Result<(), &'static str> {
        if self.shutting_down.load(Ordering::Relaxed) {
            Err("shutting down")
        } else if !self.results.is_ready() {
            Err("preflight results are not ready")
        } else {
            Ok(())
        }
    }
}

pub fn app(health: Arc<Health>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn metrics(State(health): State<Arc<Health>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        health.metrics.render(),
    )
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    match health.is_ready() {
        Ok(()) => (StatusCode::OK, "ok\n".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}
