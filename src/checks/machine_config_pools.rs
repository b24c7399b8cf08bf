//! MachineConfigPoolsHealthy: no pool is Degraded or still Updating, and no
//! pool is paused. A paused pool alone is a warning: pausing worker pools
//! is the EUS practice (update the control plane across two minor
//! versions, then unpause the workers once), but paused nodes do not
//! update, and certificates on them can expire if they stay paused.
//!
//! A pool still rolling is judged as the CVO and oc judge it: the update
//! in progress rolls its pools, so a retarget within its minor (or the
//! same update asked for again) only warns; with no update in progress a
//! rolling pool (a MachineConfig applied by hand) warns for a target in
//! the same minor, which neither the CVO nor oc hold, and blocks a minor
//! one, for which the machine-config operator is not Upgradeable. A pool
//! that reports neither `Updated` nor `Updating` is not taken for an
//! updated one: the check says it could not look, a warning, as for data
//! that is missing.

use super::{Check, Context, require};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::model::text::since;
use crate::view::kinds;
use crate::view::openshift::{Condition, condition};

pub struct MachineConfigPoolsHealthy;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/updating_a_cluster/eus-eus-update.html";
const HEALTH_URL: &str =
    "https://docs.openshift.com/container-platform/latest/machine_configuration/index.html";

impl Check for MachineConfigPoolsHealthy {
    fn name(&self) -> &'static str {
        "MachineConfigPoolsHealthy"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if ctx.view.hosted() {
            return super::not_in_a_hosted_cluster(
                "it has no MachineConfigPools: its NodePools roll its nodes, which HostedClusterHealthy and NodePoolVersionSkew judge",
            );
        }
        if let Err(skip) = require(ctx.view, &[kinds::MACHINE_CONFIG_POOL]) {
            return skip;
        }
        let pools = &ctx.view.machine_config_pools;
        let mut problems = Vec::new();
        // Pools the update in progress is rolling, when the target stays
        // within its minor: its doing, not a reason to stay on it.
        let mut by_update = Vec::new();
        // Pools rolling with no update in progress, for a target within
        // the minor: to settle before the update starts.
        let mut to_settle = Vec::new();
        let settles = ctx.rollout_settles();
        let mut paused = Vec::new();
        // Pools whose state the data does not give.
        let mut unknown = Vec::new();
        // Each pool's state, by name, for an accept to record.
        let mut subjects = Vec::new();
        for pool in pools {
            let name = &pool.metadata.name;
            let status = &pool.status;
            if let Some(c) =
                condition(&status.conditions, "Degraded").filter(|c| c.status == "True")
            {
                subjects.push(format!("{name} Degraded"));
                problems.push(format!(
                    "{name} is Degraded for {} ({} of {} machines degraded): {}",
                    since(c.last_transition_time, ctx.now),
                    status.degraded_machine_count,
                    status.machine_count,
                    degraded_message(&status.conditions, c)
                ));
            }
            let updated = condition(&status.conditions, "Updated");
            let updating = condition(&status.conditions, "Updating");
            if updated.is_none() && updating.is_none() {
                unknown.push(name.clone());
            } else if updating.is_some_and(|c| c.status == "True") {
                let updating = format!(
                    "{name} is Updating ({} of {} machines updated)",
                    status.updated_machine_count, status.machine_count
                );
                if ctx.retarget_within_minor {
                    by_update.push(updating);
                } else if settles {
                    to_settle.push(updating);
                } else {
                    subjects.push(format!("{name} Updating"));
                    problems.push(updating);
                }
            }
            if pool.spec.paused {
                paused.push(name.clone());
            }
        }
        let paused_note = (!paused.is_empty()).then(|| {
            format!(
                "{} paused: its nodes will not update. Pausing worker pools is the EUS practice for a control-plane-only update; unpause before certificates on the nodes expire and before the next minor update",
                list(&paused, 5)
            )
        });
        let update_note = (!by_update.is_empty()).then(|| {
            format!(
                "{}, by the update in progress, which a retarget within its minor continues",
                list(&by_update, 5)
            )
        });
        let settle_note = (!to_settle.is_empty()).then(|| {
            format!(
                "{} with no update in progress: let it settle before the update starts, so that its nodes are not drained twice",
                list(&to_settle, 5)
            )
        });
        let unknown_note = (!unknown.is_empty()).then(|| {
            format!(
                "{} reports neither Updated nor Updating: whether its machines run their rendered config is unknown, and this check could not look",
                list(&unknown, 5)
            )
        });
        let notes: Vec<String> = [update_note, settle_note, unknown_note, paused_note]
            .into_iter()
            .flatten()
            .collect();
        let paused_note = (!notes.is_empty()).then(|| notes.join("; "));
        match (problems.is_empty(), paused_note) {
            (true, None) => Finding::pass(format!(
                "all {} MachineConfigPools are updated and not paused",
                pools.len()
            )),
            (true, Some(note)) => Finding::warn(note).with_url(URL),
            (false, note) => {
                let mut message = list(&problems, 5);
                if let Some(note) = note {
                    message = format!("{message}; {note}");
                }
                Finding::fail(message)
                    .with_items(&problems, 5)
                    .with_subjects(subjects)
                    .with_url(HEALTH_URL)
            }
        }
    }
}

