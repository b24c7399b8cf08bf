//! RemovedAPIsInUse: APIs that the target's Kubernetes version removes
//! (APIRequestCount `removedInRelease` at or below it) and that were called
//! in the last 24 hours. The message names the busiest callers. APIs whose
//! removal the administrator has acknowledged (the admin gate
//! `ack-...-kube-<release>-api-removals-...`) are left out.

use super::admin_acks::{GATES, acknowledged};
use super::{Check, Context, Finding, list, require};
use crate::preflight::Severity;
use crate::release::{UpdateKind, Version};

pub struct RemovedApisInUse;

const URL: &str = "https://access.redhat.com/articles/6955381";

/// The Kubernetes minor version of an OpenShift release: 4.N ships 1.(N+13).
pub fn kubernetes_minor(openshift: &Version) -> Option<(u64, u64)> {
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

    fn run(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["APIRequestCount"]) {
            return skip;
        }
        let Some(target) = ctx.target.version.as_ref() else {
            return Finding::skipped("the target's version is unknown");
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
        let mut in_use: Vec<_> = ctx
            .view
            .api_request_counts
            .iter()
            .filter(|a| a.request_count > 0)
            .filter_map(|a| {
                let release = a.removed_in_release.as_deref()?;
                let removed = parse_release(release)?;
                (removed <= kube && !acked(release)).then_some((a, release))
            })
            .collect();
        in_use.sort_by(|(a, _), (b, _)| {
            b.request_count
                .cmp(&a.request_count)
                .then(a.name.cmp(&b.name))
        });
        let (kube_major, kube_minor) = kube;
        if in_use.is_empty() {
            return Finding::pass(format!(
                "no API removed by Kubernetes {kube_major}.{kube_minor} (OpenShift {}) was called in the last 24 hours",
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
                    a.request_count,
                    if callers.is_empty() {
                        "unknown callers".to_owned()
                    } else {
                        callers.join(", ")
                    }
                )
            })
            .collect();
        Finding::fail(format!(
            "APIs removed by Kubernetes {kube_major}.{kube_minor} were called in the last 24 hours: {}",
            list(&described, 3)
        ))
        .with_url(URL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture;
    use crate::preflight::Outcome;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn count(name: &str, removed: &str, requests: u64) -> Value {
        json!({"kind": "APIRequestCount", "metadata": {"name": name},
               "status": {"removedInRelease": removed, "requestCount": requests,
                          "last24h": [{"byNode": [{"byUser": [
                              {"username": "system:serviceaccount:ci:deployer", "userAgent": "helm/3.12", "requestCount": requests}]}]}]}})
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
    #[case::removed_later(vec![count("x.v1beta1.example.io", "1.32", 40)], Outcome::Pass, "no API removed by Kubernetes 1.29")]
    #[case::not_called(vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 0)], Outcome::Pass, "OpenShift 4.16")]
    #[case::acknowledged([vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 40)], ack("true")].concat(), Outcome::Pass, "no API")]
    #[case::ack_not_given([vec![count("flowschemas.v1beta2.flowcontrol.apiserver.k8s.io", "1.29", 40)], ack("false")].concat(), Outcome::Fail, "40 requests")]
    fn removed(#[case] objects: Vec<Value>, #[case] outcome: Outcome, #[case] says: &str) {
        let mut all = vec![fixture::cluster_version("4.15.3")];
        all.extend(objects);
        let finding = fixture::run(&RemovedApisInUse, &fixture::view(all), "4.16.0");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
