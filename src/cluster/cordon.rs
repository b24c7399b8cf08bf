//! Whether the node this replica runs on is cordoned. A drain cordons a
//! node before it evicts; a replica on a cordoned node then steps aside
//! (unready), and the gate's PodDisruptionBudget, whose
//! `unhealthyPodEvictionPolicy` is `AlwaysAllow`, lets the drain evict it.
//! On several nodes the other replicas keep serving; on one node there is
//! nowhere to go, and the drain goes through instead of waiting on the
//! gate's own budget until it times out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tracing::{debug, info};

/// Follows `node`'s `spec.unschedulable` into the flag it returns, from a
/// watch of that one Node, in the background. Until the watch has said
/// anything the node counts as schedulable: a replica that cannot read its
/// node serves as it did before.
pub fn follow(client: kube::Client, node: String) -> Arc<AtomicBool> {
    let cordoned = Arc::new(AtomicBool::new(false));
    let flag = cordoned.clone();
    tokio::spawn(async move {
        let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
        let mut events = watcher::watcher(Api::<Node>::all(client), config)
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let now = match event {
                Ok(Event::Apply(n) | Event::InitApply(n)) => {
                    n.spec.and_then(|s| s.unschedulable).unwrap_or(false)
                }
                Ok(Event::Delete(_)) => false,
                Ok(_) => continue,
                Err(e) => {
                    debug!(error = %e, node, "watch of the replica's node failed; retrying");
                    continue;
                }
            };
            if flag.swap(now, Ordering::Relaxed) != now {
                info!(
                    node,
                    cordoned = now,
                    "{}",
                    if now {
                        "the replica's node is cordoned: unready, so a drain may evict it"
                    } else {
                        "the replica's node is schedulable again: ready when the rest is"
                    }
                );
            }
        }
    });
    cordoned
}
