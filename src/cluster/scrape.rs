//! Who may read `/metrics`: a bearer token the API server authenticates
//! (TokenReview) whose user may `get` the non-resource URL `/metrics`
//! (SubjectAccessReview), as kube-rbac-proxy decides in front of
//! OpenShift's own components. Answers are kept for a minute per token, so
//! a scrape every 30 s asks the API server about twice a minute at most.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use crate::admission::ports::BoxFuture;

/// The answer to a scrape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scrape {
    Allowed,
    /// No token, or one the API server does not accept: 401.
    Unauthenticated,
    /// A user who may not `get /metrics`: 403.
    Forbidden(String),
    /// The API server did not answer: 503, and nothing kept.
    Unavailable,
}

/// Decides whether a scrape with this bearer token may read `/metrics`.
pub trait ScrapeAccess: Send + Sync + 'static {
    fn review<'a>(&'a self, bearer: Option<&'a str>) -> BoxFuture<'a, Scrape>;
}

/// How long an answer is kept for a token.
const KEPT: Duration = Duration::from_secs(60);
/// The most tokens kept at once; past it, all are forgotten.
const MAX_KEPT: usize = 256;

/// Asks the API server, keeping answers for [`KEPT`].
pub struct ScrapeReviewer {
    client: kube::Client,
    kept: Mutex<HashMap<[u8; 32], (Instant, Scrape)>>,
}

impl ScrapeReviewer {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            kept: Mutex::default(),
        }
    }

    async fn ask(&self, token: &str) -> Scrape {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let status = match api.create(&PostParams::default(), &review).await {
            Ok(answer) => answer.status.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(error = %e, "TokenReview for a scrape failed");
                return Scrape::Unavailable;
            }
        };
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Scrape::Unauthenticated;
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), &access).await {
            Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => Scrape::Allowed,
            Ok(_) => Scrape::Forbidden(name),
            Err(e) => {
                tracing::warn!(error = %e, "SubjectAccessReview for a scrape failed");
                Scrape::Unavailable
            }
        }
    }
}

impl ScrapeAccess for ScrapeReviewer {
    fn review<'a>(&'a self, bearer: Option<&'a str>) -> BoxFuture<'a, Scrape> {
        Box::pin(async move {
            let Some(token) = bearer.filter(|t| !t.is_empty()) else {
                return Scrape::Unauthenticated;
            };
            let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let now = Instant::now();
            if let Some((at, answer)) = self
                .kept
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key)
                && now.duration_since(*at) < KEPT
            {
                return answer.clone();
            }
            let answer = self.ask(token).await;
            if answer != Scrape::Unavailable {
                let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() >= MAX_KEPT {
                    kept.clear();
                }
                kept.insert(key, (now, answer.clone()));
            }
            answer
        })
    }
}
