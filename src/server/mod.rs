//! The servers: the TLS webhook (axum over rustls, with certificate reload
//! and request limits) and the admin port (plain HTTP, or TLS with the same
//! certificate).

pub mod admin;
mod conns;
mod listener;
mod pace;
pub mod tls;
pub mod webhook;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::{Instrument, info, info_span};

pub use admin::Health;
pub use pace::MinBodyRate;
pub use tls::{CertFiles, ClientCa, ReloadingCert};
pub use webhook::{Gate, app};

/// Listening and limits.
#[derive(Debug)]
pub struct Listen {
    pub webhook: std::net::TcpListener,
    pub admin: std::net::TcpListener,
    /// Serve the admin port over TLS too, with this configuration (the
    /// webhook's certificate, no client certificates).
    pub admin_tls: Option<rustls::ServerConfig>,
    pub max_concurrency: usize,
    /// Webhook connections past their TLS handshake at once, and TLS
    /// handshakes at once; one peer may hold a quarter of them. Past a
    /// limit, the longest-idle connection in the way is closed.
    pub max_connections: usize,
    /// Connections of one peer busy with a review at once; a request past
    /// it is refused (503).
    pub max_busy_per_peer: usize,
    /// Slots only `api_server`'s addresses may take, while any is known.
    pub reserved_connections: usize,
    pub api_server: Arc<crate::cluster::api_server::ApiServerAddresses>,
    /// The least rate a review's body must arrive at.
    pub min_body_rate: MinBodyRate,
    pub handshake_timeout: Duration,
    /// Time allowed to read a request's headers once they begin, and after
    /// the handshake, for the first request to arrive when the gate is half
    /// full or draining.
    pub header_read_timeout: Duration,
    /// How long a connection may sit with nothing arriving
    /// ([`listener::Webhook::idle`]).
    pub idle_timeout: Duration,
    /// How long to stay up but unready after SIGTERM, so endpoints update.
    pub shutdown_delay: Duration,
    /// How long in-flight reviews get to finish.
    pub shutdown_grace: Duration,
}

/// Runs both servers until `shutdown` completes, then drains: readiness
/// turns false and each HTTP/1 answer closes its connection
/// ([`close_when_draining`]); after `shutdown_delay` new connections stop,
/// and in-flight reviews get `shutdown_grace` to finish.
pub async fn serve(
    listen: Listen,
    tls: rustls::ServerConfig,
    gate: Arc<Gate>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let webhook_addr = listen.webhook.local_addr()?;
    let admin_addr = listen.admin.local_addr()?;
    listen.webhook.set_nonblocking(true)?;
    listen.admin.set_nonblocking(true)?;

    let mut http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // HTTP/1: hyper's header timeout is off, because it also closes a
    // keep-alive connection waiting for its next request; the listener
    // keeps both deadlines apart (header read, idle). HTTP/2: pings close a
    // connection whose peer is gone, and a client gets few streams at once.
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    http.http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(Duration::from_secs(10))
        .max_concurrent_streams(32);
    let webhook_app = app(gate.clone(), listen.max_concurrency).layer(
        axum::middleware::from_fn_with_state(health.clone(), close_when_draining),
    );
    let served = Arc::new(listener::Webhook {
        table: conns::Table::new(
            conns::Limits::new(
                listen.max_connections,
                listen.max_busy_per_peer,
                listen.reserved_connections,
            ),
            listen.api_server,
            gate.metrics.tls.clone(),
        ),
        tls: RustlsAcceptor::new(RustlsConfig::from_config(Arc::new(tls)))
            .handshake_timeout(listen.handshake_timeout),
        header_read: listen.header_read_timeout,
        idle: listen.idle_timeout,
        min_body_rate: listen.min_body_rate,
        http,
        app: webhook_app,
    });
    let (phase, phase_rx) = tokio::sync::watch::channel(listener::Phase::Serving);
    let mut webhook = tokio::spawn(
        listener::serve(
            tokio::net::TcpListener::from_std(listen.webhook)?,
            served,
            phase_rx,
        )
        .instrument(info_span!("webhook")),
    );

    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin_app = admin::app(health.clone());
    let admin = match listen.admin_tls {
        None => {
            let listener = tokio::net::TcpListener::from_std(listen.admin)?.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            tokio::spawn(
                axum::serve(listener, admin_app)
                    .with_graceful_shutdown(async {
                        let _ = admin_stopped.await;
                    })
                    .into_future()
                    .instrument(info_span!("admin")),
            )
        }
        Some(admin_tls) => {
            let admin_handle = axum_server::Handle::<SocketAddr>::new();
            let acceptor = RustlsAcceptor::new(RustlsConfig::from_config(Arc::new(admin_tls)))
                .handshake_timeout(listen.handshake_timeout)
                .acceptor(NoDelay);
            let server = axum_server::from_tcp(listen.admin)?
                .acceptor(acceptor)
                .handle(admin_handle.clone());
            tokio::spawn(async move {
                let _ = admin_stopped.await;
                admin_handle.graceful_shutdown(Some(Duration::from_secs(1)));
            });
            tokio::spawn(
                server
                    .serve(admin_app.into_make_service())
                    .instrument(info_span!("admin")),
            )
        }
    };
    info!(%webhook_addr, %admin_addr, path = webhook::PATH, "serving");

    shutdown.await;
    health.shutting_down.store(true, Ordering::Relaxed);
    info!(delay = ?listen.shutdown_delay, "shutting down: unready, then draining");
    tokio::time::sleep(listen.shutdown_delay).await;
    let _ = phase.send(listener::Phase::Draining);
    // The task ends once every connection has.
    let drained = tokio::time::timeout(listen.shutdown_grace, &mut webhook).await;
    let ended = match drained {
        Ok(ended) => ended,
        Err(_) => {
            let _ = phase.send(listener::Phase::Stopped);
            webhook.await
        }
    };
    ended
        .context("webhook server task")?
        .context("webhook server")?;
    let _ = admin_stop.send(());
    admin
        .await
        .context("admin server task")?
        .context("admin server")?;
    info!("stopped");
    Ok(())
}

