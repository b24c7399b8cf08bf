//! The cluster's readiness for its offered updates, as Open Cluster
//! Management ClusterClaims (`serve --cluster-claims`): the registration
//! agent copies a managed cluster's ClusterClaims into its hub's
//! `ManagedCluster.status.clusterClaims`, where a `Placement` selects on
//! them with `claimSelector`. So one word per target, exact enough for
//! `operator: In, values: [Cleared]`, and a summary for a person.
//!
//! OCM's limits shape the set: a hub keeps 20 custom ClusterClaims of a cluster by
//! default and a value of at most 1,024 characters. The gate publishes at
//! most [`MAX_TARGET_CLUSTER_CLAIMS`] targets, newest first, plus the summary, and
//! the summary says what it leaves out rather than cutting it silently.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::release::Version;

/// OCM's `ClusterClaim` (`cluster.open-cluster-management.io/v1alpha1`):
/// a name and a value the managed cluster states about itself.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "cluster.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ClusterClaim"
)]
pub struct ClusterClaimSpec {
    #[serde(default)]
    pub value: String,
}

/// The label on every ClusterClaim the gate publishes: it lists, changes
/// and deletes only those that carry it (RBAC cannot narrow a grant by label).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "preflight-gate");

/// Every ClusterClaim the gate publishes is named under this suffix.
pub const SUFFIX: &str = ".preflight.dev";

/// The summary ClusterClaim's name.
pub const SUMMARY: &str = "updates.preflight.dev";

/// At most this many targets get a ClusterClaim of their own; with the
/// summary, 11 of a hub's 20 custom ones, leaving room for the cluster's others.
pub const MAX_TARGET_CLUSTER_CLAIMS: usize = 10;

/// The longest value a hub keeps.
pub const MAX_VALUE: usize = 1024;

/// Whether the gate would let an update to a target through now, with no
/// override: the ClusterClaim's value.
#[derive(Clone, Debug, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
pub enum Readiness {
    /// Its fresh results pass (or only warn), within the window.
    Cleared,
    /// Blocking results or the maintenance window stop it, with the checks
    /// that block (none named when the window does, or a run that failed
    /// as a whole).
    Blocked(Vec<String>),
    /// No fresh results yet, a run under way, or results the gate cannot
    /// trust now (its watch down): the webhook would ask to retry.
    Pending,
    /// The gate cannot judge it (its results are not vouched for, its
    /// version does not match its image).
    Error,
}

impl Readiness {
    /// The ClusterClaim's value, and the `state` label of its metric.
    pub fn word(&self) -> &'static str {
        self.into()
    }
}

/// The ClusterClaims to publish, and how many offered targets have none
/// of their own (they are in the summary).
#[derive(Debug, PartialEq, Eq)]
pub struct ClusterClaimSet {
    /// Name to value, the summary included.
    pub cluster_claims: BTreeMap<String, String>,
    /// The published targets' readiness, for the metrics.
    pub published: Vec<Readiness>,
    pub unpublished: usize,
}

/// The ClusterClaim of one target, `update-4.22.3.preflight.dev`; `None`
/// when the version makes no valid name (a DNS subdomain: labels of 1 to
/// 63 lowercase letters, digits and `-`, each beginning and ending with a
/// letter or digit, 253 characters in all), as a pre-release label ending
/// in `-` would. Such a target is in the summary alone.
pub fn target_cluster_claim(version: &Version) -> Option<String> {
    let name = format!(
        "update-{}{SUFFIX}",
        version.to_string().to_ascii_lowercase()
    );
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    (name.len() <= 253 && name.split('.').all(label_ok)).then_some(name)
}

/// The ClusterClaims for the offered targets' readiness: one per target,
/// newest first, up to [`MAX_TARGET_CLUSTER_CLAIMS`], and the summary of
/// every target.
pub fn cluster_claim_set(mut targets: Vec<(Version, Readiness)>) -> ClusterClaimSet {
    targets.sort_by(|a, b| b.0.cmp(&a.0));
    targets.dedup_by(|a, b| a.0 == b.0);
    let mut named: Vec<(String, &Readiness)> = targets
        .iter()
        .filter_map(|(version, readiness)| Some((target_cluster_claim(version)?, readiness)))
        .collect();
    // Two versions apart only in case would share a name: the newer keeps it.
    named.dedup_by(|a, b| a.0 == b.0);
    let unpublished = targets.len() - named.len().min(MAX_TARGET_CLUSTER_CLAIMS);
    named.truncate(MAX_TARGET_CLUSTER_CLAIMS);
    let published = named.iter().map(|(_, r)| (*r).clone()).collect();
    let mut cluster_claims: BTreeMap<String, String> = named
        .into_iter()
        .map(|(name, readiness)| (name, readiness.word().to_owned()))
        .collect();
    cluster_claims.insert(SUMMARY.to_owned(), summary(&targets));
    ClusterClaimSet {
        cluster_claims,
        published,
        unpublished,
    }
}

