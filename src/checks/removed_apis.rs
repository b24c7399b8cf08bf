//! RemovedAPIsInUse: APIs that the update removes (APIRequestCount
//! `removedInRelease` after the current Kubernetes minor, up to the
//! target's) and that were called in the last 24 hours by someone other
//! than the platform's own components (`PLATFORM_CALLERS`), whose calls
//! are counted and said but need no action. The message names the
//! busiest callers. An API removed at or before the current minor is gone
//! already and its count is stale. APIs whose removal the administrator
//! has acknowledged (the admin gate `ack-...-kube-<release>-api-removals-...`)
//! are left out.

use super::admin_acks::{GATES, acknowledged};
use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::{UpdateKind, Version};
use crate::model::text::list;

pub(crate) struct RemovedApisInUse;

const URL: &str = "https://access.redhat.com/articles/6955381";

/// The Kubernetes minor version of an OpenShift release: 4.N ships 1.(N+13).
pub(crate) fn kubernetes_minor(openshift: &Version) -> Option<(u64, u64)> {
    let minor = openshift.minor.checked_add(13)?;
    (openshift.major == 4).then_some((1, minor))
}

fn parse_release(text: &str) -> Option<(u64, u64)> {
    let (major, minor) = text.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

impl Check for RemovedApisInUse {
    fn name(&self) -> &'static str {
        "RemovedAPIsInUse"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn applies_to(&self) -> &'static [UpdateKind] {
        &[UpdateKind::Minor, UpdateKind::Major]
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["APIRequestCount"]) {
            return skip;
        }
        let Some(target) = ctx.target_version.as_ref() else {
            return super::version_unknown("know which APIs it removes");
        };
        let Some(kube) = kubernetes_minor(target) else {
            return Finding::skipped(format!(
                "the Kubernetes version of OpenShift {target} is not known to this gate"
            ));
        };
        let acked = |release: &str| {
            ctx.view.config_map(GATES.0, GATES.1).is_some_and(|gates| {
                gates
                    .data
                    .keys()
                    .filter(|k| k.contains(&format!("-kube-{release}-api-removals")))
                    .any(|k| acknowledged(ctx.view, k))
            })
        };
        // What the cluster runs already has no removed API left to call.
        let floor = ctx.current.as_ref().and_then(kubernetes_minor);
        let removed_by_update: Vec<_> = ctx
            .view
            .api_request_counts
            .iter()
            .filter_map(|a| {
                let release = a.removed_in_release.as_deref()?;
                let removed = parse_release(release)?;
                (removed <= kube && floor.is_none_or(|f| removed > f) && !acked(release))
                    .then_some((a, release))
            })
            .collect();
        let platform_calls: u64 = removed_by_update
            .iter()
            .map(|(a, _)| a.platform_request_count)
            .sum();
        let mut in_use: Vec<_> = removed_by_update
            .into_iter()
            .filter(|(a, _)| a.user_request_count() > 0)
            .collect();
        in_use.sort_by(|(a, _), (b, _)| {
            b.user_request_count()
                .cmp(&a.user_request_count())
                .then(a.name.cmp(&b.name))
        });
        let (kube_major, kube_minor) = kube;
        let removed_by = match floor {
            Some((major, minor)) if (major, minor) < kube => {
                format!("after Kubernetes {major}.{minor}, up to {kube_major}.{kube_minor}")
            }
            _ => format!("by Kubernetes {kube_major}.{kube_minor}"),
        };
        let left_out = match platform_calls {
            0 => String::new(),
            n => format!(" ({n} calls by platform components, which need no action, left out)"),
        };
        if in_use.is_empty() {
            return Finding::pass(format!(
                "no API removed {removed_by} (OpenShift {}) was called in the last 24 hours{left_out}",
                target.minor_line()
            ));
        }
        let described: Vec<String> = in_use
            .iter()
            .map(|(a, release)| {
                let callers: Vec<String> = a
                    .callers
                    .iter()
                    .take(3)
                    .map(|c| format!("{} ({}) {}", c.username, c.user_agent, c.request_count))
                    .collect();
                format!(
                    "{} (removed in {release}): {} requests, by {}",
                    a.name,
                    a.user_request_count(),
                    if callers.is_empty() {
                        "unknown callers".to_owned()
                    } else {
                        callers.join(", ")
                    }
                )
            })
            .collect();
        Finding::fail(format!(
            "APIs removed {removed_by} were called in the last 24 hours: {}{left_out}",
            list(&described, 3)
        ))
        .with_items(&described, 3)
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

    fn count(name: &str, removed: &str, requests: u64) -> Value {
        called_by(
            name,
            removed,
            "system:serviceaccount:ci:deployer",
            "helm/3.12",
            requests,
        )
    }

    fn called_by(name: &str, removed: &str, user: &str, agent: &str, requests: u64) -> Value {
        json!({"kind": "APIRequestCount", "metadata": {"name": name},
               "status": {"removedInRelease": removed, "requestCount": requests,
                          "last24h": [{"byNode": [{"byUser": [
                              {"username": user, "userAgent": agent, "requestCount": requests}]}]}]}})
    }

    #[rstest]
    #[case::removed_before_the_current_minor("4.18.3", "4.19.0", vec![count("flowschemas.v1beta1.flowcontrol.apiserver.k8s.io", "1.26", 80)], Outcome::Pass,
        "no API removed after Kubernetes 1.31, up to 1.32 (OpenShift 4.19)")]
    #[case::platform_callers_left_out("4.8.40", "4.9.0", vec![
        called_by("ingresses.v1beta1.extensions", "1.22", "system:kube-controller-manager", "kube-controller-manager/v1.21.1", 30),
        called_by("ingresses.v1beta1.networking.k8s.io", "1.22", "system:serviceaccount:openshift-infra:default", "cluster-policy-controller/v0.0.0", 12)],
        Outcome::Pass, "(42 calls by platform components, which need no action, left out)")]
    #[case::a_person_among_platform_callers("4.8.40", "4.9.0", vec![
        called_by("ingresses.v1beta1.extensions", "1.22", "system:kube-controller-manager", "kube-controller-manager/v1.21.1", 30),
        count("ingresses.v1beta1.networking.k8s.io", "1.22", 5)],
        Outcome::Fail, "ingresses.v1beta1.networking.k8s.io (removed in 1.22): 5 requests, by system:serviceaccount:ci:deployer (helm/3.12) 5 (30 calls by platform components")]
    fn only_removals_of_this_update_by_people_count(
        #[case] from: &str,
        #[case] to: &str,
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut all = vec![fixture::cluster_version(from)];
        all.extend(objects);
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), to);
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    fn ack(value: &str) -> Vec<Value> {
        vec![
            json!({"kind": "ConfigMap", "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
                   "data": {"ack-4.15-kube-1.29-api-removals-in-4.16": "flowcontrol v1beta2 removed"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "admin-acks", "namespace": "openshift-config"},
                   "data": {"ack-4.15-kube-1.29-api-removals-in-4.16": value}}),
        ]
    }

    #[rstest]
    #[case::removed_and_called(vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 40)], Outcome::Fail,
        "flowschemas.v1beta2.flowcontrol.apiserver.k8s.io (removed in 1.29): 40 requests, by system:serviceaccount:ci:deployer (helm/3.12) 40")]
    #[case::removed_later(vec![count("x.v1beta1.example.io", "1.32", 40)], Outcome::Pass, "no API removed after Kubernetes 1.28, up to 1.29")]
    #[case::not_called(vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 0)], Outcome::Pass, "OpenShift 4.16")]
    #[case::acknowledged([vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 40)], ack("true")].concat(), Outcome::Pass, "no API")]
    #[case::ack_not_given([vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 40)], ack("false")].concat(), Outcome::Fail, "40 requests")]
    fn removed(#[case] objects: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut all = vec![fixture::cluster_version("4.15.3")];
        all.extend(objects);
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), "4.16.0");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
