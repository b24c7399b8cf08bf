//! The maintenance window's limits on a verdict: an update that may not
//! finish within it, or a window that cannot be read, is denied. The
//! window itself (its claim, its end, how a plan meets it) is the model's
//! (`model::window`), shared with `check --window-end`.

use std::time::Duration;

use jiff::Timestamp;

use super::results::{Judgement, WindowBasis};
use super::verdict::{Effect, EventNote, Reason, Verdict};
use crate::admission::message;
use crate::model::cluster_version::Target;

/// What a window's verdict needs besides the window.
pub(super) struct WindowLimits<'a> {
    pub(super) target: &'a Target,
    pub(super) terms: message::ClaimTerms,
    /// Whether a run may be asked for the target.
    /// Whether the gate checks the target by itself (the graph offers it).
    pub(super) runs_itself: bool,
    pub(super) retry: Duration,
}

impl WindowLimits<'_> {
    /// The verdict and the accept's, with the maintenance window applied:
    /// an update that may not finish within it, or a window that cannot be
    /// read, is denied; a denial for other reasons says so too. Only a
    /// force override goes past the window, as past everything else.
    pub(super) fn apply<'r>(
        &self,
        window: &Result<Timestamp, String>,
        judgement: Judgement<'r>,
    ) -> Judgement<'r> {
        let target = self.target;
        let (first, note) = match (window, &judgement.basis) {
            (Err(why), _) => (
                message::window_unreadable(target, why),
                message::window_unreadable_note(why),
            ),
            (Ok(_), WindowBasis::Plan(plan, Some(fit))) if !fit.fits() => (
                message::outside_window(target, fit, plan, self.terms),
                message::outside_window_note(fit),
            ),
            (Ok(_), WindowBasis::Plan(..)) => return judgement,
            (Ok(end), WindowBasis::NoPlan) => (
                message::window_without_plan(target, *end, self.runs_itself, self.retry),
                message::window_without_plan_note(*end),
            ),
            // Without fresh results the verdict is pending or refused:
            // allowed only by --on-pending=allow, which says the window
            // went unjudged.
            (Ok(end), WindowBasis::NoResult) => {
                let mut judgement = judgement;
                if judgement.verdict.allowed {
                    let unjudged = message::window_unjudged(target, *end);
                    judgement.verdict.warnings.push(unjudged);
                }
                return judgement;
            }
        };
        let Judgement {
            verdict: mut base,
            basis,
            ..
        } = judgement;
        // A window the update does not fit leaves no accept to wait for.
        if !base.allowed {
            message::add_note(&mut base.message, &note);
            return Judgement {
                verdict: base,
                if_accepted: None,
                basis,
            };
        }
        let mut denied = Verdict::deny(Reason::OutsideWindow, 403, first);
        denied.warnings = base
            .warnings
            .into_iter()
            .filter(|w| !message::is_plan_warning(w))
            .collect();
        denied.effects = base.effects;
        denied.effects.push(Effect::Event(EventNote {
            warning: true,
            reason: "UpdateOutsideMaintenanceWindow",
            message: message::first_line(&denied.message).to_owned(),
            related: Some(target.key.object_name()),
        }));
        Judgement {
            verdict: denied,
            if_accepted: None,
            basis,
        }
    }
}
