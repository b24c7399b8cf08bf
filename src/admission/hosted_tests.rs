//! The decision on HostedCluster and NodePool writes, through the real
//! parser: one decision, two kinds of cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::ports::{HostedLookup, Lookup, ResultLookup};
use super::*;
use crate::model::UpdatePreflight;
use crate::model::hosted::{HostedCluster, HostedName, NodePool};
use crate::model::release::ReleaseKey;

const CURRENT: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4210";
const PATCH: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4215";
const MINOR: &str = "quay.io/openshift-release-dev/ocp-release@sha256:4220";

fn now() -> Timestamp {
    "2026-12-04T12:00:00Z".parse().unwrap()
}

fn hosted_cluster(release: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
        "metadata": {"name": "prod", "namespace": "clusters", "uid": "hc-1", "generation": 4},
        "spec": {"release": {"image": release}, "channel": "stable-4.22"},
        "status": {"version": {
            "desired": {"version": "4.21.0", "image": CURRENT},
            "history": [{"state": "Completed", "version": "4.21.0", "image": CURRENT}],
            "availableUpdates": [
                {"version": "4.21.5", "image": PATCH},
                {"version": "4.22.0", "image": MINOR}
            ]
        }}
    })
}

fn nodepool(release: &str) -> Value {
    json!({
        "apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
        "metadata": {"name": "workers", "namespace": "clusters", "uid": "np-1"},
        "spec": {"clusterName": "prod", "release": {"image": release}, "replicas": 3},
        "status": {"version": "4.18.3"}
    })
}

fn review(resource: &str, kind: &str, old: Value, new: Value, user: &str) -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "uid-h", "operation": "UPDATE", "name": new["metadata"]["name"],
            "namespace": "clusters",
            "kind": {"group": "hypershift.openshift.io", "version": "v1beta1", "kind": kind},
            "resource": {"group": "hypershift.openshift.io", "version": "v1beta1", "resource": resource},
            "userInfo": {"username": user},
            "object": new, "oldObject": old
        }
    })
    .to_string()
    .into_bytes()
}

fn result(image: &str, checks: Value) -> UpdatePreflight {
    let failed = checks
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["outcome"] != "Pass");
    serde_json::from_value(json!({
        "apiVersion": "preflight.dev/v1alpha1", "kind": "UpdatePreflight",
        "metadata": {"name": ReleaseKey::from_image(image).object_name(), "generation": 1},
        "spec": {"image": image},
        "status": {"phase": if failed { "Failed" } else { "Passed" },
                   "completionTime": "2026-12-04T11:30:00Z", "observedGeneration": 1,
                   "results": checks}
    }))
    .unwrap()
}

fn check(name: &str, outcome: &str, message: &str) -> Value {
    json!({"name": name, "severity": "Blocking", "outcome": outcome, "message": message})
}

/// One hosted cluster's results, by release; it runs the targets its
/// update graph offers, as the runtime does, and takes no run requests.
#[derive(Default)]
struct Results(BTreeMap<ReleaseKey, Arc<UpdatePreflight>>);

