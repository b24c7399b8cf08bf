//! MachineConfigPoolsHealthy: no pool is Degraded or still Updating, and no
//! pool is paused. A paused pool alone is a warning: pausing worker pools
//! is the EUS practice (update the control plane across two minor
//! versions, then unpause the workers once), but paused nodes do not
//! update, and certificates on them can expire if they stay paused.

use super::{Check, Context, require};
use crate::cluster::openshift::{Condition, condition, is_true};
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::model::text::since;

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
        if let Err(skip) = require(ctx.view, &["MachineConfigPool"]) {
            return skip;
        }
        let pools = &ctx.view.machine_config_pools;
        let mut problems = Vec::new();
        // Pools the update in progress is rolling, when the target stays
        // within its minor: its doing, not a reason to stay on it.
        let mut by_update = Vec::new();
        let mut paused = Vec::new();
        for pool in pools {
            let name = &pool.metadata.name;
            let status = &pool.status;
            if let Some(c) =
                condition(&status.conditions, "Degraded").filter(|c| c.status == "True")
            {
                problems.push(format!(
                    "{name} is Degraded for {} ({} of {} machines degraded): {}",
                    since(c.last_transition_time, ctx.now),
                    status.degraded_machine_count,
                    status.machine_count,
                    degraded_message(&status.conditions, c)
                ));
            }
            if is_true(&status.conditions, "Updating") {
                let updating = format!(
                    "{name} is Updating ({} of {} machines updated)",
                    status.updated_machine_count, status.machine_count
                );
                if ctx.retarget_within_minor {
                    by_update.push(updating);
                } else {
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
        let paused_note = match (update_note, paused_note) {
            (Some(u), Some(p)) => Some(format!("{u}; {p}")),
            (u, p) => u.or(p),
        };
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
        Outcome::Pass,
        None,
        "all 1 MachineConfigPools"
    )]
    #[case::degraded(
        pool("worker", false, "True", "False"),
        Outcome::Fail,
        None,
        "worker is Degraded for 2h0m (1 of 3 machines degraded): Node w1 is reporting: drain failed"
    )]
    #[case::updating(
        pool("worker", false, "False", "True"),
        Outcome::Fail,
        None,
        "worker is Updating (1 of 3 machines updated)"
    )]
    #[case::paused(
        pool("worker", true, "False", "False"),
        Outcome::Fail,
        Some(Severity::Warning),
        "EUS practice"
    )]
    #[case::paused_and_updating(
        pool("worker", true, "False", "True"),
        Outcome::Fail,
        None,
        "worker paused"
    )]
    fn pools(
        #[case] pool: serde_json::Value,
        #[case] outcome: Outcome,
        #[case] severity: Option<Severity>,
        #[case] says: &str,
    ) {
        let finding = fixture::evaluate(
            &MachineConfigPoolsHealthy,
            &fixture::view(vec![fixture::cluster_version("4.15.3"), pool]),
            "4.15.4",
        );
        assert_eq!(
            (finding.outcome, finding.severity),
            (outcome, severity),
            "{}",
            finding.message
        );
        assert!(finding.message.contains(says), "{}", finding.message);
    }
}
