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
/// read from.
pub const RECENT: usize = 5;

/// How many of the most recent completed updates of the kind the P90 is
/// read from: recent enough that a cluster's slow years do not hold every
/// window shut, enough of them that a slow update is in it
/// (`cargo bench --bench plan_backtest` measured its coverage,
/// docs/benchmarks.md).
pub const RECENT_P90: usize = 20;

/// One completed update of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    pub version: String,
    /// Patch, minor or major, from the version before it; `None` when
    /// either version cannot be read, for a pre-release step and for a
    /// migration of the payload's architecture.
    pub kind: Option<UpdateKind>,
    /// To or from an engineering candidate, release candidate or nightly:
    /// no patch, whatever its numbers.
    pub pre_release: bool,
    /// The same version on another payload (a migration to the
    /// multi-architecture one): no patch either.
    pub migration: bool,
    pub seconds: u64,
    pub completed_at: Timestamp,
}

/// The control plane's estimate.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    /// `history`, `documented`, `done` (it has updated: only the pools
    /// are left) or `none` (a migration of the payload's architecture,
    /// which nobody estimates: oc says N/A).
    #[serde(rename = "source")]
    pub origin: &'static str,
    /// How many completed updates it was computed from.
    pub samples: usize,
    /// What it was computed from, in words.
    pub basis: String,
}

impl ControlPlane {
    /// The control plane has updated: nothing of it is left.
    pub fn done() -> Self {
        Self {
            p50_seconds: 0,
            p90_seconds: 0,
            origin: "done",
            samples: 0,
            basis:
                "it has updated (the history's newest entry is Completed): only the pools are left"
                    .to_owned(),
        }
    }

    /// A migration to the multi-architecture payload: no estimate, as
    /// `oc adm upgrade status` gives none (N/A); the documented range is
    /// kept so that a window can still be judged, and said to be no
    /// estimate.
    pub fn migration() -> Self {
        let (p50, p90) = CONTROL_PLANE_DOCUMENTED;
        Self {
            p50_seconds: p50,
            p90_seconds: p90,
            origin: "none",
            samples: 0,
            basis: "N/A: a migration to the multi-architecture payload replaces every image, and neither the history nor oc adm upgrade status estimates it (oc says N/A); the documented 60 to 120 minutes stand in for it".to_owned(),
        }
    }
}

/// Whether `history[0]` is a migration of the payload's architecture
/// under way: not completed, at the version the entry before it
/// completed, on another image. (The plan's own reading of the history,
/// as it reads completed migrations; `ClusterVersion::multi_migration`
/// says whether the cluster is migrating to the multi-architecture
/// payload, for the report and the decision.)
pub fn migration_under_way(history: &[UpdateHistory]) -> bool {
    match (history.first(), history.get(1)) {
        (Some(now), Some(before)) => now.state != "Completed" && is_migration(before, now),
        _ => false,
    }
}

/// The same version, another image: the payload's architecture changed.
fn is_migration(before: &UpdateHistory, entry: &UpdateHistory) -> bool {
    !entry.version.is_empty()
        && entry.version == before.version
        && !entry.image.is_empty()
        && !before.image.is_empty()
        && entry.image != before.image
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
        let versions = Version::parse(&before.version).zip(Version::parse(&entry.version));
        let pre_release = versions
            .as_ref()
            .is_some_and(|(from, to)| from.pre.is_some() || to.pre.is_some());
        let migration = is_migration(before, entry);
        let kind = versions
            .filter(|_| !pre_release && !migration)
            .map(|(from, to)| UpdateKind::between(&from, &to));
        completed.push(Completed {
            version: entry.version.clone(),
            kind,
            pre_release,
            migration,
            seconds: done.duration_since(started).as_secs().unsigned_abs(),
            completed_at: done,
        });
    }
    completed.reverse();
    completed
}

/// The P50 and P90 of the completed updates of `kind` (every completed
/// update but migrations when the kind is not known), else the documented
/// range.
pub fn estimate(completed: &[Completed], kind: Option<UpdateKind>) -> ControlPlane {
    let seconds: Vec<u64> = completed
        .iter()
        .filter(|c| match kind {
            Some(_) => c.kind == kind,
            None => !c.migration,
        })
        .map(|c| c.seconds)
        .collect();
    let what = match kind {
        Some(kind) => format!("{kind:?} updates").to_lowercase(),
        None => "updates (the update's kind is not known)".to_owned(),
    };
    of(&seconds, &what)
}

/// The P50 and P90 of the completed pre-release steps (to or from an
/// engineering candidate, release candidate or nightly), for a target
/// that is one, else the documented range.
pub fn estimate_pre_release(completed: &[Completed]) -> ControlPlane {
    let seconds: Vec<u64> = completed
        .iter()
        .filter(|c| c.pre_release && !c.migration)
        .map(|c| c.seconds)
        .collect();
    of(&seconds, "pre-release steps")
}