/// The admin port's acceptor under TLS: sets `TCP_NODELAY`, so answers
/// are not held back waiting for the client's delayed ACK.
#[derive(Clone, Copy, Debug)]
struct NoDelay;

impl<S> Accept<tokio::net::TcpStream, S> for NoDelay {
    type Stream = tokio::net::TcpStream;
    type Service = S;
    type Future = std::future::Ready<std::io::Result<(Self::Stream, S)>>;

    fn accept(&self, stream: tokio::net::TcpStream, service: S) -> Self::Future {
        let _ = stream.set_nodelay(true);
        std::future::ready(Ok((stream, service)))
    }
}

/// While the gate drains, every HTTP/1 answer closes its connection.
///
/// The API server speaks HTTP/1.1 to webhooks behind a Service and reuses
/// its idle keep-alive connections, newest first; it never retries a POST
/// whose connection closed under it, and reports such a review as `EOF`.
/// So the gate never closes a connection a client may be about to use:
/// during `shutdown_delay` each answer carries `Connection: close`, the
/// client leaves on that clean boundary, and its next review opens a new
/// connection, which the Service sends to a replica that stays. What is
/// still open when the delay ends has sat idle through all of it.
/// HTTP/2 needs none of this: its graceful shutdown (GOAWAY) tells the
/// client which streams to send again.
async fn close_when_draining(
    axum::extract::State(health): axum::extract::State<Arc<Health>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let http1 = request.version() <= axum::http::Version::HTTP_11;
    let mut response = next.run(request).await;
    if http1 && health.shutting_down.load(Ordering::Relaxed) {
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// Listens for SIGTERM and SIGINT from now on, so a signal that arrives while
/// the gate is still starting is not the default action's instant death; the
/// future completes on the first of them.
pub(crate) fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let (mut term, mut interrupt) = match (term, interrupt) {
            (Ok(term), Ok(interrupt)) => (term, interrupt),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                return std::future::pending().await;
            }
        };
        tokio::select! {
            _ = term.recv() => info!("SIGTERM"),
            _ = interrupt.recv() => info!("SIGINT"),
        }
    }
}
