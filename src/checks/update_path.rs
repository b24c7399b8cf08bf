//! UpdatePath: the target is a supported step from the current version.
//! Rolling back is only supported to the previous patch version the
//! cluster ran. Forwards, the hop is judged as the CVO judges it
//! ([`Hop`]): a skipped minor is `MultipleMinorVersionsUpdate`, a larger
//! major other than 4.y to 5.0 is `MajorVersionUpdate`; 4.22 to 5.0 is the
//! minor update it is, and 4.21 to 5.0, which the CVO lets through for
//! now, skips 4.22 and fails. A pre-release target (an engineering,
//! feature or release candidate, a nightly) warns: it is not for
//! production, and a cluster on one has no supported update path. A
//! cluster that runs a pre-release fails for that reason, whatever the
//! target.
//!
//! What the history says of earlier updates is said too, and warns: one
//! forced past a failed signature verification, of the release the
//! cluster runs, is updating to, or is asked to go to (the release may not
//! be the one its version names; an older one is history), and one that
//! never completed before another replaced it.

use super::{Check, Context};
use crate::model::Severity;
use crate::model::cluster_version::UpdateHistory;
use crate::model::release::{Hop, Minor, ReleaseKey, Version, describe_move};
use crate::model::text::{EXCERPT, excerpt};
use crate::model::{Finding, Outcome};

pub struct UpdatePath;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/understanding_updates/intro-to-updates.html";

impl Check for UpdatePath {
    fn name(&self) -> &'static str {
        "UpdatePath"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let finding = path(ctx);
        let notes = ctx
            .view
            .cluster_version
            .as_ref()
            .map(|cv| history_notes(&cv.status.history, &relevant(ctx)))
            .unwrap_or_default();
        if notes.is_empty() {
            return finding;
        }
        let message = format!("{}; {}", finding.message, notes.join("; "));
        match finding.outcome {
            Outcome::Pass => Finding::warn(message).with_url(URL),
            _ => Finding { message, ..finding },
        }
    }
}

/// The releases an unverified history entry matters for: the one the
/// cluster runs (its newest completed version), the one it is moving to
/// (`status.desired`) and the target, by version and by image.
struct Relevant {
    versions: Vec<Version>,
    images: Vec<ReleaseKey>,
}

impl Relevant {
    fn names(&self, entry: &UpdateHistory) -> bool {
        Version::parse(&entry.version).is_some_and(|v| self.versions.contains(&v))
            || (!entry.image.is_empty()
                && self.images.contains(&ReleaseKey::from_image(&entry.image)))
    }
}

fn relevant(ctx: &Context) -> Relevant {
    let desired = ctx
        .view
        .cluster_version
        .as_ref()
        .map(|cv| &cv.status.desired);
    let versions = [ctx.current.clone(), ctx.target_version.clone()]
        .into_iter()
        .chain(desired.map(|d| Version::parse(&d.version)))
        .flatten()
        .collect();
    let images = desired
        .map(|d| d.image.as_str())
        .filter(|i| !i.is_empty())
        .map(ReleaseKey::from_image)
        .into_iter()
        .chain((!ctx.target.image.is_empty()).then(|| ctx.target.key.clone()))
        .collect();
    Relevant { versions, images }
}

/// What the history says of earlier updates that a person should know
/// before the next: entries the CVO applied unverified (forced) of the
/// releases that matter now (`relevant`: an unverified release the
/// cluster left long ago is history, not a problem), and updates that
/// never completed before another replaced them. The oldest entry, the
/// install, is never verified and is left out.
fn history_notes(history: &[UpdateHistory], relevant: &Relevant) -> Vec<String> {
    let Some((_install, updates)) = history.split_last() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (i, entry) in updates.iter().enumerate() {
        if !entry.verified && relevant.names(entry) {
            let forced = entry
                .accepted_risks
                .as_deref()
                .map(|r| format!(" ({})", excerpt(Some(r), EXCERPT)))
                .unwrap_or_default();
            notes.push(format!(
                "the update to {} was applied without a verified signature, forced{forced}: the cluster may run a release other than the one its version names",
                entry.version
            ));
        }
        if i > 0 && entry.state == "Partial" {
            notes.push(format!(
                "the update to {} (started {}) never completed before {} replaced it",
                entry.version,
                entry
                    .started_time
                    .map_or_else(|| "at an unknown time".to_owned(), |t| t.to_string()),
                updates[i - 1].version
            ));
        }
    }
    notes
}

