//! Identity of a release: how results are keyed and how targets are shown.

use std::fmt;

/// The key under which preflight results for a release are stored: the
/// image digest when the pullspec has one, otherwise the whole pullspec.
/// A digest and a pullspec that read alike (`sha256:aa`, an image named
/// `sha256` with the tag `aa`) are different keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReleaseKey {
    text: String,
    by: KeyedBy,
}

/// Whether a key is a release's digest or the pullspec it was named by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyedBy {
    Digest,
    Pullspec,
}

/// The longest object name (a DNS-1123 subdomain) and label value (a
/// DNS-1123 label).
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;
/// How many hex digits of the pullspec's SHA-256 end a tag's name.
const TAG_HASH: usize = 10;

impl ReleaseKey {
    pub fn from_image(pullspec: &str) -> Self {
        let pullspec = pullspec.trim();
        match pullspec.rsplit_once('@') {
            Some((_, digest)) if digest.contains(':') => Self {
                text: digest.to_owned(),
                by: KeyedBy::Digest,
            },
            _ => Self {
                text: pullspec.to_owned(),
                by: KeyedBy::Pullspec,
            },
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the key is a content digest (`sha256:…`): a tag can be
    /// moved to another release after it was checked, a digest cannot.
    pub fn is_digest(&self) -> bool {
        matches!(self.by, KeyedBy::Digest)
            && self.text.split_once(':').is_some_and(|(algorithm, hex)| {
                matches!(algorithm, "sha256" | "sha384" | "sha512")
                    && !hex.is_empty()
                    && hex.chars().all(|c| c.is_ascii_hexdigit())
            })
    }

    /// The name of the release's objects, stable for the same release: a
    /// DNS-1123 subdomain. A digest's is `release-` and the digest with its
    /// `:` as `-`, cut to 63 characters: `release-sha256-3f5a0c1d2e4b…`.
    /// A release known by tag is named after its pullspec (lowercased, every
    /// other character a `-`), then `--` and the first 10 hex digits of the
    /// SHA-256 of the pullspec as written:
    /// `release-example-com-ocp-release-4-15-3-x86-64--<hash>`. So two
    /// pullspecs that differ only in case, in punctuation or past a cut get
    /// different names, and no digest's name (which never holds `--`) is a
    /// tag's.
    pub fn object_name(&self) -> String {
        self.name(MAX_NAME)
    }

    /// The release as a label value (a DNS-1123 label, at most 63
    /// characters), built as [`Self::object_name`] is; for a digest it is
    /// the object's name.
    pub fn label_value(&self) -> String {
        self.name(MAX_LABEL)
    }

    fn name(&self, max: usize) -> String {
        const PREFIX: &str = "release-";
        let readable = readable(&self.text);
        match self.by {
            // As digests have always been named: objects in clusters,
            // docs and messages carry these names.
            KeyedBy::Digest => {
                let name = format!("{PREFIX}{}", cut(&readable, MAX_LABEL - PREFIX.len()));
                name.trim_end_matches('-').to_owned()
            }
            KeyedBy::Pullspec => {
                let sha = ring::digest::digest(&ring::digest::SHA256, self.text.as_bytes());
                let hex = super::text::hex(sha.as_ref());
                let hash = &hex[..TAG_HASH];
                let part = cut(&readable, max - PREFIX.len() - "--".len() - TAG_HASH);
                if part.is_empty() {
                    format!("{PREFIX}-{hash}")
                } else {
                    format!("{PREFIX}{part}--{hash}")
                }
            }
        }
    }
}

/// `text` lowercased, every character but a-z and 0-9 a `-`, no two `-` in
/// a row and none at either end.
fn readable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    out.trim_end_matches('-').to_owned()
}

/// The first `max` characters of `readable` (ASCII), with no `-` at the end.
fn cut(readable: &str, max: usize) -> &str {
    readable[..readable.len().min(max)].trim_end_matches('-')
}

impl fmt::Display for ReleaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
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
        self.line().to_string()
    }

    /// What kind of pre-release this is, when it is one that is not for
    /// production: an engineering (`ec`), feature (`fc`) or release (`rc`)
    /// candidate, a nightly or a CI build, OKD's among them
    /// (`4.16.0-okd-scos.ec.1`). OKD's releases carry a pre-release part
    /// of their own (`4.15.0-okd-scos.9`, `4.15.0-0.okd-2024-03-10-010116`)
    /// and are not pre-releases by it.
    pub fn pre_release(&self) -> Option<&'static str> {
        let pre = self.pre.as_ref()?;
        pre.as_str().split(['.', '-']).find_map(|part| match part {
            "ec" => Some("an engineering candidate"),
            "fc" => Some("a feature candidate"),
            "rc" => Some("a release candidate"),
            "nightly" => Some("a nightly build"),
            "ci" => Some("a CI build"),
            _ => None,
        })
    }

    /// The same `X.Y.Z`, whatever the pre-release part.
    fn same_release_line(&self, other: &Self) -> bool {
        (self.major, self.minor, self.patch) == (other.major, other.minor, other.patch)
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

/// A minor release line of OpenShift (`4.22`, `5.0`), or of Kubernetes
/// (`1.36`, from [`Minor::kubernetes`]).
///
/// Every piece of version arithmetic the gate does lives here: which minor
/// follows which, which minors a hop skips, what the CVO says of a hop
/// ([`Hop`]), which Kubernetes minor an OpenShift minor ships, and so the
/// kind of an update ([`UpdateKind`]). OpenShift 5.0 is the minor after
/// 4.22: OpenShift's minors are one line, on which 5.M stands where
/// 4.(23+M) would (as HyperShift counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Minor {
    pub major: u64,
    pub minor: u64,
}

