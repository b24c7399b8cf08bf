//! `preflight-gate serve`: the webhook and, in a cluster, the controller,
//! wired one step at a time: the connection, the results source, what the
//! cluster does for the gate (authorization, Events, the witness), TLS, the
//! listeners and the leader's work.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::admission::ports::OverrideAuthorizer;
use crate::admission::run_requests::RunRequests;
use crate::certs;
use crate::cli::{MetricsAuth, ServeArgs};
use crate::cluster::api_server::ApiServerAddresses;
use crate::cluster::scrape::{ScrapeAccess, ScrapeReviewer};
use crate::cluster::witness::Witness;
use crate::cluster::{self, EventRecorder, NoCluster, SubjectAccessReviewer};
use crate::metrics::Metrics;
use crate::model::vouch::NewestRuns;
use crate::preflight::hosted::{HostedSettings, WithHosted};
use crate::preflight::{
    DirectorySource, HostedSource, LiveSource, SnapshotSource, Source, cluster_claims, controller,
    leader, result_key,
};
use crate::server::{self, CertFiles, ClientCa, Gate, Health, Listen, MinBodyRate, ReloadingCert};

/// The example review the first-run hint posts.
const EXAMPLE_REVIEW: &str = "examples/reviews/update-to-4.15.3.json";

/// `preflight-gate serve`.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // SIGTERM stops the servers and the controller alike, and is heard from
    // the first moment: a pod stopped while it is still starting exits cleanly.
    let (stopping, stopped) = watch::channel(false);
    let signalled = server::signal();
    tokio::spawn(async move {
        signalled.await;
        let _ = stopping.send(true);
    });
    let metrics = Metrics::new()?;
    let client = connect(&args).await?;
    if args.cluster.cluster_claims && (client.is_none() || !args.controller.controller) {
        return Err(Unservable(
            "--cluster-claims needs a cluster (--kubeconfig, KUBECONFIG or the pod's service account) and the controller, whose leader publishes them",
        )
        .into());
    }
    let instance = args.cluster.instance.clone().unwrap_or_else(instance_name);
    // What the results watch learns of each object's runs, the controller
    // knows too, should this replica lead.
    let newest_runs = Arc::new(NewestRuns::default());
    let Results { source, live } = results_source(&args, client.as_ref(), &metrics, &newest_runs)?;
    let policy = policy(&args, client.as_ref()).await;
    let effects = ClusterEffects::new(client.as_ref(), &instance, &metrics);
    let (tls, admin_tls) = tls_configs(&args, &metrics)?;
    let (webhook, admin) = bind(&args)?;

    let leader = match (
        &client,
        args.controller.controller,
        &args.cluster.results_dir,
    ) {
        (Some(client), true, None) => Some(lead(
            &args,
            client,
            &instance,
            &metrics,
            stopped.clone(),
            newest_runs,
            live.filter(|_| args.cluster.cluster_claims)
                .map(|live| (live, policy.clone())),
        )),
        _ => None,
    };

    let gate = Arc::new(Gate {
        results: source.clone(),
        authorizer: effects.authorizer,
        events: effects.events,
        witness: effects.witness,
        policy,
        run_requests: RunRequests::new(
            args.server.max_run_requests,
            RunRequests::own_account(&args.controller.namespace),
        ),
        metrics: metrics.clone(),
    });
    let node_cordoned = match (&client, &args.cluster.node_name) {
        (Some(client), Some(node)) => cluster::cordon::follow(client.clone(), node.clone()),
        _ => Default::default(),
    };
    let health = Arc::new(Health {
        results: source,
        metrics: metrics.clone(),
        shutting_down: Default::default(),
        node_cordoned,
        scrape_access: scrape_access(&args, client.as_ref())?,
    });
    let listen = Listen {
        webhook,
        admin,
        admin_tls,
        max_concurrency: args.server.max_concurrency,
        max_connections: args.server.max_connections,
        max_busy_per_peer: args.server.max_busy_per_peer,
        reserved_connections: args.server.reserved_connections,
        api_server: api_server(&args, client.as_ref(), &metrics),
        min_body_rate: MinBodyRate::new(args.server.min_body_rate),
        handshake_timeout: args.server.handshake_timeout,
        header_read_timeout: args.server.header_read_timeout,
        idle_timeout: args.server.idle_timeout,
        shutdown_delay: args.server.shutdown_delay,
        shutdown_grace: args.server.shutdown_grace,
    };
    let mut stopped = stopped;
    let shutdown = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let served = server::serve(listen, tls, gate, health, shutdown).await;
    if let Some(leader) = leader {
        let _ = leader.await;
    }
    served
}

