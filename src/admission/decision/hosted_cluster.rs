//! A HostedCluster (HyperShift, on a management cluster): its write is
//! the ClusterVersion write it amounts to ([`HostedCluster::as_update`]),
//! decided as one is, against that hosted cluster's own results
//! ([`crate::admission::ports::HostedLookup::results`]): its release is the target, its update
//! service what it trusts, its `preflight.dev/` annotations the claims.
//! `spec.controlPlaneRelease`, when set apart, is a target too. HyperShift's
//! [`FORCE_UPGRADE_TO`] is the override it is: it needs the `override`
//! verb and a reason, and forces past `HostedClusterUpgradeable` alone.

use jiff::Timestamp;

use super::verdict::{Asked, Decision, EventNote, PendingOverride, Reason, Verdict};
use super::{Gated, Policy, target, write};
use crate::admission::audit;
use crate::admission::message;
use crate::admission::overrides;
use crate::admission::ports::{ResultLookup, Verb};
use crate::admission::review::{Request, Reviewable};
use crate::model::annotations::OVERRIDE_REASON;
use crate::model::hosted::{FORCE_UPGRADE_TO, GROUP, HostedCluster, ReleaseImage};
use crate::model::meta::Metadata;

impl Reviewable for HostedCluster {
    const GROUP: &'static str = GROUP;
    const RESOURCE: &'static str = "hostedclusters";
    const KIND: &'static str = "HostedCluster";
    type Wire = HostedCluster;
}

impl Gated for HostedCluster {
    const PATH: &'static str = "/validate/hostedcluster";

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
        let address = message::Address::hosted_cluster(new);
        let results = hosted.results(&new.hosted_name());
        let policy = &hosted_policy(policy);
        let old = request.old_object.as_ref();
        let mut decision = decide_release(request, new, &*results, policy, now);
        if let Some(control_plane) = control_plane_release(old, new) {
            let own = decide_release(
                request,
                &with_release(new, control_plane),
                &*results,
                policy,
                now,
            );
            if !matches!(&own, Decision::Final(v) if v.allowed) {
                decision = own;
            }
        }
        if let Some(to) = forced_to(old, new) {
            decision = force_upgrade_write(request, new, to, decision);
        }
        decision.address(&address)
    }

    fn metadata(&self) -> &Metadata {
        &self.metadata
    }
}

/// The policy for a hosted cluster's write: its denial offers no `oc adm
/// upgrade accept`, which acts on a ClusterVersion.
pub(super) fn hosted_policy(policy: &Policy) -> Policy {
    Policy {
        accept_risks_field: false,
        ..policy.clone()
    }
}

/// The denial of a hosted kind's review by a gate that does not serve
/// hosted control planes: its webhook is there, the gate is not told.
pub(super) fn not_served(kind: &str) -> Verdict {
    Verdict::deny(
        Reason::NotServed,
        503,
        format!(
            "preflight-gate reviews {kind} writes but does not serve hosted control planes: start it with --hosted-control-planes (deploy/overlays/hypershift), or remove its {kind} webhook"
        ),
    )
}

/// The decision on the HostedCluster's release, read as a ClusterVersion
/// write: the target, the update service, the claims.
fn decide_release(
    request: &Request<HostedCluster>,
    new: &HostedCluster,
    results: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    let request = request.read_as(HostedCluster::as_update);
    let as_update = new.as_update();
    let mut decision = target::decide_target(&request, &as_update, results, policy, now);
    let before = request.old_object.as_ref().map(|cv| &cv.spec);
    if before.is_some_and(|b| b.upstream != as_update.spec.upstream) {
        decision = write::trust_write(&request, &["spec.updateService"], decision);
    }
    let claims = overrides::written_claims(request.old_object.as_ref(), &as_update);
    if claims.is_empty() {
        decision
    } else {
        write::claim_write(&request, &as_update, &claims, decision, policy, now)
    }
}

/// `spec.controlPlaneRelease`, when the write sets or changes it apart
/// from `spec.release`.
fn control_plane_release<'a>(
    old: Option<&HostedCluster>,
    new: &'a HostedCluster,
) -> Option<&'a ReleaseImage> {
    let release = new.spec.control_plane_release.as_ref()?;
    let before = old.and_then(|o| o.spec.control_plane_release.as_ref());
    (!release.image.is_empty()
        && release.image != new.spec.release.image
        && before != Some(release))
    .then_some(release)
}

/// `new` with `release` as its release, to decide that release as a target.
fn with_release(new: &HostedCluster, release: &ReleaseImage) -> HostedCluster {
    let mut cluster = new.clone();
    cluster.spec.release = release.clone();
    cluster
}

/// The pullspec [`FORCE_UPGRADE_TO`] names, when the write sets or
/// changes it.
fn forced_to<'a>(old: Option<&HostedCluster>, new: &'a HostedCluster) -> Option<&'a str> {
    fn to(cluster: &HostedCluster) -> Option<&str> {
        cluster
            .metadata
            .annotations
            .get(FORCE_UPGRADE_TO)
            .map(|to| to.trim())
            .filter(|to| !to.is_empty())
    }
    let now = to(new)?;
    (old.and_then(to) != Some(now)).then_some(now)
}

/// HyperShift's force skips its own `ClusterVersionUpgradeable` check:
/// whoever sets it needs the `override` verb and gives a reason, and it is
/// recorded as an override is. The target's own decision (which the
/// force accepts `HostedClusterUpgradeable` in, and nothing else) stands.
fn force_upgrade_write(
    request: &Request<HostedCluster>,
    new: &HostedCluster,
    to: &str,
    decision: Decision,
) -> Decision {
    let user = request.user.username.as_str();
    let Some(reason) = new
        .metadata
        .annotations
        .get(OVERRIDE_REASON)
        .map(|r| r.trim())
        .filter(|r| !r.is_empty())
    else {
        return Decision::Final(Verdict::deny(
            Reason::ForceRefused,
            403,
            message::force_upgrade_without_reason(),
        ));
    };
    let refused = Verdict::deny(
        Reason::ForceRefused,
        403,
        message::force_upgrade_refused(user),
    );
    let mut granted = super::verdict::granted_if_authorized(decision);
    granted
        .audit
        .insert(audit::FORCE_UPGRADE_TO.into(), to.to_owned());
    granted
        .audit
        .insert(audit::OVERRIDE_REASON.into(), reason.to_owned());
    granted
        .effects
        .push(super::verdict::Effect::Event(EventNote {
            warning: true,
            reason: "PreflightForceUpgradeTo",
            message: format!("{user} set {FORCE_UPGRADE_TO}={to}: {reason}"),
            related: None,
        }));
    Decision::NeedsAuthorization(Box::new(PendingOverride {
        user: request.user.clone(),
        granted,
        refused,
        asked: Asked::Force,
        verb: Verb::Override,
    }))
}
