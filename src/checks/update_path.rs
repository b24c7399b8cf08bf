//! UpdatePath: the target is a supported step from the current version.
//! Rolling back is only supported to the previous patch version the
//! cluster ran; more than one minor version at a time is not supported; a
//! major update is named as such. A pre-release target (an engineering,
//! feature or release candidate, a nightly) warns: it is not for
//! production, and a cluster on one has no supported update path.
//!
//! What the history says of earlier updates is said too, and warns: one
//! forced past a failed signature verification (the release the cluster
//! runs may not be the one its version names), and one that never
//! completed before another replaced it.

use super::{Check, Context};
use crate::model::Severity;
use crate::model::cluster_version::UpdateHistory;
use crate::model::release::{Version, describe_move};
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
            .map(|cv| history_notes(&cv.status.history))
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

/// What the history says of earlier updates that a person should know
/// before the next: entries the CVO applied unverified (forced), and
/// updates that never completed before another replaced them. The oldest
/// entry, the install, is never verified and is left out.
fn history_notes(history: &[UpdateHistory]) -> Vec<String> {
    let Some((_install, updates)) = history.split_last() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    for (i, entry) in updates.iter().enumerate() {
        if !entry.verified {
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

/// The path from the current version to the target.
fn path(ctx: &Context) -> Finding {
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
        return if target.minor_line() == current.minor_line() && previous.as_ref() == Some(target) {
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
    if target.major != current.major {
        return Finding::pass(format!(
            "a major update from {current} to {target}: read the release notes of {} before you start",
            target.minor_line()
        ));
    }
    let hops = target.minor - current.minor;
    if hops > 1 {
        return Finding::fail(format!(
                "{current} to {target} crosses {hops} minor versions; update one minor version at a time (to {}.{} first)",
                current.major,
                current.minor.saturating_add(1)
            ))
            .with_url(URL);
    }
    let step = match describe_move(current, target) {
        "pre-release step" => "a pre-release step".to_owned(),
        kind => format!("a {kind} update"),
    };
    match target.pre_release() {
            Some(pre) => Finding::warn(format!(
                "{step} from {current} to {target}, which is {pre}: pre-releases are not for production clusters, and a cluster that runs one has no supported update path to a release"
            ))
            .with_url(URL),
            None => Finding::pass(format!("{step} from {current} to {target}")),
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
    #[case::two_minors(&["4.14.3"], "4.16.2", Outcome::Fail, "update one minor version at a time (to 4.15 first)")]
    #[case::major(&["4.22.1"], "5.0.0", Outcome::Pass, "a major update from 4.22.1 to 5.0.0")]
    #[case::rollback_to_previous(&["4.15.10", "4.15.3"], "4.15.3", Outcome::Pass, "previous patch version")]
    #[case::rollback_elsewhere(&["4.15.10", "4.15.3"], "4.15.5", Outcome::Fail, "only supported to the previous patch version the cluster ran (4.15.3)")]
    #[case::rollback_minor(&["4.16.1", "4.15.3"], "4.15.3", Outcome::Fail, "a rollback is only supported")]
    #[case::same(&["4.15.3"], "4.15.3", Outcome::Pass, "the version the cluster runs")]
    #[case::ec_back_is_a_rollback(&["4.17.0-ec.10", "4.17.0-ec.8"], "4.17.0-ec.9", Outcome::Fail, "4.17.0-ec.9 is older than 4.17.0-ec.10")]
    #[case::ec_forward_is_a_pre_release_step(&["4.17.0-ec.9"], "4.17.0-ec.10", Outcome::Fail, "a pre-release step from 4.17.0-ec.9 to 4.17.0-ec.10, which is an engineering candidate: pre-releases are not for production")]
    #[case::to_a_nightly(&["4.16.3"], "4.17.0-0.nightly-2024-06-01-000000", Outcome::Fail, "a minor update from 4.16.3 to 4.17.0-0.nightly-2024-06-01-000000, which is a nightly build")]
    #[case::okd_forward_is_a_release(&["4.15.0-okd-scos.9"], "4.15.0-okd-scos.16", Outcome::Pass, "a patch update from 4.15.0-okd-scos.9 to 4.15.0-okd-scos.16")]
    #[case::okd_back_is_a_rollback(&["4.15.0-okd-scos.16"], "4.15.0-okd-scos.9", Outcome::Fail, "4.15.0-okd-scos.9 is older than 4.15.0-okd-scos.16")]
    #[case::rc_to_release(&["4.16.0-rc.10"], "4.16.0", Outcome::Pass, "a pre-release step from 4.16.0-rc.10 to 4.16.0")]
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
        // A pre-release only ever warns; the other failures block.
        let pre = finding
            .message
            .contains("pre-releases are not for production");
        assert_eq!(finding.severity.is_some(), pre, "{}", finding.message);
    }

    /// `4.15.0-ec2-unavailable-mco-20m` was forced to an unsigned tag; an
    /// update replaced before it completed is told too. Both warn.
    #[rstest]
    #[case::forced(
        json!([{"state": "Partial", "version": "4.15.0-ec.2", "verified": false},
               {"state": "Completed", "version": "4.14.0-rc.3", "verified": false}]),
        "4.15.0-ec.3",
        "the update to 4.15.0-ec.2 was applied without a verified signature, forced"
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
