//! Whether the gate would let an update to each offered target through
//! now: the readiness it publishes to a fleet's hub (`--cluster-claims`).
//!
//! It is the webhook's own answer, not a second rule: each target is
//! decided as the write `oc adm upgrade --to-image` would make of the
//! ClusterVersion as the watch holds it, by someone holding no override
//! verb. So "Cleared" on the hub means exactly that this cluster's gate
//! would allow the write, and a claim on the ClusterVersion that only an
//! authorized writer makes count (an override, an accept) clears nothing.

use jiff::Timestamp;

use super::decision::{Authorization, Decision, Policy, Reason, decide};
use super::ports::ResultLookup;
use super::review::{Operation, Request, UserInfo};
use crate::model::cluster_claim::Readiness;
use crate::model::cluster_version::{ClusterVersion, DesiredUpdate};
use crate::model::release::{ReleaseKey, Version};
use crate::model::standing::{Exemptions, Standing};

/// Who the decision is told asks: no one with any verb.
const ASKER: &str = "preflight-gate:readiness";

/// The readiness of every target the update graph offers, by version; a
/// target the cluster already runs or is updating to is no update and has
/// none, nor has one offered without a version.
pub fn readiness(
    cv: &ClusterVersion,
    source: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Vec<(Version, Readiness)> {
    // One request, its target changed for each release: the ClusterVersion
    // (hundreds of KiB with a long history) is copied twice, not twice a
    // target.
    let mut request = Request {
        uid: String::new(),
        api_version: "admission.k8s.io/v1".to_owned(),
        operation: Operation::Update,
        sub_resource: None,
        name: cv.metadata.name.clone(),
        user: UserInfo {
            username: ASKER.to_owned(),
            ..UserInfo::default()
        },
        dry_run: true,
        object: Some(cv.clone()),
        old_object: Some(cv.clone()),
    };
    cv.offered()
        .filter_map(|release| {
            let version = Version::parse(&release.version)?;
            if let Some(new) = request.object.as_mut() {
                new.spec.desired_update = Some(DesiredUpdate {
                    version: Some(release.version.clone()),
                    image: Some(release.image.clone()),
                    ..DesiredUpdate::default()
                });
            }
            let readiness = of_target(&request, &release.image, source, policy, now)?;
            Some((version, readiness))
        })
        .collect()
}

/// The decision on `request`, which sets `image` as the target, read as
/// readiness; `None` when the write would change nothing.
fn of_target(
    request: &Request,
    image: &str,
    source: &dyn ResultLookup,
    policy: &Policy,
    now: Timestamp,
) -> Option<Readiness> {
    let verdict = match decide(request, source, policy, now) {
        Decision::Final(verdict) => verdict,
        // What an override or accept would let through is not cleared.
        Decision::NeedsAuthorization(pending) => pending.resolve(Authorization::Denied),
    };
    Some(match verdict.reason {
        Reason::NoTargetChange => return None,
        Reason::Passed => Readiness::Cleared,
        Reason::Pending | Reason::PendingAllowed => Readiness::Pending,
        // Blocking results, or a run that failed as a whole (no check named).
        Reason::Failed => Readiness::Blocked(blocking_checks(image, source, policy)),
        Reason::OutsideWindow => Readiness::Blocked(Vec::new()),
        _ => Readiness::Error,
    })
}

/// The checks whose results block the target, as the decision counts
/// them with no accept: their names, for the summary.
fn blocking_checks(image: &str, source: &dyn ResultLookup, policy: &Policy) -> Vec<String> {
    let exemptions = Exemptions::fail_open(policy.fail_open_checks.iter().cloned());
    let lookup = source.lookup(&ReleaseKey::from_image(image));
    let Some(status) = lookup.result.as_ref().and_then(|r| r.status.as_ref()) else {
        return Vec::new();
    };
    status
        .results
        .iter()
        .filter(|c| exemptions.standing(c) == Standing::Blocks)
        .map(|c| c.name.clone())
        .collect()
}
