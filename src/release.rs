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

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

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
