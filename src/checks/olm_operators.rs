//! OLMOperatorsCompatible: no installed operator declares an
//! `olm.maxOpenShiftVersion` below the target's minor version, the property
//! OLM itself uses to hold a cluster back.

use super::{Check, Context, qualified, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::{UpdateKind, Version};
use crate::model::text::list;

pub(crate) struct OlmOperatorsCompatible;

const URL: &str = "https://docs.openshift.com/container-platform/latest/operators/operator_sdk/osdk-working-bundle-images.html#osdk-control-compat_osdk-working-bundle-images";

impl Check for OlmOperatorsCompatible {
    fn name(&self) -> &'static str {
        "OLMOperatorsCompatible"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn applies_to(&self) -> &'static [UpdateKind] {
        &[UpdateKind::Minor, UpdateKind::Major]
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["ClusterServiceVersion"]) {
            return skip;
        }
        let Some(target) = &ctx.target_version else {
            return super::version_unknown("compare it with each operator's maxOpenShiftVersion");
        };
        let line = (target.major, target.minor);
        let mut incompatible = Vec::new();
        for csv in &ctx.view.cluster_service_versions {
            let Some(max) = &csv.max_openshift_version else {
                continue;
            };
            match Version::parse(max.trim_matches('"')) {
                Some(max) if (max.major, max.minor) < line => incompatible.push(format!(
                    "{} (at most {})",
                    qualified(&csv.namespace, &csv.name),
                    max.minor_line()
                )),
                Some(_) => {}
                None => incompatible.push(format!(
                    "{} (olm.maxOpenShiftVersion {max:?} is not a version)",
                    qualified(&csv.namespace, &csv.name)
                )),
            }
        }
        if incompatible.is_empty() {
            Finding::pass(format!(
                "all {} installed operators allow OpenShift {}",
                ctx.view.cluster_service_versions.len(),
                target.minor_line()
            ))
        } else {
            Finding::fail(format!(
                "operators that do not support OpenShift {}: {}; update or remove them first",
                target.minor_line(),
                list(&incompatible, 5)
            ))
            .with_items(&incompatible, 5)
            .with_url(URL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::json;

    fn csv(name: &str, max: Option<&str>, copied: bool) -> serde_json::Value {
        let mut annotations = json!({"alm-examples": "[]"});
        if let Some(max) = max {
            annotations["olm.properties"] = json!(format!(
                r#"[{{"type":"olm.maxOpenShiftVersion","value":"{max}"}}]"#
            ));
        }
        let labels = if copied {
            json!({"olm.copiedFrom": "ops"})
        } else {
            json!({})
        };
        json!({"kind": "ClusterServiceVersion",
               "metadata": {"name": name, "namespace": "ops", "annotations": annotations, "labels": labels}})
    }

    #[rstest]
    #[case::no_limit(vec![csv("a.v1", None, false)], Outcome::Pass, "all 1 installed operators allow OpenShift 4.16")]
    #[case::limit_at_target(vec![csv("a.v1", Some("4.16"), false)], Outcome::Pass, "allow")]
    #[case::limit_below(vec![csv("a.v1", Some("4.15"), false)], Outcome::Fail, "ops/a.v1 (at most 4.15)")]
    #[case::copies_ignored(vec![csv("a.v1", Some("4.15"), true)], Outcome::Pass, "all 0 installed")]
    #[case::garbage(vec![csv("a.v1", Some("soon"), false)], Outcome::Fail, "is not a version")]
    fn limits(#[case] csvs: Vec<serde_json::Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut objects = vec![fixture::cluster_version("4.15.3")];
        objects.extend(csvs);
        let finding = fixture::evaluate(&OlmOperatorsCompatible, &fixture::view(objects), "4.16.1");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
