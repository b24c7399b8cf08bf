//! The plain-HTTP admin port: `/metrics` (to a scraper the API server
//! authenticates and authorizes, in a cluster), `/healthz` (the process is alive)
//! and `/readyz` (certificates loaded, results ready, not shutting down,
//! the replica's node not cordoned).
//! Probes are kept out of request tracing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::admission::ports::ResultLookup;
use crate::cluster::scrape::{Scrape, ScrapeAccess};
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
    /// Who may read `/metrics`; `None`: anyone who reaches the port (no
    /// cluster to ask, or `--metrics-auth=none`).
    pub scrape_access: Option<Arc<dyn ScrapeAccess>>,
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

async fn metrics(State(health): State<Arc<Health>>, headers: HeaderMap) -> Response {
    if let Some(access) = &health.scrape_access {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let refused = match access.review(bearer).await {
            Scrape::Allowed => None,
            Scrape::Unauthenticated => Some((
                StatusCode::UNAUTHORIZED,
                "a bearer token the API server accepts is needed\n".to_owned(),
            )),
            Scrape::Forbidden(user) => Some((
                StatusCode::FORBIDDEN,
                format!(
                    "{} may not get the non-resource URL /metrics\n",
                    crate::model::text::clean(&user, 120)
                ),
            )),
            Scrape::Unavailable => Some((
                StatusCode::SERVICE_UNAVAILABLE,
                "the API server did not answer the access review\n".to_owned(),
            )),
        };
        if let Some(refused) = refused {
            return refused.into_response();
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        health.metrics.render(),
    )
        .into_response()
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
        fn runs_checks(&self) -> bool {
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
            scrape_access: None,
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

    /// A scrape answered as the API server would: only the token of a user
    /// allowed `get /metrics` reads them.
    struct Tokens;

    impl ScrapeAccess for Tokens {
        fn review<'a>(
            &'a self,
            bearer: Option<&'a str>,
        ) -> crate::admission::ports::BoxFuture<'a, Scrape> {
            Box::pin(async move {
                match bearer {
                    Some("prometheus") => Scrape::Allowed,
                    Some("tenant") => Scrape::Forbidden("system:serviceaccount:shop:app".into()),
                    Some("down") => Scrape::Unavailable,
                    _ => Scrape::Unauthenticated,
                }
            })
        }
    }

    #[rstest::rstest]
    #[case::no_token(None, StatusCode::UNAUTHORIZED)]
    #[case::not_a_bearer(Some("Basic cHJvbWV0aGV1cw=="), StatusCode::UNAUTHORIZED)]
    #[case::unknown_token(Some("Bearer forged"), StatusCode::UNAUTHORIZED)]
    #[case::forbidden(Some("Bearer tenant"), StatusCode::FORBIDDEN)]
    #[case::api_server_down(Some("Bearer down"), StatusCode::SERVICE_UNAVAILABLE)]
    #[case::allowed(Some("Bearer prometheus"), StatusCode::OK)]
    #[tokio::test]
    async fn metrics_are_read_only_by_a_scraper_the_api_server_allows(
        #[case] authorization: Option<&str>,
        #[case] status: StatusCode,
    ) {
        let health = Arc::new(Health {
            results: Arc::new(Ready),
            metrics: Metrics::new().unwrap(),
            shutting_down: AtomicBool::new(false),
            node_cordoned: Arc::default(),
            scrape_access: Some(Arc::new(Tokens)),
        });
        let mut headers = HeaderMap::new();
        if let Some(value) = authorization {
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        }
        let response = metrics(State(health), headers).await;
        assert_eq!(response.status(), status);
    }
}
