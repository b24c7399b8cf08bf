//! The control-plane phase: how long this cluster's own completed updates
//! took (`status.history`: `completionTime - startedTime`), by kind, else
//! the documented range.

use jiff::Timestamp;
use serde::Serialize;

use super::duration::CONTROL_PLANE_DOCUMENTED;
use crate::model::cluster_version::UpdateHistory;
use crate::model::release::{UpdateKind, Version};

/// Fewer completed updates of the kind than this, and the plan takes the
/// documented range instead.
pub const MIN_SAMPLES: usize = 3;

/// How many of the most recent completed updates of the kind the P50 is
/// read from (the P90 is read from all of them).
pub const RECENT: usize = 5;

/// One completed update of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    pub version: String,
    /// Patch, minor or major, from the version before it; `None` when
    /// either version cannot be read.
    pub kind: Option<UpdateKind>,
    pub seconds: u64,
    pub completed_at: Timestamp,
}

/// The control plane's estimate.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    /// `history` or `documented`.
    pub source: &'static str,
    /// How many completed updates it was computed from.
    pub samples: usize,
    /// What it was computed from, in words.
    pub basis: String,
}

/// The completed updates of `history` (newest first, as the CVO writes
/// it), oldest first; the install (the oldest entry) is none, nor is an
/// entry without both times, one that ends before it starts, or one that
/// completed after `now` (the time of the data).
pub fn completed_updates(history: &[UpdateHistory], now: Timestamp) -> Vec<Completed> {
    let mut completed = Vec::new();
    // Each entry with the one before it in time (the next in the list).
    for (entry, before) in history.iter().zip(history.iter().skip(1)) {
        if entry.state != "Completed" {
            continue;
        }
        let (Some(started), Some(done)) = (entry.started_time, entry.completion_time) else {
            continue;
        };
        if done > now || done < started {
            continue;
        }
        let kind = Version::parse(&before.version)
            .zip(Version::parse(&entry.version))
            .map(|(from, to)| UpdateKind::between(&from, &to));
        completed.push(Completed {
            version: entry.version.clone(),
            kind,
            seconds: done.duration_since(started).as_secs().unsigned_abs(),
            completed_at: done,
        });
    }
    completed.reverse();
    completed
}

/// The P50 and P90 of the completed updates of `kind` (every completed
/// update when the kind is not known), else the documented range.
pub fn estimate(completed: &[Completed], kind: Option<UpdateKind>) -> ControlPlane {
    let mut seconds: Vec<u64> = completed
        .iter()
        .filter(|c| kind.is_none() || c.kind == kind)
        .map(|c| c.seconds)
        .collect();
    // The typical update is the recent ones' (a cluster's durations drift
    // as it grows); how long one can take is the whole history's.
    let mut recent = seconds[seconds.len().saturating_sub(RECENT)..].to_vec();
    recent.sort_unstable();
    let what = match kind {
        Some(kind) => format!("{kind:?} updates").to_lowercase(),
        None => "updates (the update's kind is not known)".to_owned(),
    };
    if seconds.len() < MIN_SAMPLES {
        let (p50, p90) = CONTROL_PLANE_DOCUMENTED;
        return ControlPlane {
            p50_seconds: p50,
            p90_seconds: p90,
            source: "documented",
            samples: seconds.len(),
            basis: format!(
                "the documented 60 to 120 minutes: the history holds {} completed {what}, fewer than {MIN_SAMPLES}",
                seconds.len()
            ),
        };
    }
    seconds.sort_unstable();
    let p90 = percentile(&seconds, 90);
    let p50 = percentile(&recent, 50).min(p90);
    ControlPlane {
        p50_seconds: p50,
        p90_seconds: p90,
        source: "history",
        samples: seconds.len(),
        basis: format!(
            "this cluster's {} completed {what} (the P50 of the last {})",
            seconds.len(),
            recent.len(),
        ),
    }
}