impl Minor {
    /// The last minor of OpenShift 4: 5.0 follows it.
    pub const LAST_OF_4: Minor = Minor::new(4, 22);
    /// Where 5.M stands on the line of minors: 4.(23+M).
    const FIVE_AT: u64 = 23;
    /// 4.N ships Kubernetes 1.(N+13).
    const KUBERNETES_AFTER: u64 = 13;

    pub const fn new(major: u64, minor: u64) -> Self {
        Self { major, minor }
    }

    /// `4.22` from `4.22`, `4.22.3` or `v4.22`: `<major>.<minor>` and at
    /// most a patch; anything else is none.
    pub fn parse(text: &str) -> Option<Self> {
        Version::parse(text)
            .filter(|v| v.pre.is_none())
            .map(|v| v.line())
    }

    /// `<major>.<minor>` exactly (digits only, no patch, no `v`), as OLM
    /// asks `olm.maxOpenShiftVersion` to be written.
    pub fn parse_exact(text: &str) -> Option<Self> {
        let (major, minor) = text.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !(digits(major) && digits(minor)) {
            return None;
        }
        Some(Self::new(major.parse().ok()?, minor.parse().ok()?))
    }

    /// This minor's place on OpenShift's one line of minors: 4.N is N,
    /// 5.M is 23+M. None for any other major, whose place is not known.
    pub fn ordinal(self) -> Option<u64> {
        match self.major {
            4 => Some(self.minor),
            5 => self.minor.checked_add(Self::FIVE_AT),
            _ => None,
        }
    }

    /// The minor an update from this one goes to next: 4.21 → 4.22,
    /// 4.22 → 5.0, 5.0 → 5.1; for another major, its next minor. None
    /// past the largest number.
    pub fn next(self) -> Option<Self> {
        if self == Self::LAST_OF_4 {
            return Some(Self::new(5, 0));
        }
        Some(Self::new(self.major, self.minor.checked_add(1)?))
    }

    /// The minor before this one: 5.0 → 4.22, 4.22 → 4.21; none before
    /// a `.0` of another major.
    pub fn previous(self) -> Option<Self> {
        match self.minor.checked_sub(1) {
            Some(minor) => Some(Self::new(self.major, minor)),
            None if self.major == 5 => Some(Self::LAST_OF_4),
            None => None,
        }
    }

    /// The Kubernetes minor OpenShift ships in this minor: 4.N ships
    /// 1.(N+13), so 4.22 ships 1.35 and 5.M, standing at 4.(23+M), ships
    /// 1.(M+36). None for a major whose Kubernetes is not known.
    pub fn kubernetes(self) -> Option<Self> {
        let ordinal = self.ordinal()?;
        Some(Self::new(1, ordinal.checked_add(Self::KUBERNETES_AFTER)?))
    }

