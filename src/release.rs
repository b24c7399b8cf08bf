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

/// An OpenShift release version: `4.15.3`, `4.16.0-ec.2`, `4.14.0-rc.1`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// The pre-release part, e.g. `ec.2` or `rc.1`.
    pub pre: Option<String>,
}

impl Version {
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let (core, pre) = match text.split_once('-') {
            Some((core, pre)) => (core, Some(pre.to_owned())),
            None => (text, None),
        };
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor) = (parts.next()??, parts.next()??);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Self {
            major,
            minor,
            patch,
            pre,
        })
    }

    /// `4.15`.
    pub fn minor_line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    /// Semantic-version order: a pre-release sorts before its release.
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
