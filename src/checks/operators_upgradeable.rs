//! ClusterOperatorsUpgradeable: neither the ClusterVersion nor any
//! ClusterOperator says `Upgradeable=False`. The CVO enforces this for minor
//! and major updates only, so does this check. (The ClusterVersion's
//! `AdminAckRequired` is AdminAcksMissing's.)
//!
//! Its finding carries the CVO's risk names: `ClusterOperatorUpgradeable-<name>`
//! for each operator, and for the ClusterVersion's own reasons
//! `ClusterVersionOverrides`, `ClusterVersionUpdating` and
//! `ResourceDeletionInProgress`; with the ClusterVersion's
//! `Upgradeable=False` also oc's `ConditionalUpdateRisk`, since
//! `oc adm upgrade recommend` makes it a risk of every minor or major
//! target. A reason the CVO has no risk name for leaves the finding to be
//! accepted by the check's name alone.
//!
//! The CVO reads `Upgradeable` when it accepts a new target, never again
//! for the update it runs: asking for the update in progress again is not
//! held by the `Upgradeable=False` that update causes (`PoolUpdating`
//! while its pools roll), which only warns.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::meta::Condition;
use crate::model::release::UpdateKind;
use crate::model::risks;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::view::kinds;
use crate::view::openshift::condition;

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
        if let Err(skip) = require(ctx.view, &[kinds::CLUSTER_OPERATOR]) {
            return skip;
        }
        // The CVO's own precondition first: its Upgradeable=False sums up
        // every reason it refuses a minor update for.
        let conditions = ctx
            .view
            .cluster_version
            .as_ref()
            .map_or(&[][..], |cv| &cv.status.conditions[..]);
        let upgradeable = condition(conditions, "Upgradeable").filter(|c| c.status == "False");
        let own = upgradeable
            .filter(|c| c.reason.as_deref() != Some("AdminAckRequired"))
            .map(|c| {
                format!(
                    "the ClusterVersion ({}: {})",
                    c.reason.as_deref().unwrap_or("no reason"),
                    excerpt(c.message.as_deref(), EXCERPT)
                )
            });
        let mut names = Vec::new();
        let operators = ctx.view.cluster_operators.iter().filter_map(|co| {
            let c =
                condition(&co.status.conditions, "Upgradeable").filter(|c| c.status == "False")?;
            names.push(risks::cluster_operator_upgradeable(&co.metadata.name));
            Some(format!(
                "{} ({}: {})",
                co.metadata.name,
                c.reason.as_deref().unwrap_or("no reason"),
                excerpt(c.message.as_deref(), EXCERPT)
            ))
        });
        let operators: Vec<String> = operators.collect();
        // The CVO's names for its own reasons; None when one has no name.
        let own_names = own
            .as_ref()
            .map(|_| cvo_names(conditions, !operators.is_empty()));
        // The CVO's ClusterOperator(s)NotUpgradeable only sums up the
        // operators, which are named one by one; so does its condition for
        // a single operator, under that operator's reason.
        let sums_up_operators = upgradeable.is_some_and(|c| {
            matches!(
                c.reason.as_deref(),
                Some("ClusterOperatorsNotUpgradeable" | "ClusterOperatorNotUpgradeable")
            ) || c
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("Cluster operator "))
        });
        let own = own.filter(|_| operators.is_empty() || !sums_up_operators);
        let blocked: Vec<String> = own.into_iter().chain(operators).collect();
        if ctx.reasks_running_update && !blocked.is_empty() {
            return Finding::warn(format!(
                "{} is the update in progress: the CVO read Upgradeable when it accepted it, and does not again; now Upgradeable=False: {}",
                ctx.target_name(),
                list(&blocked, 5)
            ))
            .with_items(&blocked, 5)
            .with_url(URL);
        }
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
            let finding = Finding::fail(format!(
                "Upgradeable=False blocks {kind}: {}",
                list(&blocked, 5)
            ))
            .with_items(&blocked, 5)
            .with_url(URL);
            match own_names {
                // A reason without a name: only the check's name accepts it all.
                Some(None) => finding,
                own_names => finding
                    .with_risks(upgradeable.map(|_| risks::CONDITIONAL_UPDATE_RISK))
                    .with_risks(names)
                    .with_risks(own_names.flatten().into_iter().flatten()),
            }
        }
    }
}

