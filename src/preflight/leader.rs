//! Leader election through a `coordination.k8s.io` Lease, so that of all
//! replicas only one runs preflight suites. Leadership is released on
//! shutdown, so another replica takes over at once.

use std::future::Future;
use std::time::Duration;

use kube_lease_manager::LeaseManagerBuilder;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::metrics::Metrics;

#[cfg(test)]
mod tests;

/// Where the Lease lives and how long it holds.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
}

/// Runs `work` while this replica holds the Lease, and stops it when the
/// Lease is lost, until `stop` completes.
pub async fn lead<W, F>(
    client: kube::Client,
    lease: LeaseSettings,
    metrics: Metrics,
    work: W,
    stop: impl Future<Output = ()>,
) where
    W: Fn() -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let duration = lease.duration.as_secs().max(2);
    let grace = (duration / 3).max(1);
    // The stop signal is watched from the start: while the Lease cannot be
    // set up (its namespace missing, RBAC not bound yet, the API server
    // away), SIGTERM must still end the process at once, not after the
    // pod's whole grace period.
    tokio::pin!(stop);
    let setup = async {
        loop {
            let built = LeaseManagerBuilder::new(client.clone(), &lease.name)
                .with_namespace(&lease.namespace)
                .with_identity(&lease.identity)
                .with_duration(duration)
                .with_grace(grace)
                .build()
                .await;
            match built {
                Ok(manager) => break manager.watch().await,
                Err(e) => {
                    warn!(error = %e, lease = %lease.name, "cannot set up leader election; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    };
    let (mut leading, manager_task) = tokio::select! {
        watching = setup => watching,
        () = &mut stop => {
            info!(lease = %lease.name, "stopping before leader election was set up");
            return;
        }
    };
    let mut running: Option<JoinHandle<()>> = None;
    loop {
        let is_leader = *leading.borrow_and_update();
        metrics.controller.leader(is_leader);
        match (is_leader, running.is_some()) {
            (true, false) => {
                info!(identity = %lease.identity, "became the leader; running preflight suites");
                running = Some(tokio::spawn(work()));
            }
            (false, true) => {
                info!(identity = %lease.identity, "lost the leadership; stopping");
                running.take().into_iter().for_each(|task| task.abort());
            }
            _ => {}
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() { break },
            () = &mut stop => break,
        }
    }
    if let Some(task) = running {
        task.abort();
    }
    metrics.controller.leader(false);
    // Closing the channel makes the manager release the Lease.
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), manager_task).await {
        Ok(Ok(Ok(_))) => info!("released the Lease"),
        Ok(Ok(Err(e))) => warn!(error = %e, "cannot release the Lease"),
        _ => warn!("releasing the Lease did not finish"),
    }
}
