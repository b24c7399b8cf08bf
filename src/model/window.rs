//! The maintenance window, in one place: the claim that sets it, how its
//! end is read, how an update's plan meets it (its P90, started now), the
//! words that say so, and the finding `check --window-end` reports. The
//! webhook's window rule (`admission::decision::window`) and `check` read
//! it here, so they cannot disagree.

use std::time::Duration;

use jiff::Timestamp;

use super::results::{CheckResult, Outcome, Severity, duration_words};

pub use super::annotations::WINDOW_END;

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

/// A claimed time that cannot be taken, as [`claimed_time`] reads it: each
/// variant says, in a sentence, what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The text is no RFC 3339 time; `text` is as it is shown.
    #[error("{what} {text:?} is not an RFC 3339 time{}", kind.example())]
    NotATime {
        what: String,
        text: String,
        kind: TimeKind,
    },
    /// The time is not after now.
    #[error("{what} {time} has passed")]
    Passed { what: String, time: Timestamp },
    /// The furthest a time may be ahead, added to now, is no time.
    #[error("{flag} {max:?} is out of range")]
    OutOfRange { flag: &'static str, max: Duration },
    /// The time is further ahead than `flag` allows.
    #[error("{what} {time} is more than {} ahead ({flag})", humantime::format_duration(*max))]
    TooFarAhead {
        what: String,
        time: Timestamp,
        max: Duration,
        flag: &'static str,
    },
}

/// Which claimed time [`claimed_time`] reads: the two read their text, and
/// name the flag that bounds them, differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeKind {
    /// A maintenance window's end (the annotation, or `--window-end`): its
    /// text is trimmed, one that is no time is shown cleaned with an
    /// example, and `--max-window-ahead` bounds it.
    WindowEnd,
    /// When an override or accept claim stops counting (its `-until`
    /// annotation): its text is read as written, and
    /// `--max-override-duration` bounds it.
    ClaimUntil,
}

impl TimeKind {
    /// The flag that sets how far ahead such a time may be.
    pub fn flag(self) -> &'static str {
        match self {
            Self::WindowEnd => "--max-window-ahead",
            Self::ClaimUntil => "--max-override-duration",
        }
    }

    /// What follows "is not an RFC 3339 time" in a refusal.
    fn example(self) -> &'static str {
        match self {
            Self::WindowEnd => " (such as 2026-11-30T22:00:00Z)",
            Self::ClaimUntil => "",
        }
    }
}

/// A time a claim names, as `what` gives it: an RFC 3339 time after `now`
/// and, with `max`, at most that far ahead. The one reading of every
/// claimed time, a window's end ([`end`]) and a claim's `-until` alike;
/// `kind` says which. `Err` says what is wrong with it.
pub fn claimed_time(
    kind: TimeKind,
    what: &str,
    text: &str,
    now: Timestamp,
    max: Option<Duration>,
) -> Result<Timestamp, TimeError> {
    let read = match kind {
        TimeKind::WindowEnd => text.trim(),
        TimeKind::ClaimUntil => text,
    };
    let time: Timestamp = read.parse().map_err(|_| TimeError::NotATime {
        what: what.to_owned(),
        text: match kind {
            TimeKind::WindowEnd => super::text::clean(text, 80),
            TimeKind::ClaimUntil => text.to_owned(),
        },
        kind,
    })?;
    if time <= now {
        return Err(TimeError::Passed {
            what: what.to_owned(),
            time,
        });
    }
    if let Some(max) = max {
        let flag = kind.flag();
        let latest = now
            .checked_add(max)
            .map_err(|_| TimeError::OutOfRange { flag, max })?;
        if time > latest {
            return Err(TimeError::TooFarAhead {
                what: what.to_owned(),
                time,
                max,
                flag,
            });
        }
    }
    Ok(time)
}

/// A window's end as `what` gives it (the annotation, or `--window-end`):
/// an RFC 3339 time after `now` and, with `max`, at most that far ahead,
/// as every claim's time is ([`claimed_time`]). `Err` says what is wrong
/// with it.
pub fn end(
    what: &str,
    text: &str,
    now: Timestamp,
    max: Option<Duration>,
) -> Result<Timestamp, TimeError> {
    claimed_time(TimeKind::WindowEnd, what, text, now, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-30T20:00:00Z";

    fn read(kind: TimeKind, text: &str, max: Option<Duration>) -> Result<Timestamp, String> {
        claimed_time(kind, "k", text, NOW.parse().unwrap(), max).map_err(|e| e.to_string())
    }

    #[test]
    fn a_window_end_and_a_claims_until_are_read_alike_but_for_their_text_and_flag() {
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(
            read(TimeKind::WindowEnd, " 2026-11-30T20:30:00Z ", hour),
            Ok("2026-11-30T20:30:00Z".parse().unwrap())
        );
        assert_eq!(
            read(TimeKind::ClaimUntil, " 2026-11-30T20:30:00Z ", hour).unwrap_err(),
            r#"k " 2026-11-30T20:30:00Z " is not an RFC 3339 time"#
        );
        assert_eq!(
            read(TimeKind::WindowEnd, "soon", hour).unwrap_err(),
            r#"k "soon" is not an RFC 3339 time (such as 2026-11-30T22:00:00Z)"#
        );
        assert_eq!(
            read(TimeKind::ClaimUntil, "2026-11-30T19:00:00Z", hour).unwrap_err(),
            "k 2026-11-30T19:00:00Z has passed"
        );
        assert_eq!(
            read(TimeKind::WindowEnd, "2026-11-30T22:00:00Z", hour).unwrap_err(),
            "k 2026-11-30T22:00:00Z is more than 1h ahead (--max-window-ahead)"
        );
        assert_eq!(
            read(TimeKind::ClaimUntil, "2026-11-30T22:00:00Z", hour).unwrap_err(),
            "k 2026-11-30T22:00:00Z is more than 1h ahead (--max-override-duration)"
        );
        assert!(read(TimeKind::WindowEnd, "2030-01-01T00:00:00Z", None).is_ok());
    }
}