impl ResultLookup for Results {
    fn checks_itself(&self, key: &ReleaseKey) -> bool {
        [CURRENT, PATCH, MINOR]
            .iter()
            .any(|image| ReleaseKey::from_image(image) == *key)
    }
    fn takes_run_requests(&self) -> bool {
        false
    }
    fn lookup(&self, key: &ReleaseKey) -> Lookup {
        Lookup {
            result: self.0.get(key).cloned(),
            trusted: true,
            expires: true,
            status_writer: None,
        }
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn runs_checks(&self) -> bool {
        true
    }
}

/// A management cluster's gate: its HostedCluster `clusters/prod` and
/// that one's results.
struct Management {
    cluster: Option<Arc<HostedCluster>>,
    results: Arc<Results>,
}

impl HostedLookup for Management {
    fn cluster(&self, name: &HostedName) -> Option<Arc<HostedCluster>> {
        self.cluster.clone().filter(|c| c.hosted_name() == *name)
    }
    fn results(&self, _: &HostedName) -> Arc<dyn ResultLookup> {
        self.results.clone()
    }
}

impl ResultLookup for Management {
    fn lookup(&self, _: &ReleaseKey) -> Lookup {
        Lookup::default()
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn runs_checks(&self) -> bool {
        true
    }
    fn hosted(&self) -> Option<&dyn HostedLookup> {
        Some(self)
    }
}

fn management(cluster: Value) -> Management {
    let mut results = Results::default();
    for (image, checks) in [
        (
            PATCH,
            json!([check("ClusterOperatorsHealthy", "Pass", "all available")]),
        ),
        (
            MINOR,
            json!([
                check("ClusterOperatorsHealthy", "Pass", "all available"),
                check(
                    "HostedClusterUpgradeable",
                    "Fail",
                    "HostedCluster clusters/prod is not upgradeable to another minor (AdminAckRequired)"
                ),
            ]),
        ),
        (
            CURRENT,
            json!([check(
                "PodDisruptionBudgetsAllowDrain",
                "Fail",
                "pdb/db allows no disruption"
            )]),
        ),
    ] {
        results.0.insert(
            ReleaseKey::from_image(image),
            Arc::new(result(image, checks)),
        );
    }
    Management {
        cluster: Some(Arc::new(serde_json::from_value(cluster).unwrap())),
        results: Arc::new(results),
    }
}

fn decide_cluster(body: &[u8], source: &dyn ResultLookup) -> Decision {
    let request = review::parse::<HostedCluster>(body).unwrap();
    decide(&request, source, &Policy::default(), now())
}

fn decide_pool(body: &[u8], source: &dyn ResultLookup) -> Decision {
    let request = review::parse::<NodePool>(body).unwrap();
    decide(&request, source, &Policy::default(), now())
}

fn final_verdict(decision: Decision) -> Verdict {
    decision.into_final().expect("no authorization needed")
}

#[test]
fn a_cleared_release_is_allowed_and_a_failing_one_denied_with_commands_for_the_hosted_cluster() {
    let gate = management(hosted_cluster(CURRENT));
    let allowed = final_verdict(decide_cluster(
        &review(
            "hostedclusters",
            "HostedCluster",
            hosted_cluster(CURRENT),
            hosted_cluster(PATCH),
            "alice",
        ),
        &gate,
    ));
    assert!(allowed.allowed, "{}", allowed.message);
    assert_eq!(allowed.reason, Reason::Passed);
    assert_eq!(allowed.target.as_deref(), Some("4.21.5"));

    let denied = final_verdict(decide_cluster(
        &review(
            "hostedclusters",
            "HostedCluster",
            hosted_cluster(CURRENT),
            hosted_cluster(MINOR),
            "alice",
        ),
        &gate,
    ));
    assert!(!denied.allowed);
    assert_eq!(denied.reason, Reason::Failed);
    assert!(
        denied
            .message
            .contains("not upgradeable to another minor (AdminAckRequired)"),
        "{}",
        denied.message
    );
    assert!(
        denied
            .message
            .contains("oc annotate --overwrite hostedcluster prod -n clusters"),
        "{}",
        denied.message
    );
    assert!(
        !denied.message.contains("clusterversion"),
        "{}",
        denied.message
    );
    assert!(
        !denied.message.contains("oc adm upgrade"),
        "{}",
        denied.message
    );
}

#[test]
fn force_upgrade_to_needs_the_override_verb_and_a_reason_and_forces_upgradeable_alone() {
    let gate = management(hosted_cluster(CURRENT));
    let mut forced = hosted_cluster(MINOR);
    forced["metadata"]["annotations"] = json!({
        "hypershift.openshift.io/force-upgrade-to": MINOR,
        "preflight.dev/override-reason": "CHG-981: the ack is given in the change",
        "preflight.dev/claimed-by": "alice"
    });
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        forced.clone(),
        "alice",
    );
    let Decision::NeedsAuthorization(pending) = decide_cluster(&body, &gate) else {
        panic!("force-upgrade-to asks for the override verb");
    };
    assert_eq!(pending.verb, ports::Verb::Override);
    let granted = pending.clone().resolve(Authorization::Allowed);
    assert!(granted.allowed, "{}", granted.message);
    assert_eq!(
        granted
            .audit
            .get(audit::FORCE_UPGRADE_TO)
            .map(String::as_str),
        Some(MINOR)
    );
    assert!(granted.effects.iter().any(|e| matches!(
        e,
        Effect::Event(note) if note.reason == "PreflightForceUpgradeTo"
            && note.message.contains("CHG-981")
    )));
    let refused = pending.resolve(Authorization::Denied);
    assert!(!refused.allowed);
    assert!(
        refused
            .message
            .contains("may not set hypershift.openshift.io/force-upgrade-to"),
        "{}",
        refused.message
    );

