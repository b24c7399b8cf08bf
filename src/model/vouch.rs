//! Which `UpdatePreflight` the gate vouches for as the result for a release.
//! Anyone allowed to create UpdatePreflights can ask for a run, so an object
//! is a request unless it is the gate's own: named after the digest, with
//! the full configured suite (no `spec.checks`), for the version the gate
//! resolved, with status written by the gate's field manager alone and,
//! where the source records who writes status (the API server), a finished
//! run signed with the gate's [`ResultKey`]. Whoever may write
//! `updatepreflights/status` can name the gate's field manager; only the
//! gate holds the key. Pure: the decision asks it of every result it reads.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;
use sha2::Sha256;

use super::release::{ReleaseKey, Version};
use super::results::{CheckResult, InvalidCheckName, Phase, PlanSummary, Summary, UpdatePreflight};

/// The field manager the controller writes status as; on the API server,
/// status written by any other manager is not a result.
pub(crate) const FIELD_MANAGER: &str = "preflight-gate";

/// Why an object is not a result the gate vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotVouched {
    pub name: String,
    pub why: VouchError,
    /// The object is the gate's own result for the release, and only its
    /// signature fails (a lost or rotated key, a status changed since) or
    /// its spec was changed (the controller repairs it): the gate's
    /// controller runs it again by itself, so nobody needs to delete it.
    pub runs_again: bool,
}

/// What keeps an object from being the gate's result, as a denial says it
/// after the object's name; and a key too short to sign with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VouchError {
    /// It is not named after the release's digest.
    #[error("is not named {own}, the gate's name for the release")]
    OtherName { own: String },
    /// Its spec names another release.
    #[error("names another release, {image}")]
    OtherRelease { image: String },
    /// Its spec selects checks, where a result runs them all.
    #[error(
        "narrows the suite to {}; a result runs every configured check",
        checks.join(", ")
    )]
    NarrowedSuite { checks: Vec<String> },
    /// Its spec says another version than the release's.
    #[error("says version {claimed}, but the release is {resolved}")]
    OtherVersion { claimed: String, resolved: Version },
    /// A result in its status has a name no check has.
    #[error("has a result that is not the gate's: {0}")]
    ForeignResult(InvalidCheckName),
    /// Field managers other than the gate's wrote its status.
    #[error("has status written by {}, not by the gate", managers.join(", "))]
    OtherWriters { managers: Vec<String> },
    /// The gate has no key to check a finished run's signature with.
    #[error(
        "cannot be vouched for: the gate cannot read the key it signs its results with ({why})"
    )]
    NoKey { why: String },
    /// A finished run carries no signature.
    #[error("has no signature of the gate's: its status was not written by the gate's controller")]
    Unsigned,
    /// A finished run's signature is not the gate key's.
    #[error(
        "has a signature that is not the gate's: its status was written by someone else, or changed since the gate wrote it"
    )]
    OtherSignature,
    /// A signed run older than one the gate has seen, written back.
    #[error(
        "is run {run} of the object, older than run {newest}, which the gate has seen: an older status was written back"
    )]
    OlderRun { run: u64, newest: u64 },
    /// A key shorter than [`ResultKey::MIN_LEN`].
    #[error("{len} bytes, fewer than the {} a key needs", ResultKey::MIN_LEN)]
    ShortKey { len: usize },
}

/// Who writes results, where the source records it (the API server): the
/// only field manager whose status writes count, and the key every finished
/// run is signed with, or why the gate has none (then nothing is vouched
/// for: the gate fails closed).
#[derive(Clone, Debug)]
pub struct StatusWriter {
    pub field_manager: &'static str,
    pub key: Result<ResultKey, String>,
    /// The newest run of the object that the gate has seen signed, by its
    /// uid: an older one is a status written back, however well signed.
    pub newest_run: Option<u64>,
}

