//! Test fixtures: cluster views built from JSON objects, and a context for
//! an update between two versions.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{Check, Context};
use crate::model::Finding;
use crate::model::Target;
use crate::view::ClusterView;

pub const NOW: &str = "2026-11-30T12:00:00Z";

/// A view of `objects`, each with its `kind`.
pub fn view(objects: Vec<Value>) -> ClusterView {
    let mut view = ClusterView::default();
    for object in objects {
        let kind = crate::view::kinds::named(object["kind"].as_str().unwrap()).unwrap();
        view.add(kind, object).unwrap();
    }
    view
}

/// A ClusterVersion at rest at `version`.
pub fn cluster_version(version: &str) -> Value {
    json!({
        "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {
            "desired": {"version": version, "image": format!("quay.io/ocp/release:{version}")},
            "history": [{"state": "Completed", "version": version}],
        }
    })
}

/// A ClusterVersion at `from`, in the middle of an update to `to`.
pub fn updating(from: &str, to: &str) -> Value {
    json!({
        "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {
            "desired": {"version": to, "image": format!("quay.io/ocp/release:{to}")},
            "history": [{"state": "Partial", "version": to, "startedTime": "2026-11-30T11:00:00Z"},
                        {"state": "Completed", "version": from}],
            "conditions": [condition("Progressing", "True",
                &format!("Working towards {to}: 412 of 863 done (47% complete)"))],
        }
    })
}

/// Runs `check` on `view` for an update to `to`.
pub fn evaluate(check: &dyn Check, view: &ClusterView, to: &str) -> Finding {
    let target = Target::image(&format!("quay.io/ocp/release:{to}"), Some(to.to_owned()));
    evaluate_for(check, view, &target)
}

/// Runs `check` on `view` for an update to `target`.
pub(crate) fn evaluate_for(check: &dyn Check, view: &ClusterView, target: &Target) -> Finding {
    let now: Timestamp = NOW.parse().unwrap();
    check.evaluate(&Context::new(view, target, now))
}

/// Runs `check` on `view` for an update to `to` with `accepted` names.
pub(crate) fn evaluate_accepting(
    check: &dyn Check,
    view: &ClusterView,
    to: &str,
    accepted: &[&str],
) -> Finding {
    let target = Target::image(&format!("quay.io/ocp/release:{to}"), Some(to.to_owned()));
    let accepted: std::collections::BTreeSet<String> =
        accepted.iter().map(|s| s.to_string()).collect();
    let now: Timestamp = NOW.parse().unwrap();
    check.evaluate(&Context::new(view, &target, now).accepting(&accepted))
}

/// The Infrastructure `cluster` of a hosted cluster (HyperShift): its
/// control plane `External`.
pub fn hosted_infrastructure() -> Value {
    json!({"kind": "Infrastructure", "metadata": {"name": "cluster"},
           "status": {"controlPlaneTopology": "External", "infrastructureTopology": "HighlyAvailable"}})
}

/// A worker of a hosted cluster, Ready, in the NodePool `pool`.
pub fn hosted_worker(name: &str, pool: &str) -> Value {
    json!({"kind": "Node",
           "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": "",
                        crate::view::NODEPOOL_LABEL: pool}},
           "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A condition.
pub fn condition(type_: &str, status: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "message": message,
           "lastTransitionTime": "2026-11-30T10:00:00Z"})
}
