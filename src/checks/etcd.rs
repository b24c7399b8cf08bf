//! EtcdHealthy: the etcd ClusterOperator is Available and not Degraded,
//! and its members report healthy. An update rolls etcd members one at a
//! time, so it needs every member healthy to keep quorum.
//!
//! As for every operator, a state younger than `oc adm upgrade status`'s
//! threshold ([`grace`]) is settling (etcd members restart while a rollout
//! passes) and warns; an older one blocks.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::grace;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::since;
use crate::view::kinds;
use crate::view::openshift::condition;

pub struct EtcdHealthy;

const URL: &str = "https://docs.openshift.com/container-platform/latest/backup_and_restore/control_plane_backup_and_restore/disaster_recovery/about-disaster-recovery.html";

impl Check for EtcdHealthy {
    fn name(&self) -> &'static str {
        "EtcdHealthy"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if ctx.view.hosted() {
            return super::not_in_a_hosted_cluster(
                "it has no etcd members of its own: its etcd runs in the control plane's namespace, which HostedClusterHealthy judges",
            );
        }
        if let Err(skip) = require(ctx.view, &[kinds::CLUSTER_OPERATOR]) {
            return skip;
        }
        let Some(etcd) = ctx
            .view
            .cluster_operators
            .iter()
            .find(|co| co.metadata.name == "etcd")
        else {
            return Finding::skipped("no etcd ClusterOperator in the cluster data");
        };
        let conditions = &etcd.status.conditions;
        let mut problems = Vec::new();
        // Whether every problem is younger than its threshold.
        let mut settling = true;
        if let Some(c) = condition(conditions, "Available").filter(|c| c.status != "True") {
            settling &= grace::settling(c.last_transition_time, ctx.now, grace::UNAVAILABLE);
            problems.push(format!(
                "etcd is not Available for {}",
                since(c.last_transition_time, ctx.now)
            ));
        }
        if let Some(c) = condition(conditions, "Degraded").filter(|c| c.status == "True") {
            settling &= grace::settling(c.last_transition_time, ctx.now, grace::DEGRADED);
            // The operator's message has one line per controller; keep those that complain.
            let lines: Vec<String> = c
                .message
                .as_deref()
                .unwrap_or("")
                .lines()
                .filter(|l| !l.contains(": No unhealthy") && !l.trim().is_empty())
                .take(3)
                .map(|l| excerpt(Some(l), EXCERPT))
                .collect();
            problems.push(format!(
                "etcd is Degraded for {}: {}",
                since(c.last_transition_time, ctx.now),
                if lines.is_empty() {
                    "no message".to_owned()
                } else {
                    lines.join("; ")
                }
            ));
        }
        let members = condition(conditions, "Available")
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.lines().find(|l| l.starts_with("EtcdMembersAvailable:")))
            .map(|l| {
                let said = l.trim_start_matches("EtcdMembersAvailable:").trim();
                // The operator says "1 members are available" of a single
                // member; say it in English.
                match said.strip_prefix("1 members are available") {
                    Some(rest) => format!("1 member is available{rest}"),
                    None => said.to_owned(),
                }
            });
        if problems.is_empty() {
            Finding::pass(match members {
                Some(m) => format!("etcd is Available and not Degraded; {m}"),
                None => "etcd is Available and not Degraded".to_owned(),
            })
        } else if settling {
            Finding::warn(format!(
                "settling, younger than {}: {}; check again in a few minutes",
                crate::model::text::short_duration(grace::DEGRADED),
                problems.join("; ")
            ))
            .with_url(URL)
        } else {
            Finding::fail(problems.join("; ")).with_url(URL)
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

    fn etcd(available: &str, degraded: &str) -> serde_json::Value {
        json!({"kind": "ClusterOperator", "metadata": {"name": "etcd"}, "status": {"conditions": [
            condition("Available", available, "StaticPodsAvailable: 3 nodes are active\nEtcdMembersAvailable: 3 members are available"),
            condition("Degraded", degraded, "NodeControllerDegraded: All master nodes are ready\nEtcdMembersDegraded: No unhealthy members found\nEtcdEndpointsDegraded: cannot evaluate quorum"),
        ]}})
    }

    #[rstest]
    #[case::healthy(etcd("True", "False"), Outcome::Pass, "3 members are available")]
    #[case::degraded(
        etcd("True", "True"),
        Outcome::Fail,
        "etcd is Degraded for 2h0m: NodeControllerDegraded: All master nodes are ready; EtcdEndpointsDegraded: cannot evaluate quorum"
    )]
    #[case::unavailable(
        etcd("False", "False"),
        Outcome::Fail,
        "etcd is not Available for 2h0m"
    )]
    fn etcd_health(#[case] co: serde_json::Value, #[case] outcome: Outcome, #[case] says: &str) {
        etcd_health_of(co, outcome, says);
    }

    /// `4.15.0-ec2-unavailable-mco-20m`: etcd Degraded for seconds while
    /// its members roll warns; for ten minutes it blocks.
    #[rstest]
    #[case::seconds("5s", Some(Severity::Warning))]
    #[case::ten_minutes("10m", None)]
    fn a_degraded_etcd_settles_first(#[case] ago: &str, #[case] severity: Option<Severity>) {
        let now: jiff::Timestamp = fixture::NOW.parse().unwrap();
        let mut co = etcd("True", "True");
        co["status"]["conditions"][1]["lastTransitionTime"] =
            json!((now - ago.parse::<jiff::Span>().unwrap()).to_string());
        let finding = fixture::evaluate(&EtcdHealthy, &fixture::view(vec![co]), "4.15.4");
        assert_eq!(
            (finding.outcome, finding.severity),
            (Outcome::Fail, severity),
            "{}",
            finding.message
        );
    }

    #[test]
    fn a_single_member_is_one_member() {
        let mut co = etcd("True", "False");
        co["status"]["conditions"][0]["message"] = json!(
            "StaticPodsAvailable: 1 nodes are active\nEtcdMembersAvailable: 1 members are available"
        );
        etcd_health_of(
            co,
            Outcome::Pass,
            "etcd is Available and not Degraded; 1 member is available",
        );
    }

    fn etcd_health_of(co: serde_json::Value, outcome: Outcome, says: &str) {
        let finding = fixture::evaluate(&EtcdHealthy, &fixture::view(vec![co]), "4.15.4");
        assert_eq!(finding.outcome, outcome, "{}", finding.message);
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn a_hosted_cluster_has_no_etcd_of_its_own() {
        let view = fixture::view(vec![
            fixture::hosted_infrastructure(),
            json!({"kind": "ClusterOperator", "metadata": {"name": "kube-apiserver"}}),
        ]);
        let finding = fixture::evaluate(&EtcdHealthy, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Skipped);
        assert!(
            finding
                .message
                .starts_with(crate::checks::NOT_IN_A_HOSTED_CLUSTER),
            "{}",
            finding.message
        );
    }
}