/// The estimate from `seconds`, oldest first, of updates of `what`.
fn of(seconds: &[u64], what: &str) -> ControlPlane {
    if seconds.len() < MIN_SAMPLES {
        let (p50, p90) = CONTROL_PLANE_DOCUMENTED;
        return ControlPlane {
            p50_seconds: p50,
            p90_seconds: p90,
            origin: "documented",
            samples: seconds.len(),
            basis: format!(
                "the documented 60 to 120 minutes: the history holds {} completed {what}, fewer than {MIN_SAMPLES}",
                seconds.len()
            ),
        };
    }
    // The typical update, and how long one can take, are the recent
    // ones' (a cluster's durations drift as it grows).
    let recent = |n: usize| {
        let mut last = seconds[seconds.len().saturating_sub(n)..].to_vec();
        last.sort_unstable();
        last
    };
    let (p50s, p90s) = (recent(RECENT), recent(RECENT_P90));
    let p90 = percentile(&p90s, 90);
    let p50 = percentile(&p50s, 50).min(p90);
    ControlPlane {
        p50_seconds: p50,
        p90_seconds: p90,
        origin: "history",
        samples: seconds.len(),
        basis: format!(
            "this cluster's {} completed {what} (the P50 of the last {}, the P90 of the last {})",
            seconds.len(),
            p50s.len(),
            p90s.len(),
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

    /// Steps between engineering candidates, release candidates and
    /// nightlies are no patch updates, nor is a migration to the
    /// multi-architecture payload at the same version.
    #[test]
    fn pre_release_steps_and_migrations_are_no_patches() {
        let mut h = vec![
            entry("4.16.2", 1, 200),
            entry("4.16.2", 5, 60),
            entry("4.16.1", 10, 50),
            entry("4.16.0-rc.1", 20, 30),
            entry("4.16.0-ec.3", 30, 20),
            entry("4.16.0-0.nightly-2024-02-01-000000", 40, 25),
            entry("4.15.0", 50, 40),
        ];
        h[0].image = "quay.io/r/release@sha256:multi".into();
        h[1].image = "quay.io/r/release@sha256:amd64".into();
        let done = completed_updates(&h, NOW.parse().unwrap());
        let said: Vec<_> = done
            .iter()
            .map(|c| (c.version.as_str(), c.kind, c.pre_release, c.migration))
            .collect();
        assert_eq!(
            said,
            [
                ("4.16.0-0.nightly-2024-02-01-000000", None, true, false),
                ("4.16.0-ec.3", None, true, false),
                ("4.16.0-rc.1", None, true, false),
                ("4.16.1", None, true, false),
                ("4.16.2", Some(UpdateKind::Patch), false, false),
                ("4.16.2", None, false, true),
            ]
        );
        assert_eq!(estimate(&done, Some(UpdateKind::Patch)).samples, 1);
        let pre = estimate_pre_release(&done);
        // 20, 25, 30 and 50 minutes (4.16.1 is a step from a release candidate).
        assert_eq!(
            (pre.samples, pre.p50_seconds),
            (4, 25 * 60),
            "{}",
            pre.basis
        );
        // A migration under way: no estimate, as oc says N/A.
        h[0].state = "Partial".into();
        assert!(migration_under_way(&h));
        assert!(!migration_under_way(&h[1..]));
        assert_eq!(ControlPlane::migration().origin, "none");
    }

    /// The P90 is the recent updates', as the P50 is: years-old slow
    /// updates no longer hold it up.
    #[test]
    fn the_p90_is_the_recent_updates() {
        // Newest first: twenty patch updates of 60 minutes, then ten of 600.
        let mut h: Vec<UpdateHistory> = (0..30)
            .map(|i| {
                let minutes = if i < 20 { 60 } else { 600 };
                entry(&format!("4.15.{}", 40 - i), 1 + i as i64 * 10, minutes)
            })
            .collect();
        h.push(entry("4.15.0", 400, 60));
        let done = completed_updates(&h, NOW.parse().unwrap());
        let cp = estimate(&done, Some(UpdateKind::Patch));
        assert_eq!(
            (cp.samples, cp.p50_seconds, cp.p90_seconds),
            (30, 3600, 3600),
            "{}",
            cp.basis
        );
        assert_eq!(
            cp.basis,
            "this cluster's 30 completed patch updates (the P50 of the last 5, the P90 of the last 20)"
        );
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
        #[case] origin: &str,
        #[case] samples: usize,
        #[case] p50: u64,
        #[case] p90: u64,
    ) {
        let done = completed_updates(&history(), NOW.parse().unwrap());
        let cp = estimate(&done, kind);
        assert_eq!(
            (cp.origin, cp.samples, cp.p50_seconds, cp.p90_seconds),
            (origin, samples, p50, p90),
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
