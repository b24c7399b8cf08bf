//! ClusterOperatorsUpgradeable: neither the ClusterVersion nor any
//! ClusterOperator says `Upgradeable=False`. The CVO enforces this for minor
//! and major updates only, so does this check. (The ClusterVersion's
//! `AdminAckRequired` is AdminAcksMissing's.)

use super::{Check, Context, require};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::UpdateKind;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;

pub struct ClusterOperatorsUpgradeable;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/preparing_for_updates/updating-cluster-prepare.html";

impl Check for ClusterOperatorsUpgradeable {
    fn name(&self) -> &'static str {
        "ClusterOperatorsUpgradeable"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn applies_to(&self) -> &'static [UpdateKind] {
        &[UpdateKind::Minor, UpdateKind::Major]
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["ClusterOperator"]) {
            return skip;
        }
        // The CVO's own precondition first: its Upgradeable=False sums up
        // every reason it refuses a minor update for.
        let own = ctx.view.cluster_version.as_ref().and_then(|cv| {
            let c = condition(&cv.status.conditions, "Upgradeable")
                .filter(|c| c.status == "False")
                .filter(|c| c.reason.as_deref() != Some("AdminAckRequired"))?;
            Some(format!(
                "the ClusterVersion ({}: {})",
                c.reason.as_deref().unwrap_or("no reason"),
                excerpt(c.message.as_deref(), EXCERPT)
            ))
        });
        let operators = ctx.view.cluster_operators.iter().filter_map(|co| {
            let c =
                condition(&co.status.conditions, "Upgradeable").filter(|c| c.status == "False")?;
            Some(format!(
                "{} ({}: {})",
                co.metadata.name,
                c.reason.as_deref().unwrap_or("no reason"),
                excerpt(c.message.as_deref(), EXCERPT)
            ))
        });
        let operators: Vec<String> = operators.collect();
        // The CVO's ClusterOperator(s)NotUpgradeable only sums up the
        // operators, which are named one by one.
        let own = own.filter(|own| {
            operators.is_empty() || !own.starts_with("the ClusterVersion (ClusterOperator")
        });
        let blocked: Vec<String> = own.into_iter().chain(operators).collect();
        if blocked.is_empty() {
            Finding::pass(format!(
                "no ClusterOperator blocks an update to {}",
                ctx.target_name()
            ))
        } else {
            let kind = match ctx.kind {
                Some(kind) => format!("a {} update", format!("{kind:?}").to_lowercase()),
                None => "a minor or major update (the target's version is unknown)".to_owned(),
            };
            Finding::fail(format!(
                "Upgradeable=False blocks {kind}: {}",
                list(&blocked, 5)
            ))
            .with_url(URL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, condition};
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::json;

    fn operator(name: &str, upgradeable: &str) -> serde_json::Value {
        json!({"kind": "ClusterOperator", "metadata": {"name": name},
               "status": {"conditions": [condition("Upgradeable", upgradeable, "AdminAckRequired: ack it")]}})
    }

    #[rstest]
    #[case::all_upgradeable(&[("dns", "True"), ("ingress", "True")], Outcome::Pass, "no ClusterOperator blocks")]
    #[case::one_blocks(&[("dns", "True"), ("storage", "False")], Outcome::Fail, "storage (no reason: AdminAckRequired: ack it)")]
    #[case::unknown_does_not_block(&[("dns", "Unknown")], Outcome::Pass, "no ClusterOperator")]
    fn upgradeable(
        #[case] operators: &[(&str, &str)],
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut objects = vec![fixture::cluster_version("4.15.3")];
        objects.extend(operators.iter().map(|(n, u)| operator(n, u)));
        let finding = fixture::evaluate(
            &ClusterOperatorsUpgradeable,
            &fixture::view(objects),
            "4.16.0",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::its_own_reason("ClusterVersionOverridesSet", Outcome::Fail)]
    #[case::multiple("MultipleReasons", Outcome::Fail)]
    #[case::admin_acks_are_another_checks("AdminAckRequired", Outcome::Pass)]
    fn the_cluster_versions_own_upgradeable_false_blocks_a_minor_update(
        #[case] reason: &str,
        #[case] outcome: Outcome,
    ) {
        let mut cv = fixture::cluster_version("4.15.3");
        cv["status"]["conditions"] = json!([{"type": "Upgradeable", "status": "False",
            "reason": reason, "message": "Disabling ownership via cluster version overrides prevents upgrades."}]);
        let operators = operator("dns", "True");
        let view = fixture::view(vec![cv, operators]);
        let finding = fixture::evaluate(&ClusterOperatorsUpgradeable, &view, "4.16.0");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        if outcome == Outcome::Fail {
            assert!(
                finding.message.starts_with(&format!(
                    "Upgradeable=False blocks a minor update: the ClusterVersion ({reason}: Disabling ownership"
                )),
                "{}",
                finding.message
            );
        }
    }

    #[test]
    fn the_cvo_summing_up_the_operators_is_not_said_twice() {
        let mut cv = fixture::cluster_version("4.15.3");
        cv["status"]["conditions"] = json!([{"type": "Upgradeable", "status": "False",
            "reason": "ClusterOperatorsNotUpgradeable", "message": "Multiple cluster operators should not be upgraded"}]);
        let view = fixture::view(vec![cv, operator("storage", "False")]);
        let finding = fixture::evaluate(&ClusterOperatorsUpgradeable, &view, "4.16.0");
        assert_eq!(
            finding.message,
            "Upgradeable=False blocks a minor update: storage (no reason: AdminAckRequired: ack it)"
        );
    }

    #[test]
    fn patch_updates_are_not_its_business() {
        assert!(
            !ClusterOperatorsUpgradeable
                .applies_to()
                .contains(&UpdateKind::Patch)
        );
    }
}