    // Without a reason, refused at once.
    forced["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("preflight.dev/override-reason");
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        forced,
        "alice",
    );
    let verdict = final_verdict(decide_cluster(&body, &gate));
    assert!(!verdict.allowed);
    assert!(
        verdict.message.contains("an override gives its reason"),
        "{}",
        verdict.message
    );
}

#[test]
fn force_upgrade_to_forces_past_nothing_but_upgradeable() {
    let mut gate = management(hosted_cluster(CURRENT));
    let results = Arc::get_mut(&mut gate.results).unwrap();
    results.0.insert(
        ReleaseKey::from_image(MINOR),
        Arc::new(result(
            MINOR,
            json!([
                check("ClusterOperatorsHealthy", "Fail", "etcd is degraded"),
                check("HostedClusterUpgradeable", "Fail", "AdminAckRequired"),
            ]),
        )),
    );
    let mut forced = hosted_cluster(MINOR);
    forced["metadata"]["annotations"] = json!({
        "hypershift.openshift.io/force-upgrade-to": MINOR,
        "preflight.dev/override-reason": "CHG-981",
        "preflight.dev/claimed-by": "alice"
    });
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        forced,
        "alice",
    );
    let verdict = match decide_cluster(&body, &gate) {
        Decision::Final(v) => v,
        Decision::NeedsAuthorization(p) => p.resolve(Authorization::Allowed),
    };
    assert!(!verdict.allowed);
    assert!(
        verdict.message.contains("etcd is degraded"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_gate_that_serves_no_hosted_clusters_denies_their_writes_saying_so() {
    let gate = Results::default();
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        hosted_cluster(PATCH),
        "alice",
    );
    let verdict = final_verdict(decide_cluster(&body, &gate));
    assert!(!verdict.allowed);
    assert_eq!(verdict.reason, Reason::NotServed);
    assert!(
        verdict.message.contains("--hosted-control-planes"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_nodepool_past_its_control_plane_or_while_it_updates_is_refused_by_hypershifts_rules() {
    let gate = management(hosted_cluster(CURRENT));
    let body = review(
        "nodepools",
        "NodePool",
        nodepool(CURRENT),
        nodepool(PATCH),
        "alice",
    );
    let verdict = final_verdict(decide_pool(&body, &gate));
    assert!(!verdict.allowed);
    assert_eq!(verdict.reason, Reason::HypershiftRefuses);
    assert!(
        verdict
            .message
            .contains("NodePool version 4.21.5 is newer than its HostedCluster's 4.21.0"),
        "{}",
        verdict.message
    );

    let mut updating = hosted_cluster(PATCH);
    updating["status"]["version"]["history"] = json!([
        {"state": "Partial", "version": "4.21.5", "image": PATCH},
        {"state": "Completed", "version": "4.21.0", "image": CURRENT}
    ]);
    let gate = management(updating);
    let body = review(
        "nodepools",
        "NodePool",
        nodepool(CURRENT),
        nodepool(CURRENT).clone(),
        "alice",
    );
    // No change of release: nothing to judge.
    assert!(final_verdict(decide_pool(&body, &gate)).allowed);
    let mut old = nodepool(CURRENT);
    old["spec"]["release"]["image"] =
        json!("quay.io/openshift-release-dev/ocp-release@sha256:4183");
    let body = review("nodepools", "NodePool", old, nodepool(CURRENT), "alice");
    let verdict = final_verdict(decide_pool(&body, &gate));
    assert_eq!(
        verdict.reason,
        Reason::HypershiftRefuses,
        "{}",
        verdict.message
    );
    assert!(
        verdict
            .message
            .contains("a NodePool update waits until it completes")
    );
}

#[test]
fn a_nodepool_to_its_control_planes_release_is_judged_by_the_hosted_clusters_results() {
    let gate = management(hosted_cluster(CURRENT));
    let mut old = nodepool(CURRENT);
    old["spec"]["release"]["image"] =
        json!("quay.io/openshift-release-dev/ocp-release@sha256:4183");
    let body = review("nodepools", "NodePool", old, nodepool(CURRENT), "alice");
    let verdict = final_verdict(decide_pool(&body, &gate));
    assert!(!verdict.allowed);
    assert_eq!(verdict.reason, Reason::Failed);
    assert!(
        verdict.message.contains("pdb/db allows no disruption"),
        "{}",
        verdict.message
    );
    assert!(
        verdict.message.contains("nodepool workers -n clusters"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_nodepool_of_a_hosted_cluster_the_gate_has_not_seen_is_denied_until_it_has() {
    let mut gate = management(hosted_cluster(CURRENT));
    gate.cluster = None;
    let body = review(
        "nodepools",
        "NodePool",
        nodepool(PATCH),
        nodepool(CURRENT),
        "alice",
    );
    let verdict = final_verdict(decide_pool(&body, &gate));
    assert_eq!(verdict.reason, Reason::NotServed);
    assert!(
        verdict
            .message
            .contains("has not seen HostedCluster clusters/prod")
    );
}

#[test]
fn a_release_by_tag_is_denied_with_the_patch_that_names_its_digest() {
    let gate = management(hosted_cluster(CURRENT));
    let tagged = "quay.io/openshift-release-dev/ocp-release:4.21.5-x86_64";
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        hosted_cluster(tagged),
        "alice",
    );
    let verdict = final_verdict(decide_cluster(&body, &gate));
    assert_eq!(verdict.reason, Reason::NotADigest);
    assert!(
        verdict.message.contains(
            r#"oc patch hostedcluster prod -n clusters --type merge -p '{"spec":{"release":{"image":"quay.io/openshift-release-dev/ocp-release@sha256:<digest>"}}}'"#
        ),
        "{}",
        verdict.message
    );
}

#[test]
fn a_new_update_service_or_control_plane_release_is_decided_too() {
    let gate = management(hosted_cluster(CURRENT));
    let mut served = hosted_cluster(CURRENT);
    served["spec"]["updateService"] = json!("https://graph.example/api/upgrades_info");
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        served,
        "alice",
    );
    let Decision::NeedsAuthorization(pending) = decide_cluster(&body, &gate) else {
        panic!("changing the update service needs the override verb");
    };
    let refused = pending.resolve(Authorization::Denied);
    assert!(
        refused.message.contains("spec.updateService"),
        "{}",
        refused.message
    );

    let mut split = hosted_cluster(CURRENT);
    split["spec"]["controlPlaneRelease"] = json!({"image": MINOR});
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        split,
        "alice",
    );
    let verdict = final_verdict(decide_cluster(&body, &gate));
    assert!(!verdict.allowed);
    assert!(
        verdict.message.contains("AdminAckRequired"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_release_outside_the_hosted_clusters_graph_says_how_it_gets_checked() {
    let gate = management(hosted_cluster(CURRENT));
    let elsewhere = "quay.io/openshift-release-dev/ocp-release@sha256:4230";
    let body = review(
        "hostedclusters",
        "HostedCluster",
        hosted_cluster(CURRENT),
        hosted_cluster(elsewhere),
        "alice",
    );
    let verdict = final_verdict(decide_cluster(&body, &gate));
    assert_eq!(verdict.reason, Reason::Pending);
    assert!(
        verdict
            .message
            .contains("Set the HostedCluster's spec.channel to one that offers the release"),
        "{}",
        verdict.message
    );
    assert!(
        !verdict.message.contains("UpdatePreflight"),
        "{}",
        verdict.message
    );
}

#[test]
fn a_nodepools_claims_alone_are_decided_without_its_hosted_cluster() {
    let mut gate = management(hosted_cluster(CURRENT));
    gate.cluster = None;
    let mut claimed = nodepool(CURRENT);
    claimed["metadata"]["annotations"] = json!({
        "preflight.dev/window-end": "2026-12-05T02:00:00Z",
        "preflight.dev/claimed-by": "alice"
    });
    let body = review("nodepools", "NodePool", nodepool(CURRENT), claimed, "alice");
    let Decision::NeedsAuthorization(pending) = decide_pool(&body, &gate) else {
        panic!("a claim's write asks for its verb");
    };
    assert!(pending.resolve(Authorization::Allowed).allowed);
}
