//! Which `UpdatePreflight` the gate vouches for as the result for a release.
//! Anyone allowed to create UpdatePreflights can ask for a run, so an object
//! is a request unless it is the gate's own: named after the digest, with
//! the full configured suite (no `spec.checks`), for the version the gate
//! resolved, and with status written by the gate alone. Pure: the decision
//! asks it of every result it reads.

use super::release::{ReleaseKey, Version};
use super::results::UpdatePreflight;

/// The field manager the controller writes status as; on the API server,
/// status written by any other manager is not a result.
pub(crate) const FIELD_MANAGER: &str = "preflight-gate";

/// Why an object is not a result the gate vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotVouched {
    pub name: String,
    pub why: String,
}

/// Whether `object` is the gate's own result for `key`, at `version` (the
/// target's version as the gate resolved it, when known). `status_writer`
/// is the only field manager whose status writes count, where the source
/// records them (the API server's `managedFields`).
pub fn vouch(
    object: &UpdatePreflight,
    key: &ReleaseKey,
    version: Option<&Version>,
    status_writer: Option<&str>,
) -> Result<(), NotVouched> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let refuse = |why: String| {
        Err(NotVouched {
            name: name.clone(),
            why,
        })
    };
    let own = key.object_name();
    if name != own {
        return refuse(format!(
            "is not named {own}, the gate's name for the release"
        ));
    }
    if ReleaseKey::from_image(&object.spec.image) != *key {
        return refuse(format!("names another release, {}", object.spec.image));
    }
    if !object.spec.checks.is_empty() {
        return refuse(format!(
            "narrows the suite to {}; a result runs every configured check",
            object.spec.checks.join(", ")
        ));
    }
    if let (Some(claimed), Some(resolved)) = (object.spec.version.as_deref(), version)
        && Version::parse(claimed).as_ref() != Some(resolved)
    {
        return refuse(format!(
            "says version {claimed}, but the release is {resolved}"
        ));
    }
    // Names are checked where they enter; a result read back is checked
    // again, since its names reach the denial and the commands it suggests.
    if let Some(refused) = object
        .status
        .iter()
        .flat_map(|s| &s.results)
        .find_map(|r| super::results::check_name(&r.name).err())
    {
        return refuse(format!("has a result that is not the gate's: {refused}"));
    }
    if let Some(writer) = status_writer {
        let others: Vec<&str> = object
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.subresource.as_deref() == Some("status"))
            .filter_map(|m| m.manager.as_deref())
            .filter(|m| *m != writer)
            .collect();
        if !others.is_empty() {
            return refuse(format!(
                "has status written by {}, not by the gate",
                others.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use rstest::rstest;

    const IMAGE: &str = "quay.io/ocp/release@sha256:2222";

    fn own() -> UpdatePreflight {
        let key = ReleaseKey::from_image(IMAGE);
        let mut o = UpdatePreflight::new(
            &key.object_name(),
            crate::model::UpdatePreflightSpec {
                image: IMAGE.into(),
                version: Some("4.15.3".into()),
                checks: Vec::new(),
            },
        );
        o.metadata.managed_fields = Some(vec![
            ManagedFieldsEntry {
                manager: Some("preflight-gate".into()),
                subresource: Some("status".into()),
                ..Default::default()
            },
            ManagedFieldsEntry {
                manager: Some("kubectl-create".into()),
                ..Default::default()
            },
        ]);
        o
    }

    fn check(o: &UpdatePreflight) -> Result<(), String> {
        let version = Version::parse("4.15.3");
        vouch(
            o,
            &ReleaseKey::from_image(IMAGE),
            version.as_ref(),
            Some(FIELD_MANAGER),
        )
        .map_err(|e| e.why)
    }

    #[test]
    fn the_gates_own_object_is_vouched_for() {
        assert_eq!(check(&own()), Ok(()));
        // A spec written by someone else is fine: only status is results.
        let mut no_version = own();
        no_version.spec.version = None;
        assert_eq!(check(&no_version), Ok(()));
    }

    #[rstest]
    #[case::another_name(|o: &mut UpdatePreflight| o.metadata.name = Some("manual-x7k2".into()), "is not named release-sha256-2222")]
    #[case::narrowed(|o: &mut UpdatePreflight| o.spec.checks = vec!["EtcdHealthy".into()], "narrows the suite to EtcdHealthy")]
    #[case::wrong_version(|o: &mut UpdatePreflight| o.spec.version = Some("4.14.20".into()), "says version 4.14.20, but the release is 4.15.3")]
    #[case::another_release(|o: &mut UpdatePreflight| o.spec.image = "quay.io/ocp/release@sha256:1111".into(), "names another release")]
    #[case::forged_status(|o: &mut UpdatePreflight| o.metadata.managed_fields.as_mut().unwrap().push(ManagedFieldsEntry {
        manager: Some("kubectl-patch".into()), subresource: Some("status".into()), ..Default::default() }),
        "has status written by kubectl-patch, not by the gate")]
    #[case::a_result_name_that_is_not_a_check_name(|o: &mut UpdatePreflight| o.status = Some(crate::model::UpdatePreflightStatus {
        results: vec![crate::model::CheckResult::new("Nodes;touch${IFS}x;#", crate::model::Severity::Blocking, crate::model::Outcome::Fail, "")],
        ..Default::default() }),
        "has a result that is not the gate's: \"Nodes;touch${IFS}x;#\" is not a check name: character 6 is \";\"")]
    #[case::a_bidi_result_name(|o: &mut UpdatePreflight| o.status = Some(crate::model::UpdatePreflightStatus {
        results: vec![crate::model::CheckResult::new("Nodes\u{202e}Ready", crate::model::Severity::Blocking, crate::model::Outcome::Fail, "")],
        ..Default::default() }),
        "\"Nodes\\u{202e}Ready\" is not a check name")]
    fn anything_else_is_a_request(#[case] forge: fn(&mut UpdatePreflight), #[case] says: &str) {
        let mut o = own();
        forge(&mut o);
        let why = check(&o).unwrap_err();
        assert!(why.contains(says), "{why}");
    }

    #[test]
    fn a_source_without_managed_fields_vouches_by_name_and_spec() {
        let mut o = own();
        o.metadata.managed_fields = None;
        let key = ReleaseKey::from_image(IMAGE);
        assert!(vouch(&o, &key, None, None).is_ok());
        o.spec.checks = vec!["EtcdHealthy".into()];
        assert!(vouch(&o, &key, None, None).is_err());
    }
}
