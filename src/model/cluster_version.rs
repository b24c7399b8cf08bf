//! The parts of a `ClusterVersion` that the gate reads, and how the target of
//! a request is resolved the way the cluster-version operator resolves it.

use jiff::Timestamp;
use serde::Deserialize;

use super::meta::{Condition, Metadata, is_true, newest_condition_time, null_as_default};
use super::release::{ReleaseKey, Version, is_image};

/// A lean view of `config.openshift.io/v1` ClusterVersion: the fields the
/// decision, the checks and the controller read. Everything else (
/// capabilities, overrides, signature stores) is skipped.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterVersion {
    pub metadata: Metadata,
    pub spec: Spec,
    pub status: Status,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    #[serde(rename = "clusterID")]
    pub cluster_id: Option<String>,
    pub channel: Option<String>,
    pub desired_update: Option<DesiredUpdate>,
}

/// `spec.desiredUpdate`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
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

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
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
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct Release {
    pub version: String,
    pub image: String,
    pub url: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateHistory {
    pub state: String,
    pub version: String,
    pub image: String,
    pub started_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConditionalUpdate {
    pub release: Release,
    #[serde(deserialize_with = "null_as_default")]
    pub risks: Vec<Risk>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Risk {
    pub name: String,
    pub message: String,
    pub url: String,
}

/// A target release that results can be looked up for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub image: String,
    pub version: Option<String>,
    pub key: ReleaseKey,
}

impl Target {
    /// The release `image`, at `version` when known.
    pub fn image(image: &str, version: Option<String>) -> Self {
        Self {
            key: ReleaseKey::from_image(image),
            image: image.to_owned(),
            version,
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
        }
    }

    /// How the target is named to a person: its version when known.
    pub fn display(&self) -> &str {
        self.version.as_deref().unwrap_or(&self.image)
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

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl ClusterVersion {
    /// The version the cluster runs or is moving to (`status.desired`).
    pub(crate) fn desired_version(&self) -> Option<Version> {
        Version::parse(&self.status.desired.version)
    }

    /// Whether the cluster is still being installed: its history holds no
    /// completed entry, only the install's own Partial one, and the
    /// ClusterVersion is not Available. An install is not an update.
    pub fn installing(&self) -> bool {
        matches!(&self.status.history[..], [only] if only.state == "Partial")
            && !is_true(&self.status.conditions, "Available")
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
        self.resolve(&update)
    }

    /// The one target resolver: an image wins, with its version from the
    /// update graph; a bare version must be in the graph or be the current
    /// release.
    pub(crate) fn resolve(&self, update: &DesiredUpdate) -> Resolution {
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
            return Resolution::Target(Target {
                key: ReleaseKey::from_image(image),
                image: image.to_owned(),
                version: known,
            });
        }
        let Some(version) = version else {
            return Resolution::None;
        };
        match self.image_of_version(version) {
            Some(image) => Resolution::Target(Target {
                key: ReleaseKey::from_image(image),
                image: image.to_owned(),
                version: Some(version.to_owned()),
            }),
            None => Resolution::UnknownVersion(version.to_owned()),
        }
    }

    /// Whether `target` is `status.desired`: the release the cluster runs,
    /// or the one it is already updating to. Asking for it changes nothing.
    pub(crate) fn is_desired(&self, target: &Target) -> bool {
        let desired = &self.status.desired;
        !desired.image.is_empty() && ReleaseKey::from_image(&desired.image) == target.key
    }

    fn releases(&self) -> impl Iterator<Item = &Release> {
        let status = &self.status;
        status
            .available_updates
            .iter()
            .chain(status.conditional_updates.iter().map(|c| &c.release))
            .chain(std::iter::once(&status.desired))
    }

    fn image_of_version(&self, version: &str) -> Option<&str> {
        self.releases()
            .find(|r| r.version == version && !r.image.is_empty())
            .map(|r| r.image.as_str())
    }

    fn version_of_image(&self, image: &str) -> Option<String> {
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