    /// Whether this minor is `other` or comes after it on the line of
    /// minors (`4.23`, which no release carries, stands where 5.0 does,
    /// as OLM's own comparison has it); by number for majors off the line.
    pub fn at_least(self, other: Self) -> bool {
        match (self.ordinal(), other.ordinal()) {
            (Some(a), Some(b)) => a >= b,
            _ => self >= other,
        }
    }
}

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Version {
    /// The minor release line: `4.22` of `4.22.3`.
    pub fn line(&self) -> Minor {
        Minor::new(self.major, self.minor)
    }
}

/// What an update from one version to another is, as the CVO judges it
/// before it accepts the target (the precondition `ClusterVersionGiantHop`
/// of openshift/cluster-version-operator,
/// `pkg/payload/precondition/clusterversion/gianthop.go`), with the one
/// rule the gate holds more strictly: the CVO opens 5.0 to every 4.y for
/// now, and the gate refuses the minors that skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// Backwards, of any size (the CVO's rollback precondition judges it).
    Back,
    /// Within the minor: the same release, a patch, a pre-release step.
    WithinMinor,
    /// To the next minor: 4.21 → 4.22, 4.22 → 5.0.
    NextMinor,
    /// Forwards past at least one minor (4.14 → 4.16, 4.21 → 5.0):
    /// `MultipleMinorVersionsUpdate`. `next` is the minor to update to
    /// first; the minors skipped run from it to `last_skipped`, `skipped`
    /// of them.
    SkipsMinors {
        next: Minor,
        last_skipped: Minor,
        skipped: u64,
    },
    /// To a larger major, other than from 4.y to 5.0 (4.22 → 5.1,
    /// 5.3 → 6.0): `MajorVersionUpdate`.
    MajorVersionUpdate,
}

impl Hop {
    /// The CVO's reason for a refused hop.
    pub const MULTIPLE_MINOR_VERSIONS: &'static str = "MultipleMinorVersionsUpdate";
    pub const MAJOR_VERSION: &'static str = "MajorVersionUpdate";

    /// Whether a hop goes from OpenShift 4 into OpenShift 5, where the CVO
    /// accepts 5.0 alone.
    pub fn into_openshift_5(current: &Version, target: &Version) -> bool {
        current.major == Minor::LAST_OF_4.major && target.major == Minor::LAST_OF_4.major + 1
    }

    pub fn between(current: &Version, target: &Version) -> Self {
        let (from, to) = (current.line(), target.line());
        if target < current {
            return Self::Back;
        }
        if from == to {
            return Self::WithinMinor;
        }
        if to.major > from.major && !(Self::into_openshift_5(current, target) && to.minor == 0) {
            return Self::MajorVersionUpdate;
        }
        let skipped = match (from.ordinal(), to.ordinal()) {
            (Some(a), Some(b)) => b.saturating_sub(a).saturating_sub(1),
            _ => to.minor.saturating_sub(from.minor).saturating_sub(1),
        };
        match (skipped, from.next()) {
            (0, _) | (_, None) => Self::NextMinor,
            (skipped, Some(next)) => Self::SkipsMinors {
                next,
                last_skipped: to.previous().unwrap_or(next),
                skipped,
            },
        }
    }

    /// The CVO's reason when it refuses the hop (the gate's, for the
    /// minors a hop to 5.0 skips).
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            Self::SkipsMinors { .. } => Some(Self::MULTIPLE_MINOR_VERSIONS),
            Self::MajorVersionUpdate => Some(Self::MAJOR_VERSION),
            _ => None,
        }
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
    /// is judged by its size too. 4.22 → 5.0 is a minor update, as the
    /// CVO and `oc` judge it (so is 4.21 → 5.0, which skips a minor); a
    /// major one changes the major any other way (4.22 → 5.1).
    pub fn between(current: &Version, target: &Version) -> Self {
        let (lower, higher) = if target < current {
            (target, current)
        } else {
            (current, target)
        };
        match Hop::between(lower, higher) {
            Hop::Back | Hop::WithinMinor => Self::Patch,
            Hop::NextMinor | Hop::SkipsMinors { .. } => Self::Minor,
            Hop::MajorVersionUpdate => Self::Major,
        }
    }
}

