//! ClusterOperatorsHealthy: every ClusterOperator is Available and not
//! Degraded. The message names each one, how long it has been down, and why.

use super::{Check, Context, require};
use crate::cluster::openshift::condition;
use crate::model::Finding;
use crate::model::Severity;
use crate::model::text::EXCERPT;
use crate::model::text::excerpt;
use crate::model::text::list;
use crate::model::text::since;

pub struct ClusterOperatorsHealthy;

const URL: &str = "https://docs.openshift.com/container-platform/latest/support/troubleshooting/troubleshooting-operator-issues.html";

impl Check for ClusterOperatorsHealthy {
    fn name(&self) -> &'static str {
        "ClusterOperatorsHealthy"
    }

    fn severity(&self) -> Severity {
        Severity::Blocking
    }

    fn evaluate(&self, ctx: &Context) -> Finding {
        if let Err(skip) = require(ctx.view, &["ClusterOperator"]) {
            return skip;
        }
        let operators = &ctx.view.cluster_operators;
        if operators.is_empty() {
            return Finding::error("no ClusterOperators in the cluster data");
        }
        let mut problems = Vec::new();
        for co in operators {
            let conditions = &co.status.conditions;
            let unavailable = condition(conditions, "Available").filter(|c| c.status != "True");
            let degraded = condition(conditions, "Degraded").filter(|c| c.status == "True");
            for (state, c) in [("not Available", unavailable), ("Degraded", degraded)] {
                if let Some(c) = c {
                    problems.push(format!(
                        "{} is {state} for {}: {}",
                        co.metadata.name,
                        since(c.last_transition_time, ctx.now),
                        excerpt(c.message.as_deref(), EXCERPT)
                    ));
                }
            }
        }
        if problems.is_empty() {
            Finding::pass(format!(
                "all {} ClusterOperators are Available and not Degraded",
                operators.len()
            ))
        } else {
            Finding::fail(list(&problems, 5)).with_url(URL)
        }
    }
}
