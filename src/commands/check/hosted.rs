//! `check --hosted-cluster`: the update of a hosted cluster (HyperShift),
//! offline. The management cluster's snapshot gives the HostedCluster,
//! its NodePools and the operator's supported versions; the hosted
//! cluster's own snapshot, the catalogue's data. The target resolves
//! against the HostedCluster's update graph (its `status.version`, as a
//! ClusterVersion's), else the hosted cluster's ClusterVersion. Live
//! (`--kubeconfig` of the management cluster), the same objects from its
//! API server and the hosted cluster through its admin kubeconfig.

use std::sync::Arc;

use super::{CheckError, Prepared};
use crate::checks::hosted::Hosted;
use crate::cli::CheckArgs;
use crate::cluster::guest;
use crate::cluster::live::Reads;
use crate::cluster::management::{self, Management};
use crate::model::hosted::{HostedCluster, HostedName, NodePool, belongs_to};
use crate::model::release::Version;
use crate::model::{CheckResult, Resolution, Target};
use crate::plan::Plan;
use crate::plan::hosted::Part;
use crate::suite;
use crate::view::ClusterView;

/// What `--hosted-cluster` names, read: the management cluster's part
/// and, live, the hosted cluster or why it could not be read.
pub(super) struct Read {
    management: Management,
    cluster: usize,
    pool: Option<usize>,
    /// The hosted cluster read live through its admin kubeconfig, until
    /// [`Read::guest_view`] takes it.
    live_guest: Option<Result<ClusterView, String>>,
    /// Why the hosted cluster could not be read live.
    guest_error: Option<String>,
}

/// Reads the management cluster (its snapshot, or live through
/// --kubeconfig) and finds the HostedCluster (and the NodePool) named;
/// every mistake is a usage error that says what there is.
pub(super) fn read(args: &CheckArgs, named: &str) -> Result<Read, CheckError> {
    let name = HostedName::parse(named).ok_or_else(|| {
        CheckError::Hosted(format!(
            "--hosted-cluster {named:?} is not NAMESPACE/NAME of a HostedCluster (clusters/prod)"
        ))
    })?;
    match (args.snapshot.as_deref(), args.kubeconfig.as_deref()) {
        (Some(snapshot), _) => {
            if args.hosted_snapshot.is_none() {
                return Err(CheckError::Hosted(
                    "--hosted-cluster with --snapshot needs --hosted-snapshot: the hosted cluster's own snapshot or must-gather, which its checks run on".to_owned(),
                ));
            }
            let management = management::load(snapshot).map_err(CheckError::Management)?;
            let (cluster, pool) = find(&management, &name, args, &snapshot.display().to_string())?;
            Ok(Read {
                management,
                cluster,
                pool,
                live_guest: None,
                guest_error: None,
            })
        }
        (None, Some(kubeconfig)) => super::runtime()?.block_on(async {
            let client = crate::cluster::client(Some(kubeconfig))
                .await
                .map_err(CheckError::Live)?;
            let management = management::read_live(&client, &name.namespace)
                .await
                .map_err(CheckError::Live)?;
            let (cluster, pool) = find(&management, &name, args, "the management cluster")?;
            let live_guest = match args.hosted_snapshot {
                Some(_) => None,
                None => Some(
                    guest::read(
                        &client,
                        &management.clusters[cluster],
                        Reads::ALL,
                        guest::READ_LIMIT,
                    )
                    .await
                    .map(Arc::unwrap_or_clone)
                    .map_err(|e| e.to_string()),
                ),
            };
            Ok(Read {
                management,
                cluster,
                pool,
                live_guest,
                guest_error: None,
            })
        }),
        (None, None) => Err(CheckError::Hosted(
            "--hosted-cluster needs the management cluster: --snapshot of it (its HostedClusters, NodePools and the hypershift/supported-versions ConfigMap) or --kubeconfig".to_owned(),
        )),
    }
}

