//! The subcommands, each built from its flags: [`serve`], [`run`] (ask the
//! cluster for a preflight run), [`certs`](fn@certs) and [`check`](fn@check) (the offline
//! report, in `check.rs`).

mod check;

pub use check::check;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tracing::{info, warn};

use crate::admission::ports::OverrideAuthorizer;
use crate::certs;
use crate::cli::{CertsArgs, RunArgs, ServeArgs};
use crate::cluster::witness::Witness;
use crate::cluster::{self, EventRecorder, NoCluster, SubjectAccessReviewer};
use crate::metrics::Metrics;
use crate::preflight::{
    DirectorySource, LiveSource, SnapshotSource, Source, controller, leader, result_key,
};
use crate::server::{self, CertFiles, Gate, Health, Listen, ReloadingCert};

/// The example review the first-run hint posts.
const EXAMPLE_REVIEW: &str = "examples/reviews/update-to-4.15.3.json";

/// `preflight-gate certs`.
pub fn certs(args: &CertsArgs) -> anyhow::Result<()> {
    let written = certs::generate(&args.out, &args.names)?;
    eprintln!(
        "wrote {}, {}, {} and {} to {}",
        certs::CA_CERT,
        certs::CA_KEY,
        certs::TLS_CERT,
        certs::TLS_KEY,
        written.dir.display()
    );
    eprintln!("caBundle for the webhook configuration:");
    println!("{}", written.ca_bundle());
    Ok(())
}

/// Whether a cluster connection is configured at all.
fn cluster_configured(kubeconfig: Option<&Path>) -> bool {
    kubeconfig.is_some()
        || std::env::var_os("KUBECONFIG").is_some()
        || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
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

/// `preflight-gate serve`.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let metrics = Metrics::new()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    let kubeconfig = args.cluster.kubeconfig.as_deref();
    let client = if cluster_configured(kubeconfig) {
        Some(
            cluster::client(kubeconfig)
                .await
                .context("connecting to the cluster")?,
        )
    } else {
        warn!("no cluster configured: overrides cannot be authorized and no Events are published");
        None
    };
    let instance = args.cluster.instance.clone().unwrap_or_else(instance_name);

    let source: Arc<dyn Source> = match (&args.cluster.results_dir, &args.cluster.snapshot, &client)
    {
        (Some(dir), _, _) => {
            let source = DirectorySource::load(dir)?;
            info!(dir = %dir.display(), objects = source.len(), "serving results from a directory");
            Arc::new(source)
        }
        (None, Some(dir), _) => {
            let mut view = crate::cluster::snapshot::load(dir)?;
            view.alert_namespaces = args.controller.alerts.namespaces();
            Arc::new(SnapshotSource::new(
                view,
                dir.display().to_string(),
                args.controller.limits.limits(),
            ))
        }
        (None, None, Some(client)) => {
            info!("serving results from the cluster's UpdatePreflight objects");
            // Every replica verifies results with the key the leader signs them with.
            let key =
                result_key::SharedKey::spawn(client.clone(), args.controller.namespace.clone());
            LiveSource::spawn(
                client.clone(),
                args.cluster.stale_after,
                metrics.clone(),
                key,
            )
        }
        (None, None, None) => {
            let mut view =
                crate::cluster::snapshot::sample::load().context("the sample snapshot")?;
            view.alert_namespaces = args.controller.alerts.namespaces();
            Arc::new(SnapshotSource::new(
                view,
                "the sample snapshot compiled in from examples/snapshot/",
                args.controller.limits.limits(),
            ))
        }
    };
    let (authorizer, events): (Arc<dyn OverrideAuthorizer>, Option<EventRecorder>) = match &client {
        Some(client) => (
            Arc::new(SubjectAccessReviewer::new(client.clone())),
            Some(EventRecorder::spawn(
                client.clone(),
                Some(instance.clone()),
                metrics.clone(),
            )),
        ),
        None => (Arc::new(NoCluster), None),
    };

    let files = cert_files(&args)?;
    let cert = Arc::new(
        ReloadingCert::load(files.clone(), provider.clone(), metrics.clone())
            .context("loading the serving certificate")?,
    );
    tokio::spawn(cert.clone().watch(args.tls.tls_reload_interval));
    let admin_tls = args
        .server
        .admin_tls
        .then(|| server::tls::server_config(cert.clone(), provider.clone(), None))
        .transpose()?;
    let tls = server::tls::server_config(cert, provider, args.tls.client_ca.as_deref())?;

    let webhook = std::net::TcpListener::bind(args.server.webhook_addr)
        .with_context(|| format!("binding {}", args.server.webhook_addr))?;
    let admin = std::net::TcpListener::bind(args.server.admin_addr)
        .with_context(|| format!("binding {}", args.server.admin_addr))?;
    if args.tls.tls_cert.is_none() && Path::new(EXAMPLE_REVIEW).exists() {
        let port = webhook.local_addr()?.port();
        info!(
            "try it: curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data-binary @{EXAMPLE_REVIEW} https://localhost:{port}{}",
            server::webhook::PATH
        );
    }

    // SIGTERM stops the servers and the controller alike.
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let leader = match (
        &client,
        args.controller.controller,
        &args.cluster.results_dir,
    ) {
        (Some(client), true, None) => {
            let lease = leader::LeaseSettings {
                namespace: args.controller.namespace.clone(),
                name: args.controller.lease_name.clone(),
                identity: instance.clone(),
                duration: args.controller.lease_duration,
            };
            let (client, settings, metrics) = (
                client.clone(),
                args.controller.settings(args.policy.blocking()),
                metrics.clone(),
            );
            let work = {
                let (client, metrics, instance) =
                    (client.clone(), metrics.clone(), instance.clone());
                move || {
                    controller::start(
                        client.clone(),
                        settings.clone(),
                        metrics.clone(),
                        instance.clone(),
                    )
                }
            };
            Some(tokio::spawn(leader::lead(
                client,
                lease,
                metrics,
                work,
                until_stopped(stopped.clone()),
            )))
        }
        _ => None,
    };

    let witness = match &client {
        Some(client) => Witness::spawn(client.clone(), events.clone(), metrics.clone()),
        None => Witness::unwatched(None, metrics.clone()),
    };
    let gate = Arc::new(Gate {
        results: source.clone(),
        runs: source.clone(),
        authorizer,
        events,
        witness,
        policy: args.policy.policy(),
        metrics: metrics.clone(),
    });
    let health = Arc::new(Health {
        results: source,
        metrics,
        shutting_down: Default::default(),
    });
    let listen = Listen {
        webhook,
        admin,
        admin_tls,
        max_concurrency: args.server.max_concurrency,
        max_connections: args.server.max_connections,
        handshake_timeout: args.server.handshake_timeout,
        header_read_timeout: args.server.header_read_timeout,
        idle_timeout: args.server.idle_timeout,
        shutdown_delay: args.server.shutdown_delay,
        shutdown_grace: args.server.shutdown_grace,
    };
    let shutdown = async move {
        server::signal().await;
        let _ = stopping.send(true);
    };
    let served = server::serve(listen, tls, gate, health, shutdown).await;
    if let Some(leader) = leader {
        let _ = leader.await;
    }
    served
}