/// Whether `object` is the gate's own result for `key`, at `version` (the
/// target's version as the gate resolved it, when known). `status_writer`
/// is who alone writes status, where the source records it; offline
/// sources (a snapshot, a directory) record nothing and pass `None`.
pub fn vouch(
    object: &UpdatePreflight,
    key: &ReleaseKey,
    version: Option<&Version>,
    status_writer: Option<&StatusWriter>,
) -> Result<(), NotVouched> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let refuse = |why: VouchError| {
        Err(NotVouched {
            name: name.clone(),
            why,
            runs_again: false,
        })
    };
    let own = key.object_name();
    if name != own {
        return refuse(VouchError::OtherName { own });
    }
    if ReleaseKey::from_image(&object.spec.image) != *key {
        return refuse(VouchError::OtherRelease {
            image: object.spec.image.clone(),
        });
    }
    // The gate owns its result's spec: its controller repairs a narrowed
    // suite or a changed version and runs the result again by itself.
    let repaired = |why: VouchError| {
        Err(NotVouched {
            name: name.clone(),
            why,
            runs_again: true,
        })
    };
    if !object.spec.checks.is_empty() {
        return repaired(VouchError::NarrowedSuite {
            checks: object.spec.checks.clone(),
        });
    }
    if let (Some(claimed), Some(resolved)) = (object.spec.version.as_deref(), version)
        && Version::parse(claimed).as_ref() != Some(resolved)
    {
        return repaired(VouchError::OtherVersion {
            claimed: claimed.to_owned(),
            resolved: resolved.clone(),
        });
    }
    // Names are checked where they enter; a result read back is checked
    // again, since its names reach the denial and the commands it suggests.
    if let Some(refused) = object
        .status
        .iter()
        .flat_map(|s| &s.results)
        .find_map(|r| super::results::check_name(&r.name).err())
    {
        return refuse(VouchError::ForeignResult(refused));
    }
    let Some(writer) = status_writer else {
        return Ok(());
    };
    let others: Vec<String> = object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter_map(|m| m.manager.as_deref())
        .filter(|m| *m != writer.field_manager)
        .map(str::to_owned)
        .collect();
    if !others.is_empty() {
        return refuse(VouchError::OtherWriters { managers: others });
    }
    // A run under way says nothing the decision counts; a finished one
    // must carry the gate's signature.
    if !finished(object) {
        return Ok(());
    }
    match &writer.key {
        Err(why) => refuse(VouchError::NoKey { why: why.clone() }),
        Ok(result_key) => {
            let older = |newest: u64| {
                let run = object.status.as_ref().and_then(|s| s.run).unwrap_or(0);
                (run < newest).then_some(VouchError::OlderRun { run, newest })
            };
            let why = match result_key.verify(object) {
                Err(why) => why,
                Ok(()) => match writer.newest_run.and_then(older) {
                    Some(why) => why,
                    None => return Ok(()),
                },
            };
            // Either way the controller runs it again by itself.
            Err(NotVouched {
                name,
                why,
                runs_again: true,
            })
        }
    }
}

/// The newest run of each object the gate has seen signed, by uid: the
/// webhook refuses an older one (a status written back), and the
/// controller runs such an object again.
#[derive(Debug, Default)]
pub struct NewestRuns(std::sync::Mutex<std::collections::HashMap<String, u64>>);

impl NewestRuns {
    /// Records `object`'s run if it is a finished run `key` signed.
    pub fn observe(&self, object: &UpdatePreflight, key: &ResultKey) {
        let (Some(uid), Some(run)) = (
            object.metadata.uid.as_ref(),
            object.status.as_ref().and_then(|s| s.run),
        ) else {
            return;
        };
        if finished(object) && key.verify(object).is_ok() {
            let mut runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let newest = runs.entry(uid.clone()).or_default();
            *newest = (*newest).max(run);
        }
    }

    /// Forgets a deleted object (a new one has another uid).
    pub fn forget(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
    }

    /// The newest signed run seen of the object with `uid`.
    pub fn newest(&self, uid: &str) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .copied()
    }
}

/// Whether the object's status reports a finished run (passed, failed or
/// errored): the results the decision counts.
pub fn finished(object: &UpdatePreflight) -> bool {
    object
        .status
        .as_ref()
        .is_some_and(|s| matches!(s.phase, Some(Phase::Passed | Phase::Failed | Phase::Error)))
}

