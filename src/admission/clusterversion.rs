//! The parts of a `ClusterVersion` that the gate reads, and how the target of
//! a request is resolved the way the cluster-version operator resolves it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::release::ReleaseKey;

/// A lean view of `config.openshift.io/v1` ClusterVersion. Fields the decision
/// does not read (history, risks, conditions, capabilities) are skipped.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ClusterVersion {
    pub metadata: Metadata,
    pub spec: Spec,
    pub status: Status,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub name: String,
    pub uid: String,
    #[serde(deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    pub desired_update: Option<DesiredUpdate>,
    pub channel: Option<String>,
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
    pub desired: Option<Release>,
    #[serde(deserialize_with = "null_as_default")]
    pub available_updates: Vec<Release>,
    #[serde(deserialize_with = "null_as_default")]
    pub conditional_updates: Vec<ConditionalUpdate>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Release {
    pub version: String,
    pub image: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConditionalUpdate {
    pub release: Release,
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A target release that results can be looked up for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub image: String,
    pub version: Option<String>,
    pub key: ReleaseKey,
}

impl Target {
    /// How the target is named to a person: its version when known.
    pub fn display(&self) -> &str {
        self.version.as_deref().unwrap_or(&self.image)
    }

    /// Whether an override naming `value` (a version, pullspec or digest)
    /// names this target.
    pub fn is_named_by(&self, value: &str) -> bool {
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
    /// Resolves the target like the CVO: an image wins; otherwise the
    /// version is looked up in `availableUpdates`, then in
    /// `conditionalUpdates`, then in the current desired release.
    pub fn resolve_target(&self) -> Resolution {
        let Some(update) = &self.spec.desired_update else {
            return Resolution::None;
        };
        let version = non_empty(&update.version);
        if let Some(image) = non_empty(&update.image) {
            // The version comes from the update graph, matched by digest,
            // never from the request: a version beside the image that the
            // graph contradicts is refused, one it cannot confirm ignored.
            let known = self.version_of_image(image);
            if let (Some(claimed), Some(known)) = (version, known.as_deref())
                && crate::release::Version::parse(claimed) != crate::release::Version::parse(known)
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
    pub fn is_desired(&self, target: &Target) -> bool {
        self.status
            .desired
            .as_ref()
            .is_some_and(|d| !d.image.is_empty() && ReleaseKey::from_image(&d.image) == target.key)
    }

    fn releases(&self) -> impl Iterator<Item = &Release> {
        let status = &self.status;
        status
            .available_updates
            .iter()
            .chain(status.conditional_updates.iter().map(|c| &c.release))
            .chain(status.desired.iter())
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
pub fn same_target(new: &Resolution, old: &Resolution) -> bool {
    match (new, old) {
        (Resolution::None, Resolution::None) => true,
        (Resolution::Target(a), Resolution::Target(b)) => a.key == b.key,
        (Resolution::UnknownVersion(a), Resolution::UnknownVersion(b)) => a == b,
        (a @ Resolution::VersionMismatch { .. }, b) => a == b,
        _ => false,
    }
}