/// The cluster's client, when one is configured at all.
async fn connect(args: &ServeArgs) -> anyhow::Result<Option<kube::Client>> {
    let kubeconfig = args.cluster.kubeconfig.as_deref();
    let configured = kubeconfig.is_some()
        || std::env::var_os("KUBECONFIG").is_some()
        || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    if !configured {
        warn!("no cluster configured: overrides cannot be authorized and no Events are published");
        return Ok(None);
    }
    let client = cluster::client(kubeconfig)
        .await
        .context("connecting to the cluster")?;
    Ok(Some(client))
}

/// Where results come from: a directory of objects, a snapshot, the
/// cluster's UpdatePreflights, or (nothing given) the sample snapshot.
fn results_source(
    args: &ServeArgs,
    client: Option<&kube::Client>,
    metrics: &Metrics,
    newest_runs: &Arc<NewestRuns>,
) -> anyhow::Result<Results> {
    let snapshot = |mut view: crate::view::ClusterView, name: String| -> Arc<dyn Source> {
        view.alert_namespaces = args.controller.alerts.namespaces();
        view.gate_namespace = Some(args.controller.namespace.clone());
        Arc::new(SnapshotSource::new(
            view,
            name,
            args.controller.limits.limits(),
        ))
    };
    let fixed = match (&args.cluster.results_dir, &args.cluster.snapshot, client) {
        (Some(dir), _, _) => {
            let source = DirectorySource::load(dir)?;
            info!(dir = %dir.display(), objects = source.len(), "serving results from a directory");
            Arc::new(source)
        }
        (None, Some(dir), _) => snapshot(cluster::snapshot::load(dir)?, dir.display().to_string()),
        (None, None, Some(client)) => {
            info!("serving results from the cluster's UpdatePreflight objects");
            // Every replica verifies results with the key the leader signs them with.
            let key =
                result_key::SharedKey::spawn(client.clone(), args.controller.namespace.clone());
            let live = LiveSource::spawn(
                client.clone(),
                args.cluster.stale_after,
                metrics.clone(),
                key,
                newest_runs.clone(),
            );
            return Ok(Results {
                source: with_hosted(args, client, metrics, live.clone()),
                live: Some(live),
            });
        }
        (None, None, None) if args.cluster.hosted_control_planes => {
            return Err(Unservable(
                "--hosted-control-planes needs a cluster to watch (--kubeconfig, KUBECONFIG or the pod's service account)",
            )
            .into());
        }
        (None, None, None) => snapshot(
            cluster::snapshot::sample::load().context("the sample snapshot")?,
            "the sample snapshot compiled in from examples/snapshot/".to_owned(),
        ),
    };
    Ok(Results {
        source: fixed,
        live: None,
    })
}

/// Flags that ask for what the gate was not given (a cluster, the
/// controller): bad input, so `serve` exits 2 as every command does for it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unservable(pub &'static str);

/// Where the webhook's results come from, and the cluster's own watch of
/// them when they come from it (whose leader publishes `--cluster-claims`).
struct Results {
    source: Arc<dyn Source>,
    live: Option<Arc<LiveSource>>,
}

