//! RemovedAPIsInUse: APIs that the update removes (APIRequestCount
//! `removedInRelease`, the Kubernetes release that removes the API, after
//! the current Kubernetes minor, up to the target's: 4.N ships 1.(N+13),
//! 5.M ships 1.(M+36), by [`Minor::kubernetes`]) and that were called in the last 24 hours by someone other
//! than the platform's own components (`PLATFORM_CALLERS`), whose calls
//! are counted and said but need no action. Calls the installer's
//! bootstrap API server served are counted with them: `system:admin` with a
//! kube-controller-manager or cluster-policy-controller user agent (the
//! bootstrap controllers), or any call served by a host that is none of the
//! cluster's Nodes (by name or address) while the install began within the
//! last day the counts cover (the bootstrap host is removed once the
//! install is done; later, or without Node data, every host counts).
//! A fresh cluster is not held back by its own install. The message names
//! the busiest callers. An API removed at or before the current minor is gone
//! already and its count is stale. APIs whose removal the administrator
//! has acknowledged (the admin gate `ack-...-kube-<release>-api-removals-...`)
//! are left out.

use super::admin_acks::{GATES, acknowledged};
use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::{Minor, UpdateKind, Version};
use crate::model::text::list;
use crate::view::kinds;
use crate::view::openshift::{ApiRequestCount, Caller};

pub(crate) struct RemovedApisInUse;

const URL: &str = "https://access.redhat.com/articles/6955381";

/// The Kubernetes minor an OpenShift release ships ([`Minor::kubernetes`]).
fn kubernetes_minor(openshift: &Version) -> Option<Minor> {
    openshift.line().kubernetes()
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
        if let Err(skip) = require(ctx.view, &[kinds::API_REQUEST_COUNT]) {
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
                let removed = Minor::parse(release)?;
                (removed <= kube && floor.is_none_or(|f| removed > f) && !acked(release))
                    .then_some((a, release))
            })
            .collect();
        let hosts = Hosts::of(ctx);
        let platform_calls: u64 = removed_by_update
            .iter()
            .map(|(a, _)| {
                a.platform_request_count
                    .saturating_add(hosts.bootstrap_calls(a))
            })
            .sum();
        let mut in_use: Vec<_> = removed_by_update
            .into_iter()
            .map(|(a, release)| (hosts.without_bootstrap(a), release))
            .filter(|(a, _)| a.user_request_count() > 0)
            .collect();
        in_use.sort_by(|(a, _), (b, _)| {
            b.user_request_count()
                .cmp(&a.user_request_count())
                .then(a.name.cmp(&b.name))
        });
        let removed_by = match floor {
            Some(floor) if floor < kube => format!("after Kubernetes {floor}, up to {kube}"),
            _ => format!("by Kubernetes {kube}"),
        };
        let left_out = match platform_calls {
            0 => String::new(),
            n => format!(
                " ({n} calls by platform components or the install's bootstrap, which need no action, left out)"
            ),
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
        .with_subjects(in_use.iter().map(|(a, _)| a.name.clone()))
        .with_url(URL)
    }
}

/// How far back an APIRequestCount's counts go (`last24h`), and an hour
/// for the one under way.
const COUNTED_HOURS: i64 = 25;

/// The hosts of the cluster's own API servers: every Node's name and
/// addresses; `None` when no bootstrap host can have served a counted
/// request (the install began before the counts do, or is not known) or
/// none can be told apart (no Node data).
struct Hosts<'a>(Option<std::collections::HashSet<&'a str>>);

impl<'a> Hosts<'a> {
    fn of(ctx: &Context<'a>) -> Self {
        let nodes = &ctx.view.nodes;
        let installed = ctx.view.cluster_version.as_ref().and_then(|cv| {
            cv.status
                .history
                .last()
                .and_then(|h| h.started_time)
                .or(cv.metadata.creation_timestamp)
        });
        let recent = installed.is_some_and(|t| {
            ctx.now.duration_since(t) < jiff::SignedDuration::from_hours(COUNTED_HOURS)
        });
        if !recent || !ctx.view.has(&kinds::NODE) || nodes.is_empty() {
            return Self(None);
        }
        Self(Some(
            nodes
                .iter()
                .flat_map(|n| {
                    std::iter::once(n.name())
                        .chain(n.status.addresses.iter().map(|a| a.address.as_str()))
                })
                .filter(|h| !h.is_empty())
                .collect(),
        ))
    }

