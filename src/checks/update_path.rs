//! UpdatePath: the target is a supported step from the current version.
//! Rolling back is only supported to the previous patch version the
//! cluster ran; more than one minor version at a time is not supported; a
//! major update is named as such.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::Version;

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
        let Some(current) = &ctx.current else {
            if let Some(cv) = ctx
                .view
                .cluster_version
                .as_ref()
                .filter(|cv| cv.installing())
            {
                return Finding::fail(format!(
                    "the cluster is still being installed ({}): it has no completed version to update from",
                    cv.status.desired.version
                ))
                .with_url(URL);
            }
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
            return if target.minor_line() == current.minor_line()
                && previous.as_ref() == Some(target)
            {
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
        let kind = if hops == 1 { "minor" } else { "patch" };
        Finding::pass(format!("a {kind} update from {current} to {target}"))
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
            .map(|v| json!({"state": "Completed", "version": v}))
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
    #[case::ec_forward_is_an_update(&["4.17.0-ec.9"], "4.17.0-ec.10", Outcome::Pass, "a patch update from 4.17.0-ec.9 to 4.17.0-ec.10")]
    #[case::okd_back_is_a_rollback(&["4.15.0-okd-scos.16"], "4.15.0-okd-scos.9", Outcome::Fail, "4.15.0-okd-scos.9 is older than 4.15.0-okd-scos.16")]
    #[case::rc_to_release(&["4.16.0-rc.10"], "4.16.0", Outcome::Pass, "a patch update from 4.16.0-rc.10 to 4.16.0")]
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