/// The path from the current version to the target; from a pre-release,
/// there is none, whatever the target.
fn path(ctx: &Context) -> Finding {
    let finding = hop(ctx);
    let (Some(current), Some(target)) = (&ctx.current, &ctx.target_version) else {
        return finding;
    };
    match current.pre_release() {
        Some(pre) if target != current => Finding::fail(format!(
            "the cluster runs {current}, {pre}: a cluster on a pre-release has no supported update path, to a release or to another pre-release; reinstall on a release for a cluster to keep ({})",
            finding.message
        ))
        .with_url(URL),
        _ => finding,
    }
}

/// The hop from the current version to the target.
fn hop(ctx: &Context) -> Finding {
    let Some(current) = &ctx.current else {
        return Finding::error("the cluster's current version is unknown");
    };
    let Some(target) = &ctx.target_version else {
        return super::version_unknown("check the update path");
    };
    if target == current {
        return Finding::pass(format!("{target} is the version the cluster runs"));
    }
    if target < current {
        let previous = previous_version(ctx, current);
        return if target.line() == current.line() && previous.as_ref() == Some(target) {
            Finding::pass(format!(
                "a rollback from {current} to {target}, the previous patch version the cluster ran"
            ))
        } else {
            Finding::fail(format!(
                    "{target} is older than {current}: a rollback is only supported to the previous patch version the cluster ran ({})",
                    previous.map_or_else(|| "none recorded".to_owned(), |v| v.to_string())
                ))
                .with_url(URL)
        };
    }
    match Hop::between(current, target) {
        Hop::MajorVersionUpdate => {
            let how = match current.line().next() {
                Some(next) if Hop::into_openshift_5(current, target) => format!(
                    "from 4.y the CVO accepts no 5.y but 5.0; update one minor version at a time (to {next} first)"
                ),
                _ => "the CVO accepts updates within the current major version only".to_owned(),
            };
            return Finding::fail(format!(
                "{current} to {target} is refused by the CVO ({}): {how}",
                Hop::MAJOR_VERSION
            ))
            .with_url(URL);
        }
        Hop::SkipsMinors {
            next,
            last_skipped,
            skipped,
        } => {
            let skips = if skipped == 1 {
                format!("skips {next}")
            } else {
                format!("skips {skipped} minor versions, {next} to {last_skipped}")
            };
            // The CVO lets any 4.y go to 5.0 for now; no supported path
            // skips 4.22, and the gate holds the update to it.
            let cvo = if Hop::into_openshift_5(current, target) {
                format!(
                    " (the CVO lets any 4.y update to 5.0 for now, but no supported path skips {})",
                    Minor::LAST_OF_4
                )
            } else {
                String::new()
            };
            return Finding::fail(format!(
                "{current} to {target} crosses {} minor versions and {skips} ({}){cvo}; update one minor version at a time (to {next} first)",
                skipped.saturating_add(1),
                Hop::MULTIPLE_MINOR_VERSIONS
            ))
            .with_url(URL);
        }
        Hop::Back | Hop::WithinMinor | Hop::NextMinor => {}
    }
    let after = if target.major != current.major {
        format!(
            " (OpenShift {} is the minor version after {})",
            target.line(),
            current.line()
        )
    } else {
        String::new()
    };
    let step = match describe_move(current, target) {
        "pre-release step" => "a pre-release step".to_owned(),
        kind => format!("a {kind} update"),
    };
    match target.pre_release() {
            Some(pre) => Finding::warn(format!(
                "{step} from {current} to {target}{after}, which is {pre}: pre-releases are not for production clusters, and a cluster that runs one has no supported update path to a release"
            ))
            .with_url(URL),
            None => Finding::pass(format!("{step} from {current} to {target}{after}")),
        }
}

