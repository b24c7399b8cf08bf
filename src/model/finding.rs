//! What a check concluded, before it is a result: built-in checks return
//! it, and a Job's output is read into it.

use super::results::{Outcome, Severity};

/// What a check concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub outcome: Outcome,
    pub message: String,
    pub url: Option<String>,
    /// A severity for this finding other than the check's own: a Blocking
    /// check may find something that only warrants a warning (a paused
    /// pool, a target unknown to the update graph, no alert data).
    pub severity: Option<Severity>,
}

impl Finding {
    pub fn pass(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Pass,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Fail,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    /// The check could not decide, e.g. for want of data.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    pub fn skipped(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Skipped,
            message: message.into(),
            url: None,
            severity: None,
        }
    }
    /// A failure that only warns, whatever the check's severity.
    pub(crate) fn warn(message: impl Into<String>) -> Self {
        Self {
            severity: Some(Severity::Warning),
            ..Self::fail(message)
        }
    }
    pub(crate) fn with_url(mut self, url: &str) -> Self {
        self.url = Some(url.to_owned());
        self
    }
}
