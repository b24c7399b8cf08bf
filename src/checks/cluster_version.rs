//! ClusterVersionState: the cluster-version operator is not Failing, the
//! cluster is not still being installed, and an update in progress is only
//! retargeted within its minor version. Its findings carry OpenShift's
//! names: `Failing` (`oc adm upgrade recommend` names a `Failing` that is
//! not `False`), `Progressing` (oc's name for an update in progress) and
//! `ClusterVersionUpdating` (the CVO's risk of a minor or major target
//! while an update is in progress).

use super::{Check, Context};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::Version;
use crate::model::risks;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::since;

pub struct ClusterVersionState;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/troubleshooting_updates/gathering-data-cluster-update.html";

impl Check for ClusterVersionState {
    fn name(&self) -> &'static str {
        "ClusterVersionState"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(cv) = &ctx.view.cluster_version else {
            return Finding::error("no ClusterVersion in the cluster data");
        };
        let conditions = &cv.status.conditions;
        // oc counts a Failing that is not False, Unknown too: the CVO
        // could not say the cluster reached its desired state.
        if let Some(failing) = condition(conditions, "Failing").filter(|c| c.status != "False") {
            let state = if failing.status == "True" {
                "Failing".to_owned()
            } else {
                format!("Failing={}", failing.status)
            };
            return Finding::fail(format!(
                "the ClusterVersion is {state} for {}: {}",
                since(failing.last_transition_time, ctx.now),
                excerpt(
                    failing.message.as_deref().or(failing.reason.as_deref()),
                    EXCERPT
                )
            ))
            .with_url(URL)
            .with_risks([risks::FAILING]);
        }
        // The CVO could not load or verify the release an earlier change
        // asked for (its message names it: `Retrieving payload failed
        // version="4.15.3" image="…" failure=…`). Asking for that release
        // again meets the same refusal; another replaces the attempt.
        if let Some(refused) =
            condition(conditions, "ReleaseAccepted").filter(|c| c.status == "False")
        {
            let said = refused.message.as_deref().unwrap_or("");
            let reason = refused.reason.as_deref().unwrap_or("no reason");
            let why = excerpt(Some(said), EXCERPT);
            let digest = ctx.target.key.as_str();
            if ctx.target.key.is_digest() && said.contains(digest) {
                return Finding::fail(format!(
                    "the CVO did not accept this release when it was last asked for (ReleaseAccepted=False, {reason}): {why}"
                ))
                .with_url(URL);
            }
            return Finding::warn(format!(
                "the CVO did not accept the release an earlier change asked for (ReleaseAccepted=False, {reason}): {why}; this target replaces that attempt"
            ))
            .with_url(URL);
        }
        // oc names an update in progress (Progressing=True with a message).
        let progressing = condition(conditions, "Progressing").is_some_and(|c| {
            c.status == "True" && c.message.as_deref().is_some_and(|m| !m.is_empty())
        });
        let progressing = progressing.then_some(risks::PROGRESSING);
        if cv.installing() {
            let install = &cv.status.history[0];
            return Finding::fail(format!(
                "the cluster is still being installed ({}, started {} ago): an update can start once the install has completed",
                install.version,
                since(install.started_time, ctx.now)
            ))
            .with_url(URL)
            .with_risks(progressing);
        }
        if let Some(update) = cv.update_in_progress() {
            let updating_to = Version::parse(&update.version);
            // How far it got, in the CVO's words ("Working towards 4.14.11:
            // 106 of 863 done (12% complete)").
            let progress = condition(conditions, "Progressing")
                .and_then(|c| c.message.as_deref())
                .map(|m| format!(" ({})", excerpt(Some(m), EXCERPT)))
                .unwrap_or_default();
            return match (&updating_to, &ctx.target_version) {
                (Some(from), Some(to)) if from == to => Finding::pass(format!(
                    "{to} is the update in progress{progress}: asking for it again changes nothing"
                )),
                (Some(from), Some(to)) if from.minor_line() == to.minor_line() => Finding::warn(format!(
                    "an update to {from} is in progress{progress}, since {}: retargeting to {to} within {} replaces it before it completes. oc says to let an update complete first; retarget only to leave a stuck update for a fixed release",
                    since(update.started_time, ctx.now),
                    from.minor_line()
                ))
                .with_url(URL)
                .with_risks(progressing),
                (Some(from), Some(to)) => Finding::fail(format!(
                    "an update to {from} is in progress (since {}); retargeting within {} is allowed, but moving to {to} changes the minor version mid-update: let the update finish first",
                    since(update.started_time, ctx.now),
                    from.minor_line()
                ))
                .with_url(URL)
                .with_risks(progressing.into_iter().chain([risks::CLUSTER_VERSION_UPDATING])),
                _ => Finding::fail(format!(
                    "an update to {} is in progress; the target's minor version cannot be compared",
                    update.version
                ))
                .with_url(URL)
                .with_risks(progressing.into_iter().chain([risks::CLUSTER_VERSION_UPDATING])),
            };
        }
        Finding::pass(format!(
            "the ClusterVersion is at {} and not Failing",
            cv.status.desired.version
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, condition};
    use crate::model::{Outcome, Target};
    use rstest::rstest;
    use serde_json::{Value, json};

    /// A cluster at 4.14.1 with these conditions, updating to 4.14.3 when
    /// `updating`.
    fn cluster_version(conditions: Value, updating: bool) -> Value {
        let mut cv = fixture::cluster_version("4.14.1");
        cv["status"]["conditions"] = conditions;
        if updating {
            cv["status"]["history"] = json!([
                {"state": "Partial", "version": "4.14.3", "image": "q@sha256:03"},
                {"state": "Completed", "version": "4.14.1", "image": "q@sha256:01"}]);
        }
        cv
    }

    #[rstest]
    #[case::at_rest(json!([condition("Failing", "False", "")]), false, "4.14.3", Outcome::Pass, &[])]
    #[case::failing(json!([condition("Failing", "True", "Cluster operator monitoring is not available")]), false, "4.14.3", Outcome::Fail, &["Failing"])]
    #[case::failing_unknown(json!([condition("Failing", "Unknown", "")]), false, "4.14.3", Outcome::Fail, &["Failing"])]
    #[case::retarget_within_the_minor(json!([condition("Failing", "False", ""), condition("Progressing", "True", "Working towards 4.14.3")]), true, "4.14.5", Outcome::Fail, &["Progressing"])]
    #[case::another_minor_mid_update(json!([condition("Failing", "False", ""), condition("Progressing", "True", "Working towards 4.14.3")]), true, "4.15.2", Outcome::Fail, &["Progressing", "ClusterVersionUpdating"])]
    fn findings_carry_openshifts_names(
        #[case] conditions: Value,
        #[case] updating: bool,
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] risks: &[&str],
    ) {
        let view = fixture::view(vec![cluster_version(conditions, updating)]);
        let finding = fixture::evaluate(&ClusterVersionState, &view, to);
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert_eq!(finding.risks, risks, "{}", finding.message);
    }