/// The newest completed version before `current` in the history.
fn previous_version(ctx: &Context, current: &Version) -> Option<Version> {
    ctx.view
        .cluster_version
        .as_ref()?
        .status
        .history
        .iter()
        .filter(|h| h.state == "Completed")
        .filter_map(|h| Version::parse(&h.version))
        .find(|v| v != current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, cluster_version};
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::json;

    fn history(versions: &[&str]) -> serde_json::Value {
        let mut cv = cluster_version(versions[0]);
        cv["status"]["history"] = versions
            .iter()
            .map(|v| json!({"state": "Completed", "version": v, "verified": true}))
            .collect();
        cv
    }

    #[rstest]
    #[case::patch(&["4.15.3"], "4.15.10", Outcome::Pass, "a patch update")]
    #[case::minor(&["4.15.3"], "4.16.2", Outcome::Pass, "a minor update")]
    #[case::two_minors(&["4.14.3"], "4.16.2", Outcome::Fail, "4.14.3 to 4.16.2 crosses 2 minor versions and skips 4.15 (MultipleMinorVersionsUpdate); update one minor version at a time (to 4.15 first)")]
    #[case::to_5_0_is_a_minor_update(&["4.22.1"], "5.0.0", Outcome::Pass, "a minor update from 4.22.1 to 5.0.0 (OpenShift 5.0 is the minor version after 4.22)")]
    #[case::to_a_5_0_candidate(&["4.22.1"], "5.0.0-rc.1", Outcome::Fail, "a minor update from 4.22.1 to 5.0.0-rc.1 (OpenShift 5.0 is the minor version after 4.22), which is a release candidate")]
    #[case::to_5_1_is_a_major_update(&["4.22.1"], "5.1.0", Outcome::Fail, "4.22.1 to 5.1.0 is refused by the CVO (MajorVersionUpdate): from 4.y the CVO accepts no 5.y but 5.0; update one minor version at a time (to 5.0 first)")]
    #[case::from_4_20_to_5_1(&["4.20.1"], "5.1.0", Outcome::Fail, "(MajorVersionUpdate): from 4.y the CVO accepts no 5.y but 5.0; update one minor version at a time (to 4.21 first)")]
    #[case::to_5_0_skipping_4_22(&["4.21.7"], "5.0.0", Outcome::Fail, "4.21.7 to 5.0.0 crosses 2 minor versions and skips 4.22 (MultipleMinorVersionsUpdate) (the CVO lets any 4.y update to 5.0 for now, but no supported path skips 4.22); update one minor version at a time (to 4.22 first)")]
    #[case::to_5_0_skipping_four(&["4.18.7"], "5.0.2", Outcome::Fail, "crosses 5 minor versions and skips 4 minor versions, 4.19 to 4.22 (MultipleMinorVersionsUpdate)")]
    #[case::within_5(&["5.0.3"], "5.1.1", Outcome::Pass, "a minor update from 5.0.3 to 5.1.1")]
    #[case::to_6(&["5.3.3"], "6.0.0", Outcome::Fail, "5.3.3 to 6.0.0 is refused by the CVO (MajorVersionUpdate): the CVO accepts updates within the current major version only")]
    #[case::back_to_4_22(&["5.0.1", "4.22.9"], "4.22.9", Outcome::Fail, "a rollback is only supported to the previous patch version")]
    #[case::rollback_to_previous(&["4.15.10", "4.15.3"], "4.15.3", Outcome::Pass, "previous patch version")]
    #[case::rollback_elsewhere(&["4.15.10", "4.15.3"], "4.15.5", Outcome::Fail, "only supported to the previous patch version the cluster ran (4.15.3)")]
    #[case::rollback_minor(&["4.16.1", "4.15.3"], "4.15.3", Outcome::Fail, "a rollback is only supported")]
    #[case::same(&["4.15.3"], "4.15.3", Outcome::Pass, "the version the cluster runs")]
    #[case::ec_back_is_a_rollback(&["4.17.0-ec.10", "4.17.0-ec.8"], "4.17.0-ec.9", Outcome::Fail, "4.17.0-ec.9 is older than 4.17.0-ec.10")]
    #[case::ec_forward_is_a_pre_release_step(&["4.17.0-ec.9"], "4.17.0-ec.10", Outcome::Fail, "the cluster runs 4.17.0-ec.9, an engineering candidate: a cluster on a pre-release has no supported update path, to a release or to another pre-release; reinstall on a release for a cluster to keep (a pre-release step from 4.17.0-ec.9 to 4.17.0-ec.10")]
    #[case::to_a_nightly(&["4.16.3"], "4.17.0-0.nightly-2024-06-01-000000", Outcome::Fail, "a minor update from 4.16.3 to 4.17.0-0.nightly-2024-06-01-000000, which is a nightly build")]
    #[case::okd_forward_is_a_release(&["4.15.0-okd-scos.9"], "4.15.0-okd-scos.16", Outcome::Pass, "a patch update from 4.15.0-okd-scos.9 to 4.15.0-okd-scos.16")]
    #[case::okd_back_is_a_rollback(&["4.15.0-okd-scos.16"], "4.15.0-okd-scos.9", Outcome::Fail, "4.15.0-okd-scos.9 is older than 4.15.0-okd-scos.16")]
    #[case::rc_to_release(&["4.16.0-rc.10"], "4.16.0", Outcome::Fail, "the cluster runs 4.16.0-rc.10, a release candidate: a cluster on a pre-release has no supported update path")]
    #[case::from_a_nightly(&["4.22.0-0.nightly-2026-03-01-101010"], "4.22.1", Outcome::Fail, "the cluster runs 4.22.0-0.nightly-2026-03-01-101010, a nightly build: a cluster on a pre-release has no supported update path")]
    #[case::from_a_ci_build(&["4.22.0-0.ci-2026-03-01-101010"], "5.0.0", Outcome::Fail, "the cluster runs 4.22.0-0.ci-2026-03-01-101010, a CI build")]
    #[case::from_an_ec_to_5_0(&["4.22.0-ec.3"], "5.0.0", Outcome::Fail, "the cluster runs 4.22.0-ec.3, an engineering candidate")]
    #[case::from_an_rc_skipping(&["4.22.0-rc.1"], "5.1.0", Outcome::Fail, "the cluster runs 4.22.0-rc.1, a release candidate: a cluster on a pre-release has no supported update path, to a release or to another pre-release; reinstall on a release for a cluster to keep (4.22.0-rc.1 to 5.1.0 is refused by the CVO (MajorVersionUpdate)")]
    #[case::the_pre_release_it_runs(&["4.22.0-ec.3"], "4.22.0-ec.3", Outcome::Pass, "the version the cluster runs")]
    #[case::absurd(&["4.15.3"], "4.18446744073709551615.0", Outcome::Fail, "crosses 18446744073709551600 minor versions")]
    fn paths(
        #[case] versions: &[&str],
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let view = fixture::view(vec![history(versions)]);
        let finding = fixture::evaluate(&UpdatePath, &view, to);
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        // A pre-release target only warns; the other failures block, a
        // cluster that runs a pre-release among them.
        let pre = finding
            .message
            .contains("pre-releases are not for production")
            && !finding.message.starts_with("the cluster runs ");
        assert_eq!(finding.severity.is_some(), pre, "{}", finding.message);
    }

    /// `4.15.0-ec2-unavailable-mco-20m` was forced to an unsigned tag (its
    /// report, from a pre-release, blocks; here the same history between
    /// releases); an update replaced before it completed is told too. Both
    /// warn.
    #[rstest]
    #[case::forced(
        json!([{"state": "Partial", "version": "4.15.3", "verified": false},
               {"state": "Completed", "version": "4.14.12", "verified": false}]),
        "4.15.5",
        "the update to 4.15.3 was applied without a verified signature, forced"
    )]
    #[case::forced_with_what_was_accepted(
        json!([{"state": "Completed", "version": "4.15.9", "verified": false,
                "acceptedRisks": "Forced through blocking failures: Precondition \"ClusterVersionRecommendedUpdate\" failed"},
               {"state": "Completed", "version": "4.15.3", "verified": false}]),
        "4.16.1",
        "forced (Forced through blocking failures: Precondition \"ClusterVersionRecommendedUpdate\" failed)"
    )]
    #[case::never_completed(
        json!([{"state": "Completed", "version": "4.15.9", "verified": true},
               {"state": "Partial", "version": "4.15.8", "verified": true, "startedTime": "2026-11-01T10:00:00Z"},
               {"state": "Completed", "version": "4.15.3", "verified": false}]),
        "4.16.1",
        "the update to 4.15.8 (started 2026-11-01T10:00:00Z) never completed before 4.15.9 replaced it"
    )]
    fn what_the_history_says_of_earlier_updates_warns(
        #[case] history: serde_json::Value,
        #[case] to: &str,
        #[case] says: &str,
    ) {
        let mut cv = cluster_version("4.15.3");
        cv["status"]["history"] = history;
        let finding = fixture::evaluate(&UpdatePath, &fixture::view(vec![cv]), to);
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    /// The real 4.16.0-ec.3 cluster, its long history of ec and rc
    /// updates, with `unverified` entries (by version) made unverified.
    fn real_history(unverified: &[&str]) -> serde_json::Value {
        let list: serde_json::Value = serde_saphyr::from_str(include_str!(
            "../../tests/data/real-clusters/4.16.0-ec2-control-plane-updated-pdb-prohibits-draining/cv.yaml"
        ))
        .unwrap();
        let mut cv = list["items"][0].clone();
        let history = cv["status"]["history"].as_array_mut().unwrap();
        assert!(history.len() > 5, "{}", history.len());
        for entry in history.iter_mut() {
            if unverified.contains(&entry["version"].as_str().unwrap()) {
                entry["verified"] = json!(false);
            }
        }
        cv
    }

    /// An update forced long ago is history: only the release the cluster
    /// runs, the one it is moving to and the target are said unverified.
    #[rstest]
    #[case::long_ago(&["4.15.0-ec.2", "4.14.0-rc.6"], "4.16.0-ec.4", &[])]
    #[case::the_release_it_runs(&["4.16.0-ec.3", "4.14.0-rc.6"], "4.16.0-ec.4", &["4.16.0-ec.3"])]
    #[case::the_target_once_before(&["4.15.0-ec.3"], "4.15.0-ec.3", &["4.15.0-ec.3"])]
    fn only_the_releases_that_matter_now_are_said_unverified(
        #[case] unverified: &[&str],
        #[case] to: &str,
        #[case] said: &[&str],
    ) {
        let view = fixture::view(vec![real_history(unverified)]);
        let finding = fixture::evaluate(&UpdatePath, &view, to);
        for version in unverified {
            let note = format!("the update to {version} was applied without a verified signature");
            assert_eq!(
                finding.message.contains(&note),
                said.contains(version),
                "{version}: {}",
                finding.message
            );
        }
    }

    #[test]
    fn an_old_unverified_update_leaves_a_patch_update_clear() {
        let mut cv = cluster_version("4.15.9");
        cv["status"]["history"] = json!([
            {"state": "Completed", "version": "4.15.9", "verified": true},
            {"state": "Completed", "version": "4.15.5", "verified": false,
             "acceptedRisks": "Forced through blocking failures: Precondition \"ClusterVersionRecommendedUpdate\" failed"},
            {"state": "Completed", "version": "4.15.3", "verified": false}]);
        let finding = fixture::evaluate(&UpdatePath, &fixture::view(vec![cv]), "4.15.12");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
    }

    #[test]
    fn an_install_is_never_verified_and_says_nothing() {
        let mut cv = cluster_version("4.15.3");
        cv["status"]["history"] =
            json!([{"state": "Completed", "version": "4.15.3", "verified": false}]);
        let finding = fixture::evaluate(&UpdatePath, &fixture::view(vec![cv]), "4.15.9");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
    }

    #[test]
    fn a_target_without_a_version_fails_as_version_unknown_never_skipped() {
        let view = fixture::view(vec![cluster_version("4.15.3")]);
        let finding = fixture::evaluate(&UpdatePath, &view, "quay.io/r@sha256:99");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert!(
            finding.message.starts_with("version unknown: "),
            "{}",
            finding.message
        );
    }
}
