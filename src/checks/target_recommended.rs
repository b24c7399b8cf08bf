//! TargetRecommended: the update service recommends the target for this
//! cluster. In `availableUpdates` passes; in `conditionalUpdates` with
//! `Recommended` not True fails with the reason, message, risk names and
//! URLs; in neither warns (an explicit update the graph does not know),
//! unless it is the release the cluster runs or is updating to, which the
//! graph never offers. A recommendation the CVO could not evaluate reads as
//! oc says it: "recommendation unknown: risk evaluation failed".
//!
//! A conditional update's finding carries oc's `ConditionalUpdateRisk` and
//! the name of each risk that applies, the names `acceptRisks` takes; when
//! every applying risk is accepted, it passes, as the CVO's
//! `AllExposedRisksAccepted` does.

use std::collections::BTreeSet;

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::cluster_version::{ConditionalUpdate, Release, Risk, Status};
use crate::model::release::{ReleaseKey, Version};
use crate::model::risks;
use crate::model::text::{EXCERPT, excerpt};
use crate::view::openshift::condition;

pub struct TargetRecommended;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/understanding_updates/understanding-update-channels-release.html";

impl Check for TargetRecommended {
    fn name(&self) -> &'static str {
        "TargetRecommended"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(cv) = &ctx.view.cluster_version else {
            return Finding::error("no ClusterVersion in the cluster data");
        };
        let matches = |r: &Release| {
            (!ctx.target.image.is_empty()
                && !r.image.is_empty()
                && ReleaseKey::from_image(&r.image) == ReleaseKey::from_image(&ctx.target.image))
                || (ctx.target_version.is_some()
                    && Version::parse(&r.version) == ctx.target_version)
        };
        let name = ctx.target_name();
        if cv.status.available_updates.iter().any(matches) {
            return Finding::pass(format!(
                "{name} is a recommended update (in availableUpdates)"
            ));
        }
        if let Some(update) = cv
            .status
            .conditional_updates
            .iter()
            .find(|u| matches(&u.release))
        {
            return conditional(&name, update, &cv.status, ctx.accepted);
        }
        // The graph offers moves away from the release the cluster runs or
        // is updating to, never that release itself.
        if ctx.reasks_running_update || cv.is_desired(ctx.target) {
            return Finding::pass(format!(
                "{name} is the release the cluster runs or is updating to, which the update graph does not offer again"
            ));
        }
        // Where the graph is: the channel, and why the CVO could not read it.
        let graph = match cv.spec.channel.as_deref().filter(|c| !c.is_empty()) {
            Some(channel) => format!("the {channel} channel's update graph"),
            None => "the update graph: no channel is set, so the cluster has none".to_owned(),
        };
        let unread = condition(&cv.status.conditions, "RetrievedUpdates")
            .filter(|c| c.status == "False")
            .map(|c| {
                format!(
                    " (the cluster could not read it: RetrievedUpdates=False, {}: {})",
                    c.reason.as_deref().unwrap_or("no reason"),
                    excerpt(c.message.as_deref(), EXCERPT)
                )
            })
            .unwrap_or_default();
        if ctx.target.image.is_empty() {
            // As the CVO resolves it: a version alone names a release only
            // through the update graph.
            return Finding::fail(format!(
                "{name} is not offered in {graph}{unread}, so the cluster cannot find its release image and refuses it; give the release image to check an explicit update"
            ))
            .with_url(URL)
            // The CVO refuses it: no accepted name clears it.
            .with_risks(vec![risks::UNRESOLVABLE_TARGET]);
        }
        Finding::warn(format!(
            "{name} is not offered in {graph}{unread}: an explicit update the update service does not know"
        ))
        .with_url(URL)
    }
}

