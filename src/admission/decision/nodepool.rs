//! A NodePool (HyperShift, on a management cluster): its release is the
//! version its machines move to. A change of it is judged by HyperShift's
//! rules first, against the HostedCluster the gate's watch holds (never
//! past the control plane, at most three minors behind it, and not while
//! the control plane updates), then as a release of that hosted cluster:
//! its results for the release, and the NodePool's own `preflight.dev/`
//! claims, read as the ClusterVersion write it amounts to.

use jiff::Timestamp;

use super::hosted_cluster::{hosted_policy, not_served};
use super::verdict::{Decision, Reason, Verdict};
use super::{Gated, Policy, target, write};
use crate::admission::message;
use crate::admission::overrides;
use crate::admission::ports::ResultLookup;
use crate::admission::review::{Request, Reviewable};
use crate::model::cluster_version::{ClusterVersion, DesiredUpdate, Resolution, Spec};
use crate::model::hosted::{GROUP, HostedCluster, NodePool, nodepool_update};
use crate::model::meta::Metadata;
use crate::model::release::Version;

impl Reviewable for NodePool {
    const GROUP: &'static str = GROUP;
    const RESOURCE: &'static str = "nodepools";
    const KIND: &'static str = "NodePool";
    type Wire = NodePool;
}

impl Gated for NodePool {
    const PATH: &'static str = "/validate/nodepool";

    fn decide(
        request: &Request<Self>,
        new: &Self,
        source: &dyn ResultLookup,
        policy: &Policy,
        now: Timestamp,
    ) -> Decision {
        let Some(hosted) = source.hosted() else {
            return Decision::Final(not_served(Self::KIND));
        };
        let name = new.hosted_name();
        let changes_release = request
            .old_object
            .as_ref()
            .is_none_or(|old| old.spec.release != new.spec.release);
        // Its HostedCluster is needed to judge a release only: a write of
        // claims alone is decided without it.
        let cluster = match hosted.cluster(&name) {
            Some(cluster) => cluster,
            None if !changes_release => Default::default(),
            None => {
                return Decision::Final(Verdict::deny(
                    Reason::NotServed,
                    503,
                    message::hosted_cluster_unseen(&name.to_string(), &new.metadata.name),
                ));
            }
        };
        let address = message::Address::nodepool(new);
        let policy = &hosted_policy(policy);
        let request = request.read_as(|pool| as_update(pool, &cluster));
        let update = as_update(new, &cluster);
        if changes_release
            && let Resolution::Target(target) = update.resolve_target()
            && let Some(version) = target.version.as_deref().and_then(Version::parse)
        {
            let refusals = nodepool_update(&cluster, new, &version);
            if !refusals.is_empty() {
                let verdict = Verdict::deny(
                    Reason::HypershiftRefuses,
                    403,
                    message::hypershift_refuses(&target, &refusals),
                );
                return Decision::Final(verdict.for_target(&target));
            }
        }
        let results = hosted.results(&name);
        let mut decision = target::decide_target(&request, &update, &*results, policy, now);
        let claims = overrides::written_claims(request.old_object.as_ref(), &update);
        if !claims.is_empty() {
            decision = write::claim_write(&request, &update, &claims, decision, policy, now);
        }
        decision.address(&address)
    }

    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
}

/// The ClusterVersion write a NodePool's amounts to: its release as the
/// target, resolved by its HostedCluster's update graph and the control
/// plane's release (which a NodePool follows, so it is an update for the
/// NodePool, never its own desired release); its annotations as the
/// claims.
fn as_update(pool: &NodePool, cluster: &HostedCluster) -> ClusterVersion {
    let image = &pool.spec.release.image;
    let mut status = cluster.status.version.clone();
    let control_plane = std::mem::take(&mut status.desired);
    status.available_updates.push(control_plane);
    status.desired.version = pool.status.version.clone();
    ClusterVersion {
        metadata: pool.metadata.clone(),
        spec: Spec {
            desired_update: (!image.is_empty()).then(|| DesiredUpdate {
                image: Some(image.clone()),
                ..DesiredUpdate::default()
            }),
            ..Spec::default()
        },
        status,
    }
}
