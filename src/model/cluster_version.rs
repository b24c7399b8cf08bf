//! The parts of a `ClusterVersion` that the gate reads, and how the target of
//! a request is resolved the way the cluster-version operator resolves it.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::meta::{Condition, Metadata, is_true, newest_condition_time, null_as_default};
use super::release::{ReleaseKey, Version, is_image};

/// A lean view of `config.openshift.io/v1` ClusterVersion: the fields the
/// decision, the checks and the controller read. Everything else is
/// skipped; of the fields that decide what the cluster trusts (the graph,
/// signature stores, overrides, capabilities) only whether a write changes
/// them is read ([`Spec::trust_changes`]).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterVersion {
    pub metadata: Metadata,
    pub spec: Spec,
    pub status: Status,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    #[serde(rename = "clusterID")]
    pub cluster_id: Option<String>,
    pub channel: Option<String>,
    pub desired_update: Option<DesiredUpdate>,
    /// The update graph's server: whoever sets it chooses what is offered.
    pub upstream: Option<String>,
    /// Where the CVO reads release signatures.
    pub signature_stores: Option<serde_json::Value>,
    /// Components the CVO stops managing (`unmanaged: true`).
    pub overrides: Option<serde_json::Value>,
    /// The optional capabilities enabled.
    pub capabilities: Option<serde_json::Value>,
}

impl Spec {
    /// The fields that decide what the cluster trusts and runs, each by
    /// its name in the API, that differ from `before`: a new graph
    /// (`upstream`), new signature stores, overrides that take a component
    /// away from the CVO, capabilities. An empty value and an absent one
    /// are the same.
    pub fn trust_changes(&self, before: &Spec) -> Vec<&'static str> {
        fn set(v: &Option<serde_json::Value>) -> Option<&serde_json::Value> {
            v.as_ref().filter(|v| {
                !(v.is_null()
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_object().is_some_and(serde_json::Map::is_empty))
            })
        }
        let upstream = |s: &Spec| s.upstream.clone().filter(|u| !u.trim().is_empty());
        let mut changed = Vec::new();
        if upstream(self) != upstream(before) {
            changed.push("spec.upstream");
        }
        for (name, now, was) in [
            (
                "spec.signatureStores",
                &self.signature_stores,
                &before.signature_stores,
            ),
            ("spec.overrides", &self.overrides, &before.overrides),
            (
                "spec.capabilities",
                &self.capabilities,
                &before.capabilities,
            ),
        ] {
            if set(now) != set(was) {
                changed.push(name);
            }
        }
        changed
    }
}

/// `spec.desiredUpdate`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct DesiredUpdate {
    pub version: Option<String>,
    pub image: Option<String>,
    pub force: bool,
    /// `Preflight` asks the CVO to only check the target (enhancement #1930).
    pub mode: Option<String>,
    /// `Multi` asks for the multi-architecture payload of the same version.
    pub architecture: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub accept_risks: Vec<AcceptRisk>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default)]
