//! How long things take: the named defaults the plan falls back on, each
//! with its source, and how a node's, a batch's and a pool's durations add
//! up.

/// The control plane, when the cluster's own history has fewer than
/// [`super::control_plane::MIN_SAMPLES`] completed updates of the kind:
/// Red Hat's documented "60 to 120 minutes" for the cluster version
/// operator's part of an update (OpenShift docs, "Understanding OpenShift
/// update duration"). P50 is the range's start, P90 its end.
pub const CONTROL_PLANE_DOCUMENTED: (u64, u64) = (60 * 60, 120 * 60);

/// A node's drain when the pods it holds are not in the data: the
/// per-node "draining" estimate of `oc adm upgrade status`.
pub const DRAIN_UNKNOWN: u64 = 10 * 60;

/// A node's update once drained (the machine-config daemon writes the new
/// configuration and OS image): `oc adm upgrade status`' "updating", when
/// the cluster's MachineConfigNodes do not say (`super::nodes`).
pub const NODE_UPDATE: u64 = 5 * 60;

/// A node's reboot until it is Ready again and rejoins the pool:
/// `oc adm upgrade status`' "rebooting", when the cluster's
/// MachineConfigNodes do not say (`super::nodes`).
pub const NODE_REBOOT: u64 = 5 * 60;

/// A pod's grace period when it sets none: Kubernetes' default
/// `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE: u64 = 30;

/// An assumption, not a measurement: how long an evicted pod usually
/// takes to shut down once its eviction is accepted, when its grace
/// period allows that long. A grace period is a ceiling, not a duration:
/// the default router's is 3600 s and it shuts down in about a minute,
/// Prometheus's is 600 s; most pods exit on SIGTERM in seconds. The
/// drain's P50 takes each pod's shutdown as this, bounded by its grace
/// period; its P90 takes the whole grace period.
pub const TYPICAL_SHUTDOWN: u64 = 60;

/// An assumption, not a measurement: how long an evicted pod's replacement
/// takes to be scheduled, start and pass its readiness probe, so that its
/// PodDisruptionBudget allows the next eviction. The plan cannot know a
/// workload's start-up time.
pub const REPLACEMENT_READY: u64 = 2 * 60;

/// How long the machine-config daemon keeps retrying a drain before it
/// reports the node Degraded ("failed to drain node … after 1 hour"); it
/// keeps retrying after that.
pub const DRAIN_DEGRADED_AFTER: u64 = 60 * 60;

/// A pod's grace period, in seconds: its own (never below 0), else the
/// default.
pub fn grace(seconds: Option<i64>) -> u64 {
    seconds.map_or(DEFAULT_GRACE, |s| u64::try_from(s).unwrap_or(0))
}

/// How long a pod of this grace period usually takes to shut down: the
/// typical shutdown, bounded by its grace period.
pub fn shutdown(grace: u64) -> u64 {
    grace.min(TYPICAL_SHUTDOWN)
}

/// A node's whole update: its drain, then `after_drain`, its update and
/// its reboot.
pub fn node(drain: u64, after_drain: u64) -> u64 {
    drain.saturating_add(after_drain)
}

/// How long nodes of these durations take, in this order, when at most
/// `slots` update at once and the next starts as soon as one returns (the
/// machine-config operator's rolling window: it picks new candidates each
/// time a node finishes, never waiting for a whole batch).
pub fn rollout(durations: impl IntoIterator<Item = u64>, slots: usize) -> u64 {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let slots = slots.max(1);
    let mut ends: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(slots);
    let mut last = 0;
    for seconds in durations {
        let start = if ends.len() < slots {
            0
        } else {
            ends.pop().map_or(0, |Reverse(end)| end)
        };
        let end = start.saturating_add(seconds);
        last = last.max(end);
        ends.push(Reverse(end));
    }
    last
}

/// A duration as a person reads it: `1h05m`, `12m`, `45s` (the model's
/// words, which the webhook's line says too).
pub use crate::model::results::duration_words as words;

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::unset(None, 30)]
    #[case::own(Some(120), 120)]
    #[case::zero(Some(0), 0)]
    #[case::garbage_negative(Some(-5), 0)]
    fn grace_periods(#[case] given: Option<i64>, #[case] seconds: u64) {
        assert_eq!(grace(given), seconds);
    }

    #[rstest]
    #[case::a_router_shuts_down_in_about_a_minute(3600, 60)]
    #[case::prometheus(600, 60)]
    #[case::the_default(DEFAULT_GRACE, 30)]
    #[case::at_once(0, 0)]
    fn a_pods_shutdown_is_bounded_by_its_grace_period(#[case] grace: u64, #[case] seconds: u64) {
        assert_eq!(shutdown(grace), seconds);
    }

    #[rstest]
    #[case::no_drain(0, 600)]
    #[case::a_minute(60, 660)]
    #[case::unknown(DRAIN_UNKNOWN, 1200)]
    #[case::saturates(u64::MAX, u64::MAX)]
    fn a_node_is_its_drain_then_update_then_reboot(#[case] drain: u64, #[case] total: u64) {
        assert_eq!(node(drain, NODE_UPDATE + NODE_REBOOT), total);
    }

    #[rstest]
    #[case::alike_in_whole_batches(&[600, 600, 600, 600], 2, 1200)]
    // A slow node keeps one slot; the others refill the second.
    #[case::a_slow_node_does_not_hold_the_rest(&[1800, 600, 600, 600], 2, 1800)]
    #[case::one_at_a_time(&[600, 300], 1, 900)]
    #[case::nothing(&[], 3, 0)]
    #[case::no_slot_is_one(&[60, 60], 0, 120)]
    fn a_rollout_refills_as_nodes_return(
        #[case] durations: &[u64],
        #[case] slots: usize,
        #[case] seconds: u64,
    ) {
        assert_eq!(rollout(durations.iter().copied(), slots), seconds);
    }

    #[rstest]
    #[case(45, "45s")]
    #[case(720, "12m")]
    #[case(3900, "1h05m")]
    #[case(36000, "10h00m")]
    fn durations_in_words(#[case] seconds: u64, #[case] said: &str) {
        assert_eq!(words(seconds), said);
    }
}
