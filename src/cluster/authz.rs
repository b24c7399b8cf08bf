//! Whether a user may override the gate or set a window: the `override`
//! or `window` verb on `updatepreflights.preflight.dev`, asked with a
//! SubjectAccessReview.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;

use crate::admission::ports::{BoxFuture, OverrideAuthorizer, Verb};
use crate::admission::{Authorization, UserInfo};

/// Asks the API server.
pub struct SubjectAccessReviewer {
    client: kube::Client,
}

impl SubjectAccessReviewer {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl OverrideAuthorizer for SubjectAccessReviewer {
    fn allows<'a>(&'a self, user: &'a UserInfo, verb: Verb) -> BoxFuture<'a, Authorization> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username.clone()),
                    uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                    groups: Some(user.groups.clone()),
                    extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some("preflight.dev".into()),
                        resource: Some("updatepreflights".into()),
                        verb: Some(verb.as_str().into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
            match api.create(&PostParams::default(), &review).await {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {
                    Authorization::Allowed
                }
                Ok(_) => Authorization::Denied,
                Err(e) => {
                    tracing::warn!(error = %e, "SubjectAccessReview failed");
                    Authorization::Unavailable(
                        "the API server did not answer the access review".into(),
                    )
                }
            }
        })
    }
}

/// Without a cluster no override can be authorized.
pub struct NoCluster;

impl OverrideAuthorizer for NoCluster {
    fn allows<'a>(&'a self, _user: &'a UserInfo, _verb: Verb) -> BoxFuture<'a, Authorization> {
        Box::pin(async {
            Authorization::Unavailable("the gate runs without a cluster connection".into())
        })
    }
}