pub struct AcceptRisk {
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Status {
    /// The release the cluster runs or is moving to; empty before the CVO
    /// first writes it.
    pub desired: Release,
    #[serde(deserialize_with = "null_as_default")]
    pub history: Vec<UpdateHistory>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    #[serde(deserialize_with = "null_as_default")]
    pub available_updates: Vec<Release>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditional_updates: Vec<ConditionalUpdate>,
    /// Every risk of the conditional updates, once each, with whether it
    /// applies to this cluster (the CVO writes it since it handles
    /// `acceptRisks`); a conditional update names its own in `riskNames`.
    #[serde(deserialize_with = "null_as_default")]
    pub conditional_update_risks: Vec<Risk>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Release {
    pub version: String,
    pub image: String,
    /// `Multi` for a multi-architecture payload, else empty.
    pub architecture: String,
}

/// The value of `architecture` that names the multi-architecture payload.
pub const MULTI: &str = "Multi";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateHistory {
    pub state: String,
    pub version: String,
    pub image: String,
    pub started_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
    /// Whether the CVO verified the release's signature before it applied
    /// it; an update forced past a failed verification is not. (The
    /// install's entry never is.)
    pub verified: bool,
    /// What the CVO let through for this update (`Forced through blocking
    /// failures: …`), since 4.13.
    pub accepted_risks: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ConditionalUpdate {
    pub release: Release,
    #[serde(deserialize_with = "null_as_default")]
    pub risks: Vec<Risk>,
    /// The names of its risks in `status.conditionalUpdateRisks`.
    #[serde(deserialize_with = "null_as_default")]
    pub risk_names: Vec<String>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Risk {
    pub name: String,
    pub message: String,
    pub url: String,
    /// `Applies`: whether the risk's matching rules match this cluster, as
    /// the CVO evaluated them (True, False, or Unknown when it could not).
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

impl ConditionalUpdate {
    /// Its risks: its own list, else those `riskNames` names among the
    /// ClusterVersion's `conditionalUpdateRisks`.
    pub(crate) fn risks<'a>(&'a self, status: &'a Status) -> Vec<&'a Risk> {
        if !self.risks.is_empty() {
            return self.risks.iter().collect();
        }
        self.risk_names
            .iter()
            .filter_map(|name| {
                status
                    .conditional_update_risks
                    .iter()
                    .find(|r| &r.name == name)
            })
            .collect()
    }
}

/// A target release that results can be looked up for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub image: String,
    pub version: Option<String>,
    pub key: ReleaseKey,
    /// A change of the payload's architecture that the target asks for.
    pub architecture: Option<ArchitectureChange>,
}

/// How far an update has got, from the CVO's `Progressing` message: its
/// `(P% complete)`, else `N of M done`.
fn progress_of(message: &str) -> Option<u8> {
    let said = message.split('(').find_map(|part| {
        part.split_once("% complete")
            .and_then(|(n, _)| n.trim().parse::<u8>().ok())
    });
    if said.is_some() {
        return said.map(|p| p.min(100));
    }
    let (before, after) = message.split_once(" done")?.0.rsplit_once(" of ")?;
    let done: u64 = before.rsplit(' ').next()?.parse().ok()?;
    let total: u64 = after.trim().parse().ok()?;
    (total > 0).then(|| u8::try_from((done.min(total) * 100) / total).unwrap_or(100))
}

/// A migration to the multi-architecture payload under way
/// ([`ClusterVersion::multi_migration`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The version migrated, the one the cluster runs.
    pub version: String,
    /// The multi-architecture payload, once the CVO has taken the
    /// migration up.
    pub payload: Option<ReleaseKey>,
    /// How far it has got, when the CVO says.
    pub percent: Option<u8>,
}

impl Migration {
    /// How far it has got, in words: `47% done`.
    pub fn progress(&self) -> String {
        match (&self.payload, self.percent) {
            (None, _) => "asked for, not yet taken up by the CVO".to_owned(),
            (Some(_), Some(p)) => format!("{p}% done"),
            (Some(_), None) => "progress not reported".to_owned(),
        }
    }

    /// Whether asking for `target` asks for this migration again: its
    /// payload, or, before the CVO has one, its version on any payload
    /// that is not tagged for one architecture.
    pub fn is_asked_by(&self, target: &Target) -> bool {
        match &self.payload {
            Some(payload) => *payload == target.key && target.architecture.is_none(),
            None => {
                target.version.as_deref() == Some(self.version.as_str())
                    && target.architecture != Some(ArchitectureChange::FromMulti)
                    && tagged_multi(&target.image) != Some(false)
            }
        }
    }
}

/// A move between a single-architecture payload and the multi-architecture
/// one: a whole payload change, even at the same version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchitectureChange {
    /// To the multi-architecture payload (`oc adm upgrade --to-multi-arch`
    /// writes `desiredUpdate: {architecture: Multi, version: <current>}`).
    /// Its image is the update service's to give; the target keeps the
    /// current release's, under which its results are kept.
    ToMulti,
    /// From the multi-architecture payload back to a single architecture,
    /// which OpenShift does not support.
    FromMulti,
}

impl Target {
    /// The release `image`, at `version` when known.
    pub fn image(image: &str, version: Option<String>) -> Self {
        Self {
            key: ReleaseKey::from_image(image),
            image: image.to_owned(),
            version,
            architecture: None,
        }
    }

    /// A release known by its version alone (no image: one the update
    /// graph does not offer). Results cannot be keyed by it; only the
    /// offline report checks it.
    pub(crate) fn version_only(version: &str) -> Self {
        Self {
            key: ReleaseKey::from_image(""),
            image: String::new(),
            version: Some(version.to_owned()),
            architecture: None,
        }
    }

    /// How the target is named to a person: its version when known, and
    /// the architecture it moves to.
    pub fn display(&self) -> String {
        let name = self.version.as_deref().unwrap_or(&self.image);
        match self.architecture {
            Some(ArchitectureChange::ToMulti) => format!("{name} (multi-architecture)"),
            Some(ArchitectureChange::FromMulti) => format!("{name} (single-architecture)"),
            None => name.to_owned(),
        }
    }

    /// Whether an override naming `value` (a version, pullspec or digest)
    /// names this target.
    pub(crate) fn is_named_by(&self, value: &str) -> bool {
        let value = value.trim();
        !value.is_empty()
            && (self.version.as_deref() == Some(value)
                || self.image == value
                || self.key == ReleaseKey::from_image(value))
    }
}

/// What `spec.desiredUpdate` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// No target: `desiredUpdate` is absent or names nothing.
    None,
    Target(Target),
    /// A version that is in neither `availableUpdates` nor `conditionalUpdates`.
    UnknownVersion(String),
    /// An image with a version that the update graph says is another's.
    VersionMismatch {
        image: String,
        claimed: String,
        known: String,
    },
}

/// The version a release image's tag names (`4.12.64-x86_64`, `4.16.0-ec.3`,
/// `4.15.0-0.okd-scos-2024-01-18-223523`): OpenShift tags a release
/// `VERSION` or `VERSION-ARCH`. None for a digest or any other tag.
pub fn tag_version(image: &str) -> Option<Version> {
    if image.contains('@') {
        return None;
    }
    let tag = image_tag(image)?;
    let bare = ARCHES
        .iter()
        .find_map(|arch| tag.strip_suffix(arch))
        .unwrap_or(tag);
    // A release's tag has all three parts (`4.16`, `latest` name none).
    let core = bare.split('-').next().unwrap_or_default();
    (core.split('.').count() == 3)
        .then(|| Version::parse(bare))
        .flatten()
}

/// The architectures a release tag may end in; `-multi` names the
/// multi-architecture payload.
const ARCHES: &[&str] = &[
    "-x86_64", "-aarch64", "-arm64", "-ppc64le", "-s390x", "-multi",
];

/// An image's tag, when it has one.
fn image_tag(image: &str) -> Option<&str> {
    let (_, tag) = image
        .rsplit_once(':')
        .filter(|(repo, _)| !repo.ends_with('/') && !repo.is_empty())?;
    (!tag.contains('/')).then_some(tag)
}

/// Whether a release image is tagged for the multi-architecture payload
/// (`4.14.8-multi`): `Some(true)`, for one architecture (`4.14.8-x86_64`):
/// `Some(false)`; a digest or another tag says nothing.
fn tagged_multi(image: &str) -> Option<bool> {
    if image.contains('@') {
        return None;
    }
    let tag = image_tag(image)?;
    let arch = ARCHES.iter().find(|arch| tag.ends_with(*arch))?;
    Some(*arch == "-multi")
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl ClusterVersion {
    /// The version the cluster runs or is moving to (`status.desired`).
    pub(crate) fn desired_version(&self) -> Option<Version> {
        Version::parse(&self.status.desired.version)
    }

    /// Whether the cluster runs (or is moving to) the multi-architecture
    /// payload, as the CVO says: `status.desired` is Multi (its
    /// `architecture`, or a `-multi` tag), or the release it accepted was
    /// (`ReleaseAccepted`: `Payload loaded version="…" image="…"
    /// architecture="Multi"`). What the spec asks for is not enough: the
    /// CVO may not have taken it up.
    pub fn is_multi(&self) -> bool {
        let desired = &self.status.desired;
        desired.architecture == MULTI
            || tagged_multi(&desired.image) == Some(true)
            || self.accepted_multi()
    }

    /// The CVO's `ReleaseAccepted=True` names the multi-architecture
    /// payload.
    fn accepted_multi(&self) -> bool {
        super::meta::condition(&self.status.conditions, "ReleaseAccepted").is_some_and(|c| {
            c.status == "True"
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(&format!("architecture=\"{MULTI}\"")))
        })
    }

    /// How far the update the CVO applies has got, in percent, as its
    /// `Progressing` message says it (`Working towards 4.14.1: 106 of 863
    /// done (12% complete)`, or only `106 of 863 done`).
    pub fn update_progress(&self) -> Option<u8> {
        let c = super::meta::condition(&self.status.conditions, "Progressing")
            .filter(|c| c.status == "True")?;
        progress_of(c.message.as_deref()?)
    }

    /// The migration to the multi-architecture payload under way, if any:
    /// asked for (`spec.desiredUpdate.architecture: Multi`) or taken up by
    /// the CVO ([`Self::is_multi`]) and not complete. The migration keeps
    /// the version (`oc adm upgrade --to-multi-arch` asks for the one the
    /// cluster runs): its history entry is `Partial`, at the version last
    /// completed, on another image. Asked for and not yet taken up, it
    /// has no payload yet.
    pub fn multi_migration(&self) -> Option<Migration> {
        let asks = self
            .spec
            .desired_update
            .as_ref()
            .is_some_and(|u| non_empty(&u.architecture) == Some(MULTI));
        let multi = self.is_multi();
        if !asks && !multi {
            return None;
        }
        let newest = self.status.history.first()?;
        if newest.state == "Partial" {
            return self.payload_moving().map(|moving| Migration {
                version: moving.version.clone(),
                payload: Some(ReleaseKey::from_image(&moving.image)),
                percent: self.update_progress(),
            });
        }
        (asks && !multi).then(|| Migration {
            version: newest.version.clone(),
            payload: None,
            percent: None,
        })
    }

    /// The payload moving to another architecture now: the newest history
    /// entry, when it is `Partial`, at the version last completed, on
    /// another image (by digest). A migration to the multi-architecture
    /// payload taken up is one ([`Self::multi_migration`]); the plan,
    /// which no control-plane estimate fits then, takes any such move.
    pub fn payload_moving(&self) -> Option<&UpdateHistory> {
        let (newest, older) = self.status.history.split_first()?;
        if newest.state != "Partial" {
            return None;
        }
        let previous = older.iter().find(|h| h.state == "Completed")?;
        let moved = previous.version == newest.version
            && ReleaseKey::from_image(&previous.image) != ReleaseKey::from_image(&newest.image);
        moved.then_some(newest)
    }

    /// Whether the cluster is still being installed: its history holds no
    /// completed entry, only the install's own Partial one, and the
    /// ClusterVersion is not Available. An install is not an update.
    pub fn installing(&self) -> bool {
        matches!(&self.status.history[..], [only] if only.state == "Partial")
            && !is_true(&self.status.conditions, "Available")
    }

    /// The update the cluster is in the middle of: `Progressing=True` with a
    /// `Partial` newest history entry.
    pub(crate) fn update_in_progress(&self) -> Option<&UpdateHistory> {
        self.status
            .history
            .first()
            .filter(|h| h.state == "Partial" && is_true(&self.status.conditions, "Progressing"))
    }

    /// The newest time the object records, for the time of the data.
    pub(crate) fn newest_time(&self) -> Option<Timestamp> {
        let history = self
            .status
            .history
            .iter()
            .flat_map(|h| [h.started_time, h.completion_time])
            .flatten();
        history
            .chain(newest_condition_time(&self.status.conditions))
            .chain(self.metadata.creation_timestamp)
            .max()
    }

    /// The newest completed version in the history.
    pub(crate) fn completed_version(&self) -> Option<Version> {
        self.status
            .history
            .iter()
            .find(|h| h.state == "Completed")
            .and_then(|h| Version::parse(&h.version))
    }

    /// Resolves the target like the CVO: an image wins; otherwise the
    /// version is looked up in `availableUpdates`, then in
    /// `conditionalUpdates`, then in the current desired release.
    pub(crate) fn resolve_target(&self) -> Resolution {
        match &self.spec.desired_update {
            Some(update) => self.resolve(update),
            None => Resolution::None,
        }
    }

    /// Resolves what a person asks for on the command line (`4.16.3`, or a
    /// pullspec) by the same rule as `spec.desiredUpdate`.
    ///
    /// A person may name a release by a tag such as
    /// `ocp-release:4.12.64-x86_64`: when the update graph does not know the
    /// image, its version is read from the tag, so the report still knows
    /// the kind of update. (The webhook never does: a tag in a review is
    /// the requester's word, and only the graph's is taken there.)
    pub(crate) fn resolve_named(&self, to: &str) -> Resolution {
        let to = Some(to.trim().to_owned());
        let update = if is_image(to.as_deref().unwrap_or_default()) {
            DesiredUpdate {
                image: to,
                ..DesiredUpdate::default()
            }
        } else {
            DesiredUpdate {
                version: to,
                ..DesiredUpdate::default()
            }
        };
        match self.resolve(&update) {
            Resolution::Target(mut target) if target.version.is_none() => {
                target.version = tag_version(&target.image).map(|v| v.to_string());
                Resolution::Target(target)
            }
            other => other,
        }
    }

    /// The one target resolver: an image wins, with its version from the
    /// update graph; a bare version must be in the graph or be the current
    /// release.
    pub(crate) fn resolve(&self, update: &DesiredUpdate) -> Resolution {
        match self.resolve_release(update) {
            Resolution::Target(mut target) => {
                target.architecture = self.architecture_change(update, &target);
                Resolution::Target(target)
            }
            other => other,
        }
    }

    /// The architecture change `update` asks for: the multi-architecture
    /// payload (`architecture: Multi`, an image the update graph or its tag
    /// says is Multi) for a cluster that does not run it, or an image
    /// tagged for one architecture for a cluster that does.
    fn architecture_change(
        &self,
        update: &DesiredUpdate,
        target: &Target,
    ) -> Option<ArchitectureChange> {
        let graph_says_multi = self
            .releases()
            .any(|r| r.architecture == MULTI && ReleaseKey::from_image(&r.image) == target.key);
        let multi = non_empty(&update.architecture) == Some(MULTI)
            || graph_says_multi
            || tagged_multi(&target.image) == Some(true);
        // Only the CVO's word makes the cluster Multi: a review's spec
        // asking for Multi is the change being judged.
        let runs_multi = self.is_multi();
        if !runs_multi && multi {
            return Some(ArchitectureChange::ToMulti);
        }
        if multi {
            return None;
        }
        let migration = self.multi_migration();
        // A payload tagged for one architecture, or, while a migration is
        // under way, an image that is not its multi-architecture payload,
        // leaves Multi (or the migration) behind.
        let single = tagged_multi(&target.image) == Some(false);
        let not_the_payload = migration
            .as_ref()
            .and_then(|m| m.payload.as_ref())
            .is_some_and(|p| target.key.is_digest() && *p != target.key);
        ((runs_multi || migration.is_some()) && (single || not_the_payload))
            .then_some(ArchitectureChange::FromMulti)
    }

    fn resolve_release(&self, update: &DesiredUpdate) -> Resolution {
        let version = non_empty(&update.version);
        if let Some(image) = non_empty(&update.image) {
            // The version comes from the update graph, matched by digest,
            // never from the request: a version beside the image that the
            // graph contradicts is refused, one it cannot confirm ignored.
            let known = self.version_of_image(image);
            if let (Some(claimed), Some(known)) = (version, known.as_deref())
                && Version::parse(claimed) != Version::parse(known)
            {
                return Resolution::VersionMismatch {
                    image: image.to_owned(),
                    claimed: claimed.to_owned(),
                    known: known.to_owned(),
                };
            }
            return Resolution::Target(Target::image(image, known));
        }
        let Some(version) = version else {
            return Resolution::None;
        };
        match self.image_of_version(version) {
            Some(image) => Resolution::Target(Target::image(image, Some(version.to_owned()))),
            None => Resolution::UnknownVersion(version.to_owned()),
        }
    }

    /// Whether `target` is `status.desired`: the release the cluster runs,
    /// or the one it is already updating to, on the same architecture.
    /// Asking for it changes nothing.
    pub(crate) fn is_desired(&self, target: &Target) -> bool {
        let desired = &self.status.desired;
        !desired.image.is_empty()
            && ReleaseKey::from_image(&desired.image) == target.key
            && target.architecture.is_none()
    }

    /// The releases the update graph offers: `availableUpdates`, then the
    /// conditional updates' (an entry without an image is none).
    pub fn offered(&self) -> impl Iterator<Item = &Release> {
        let status = &self.status;
        status
            .available_updates
            .iter()
            .chain(status.conditional_updates.iter().map(|c| &c.release))
            .filter(|r| !r.image.is_empty())
    }

    fn releases(&self) -> impl Iterator<Item = &Release> {
        self.offered().chain(std::iter::once(&self.status.desired))
    }

    fn image_of_version(&self, version: &str) -> Option<&str> {
        self.releases()
            .find(|r| r.version == version && !r.image.is_empty())
            .map(|r| r.image.as_str())
    }

    /// The version the update graph (or the current release) gives
    /// `image`, matched by digest.
    pub(crate) fn version_of_image(&self, image: &str) -> Option<String> {
        let key = ReleaseKey::from_image(image);
        self.releases()
            .find(|r| !r.version.is_empty() && ReleaseKey::from_image(&r.image) == key)
            .map(|r| r.version.clone())
    }

    pub fn annotation(&self, name: &str) -> Option<&str> {
        self.metadata
            .annotations
            .get(name)
            .map(String::as_str)
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }
}

/// Whether two resolutions ask for the same release.
pub(crate) fn same_target(new: &Resolution, old: &Resolution) -> bool {
    match (new, old) {
        (Resolution::None, Resolution::None) => true,
        (Resolution::Target(a), Resolution::Target(b)) => a.key == b.key,
        (Resolution::UnknownVersion(a), Resolution::UnknownVersion(b)) => a == b,
        (a @ Resolution::VersionMismatch { .. }, b) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn spec(json: serde_json::Value) -> Spec {
        serde_json::from_value(json).unwrap()
    }

    #[rstest]
    #[case::nothing(json!({"channel": "stable-4.15"}), json!({"channel": "fast-4.15"}), &[])]
    #[case::a_new_graph(json!({}), json!({"upstream": "https://graph.example/api"}), &["spec.upstream"])]
    #[case::the_default_graph_again(json!({"upstream": "https://graph.example/api"}), json!({}), &["spec.upstream"])]
    #[case::empty_is_absent(json!({"upstream": ""}), json!({"signatureStores": [], "overrides": null}), &[])]
    #[case::stores(json!({}), json!({"signatureStores": [{"url": "https://sigs.example"}]}), &["spec.signatureStores"])]
    #[case::an_unmanaged_component(
        json!({"overrides": []}),
        json!({"overrides": [{"kind": "Deployment", "group": "apps", "namespace": "openshift-etcd-operator", "name": "etcd-operator", "unmanaged": true}]}),
        &["spec.overrides"]
    )]
    #[case::capabilities(json!({"capabilities": {"baselineCapabilitySet": "None"}}), json!({"capabilities": {"baselineCapabilitySet": "vCurrent"}}), &["spec.capabilities"])]
    #[case::all_at_once(
        json!({}),
        json!({"upstream": "u", "signatureStores": [{"url": "s"}], "overrides": [{"name": "x"}], "capabilities": {"additionalEnabledCapabilities": ["Console"]}}),
        &["spec.upstream", "spec.signatureStores", "spec.overrides", "spec.capabilities"]
    )]
    fn what_the_cluster_trusts_changes_by_name(
        #[case] before: serde_json::Value,
        #[case] after: serde_json::Value,
        #[case] changed: &[&str],
    ) {
        assert_eq!(spec(after).trust_changes(&spec(before)), changed);
    }

    #[rstest]
    #[case(
        "quay.io/openshift-release-dev/ocp-release:4.12.64-x86_64",
        Some("4.12.64")
    )]
    #[case(
        "quay.io/openshift-release-dev/ocp-release:4.16.0-ec.3-aarch64",
        Some("4.16.0-ec.3")
    )]
    #[case(
        "quay.io/okd/scos-release:4.15.0-0.okd-scos-2024-01-18-223523",
        Some("4.15.0-0.okd-scos-2024-01-18-223523")
    )]
    #[case("registry.example:5000/ocp/release:4.14.8-multi", Some("4.14.8"))]
    #[case("registry.example:5000/ocp/release", None)]
    #[case("quay.io/openshift-release-dev/ocp-release:latest", None)]
    #[case("quay.io/openshift-release-dev/ocp-release:4.16", None)]
    #[case("quay.io/openshift-release-dev/ocp-release@sha256:aa", None)]
    fn a_release_tag_names_its_version(#[case] image: &str, #[case] expected: Option<&str>) {
        assert_eq!(tag_version(image), expected.and_then(Version::parse));
    }

    fn graph() -> ClusterVersion {
        serde_json::from_value(serde_json::json!({
            "status": {
                "desired": {"version": "4.12.16", "image": "quay.io/r@sha256:00"},
                "availableUpdates": [{"version": "4.12.20", "image": "quay.io/r@sha256:20"}],
            }
        }))
        .unwrap()
    }

    #[rstest]
    #[case::percent("Working towards 4.14.1: 412 of 863 done (47% complete)", Some(47))]
    #[case::counts_only("Working towards 4.14.1: 700 of 859 done", Some(81))]
    #[case::with_a_wait(
        "Working towards 4.14.1: 106 of 863 done (12% complete), waiting on etcd",
        Some(12)
    )]
    #[case::nothing("Cluster version is 4.14.1", None)]
    #[case::zero_total("Working towards 4.14.1: 0 of 0 done", None)]
    fn progress_is_read_from_the_cvos_words(#[case] message: &str, #[case] percent: Option<u8>) {
        assert_eq!(progress_of(message), percent);
    }

    const SINGLE: &str = "quay.io/openshift-release-dev/ocp-release@sha256:05ba8e63f8a76e568afe87f182334504a01d47342b6ad5b4c3ff83a2463018bd";
    const MULTI_PAYLOAD: &str = "quay.io/openshift-release-dev/ocp-release@sha256:8f3c1d0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c";

    /// A cluster at 4.14.1 (as the `not-upgrading` capture), its
    /// migration to Multi asked for and, when `taken`, taken up by the CVO
    /// and 47% done.
    fn migrating(taken: bool) -> ClusterVersion {
        let completed =
            json!({"state": "Completed", "version": "4.14.1", "image": SINGLE, "verified": false});
        let mut cv = json!({
            "spec": {"desiredUpdate": {"version": "4.14.1", "architecture": "Multi"}},
            "status": {
                "desired": {"version": "4.14.1", "image": SINGLE},
                "history": [completed],
                "conditions": [
                    {"type": "ReleaseAccepted", "status": "True", "reason": "PayloadLoaded",
                     "message": format!("Payload loaded version=\"4.14.1\" image=\"{SINGLE}\" architecture=\"amd64\"")},
                    {"type": "Progressing", "status": "False", "message": "Cluster version is 4.14.1"}]
            }
        });
        if taken {
            cv["status"]["desired"] = json!({"version": "4.14.1", "image": MULTI_PAYLOAD});
            cv["status"]["history"] = json!([
                {"state": "Partial", "version": "4.14.1", "image": MULTI_PAYLOAD, "verified": true},
                completed]);
            cv["status"]["conditions"] = json!([
                {"type": "ReleaseAccepted", "status": "True", "reason": "PayloadLoaded",
                 "message": format!("Payload loaded version=\"4.14.1\" image=\"{MULTI_PAYLOAD}\" architecture=\"Multi\"")},
                {"type": "Progressing", "status": "True", "message": "Working towards 4.14.1: 412 of 863 done (47% complete)"}]);
        }
        serde_json::from_value(cv).unwrap()
    }

    #[test]
    fn a_migration_under_way_is_found_with_its_payload_and_progress() {
        let cv = migrating(true);
        assert!(cv.is_multi(), "ReleaseAccepted names Multi");
        let m = cv.multi_migration().unwrap();
        assert_eq!(m.payload, Some(ReleaseKey::from_image(MULTI_PAYLOAD)));
        assert_eq!(m.progress(), "47% done");
        // Asked for and not taken up yet: no payload.
        let asked = migrating(false).multi_migration().unwrap();
        assert_eq!((asked.payload, asked.percent), (None, None));
        // Done: the newest entry completed on the multi payload.
        let mut done = migrating(true);
        done.status.history[0].state = "Completed".into();
        assert_eq!(done.multi_migration(), None);
        // An update of a Multi cluster to another version is no migration.
        let mut update = migrating(true);
        update.status.history[0].version = "4.14.5".into();
        assert_eq!(update.multi_migration(), None);
    }

    #[rstest]
    #[case::its_payload(MULTI_PAYLOAD, None)]
    #[case::a_single_architecture_tag(
        "quay.io/openshift-release-dev/ocp-release:4.14.1-x86_64",
        Some(ArchitectureChange::FromMulti)
    )]
    #[case::the_single_payload_it_left(SINGLE, Some(ArchitectureChange::FromMulti))]
    #[case::another_digest(
        "quay.io/openshift-release-dev/ocp-release@sha256:1111",
        Some(ArchitectureChange::FromMulti)
    )]
    #[case::a_multi_tag("quay.io/openshift-release-dev/ocp-release:4.14.1-multi", None)]
    fn leaving_the_migrations_payload_abandons_it(
        #[case] image: &str,
        #[case] change: Option<ArchitectureChange>,
    ) {
        let Resolution::Target(target) = migrating(true).resolve_named(image) else {
            panic!()
        };
        assert_eq!(target.architecture, change);
    }

    /// A review's spec asking for Multi is the change judged, not the
    /// cluster's state: the target is a migration, never "no change".
    #[test]
    fn asking_for_multi_is_a_migration_until_the_cvo_takes_it() {
        let cv = migrating(false);
        let Resolution::Target(target) = cv.resolve_target() else {
            panic!()
        };
        assert_eq!(target.architecture, Some(ArchitectureChange::ToMulti));
        assert!(!cv.is_desired(&target));
    }

    #[test]
    fn a_tag_on_the_command_line_gives_the_version_the_graph_does_not() {
        let named = graph().resolve_named("quay.io/r:4.12.64-x86_64");
        let Resolution::Target(target) = named else {
            panic!("{named:?}")
        };
        assert_eq!(target.version.as_deref(), Some("4.12.64"));
    }

    #[test]
    fn a_tag_in_a_review_is_not_taken_for_the_version() {
        let update = DesiredUpdate {
            image: Some("quay.io/r:4.12.64-x86_64".into()),
            ..DesiredUpdate::default()
        };
        let Resolution::Target(target) = graph().resolve(&update) else {
            panic!()
        };
        assert_eq!(target.version, None);
    }

    #[test]
    fn the_graph_wins_over_a_digest_s_claimed_version() {
        let update = DesiredUpdate {
            image: Some("mirror.example/r@sha256:20".into()),
            version: Some("4.13.0".into()),
            ..DesiredUpdate::default()
        };
        assert!(matches!(
            graph().resolve(&update),
            Resolution::VersionMismatch { .. }
        ));
    }
}
