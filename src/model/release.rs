//! Identity of a release: how results are keyed and how targets are shown.

use std::fmt;

/// The key under which preflight results for a release are stored: the
/// image digest when the pullspec has one, otherwise the whole pullspec.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReleaseKey(String);

impl ReleaseKey {
    pub fn from_image(pullspec: &str) -> Self {
        let pullspec = pullspec.trim();
        match pullspec.rsplit_once('@') {
            Some((_, digest)) if digest.contains(':') => Self(digest.to_owned()),
            _ => Self(pullspec.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the key is a content digest (`sha256:…`): a tag can be
    /// moved to another release after it was checked, a digest cannot.
    pub fn is_digest(&self) -> bool {
        self.0.split_once(':').is_some_and(|(algorithm, hex)| {
            matches!(algorithm, "sha256" | "sha384" | "sha512")
                && !hex.is_empty()
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        })
    }

    /// A DNS-1123 name derived from the key, stable for the same release, e.g.
    /// `release-sha256-3f5a0c1d2e4b`.
    pub fn object_name(&self) -> String {
        let mut name = String::from("release-");
        let mut last_dash = true;
        for c in self.0.chars().flat_map(char::to_lowercase) {
            let c = if c.is_ascii_alphanumeric() { c } else { '-' };
            if c == '-' && last_dash {
                continue;
            }
            last_dash = c == '-';
            name.push(c);
            if name.len() >= 63 {
                break;
            }
        }
        name.trim_end_matches('-').to_owned()
    }
}

impl fmt::Display for ReleaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An OpenShift release version: `4.15.3`, `4.16.0-ec.2`, `4.14.0-rc.1`,
/// `4.15.0-okd-scos.9`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// The pre-release part, e.g. `ec.2` or `rc.1`, ordered as semver 2
    /// orders it: numeric identifiers as numbers, so `ec.9` < `ec.10`.
    pub pre: Option<semver::Prerelease>,
}

impl Version {
    /// Reads `X.Y[.Z][-pre][+build]`, with an optional leading `v`. Build
    /// metadata is dropped, as semver precedence ignores it. A pre-release
    /// that semver does not allow (an empty identifier, a numeric one with
    /// a leading zero) is no version.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let text = text
            .split_once('+')
            .map_or(text, |(version, _build)| version);
        let (core, pre) = match text.split_once('-') {
            Some((_, "")) => return None,
            Some((core, pre)) => (core, Some(semver::Prerelease::new(pre).ok()?)),
            None => (text, None),
        };
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor) = (parts.next()??, parts.next()??);
        let patch = match parts.next() {
            Some(patch) => patch?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            major,
            minor,
            patch,
            pre,
        })
    }

    /// `4.15`.
    pub(crate) fn minor_line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    /// Semver 2 precedence: a pre-release sorts before its release, and
    /// pre-releases compare identifier by identifier (`rc.1` < `rc.2` <
    /// `rc.10`; numbers before words; `ec.2` < `rc.1`).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if let Some(pre) = &self.pre {
            write!(f, "-{pre}")?;
        }
        Ok(())
    }
}

/// How far an update goes.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub enum UpdateKind {
    Patch,
    Minor,
    Major,
}

impl UpdateKind {
    pub const ALL: &'static [UpdateKind] = &[Self::Patch, Self::Minor, Self::Major];

    /// The kind of the update from `current` to `target`; a move backwards
    /// is judged by its size too.
    pub fn between(current: &Version, target: &Version) -> Self {
        if current.major != target.major {
            Self::Major
        } else if current.minor != target.minor {
            Self::Minor
        } else {
            Self::Patch
        }
    }
}