/// How a person names the move from `current` to `target`: `patch`,
/// `minor` or `major` forwards, `pre-release step` from one pre-release of
/// a release to a later one or to the release itself (`4.16.0-ec.1` to
/// `ec.2`, `rc.3` to `4.16.0`), `rollback` (of any size) backwards, `same`
/// for the release the cluster runs. The kind checks apply by
/// ([`UpdateKind`]) is the move's size alone.
pub fn describe_move(current: &Version, target: &Version) -> &'static str {
    match target.cmp(current) {
        std::cmp::Ordering::Equal => "same",
        std::cmp::Ordering::Less => "rollback",
        std::cmp::Ordering::Greater
            if current.same_release_line(target)
                && (current.pre_release().is_some() || target.pre_release().is_some()) =>
        {
            "pre-release step"
        }
        std::cmp::Ordering::Greater => match UpdateKind::between(current, target) {
            UpdateKind::Patch => "patch",
            UpdateKind::Minor => "minor",
            UpdateKind::Major => "major",
        },
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
    #[case::to_5_0("4.22.9", "5.0.0", UpdateKind::Minor)]
    #[case::back_from_5_0("5.0.1", "4.22.9", UpdateKind::Minor)]
    #[case::skipping_4_22("4.21.9", "5.0.0", UpdateKind::Minor)]
    #[case::to_5_1("4.22.9", "5.1.0", UpdateKind::Major)]
    #[case::within_5("5.0.3", "5.1.0", UpdateKind::Minor)]
    #[case::to_6("5.4.1", "6.0.0", UpdateKind::Major)]
    #[case::from_3("3.11.0", "4.1.0", UpdateKind::Major)]
    #[case::patch_of_5("5.0.0-rc.1", "5.0.0", UpdateKind::Patch)]
    fn update_kinds(#[case] from: &str, #[case] to: &str, #[case] kind: UpdateKind) {
        let (from, to) = (Version::parse(from).unwrap(), Version::parse(to).unwrap());
        assert_eq!(UpdateKind::between(&from, &to), kind);
    }

    fn minor(text: &str) -> Minor {
        Minor::parse(text).unwrap()
    }

    #[rstest]
    #[case("4.14", "4.15")]
    #[case("4.21", "4.22")]
    #[case("4.22", "5.0")]
    #[case("5.0", "5.1")]
    #[case("5.9", "5.10")]
    #[case("6.2", "6.3")]
    fn the_next_minor(#[case] from: &str, #[case] next: &str) {
        assert_eq!(minor(from).next(), Some(minor(next)));
    }

    #[rstest]
    #[case("5.0", Some("4.22"))]
    #[case("4.22", Some("4.21"))]
    #[case("5.3", Some("5.2"))]
    #[case("6.0", None)]
    fn the_previous_minor(#[case] of: &str, #[case] previous: Option<&str>) {
        assert_eq!(minor(of).previous(), previous.map(minor));
    }

    #[test]
    fn no_next_minor_past_the_largest_number() {
        assert_eq!(Minor::new(6, u64::MAX).next(), None);
    }

    #[rstest]
    #[case::the_first_documented("4.1", Some("1.14"))]
    #[case("4.15", Some("1.28"))]
    #[case::the_last_of_4("4.22", Some("1.35"))]
    #[case::five_zero("5.0", Some("1.36"))]
    #[case::five_three("5.3", Some("1.39"))]
    #[case::an_unknown_major("6.0", None)]
    #[case::three("3.11", None)]
    fn the_kubernetes_minor_an_openshift_minor_ships(
        #[case] openshift: &str,
        #[case] kubernetes: Option<&str>,
    ) {
        assert_eq!(minor(openshift).kubernetes(), kubernetes.map(minor));
    }

    #[test]
    fn no_kubernetes_minor_past_the_largest_number() {
        assert_eq!(Minor::new(5, u64::MAX).kubernetes(), None);
        assert_eq!(Minor::new(4, u64::MAX).kubernetes(), None);
    }

    #[rstest]
    #[case("4.22", Some(22))]
    #[case("5.0", Some(23))]
    #[case("5.2", Some(25))]
    #[case("6.0", None)]
    fn minors_stand_on_one_line(#[case] line: &str, #[case] ordinal: Option<u64>) {
        assert_eq!(minor(line).ordinal(), ordinal);
    }

    #[rstest]
    #[case("4.22", "4.22", true)]
    #[case("4.22", "5.0", false)]
    #[case("5.0", "4.22", true)]
    #[case::where_5_0_stands("4.23", "5.0", true)]
    #[case("5.1", "5.0", true)]
    #[case("6.0", "5.9", true)]
    #[case("5.9", "6.0", false)]
    fn at_least(#[case] one: &str, #[case] other: &str, #[case] holds: bool) {
        assert_eq!(minor(one).at_least(minor(other)), holds);
    }

    #[rstest]
    #[case("4.14", Some(Minor::new(4, 14)))]
    #[case("5.0", Some(Minor::new(5, 0)))]
    #[case("4.14.0", None)]
    #[case("v4.14", None)]
    #[case("4", None)]
    #[case("", None)]
    #[case(" 4.14", None)]
    #[case("4.x", None)]
    #[case("4.-1", None)]
    #[case("4.99999999999999999999", None)]
    fn exact_minors(#[case] text: &str, #[case] parsed: Option<Minor>) {
        assert_eq!(Minor::parse_exact(text), parsed, "{text:?}");
    }

    fn hop(from: &str, to: &str) -> Hop {
        Hop::between(&Version::parse(from).unwrap(), &Version::parse(to).unwrap())
    }

    #[rstest]
    #[case::patch("4.22.1", "4.22.3", Hop::WithinMinor)]
    #[case::same("5.0.1", "5.0.1", Hop::WithinMinor)]
    #[case::pre_release_step("5.0.0-rc.1", "5.0.0", Hop::WithinMinor)]
    #[case::next("4.21.3", "4.22.0", Hop::NextMinor)]
    #[case::to_5_0("4.22.4", "5.0.1", Hop::NextMinor)]
    #[case::to_a_5_0_candidate("4.22.4", "5.0.0-ec.1", Hop::NextMinor)]
    #[case::within_5("5.0.4", "5.1.0", Hop::NextMinor)]
    #[case::back("5.0.1", "4.22.4", Hop::Back)]
    #[case::to_5_1("4.22.4", "5.1.0", Hop::MajorVersionUpdate)]
    #[case::from_an_older_4_to_5_1("4.20.4", "5.1.0", Hop::MajorVersionUpdate)]
    #[case::to_6("5.3.0", "6.0.0", Hop::MajorVersionUpdate)]
    #[case::from_3("3.11.0", "4.1.0", Hop::MajorVersionUpdate)]
    #[case::two_minors("4.14.3", "4.16.2",
        Hop::SkipsMinors { next: Minor::new(4, 15), last_skipped: Minor::new(4, 15), skipped: 1 })]
    #[case::skipping_4_22("4.21.3", "5.0.0",
        Hop::SkipsMinors { next: Minor::new(4, 22), last_skipped: Minor::new(4, 22), skipped: 1 })]
    #[case::skipping_four("4.18.3", "5.0.0",
        Hop::SkipsMinors { next: Minor::new(4, 19), last_skipped: Minor::new(4, 22), skipped: 4 })]
    #[case::within_5_skipping("5.0.1", "5.2.0",
        Hop::SkipsMinors { next: Minor::new(5, 1), last_skipped: Minor::new(5, 1), skipped: 1 })]
    #[case::absurd("4.15.3", "4.18446744073709551615.0",
        Hop::SkipsMinors { next: Minor::new(4, 16), last_skipped: Minor::new(4, u64::MAX - 1), skipped: u64::MAX - 16 })]
    #[case::skipping_5_0("4.22.1", "5.1.0", Hop::MajorVersionUpdate)]
    fn hops_as_the_cvo_judges_them(#[case] from: &str, #[case] to: &str, #[case] expected: Hop) {
        assert_eq!(hop(from, to), expected);
    }

    #[test]
    fn refused_hops_carry_the_cvos_reasons() {
        assert_eq!(hop("4.22.4", "5.1.0").refusal(), Some("MajorVersionUpdate"));
        assert_eq!(
            hop("4.21.4", "5.0.0").refusal(),
            Some("MultipleMinorVersionsUpdate")
        );
        assert_eq!(hop("4.22.4", "5.0.0").refusal(), None);
        assert_eq!(hop("5.0.0", "4.22.4").refusal(), None);
    }

    #[rstest]
    #[case::patch("4.15.3", "4.15.10", "patch")]
    #[case::minor("4.14.1", "4.15.0-ec.2", "minor")]
    #[case::to_5_0_is_a_minor("4.22.9", "5.0.0", "minor")]
    #[case::major("4.22.9", "5.1.0", "major")]
    #[case::same("4.15.3", "4.15.3", "same")]
    #[case::patch_rollback("4.15.10", "4.15.3", "rollback")]
    #[case::rollback_across_two_minors("4.16.2", "4.14.9", "rollback")]
    #[case::pre_release_rollback("4.17.0-ec.10", "4.17.0-ec.9", "rollback")]
    #[case::ec_to_ec("4.16.0-ec.1", "4.16.0-ec.2", "pre-release step")]
    #[case::rc_to_its_release("4.14.0-rc.3", "4.14.0", "pre-release step")]
    #[case::rc_to_a_patch("4.14.0-rc.3", "4.14.1", "patch")]
    #[case::ec_to_the_next_minor_s_ec("4.15.0-ec.3", "4.16.0-ec.1", "minor")]
    #[case::okd_release_to_release("4.15.0-okd-scos.9", "4.15.0-okd-scos.16", "patch")]
    fn moves_are_named_as_a_person_names_them(
        #[case] from: &str,
        #[case] to: &str,
        #[case] said: &str,
    ) {
        let (from, to) = (Version::parse(from).unwrap(), Version::parse(to).unwrap());
        assert_eq!(describe_move(&from, &to), said);
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
    #[case::ec("4.16.0-ec.2", Some("an engineering candidate"))]
    #[case::rc("4.14.0-rc.3", Some("a release candidate"))]
    #[case::fc("4.11.0-fc.0", Some("a feature candidate"))]
    #[case::nightly("4.16.0-0.nightly-2024-02-27-122716", Some("a nightly build"))]
    #[case::ci("4.16.0-0.ci-2024-02-27-122716", Some("a CI build"))]
    #[case::okd_ec("4.16.0-okd-scos.ec.1", Some("an engineering candidate"))]
    #[case::okd_release("4.15.0-okd-scos.9", None)]
    #[case::okd_fcos_release("4.15.0-0.okd-2024-03-10-010116", None)]
    #[case::release("4.15.3", None)]
    fn pre_releases_are_named(#[case] version: &str, #[case] said: Option<&str>) {
        assert_eq!(Version::parse(version).unwrap().pre_release(), said);
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

    /// A DNS-1123 label, as Kubernetes checks a label value or a name.
    fn is_dns_label(s: &str) -> bool {
        (1..=63).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    /// A DNS-1123 subdomain: dot-separated labels' characters, at most 253.
    fn is_dns_subdomain(s: &str) -> bool {
        s.len() <= 253
            && s.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    }

    /// How every key was named before tags got a hash: the reference the
    /// digests' names must still match, and what made tags collide.
    fn name_before(key: &str) -> String {
        let mut name = String::from("release-");
        let mut last_dash = true;
        for c in key.chars().flat_map(char::to_lowercase) {
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

    const DIGEST: &str = "3f5a0c1d2e4b5a6978877665544332211000ffeeddccbbaa9988776655443322";

    #[rstest]
    #[case::short("example.com/ocp@sha256:aa")]
    #[case::full(&format!("example.com/ocp@sha256:{DIGEST}"))]
    #[case::upper_case(&format!("example.com/ocp@sha256:{}", DIGEST.to_uppercase()))]
    #[case::sha512(&format!("example.com/ocp@sha512:{DIGEST}{DIGEST}"))]
    fn a_digest_keeps_the_name_it_always_had(#[case] image: &str) {
        let key = ReleaseKey::from_image(image);
        assert_eq!(key.object_name(), name_before(key.as_str()));
        assert_eq!(key.label_value(), key.object_name());
        assert!(is_dns_label(&key.object_name()), "{}", key.object_name());
    }

    #[test]
    fn a_digest_is_named_release_sha256_and_its_hex() {
        assert_eq!(
            ReleaseKey::from_image("example.com/ocp@sha256:aa").object_name(),
            "release-sha256-aa"
        );
        // Cut to 63 characters: 48 of the 64 hex digits.
        assert_eq!(
            ReleaseKey::from_image(&format!("example.com/ocp@sha256:{DIGEST}")).object_name(),
            format!("release-sha256-{}", &DIGEST[..48])
        );
    }

    /// Two pullspecs of 300 characters that share their first 290.
    fn long(tag: &str) -> String {
        format!("registry.example/{}:{tag}", "ocp-release-".repeat(23))
    }

    #[rstest]
    #[case::case("example.com/ocp/release:4.15.3", "example.com/OCP/release:4.15.3")]
    #[case::punctuation("example.com/ocp/release:4.15.3", "example.com/ocp/release-4.15.3")]
    #[case::past_63(
        "registry.example/openshift-release-dev/ocp-release:4.15.3-x86_64",
        "registry.example/openshift-release-dev/ocp-release:4.15.3-aarch64"
    )]
    #[case::past_253(&long("4.15.3"), &long("4.15.4"))]
    fn tags_that_used_to_share_a_name_get_different_names_and_labels(
        #[case] one: &str,
        #[case] other: &str,
    ) {
        let (one, other) = (ReleaseKey::from_image(one), ReleaseKey::from_image(other));
        // The finding: the names they had were one.
        assert_eq!(name_before(one.as_str()), name_before(other.as_str()));
        assert_ne!(one.object_name(), other.object_name());
        assert_ne!(one.label_value(), other.label_value());
    }

    #[test]
    fn two_long_tags_sharing_their_first_63_characters_get_different_labels() {
        let one = "registry.example/openshift-release-dev/ocp-release-nightly:4.18.0-0.nightly-2025-01-01-000000";
        let other = "registry.example/openshift-release-dev/ocp-release-nightly:4.18.0-0.nightly-2025-01-02-000000";
        assert_eq!(one[..63], other[..63]);
        let (one, other) = (ReleaseKey::from_image(one), ReleaseKey::from_image(other));
        assert_ne!(one.label_value(), other.label_value());
        assert_ne!(one.object_name(), other.object_name());
        // Within 253, a name keeps the whole pullspec.
        assert!(
            one.object_name()
                .starts_with("release-registry-example-openshift-release-dev-ocp-release-nightly-4-18-0-0-nightly-2025-01-01-000000--"),
            "{}",
            one.object_name()
        );
    }

    #[test]
    fn a_tag_is_never_named_like_a_digest() {
        // An image named `sha256` with the tag `aa` is not the digest
        // `sha256:aa`, and neither is a tag spelt like its name.
        let digest = ReleaseKey::from_image("example.com/ocp@sha256:aa");
        assert_eq!(
            ReleaseKey::from_image("sha256:aa").as_str(),
            digest.as_str()
        );
        for tag in ["sha256:aa", "sha256-aa", "SHA256:aa"] {
            let tag = ReleaseKey::from_image(tag);
            assert_ne!(tag, digest);
            assert_ne!(tag.object_name(), digest.object_name());
            assert_ne!(tag.label_value(), digest.label_value());
        }
    }

    #[test]
    fn a_tags_name_ends_with_the_sha256_of_its_pullspec() {
        // The SHA-256 test vector for "abc" (FIPS 180-2): the name is the
        // same on every build, so objects keep their names across versions.
        assert_eq!(
            ReleaseKey::from_image("abc").object_name(),
            "release-abc--ba7816bf8f"
        );
        assert_eq!(
            ReleaseKey::from_image("").object_name(),
            "release--e3b0c44298"
        );
    }

    #[rstest]
    #[case::digest(&format!("example.com/ocp@sha256:{DIGEST}"))]
    #[case::tag("registry.example:5000/ocp/release:4.15.3-x86_64")]
    #[case::long_tag(&long("4.15.3"))]
    #[case::not_ascii("example.com/ocp/r\u{e9}lease:4.15.\u{130}")]
    #[case::punctuation_only("-._:/@")]
    #[case::empty("")]
    #[case::dashes_at_the_cut(&format!("example.com/{}x", "a-".repeat(40)))]
    fn names_are_dns_subdomains_and_labels_dns_labels(#[case] image: &str) {
        let key = ReleaseKey::from_image(image);
        let (name, label) = (key.object_name(), key.label_value());
        assert!(
            is_dns_subdomain(&name),
            "{name:?} ({} characters)",
            name.len()
        );
        assert!(
            is_dns_label(&label),
            "{label:?} ({} characters)",
            label.len()
        );
        assert!(name.starts_with("release-") && label.starts_with("release-"));
        assert_eq!(name, ReleaseKey::from_image(image).object_name(), "stable");
    }

    #[test]
    fn the_checkers_refuse_what_kubernetes_refuses() {
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_dns_label(&"a".repeat(63)) && is_dns_label("a--b"));
        for bad in ["a..b", ".a", "a.", "a.-b", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
        assert!(is_dns_subdomain(&"a".repeat(253)) && is_dns_subdomain("a.b-c"));
    }
}