fn conditional(
    name: &str,
    update: &ConditionalUpdate,
    status: &Status,
    accepted: &BTreeSet<String>,
) -> Finding {
    let recommended = condition(&update.conditions, "Recommended");
    if let Some(c) = recommended.filter(|c| c.status == "True") {
        return Finding::pass(match c.reason.as_deref() {
            Some("AllExposedRisksAccepted") => format!(
                "{name} is a conditional update whose risks that apply to this cluster are accepted (Recommended=True, AllExposedRisksAccepted)"
            ),
            _ => format!("{name} is a conditional update whose risks do not apply to this cluster"),
        });
    }
    let (status_word, reason, message) = match recommended {
        Some(c) => (
            c.status.as_str(),
            c.reason.as_deref().unwrap_or("no reason"),
            c.message.as_deref().unwrap_or("no message"),
        ),
        None => (
            "Unknown",
            "NotEvaluated",
            "the risks have not been evaluated",
        ),
    };
    let all = update.risks(status);
    let applying = applying(&all, message);
    let names: Vec<String> = applying.iter().map(|r| r.name.clone()).collect();
    // As the CVO's AllExposedRisksAccepted: every risk that applies is
    // accepted for this update.
    if !names.is_empty() && names.iter().all(|n| accepted.contains(n)) {
        return Finding::pass(format!(
            "{name} is a conditional update whose every risk that applies is accepted (AllExposedRisksAccepted): {}",
            names.join(", ")
        ));
    }
    let described: Vec<String> = applying
        .iter()
        .map(|r| format!("{} ({})", r.name, r.url))
        .collect();
    let first = applying.first().map(|r| r.url.clone());
    // oc's words for a recommendation the CVO could not make.
    let verdict = match (status_word, reason) {
        ("Unknown", "EvaluationFailed") => {
            ": recommendation unknown: risk evaluation failed".to_owned()
        }
        ("Unknown", reason) => format!(": recommendation unknown ({reason})"),
        (status, reason) => format!(" is not recommended (Recommended={status}, {reason})"),
    };
    let mut finding = Finding::fail(format!(
        "{name}{verdict}: {}; risks: {}",
        message.split_whitespace().collect::<Vec<_>>().join(" "),
        if described.is_empty() {
            "none named".to_owned()
        } else {
            described.join(", ")
        }
    ))
    .with_risks([risks::CONDITIONAL_UPDATE_RISK])
    .with_risks(names);
    finding.url = first
        .filter(|u| !u.is_empty())
        .or_else(|| Some(URL.to_owned()));
    finding
}

