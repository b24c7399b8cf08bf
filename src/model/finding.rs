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
    /// The names OpenShift gives what the finding is about (see
    /// [`super::risks`]), each acceptable beside the check's own name.
    pub risks: Vec<String>,
    /// The whole list the message shortens ("a, b and 4 more"), for the
    /// JSON and YAML report and the status; empty when nothing was cut.
    pub items: Vec<String>,
}

impl Finding {
    pub fn pass(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Pass,
            message: message.into(),
            url: None,
            severity: None,
            risks: Vec::new(),
            items: Vec::new(),
        }
    }
    pub fn fail(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Fail,
            message: message.into(),
            url: None,
            severity: None,
            risks: Vec::new(),
            items: Vec::new(),
        }
    }
    /// The check could not decide, e.g. for want of data.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error,
            message: message.into(),
            url: None,
            severity: None,
            risks: Vec::new(),
            items: Vec::new(),
        }
    }
    pub fn skipped(message: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Skipped,
            message: message.into(),
            url: None,
            severity: None,
            risks: Vec::new(),
            items: Vec::new(),
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
    /// The finding with the whole of `items`, when its message lists only
    /// the first `shown` of them ([`super::text::list`]).
    pub(crate) fn with_items(mut self, items: &[String], shown: usize) -> Self {
        if items.len() > shown {
            self.items = items.to_vec();
        }
        self
    }

    /// The finding with the names OpenShift gives what it is about, each
    /// kept once, in their order.
    pub(crate) fn with_risks<S: Into<String>>(
        mut self,
        risks: impl IntoIterator<Item = S>,
    ) -> Self {
        for risk in risks {
            let risk = risk.into();
            if !risk.is_empty() && !self.risks.contains(&risk) {
                self.risks.push(risk);
            }
        }
        self
    }
}