/// The key the gate signs its results with: HMAC-SHA256, at least 32
/// bytes, the same for every replica (kept in a Secret of the gate's
/// namespace, `preflight::result_key`).
#[derive(Clone)]
pub struct ResultKey(Arc<[u8]>);

impl std::fmt::Debug for ResultKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResultKey(..)")
    }
}

/// What a signature starts with: its version, so that what it covers can
/// change and old signatures stop verifying rather than verify wrongly.
const SIGNATURE_PREFIX: &str = "v2:";

/// What a signature covers, in this order (the JSON of the typed values,
/// which read back from the API server serialize the same): the object's
/// name, uid (so a status copied onto another object, even one of the same
/// name made anew, is not its result) and spec (image, version, selected
/// checks), the run's number (so an older run written back is told from the
/// newest), and every field of the
/// status the decision or its denial reads: phase, start and completion
/// time, the generation and request observed, the results, summary and
/// conditions (the conclusion), and the plan. Not covered: the completed
/// update's duration (`updateDuration`, written later, read only by the
/// metrics) and the signature itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Signed<'a> {
    domain: &'static str,
    name: &'a str,
    uid: &'a str,
    image: &'a str,
    version: Option<&'a str>,
    checks: &'a [String],
    run: Option<u64>,
    phase: Option<Phase>,
    start_time: Option<&'a Time>,
    completion_time: Option<&'a Time>,
    observed_generation: Option<i64>,
    observed_request: Option<&'a str>,
    results: &'a [CheckResult],
    summary: Option<&'a Summary>,
    conditions: &'a [Condition],
    plan: Option<&'a PlanSummary>,
}

impl ResultKey {
    /// The shortest key taken: HMAC-SHA256's block of output.
    pub const MIN_LEN: usize = 32;

    /// A key of `bytes`, refused when shorter than [`Self::MIN_LEN`].
    pub fn new(bytes: &[u8]) -> Result<Self, VouchError> {
        if bytes.len() < Self::MIN_LEN {
            return Err(VouchError::ShortKey { len: bytes.len() });
        }
        Ok(Self(bytes.into()))
    }

    fn mac(&self, object: &UpdatePreflight) -> Hmac<Sha256> {
        let status = object.status.clone().unwrap_or_default();
        let signed = Signed {
            domain: "preflight.dev/UpdatePreflight result",
            name: object.metadata.name.as_deref().unwrap_or_default(),
            uid: object.metadata.uid.as_deref().unwrap_or_default(),
            image: &object.spec.image,
            version: object.spec.version.as_deref(),
            checks: &object.spec.checks,
            run: status.run,
            phase: status.phase,
            start_time: status.start_time.as_ref(),
            completion_time: status.completion_time.as_ref(),
            observed_generation: status.observed_generation,
            observed_request: status.observed_request.as_deref(),
            results: &status.results,
            summary: status.summary.as_ref(),
            conditions: &status.conditions,
            plan: status.plan.as_ref(),
        };
        // Serializing plain data into memory cannot fail.
        let bytes = serde_json::to_vec(&signed).unwrap_or_default();
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(&bytes);
        mac
    }

    /// The signature of `object` as it stands (its `status.signature`
    /// aside), e.g. `v1:3f9a…`.
    pub fn sign(&self, object: &UpdatePreflight) -> String {
        let tag = self.mac(object).finalize().into_bytes();
        format!("{SIGNATURE_PREFIX}{}", super::text::hex(&tag))
    }

    /// Whether `object`'s `status.signature` is this key's signature of it,
    /// compared in constant time; else why not, as a denial says it.
    pub fn verify(&self, object: &UpdatePreflight) -> Result<(), VouchError> {
        let Some(signature) = object.status.as_ref().and_then(|s| s.signature.as_deref()) else {
            return Err(VouchError::Unsigned);
        };
        let tag = signature
            .strip_prefix(SIGNATURE_PREFIX)
            .and_then(from_hex)
            .ok_or(VouchError::OtherSignature)?;
        self.mac(object)
            .verify_slice(&tag)
            .map_err(|_| VouchError::OtherSignature)
    }
}

