//! OLMOperatorsCompatible: no installed operator declares an
//! `olm.maxOpenShiftVersion` below the target's minor version, the property
//! OLM itself uses to hold a cluster back: its incompatible-operator
//! controller (operator-framework/operator-lifecycle-manager,
//! `pkg/controller/operators/openshift/helpers.go`) reads it from the
//! installed CSV's `operatorframework.io/properties` and says
//! `Upgradeable=False` on its ClusterOperator, reason
//! `IncompatibleOperatorsInstalled`, or, when it cannot read one,
//! `ErrorCheckingOperatorCompatibility`, failing closed.
//!
//! Both annotations are read (`olm.properties` too, the bundle's own);
//! OLM's copies of a CSV in other namespaces (`olm.copiedFrom`) are not
//! counted again. More than one value, an empty value, or one that is not
//! `<major>.<minor>` is an error in the operator's metadata, said as OLM's
//! error, and fails as OLM fails closed on it. A limit is compared on
//! OpenShift's one line of minors ([`Minor::at_least`]): an operator that
//! allows at most 4.22 does not allow 5.0.

use super::{Check, Context, qualified, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::{Minor, UpdateKind};
use crate::model::text::list;
use crate::view::kinds;
use crate::view::openshift::ClusterServiceVersion;

pub(crate) struct OlmOperatorsCompatible;

const URL: &str = "https://docs.openshift.com/container-platform/latest/operators/operator_sdk/osdk-working-bundle-images.html#osdk-control-compat_osdk-working-bundle-images";

/// OLM's reasons on its ClusterOperator's `Upgradeable=False`.
const INCOMPATIBLE: &str = "IncompatibleOperatorsInstalled";
const ERROR_CHECKING: &str = "ErrorCheckingOperatorCompatibility";

/// What one CSV's `olm.maxOpenShiftVersion` says.
enum Limit {
    None,
    AtMost(Minor),
    /// OLM's error, in words.
    Unreadable(String),
}

fn limit(csv: &ClusterServiceVersion) -> Limit {
    if !csv.property_errors.is_empty() {
        return Limit::Unreadable(csv.property_errors.join("; "));
    }
    match csv.max_openshift_versions.as_slice() {
        [] => Limit::None,
        [value] if value.is_empty() => {
            Limit::Unreadable("olm.maxOpenShiftVersion is empty".to_owned())
        }
        [value] => match Minor::parse_exact(value) {
            Some(max) => Limit::AtMost(max),
            None => Limit::Unreadable(format!(
                "olm.maxOpenShiftVersion {value:?} is not <major>.<minor>"
            )),
        },
        values => Limit::Unreadable(format!(
            "olm.maxOpenShiftVersion is given more than once ({})",
            values
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

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
        if let Err(skip) = require(ctx.view, &[kinds::CLUSTER_SERVICE_VERSION]) {
            return skip;
        }
        let Some(target) = &ctx.target_version else {
            return super::version_unknown("compare it with each operator's maxOpenShiftVersion");
        };
        let line = target.line();
        let mut incompatible = Vec::new();
        let mut unreadable = Vec::new();
        // Each operator found, by name, for an accept to record.
        let mut subjects = Vec::new();
        for csv in &ctx.view.cluster_service_versions {
            let who = qualified(&csv.namespace, &csv.name);
            match limit(csv) {
                Limit::None => {}
                Limit::AtMost(max) if max.at_least(line) => {}
                Limit::AtMost(max) => incompatible.push(format!("{who} (at most {max})")),
                Limit::Unreadable(why) => unreadable.push(format!("{who} ({why})")),
            }
            if incompatible.len() + unreadable.len() > subjects.len() {
                subjects.push(who);
            }
        }
        if incompatible.is_empty() && unreadable.is_empty() {
            return Finding::pass(format!(
                "all {} installed operators allow OpenShift {line}",
                ctx.view.cluster_service_versions.len(),
            ));
        }
        let mut said = Vec::new();
        if !incompatible.is_empty() {
            said.push(format!(
                "operators that do not support OpenShift {line} (OLM: {INCOMPATIBLE}): {}; update or remove them first",
                list(&incompatible, 5)
            ));
        }
        if !unreadable.is_empty() {
            said.push(format!(
                "operators whose olm.maxOpenShiftVersion OLM cannot read (OLM: {ERROR_CHECKING}, which holds the update as OLM fails closed): {}; their publisher must fix the bundle, or remove them",
                list(&unreadable, 5)
            ));
        }
        let items: Vec<String> = incompatible.into_iter().chain(unreadable).collect();
        Finding::fail(said.join("; "))
            .with_items(&items, 5)
            .with_subjects(subjects)
            .with_url(URL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// Where a CSV declares its limit.
    #[derive(Clone, Copy)]
    enum In {
        /// `operatorframework.io/properties`, as OLM writes it on an
        /// installed CSV.
        Installed,
        /// `olm.properties`, the bundle's own.
        Bundle,
    }

    fn property(max: &Value) -> Value {
        json!({"type": "olm.maxOpenShiftVersion", "value": max})
    }

    fn annotate(annotations: &mut Value, place: In, props: Vec<Value>) {
        match place {
            In::Installed => {
                annotations["operatorframework.io/properties"] =
                    json!(json!({"properties": props}).to_string());
            }
            In::Bundle => annotations["olm.properties"] = json!(Value::from(props).to_string()),
        }
    }

    fn csv_in(namespace: &str, name: &str, limits: &[(In, Vec<Value>)], copied: bool) -> Value {
        let mut annotations = json!({"alm-examples": "[]"});
        for (place, maxes) in limits {
            annotate(
                &mut annotations,
                *place,
                maxes.iter().map(property).collect(),
            );
        }
        let labels = if copied {
            json!({"olm.copiedFrom": "ops"})
        } else {
            json!({})
        };
        json!({"kind": "ClusterServiceVersion",
               "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": labels}})
    }

    fn csv(name: &str, max: Option<&str>, copied: bool) -> Value {
        let mut csv = csv_in("ops", name, &[], copied);
        if let Some(max) = max {
            annotate(
                &mut csv["metadata"]["annotations"],
                In::Bundle,
                vec![property(&json!(max))],
            );
        }
        csv
    }

    fn judge(to: &str, from: &str, csvs: Vec<Value>) -> Finding {
        let mut objects = vec![fixture::cluster_version(from)];
        objects.extend(csvs);
        fixture::evaluate(&OlmOperatorsCompatible, &fixture::view(objects), to)
    }

    #[rstest]
    #[case::no_limit(vec![csv("a.v1", None, false)], Outcome::Pass, "all 1 installed operators allow OpenShift 4.16")]
    #[case::limit_at_target(vec![csv("a.v1", Some("4.16"), false)], Outcome::Pass, "allow")]
    #[case::limit_below(vec![csv("a.v1", Some("4.15"), false)], Outcome::Fail, "operators that do not support OpenShift 4.16 (OLM: IncompatibleOperatorsInstalled): ops/a.v1 (at most 4.15)")]
    #[case::copies_ignored(vec![csv("a.v1", Some("4.15"), true)], Outcome::Pass, "all 0 installed")]
    #[case::garbage(vec![csv("a.v1", Some("soon"), false)], Outcome::Fail,
        r#"OLM: ErrorCheckingOperatorCompatibility, which holds the update as OLM fails closed): ops/a.v1 (olm.maxOpenShiftVersion "soon" is not <major>.<minor>)"#)]
    fn limits(#[case] csvs: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let finding = judge("4.16.1", "4.15.3", csvs);
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    /// OLM writes the limit of an installed CSV in
    /// `operatorframework.io/properties`; the bundle's `olm.properties`
    /// counts too, and the same value in both is one value.
    #[rstest]
    #[case::installed_only(vec![(In::Installed, vec![json!("4.22")])], Outcome::Fail, "ops/a.v1 (at most 4.22)")]
    #[case::bundle_only(vec![(In::Bundle, vec![json!("4.22")])], Outcome::Fail, "ops/a.v1 (at most 4.22)")]
    #[case::both_alike(vec![(In::Installed, vec![json!("4.22")]), (In::Bundle, vec![json!("4.22")])], Outcome::Fail, "ops/a.v1 (at most 4.22)")]
    #[case::installed_allows_5_0(vec![(In::Installed, vec![json!("5.0")])], Outcome::Pass, "all 1 installed operators allow OpenShift 5.0")]
    #[case::where_5_0_stands(vec![(In::Installed, vec![json!("4.23")])], Outcome::Pass, "allow OpenShift 5.0")]
    #[case::other_properties_only(vec![(In::Installed, vec![])], Outcome::Pass, "allow OpenShift 5.0")]
    fn the_limit_is_read_where_olm_writes_it(
        #[case] limits: Vec<(In, Vec<Value>)>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let finding = judge(
            "5.0.1",
            "4.22.3",
            vec![csv_in("ops", "a.v1", &limits, false)],
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        if outcome == Outcome::Fail {
            assert!(
                finding
                    .message
                    .contains("(OLM: IncompatibleOperatorsInstalled)"),
                "{}",
                finding.message
            );
            assert_eq!(
                finding.message.matches("a.v1").count(),
                1,
                "{}",
                finding.message
            );
        }
    }

    /// What OLM cannot read is OLM's error, said as such, and fails: OLM
    /// fails closed on it.
    #[rstest]
    #[case::two_values_in_one(vec![(In::Installed, vec![json!("4.21"), json!("4.22")])],
        r#"olm.maxOpenShiftVersion is given more than once ("4.21", "4.22")"#)]
    #[case::two_values_in_two(vec![(In::Installed, vec![json!("5.0")]), (In::Bundle, vec![json!("4.22")])],
        r#"olm.maxOpenShiftVersion is given more than once ("5.0", "4.22")"#)]
    #[case::empty(vec![(In::Installed, vec![json!("")])], "olm.maxOpenShiftVersion is empty")]
    #[case::a_patch(vec![(In::Installed, vec![json!("4.22.1")])], r#"olm.maxOpenShiftVersion "4.22.1" is not <major>.<minor>"#)]
    #[case::a_v(vec![(In::Bundle, vec![json!("v4.22")])], r#""v4.22" is not <major>.<minor>"#)]
    #[case::a_number(vec![(In::Installed, vec![json!(4.22)])],
        "operatorframework.io/properties: olm.maxOpenShiftVersion 4.22 is not a string")]
    fn what_olm_cannot_read(#[case] limits: Vec<(In, Vec<Value>)>, #[case] says: &str) {
        let finding = judge(
            "5.0.1",
            "4.22.3",
            vec![csv_in("ops", "a.v1", &limits, false)],
        );
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert!(
            finding
                .message
                .contains("(OLM: ErrorCheckingOperatorCompatibility"),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::installed(
        In::Installed,
        r#"{"properties": ["#,
        "operatorframework.io/properties: not a property list"
    )]
    #[case::bundle(In::Bundle, "{}", "olm.properties: not a property list")]
    fn an_annotation_that_is_no_property_list(
        #[case] place: In,
        #[case] text: &str,
        #[case] says: &str,
    ) {
        let mut csv = csv_in("ops", "a.v1", &[], false);
        let key = match place {
            In::Installed => "operatorframework.io/properties",
            In::Bundle => "olm.properties",
        };
        csv["metadata"]["annotations"][key] = json!(text);
        let finding = judge("5.0.1", "4.22.3", vec![csv]);
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    /// OLM copies a CSV into every namespace its operator watches; the
    /// operator is named once, by its own namespace.
    #[test]
    fn a_copied_csv_is_not_counted_twice() {
        let limit = &[(In::Installed, vec![json!("4.22")])];
        let finding = judge(
            "5.0.1",
            "4.22.3",
            vec![
                csv_in("ops", "a.v1", limit, false),
                csv_in("team-a", "a.v1", limit, true),
                csv_in("team-b", "a.v1", limit, true),
            ],
        );
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert_eq!(
            finding.message.matches("a.v1").count(),
            1,
            "{}",
            finding.message
        );
        assert!(
            finding.message.contains("ops/a.v1 (at most 4.22)"),
            "{}",
            finding.message
        );
        assert!(!finding.message.contains("team-"), "{}", finding.message);
    }

    #[test]
    fn incompatible_and_unreadable_are_both_said() {
        let finding = judge(
            "5.0.1",
            "4.22.3",
            vec![
                csv_in(
                    "ops",
                    "a.v1",
                    &[(In::Installed, vec![json!("4.22")])],
                    false,
                ),
                csv_in("ops", "b.v1", &[(In::Installed, vec![json!("")])], false),
            ],
        );
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        for says in [
            "(OLM: IncompatibleOperatorsInstalled): ops/a.v1 (at most 4.22)",
            "ErrorCheckingOperatorCompatibility, which holds the update as OLM fails closed): ops/b.v1 (olm.maxOpenShiftVersion is empty)",
        ] {
            assert!(finding.message.contains(says), "{}", finding.message);
        }
    }
}