/// The results, with those of the hosted clusters the gate serves
/// (`--hosted-control-planes`), held by a [`HostedSource`] of this replica.
fn with_hosted(
    args: &ServeArgs,
    client: &kube::Client,
    metrics: &Metrics,
    results: Arc<dyn Source>,
) -> Arc<dyn Source> {
    if !args.cluster.hosted_control_planes {
        return results;
    }
    info!("serving hosted control planes: watching HostedClusters and NodePools");
    let settings = HostedSettings::new(
        args.policy.max_result_age,
        args.controller.limits.limits(),
        args.policy.exemptions(),
    );
    Arc::new(WithHosted {
        results,
        hosted: HostedSource::spawn(client.clone(), settings, metrics.clone()),
    })
}

/// The decision's policy: the flags', and whether the cluster's
/// ClusterVersion has `acceptRisks` (so a denial may offer
/// `oc adm upgrade accept`).
async fn policy(args: &ServeArgs, client: Option<&kube::Client>) -> crate::admission::Policy {
    let mut policy = args.policy.policy();
    if let Some(client) = client {
        policy.accept_risks_field = cluster::has_accept_risks(client).await;
    }
    policy
}

/// The API server's addresses, for the connection slots reserved for it:
/// followed from the cluster, or none (and the log says so).
fn api_server(
    args: &ServeArgs,
    client: Option<&kube::Client>,
    metrics: &Metrics,
) -> Arc<ApiServerAddresses> {
    match (args.server.reserved_connections, client) {
        (0, _) => ApiServerAddresses::unknown(),
        (_, None) => {
            info!("no cluster: no connection slots are reserved for the API server");
            ApiServerAddresses::unknown()
        }
        (_, Some(client)) => ApiServerAddresses::follow(client.clone(), metrics.tls.clone()),
    }
}

/// Who may read `/metrics`: with a cluster, whom the API server says
/// (`--metrics-auth`).
fn scrape_access(
    args: &ServeArgs,
    client: Option<&kube::Client>,
) -> anyhow::Result<Option<Arc<dyn ScrapeAccess>>> {
    Ok(match (args.server.metrics_auth, client) {
        (MetricsAuth::None, _) | (MetricsAuth::Auto, None) => None,
        (MetricsAuth::Auto | MetricsAuth::Kubernetes, Some(client)) => {
            Some(Arc::new(ScrapeReviewer::new(client.clone())))
        }
        (MetricsAuth::Kubernetes, None) => {
            return Err(Unservable(
                "--metrics-auth=kubernetes needs a cluster to ask (--kubeconfig, KUBECONFIG or the pod's service account)",
            )
            .into());
        }
    })
}

/// What the cluster does for the webhook: authorize overrides, publish
/// Events, and witness what an allowed change stored. Without a cluster,
/// no override is authorized and no Event published.
struct ClusterEffects {
    authorizer: Arc<dyn OverrideAuthorizer>,
    events: Option<EventRecorder>,
    witness: Arc<Witness>,
}

impl ClusterEffects {
    fn new(client: Option<&kube::Client>, instance: &str, metrics: &Metrics) -> Self {
        let Some(client) = client else {
            return Self {
                authorizer: Arc::new(NoCluster),
                events: None,
                witness: Witness::unwatched(metrics.clone()),
            };
        };
        let events =
            EventRecorder::spawn(client.clone(), Some(instance.to_owned()), metrics.clone());
        Self {
            authorizer: Arc::new(SubjectAccessReviewer::new(client.clone())),
            witness: Witness::spawn(client.clone(), Arc::new(events.clone()), metrics.clone()),
            events: Some(events),
        }
    }
}

/// The webhook's TLS configuration and, with `--admin-tls`, the admin
/// port's, over one reloading serving pair.
fn tls_configs(
    args: &ServeArgs,
    metrics: &Metrics,
) -> anyhow::Result<(rustls::ServerConfig, Option<rustls::ServerConfig>)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = Arc::new(
        ReloadingCert::load(cert_files(args)?, provider.clone(), metrics.clone())
            .context("loading the serving certificate")?,
    );
    tokio::spawn(cert.clone().watch(args.tls.tls_reload_interval));
    let admin_tls = args
        .server
        .admin_tls
        .then(|| server::tls::server_config(cert.clone(), provider.clone(), None))
        .transpose()?;
    let client_ca = match &args.tls.client_ca {
        Some(path) => {
            let client_ca = ClientCa::load(path.clone(), provider.clone(), metrics.clone())
                .context("loading the client CA")?;
            tokio::spawn(client_ca.clone().watch(args.tls.tls_reload_interval));
            Some(client_ca)
        }
        None => None,
    };
    let tls = server::tls::server_config(cert, provider, client_ca)?;
    Ok((tls, admin_tls))
}