    #[test]
    fn a_release_the_cvo_refused_is_refused_again_and_another_replaces_it() {
        let refused = "sha256:7777777777777777777777777777777777777777777777777777777777777777";
        let cv = cluster_version(
            json!([
                condition("Failing", "False", ""),
                {"type": "ReleaseAccepted", "status": "False", "reason": "RetrievePayload",
                 "message": format!("Retrieving payload failed version=\"4.14.3\" image=\"q@{refused}\" failure=The update cannot be verified: unable to verify {refused} against keyrings: verifier-public-key-redhat")}
            ]),
            false,
        );
        let view = fixture::view(vec![cv]);
        let again = Target::image(&format!("q@{refused}"), Some("4.14.3".into()));
        let finding = fixture::evaluate_for(&ClusterVersionState, &view, &again);
        assert_eq!((finding.outcome, finding.severity), (Outcome::Fail, None));
        assert!(
            finding.message.starts_with(
                "the CVO did not accept this release when it was last asked for (ReleaseAccepted=False, RetrievePayload): Retrieving payload failed"
            ),
            "{}",
            finding.message
        );
        let other = Target::image("q@sha256:8888", Some("4.14.5".into()));
        let finding = fixture::evaluate_for(&ClusterVersionState, &view, &other);
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, Some(Severity::Warning))
        );
        assert!(
            finding
                .message
                .ends_with("this target replaces that attempt"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn a_failing_unknown_says_so() {
        let view = fixture::view(vec![cluster_version(
            json!([condition("Failing", "Unknown", "")]),
            false,
        )]);
        let finding = fixture::evaluate(&ClusterVersionState, &view, "4.14.3");
        assert!(
            finding
                .message
                .starts_with("the ClusterVersion is Failing=Unknown for "),
            "{}",
            finding.message
        );
    }
}