/// This replica's name: the pod name in a cluster, else the host name.
fn instance_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("preflight-gate-{}", std::process::id()))
}

/// `preflight-gate run`: creates or refreshes the target's UpdatePreflight
/// and, with `--wait`, follows it to its result. Exit codes: 0 passed,
/// 3 blocking failures, 1 error.
pub async fn run(args: RunArgs) -> anyhow::Result<std::process::ExitCode> {
    use crate::admission::ports::RunRequest;
    use crate::model::cluster_version::{ClusterVersion, Resolution};
    use crate::model::release::ReleaseKey;
    use crate::model::{Phase, UpdatePreflight};
    use crate::preflight::live;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    use std::process::ExitCode;

    let client = cluster::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to the cluster")?;
    // Resolve the target as the gate does, from the cluster's ClusterVersion.
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    );
    let cvs: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let cv: ClusterVersion = match cvs.get_opt("version").await? {
        Some(object) => serde_json::from_value(serde_json::to_value(object)?)?,
        None => ClusterVersion::default(),
    };
    let target = match cv.resolve_named(&args.to) {
        Resolution::Target(target) => target,
        _ => anyhow::bail!(
            "{} is not offered to this cluster; give the release image instead",
            args.to
        ),
    };
    let api: Api<UpdatePreflight> = Api::all(client);
    let existing = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .find(|o| ReleaseKey::from_image(&o.spec.image) == target.key);
    let requested = jiff::Timestamp::now();
    let request = RunRequest {
        image: target.image.clone(),
        version: target.version.clone(),
        existing: existing.and_then(|o| o.metadata.name),
    };
    let name = live::trigger(&api, &request).await?;
    eprintln!(
        "preflight run requested for {}: updatepreflight/{name}",
        target.display()
    );
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }

    let progress = indicatif::ProgressBar::new_spinner();
    progress.set_message(format!("waiting for the preflight of {}", target.display()));
    progress.enable_steady_tick(std::time::Duration::from_millis(120));
    // A run answers a request made after it: its start is no earlier
    // than the request (less a second of clock skew).
    let earliest = requested
        .checked_sub(jiff::SignedDuration::from_secs(1))
        .unwrap_or(requested);
    let shown = progress.clone();
    let what = target.display();
    let answered = move |object: Option<&UpdatePreflight>| {
        let Some(status) = object.and_then(|o| o.status.as_ref()) else {
            return false;
        };
        let after = status.start_time.as_ref().is_some_and(|t| t.0 >= earliest);
        match status.phase {
            Some(Phase::Passed | Phase::Failed | Phase::Error) if after => true,
            Some(phase) => {
                shown.set_message(format!("{what}: {phase:?}"));
                false
            }
            None => false,
        }
    };
    // Woken by the object's watch, not by polling it.
    let waited = tokio::time::timeout(
        args.timeout,
        kube::runtime::wait::await_condition(api, &name, answered),
    )
    .await;
    let done = match waited {
        Ok(Ok(Some(object))) => object,
        Ok(Ok(None)) => {
            progress.finish_and_clear();
            anyhow::bail!("updatepreflight/{name} was deleted while waiting for its result")
        }
        Ok(Err(e)) => {
            progress.finish_and_clear();
            return Err(anyhow::Error::from(e).context(format!("watching updatepreflight/{name}")));
        }
        Err(_) => {
            progress.finish_and_clear();
            anyhow::bail!(
                "no result within {}",
                humantime::format_duration(args.timeout)
            );
        }
    };
    progress.finish_and_clear();
    let status = done.status.unwrap_or_default();
    println!(
        "{}: {:?}",
        target.display(),
        status.phase.unwrap_or(Phase::Error)
    );
    let report = crate::report::Report::from_results(
        target.display().to_owned(),
        target.image.clone(),
        status.results.clone(),
    );
    let color = std::io::IsTerminal::is_terminal(&std::io::stdout());
    print!("{}", report.render(crate::report::Format::Table, color));
    Ok(match status.phase {
        Some(Phase::Passed) => ExitCode::SUCCESS,
        Some(Phase::Failed) => ExitCode::from(3),
        _ => ExitCode::from(1),
    })
}
