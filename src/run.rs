//! Wiring for the subcommands: build the parts from flags and start them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tracing::{info, warn};

use crate::certs;
use crate::cli::{CertsArgs, ServeArgs};
use crate::cluster::{self, EventRecorder, NoCluster, OverrideAuthorizer, SubjectAccessReviewer};
use crate::metrics::Metrics;
use crate::preflight::{DirectorySource, ResultSource};
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

    let source: Arc<dyn ResultSource> = match &args.cluster.results_dir {
        Some(dir) => {
            let source = DirectorySource::load(dir)?;
            info!(dir = %dir.display(), objects = source.len(), "serving results from a directory");
            Arc::new(source)
        }
        None => {
            let source = DirectorySource::embedded();
            info!(
                objects = source.len(),
                "serving the sample results compiled in from examples/results/"
            );
            Arc::new(source)
        }
    };

    let kubeconfig = args.cluster.kubeconfig.as_deref();
    let (authorizer, events): (Arc<dyn OverrideAuthorizer>, Option<EventRecorder>) =
        if cluster_configured(kubeconfig) {
            let client = cluster::client(kubeconfig)
                .await
                .context("connecting to the cluster")?;
            let events = EventRecorder::spawn(
                client.clone(),
                args.cluster.instance.clone(),
                metrics.clone(),
            );
            (Arc::new(SubjectAccessReviewer::new(client)), Some(events))
        } else {
            warn!(
                "no cluster configured: overrides cannot be authorized and no Events are published"
            );
            (Arc::new(NoCluster), None)
        };

    let files = cert_files(&args)?;
    let cert = Arc::new(
        ReloadingCert::load(files.clone(), provider.clone(), metrics.clone())
            .context("loading the serving certificate")?,
    );
    tokio::spawn(cert.clone().watch(args.tls.tls_reload_interval));
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

    let gate = Arc::new(Gate {
        source: source.clone(),
        authorizer,
        events,
        policy: args.policy.policy(),
        metrics: metrics.clone(),
    });
    let health = Arc::new(Health {
        source,
        metrics,
        shutting_down: Default::default(),
    });
    let listen = Listen {
        webhook,
        admin,
        max_concurrency: args.server.max_concurrency,
        handshake_timeout: args.server.handshake_timeout,
        header_read_timeout: args.server.header_read_timeout,
        shutdown_delay: args.server.shutdown_delay,
        shutdown_grace: args.server.shutdown_grace,
    };
    server::run(listen, tls, gate, health, server::signal()).await
}
