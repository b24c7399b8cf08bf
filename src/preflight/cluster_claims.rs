//! The leader's publication of the cluster's readiness for its offered
//! updates as Open Cluster Management ClusterClaims (`--cluster-claims`;
//! what they say: `model::cluster_claim`, docs/fleet.md). The hub reads
//! them through its registration agent, and a Placement selects the
//! clusters cleared for a target with `claimSelector` alone.
//!
//! Every [`PERIOD`] the leader decides each offered target from memory, as
//! the webhook would, and makes the cluster's ClusterClaims say so: it
//! writes only what changed, deletes the ClusterClaim of a target no longer
//! offered, and touches none without its label. A new failure found by a
//! run turns `Cleared` into `Blocked` at the next period after the result
//! is stored.
//!
//! Each ClusterClaim is owned by the ClusterRole that lets the gate write
//! it ([`OWNER`]): removing the gate's grant (uninstalling the
//! fleet-member release, on the cluster or from the hub) lets Kubernetes'
//! garbage collector delete them, so no `Cleared` outlives the gate.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
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

/// How often the ClusterClaims are brought up to date: well within a
/// refresh of the results, and cheap (one list of at most 11 objects,
/// writes only on change).
pub const PERIOD: Duration = Duration::from_secs(15);

/// The ClusterRole that grants the gate its ClusterClaims
/// (deploy/components/cluster-claims), their owner.
pub const OWNER: &str = "preflight-gate-cluster-claims";

/// Publishes until dropped (leadership lost, or the gate stopping). The
/// ClusterClaims stay when it stops: a new leader takes them over, and a
/// gate being restarted does not withdraw every cleared target from the
/// hub.
pub async fn publish(
    client: kube::Client,
    source: Arc<LiveSource>,
    policy: Policy,
    metrics: Metrics,
) {
    let api: Api<ClusterClaim> = Api::all(client.clone());
    let roles: Api<ClusterRole> = Api::all(client);
    let _stopped = Stopped(metrics.clone());
    let mut ticks = tokio::time::interval(PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    info!("publishing the cluster's update readiness as ClusterClaims");
    metrics.cluster_claims.started();
    loop {
        ticks.tick().await;
        // Until the results and the ClusterVersion are known, what is
        // published stands: an empty cache is no news. The time of the
        // last publication does not move, and its alert says so.
        let Some(cv) = source.cluster_version().filter(|_| source.is_ready()) else {
            continue;
        };
        let set = cluster_claim_set(readiness(
            &cv,
            source.as_ref(),
            &policy,
            jiff::Timestamp::now(),
        ));
        let owner = match roles.get(OWNER).await {
            Ok(role) => role.controller_owner_ref(&()).map(|mut owner| {
                // An owner, not a controller: nothing reconciles them from it.
                owner.controller = None;
                owner
            }),
            Err(e) => {
                warn!(role = OWNER, error = %e, "cannot read the ClusterRole that owns the gate's ClusterClaims; they are written without an owner");
                None
            }
        };
        match reconcile(&api, &set.cluster_claims, owner, &metrics).await {
            Ok(true) => metrics
                .cluster_claims
                .published(&set.published, set.unpublished),
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, "cannot list the gate's ClusterClaims; the hub's view of this cluster's readiness is not updated");
                metrics.cluster_claims.wrote(ClusterClaimWrite::Failed);
            }
        }
    }
}

/// Makes the gate's ClusterClaims exactly `desired`, each owned by `owner`;
/// each write that fails is counted and tried again next period. True when
/// every write succeeded.
async fn reconcile(
    api: &Api<ClusterClaim>,
    desired: &BTreeMap<String, String>,
    owner: Option<OwnerReference>,
    metrics: &Metrics,
) -> Result<bool, kube::Error> {
    let (key, value) = MANAGED_BY;
    let own = api
        .list(&ListParams::default().labels(&format!("{key}={value}")))
        .await?;
    let owners = |c: &ClusterClaim| c.metadata.owner_references.clone().unwrap_or_default();
    let wanted: Vec<OwnerReference> = owner.into_iter().collect();
    let mut published: BTreeMap<String, ClusterClaim> = BTreeMap::new();
    let mut all_written = true;
    let mut done = |outcome: ClusterClaimWrite| {
        all_written &= outcome != ClusterClaimWrite::Failed;
        metrics.cluster_claims.wrote(outcome);
    };
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
            done(outcome);
            continue;
        }
        published.insert(name, cluster_claim);
    }
    for (name, value) in desired {
        let outcome = match published.get(name) {
            Some(current)
                if current.spec.value == *value
                    && (wanted.is_empty() || owners(current) == wanted) =>
            {
                continue;
            }
            Some(_) => {
                let mut patch = json!({"spec": {"value": value}});
                if !wanted.is_empty() {
                    patch["metadata"] = json!({"ownerReferences": wanted});
                }
                let patch = Patch::Merge(patch);
                match api.patch(name, &PatchParams::default(), &patch).await {
                    Ok(_) => ClusterClaimWrite::Updated,
                    Err(e) => failed(name, &e),
                }
            }
            None => {
                let object = cluster_claim(name, value, &wanted);
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => ClusterClaimWrite::Created,
                    // Someone else's ClusterClaim of that name: never taken over.
                    Err(e) => failed(name, &e),
                }
            }
        };
        done(outcome);
    }
    Ok(all_written)
}

fn cluster_claim(name: &str, value: &str, owners: &[OwnerReference]) -> ClusterClaim {
    let mut cluster_claim = ClusterClaim::new(
        name,
        ClusterClaimSpec {
            value: value.to_owned(),
        },
    );
    let (key, label) = MANAGED_BY;
    cluster_claim.metadata.labels = Some([(key.to_owned(), label.to_owned())].into());
    if !owners.is_empty() {
        cluster_claim.metadata.owner_references = Some(owners.to_vec());
    }
    cluster_claim
}

fn failed(name: &str, error: &kube::Error) -> ClusterClaimWrite {
    warn!(cluster_claim = name, error = %error, "cannot write a ClusterClaim");
    ClusterClaimWrite::Failed
}

/// Clears the published figures when publishing stops.
struct Stopped(Metrics);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.cluster_claims.stopped();
    }
}
