//! The ClusterVersion named `version`: what a review of it carries, and how
//! a write of it is decided (its target, then `force`, what the cluster
//! trusts, and the `preflight.dev/` claims). A new kind of object to gate
//! is a file like this one and its row in the kinds table.

use jiff::Timestamp;
use serde::Deserialize;

use super::verdict::{Decision, Reason, Verdict};
use super::{Gated, Policy, target, write};
use crate::admission::overrides;
use crate::admission::ports::ResultLookup;
use crate::admission::review::{Request, Reviewable};
use crate::model::cluster_version::{self, ClusterVersion, ConditionalUpdate, Release, Spec};
use crate::model::meta::{Metadata, null_as_default};

/// The only ClusterVersion the cluster-version operator acts on.
const CLUSTER_VERSION_NAME: &str = "version";

impl Reviewable for ClusterVersion {
    const GROUP: &'static str = "config.openshift.io";
    const RESOURCE: &'static str = "clusterversions";
    const KIND: &'static str = "ClusterVersion";
    type Wire = WireClusterVersion;
}

impl Gated for ClusterVersion {
    const PATH: &'static str = "/validate/clusterversion";

    fn decide(
        request: &Request,
        new: &ClusterVersion,
        source: &dyn ResultLookup,
        policy: &Policy,
        now: Timestamp,
    ) -> Decision {
        let name = if request.name.is_empty() {
            new.metadata.name.as_str()
        } else {
            request.name.as_str()
        };
        if name != CLUSTER_VERSION_NAME {
            return Decision::Final(Verdict::allow(Reason::NotGated));
        }
        let mut decision = target::decide_target(request, new, source, policy, now);
        if write::forces(request.old_object.as_ref(), new) {
            decision = write::force_write(request, decision);
        }
        let before = request.old_object.as_ref().map(|cv| &cv.spec);
        let trusts = new
            .spec
            .trust_changes(before.unwrap_or(&Default::default()));
        if !trusts.is_empty() {
            decision = write::trust_write(request, &trusts, decision);
        }
        let claims = overrides::written_claims(request.old_object.as_ref(), new);
        if claims.is_empty() {
            decision
        } else {
            write::claim_write(request, new, &claims, decision, policy, now)
        }
    }

    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
}

/// A ClusterVersion as a review carries it, read only as far as the
/// decision needs: into the one model [`ClusterVersion`], with the status
/// lists the decision never reads (history, conditions, the risks of
/// conditional updates) left empty. A review of a cluster with 500
/// conditional updates is so read in one pass that builds none of them.
#[derive(Default, Deserialize)]
#[serde(default)]
pub struct WireClusterVersion {
    metadata: Metadata,
    spec: Spec,
    status: WireStatus,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireStatus {
    desired: Release,
    #[serde(deserialize_with = "null_as_default")]
    available_updates: Vec<Release>,
    #[serde(deserialize_with = "null_as_default")]
    conditional_updates: Vec<WireConditionalUpdate>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct WireConditionalUpdate {
    release: Release,
}

impl From<WireClusterVersion> for ClusterVersion {
    fn from(wire: WireClusterVersion) -> Self {
        Self {
            metadata: wire.metadata,
            spec: wire.spec,
            status: cluster_version::Status {
                desired: wire.status.desired,
                available_updates: wire.status.available_updates,
                conditional_updates: wire
                    .status
                    .conditional_updates
                    .into_iter()
                    .map(|c| ConditionalUpdate {
                        release: c.release,
                        ..ConditionalUpdate::default()
                    })
                    .collect(),
                ..cluster_version::Status::default()
            },
        }
    }
}