/// The HostedCluster `name` of `management` and the NodePool --nodepool
/// names, by their places, or a usage error naming those `place` holds.
fn find(
    management: &Management,
    name: &HostedName,
    args: &CheckArgs,
    place: &str,
) -> Result<(usize, Option<usize>), CheckError> {
    let Some(cluster) = management
        .clusters
        .iter()
        .position(|c| c.hosted_name() == *name)
    else {
        let there: Vec<String> = management
            .clusters
            .iter()
            .map(|c| c.hosted_name().to_string())
            .collect();
        return Err(CheckError::Hosted(format!(
            "no HostedCluster {name} in {place}; it holds {}",
            if there.is_empty() {
                "none".to_owned()
            } else {
                there.join(", ")
            }
        )));
    };
    let Some(pool_name) = &args.nodepool else {
        return Ok((cluster, None));
    };
    let hosted = &management.clusters[cluster];
    let own: Vec<(usize, &NodePool)> = management
        .pools
        .iter()
        .enumerate()
        .filter(|(_, p)| belongs_to(p, hosted))
        .collect();
    match own.iter().find(|(_, p)| p.metadata.name == *pool_name) {
        Some((i, _)) => Ok((cluster, Some(*i))),
        None => {
            let there: Vec<&str> = own.iter().map(|(_, p)| p.metadata.name.as_str()).collect();
            Err(CheckError::Hosted(format!(
                "no NodePool {pool_name:?} of HostedCluster {name} in {place}; its NodePools: {}",
                if there.is_empty() {
                    "none".to_owned()
                } else {
                    there.join(", ")
                }
            )))
        }
    }
}

impl Read {
    fn cluster(&self) -> &HostedCluster {
        &self.management.clusters[self.cluster]
    }

    fn pool(&self) -> Option<&NodePool> {
        self.pool.map(|i| &self.management.pools[i])
    }

    fn hosted(&self) -> Hosted<'_> {
        Hosted {
            cluster: self.cluster(),
            pools: &self.management.pools,
            supported: self.management.supported.as_ref(),
        }
    }

    /// The hosted cluster: its snapshot, as --snapshot is read, or as it
    /// was read live; one that could not be read live is an empty view,
    /// and why is kept for [`crate::checks::hosted::REACHABLE`].
    pub(super) fn guest_view(&mut self, args: &CheckArgs) -> Result<ClusterView, CheckError> {
        if let Some(path) = args.hosted_snapshot.as_deref() {
            return Ok(crate::cluster::snapshot::load(path)?);
        }
        match self.live_guest.take() {
            Some(Ok(view)) => Ok(view),
            Some(Err(why)) => {
                self.guest_error = Some(why);
                Ok(ClusterView::default())
            }
            None => Err(CheckError::Hosted(
                "the hosted cluster was read once already".to_owned(),
            )),
        }
    }

    /// `to` by the HostedCluster's update graph, else the hosted
    /// cluster's ClusterVersion's, else by its version alone.
    pub(super) fn target(&self, view: &ClusterView, to: &str) -> Target {
        match self.cluster().as_update().resolve_named(to) {
            Resolution::Target(target) if target.version.is_some() => target,
            _ => view.target(to),
        }
    }

    /// The results of the update: the control plane's suite, or the
    /// NodePool's.
    pub(super) fn results(&self, prepared: &Prepared) -> Vec<CheckResult> {
        let guest = match &self.guest_error {
            Some(why) => Err(why.clone()),
            None => Ok(Arc::clone(&prepared.view)),
        };
        suite::run_hosted(
            &self.hosted(),
            self.pool(),
            guest,
            &prepared.target,
            prepared.clock,
            prepared.limits,
        )
    }

    /// The view the report of a NodePool's update judges by: the hosted
    /// cluster's, with the NodePool's version as the one it runs (so the
    /// report says the pool's move, and a pool's target that its control
    /// plane runs is still a change). `None` for the control plane's.
    pub(super) fn report_view(&self, view: &ClusterView) -> Option<ClusterView> {
        let pool = self.pool()?;
        let version = &pool.status.version;
        let runs: crate::model::ClusterVersion = serde_json::from_value(serde_json::json!({
            "metadata": {"name": pool.metadata.name},
            "status": {
                "desired": {"version": version, "image": pool.spec.release.image},
                "history": [{"state": "Completed", "version": version}],
            }
        }))
        .ok()?;
        let mut view = view.clone();
        view.cluster_version = Some(runs);
        Some(view)
    }

    /// The plan of the update: the control plane then the NodePools, or
    /// the one NodePool.
    pub(super) fn update_plan(&self, prepared: &Prepared, now: jiff::Timestamp) -> Plan {
        let version = prepared.target.version.as_deref().and_then(Version::parse);
        let part = match self.pool() {
            Some(pool) => Part::NodePool(&pool.metadata.name),
            None => Part::ControlPlane,
        };
        crate::plan::hosted::plan(
            self.cluster(),
            &self.management.pools,
            self.guest_error.is_none().then_some(&*prepared.view),
            version.as_ref(),
            part,
            now,
        )
    }
}
