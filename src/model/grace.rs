//! How long a state may last before it counts against an update: a cluster
//! in motion (pods rolling, an operator restarting) passes through states
//! that would block if they stayed. The thresholds are OpenShift's own,
//! named once here with their sources.

use std::time::Duration;

use jiff::Timestamp;

/// A ClusterOperator not Available for less than this is settling:
/// `oc adm upgrade status` raises nothing before it (its
/// `unavailableWarningThreshold`, 5 minutes; its error threshold is 20).
pub const UNAVAILABLE: Duration = Duration::from_secs(5 * 60);

/// A ClusterOperator Degraded for less than this is settling: `oc adm
/// upgrade status`'s `degradedWarningThreshold`, 5 minutes (its error
/// threshold is 40).
pub const DEGRADED: Duration = Duration::from_secs(5 * 60);

/// The `for` of the CVO's `ClusterOperatorDown` alert
/// (`cluster_operator_up == 0`): the alert's name is a state's only once
/// it has lasted this long.
pub const CLUSTER_OPERATOR_DOWN_FOR: Duration = Duration::from_secs(10 * 60);

/// The `for` of the CVO's `ClusterOperatorDegraded` alert.
pub const CLUSTER_OPERATOR_DEGRADED_FOR: Duration = Duration::from_secs(30 * 60);

/// How long a state that began `since` has lasted at `now`; `None` when
/// the data does not say when it began.
pub fn lasted(since: Option<Timestamp>, now: Timestamp) -> Option<Duration> {
    since.map(|since| {
        now.duration_since(since)
            .try_into()
            .unwrap_or(Duration::ZERO)
    })
}

/// Whether a state that began `since` is still within `grace` at `now`. A
/// state whose start is unknown has lasted too long: a missing time is
/// never taken for a recent one.
pub fn settling(since: Option<Timestamp>, now: Timestamp, grace: Duration) -> bool {
    lasted(since, now).is_some_and(|lasted| lasted < grace)
}

/// Whether a state that began `since` has lasted `for_` at `now` (an
/// alert with that `for` would be firing); an unknown start counts as
/// long enough.
pub fn would_fire(since: Option<Timestamp>, now: Timestamp, for_: Duration) -> bool {
    lasted(since, now).is_none_or(|lasted| lasted >= for_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const NOW: &str = "2026-11-30T12:00:00Z";

    fn ago(seconds: i64) -> Option<Timestamp> {
        let now: Timestamp = NOW.parse().unwrap();
        Some(now - jiff::SignedDuration::from_secs(seconds))
    }

    #[rstest]
    #[case::a_second(ago(1), true, false)]
    #[case::just_under_five_minutes(ago(299), true, false)]
    #[case::five_minutes(ago(300), false, false)]
    #[case::ten_minutes(ago(600), false, true)]
    #[case::unknown_start(None, false, true)]
    #[case::a_clock_ahead_of_the_data(ago(-60), true, false)]
    fn an_unavailable_operator_settles_for_five_minutes_and_is_down_after_ten(
        #[case] since: Option<Timestamp>,
        #[case] is_settling: bool,
        #[case] fires: bool,
    ) {
        let now = NOW.parse().unwrap();
        assert_eq!(settling(since, now, UNAVAILABLE), is_settling);
        assert_eq!(would_fire(since, now, CLUSTER_OPERATOR_DOWN_FOR), fires);
    }
}
