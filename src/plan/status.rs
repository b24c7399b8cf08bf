//! The plan as an `UpdatePreflight`'s status keeps it (`PlanSummary`),
//! bounded: the figures, each pool's, the first batches of each pool and
//! every blocker in full (up to a cap, far above what a cluster has);
//! counts for the rest. The webhook reads it from memory, so it says its
//! one line without computing anything.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::duration::words;
use super::{Outcome, Plan};
use crate::model::results::{BatchSummary, ControlPlaneSummary, PlanSummary, PoolSummary};
use crate::model::text::clean;

/// The batches of each pool the summary lists.
pub const FIRST_BATCHES: usize = 3;

/// The nodes of a batch, and the holds of a batch, it lists.
pub const BATCH_NODES: usize = 5;
pub const BATCH_HOLDS: usize = 5;

/// The pools it lists.
pub const MAX_POOLS: usize = 20;

/// The blockers it lists: every one a cluster plausibly has (one per
/// batch a PodDisruptionBudget never lets drain), and a cap so that no
/// cluster's plan can swell the object.
pub const MAX_BLOCKERS: usize = 50;

/// The longest blocker, in characters.
pub const MAX_BLOCKER: usize = 600;

/// `plan`, computed at `computed_at` (the time of the data), as the status
/// keeps it.
pub fn summary(plan: &Plan, computed_at: Timestamp) -> PlanSummary {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let cp = &plan.control_plane;
    let pools: Vec<PoolSummary> = plan
        .pools
        .iter()
        .map(|p| PoolSummary {
            name: clean(&p.name, 253),
            nodes: count(p.nodes),
            updates: p.updates,
            batches: count(p.batches.len()),
            batch_size: count(p.batch_size),
            seconds: p.seconds,
            blocked: p.blocked,
        })
        .chain(plan.node_pools.iter().map(|p| {
            let r = p.rollout.as_ref();
            PoolSummary {
                name: clean(&format!("NodePool {}", p.name), 253),
                nodes: count(r.map_or(0, |r| r.replicas)),
                updates: r.is_some(),
                batches: count(r.map_or(0, |r| r.waves)),
                batch_size: count(r.map_or(0, |r| r.at_once)),
                seconds: p.seconds,
                blocked: false,
            }
        }))
        .collect();
    let mut batches = Vec::new();
    let mut more_batches = 0;
    for pool in plan.pools.iter().filter(|p| p.updates) {
        more_batches += pool.batches.len().saturating_sub(FIRST_BATCHES);
        for batch in pool.batches.iter().take(FIRST_BATCHES) {
            batches.push(BatchSummary {
                pool: clean(&pool.name, 253),
                number: count(batch.number),
                nodes: batch
                    .nodes
                    .iter()
                    .take(BATCH_NODES)
                    .map(|n| clean(&n.name, 253))
                    .collect(),
                node_count: count(batch.nodes.len()),
                evictions: batch.evictions.map(count),
                holds: batch
                    .holds
                    .iter()
                    .take(BATCH_HOLDS)
                    .map(|h| {
                        let how = match (h.outcome, h.wait_seconds) {
                            (Outcome::Never, _) => "never drains".to_owned(),
                            (Outcome::Waits, Some(wait)) => format!("waits {}", words(wait)),
                            (Outcome::Waits, None) => "waits, how long unknown".to_owned(),
                            (Outcome::Unknown, _) => "unknown".to_owned(),
                        };
                        format!("PDB {}: {how}", clean(&h.pdb, 200))
                    })
                    .collect(),
                seconds: batch.seconds,
            });
        }
    }
    PlanSummary {
        computed_at: Some(Time(computed_at)),
        p50_seconds: plan.p50_seconds,
        p90_seconds: plan.p90_seconds,
        control_plane: ControlPlaneSummary {
            p50_seconds: cp.p50_seconds,
            p90_seconds: cp.p90_seconds,
            origin: cp.origin.to_owned(),
            samples: count(cp.samples),
            basis: clean(&cp.basis, 300),
        },
        more_pools: count(pools.len().saturating_sub(MAX_POOLS)),
        pools: pools.into_iter().take(MAX_POOLS).collect(),
        batches,
        more_batches: count(more_batches),
        blockers: plan
            .blockers
            .iter()
            .take(MAX_BLOCKERS)
            .map(|b| clean(b, MAX_BLOCKER))
            .collect(),
        more_blockers: count(plan.blockers.len().saturating_sub(MAX_BLOCKERS)),
        waits: count(plan.waits.len()),
        warnings: count(plan.warnings.len()),
        unknowns: count(plan.unknowns.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ClusterView;
    use serde_json::{Value, json};

    fn node(name: &str) -> Value {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
               "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn pod(name: &str, node: &str) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "db", "labels": {"app": "pg"},
                "ownerReferences": [{"kind": "StatefulSet", "controller": true}]},
               "spec": {"nodeName": node}})
    }

    /// `nodes` workers in one pool of `maxUnavailable` 1, two of them
    /// holding the pods of a PDB that needs both.
    fn view(nodes: usize) -> ClusterView {
        let mut objects = vec![
            json!({"kind": "MachineConfigPool", "metadata": {"name": "worker"},
                   "spec": {"nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}}}),
            json!({"kind": "PodDisruptionBudget", "metadata": {"name": "pg", "namespace": "db"},
                   "spec": {"selector": {"matchLabels": {"app": "pg"}}},
                   "status": {"expectedPods": 2, "currentHealthy": 2, "desiredHealthy": 2}}),
            pod("pg-0", "w00"),
            pod("pg-1", "w01"),
        ];
        objects.extend((0..nodes).map(|i| node(&format!("w{i:02}"))));
        let mut view = ClusterView::default();
        for o in objects {
            let kind = crate::view::kinds::named(o["kind"].as_str().unwrap()).unwrap();
            view.add(kind, o).unwrap();
        }
        view
    }

    fn now() -> Timestamp {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn the_summary_keeps_the_figures_the_first_batches_and_every_blocker() {
        let plan = crate::plan::plan(&view(12), None, now());
        let s = summary(&plan, now());
        assert_eq!(
            (s.p50_seconds, s.p90_seconds),
            (plan.p50_seconds, plan.p90_seconds)
        );
        assert_eq!(s.control_plane.origin, "documented");
        assert_eq!(s.pools.len(), 1);
        assert_eq!((s.pools[0].batches, s.pools[0].nodes), (12, 12));
        assert!(s.pools[0].blocked);
        assert_eq!(s.batches.len(), FIRST_BATCHES);
        assert_eq!(s.more_batches, 12 - FIRST_BATCHES as u32);
        assert_eq!(s.batches[0].holds, ["PDB db/pg: never drains"]);
        assert_eq!(s.batches[0].nodes, ["w00"]);
        // Both batches that hold a pod of the PDB, in full.
        assert_eq!(s.blockers, plan.blockers);
        assert_eq!(s.blockers.len(), 2);
        assert!(
            s.blockers[0].starts_with("worker batch 1 (w00) cannot drain: PDB db/pg needs all 2"),
            "{}",
            s.blockers[0]
        );
        assert_eq!(s.more_blockers, 0);
        assert_eq!(s.computed_at, Some(Time(now())));
    }

    /// However large the cluster, the summary stays small.
    #[test]
    fn the_summary_is_bounded() {
        let mut plan = crate::plan::plan(&view(300), None, now());
        plan.blockers = (0..500)
            .map(|i| format!("b{i} {}", "x".repeat(5000)))
            .collect();
        let s = summary(&plan, now());
        assert_eq!(s.batches.len(), FIRST_BATCHES);
        assert_eq!(s.more_batches, 297);
        assert_eq!(s.blockers.len(), MAX_BLOCKERS);
        assert_eq!(s.more_blockers, 450);
        assert!(
            s.blockers
                .iter()
                .all(|b| b.chars().count() <= MAX_BLOCKER + 40)
        );
        let bytes = serde_json::to_vec(&s).unwrap().len();
        assert!(bytes < 40 * 1024, "{bytes} bytes");
    }
}
