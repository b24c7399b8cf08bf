//! The maintenance window, in one place: the claim that sets it, how its
//! end is read, how an update's plan meets it (its P90, started now), the
//! words that say so, and the finding `check --window-end` reports. The
//! webhook's window rule (`admission::decision::window`) and `check` read
//! it here, so they cannot disagree.

use std::time::Duration;

use jiff::Timestamp;

use super::results::{CheckResult, Outcome, Severity, duration_words};

/// The annotation on the ClusterVersion that ends the maintenance window an
/// update must fit in: an RFC 3339 time. A `preflight.dev/` claim, so
/// writing it needs the `override` verb and `preflight.dev/claimed-by`.
pub const WINDOW_END: &str = "preflight.dev/window-end";

/// The finding of `check --window-end`: whether the update fits the
/// maintenance window. The window is the administrator's own rule, so no
/// name accepts it: moving the window, or an override, is the way on.
pub const MAINTENANCE_WINDOW: &str = "MaintenanceWindow";

/// How an update's plan meets a maintenance window: an update started at
/// a time fits a window ending at `end` when it ends by then at its plan's
/// P90.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowFit {
    /// The window's end.
    pub end: Timestamp,
    /// When the update ends at its P90, started at the time given.
    pub p90_end: Timestamp,
    /// The plan's P90, in seconds.
    pub p90_seconds: u64,
}

impl WindowFit {
    /// An update of P90 `p90_seconds` started at `now`, against a window
    /// ending at `end`.
    pub fn new(end: Timestamp, now: Timestamp, p90_seconds: u64) -> Self {
        let p90_end = i64::try_from(p90_seconds)
            .ok()
            .and_then(|s| now.checked_add(jiff::SignedDuration::from_secs(s)).ok())
            .unwrap_or(Timestamp::MAX);
        Self {
            end,
            p90_end,
            p90_seconds,
        }
    }

    /// Whether the update ends, at its P90, by the window's end.
    pub fn fits(&self) -> bool {
        self.p90_end <= self.end
    }

    /// How the plan meets the window, in words: `its P90 of 2h00m from now
    /// ends …, after the maintenance window's end … (<what>)`, `what`
    /// naming where the window was set.
    pub fn words(&self, what: &str) -> String {
        format!(
            "its P90 of {} from now ends {}, {} the maintenance window's end {} ({what})",
            duration_words(self.p90_seconds),
            super::text::at(self.p90_end),
            if self.fits() { "by" } else { "after" },
            super::text::at(self.end),
        )
    }

    /// The window as a result a report counts: a blocking failure when the
    /// update may not finish within it, which no name accepts
    /// ([`MAINTENANCE_WINDOW`]); `what` names where the window was set.
    pub fn finding(&self, what: &str) -> CheckResult {
        let words = self.words(what);
        let (outcome, text) = if self.fits() {
            (
                Outcome::Pass,
                format!("the update fits the maintenance window: {words}"),
            )
        } else {
            (
                Outcome::Fail,
                format!(
                    "the update may not finish within the maintenance window: {words}; update in a window that ends later, or make the update shorter (docs/plan.md)"
                ),
            )
        };
        CheckResult::new(MAINTENANCE_WINDOW, Severity::Blocking, outcome, text)
    }
}

/// A window's end as `what` gives it (the annotation, or `--window-end`):
/// an RFC 3339 time after `now` and, with `max`, at most that far ahead,
/// as every claim's time is. `Err` says what is wrong with it.
pub fn end(
    what: &str,
    text: &str,
    now: Timestamp,
    max: Option<Duration>,
) -> Result<Timestamp, String> {
    let end: Timestamp = text.trim().parse().map_err(|_| {
        format!(
            "{what} {:?} is not an RFC 3339 time (such as 2026-11-30T22:00:00Z)",
            super::text::clean(text, 80)
        )
    })?;
    if end <= now {
        return Err(format!("{what} {end} has passed"));
    }
    if let Some(max) = max {
        let latest = now
            .checked_add(max)
            .map_err(|_| format!("--max-window-ahead {max:?} is out of range"))?;
        if end > latest {
            return Err(format!(
                "{what} {end} is more than {} ahead (--max-window-ahead)",
                humantime::format_duration(max)
            ));
        }
    }
    Ok(end)
}