/// The first line of the Degraded message, or of the more specific
/// NodeDegraded or RenderDegraded one when Degraded says nothing.
fn degraded_message(conditions: &[Condition], degraded: &Condition) -> String {
    [
        Some(degraded),
        condition(conditions, "NodeDegraded"),
        condition(conditions, "RenderDegraded"),
    ]
    .into_iter()
    .flatten()
    .filter_map(|c| c.message.as_deref())
    .find(|m| !m.trim().is_empty())
    .map_or_else(|| "no message".to_owned(), |m| excerpt(Some(m), EXCERPT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::fixture::{self, condition};
    use crate::model::Outcome;
    use rstest::rstest;
    use serde_json::json;

    fn pool(name: &str, paused: bool, degraded: &str, updating: &str) -> serde_json::Value {
        json!({"kind": "MachineConfigPool", "metadata": {"name": name},
               "spec": {"paused": paused},
               "status": {"machineCount": 3, "updatedMachineCount": 1, "degradedMachineCount": 1,
                          "conditions": [condition("Degraded", degraded, "Node w1 is reporting: drain failed"),
                                         condition("Updating", updating, "")]}})
    }

    #[test]
    fn pools_during_an_update_warn_for_a_retarget_within_its_minor_only() {
        let updating = pool("worker", false, "False", "True");
        let degraded = pool("infra", false, "True", "False");
        let during = |to: &str, pools: Vec<serde_json::Value>| {
            let mut objects = vec![fixture::updating("4.15.3", "4.15.8")];
            objects.extend(pools);
            fixture::evaluate(&MachineConfigPoolsHealthy, &fixture::view(objects), to)
        };
        // To a fixed z-stream of the same minor: the update's own rollout.
        let retarget = during("4.15.9", vec![updating.clone()]);
        assert_eq!(
            (retarget.outcome, retarget.severity),
            (Outcome::Fail, Some(Severity::Warning)),
            "{}",
            retarget.message
        );
        assert_eq!(
            retarget.message,
            "worker is Updating (1 of 3 machines updated), by the update in progress, which a retarget within its minor continues"
        );
        // A Degraded pool still blocks, and so does Updating across minors.
        let broken = during("4.15.9", vec![updating.clone(), degraded]);
        assert_eq!((broken.outcome, broken.severity), (Outcome::Fail, None));
        assert!(
            broken.message.contains("infra is Degraded"),
            "{}",
            broken.message
        );
        let minor = during("4.16.1", vec![updating]);
        assert_eq!((minor.outcome, minor.severity), (Outcome::Fail, None));
    }

    #[rstest]
    #[case::healthy(
        pool("worker", false, "False", "False"),
        "4.15.4",
        Outcome::Pass,
        None,
        "all 1 MachineConfigPools"
    )]
    #[case::degraded(
        pool("worker", false, "True", "False"),
        "4.15.4",
        Outcome::Fail,
        None,
        "worker is Degraded for 2h0m (1 of 3 machines degraded): Node w1 is reporting: drain failed"
    )]
    #[case::rolling_before_a_patch_update(
        pool("worker", false, "False", "True"),
        "4.15.4",
        Outcome::Fail,
        Some(Severity::Warning),
        "worker is Updating (1 of 3 machines updated) with no update in progress: let it settle"
    )]
    #[case::rolling_before_a_minor_update(
        pool("worker", false, "False", "True"),
        "4.16.0",
        Outcome::Fail,
        None,
        "worker is Updating (1 of 3 machines updated)"
    )]
    #[case::paused(
        pool("worker", true, "False", "False"),
        "4.15.4",
        Outcome::Fail,
        Some(Severity::Warning),
        "EUS practice"
    )]
    #[case::paused_and_rolling_before_a_minor_update(
        pool("worker", true, "False", "True"),
        "4.16.0",
        Outcome::Fail,
        None,
        "worker paused"
    )]
    #[case::no_updated_condition(
        json!({"kind": "MachineConfigPool", "metadata": {"name": "worker"}, "status": {"machineCount": 3}}),
        "4.15.4",
        Outcome::Fail,
        Some(Severity::Warning),
        "worker reports neither Updated nor Updating"
    )]
    fn pools(
        #[case] pool: serde_json::Value,
        #[case] to: &str,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let finding = fixture::evaluate(
            &MachineConfigPoolsHealthy,
            &fixture::view(vec![fixture::cluster_version("4.15.3"), pool]),
            to,
        );
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }

    #[test]
    fn a_hosted_cluster_has_no_pools_to_judge() {
        let view = fixture::view(vec![fixture::hosted_infrastructure()]);
        let finding = fixture::evaluate(&MachineConfigPoolsHealthy, &view, "4.15.4");
        assert_eq!(finding.outcome, Outcome::Skipped);
        assert!(
            finding
                .message
                .starts_with("does not apply: a hosted cluster's control plane and its machine configuration run on the management cluster (it has no MachineConfigPools"),
            "{}",
            finding.message
        );
    }
}
