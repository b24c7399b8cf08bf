//! AdminAcksMissing: every admin gate that applies to the current version
//! (`ack-<current minor>-...` in the `admin-gates` ConfigMap of
//! `openshift-config-managed`) has been acknowledged with `"true"` in the
//! `admin-acks` ConfigMap of `openshift-config`. The CVO holds minor
//! updates until it has (from 4.22 to 5.0 too: the gates of the current
//! minor, `ack-4.22-…`, hold it). Without the admin-gates ConfigMap, the
//! ClusterVersion's own `Upgradeable=False` with reason `AdminAckRequired`
//! is read instead; without either, nothing asks to be acknowledged, unless
//! the gate could not read the ConfigMaps of an OpenShift cluster
//! ([`from_cluster_version`]).
//!
//! Its finding carries the CVO's risk name of each missing ack,
//! `AdminAck-<gate>`, and with the ClusterVersion's `Upgradeable=False`
//! oc's `ConditionalUpdateRisk` (oc makes that condition a risk of every
//! minor or major target), as OpenShift shows them. None of them, nor the
//! check's own name, accepts it ([`crate::model::standing::acceptable`]):
//! the CVO waits for the ack itself, so the finding says how to give it.

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::meta::Condition;
use crate::model::release::UpdateKind;
use crate::model::risks;
use crate::model::text::list;
use crate::view::ClusterView;
use crate::view::kinds;
use crate::view::openshift::condition;

pub struct AdminAcksMissing;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/preparing_for_updates/updating-cluster-prepare.html#update-preparing-ack_updating-cluster-prepare";

pub(crate) const GATES: (&str, &str) = ("openshift-config-managed", "admin-gates");
pub(crate) const ACKS: (&str, &str) = ("openshift-config", "admin-acks");

/// The command that gives the acks `keys` (a JSON merge patch of
/// `admin-acks`, as OpenShift's documentation gives it).
pub(crate) fn ack_command<S: AsRef<str>>(keys: &[S]) -> String {
    let data: Vec<String> = keys
        .iter()
        .map(|k| format!("{}:\"true\"", serde_json::Value::from(k.as_ref())))
        .collect();
    format!(
        "oc -n {} patch cm {} --patch '{{\"data\":{{{}}}}}' --type=merge",
        ACKS.0,
        ACKS.1,
        data.join(",")
    )
}

/// The minor version an admin gate applies to: `ack-4.12-kube-...` → `4.12`.
pub(crate) fn gate_version(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("ack-")?;
    let version = rest.split('-').next()?;
    let (major, minor) = version.split_once('.')?;
    (major.parse::<u64>().is_ok() && minor.parse::<u64>().is_ok()).then_some(version)
}

/// Whether the administrator acknowledged `gate`.
pub(crate) fn acknowledged(view: &ClusterView, gate: &str) -> bool {
    view.config_map(ACKS.0, ACKS.1)
        .and_then(|cm| cm.data.get(gate))
        .is_some_and(|v| v.trim() == "true")
}

impl Check for AdminAcksMissing {
    fn name(&self) -> &'static str {
        crate::model::standing::ADMIN_ACKS_MISSING
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn applies_to(&self) -> &'static [UpdateKind] {
        &[UpdateKind::Minor, UpdateKind::Major]
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(gates) = ctx.view.config_map(GATES.0, GATES.1) else {
            return from_cluster_version(ctx);
        };
        let Some(current) = &ctx.current else {
            return Finding::error("the cluster's current version is unknown");
        };
        let line = current.minor_line();
        let missing: Vec<(&String, &String)> = gates
            .data
            .iter()
            .filter(|(key, _)| gate_version(key) == Some(line.as_str()))
            .filter(|(key, _)| !acknowledged(ctx.view, key))
            .collect();
        if missing.is_empty() {
            Finding::pass(format!("every admin gate for {line} is acknowledged"))
        } else {
            let described: Vec<String> = missing
                .iter()
                .map(|(key, description)| format!("{key} ({})", description.trim()))
                .collect();
            let keys: Vec<&str> = missing.iter().map(|(key, _)| key.as_str()).collect();
            Finding::fail(format!(
                "admin acks missing in {}/{}: {}; the CVO waits for them whatever is accepted, so give them: {}",
                ACKS.0,
                ACKS.1,
                list(&described, 5),
                ack_command(&keys)
            ))
            .with_items(&described, 5)
            .with_url(URL)
            .with_risks(upgradeable_false(ctx).map(|_| risks::CONDITIONAL_UPDATE_RISK))
            .with_risks(missing.iter().map(|(key, _)| risks::admin_ack(key)))
        }
    }
}

