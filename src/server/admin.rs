//! The plain-HTTP admin port: `/metrics`, `/healthz` (the process is alive)
//! and `/readyz` (certificates loaded, results ready, not shutting down,
//! the replica's node not cordoned).
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
    /// Set while the replica's node is cordoned (`crate::cluster::cordon`):
    /// a drain is coming, and an unready replica is one it may evict.
    pub node_cordoned: Arc<AtomicBool>,
}

impl Health {
    pub fn is_ready(&self) -> Result<(), &'static str> {
        if self.shutting_down.load(Ordering::Relaxed) {
            Err("shutting down")
        } else if self.node_cordoned.load(Ordering::Relaxed) {
            Err("the node is cordoned: stepping aside for its drain")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::ports::Lookup;
    use crate::model::release::ReleaseKey;

    /// Results that are always ready.
    struct Ready;

    impl ResultLookup for Ready {
        fn lookup(&self, _: &ReleaseKey) -> Lookup {
            Lookup::fixed(None)
        }
        fn is_ready(&self) -> bool {
            true
        }
        fn runs_on_miss(&self) -> bool {
            false
        }
        fn may_run(&self, _: &ReleaseKey) -> bool {
            false
        }
    }

    /// A replica on a cordoned node is unready, so that a drain may evict
    /// it past the gate's budget; ready again once the node is not.
    #[test]
    fn a_replica_on_a_cordoned_node_steps_aside() {
        let health = Health {
            results: Arc::new(Ready),
            metrics: Metrics::new().unwrap(),
            shutting_down: AtomicBool::new(false),
            node_cordoned: Arc::new(AtomicBool::new(false)),
        };
        assert_eq!(health.is_ready(), Ok(()));
        health.node_cordoned.store(true, Ordering::Relaxed);
        assert_eq!(
            health.is_ready(),
            Err("the node is cordoned: stepping aside for its drain")
        );
        health.node_cordoned.store(false, Ordering::Relaxed);
        assert_eq!(health.is_ready(), Ok(()));
    }
}