    /// Whether `host` served a request for the bootstrap API server: it
    /// is named and is no Node of the cluster.
    fn bootstrap(&self, host: &str) -> bool {
        self.0
            .as_ref()
            .is_some_and(|nodes| !host.is_empty() && !nodes.contains(host))
    }

    fn bootstrap_calls_of(&self, caller: &Caller) -> u64 {
        caller
            .served_by
            .iter()
            .filter(|(host, _)| self.bootstrap(host))
            .map(|(_, n)| *n)
            .fold(0, u64::saturating_add)
    }

    /// Requests of `api`'s callers that the bootstrap API server served.
    fn bootstrap_calls(&self, api: &ApiRequestCount) -> u64 {
        api.callers
            .iter()
            .map(|c| self.bootstrap_calls_of(c))
            .fold(0, u64::saturating_add)
    }

    /// `api` with the bootstrap API server's requests counted as the
    /// platform's, and callers that only called it left out.
    fn without_bootstrap(&self, api: &ApiRequestCount) -> ApiRequestCount {
        let mut api = api.clone();
        api.platform_request_count = api
            .platform_request_count
            .saturating_add(self.bootstrap_calls(&api));
        for caller in &mut api.callers {
            caller.request_count = caller
                .request_count
                .saturating_sub(self.bootstrap_calls_of(caller));
            caller.served_by.retain(|host, _| !self.bootstrap(host));
        }
        api.callers.retain(|c| c.request_count > 0);
        api
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
        Outcome::Pass, "(42 calls by platform components or the install's bootstrap, which need no action, left out)")]
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

    fn served(user: &str, agent: &str, host: &str, requests: u64) -> Value {
        json!({"kind": "APIRequestCount", "metadata": {"name": "ingresses.v1beta1.extensions"},
               "status": {"removedInRelease": "1.22", "requestCount": requests,
                          "last24h": [{"byNode": [{"nodeName": host, "byUser": [
                              {"username": user, "userAgent": agent, "requestCount": requests}]}]}]}})
    }

    fn node(name: &str, ip: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name},
               "status": {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}})
    }

    /// A 4.8 cluster whose install began `hours` before the data's time.
    fn installed(hours: i64) -> Value {
        let mut cv = fixture::cluster_version("4.8.40");
        let started = fixture::NOW.parse::<jiff::Timestamp>().unwrap()
            - jiff::SignedDuration::from_hours(hours);
        cv["status"]["history"][0]["startedTime"] = json!(started.to_string());
        cv
    }

    /// The installer's bootstrap API server is no node of the cluster; its
    /// controllers run as `system:admin`. Their calls are the install's.
    #[rstest]
    #[case::bootstrap_controllers_as_system_admin(2, vec![
        served("system:admin", "kube-controller-manager/v1.21.1 (linux/amd64) kubernetes/4b2b6ff", "10.0.0.10", 40)],
        Outcome::Pass, "(40 calls by platform components or the install's bootstrap")]
    #[case::cluster_policy_controller_as_system_admin(200, vec![
        served("system:admin", "cluster-policy-controller/v0.0.0", "10.0.0.10", 7)],
        Outcome::Pass, "(7 calls")]
    #[case::served_by_the_bootstrap_host(2, vec![
        served("system:serviceaccount:openshift-x:installer", "cluster-bootstrap/v0.0.0", "10.0.0.99", 12)],
        Outcome::Pass, "(12 calls")]
    #[case::served_by_a_node_by_address(2, vec![
        served("system:serviceaccount:ci:deployer", "helm/3.12", "10.0.0.10", 12)],
        Outcome::Fail, "12 requests, by system:serviceaccount:ci:deployer (helm/3.12) 12")]
    #[case::served_by_a_node_by_name(2, vec![
        served("system:serviceaccount:ci:deployer", "helm/3.12", "master-0", 12)],
        Outcome::Fail, "12 requests")]
    #[case::an_unknown_host_long_after_the_install(200, vec![
        served("system:serviceaccount:ci:deployer", "helm/3.12", "10.0.0.99", 12)],
        Outcome::Fail, "12 requests")]
    #[case::system_admin_by_hand(2, vec![
        served("system:admin", "oc/4.8.0 (linux/amd64) kubernetes/abcdef", "10.0.0.10", 3)],
        Outcome::Fail, "3 requests, by system:admin (oc/4.8.0")]
    fn the_installs_own_calls_are_left_out(
        #[case] hours_since_install: i64,
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut all = vec![
            installed(hours_since_install),
            node("master-0", "10.0.0.10"),
        ];
        all.extend(objects);
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), "4.9.0");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn without_nodes_no_host_is_the_bootstraps() {
        let all = vec![
            installed(2),
            served(
                "system:serviceaccount:ci:deployer",
                "helm/3.12",
                "10.0.0.99",
                12,
            ),
        ];
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), "4.9.0");
        assert_eq!(finding.outcome, Outcome::Fail, "{}", finding.message);
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

    /// OpenShift 5.0 ships Kubernetes 1.36, the minor after 4.22's 1.35:
    /// each API's own `removedInRelease` says whether the update removes it.
    #[rstest]
    #[case::removed_in_1_36(vec![count("widgets.v1beta1.example.io", "1.36", 9)], Outcome::Fail,
        "APIs removed after Kubernetes 1.35, up to 1.36 were called in the last 24 hours: widgets.v1beta1.example.io (removed in 1.36): 9 requests")]
    #[case::removed_in_1_37(vec![count("widgets.v1beta1.example.io", "1.37", 9)], Outcome::Pass,
        "no API removed after Kubernetes 1.35, up to 1.36 (OpenShift 5.0) was called")]
    #[case::removed_in_1_35_already_gone(vec![count("widgets.v1beta1.example.io", "1.35", 9)], Outcome::Pass, "no API removed")]
    #[case::no_removal_named(vec![json!({"kind": "APIRequestCount", "metadata": {"name": "widgets.v1.example.io"},
        "status": {"requestCount": 9, "last24h": [{"byNode": [{"byUser": [
            {"username": "system:serviceaccount:ci:deployer", "userAgent": "helm/3.12", "requestCount": 9}]}]}]}})],
        Outcome::Pass, "no API removed")]
    #[case::acknowledged_for_5_0([vec![count("widgets.v1beta1.example.io", "1.36", 9)], ack_for_5_0("true")].concat(), Outcome::Pass, "no API removed")]
    #[case::ack_for_5_0_not_given([vec![count("widgets.v1beta1.example.io", "1.36", 9)], ack_for_5_0("false")].concat(), Outcome::Fail, "9 requests")]
    fn the_update_to_5_0_removes_what_kubernetes_1_36_removes(
        #[case] objects: Vec<Value>,
        #[case] outcome: Outcome,
        #[case] says: &str,
    ) {
        let mut all = vec![fixture::cluster_version("4.22.3")];
        all.extend(objects);
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), "5.0.1");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    fn ack_for_5_0(value: &str) -> Vec<Value> {
        const GATE: &str = "ack-4.22-kube-1.36-api-removals-in-5.0";
        vec![
            json!({"kind": "ConfigMap", "metadata": {"name": "admin-gates", "namespace": "openshift-config-managed"},
                   "data": {GATE: "Kubernetes 1.36 removes APIs"}}),
            json!({"kind": "ConfigMap", "metadata": {"name": "admin-acks", "namespace": "openshift-config"},
                   "data": {GATE: value}}),
        ]
    }

    #[test]
    fn an_update_to_a_major_of_unknown_kubernetes_is_skipped_saying_why() {
        let all = vec![
            fixture::cluster_version("5.3.3"),
            count("widgets.v1beta1.example.io", "1.40", 9),
        ];
        let finding = fixture::evaluate(&RemovedApisInUse, &fixture::view(all), "6.0.0");
        assert_eq!(finding.outcome, Outcome::Skipped, "{}", finding.message);
        assert!(
            finding
                .message
                .contains("the Kubernetes version of OpenShift 6.0.0 is not known"),
            "{}",
            finding.message
        );
    }
}