/// The CVO's risk names for the reasons of the ClusterVersion's own
/// `Upgradeable=False`: each `Upgradeable<Reason>` condition beside it (the
/// CVO keeps one per reason when there are several), else the condition
/// itself. The operators' reason is theirs to name (`operators_named`);
/// AdminAckRequired is AdminAcksMissing's. `None` when a reason has no
/// name the CVO gives.
fn cvo_names(conditions: &[Condition], operators_named: bool) -> Option<Vec<&'static str>> {
    let parts: Vec<&Condition> = conditions
        .iter()
        .filter(|c| c.type_.starts_with("Upgradeable") && c.type_ != "Upgradeable")
        .filter(|c| c.status == "False")
        .collect();
    let parts = if parts.is_empty() {
        condition(conditions, "Upgradeable").into_iter().collect()
    } else {
        parts
    };
    let mut names = Vec::new();
    for c in parts {
        let reason = c.reason.as_deref().unwrap_or("");
        let about = c.type_.strip_prefix("Upgradeable").unwrap_or("");
        let message = c.message.as_deref().unwrap_or("");
        let name = match (about, reason) {
            ("AdminAckRequired", _) | (_, "AdminAckRequired") => continue,
            ("ClusterOperators", _)
            | (_, "ClusterOperatorsNotUpgradeable" | "ClusterOperatorNotUpgradeable")
                if operators_named =>
            {
                continue;
            }
            ("", _) if operators_named && message.starts_with("Cluster operator ") => continue,
            ("ClusterVersionOverrides", _) | (_, "ClusterVersionOverridesSet") => {
                risks::CLUSTER_VERSION_OVERRIDES
            }
            ("UpgradeInProgress", _) | (_, "UpgradeInProgress") => risks::CLUSTER_VERSION_UPDATING,
            ("DeletesInProgress", _) | (_, "ResourceDeletesInProgress") => {
                risks::RESOURCE_DELETION_IN_PROGRESS
            }
            _ => return None,
        };
        names.push(name);
    }
    Some(names)
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

    /// `4.15.0-ec2-unavailable-mco-20m`: the update's own pools roll, so
    /// machine-config says `PoolUpdating`; asking for that update again is
    /// not held by it, while a new minor target still is.
    #[rstest]
    #[case::the_update_in_progress_again("4.16.2", Outcome::Fail, Some(Severity::Warning))]
    #[case::another_minor_target("4.17.1", Outcome::Fail, None)]
    fn the_update_in_progress_is_not_held_by_its_own_upgradeable_false(
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
    ) {
        let mco = json!({"kind": "ClusterOperator", "metadata": {"name": "machine-config"},
            "status": {"conditions": [{"type": "Upgradeable", "status": "False", "reason": "PoolUpdating",
                "message": "One or more machine config pools are updating, please see `oc get mcp` for further details"}]}});
        let view = fixture::view(vec![fixture::updating("4.15.9", "4.16.2"), mco]);
        let finding = fixture::evaluate(&ClusterOperatorsUpgradeable, &view, to);
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(
            finding.message.contains("machine-config (PoolUpdating"),
            "{}",
            finding.message
        );
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

    /// A ClusterVersion whose Upgradeable=False has these reasons, one
    /// `Upgradeable<Type>` condition each beside it when there are several.
    fn cluster_version(reasons: &[(&str, &str, &str)]) -> serde_json::Value {
        let mut cv = fixture::cluster_version("4.15.3");
        let mut conditions: Vec<serde_json::Value> = reasons
            .iter()
            .map(|(type_, reason, message)| {
                json!({"type": format!("Upgradeable{type_}"), "status": "False", "reason": reason, "message": message})
            })
            .collect();
        match reasons {
            [] => {}
            [(_, reason, message)] => {
                conditions = vec![json!({"type": "Upgradeable", "status": "False", "reason": reason, "message": message})];
            }
            _ => conditions.push(json!({"type": "Upgradeable", "status": "False", "reason": "MultipleReasons",
                "message": "Cluster should not be upgraded between minor or major versions for multiple reasons"})),
        }
        cv["status"]["conditions"] = json!(conditions);
        cv
    }

    const OVERRIDES: (&str, &str, &str) = (
        "ClusterVersionOverrides",
        "ClusterVersionOverridesSet",
        "Disabling ownership via cluster version overrides prevents upgrades.",
    );
    const OPERATORS: (&str, &str, &str) = (
        "ClusterOperators",
        "FeatureGates_RestrictedFeatureGates_TechPreviewNoUpgrade",
        "Cluster operator config-operator should not be upgraded between minor or major versions",
    );

    #[rstest]
    #[case::operators_only(&[], &[("storage", "False"), ("dns", "True")], &["ClusterOperatorUpgradeable-storage"])]
    #[case::two_operators(&[], &[("storage", "False"), ("dns", "False")], &["ClusterOperatorUpgradeable-storage", "ClusterOperatorUpgradeable-dns"])]
    #[case::overrides(&[OVERRIDES], &[("dns", "True")], &["ConditionalUpdateRisk", "ClusterVersionOverrides"])]
    #[case::overrides_and_an_operator(&[OVERRIDES, OPERATORS], &[("config-operator", "False")],
        &["ConditionalUpdateRisk", "ClusterOperatorUpgradeable-config-operator", "ClusterVersionOverrides"])]
    #[case::the_operators_sum_alone(&[("", "FeatureGates_RestrictedFeatureGates_TechPreviewNoUpgrade",
        "Cluster operator config-operator should not be upgraded between minor or major versions")], &[("config-operator", "False")],
        &["ConditionalUpdateRisk", "ClusterOperatorUpgradeable-config-operator"])]
    #[case::updating(&[("UpgradeInProgress", "UpgradeInProgress", "An update is already in progress")], &[("dns", "True")], &["ConditionalUpdateRisk", "ClusterVersionUpdating"])]
    #[case::a_reason_the_cvo_has_no_name_for(&[("Other", "SomethingElse", "no")], &[("storage", "False")], &[])]
    fn the_finding_carries_the_cvos_risk_names(
        #[case] reasons: &[(&str, &str, &str)],
        #[case] operators: &[(&str, &str)],
        #[case] expected: &[&str],
    ) {
        let mut objects = vec![cluster_version(reasons)];
        objects.extend(operators.iter().map(|(n, u)| operator(n, u)));
        let finding = fixture::evaluate(
            &ClusterOperatorsUpgradeable,
            &fixture::view(objects),
            "4.16.0",
        );
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert_eq!(finding.risks, expected, "{}", finding.message);
    }

    #[test]
    fn patch_updates_are_not_its_business() {
        assert!(
            !ClusterOperatorsUpgradeable
                .applies_to()
                .contains(&UpdateKind::Patch)
        );
    }

    /// 4.22 to 5.0 is a minor update: `Upgradeable=False` holds it, as
    /// the CVO's `ClusterVersionUpgradeable` precondition holds every
    /// target outside the current minor; a patch of 4.22 it does not.
    #[rstest]
    #[case::to_5_0(
        "5.0.1",
        Outcome::Fail,
        "storage (no reason: AdminAckRequired: ack it)"
    )]
    #[case::to_a_patch_of_4_22("4.22.9", Outcome::Skipped, "does not apply to a patch update")]
    fn upgradeable_false_holds_the_update_to_5_0(
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let view = fixture::view(vec![
            fixture::cluster_version("4.22.3"),
            operator("storage", "False"),
        ]);
        let target =
            crate::model::Target::image(&format!("quay.io/ocp/release:{to}"), Some(to.to_owned()));
        let ctx = crate::checks::Context::new(&view, &target, fixture::NOW.parse().unwrap());
        let result = crate::checks::result_of(&ClusterOperatorsUpgradeable, &ctx);
        assert_eq!(result.outcome, outcome, "{}", result.message);
        assert!(result.message.contains(says), "{}", result.message);
    }
}
