//! The `PreflightCheck` custom resource: a check an administrator (or a
//! vendor) declares, run as a Job from its own image. Which updates a check
//! applies to (`appliesTo`) is decided here, as pure functions.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::release::{UpdateKind, Version};
use super::results::{FailurePolicy, InvalidCheckName, Severity, check_name};

/// Time a check gets when its spec names none.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: u32 = 120;

/// Spec of a `PreflightCheck`: what to run, for which updates, and how its
/// result counts.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "preflight.dev",
    version = "v1alpha1",
    kind = "PreflightCheck",
    shortname = "pfc",
    printcolumn = r#"{"name":"Check","type":"string","jsonPath":".spec.checkName"}"#,
    printcolumn = r#"{"name":"Image","type":"string","jsonPath":".spec.image"}"#,
    printcolumn = r#"{"name":"From-Release","type":"string","jsonPath":".spec.fromRelease"}"#,
    printcolumn = r#"{"name":"Severity","type":"string","jsonPath":".spec.severity"}"#,
    printcolumn = r#"{"name":"Failure-Policy","type":"string","jsonPath":".spec.failurePolicy"}"#,
    printcolumn = r#"{"name":"Timeout","type":"integer","priority":1,"jsonPath":".spec.timeoutSeconds"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PreflightCheckSpec {
    /// The name results carry: CamelCase, so that it can be accepted through
    /// `spec.desiredUpdate.acceptRisks` or `preflight.dev/accept`; at most
    /// 63 characters.
    #[schemars(regex(pattern = r"^[A-Z][A-Za-z0-9.-]{0,62}$"))]
    pub check_name: String,
    /// Image to run. Exactly one of `image` and `fromRelease` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A component name in the target release's `image-references`: the check
    /// runs from the *target* release's image of that component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_release: Option<String>,
    /// Entrypoint; the image's own when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment, besides TARGET_VERSION, TARGET_IMAGE,
    /// CURRENT_VERSION and CURRENT_IMAGE, which the gate sets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Seconds the check may run (the Job's `activeDeadlineSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: Option<u32>,
    #[serde(default)]
    pub severity: Severity,
    /// The updates the check runs for; every update when empty.
    #[serde(default, skip_serializing_if = "AppliesTo::is_empty")]
    pub applies_to: AppliesTo,
    /// How an error of the check itself (a crash, a pull failure, a
    /// timeout, unreadable output) counts.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// Whether the check's pod gets the `preflight-check` ServiceAccount's
    /// token to read the cluster. A check gets none unless it asks: an
    /// administrator's with `apiAccess: true`, a release's declared one
    /// with its Job annotated `preflight.dev/needs-api: "true"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_access: Option<bool>,
}

impl PreflightCheckSpec {
    /// The check's name, when it is one ([`check_name`]: at most 63
    /// characters). The gate asks again what the CRD's pattern asks: a CRD
    /// installed without its schema, or an older one, lets any text
    /// through, and a release's declared checks have no schema at all.
    pub fn valid_name(&self) -> Result<&str, InvalidCheckName> {
        check_name(&self.check_name).map(|()| self.check_name.as_str())
    }

    /// Whether the check's pod gets an API token: only when it asks.
    pub fn api_access(&self) -> bool {
        self.api_access.unwrap_or(false)
    }
}

/// One environment variable, a literal value only: checks get no Secrets.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct EnvVar {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

/// Which updates a check runs for. Both lists must match when both are given.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AppliesTo {
    /// Ranges of the *target* version, any of which matches. A range is
    /// space-separated comparisons that must all hold, e.g. `>=4.15 <4.17`;
    /// a bare version (`4.16`, `4.16.3`) is an equality on the parts given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Patch, Minor or Major; every kind when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub update_kinds: Vec<UpdateKind>,
}

impl AppliesTo {
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty() && self.update_kinds.is_empty()
    }

    /// `Ok(())` when the check runs for this update; otherwise why it is
    /// skipped. A range that cannot be read is an error, not a skip.
    pub fn check(
        &self,
        target: Option<&Version>,
        kind: Option<UpdateKind>,
    ) -> Result<(), NotApplicable> {
        if !self.update_kinds.is_empty() {
            match kind {
                Some(kind) if self.update_kinds.contains(&kind) => {}
                Some(kind) => return Err(NotApplicable::Kind(kind)),
                None => return Err(NotApplicable::UnknownVersion),
            }
        }
        if !self.versions.is_empty() {
            let Some(target) = target else {
                return Err(NotApplicable::UnknownVersion);
            };
            let mut any = false;
            for range in &self.versions {
                if in_range(range, target).map_err(NotApplicable::BadRange)? {
                    any = true;
                }
            }
            if !any {
                return Err(NotApplicable::Version(target.to_string()));
            }
        }
        Ok(())
    }
}

/// Why a check does not run for an update.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotApplicable {
    #[error("does not apply to a {} update", format!("{_0:?}").to_lowercase())]
    Kind(UpdateKind),
    #[error("does not apply to target version {0}")]
    Version(String),
    #[error("applies to some versions or update kinds only, and the target's version is unknown")]
    UnknownVersion,
    #[error("{0}")]
    BadRange(String),
}

