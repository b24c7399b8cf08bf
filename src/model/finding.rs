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
    /// What the finding is about, by name (a node, an operator, a pool, a
    /// PodDisruptionBudget): the same from run to run, where the message
    /// and items say for how long. An accept records them and asks again
    /// when one is new. Boxed: most findings have none, and a finding is
    /// returned as an error throughout the checks.
    pub subjects: Box<[String]>,
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
            subjects: Box::default(),
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
            subjects: Box::default(),
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
            subjects: Box::default(),
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
            subjects: Box::default(),
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

    /// The finding about `subjects`, by name, each kept once, sorted.
    pub(crate) fn with_subjects<S: Into<String>>(
        mut self,
        subjects: impl IntoIterator<Item = S>,
    ) -> Self {
        let mut all = std::mem::take(&mut self.subjects).into_vec();
        all.extend(subjects.into_iter().map(Into::into));
        all.sort();
        all.dedup();
        self.subjects = all.into_boxed_slice();
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