/// The risks of a conditional update that apply to this cluster: where
/// the CVO evaluated them (an `Applies` condition), those that match or
/// could not be evaluated; otherwise those the `Recommended` message names,
/// and all of them when it names none.
fn applying<'a>(risks: &[&'a Risk], message: &str) -> Vec<&'a Risk> {
    if risks
        .iter()
        .any(|r| condition(&r.conditions, "Applies").is_some())
    {
        return risks
            .iter()
            .copied()
            .filter(|r| condition(&r.conditions, "Applies").is_none_or(|c| c.status != "False"))
            .collect();
    }
    let named: Vec<&Risk> = risks
        .iter()
        .copied()
        .filter(|r| {
            (!r.url.is_empty() && message.contains(&r.url))
                || (!r.message.trim().is_empty() && message.contains(r.message.trim()))
        })
        .collect();
    if named.is_empty() {
        risks.to_vec()
    } else {
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, cluster_version};
    use crate::model::{Outcome, Target};
    use rstest::rstest;
    use serde_json::json;

    fn graph() -> serde_json::Value {
        let mut cv = cluster_version("4.15.3");
        cv["spec"] = json!({"channel": "stable-4.16"});
        cv["status"]["availableUpdates"] =
            json!([{"version": "4.15.10", "image": "quay.io/r@sha256:aa"}]);
        cv["status"]["conditionalUpdates"] = json!([
            {"release": {"version": "4.16.2", "image": "quay.io/r@sha256:bb"},
             "risks": [
                {"name": "AMD19hFirmware", "message": "AMD nodes may fail to boot.", "url": "https://issues.example/COS-1"},
                {"name": "HighLoad", "message": "Nodes see high load.", "url": "https://issues.example/COS-2"}],
             "conditions": [fixture::condition("Recommended", "False", "Nodes see high load. https://issues.example/COS-2")]},
            {"release": {"version": "4.16.3", "image": "quay.io/r@sha256:cc"},
             "risks": [{"name": "Old", "message": "m", "url": "https://issues.example/X"}],
             "conditions": [fixture::condition("Recommended", "True", "")]},
        ]);
        cv
    }

    #[rstest]
    #[case::available("4.15.10", Outcome::Pass, None, "recommended update")]
    #[case::risk_applies(
        "4.16.2",
        Outcome::Fail,
        None,
        "HighLoad (https://issues.example/COS-2)"
    )]
    #[case::risk_does_not_apply("4.16.3", Outcome::Pass, None, "do not apply")]
    #[case::unknown(
        "4.16.9",
        Outcome::Fail,
        Some(Severity::Warning),
        "4.16.9 is not offered in the stable-4.16 channel's update graph: an explicit update"
    )]
    fn recommendations(
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let finding = fixture::evaluate(&TargetRecommended, &fixture::view(vec![graph()]), to);
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn a_version_alone_that_the_graph_does_not_offer_blocks_as_the_cvo_refuses_it() {
        let view = fixture::view(vec![graph()]);
        let finding =
            fixture::evaluate_for(&TargetRecommended, &view, &Target::version_only("4.16.9"));
        assert_eq!((finding.outcome, finding.severity), (Outcome::Fail, None));
        assert!(
            finding.message.contains("not offered in the stable-4.16 channel's update graph, so the cluster cannot find its release image"),
            "{}",
            finding.message
        );
    }

    /// The cluster refuses a version it cannot resolve to an image, so an
    /// accept of the check's name (or any other) leaves it blocking; an
    /// image the graph does not know only warns, and is accepted as any
    /// warning is.
    #[test]
    fn an_unresolvable_version_is_not_accepted_by_the_checks_name() {
        use crate::model::standing::{Exemptions, Standing};
        let view = fixture::view(vec![graph()]);
        let target = Target::version_only("4.16.9");
        let now = fixture::NOW.parse().unwrap();
        let result =
            crate::checks::result_of(&TargetRecommended, &Context::new(&view, &target, now));
        assert_eq!(result.risks, [risks::UNRESOLVABLE_TARGET]);
        let accepting = |names: &[&str]| Exemptions {
            accepted: names.iter().map(|n| n.to_string()).collect(),
            ..Exemptions::default()
        };
        for names in [
            &["TargetRecommended"][..],
            &[risks::UNRESOLVABLE_TARGET],
            &["TargetRecommended", risks::UNRESOLVABLE_TARGET, "Invalid"],
        ] {
            assert_eq!(
                accepting(names).standing(&result),
                Standing::Blocks,
                "{names:?}"
            );
        }
        // Any other failure of the check is accepted by its name.
        let mut other = result.clone();
        other.risks.clear();
        assert_eq!(
            accepting(&["TargetRecommended"]).standing(&other),
            Standing::Accepted
        );
    }

    #[rstest]
    #[case::no_channel(json!({}), "not offered in the update graph: no channel is set, so the cluster has none")]
    #[case::graph_unread(
        json!({"channel": "test"}),
        "not offered in the test channel's update graph (the cluster could not read it: RetrievedUpdates=False, VersionNotFound: Unable to retrieve available updates"
    )]
    fn a_target_not_offered_says_where_the_graph_is_and_why_it_is_empty(
        #[case] spec: serde_json::Value,
        #[case] says: &str,
    ) {
        let mut cv = cluster_version("4.15.0-ec.2");
        cv["spec"] = spec;
        cv["status"]["conditions"] = json!([fixture::condition(
            "RetrievedUpdates",
            "False",
            "Unable to retrieve available updates: version 4.15.0-ec.2 not found"
        )]);
        cv["status"]["conditions"][0]["reason"] = json!("VersionNotFound");
        if cv["spec"].get("channel").is_none() {
            cv["status"]["conditions"] = json!([]);
        }
        let finding =
            fixture::evaluate(&TargetRecommended, &fixture::view(vec![cv]), "4.15.0-ec.3");
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::nothing_accepted(&[], Outcome::Fail)]
    #[case::the_applying_risk(&["HighLoad"], Outcome::Pass)]
    #[case::another_risk(&["AMD19hFirmware"], Outcome::Fail)]
    #[case::ocs_name_is_the_policys_to_weigh(&["ConditionalUpdateRisk"], Outcome::Fail)]
    fn every_applying_risk_accepted_passes_as_all_exposed_risks_accepted(
        #[case] accepted: &[&str],
        #[case] outcome: Outcome,
    ) {
        let view = fixture::view(vec![graph()]);
        let finding = fixture::evaluate_accepting(&TargetRecommended, &view, "4.16.2", accepted);
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        if outcome == Outcome::Pass {
            assert_eq!(
                finding.message,
                "4.16.2 is a conditional update whose every risk that applies is accepted (AllExposedRisksAccepted): HighLoad"
            );
        } else {
            assert_eq!(finding.risks, ["ConditionalUpdateRisk", "HighLoad"]);
        }
    }

    /// The CVO's format since it handles `acceptRisks`: risks listed once in
    /// `status.conditionalUpdateRisks`, each with an `Applies` condition,
    /// and named by each update's `riskNames`.
    fn graph_with_evaluated_risks(recommended: serde_json::Value) -> serde_json::Value {
        let applies =
            |status: &str| json!([{"type": "Applies", "status": status, "reason": "Match"}]);
        let mut cv = cluster_version("5.0.0-ec.2");
        cv["status"]["conditionalUpdateRisks"] = json!([
            {"name": "SyntheticRiskA", "message": "A always applies", "url": "https://docs.example/a", "conditions": applies("True")},
            {"name": "SyntheticRiskB", "message": "B never does", "url": "https://docs.example/b", "conditions": applies("False")},
            {"name": "TestAlert", "message": "Test alert for updates.", "url": "https://docs.example/alert", "conditions": applies("Unknown")},
        ]);
        cv["status"]["conditionalUpdates"] = json!([
            {"release": {"version": "5.0.0-ec.5", "image": "quay.io/r@sha256:e5"},
             "riskNames": ["SyntheticRiskA", "SyntheticRiskB", "TestAlert"],
             "conditions": [recommended]}]);
        cv
    }

    #[test]
    fn risks_the_cvo_evaluated_apply_by_their_applies_condition() {
        let cv = graph_with_evaluated_risks(json!({"type": "Recommended", "status": "False",
            "reason": "MultipleReasons", "message": "A always applies https://docs.example/a"}));
        let finding = fixture::evaluate(&TargetRecommended, &fixture::view(vec![cv]), "5.0.0-ec.5");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        // B does not apply; the alert could not be evaluated, so it counts.
        assert_eq!(
            finding.risks,
            ["ConditionalUpdateRisk", "SyntheticRiskA", "TestAlert"]
        );
        assert_eq!(finding.url.as_deref(), Some("https://docs.example/a"));
    }

    #[test]
    fn the_cvos_all_exposed_risks_accepted_passes_and_says_so() {
        let cv = graph_with_evaluated_risks(json!({"type": "Recommended", "status": "True",
            "reason": "AllExposedRisksAccepted",
            "message": "The update is recommended, because either risk does not apply to this cluster or it is accepted by cluster admins."}));
        let finding = fixture::evaluate(&TargetRecommended, &fixture::view(vec![cv]), "5.0.0-ec.5");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        assert!(
            finding.message.contains("AllExposedRisksAccepted"),
            "{}",
            finding.message
        );
    }

    #[test]
    fn a_recommendation_the_cvo_could_not_evaluate_reads_as_oc_says_it() {
        let cv = graph_with_evaluated_risks(json!({"type": "Recommended", "status": "Unknown",
            "reason": "EvaluationFailed", "message": "Could not evaluate exposure to update risk TestAlert"}));
        let finding = fixture::evaluate(&TargetRecommended, &fixture::view(vec![cv]), "5.0.0-ec.5");
        assert_eq!((finding.outcome, finding.severity), (Outcome::Fail, None));
        assert!(
            finding.message.starts_with(
                "5.0.0-ec.5: recommendation unknown: risk evaluation failed: Could not evaluate exposure"
            ),
            "{}",
            finding.message
        );
    }

    /// The graph offers moves away from `status.desired`, never it:
    /// `4.14.1-all-recommended` asked for the 4.14.1 it is updating to.
    #[test]
    fn the_release_the_cluster_runs_or_updates_to_is_not_said_to_be_unoffered() {
        let mut cv = fixture::updating("4.14.0", "4.14.1");
        cv["spec"] = json!({"channel": "candidate-4.14"});
        let view = fixture::view(vec![cv]);
        let finding = fixture::evaluate(&TargetRecommended, &view, "4.14.1");
        assert_eq!(finding.outcome, Outcome::Pass, "{}", finding.message);
        let other = fixture::evaluate(&TargetRecommended, &view, "4.14.2");
        assert_eq!(
            (other.outcome, other.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            other.message
        );
    }

    #[test]
    fn only_the_risks_that_apply_are_named() {
        let finding =
            fixture::evaluate(&TargetRecommended, &fixture::view(vec![graph()]), "4.16.2");
        assert!(
            !finding.message.contains("AMD19hFirmware"),
            "{}",
            finding.message
        );
        assert_eq!(finding.url.as_deref(), Some("https://issues.example/COS-2"));
        assert_eq!(finding.risks, ["ConditionalUpdateRisk", "HighLoad"]);
    }

    /// No OpenShift name accepts a version the graph does not offer: the
    /// finding carries only the gate's own mark, which nothing accepts.
    #[test]
    fn a_target_the_graph_does_not_offer_carries_no_openshift_name() {
        let view = fixture::view(vec![graph()]);
        let finding =
            fixture::evaluate_for(&TargetRecommended, &view, &Target::version_only("4.16.9"));
        assert_eq!(finding.risks, [risks::UNRESOLVABLE_TARGET]);
        assert!(finding.risks.iter().all(|r| risks::is_gate_mark(r)));
        assert!(!risks::well_known(risks::UNRESOLVABLE_TARGET));
    }
}