/// `4.23.0=Blocked(EtcdHealthy) 4.22.3=Cleared`, newest first, within
/// [`MAX_VALUE`]: what does not fit is counted (`+2 more`), never dropped
/// without a word. `none` when nothing is offered.
fn summary(targets: &[(Version, Readiness)]) -> String {
    if targets.is_empty() {
        return "none".to_owned();
    }
    let items: Vec<String> = targets
        .iter()
        .map(|(version, readiness)| match readiness {
            Readiness::Blocked(checks) if !checks.is_empty() => {
                format!("{version}=Blocked({})", checks.join(","))
            }
            _ => format!("{version}={}", readiness.word()),
        })
        .collect();
    let mut value = String::new();
    for (i, item) in items.iter().enumerate() {
        let left = items.len() - i - 1;
        // Room for this item, and for the count of the rest if any.
        let tail = if left == 0 {
            0
        } else {
            format!(" +{left} more").len()
        };
        let sep = usize::from(!value.is_empty());
        if value.len() + sep + item.len() + tail > MAX_VALUE {
            let more = items.len() - i;
            let count = format!("+{more} more");
            if !value.is_empty() {
                value.push(' ');
            }
            value.push_str(&count);
            return value;
        }
        if sep == 1 {
            value.push(' ');
        }
        value.push_str(item);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    #[test]
    fn each_target_has_one_word_and_the_summary_has_them_all_newest_first() {
        let set = cluster_claim_set(vec![
            (v("4.22.3"), Readiness::Cleared),
            (
                v("4.23.0"),
                Readiness::Blocked(vec!["EtcdHealthy".into(), "NodesReady".into()]),
            ),
            (v("4.22.4"), Readiness::Pending),
            (v("4.22.5"), Readiness::Error),
        ]);
        let expected: BTreeMap<String, String> = [
            ("update-4.22.3.preflight.dev", "Cleared"),
            ("update-4.22.4.preflight.dev", "Pending"),
            ("update-4.22.5.preflight.dev", "Error"),
            ("update-4.23.0.preflight.dev", "Blocked"),
            (
                "updates.preflight.dev",
                "4.23.0=Blocked(EtcdHealthy,NodesReady) 4.22.5=Error 4.22.4=Pending 4.22.3=Cleared",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(set.cluster_claims, expected);
        assert_eq!(set.unpublished, 0);
        assert_eq!(set.published.len(), 4);
    }

    #[test]
    fn only_the_ten_newest_have_cluster_claims_and_the_summary_names_the_rest() {
        let targets = (1..=14)
            .map(|z| (v(&format!("4.22.{z}")), Readiness::Cleared))
            .collect();
        let set = cluster_claim_set(targets);
        assert_eq!(set.cluster_claims.len(), MAX_TARGET_CLUSTER_CLAIMS + 1);
        assert_eq!(set.unpublished, 4);
        assert!(
            set.cluster_claims
                .contains_key("update-4.22.14.preflight.dev")
        );
        assert!(
            set.cluster_claims
                .contains_key("update-4.22.5.preflight.dev")
        );
        assert!(
            !set.cluster_claims
                .contains_key("update-4.22.4.preflight.dev")
        );
        assert!(set.cluster_claims[SUMMARY].ends_with("4.22.2=Cleared 4.22.1=Cleared"));
    }

    #[test]
    fn a_summary_too_long_for_the_hub_counts_what_it_leaves_out() {
        let many_checks: Vec<String> = (0..40).map(|i| format!("SomeCheckNumber{i}")).collect();
        let targets: Vec<_> = (1..=9)
            .map(|z| {
                (
                    v(&format!("4.22.{z}")),
                    Readiness::Blocked(many_checks.clone()),
                )
            })
            .collect();
        let value = cluster_claim_set(targets)
            .cluster_claims
            .remove(SUMMARY)
            .unwrap();
        assert!(value.len() <= MAX_VALUE, "{}", value.len());
        let shown = value.matches("=Blocked(").count();
        assert!(shown < 9, "{value}");
        assert!(value.ends_with(&format!(" +{} more", 9 - shown)), "{value}");
        // An item longer than the whole value is counted, not cut.
        let huge = vec!["X".repeat(2000)];
        let value = cluster_claim_set(vec![(v("4.22.1"), Readiness::Blocked(huge))]).cluster_claims
            [SUMMARY]
            .clone();
        assert_eq!(value, "+1 more");
    }

    #[test]
    fn a_cluster_claims_name_is_a_dns_subdomain_or_the_target_is_in_the_summary_alone() {
        let name = |version: &str| target_cluster_claim(&v(version));
        assert_eq!(name("4.22.3").unwrap(), "update-4.22.3.preflight.dev");
        assert_eq!(
            name("4.23.0-rc.1").unwrap(),
            "update-4.23.0-rc.1.preflight.dev"
        );
        assert_eq!(
            name("4.23.0-RC.1+build.7").unwrap(),
            "update-4.23.0-rc.1.preflight.dev"
        );
        // A label ending in `-`, and one past 63 characters, are no name.
        assert_eq!(name("4.23.0-rc-"), None);
        assert_eq!(name(&format!("4.23.0-{}", "a".repeat(70))), None);
        let set = cluster_claim_set(vec![
            (v("4.23.0-rc-"), Readiness::Cleared),
            (v("4.22.3"), Readiness::Cleared),
        ]);
        assert_eq!(set.cluster_claims.len(), 2, "{:?}", set.cluster_claims);
        assert_eq!(set.unpublished, 1);
        assert_eq!(
            set.cluster_claims[SUMMARY],
            "4.23.0-rc-=Cleared 4.22.3=Cleared"
        );
        assert_eq!(
            cluster_claim_set(Vec::new()).cluster_claims[SUMMARY],
            "none"
        );
    }

    #[test]
    fn a_summary_of_exactly_the_limit_is_whole() {
        // 4.22.1=Blocked(X...) is 16 characters and its checks: 1,024 in all.
        let checks = vec!["X".repeat(1024 - "4.22.1=Blocked()".len())];
        let value = cluster_claim_set(vec![(v("4.22.1"), Readiness::Blocked(checks))])
            .cluster_claims[SUMMARY]
            .clone();
        assert_eq!(value.len(), MAX_VALUE);
        assert!(value.starts_with("4.22.1=Blocked(XXX"), "{value}");
    }
}
