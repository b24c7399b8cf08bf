//! The leader's publication of the cluster's readiness for its offered
//! updates as Open Cluster Management ClusterClaims (`--cluster-claims`;
//! what they say: `model::cluster_claim`, docs/fleet.md). The hub reads
//! them through its registration agent, and a Placement selects the
//! clusters cleared for a target with `claimSelector` alone.
//!
//! Every [`PERIOD`] the leader decides each offered target from memory, as
//! the webhook would, and makes the cluster's claims say so: it writes only
//! what changed, deletes the ClusterClaim of a target no longer offered,
//! and touches none without its label. A new failure found by a run turns
//! `Cleared` into `Blocked` at the next period after the result is stored.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tracing::{info, warn};

use crate::admission::Policy;
use crate::admission::ports::ResultLookup;
use crate::admission::readiness::readiness;
use crate::metrics::{ClusterClaimWrite, Metrics};
use crate::model::cluster_claim::{
    ClusterClaim, ClusterClaimSpec, MANAGED_BY, SUFFIX, cluster_claim_set,
};
use crate::preflight::LiveSource;

/// How often the claims are brought up to date: well within a refresh of
/// the results, and cheap (one list of at most 11 objects, writes only on
/// change).
pub const PERIOD: Duration = Duration::from_secs(15);

/// Publishes until dropped (leadership lost, or the gate stopping). The
/// claims stay when it stops: a new leader takes them over, and a gate
/// being restarted does not withdraw every cleared target from the hub.
pub async fn publish(
    client: kube::Client,
    source: Arc<LiveSource>,
    policy: Policy,
    metrics: Metrics,
) {
    let api: Api<ClusterClaim> = Api::all(client);
    let _stopped = Stopped(metrics.clone());
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    info!("publishing the cluster's update readiness as ClusterClaims");
    loop {
        ticks.tick().await;
        // Until the results and the ClusterVersion are known, what is
        // published stands: an empty cache is no news.
        let Some(cv) = source.cluster_version().filter(|_| source.is_ready()) else {
            continue;
        };
        let set = cluster_claim_set(readiness(
            &cv,
            source.as_ref(),
            &policy,
            jiff::Timestamp::now(),
        ));
        metrics
            .cluster_claims
            .published(&set.published, set.unpublished);
        if let Err(e) = reconcile(&api, &set.claims, &metrics).await {
            warn!(error = %e, "cannot list the gate's ClusterClaims; the hub's view of this cluster's readiness is not updated");
            metrics.cluster_claims.wrote(ClusterClaimWrite::Failed);
        }
    }
}

/// Makes the gate's claims exactly `desired`; each write that fails is
/// counted and tried again next period.
async fn reconcile(
    api: &Api<ClusterClaim>,
    desired: &BTreeMap<String, String>,
    metrics: &Metrics,
) -> Result<(), kube::Error> {
    let (key, value) = MANAGED_BY;
    let own = api
        .list(&ListParams::default().labels(&format!("{key}={value}")))
        .await?;
    let mut published: BTreeMap<String, String> = BTreeMap::new();
    for cluster_claim in own {
        let Some(name) = cluster_claim.metadata.name.clone() else {
            continue;
        };
        if !desired.contains_key(&name) && name.ends_with(SUFFIX) {
            let outcome = match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => ClusterClaimWrite::Deleted,
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(e) => failed(&name, &e),
            };
            metrics.cluster_claims.wrote(outcome);
            continue;
        }
        published.insert(name, cluster_claim.spec.value);
    }
    for (name, value) in desired {
        let outcome = match published.get(name) {
            Some(current) if current == value => continue,
            Some(_) => {
                let patch = Patch::Merge(json!({"spec": {"value": value}}));
                match api.patch(name, &PatchParams::default(), &patch).await {
                    Ok(_) => ClusterClaimWrite::Updated,
                    Err(e) => failed(name, &e),
                }
            }
            None => match api
                .create(&PostParams::default(), &cluster_claim(name, value))
                .await
            {
                Ok(_) => ClusterClaimWrite::Created,
                // Someone else's ClusterClaim of that name: never taken over.
                Err(e) => failed(name, &e),
            },
        };
        metrics.cluster_claims.wrote(outcome);
    }
    Ok(())
}

fn cluster_claim(name: &str, value: &str) -> ClusterClaim {
    let mut cluster_claim = ClusterClaim::new(
        name,
        ClusterClaimSpec {
            value: value.to_owned(),
        },
    );
    let (key, label) = MANAGED_BY;
    cluster_claim.metadata.labels = Some([(key.to_owned(), label.to_owned())].into());
    cluster_claim
}

fn failed(name: &str, error: &kube::Error) -> ClusterClaimWrite {
    warn!(claim = name, error = %error, "cannot write a ClusterClaim");
    ClusterClaimWrite::Failed
}

/// Clears the published figures when publishing stops.
struct Stopped(Metrics);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.cluster_claims.stopped();
    }
}
