//! The decision's ports: what it needs from outside, as narrow traits that
//! the layers above implement (the result sources in `preflight`, the
//! SubjectAccessReview client in `cluster`). The decision reads results
//! through [`ResultLookup`] and asks questions through
//! [`OverrideAuthorizer`]; nothing here starts work.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Authorization, UserInfo};
use crate::model::UpdatePreflight;
use crate::model::hosted::{HostedCluster, HostedName};
use crate::model::release::ReleaseKey;

/// What the cache holds for one release.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    pub result: Option<Arc<UpdatePreflight>>,
    /// False when the source cannot vouch for its content, e.g. its watch has
    /// been down too long; results are then treated as stale.
    pub trusted: bool,
    /// Whether results age out (`--max-result-age`). A fixed directory is a
    /// report its operator chose to serve, so its results do not.
    pub expires: bool,
    /// Who alone writes status, where the source records it (the API
    /// server): its field manager, and the key its results are signed
    /// with; see [`crate::model::vouch`].
    pub status_writer: Option<crate::model::vouch::StatusWriter>,
}

impl Lookup {
    /// A result from a source that does not change (a directory, a
    /// snapshot): always trusted, never aging out.
    pub fn fixed(result: Option<Arc<UpdatePreflight>>) -> Self {
        Self {
            result,
            trusted: true,
            expires: false,
            status_writer: None,
        }
    }
}

/// The decision's read-only port to results. Every method answers from
/// memory: the request path never calls the API server.
pub trait ResultLookup: Send + Sync + 'static {
    fn lookup(&self, key: &ReleaseKey) -> Lookup;
    /// True once the source has loaded or synced its content.
    fn is_ready(&self) -> bool;
    /// Whether the gate runs checks at all (a fixed directory of results
    /// does not).
    fn runs_checks(&self) -> bool;
    /// Whether the gate checks `key` by itself, without anyone asking: in
    /// a cluster, the releases the ClusterVersion's update graph offers or
    /// its stored target names, as its watch says. Anything else is run
    /// only when someone allowed to create UpdatePreflights asks for it; a
    /// review never starts a run. Answered from memory.
    fn checks_itself(&self, _key: &ReleaseKey) -> bool {
        true
    }
    /// Whether a run of a target the gate does not check by itself may be
    /// asked for with an UpdatePreflight (a hosted cluster's may not: its
    /// update graph alone names what it runs).
    fn takes_run_requests(&self) -> bool {
        true
    }
    /// The hosted clusters of a management cluster, when the gate serves
    /// hosted control planes (`--hosted-control-planes`); `None` otherwise.
    fn hosted(&self) -> Option<&dyn HostedLookup> {
        None
    }
}

/// What a management cluster's gate knows of its hosted clusters, from
/// memory: their HostedClusters as its watch last saw them, and each one's
/// results, as a source of their own (keyed by release, as a standalone
/// cluster's are).
pub trait HostedLookup: Send + Sync {
    /// The HostedCluster as the watch last saw it.
    fn cluster(&self, name: &HostedName) -> Option<Arc<HostedCluster>>;
    /// The results of the hosted cluster `name`.
    fn results(&self, name: &HostedName) -> Arc<dyn ResultLookup>;
}

/// A boxed future, for the async port.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The verbs on `updatepreflights.preflight.dev` the gate asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Force a target, accept checks, set `desiredUpdate.force`, change
    /// what the cluster trusts; also enough to set a window.
    Override,
    /// Set or move the maintenance window (`preflight.dev/window-end`)
    /// alone: planning a window is not forcing an update.
    Window,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Override => "override",
            Self::Window => "window",
        }
    }
}

/// Answers whether a user is allowed a verb (an override, a window).
pub trait OverrideAuthorizer: Send + Sync + 'static {
    fn allows<'a>(&'a self, user: &'a UserInfo, verb: Verb) -> BoxFuture<'a, Authorization>;
}
