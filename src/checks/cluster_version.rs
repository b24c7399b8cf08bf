//! ClusterVersionState: the guards `oc adm upgrade` keeps before it writes
//! a new target, and what the cluster-version operator would refuse. Each
//! finding carries OpenShift's name for it, by which it is accepted:
//! - `Failing` (a `Failing` that is not `False`), `Invalid` (`Invalid=True`)
//!   and `Progressing` (an update in progress, which a new target would
//!   replace before it completes): oc refuses all three unless told
//!   `--allow-upgrade-with-warnings`, so they block here until accepted;
//!   `ClusterVersionUpdating` beside `Progressing` is the CVO's name when
//!   the target leaves the minor version of the update in progress;
//! - a cluster still being installed;
//! - a release the CVO refused when it was last asked for;
//! - a move from the multi-architecture payload back to a single
//!   architecture, which OpenShift does not support, and a move that
//!   abandons a migration to it under way.
//!
//! The update in progress, asked for again, changes nothing and passes.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::cluster_version::ArchitectureChange;
use crate::model::release::Version;
use crate::model::risks;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::since;
use crate::view::openshift::condition;

pub struct ClusterVersionState;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/troubleshooting_updates/gathering-data-cluster-update.html";
const MULTI_URL: &str = "https://docs.openshift.com/container-platform/latest/updating/updating_a_cluster/migrating-to-multi-payload.html";

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
        if ctx.target.architecture == Some(ArchitectureChange::FromMulti) {
            return Finding::fail(match cv.multi_migration() {
                Some(migration) => format!(
                    "the cluster is migrating to multi-architecture ({}, {}), and {} is not its multi-architecture payload: it abandons the migration, which OpenShift does not support. Let the migration complete; ask for its payload, or for a multi-architecture release after it",
                    migration.version,
                    migration.progress(),
                    ctx.target.image
                ),
                None => format!(
                    "the cluster runs the multi-architecture payload, and {} is a single-architecture one: moving back from multi-architecture is unsupported",
                    ctx.target_name()
                ),
            })
            .with_url(MULTI_URL);
        }
        let update = cv.update_in_progress();
        if let Some(update) = update.filter(|_| ctx.reasks_running_update) {
            return Finding::pass(format!(
                "{} is the update in progress{}: asking for it again changes nothing",
                update.version,
                progress(conditions)
            ));
        }
        if cv.installing() {
            let install = &cv.status.history[0];
            return Finding::fail(format!(
                "the cluster is still being installed ({}, started {} ago): an update can start once the install has completed",
                install.version,
                since(install.started_time, ctx.now)
            ))
            .with_url(URL);
        }
        // oc's guards, each with its name: all of them are said, and each
        // must be accepted.
        let mut guards = Vec::new();
        let mut names = Vec::new();
        // oc counts a Failing that is not False, Unknown too: the CVO
        // could not say the cluster reached its desired state.
        if let Some(failing) = condition(conditions, "Failing").filter(|c| c.status != "False") {
            let state = if failing.status == "True" {
                "Failing".to_owned()
            } else {
                format!("Failing={}", failing.status)
            };
            guards.push(format!(
                "the ClusterVersion is {state} for {}: {}",
                since(failing.last_transition_time, ctx.now),
                excerpt(
                    failing.message.as_deref().or(failing.reason.as_deref()),
                    EXCERPT
                )
            ));
            names.push(risks::FAILING);
        }
        if let Some(invalid) = condition(conditions, "Invalid").filter(|c| c.status == "True") {
            guards.push(format!(
                "the ClusterVersion is Invalid: {}; correct it before asking for an update",
                excerpt(
                    invalid.message.as_deref().or(invalid.reason.as_deref()),
                    EXCERPT
                )
            ));
            names.push(risks::INVALID);
        }
        let progressing = condition(conditions, "Progressing").filter(|c| c.status == "True");
        match (update, progressing) {
            (Some(update), _) => {
                let updating_to = Version::parse(&update.version);
                let leaves_its_minor = match (&updating_to, &ctx.target_version) {
                    (Some(from), Some(to)) => from.line() != to.line(),
                    _ => true,
                };
                guards.push(format!(
                    "an update to {} is in progress{}, since {}: {} would replace it before it completes; oc refuses a new target until then (\"the cluster is already upgrading\"). Let it complete, or accept Progressing to leave a stuck update for a fixed release",
                    update.version,
                    progress(conditions),
                    since(update.started_time, ctx.now),
                    ctx.target_name()
                ));
                names.push(risks::PROGRESSING);
                if leaves_its_minor {
                    names.push(risks::CLUSTER_VERSION_UPDATING);
                }
            }
            // Progressing with no update under way: the CVO is still
            // reconciling its release (`Working towards …`).
            (None, Some(c)) if c.message.as_deref().is_some_and(|m| !m.is_empty()) => {
                guards.push(format!(
                    "the ClusterVersion is Progressing for {}: {}; oc refuses a new target until it settles",
                    since(c.last_transition_time, ctx.now),
                    excerpt(c.message.as_deref(), EXCERPT)
                ));
                names.push(risks::PROGRESSING);
            }
            _ => {}
        }
        if !guards.is_empty() {
            return Finding::fail(guards.join("; "))
                .with_url(URL)
                .with_risks(names);
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
        Finding::pass(format!(
            "the ClusterVersion is at {}, not Failing and no update in progress",
            cv.status.desired.version
        ))
    }
}

/// How far the update got, in the CVO's words (` (Working towards
/// 4.14.11: 106 of 863 done (12% complete))`), or nothing.
fn progress(conditions: &[crate::model::meta::Condition]) -> String {
    condition(conditions, "Progressing")
        .and_then(|c| c.message.as_deref())
        .filter(|m| !m.is_empty())
        .map(|m| format!(" ({})", excerpt(Some(m), EXCERPT)))
        .unwrap_or_default()
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
    #[case::invalid(json!([condition("Failing", "False", ""), condition("Invalid", "True", "spec.desiredUpdate.version: Invalid value")]), false, "4.14.3", Outcome::Fail, &["Invalid"])]
    #[case::retarget_within_the_minor(json!([condition("Failing", "False", ""), condition("Progressing", "True", "Working towards 4.14.3")]), true, "4.14.5", Outcome::Fail, &["Progressing"])]
    #[case::another_minor_mid_update(json!([condition("Failing", "False", ""), condition("Progressing", "True", "Working towards 4.14.3")]), true, "4.15.2", Outcome::Fail, &["Progressing", "ClusterVersionUpdating"])]
    #[case::a_stuck_update_retargeted(json!([condition("Failing", "True", "Cluster operator etcd is degraded"), condition("Progressing", "True", "Unable to apply 4.14.3")]), true, "4.14.5", Outcome::Fail, &["Failing", "Progressing"])]
    #[case::the_update_in_progress_again(json!([condition("Failing", "True", "Cluster operator etcd is degraded"), condition("Progressing", "True", "Working towards 4.14.3")]), true, "4.14.3", Outcome::Pass, &[])]
    #[case::still_reconciling(json!([condition("Failing", "False", ""), condition("Progressing", "True", "Working towards 4.14.1: 700 of 859 done")]), false, "4.14.3", Outcome::Fail, &["Progressing"])]
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