/// The ClusterVersion's `Upgradeable=False`, for any reason.
fn upgradeable_false<'a>(ctx: &Context<'a>) -> Option<&'a Condition> {
    let cv = ctx.view.cluster_version.as_ref()?;
    condition(&cv.status.conditions, "Upgradeable").filter(|c| c.status == "False")
}

/// Without the admin-gates ConfigMap: the ClusterVersion's
/// `Upgradeable=False` for `AdminAckRequired` fails. Otherwise what the
/// read says:
///
/// - ConfigMaps the gate may not list: an error where the data shows an
///   OpenShift cluster (its admin gates exist and were not read), skipped
///   where it does not (plain Kubernetes has no `openshift-config*`
///   namespaces, and no gate to acknowledge: an error there would block
///   every target for nothing);
/// - ConfigMaps read and no admin-gates among them: nothing asks to be
///   acknowledged, a pass (on OpenShift, the CVO itself says
///   `Upgradeable=False` with `UnableToAccessAdminGatesConfigMap` then,
///   which ClusterOperatorsUpgradeable reads);
/// - no ConfigMap in the data at all (a snapshot without them): a check
///   that could not look, a warning, as every check says it.
fn from_cluster_version(ctx: &Context) -> Finding {
    if let Some(c) =
        upgradeable_false(ctx).filter(|c| c.reason.as_deref() == Some("AdminAckRequired"))
    {
        return Finding::fail(format!(
            "the ClusterVersion requires an admin ack: {}; the CVO waits for it whatever is accepted, so give it (the keys are in {}/{}): {}",
            c.message
                .as_deref()
                .unwrap_or("no message")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            GATES.0,
            GATES.1,
            ack_command(&["<key>"])
        ))
        .with_url(URL)
        .with_risks([risks::CONDITIONAL_UPDATE_RISK]);
    }
    if let Some(why) = ctx.view.unreadable.get(kinds::CONFIG_MAP.name) {
        return if ctx.view.shows_openshift() {
            Finding::error(format!(
                "cannot list ConfigMap objects: {why}; on an OpenShift cluster {}/{} says which admin acks the update needs",
                GATES.0, GATES.1
            ))
        } else {
            Finding::skipped(format!(
                "cannot list ConfigMap objects ({why}), and the cluster data shows no OpenShift (no ClusterOperator, no Infrastructure): no admin gate to acknowledge"
            ))
        };
    }
    if let Err(cannot) = super::require(ctx.view, &[kinds::CONFIG_MAP]) {
        return cannot;
    }
    Finding::pass(format!(
        "no {}/{} ConfigMap: nothing asks to be acknowledged",
        GATES.0, GATES.1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, condition};
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::{Value, json};

    const GATE: &str = "ack-4.12-kube-1.26-api-removals-in-4.13";

    fn gates() -> Value {
        json!({"kind": "ConfigMap", "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
               "data": {GATE: "Kubernetes 1.26 removes APIs.", "ack-4.11-kube-1.25-api-removals-in-4.12": "old"}})
    }

    fn acks(value: &str) -> Value {
        json!({"kind": "ConfigMap", "metadata": {"name": "admin-acks", "namespace": "openshift-config"},
               "data": {GATE: value}})
    }

    #[rstest]
    #[case::missing(vec![gates()], Outcome::Fail, "ack-4.12-kube-1.26-api-removals-in-4.13 (Kubernetes 1.26 removes APIs.)")]
    #[case::given(vec![gates(), acks("true")], Outcome::Pass, "every admin gate for 4.12")]
    #[case::not_true(vec![gates(), acks("yes")], Outcome::Fail, "admin acks missing")]
    fn acks_table(#[case] objects: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut all = vec![fixture::cluster_version("4.12.16")];
        all.extend(objects);
        let finding = fixture::evaluate(&AdminAcksMissing, &fixture::view(all), "4.13.1");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
        assert!(
            !finding.message.contains("4.11-kube"),
            "{}",
            finding.message
        );
    }

    #[rstest]
    #[case::a_missing_ack(vec![gates()], false, &["AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"])]
    #[case::with_the_cvos_condition(vec![gates()], true,
        &["ConditionalUpdateRisk", "AdminAck-ack-4.12-kube-1.26-api-removals-in-4.13"])]
    #[case::the_cvos_condition_alone(vec![], true, &["ConditionalUpdateRisk"])]
    fn the_finding_carries_the_cvos_name_of_each_missing_ack(
        #[case] objects: Vec<Value>,
        #[case] cvo_says: bool,
        #[case] expected: &[&str],
    ) {
        let mut cv = fixture::cluster_version("4.12.16");
        if cvo_says {
            cv["status"]["conditions"] = json!([{"type": "Upgradeable", "status": "False",
                "reason": "AdminAckRequired", "message": "Kubernetes 1.26 removes APIs"}]);
        }
        let mut all = vec![cv];
        all.extend(objects);
        let finding = fixture::evaluate(&AdminAcksMissing, &fixture::view(all), "4.13.1");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
        assert_eq!(finding.risks, expected);
    }

    #[test]
    fn falls_back_on_the_cluster_versions_condition() {
        let mut cv = fixture::cluster_version("4.12.16");
        cv["status"]["conditions"] = json!([condition(
            "Upgradeable",
            "False",
            "Kubernetes 1.26 removes APIs"
        )]);
        cv["status"]["conditions"][0]["reason"] = json!("AdminAckRequired");
        let finding = fixture::evaluate(&AdminAcksMissing, &fixture::view(vec![cv]), "4.13.1");
        assert_eq!(finding.outcome, Outcome::Fail);
        assert!(
            finding
                .message
                .contains("requires an admin ack: Kubernetes 1.26"),
            "{}",
            finding.message
        );
    }

    fn other_config_map() -> Value {
        json!({"kind": "ConfigMap", "metadata": {"name": "admin-acks", "namespace": "openshift-config"}, "data": {}})
    }

    /// Without the admin-gates ConfigMap: what the ClusterVersion says, else
    /// nothing to acknowledge; without any ConfigMap in the data, a warning
    /// that the check could not look.
    #[rstest]
    #[case::no_config_maps_read(false, vec![], Outcome::Fail, Some(Severity::Warning),
        "no ConfigMap objects in the cluster data: this check could not look")]
    #[case::no_admin_gates(false, vec![other_config_map()], Outcome::Pass, None,
        "no openshift-config-managed/admin-gates ConfigMap: nothing asks to be acknowledged")]
    #[case::the_cvo_requires_one(true, vec![], Outcome::Fail, None,
        r#"give it (the keys are in openshift-config-managed/admin-gates): oc -n openshift-config patch cm admin-acks --patch '{"data":{"<key>":"true"}}' --type=merge"#)]
    fn without_the_gates(
        #[case] cvo_says: bool,
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let mut cv = fixture::cluster_version("4.12.16");
        if cvo_says {
            cv["status"]["conditions"] = json!([{"type": "Upgradeable", "status": "False",
                "reason": "AdminAckRequired", "message": "Kubernetes 1.26 removes APIs"}]);
        }
        let mut all = vec![cv];
        all.extend(objects);
        let finding = fixture::evaluate(&AdminAcksMissing, &fixture::view(all), "4.13.1");
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[rstest]
    #[case::one(&[GATE], r#"oc -n openshift-config patch cm admin-acks --patch '{"data":{"ack-4.12-kube-1.26-api-removals-in-4.13":"true"}}' --type=merge"#)]
    #[case::two(&["ack-4.12-a", "ack-4.12-b"], r#"--patch '{"data":{"ack-4.12-a":"true","ack-4.12-b":"true"}}'"#)]
    #[case::quoted(&[r#"ack-4.12-"odd""#], r#"{"data":{"ack-4.12-\"odd\"":"true"}}"#)]
    fn the_finding_says_how_to_give_the_ack(#[case] keys: &[&str], #[case] says: &str) {
        assert!(ack_command(keys).contains(says), "{}", ack_command(keys));
    }

    #[test]
    fn a_missing_ack_says_the_command_and_no_name_accepts_it() {
        let view = fixture::view(vec![fixture::cluster_version("4.12.16"), gates()]);
        let finding = fixture::evaluate_accepting(
            &AdminAcksMissing,
            &view,
            "4.13.1",
            &["AdminAcksMissing", "ConditionalUpdateRisk"],
        );
        assert!(
            finding.message.contains(&ack_command(&[GATE])),
            "{}",
            finding.message
        );
        let mut result = crate::model::CheckResult::new(
            AdminAcksMissing.name(),
            Severity::Blocking,
            finding.outcome,
            &finding.message,
        );
        result.risks = finding.risks.clone();
        let exemptions = crate::model::standing::Exemptions {
            accepted: [AdminAcksMissing.name().to_owned()]
                .into_iter()
                .chain(finding.risks)
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            exemptions.standing(&result),
            crate::model::standing::Standing::Blocks
        );
    }

    #[rstest]
    #[case(GATE, Some("4.12"))]
    #[case("ack-x-y", None)]
    #[case("something", None)]
    fn gate_versions(#[case] key: &str, #[case] version: Option<&str>) {
        assert_eq!(gate_version(key), version);
    }

    /// The ConfigMaps the gate may not list (no RoleBinding in
    /// `openshift-config-managed`: plain Kubernetes, or RBAC withheld).
    fn unreadable(openshift: bool, cvo_says: bool) -> ClusterView {
        let mut cv = fixture::cluster_version("4.12.16");
        if cvo_says {
            cv["status"]["conditions"] = json!([{"type": "Upgradeable", "status": "False",
                "reason": "AdminAckRequired", "message": "Kubernetes 1.26 removes APIs"}]);
        }
        let mut objects = vec![cv];
        if openshift {
            objects.push(json!({"kind": "ClusterOperator", "metadata": {"name": "etcd"}}));
        }
        let mut view = fixture::view(objects);
        view.unreadable.insert(
            "ConfigMap".to_owned(),
            "configmaps \"admin-gates\" is forbidden".to_owned(),
        );
        view
    }

    #[rstest]
    #[case::openshift_errs(
        true,
        false,
        Outcome::Error,
        "cannot list ConfigMap objects: configmaps \"admin-gates\" is forbidden; on an OpenShift cluster"
    )]
    #[case::plain_kubernetes_is_skipped(
        false,
        false,
        Outcome::Skipped,
        "the cluster data shows no OpenShift (no ClusterOperator, no Infrastructure): no admin gate to acknowledge"
    )]
    #[case::the_cvo_requires_one_all_the_same(false, true, Outcome::Fail, "requires an admin ack")]
    fn configmaps_that_cannot_be_listed(
        #[case] openshift: bool,
        #[case] cvo_says: bool,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let finding = fixture::evaluate(
            &AdminAcksMissing,
            &unreadable(openshift, cvo_says),
            "4.13.1",
        );
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    const GATE_4_22: &str = "ack-4.22-kube-1.36-api-removals-in-5.0";

    /// 4.22 to 5.0 is a minor update: the gates of 4.22 hold it.
    #[rstest]
    #[case::missing(
        None,
        Outcome::Fail,
        "admin acks missing in openshift-config/admin-acks: ack-4.22-kube-1.36-api-removals-in-5.0 (Kubernetes 1.36 removes APIs.)"
    )]
    #[case::given(
        Some("true"),
        Outcome::Pass,
        "every admin gate for 4.22 is acknowledged"
    )]
    #[case::not_true(Some("false"), Outcome::Fail, "admin acks missing")]
    fn the_gates_of_4_22_hold_the_update_to_5_0(
        #[case] ack: Option<&str>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut objects = vec![
            fixture::cluster_version("4.22.5"),
            json!({"kind": "ConfigMap", "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
                   "data": {GATE_4_22: "Kubernetes 1.36 removes APIs.", GATE: "an older minor's"}}),
        ];
        if let Some(ack) = ack {
            objects.push(json!({"kind": "ConfigMap", "metadata": {"name": "admin-acks", "namespace": "openshift-config"},
                                "data": {GATE_4_22: ack}}));
        }
        let view = fixture::view(objects);
        let target =
            crate::model::Target::image("quay.io/ocp/release:5.0.1", Some("5.0.1".to_owned()));
        let ctx = Context::new(&view, &target, fixture::NOW.parse().unwrap());
        assert_eq!(ctx.kind, Some(UpdateKind::Minor));
        let result = crate::checks::result_of(&AdminAcksMissing, &ctx);
        assert_eq!(result.outcome, outcome, "{}", result.message);
        assert!(result.message.contains(says), "{}", result.message);
        assert!(!result.message.contains("4.12-kube"), "{}", result.message);
    }
}