/// The serving pair: the flags', or development certificates under certs/.
fn cert_files(args: &ServeArgs) -> anyhow::Result<CertFiles> {
    if let (Some(cert), Some(key)) = (&args.tls.tls_cert, &args.tls.tls_key) {
        return Ok(CertFiles {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    let dir = PathBuf::from("certs");
    let files = CertFiles {
        cert: dir.join(certs::TLS_CERT),
        key: dir.join(certs::TLS_KEY),
    };
    if !files.cert.exists() || !files.key.exists() {
        certs::generate(&dir, &[]).context("making development certificates")?;
        info!(dir = %dir.display(), "made development certificates (localhost, 127.0.0.1)");
    }
    Ok(files)
}

/// The webhook and admin listeners; with development certificates, on
/// loopback unless told otherwise, and a hint of how to try the webhook.
fn bind(args: &ServeArgs) -> anyhow::Result<(std::net::TcpListener, std::net::TcpListener)> {
    let development = args.tls.tls_cert.is_none();
    let (webhook_addr, admin_addr) = addresses(args);
    if development && (args.server.webhook_addr.is_none() || args.server.admin_addr.is_none()) {
        info!(
            "development certificates: listening on loopback (--webhook-addr and --admin-addr listen elsewhere)"
        );
    }
    let webhook = std::net::TcpListener::bind(webhook_addr)
        .with_context(|| format!("binding {webhook_addr}"))?;
    let admin =
        std::net::TcpListener::bind(admin_addr).with_context(|| format!("binding {admin_addr}"))?;
    if development && Path::new(EXAMPLE_REVIEW).exists() {
        let port = webhook.local_addr()?.port();
        info!(
            "try it: curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data-binary @{EXAMPLE_REVIEW} https://localhost:{port}{}",
            server::webhook::PATH
        );
    }
    Ok((webhook, admin))
}

/// The webhook's and the admin port's addresses: the flags', else every
/// interface with a serving certificate of the administrator's, and
/// loopback with the development certificates, which name only this
/// machine (and whose admin port, without a cluster, answers anyone).
fn addresses(args: &ServeArgs) -> (SocketAddr, SocketAddr) {
    let host = if args.tls.tls_cert.is_some() {
        Ipv4Addr::UNSPECIFIED
    } else {
        Ipv4Addr::LOCALHOST
    };
    (
        args.server
            .webhook_addr
            .unwrap_or(SocketAddr::from((host, 8443))),
        args.server
            .admin_addr
            .unwrap_or(SocketAddr::from((host, 9090))),
    )
}

/// Joins the leader election; the leader runs the controller, and
/// publishes the ClusterClaims when `publishing` says from what, until
/// `stopped` says the gate stops.
fn lead(
    args: &ServeArgs,
    client: &kube::Client,
    instance: &str,
    metrics: &Metrics,
    mut stopped: watch::Receiver<bool>,
    newest_runs: Arc<NewestRuns>,
    publishing: Option<(Arc<LiveSource>, crate::admission::Policy)>,
) -> JoinHandle<()> {
    let lease = leader::LeaseSettings {
        namespace: args.controller.namespace.clone(),
        name: args.controller.lease_name.clone(),
        identity: instance.to_owned(),
        duration: args.controller.lease_duration,
    };
    let settings = crate::preflight::controller::Settings {
        newest_runs,
        ..args.controller.settings(args.policy.exemptions())
    };
    let work = {
        let (client, metrics, instance) = (client.clone(), metrics.clone(), instance.to_owned());
        move || {
            let controller = controller::start(
                client.clone(),
                settings.clone(),
                metrics.clone(),
                instance.clone(),
            );
            let publish = publishing.clone().map(|(live, policy)| {
                cluster_claims::publish(client.clone(), live, policy, metrics.clone())
            });
            async move {
                match publish {
                    Some(publish) => {
                        tokio::join!(controller, publish);
                    }
                    None => controller.await,
                }
            }
        }
    };
    let until_stopped = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    tokio::spawn(leader::lead(
        client.clone(),
        lease,
        metrics.clone(),
        work,
        until_stopped,
    ))
}

/// This replica's name: the pod name in a cluster, else the host name.
fn instance_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("preflight-gate-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve_args(args: &[&str]) -> ServeArgs {
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(
            ["preflight-gate", "serve"].iter().chain(args),
        )
        .unwrap();
        let crate::cli::Command::Serve(serve) = cli.command else {
            unreachable!()
        };
        *serve
    }

    /// Hosted control planes are off unless asked for, and need a cluster
    /// whose results are watched.
    #[test]
    fn hosted_control_planes_are_asked_for_and_need_a_cluster() {
        assert!(!serve_args(&[]).cluster.hosted_control_planes);
        let asked = serve_args(&["--hosted-control-planes"]);
        assert!(asked.cluster.hosted_control_planes);
        let parsed = <crate::cli::Cli as clap::Parser>::try_parse_from([
            "preflight-gate",
            "serve",
            "--hosted-control-planes",
            "--results-dir",
            "examples/results",
        ]);
        assert!(
            parsed.is_err(),
            "a directory of results has no hosted clusters"
        );
        let refused = results_source(
            &asked,
            None,
            &Metrics::new().unwrap(),
            &Arc::new(NewestRuns::default()),
        )
        .err()
        .expect("no cluster");
        assert!(
            refused
                .to_string()
                .starts_with("--hosted-control-planes needs a cluster"),
            "{refused}"
        );
        let sample = results_source(
            &serve_args(&[]),
            None,
            &Metrics::new().unwrap(),
            &Arc::new(NewestRuns::default()),
        )
        .unwrap();
        assert!(sample.source.hosted().is_none());
        assert!(
            sample.live.is_none(),
            "the sample is no cluster to publish for"
        );
    }

    #[test]
    fn cluster_claims_are_asked_for_and_need_the_clusters_results() {
        assert!(!serve_args(&[]).cluster.cluster_claims);
        assert!(serve_args(&["--cluster-claims"]).cluster.cluster_claims);
        for fixed in [
            ["--results-dir", "examples/results"],
            ["--snapshot", "examples/snapshot"],
        ] {
            let parsed = <crate::cli::Cli as clap::Parser>::try_parse_from(
                ["preflight-gate", "serve", "--cluster-claims"]
                    .into_iter()
                    .chain(fixed),
            );
            assert!(parsed.is_err(), "{fixed:?} holds no cluster's readiness");
        }
    }

    /// The development certificates name only this machine, and the admin
    /// port answers anyone without a cluster: `serve` alone listens on
    /// loopback. With a serving pair of the administrator's (the
    /// Deployment's), every interface, as before; the flags say otherwise.
    #[test]
    fn development_certificates_listen_on_loopback_unless_told_otherwise() {
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        assert_eq!(
            addresses(&serve_args(&[])),
            (at("127.0.0.1:8443"), at("127.0.0.1:9090"))
        );
        let pair = ["--tls-cert", "tls.crt", "--tls-key", "tls.key"];
        assert_eq!(
            addresses(&serve_args(&pair)),
            (at("0.0.0.0:8443"), at("0.0.0.0:9090"))
        );
        assert_eq!(
            addresses(&serve_args(&["--webhook-addr", "0.0.0.0:8443"])),
            (at("0.0.0.0:8443"), at("127.0.0.1:9090"))
        );
        let mut told = pair.to_vec();
        told.extend(["--admin-addr", "127.0.0.1:9191"]);
        assert_eq!(
            addresses(&serve_args(&told)),
            (at("0.0.0.0:8443"), at("127.0.0.1:9191"))
        );
    }
}