/// Whether `to` names a release image (a pullspec or a digest) rather than
/// a version.
pub(crate) fn is_image(to: &str) -> bool {
    to.contains('/') || to.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("4.15.3", "4.15.10", UpdateKind::Patch)]
    #[case("4.14.1", "4.15.0-ec.2", UpdateKind::Minor)]
    #[case("4.18.9", "5.0.0", UpdateKind::Major)]
    fn update_kinds(#[case] from: &str, #[case] to: &str, #[case] kind: UpdateKind) {
        let (from, to) = (Version::parse(from).unwrap(), Version::parse(to).unwrap());
        assert_eq!(UpdateKind::between(&from, &to), kind);
    }

    #[rstest]
    #[case::engineering_candidates("4.17.0-ec.9", "4.17.0-ec.10")]
    #[case::release_candidates("4.16.0-rc.2", "4.16.0-rc.10")]
    #[case::okd("4.15.0-okd-scos.9", "4.15.0-okd-scos.16")]
    #[case::candidate_before_release("4.16.0-rc.1", "4.16.0")]
    #[case::ec_before_rc("4.16.0-ec.5", "4.16.0-rc.1")]
    #[case::numbers_before_words("4.16.0-0.nightly", "4.16.0-ec.1")]
    #[case::fewer_identifiers_first("4.16.0-rc", "4.16.0-rc.1")]
    #[case::patch_numbers("4.15.9", "4.15.10")]
    fn pre_releases_order_as_semver_2_says(#[case] lower: &str, #[case] higher: &str) {
        let (lower, higher) = (
            Version::parse(lower).unwrap(),
            Version::parse(higher).unwrap(),
        );
        assert!(lower < higher, "{lower} < {higher}");
        assert!(higher > lower);
    }

    #[rstest]
    #[case("4.16.0-ec.01")]
    #[case("4.16.0-")]
    #[case("4.16.0-rc..1")]
    #[case("4.16.0.1")]
    #[case("4.x.0")]
    #[case("4.16.x")]
    fn malformed_versions_are_none(#[case] text: &str) {
        assert_eq!(Version::parse(text), None, "{text}");
    }

    #[test]
    fn build_metadata_is_ignored_and_pre_releases_print_as_given() {
        let v = Version::parse("4.17.0-ec.10+a1b2c3").unwrap();
        assert_eq!(v, Version::parse("4.17.0-ec.10").unwrap());
        assert_eq!(v.to_string(), "4.17.0-ec.10");
        assert_eq!(
            Version::parse("4.15.0-okd-scos.9").unwrap().to_string(),
            "4.15.0-okd-scos.9"
        );
    }

    #[test]
    fn versions_order_semantically() {
        let v = |s| Version::parse(s).unwrap();
        assert!(v("4.15.10") > v("4.15.9"));
        assert!(v("4.16.0-ec.2") < v("4.16.0"));
        assert!(v("4.16.0-rc.1") > v("4.16.0-ec.2"));
        assert_eq!(v("4.15").to_string(), "4.15.0");
        assert!(Version::parse("latest").is_none());
    }

    #[rstest]
    #[case(
        "quay.io/openshift-release-dev/ocp-release@sha256:abc123",
        "sha256:abc123"
    )]
    #[case(
        "quay.io/openshift-release-dev/ocp-release:4.15.3-x86_64",
        "quay.io/openshift-release-dev/ocp-release:4.15.3-x86_64"
    )]
    #[case(" registry.example:5000/ocp@sha256:ff ", "sha256:ff")]
    fn keys_by_digest_when_there_is_one(#[case] image: &str, #[case] key: &str) {
        assert_eq!(ReleaseKey::from_image(image).as_str(), key);
    }

    #[test]
    fn object_names_are_dns_labels() {
        let name = ReleaseKey::from_image(
            "quay.io/x@sha256:3F5A0C1D2E4B5A6978877665544332211000FFEEDDCCBBAA9988776655443322",
        )
        .object_name();
        assert!(name.len() <= 63, "{name}");
        assert!(name.starts_with("release-sha256-3f5a0c1d2e4b"), "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(!name.ends_with('-'));
    }
}