/// Whether `version` is in `range` (see [`AppliesTo::versions`]).
pub(crate) fn in_range(range: &str, version: &Version) -> Result<bool, String> {
    let mut any = false;
    for term in range.split_whitespace() {
        any = true;
        let (op, rest) = ["<=", ">=", "==", "<", ">", "="]
            .iter()
            .find_map(|op| term.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("", term));
        let bound = Version::parse(rest)
            .filter(|_| !rest.is_empty())
            .ok_or_else(|| format!("appliesTo.versions: {term:?} in {range:?} is not a version"))?;
        let holds = match op {
            "<" => version < &bound,
            "<=" => version <= &bound,
            ">" => version > &bound,
            ">=" => version >= &bound,
            _ => {
                // Equality on the parts written: `4.16` matches every 4.16.z.
                let parts = rest.trim_start_matches('v').split('.').count();
                version.major == bound.major
                    && version.minor == bound.minor
                    && (parts < 3 || version.patch == bound.patch)
                    && (parts < 3 || version.pre == bound.pre)
            }
        };
        if !holds {
            return Ok(false);
        }
    }
    if any {
        Ok(true)
    } else {
        Err(format!("appliesTo.versions: an empty range in {range:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[rstest]
    #[case(">=4.15 <4.17", "4.16.3", Ok(true))]
    #[case(">=4.15 <4.17", "4.17.0", Ok(false))]
    #[case(">=4.15 <4.17", "4.17.0-ec.1", Ok(true))]
    #[case("4.16", "4.16.9", Ok(true))]
    #[case("4.16", "4.15.9", Ok(false))]
    #[case("=4.16.3", "4.16.3", Ok(true))]
    #[case("4.16.3", "4.16.4", Ok(false))]
    #[case(">4.15.2", "4.15.3", Ok(true))]
    #[case("<=4.15.2", "4.15.3", Ok(false))]
    #[case(">=latest", "4.15.3", Err("appliesTo.versions: \">=latest\" in \">=latest\" is not a version".into()))]
    #[case(">=", "4.15.3", Err("appliesTo.versions: \">=\" in \">=\" is not a version".into()))]
    #[case("  ", "4.15.3", Err("appliesTo.versions: an empty range in \"  \"".into()))]
    fn version_ranges(
        #[case] range: &str,
        #[case] version: &str,
        #[case] expected: Result<bool, String>,
    ) {
        assert_eq!(in_range(range, &v(version)), expected);
    }

    #[rstest]
    #[case::everything(&[], &[], Some("4.16.1"), Some(UpdateKind::Minor), Ok(()))]
    #[case::kind_matches(&[], &[UpdateKind::Minor, UpdateKind::Major], Some("4.16.1"), Some(UpdateKind::Minor), Ok(()))]
    #[case::kind_differs(&[], &[UpdateKind::Minor], Some("4.15.9"), Some(UpdateKind::Patch), Err(NotApplicable::Kind(UpdateKind::Patch)))]
    #[case::kind_unknown(&[], &[UpdateKind::Minor], None, None, Err(NotApplicable::UnknownVersion))]
    #[case::any_range(&["4.14", ">=4.16"], &[], Some("4.16.1"), Some(UpdateKind::Minor), Ok(()))]
    #[case::no_range(&["4.14", ">=4.17"], &[], Some("4.16.1"), Some(UpdateKind::Minor), Err(NotApplicable::Version("4.16.1".into())))]
    #[case::version_unknown(&["4.16"], &[], None, None, Err(NotApplicable::UnknownVersion))]
    fn applies_to(
        #[case] versions: &[&str],
        #[case] kinds: &[UpdateKind],
        #[case] target: Option<&str>,
        #[case] kind: Option<UpdateKind>,
        #[case] expected: Result<(), NotApplicable>,
    ) {
        let applies = AppliesTo {
            versions: versions.iter().map(|s| s.to_string()).collect(),
            update_kinds: kinds.to_vec(),
        };
        assert_eq!(applies.check(target.map(v).as_ref(), kind), expected);
    }

    #[rstest]
    #[case::plain("VendorStorage", None)]
    #[case::shell("Vendor;touch${IFS}x;#", Some("character 7 is \";\""))]
    #[case::bidi("Vendor\u{202e}kcehC", Some("character 7 is \"\\u{202e}\""))]
    #[case::too_long(&format!("A{}", "b".repeat(63)), Some("it has 64 characters, more than 63"))]
    fn an_administrators_check_name_is_checked_again(
        #[case] name: &str,
        #[case] refused: Option<&str>,
    ) {
        let spec = PreflightCheckSpec {
            check_name: name.to_owned(),
            ..Default::default()
        };
        match (spec.valid_name(), refused) {
            (Ok(valid), None) => assert_eq!(valid, name),
            (Err(e), Some(says)) => assert!(e.to_string().contains(says), "{e}"),
            (other, _) => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_skip_message_names_the_kind() {
        assert_eq!(
            NotApplicable::Kind(UpdateKind::Patch).to_string(),
            "does not apply to a patch update"
        );
    }
}
