//! ClusterVersionState: the cluster-version operator is not Failing, the
//! cluster is not still being installed, and an update in progress is only
//! retargeted within its minor version.

use super::{Check, Context};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::release::Version;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::since;

pub struct ClusterVersionState;

const URL: &str = "https://docs.openshift.com/container-platform/latest/updating/troubleshooting_updates/gathering-data-cluster-update.html";

impl Check for ClusterVersionState {
    fn name(&self) -> &'static str {
        "ClusterVersionState"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        let Some(cv) = &ctx.view.cluster_version else {
            return Finding::error("no ClusterVersion in the cluster data");
        };
        let conditions = &cv.status.conditions;
        if let Some(failing) = condition(conditions, "Failing").filter(|c| c.status == "True") {
            return Finding::fail(format!(
                "the ClusterVersion is Failing for {}: {}",
                since(failing.last_transition_time, ctx.now),
                excerpt(failing.message.as_deref(), EXCERPT)
            ))
            .with_url(URL);
        }
        if cv.installing() {
            let install = &cv.status.history[0];
            return Finding::fail(format!(
                "the cluster is still being installed ({}, started {} ago): an update can start once the install has completed",
                install.version,
                since(install.started_time, ctx.now)
            ))
            .with_url(URL);
        }
        if let Some(update) = super::update_in_progress(cv) {
            let updating_to = Version::parse(&update.version);
            // How far it got, in the CVO's words ("Working towards 4.14.11:
            // 106 of 863 done (12% complete)").
            let progress = condition(conditions, "Progressing")
                .and_then(|c| c.message.as_deref())
                .map(|m| format!(" ({})", excerpt(Some(m), EXCERPT)))
                .unwrap_or_default();
            return match (&updating_to, &ctx.target_version) {
                (Some(from), Some(to)) if from == to => Finding::pass(format!(
                    "{to} is the update in progress{progress}: asking for it again changes nothing"
                )),
                (Some(from), Some(to)) if from.minor_line() == to.minor_line() => Finding::warn(format!(
                    "an update to {from} is in progress{progress}, since {}: retargeting to {to} within {} replaces it before it completes. oc says to let an update complete first; retarget only to leave a stuck update for a fixed release",
                    since(update.started_time, ctx.now),
                    from.minor_line()
                ))
                .with_url(URL),
                (Some(from), Some(to)) => Finding::fail(format!(
                    "an update to {from} is in progress (since {}); retargeting within {} is allowed, but moving to {to} changes the minor version mid-update: let the update finish first",
                    since(update.started_time, ctx.now),
                    from.minor_line()
                ))
                .with_url(URL),
                _ => Finding::fail(format!(
                    "an update to {} is in progress; the target's minor version cannot be compared",
                    update.version
                ))
                .with_url(URL),
            };
        }
        Finding::pass(format!(
            "the ClusterVersion is at {} and not Failing",
            cv.status.desired.version
        ))
    }
}