/// The nearest-rank percentile of sorted, non-empty `values`.
pub fn percentile(sorted: &[u64], percent: usize) -> u64 {
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const NOW: &str = "2026-11-30T12:00:00Z";

    /// A history entry: `version`, completed `minutes` after it started,
    /// `days` before NOW.
    fn entry(version: &str, days: i64, minutes: i64) -> UpdateHistory {
        let now: Timestamp = NOW.parse().unwrap();
        let started = now - jiff::SignedDuration::from_hours(24 * days);
        UpdateHistory {
            state: "Completed".into(),
            version: version.into(),
            started_time: Some(started),
            completion_time: Some(started + jiff::SignedDuration::from_mins(minutes)),
            ..Default::default()
        }
    }

    /// Newest first, as the CVO writes it; the last is the install.
    fn history() -> Vec<UpdateHistory> {
        vec![
            entry("4.15.9", 1, 80),
            entry("4.15.8", 10, 70),
            entry("4.15.7", 20, 50),
            entry("4.15.0", 30, 110),
            entry("4.14.20", 40, 60),
            entry("4.14.10", 50, 40),
        ]
    }

    #[test]
    fn the_install_and_bad_entries_are_no_updates() {
        let mut h = history();
        h[1].completion_time = None;
        h[2].completion_time =
            Some(h[2].started_time.unwrap() - jiff::SignedDuration::from_mins(1));
        h[0].state = "Partial".into();
        let done = completed_updates(&h, NOW.parse().unwrap());
        let versions: Vec<&str> = done.iter().map(|c| c.version.as_str()).collect();
        assert_eq!(versions, ["4.14.20", "4.15.0"]);
        assert_eq!(done[1].kind, Some(UpdateKind::Minor));
        assert_eq!(done[0].seconds, 3600);
    }

    /// The update from 4.22 to 5.0 is a minor update's sample, and one
    /// within 5.0 a patch's, by the model's one rule of kinds.
    #[test]
    fn the_update_to_5_0_is_sampled_as_a_minor_update() {
        let h = vec![
            entry("5.0.2", 1, 30),
            entry("5.0.1", 10, 90),
            entry("4.22.7", 20, 40),
        ];
        let done = completed_updates(&h, NOW.parse().unwrap());
        let kinds: Vec<_> = done.iter().map(|c| (c.version.as_str(), c.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("5.0.1", Some(UpdateKind::Minor)),
                ("5.0.2", Some(UpdateKind::Patch))
            ]
        );
        assert_eq!(estimate(&done, Some(UpdateKind::Minor)).samples, 1);
    }

    #[test]
    fn updates_completed_after_the_time_of_the_data_are_left_out() {
        let early: Timestamp = "2026-11-25T12:00:00Z".parse().unwrap();
        let done = completed_updates(&history(), early);
        assert_eq!(done.last().unwrap().version, "4.15.8");
    }

    #[rstest]
    #[case::patch_from_history(Some(UpdateKind::Patch), "history", 4, 60 * 60, 80 * 60)]
    #[case::minor_falls_back(Some(UpdateKind::Minor), "documented", 1, 3600, 7200)]
    #[case::kind_unknown_takes_all(None, "history", 5, 70 * 60, 110 * 60)]
    fn estimates(
        #[case] kind: Option<UpdateKind>,
        #[case] source: &str,
        #[case] samples: usize,
        #[case] p50: u64,
        #[case] p90: u64,
    ) {
        let done = completed_updates(&history(), NOW.parse().unwrap());
        let cp = estimate(&done, kind);
        assert_eq!(
            (cp.source, cp.samples, cp.p50_seconds, cp.p90_seconds),
            (source, samples, p50, p90),
            "{}",
            cp.basis
        );
    }

    #[test]
    fn the_fallback_says_why() {
        let cp = estimate(&[], Some(UpdateKind::Minor));
        assert_eq!(
            cp.basis,
            "the documented 60 to 120 minutes: the history holds 0 completed minor updates, fewer than 3"
        );
    }

    #[rstest]
    #[case(&[5], 50, 5)]
    #[case(&[1, 2, 3], 50, 2)]
    #[case(&[1, 2, 3], 90, 3)]
    #[case(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90, 9)]
    #[case(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50, 5)]
    fn nearest_rank(#[case] sorted: &[u64], #[case] percent: usize, #[case] value: u64) {
        assert_eq!(percentile(sorted, percent), value);
    }
}