/// Lower-case hex digits as bytes.
fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
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

    fn key(byte: u8) -> ResultKey {
        ResultKey::new(&[byte; 32]).unwrap()
    }

    fn writer(key: Result<ResultKey, String>) -> StatusWriter {
        StatusWriter {
            newest_run: None,
            field_manager: FIELD_MANAGER,
            key,
        }
    }

    fn check_with(o: &UpdatePreflight, key: Result<ResultKey, String>) -> Result<(), String> {
        let version = Version::parse("4.15.3");
        vouch(
            o,
            &ReleaseKey::from_image(IMAGE),
            version.as_ref(),
            Some(&writer(key)),
        )
        .map_err(|e| e.why.to_string())
    }

    fn check(o: &UpdatePreflight) -> Result<(), String> {
        check_with(o, Ok(key(7)))
    }

    /// The gate's own object with a finished run, signed with `key`.
    fn signed(key: &ResultKey) -> UpdatePreflight {
        let mut o = own();
        o.status = Some(crate::model::UpdatePreflightStatus {
            phase: Some(crate::model::Phase::Passed),
            completion_time: Some(Time("2025-03-01T10:00:00Z".parse().unwrap())),
            observed_generation: Some(1),
            run: Some(3),
            results: vec![crate::model::CheckResult::new(
                "EtcdHealthy",
                crate::model::Severity::Blocking,
                crate::model::Outcome::Pass,
                "etcd is healthy",
            )],
            ..Default::default()
        });
        let signature = key.sign(&o);
        o.status.as_mut().unwrap().signature = Some(signature);
        o
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

    /// Trust, third pass, L2: the gate owns its result's spec. Its own
    /// object with a narrowed suite or another version is repaired and run
    /// again by the controller, so the denial says it is pending, not that
    /// someone must delete it; a request under another name is not its own.
    #[test]
    fn a_changed_spec_of_the_gates_own_object_is_run_again_and_a_request_is_not() {
        let key = ReleaseKey::from_image(IMAGE);
        let version = Version::parse("4.15.3");
        let mut narrowed = own();
        narrowed.spec.checks = vec!["EtcdHealthy".into()];
        let mut renumbered = own();
        renumbered.spec.version = Some("4.14.20".into());
        for changed in [narrowed, renumbered] {
            let refused = vouch(&changed, &key, version.as_ref(), None).unwrap_err();
            assert!(refused.runs_again, "{}", refused.why);
        }
        let mut request = own();
        request.metadata.name = Some("manual-x7k2".into());
        let refused = vouch(&request, &key, version.as_ref(), None).unwrap_err();
        assert!(!refused.runs_again, "{}", refused.why);
    }

    #[test]
    fn a_finished_run_is_vouched_for_only_with_the_gates_signature() {
        assert_eq!(check(&signed(&key(7))), Ok(()));
        // Read back as the API server returns it: the same signature.
        let read_back: UpdatePreflight =
            serde_json::from_str(&serde_json::to_string(&signed(&key(7))).unwrap()).unwrap();
        assert_eq!(check(&read_back), Ok(()));
    }

    #[rstest]
    #[case::missing(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().signature = None,
        "has no signature of the gate's")]
    #[case::garbage(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().signature = Some("v1:zz".into()),
        "has a signature that is not the gate's")]
    #[case::a_failure_turned_into_a_pass(|o: &mut UpdatePreflight| {
            let status = o.status.as_mut().unwrap();
            status.results[0].outcome = crate::model::Outcome::Fail;
            status.phase = Some(crate::model::Phase::Failed);
        }, "has a signature that is not the gate's")]
    #[case::a_message_changed(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().results[0].message = "all fine".into(),
        "has a signature that is not the gate's")]
    #[case::a_result_dropped(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().results.clear(),
        "has a signature that is not the gate's")]
    #[case::made_fresh(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().completion_time = Some(Time("2030-01-01T00:00:00Z".parse().unwrap())),
        "has a signature that is not the gate's")]
    #[case::another_generation(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().observed_generation = Some(9),
        "has a signature that is not the gate's")]
    #[case::a_plan_added(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().plan = Some(Default::default()),
        "has a signature that is not the gate's")]
    #[case::another_version(|o: &mut UpdatePreflight| o.spec.version = None,
        "has a signature that is not the gate's")]
    #[case::copied_onto_another_object(|o: &mut UpdatePreflight| o.metadata.uid = Some("another-uid".into()),
        "has a signature that is not the gate's")]
    #[case::another_run_number(|o: &mut UpdatePreflight| o.status.as_mut().unwrap().run = Some(9),
        "has a signature that is not the gate's")]
    fn a_tampered_result_is_refused(#[case] tamper: fn(&mut UpdatePreflight), #[case] says: &str) {
        let mut o = signed(&key(7));
        tamper(&mut o);
        let why = check(&o).unwrap_err();
        assert!(why.contains(says), "{why}");
    }

    /// An older signed run written back (M1): the signature verifies, but
    /// the gate has seen a newer run of the object, so it is refused and run
    /// again; the newest run itself, and any run of another object, pass.
    #[test]
    fn an_older_signed_run_written_back_is_refused() {
        let runs = NewestRuns::default();
        let mut newer = own();
        newer.metadata.uid = Some("uid-1".into());
        let older = {
            let mut o = signed_as(&newer, 3, &key(7));
            o.metadata.uid = Some("uid-1".into());
            o
        };
        let newest = signed_as(&newer, 4, &key(7));
        runs.observe(&older, &key(7));
        runs.observe(&newest, &key(7));
        // Unsigned or forged runs are never remembered.
        let mut forged = newest.clone();
        forged.status.as_mut().unwrap().run = Some(99);
        runs.observe(&forged, &key(7));
        runs.observe(&signed_as(&newer, 50, &key(8)), &key(7));
        assert_eq!(runs.newest("uid-1"), Some(4));

        let with = |o: &UpdatePreflight| {
            let writer = StatusWriter {
                newest_run: runs.newest("uid-1"),
                ..writer(Ok(key(7)))
            };
            vouch(o, &ReleaseKey::from_image(IMAGE), None, Some(&writer))
        };
        assert_eq!(with(&newest), Ok(()));
        let refused = with(&older).unwrap_err();
        assert_eq!(
            refused.why.to_string(),
            "is run 3 of the object, older than run 4, which the gate has seen: an older status was written back"
        );
        assert!(refused.runs_again, "the controller runs it again");
        runs.forget("uid-1");
        assert_eq!(runs.newest("uid-1"), None);
    }

    /// `template`'s object with a finished run numbered `run`, signed.
    fn signed_as(template: &UpdatePreflight, run: u64, key: &ResultKey) -> UpdatePreflight {
        let mut o = signed(key);
        o.metadata.uid = template.metadata.uid.clone();
        o.status.as_mut().unwrap().run = Some(run);
        let signature = key.sign(&o);
        o.status.as_mut().unwrap().signature = Some(signature);
        o
    }

    #[test]
    fn another_keys_signature_is_refused() {
        let why = check(&signed(&key(8))).unwrap_err();
        assert!(why.contains("not the gate's"), "{why}");
        // The same key again verifies: one key for every replica.
        assert_eq!(check_with(&signed(&key(8)), Ok(key(8))), Ok(()));
    }

    #[test]
    fn without_its_key_the_gate_vouches_for_no_finished_run() {
        let why = check_with(
            &signed(&key(7)),
            Err("Secret preflight-gate/preflight-gate-result-key: forbidden".into()),
        )
        .unwrap_err();
        assert_eq!(
            why,
            "cannot be vouched for: the gate cannot read the key it signs its results with (Secret preflight-gate/preflight-gate-result-key: forbidden)"
        );
    }

    #[test]
    fn a_run_under_way_needs_no_signature() {
        let mut o = own();
        o.status = Some(crate::model::UpdatePreflightStatus {
            phase: Some(crate::model::Phase::Running),
            ..Default::default()
        });
        assert_eq!(check_with(&o, Err("unread".into())), Ok(()));
    }

    #[test]
    fn a_key_too_short_is_refused() {
        assert!(ResultKey::new(&[1; 31]).is_err());
        assert!(ResultKey::new(&[1; 32]).is_ok());
        assert_eq!(format!("{:?}", key(7)), "ResultKey(..)");
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
