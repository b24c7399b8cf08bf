//! TargetRecommended: the update service recommends the target for this
//! cluster. In `availableUpdates` passes; in `conditionalUpdates` with
//! `Recommended` not True fails with the reason, message, risk names and
//! URLs; in neither warns (an explicit update the graph does not know).

use super::{Check, Context};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::cluster_version::{ConditionalUpdate, Release};
use crate::model::release::{ReleaseKey, Version};
use crate::model::text::{EXCERPT, excerpt};

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
            return conditional(&name, update);
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
            .with_url(URL);
        }
        Finding::warn(format!(
            "{name} is not offered in {graph}{unread}: an explicit update the update service does not know"
        ))
        .with_url(URL)
    }
}

fn conditional(name: &str, update: &ConditionalUpdate) -> Finding {
    let recommended = condition(&update.conditions, "Recommended");
    if recommended.is_some_and(|c| c.status == "True") {
        return Finding::pass(format!(
            "{name} is a conditional update whose risks do not apply to this cluster"
        ));
    }
    let (status, reason, message) = match recommended {
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
    // Risks the message names apply; if it names none, show them all.
    let applying: Vec<_> = update
        .risks
        .iter()
        .filter(|r| message.contains(&r.url) || message.contains(r.message.trim()))
        .collect();
    let shown = if applying.is_empty() {
        update.risks.iter().collect()
    } else {
        applying
    };
    let risks: Vec<String> = shown
        .iter()
        .map(|r| format!("{} ({})", r.name, r.url))
        .collect();
    let first = shown.first().map(|r| r.url.clone());
    let mut finding = Finding::fail(format!(
        "{name} is not recommended (Recommended={status}, {reason}): {}; risks: {}",
        message.split_whitespace().collect::<Vec<_>>().join(" "),
        if risks.is_empty() {
            "none named".to_owned()
        } else {
            risks.join(", ")
        }
    ));
    finding.url = first
        .filter(|u| !u.is_empty())
        .or_else(|| Some(URL.to_owned()));
    finding
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
    }
}
