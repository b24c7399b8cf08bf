//! The webhook's accept loop: every socket with `TCP_NODELAY`, a TLS
//! handshake with a deadline, a slot from the connection table once it is
//! done ([`super::conns`]), a deadline for the first request, and HTTP/1 or
//! HTTP/2 served by hyper until the connection ends, is told to give way,
//! or the server drains.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum_server::accept::Accept;
use axum_server::tls_rustls::RustlsAcceptor;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until};
use tower::ServiceExt;
use tracing::debug;

use super::conns::{Table, Ticket};

/// How long a connection told to close gets to finish what it is doing
/// (an HTTP/2 client its streams after GOAWAY) before it is dropped. Its
/// slot is free already.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Where the server is in its life; connections follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Serving,
    /// No new connections; each open one closes once idle (HTTP/2: GOAWAY).
    Draining,
    /// Whatever is left is dropped.
    Stopped,
}

/// What every connection of the webhook is served with.
pub(crate) struct Webhook {
    pub table: Arc<Table>,
    pub tls: RustlsAcceptor,
    /// The deadline for the first request after the handshake.
    pub first_request: Duration,
    pub http: auto::Builder<TokioExecutor>,
    pub app: Router,
}

/// Accepts until the phase leaves `Serving`, then waits for the
/// connections to end: up to `grace` for them to finish, then they are
/// dropped.
pub(crate) async fn serve(
    listener: TcpListener,
    webhook: Arc<Webhook>,
    mut phase: watch::Receiver<Phase>,
) -> io::Result<()> {
    // Each connection task holds a sender; `recv` ends when all are gone.
    let (live, mut ended) = mpsc::channel::<Infallible>(1);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = phase.wait_for(|p| *p != Phase::Serving) => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was
                // taken: nothing to do but wait a moment.
                debug!(error = %e, "accept failed");
                sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let Some(ticket) = webhook.table.admit(peer.ip()) else {
            continue;
        };
        tokio::spawn(connection(
            tcp,
            ticket,
            webhook.clone(),
            phase.clone(),
            live.clone(),
        ));
    }
    drop(listener);
    drop(live);
    let _ = ended.recv().await;
    Ok(())
}

/// One connection, from its handshake to its end.
async fn connection(
    tcp: TcpStream,
    mut ticket: Ticket,
    webhook: Arc<Webhook>,
    mut phase: watch::Receiver<Phase>,
    _live: mpsc::Sender<Infallible>,
) {
    let handshake = tokio::select! {
        done = webhook.tls.accept(tcp, ()) => done,
        // Told to give way: nothing is lost but a handshake.
        _ = &mut ticket.closed => return,
        _ = phase.wait_for(|p| *p == Phase::Stopped) => return,
    };
    let tls = match handshake {
        Ok((tls, ())) => tls,
        Err(e) => {
            let reason = if e.kind() == io::ErrorKind::TimedOut {
                "handshake_timeout"
            } else {
                "handshake_failed"
            };
            debug!(error = %e, reason, "TLS handshake failed");
            ticket.table().closed(reason);
            return;
        }
    };
    let Some(activity) = ticket.open() else {
        return;
    };
    let first_request = Instant::now() + webhook.first_request;

    let on_request = activity.clone();
    let app = webhook.app.clone();
    let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = on_request.begin();
        let answer = app.clone().oneshot(request);
        async move {
            let answer = answer.await;
            drop(busy);
            answer
        }
    });
    let conn = webhook
        .http
        .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(service));
    tokio::pin!(conn);

    // When the connection was told to close, and until when it may take.
    let mut closing: Option<Instant> = None;
    let close = |conn: std::pin::Pin<&mut _>, closing: &mut Option<Instant>| {
        if closing.is_none() {
            auto::UpgradeableConnection::graceful_shutdown(conn);
            *closing = Some(Instant::now() + CLOSE_GRACE);
        }
    };
    if *phase.borrow_and_update() != Phase::Serving {
        close(conn.as_mut(), &mut closing);
    }
    loop {
        let grace_over = closing.unwrap_or_else(far_future);
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    debug!(error = %e, "connection ended");
                }
                return;
            }
            _ = sleep_until(first_request), if closing.is_none() && !activity.has_sent_a_request() => {
                debug!("no request after the handshake: closing");
                ticket.table().closed("no_first_request");
                ticket.release();
                close(conn.as_mut(), &mut closing);
            }
            _ = &mut ticket.closed, if closing.is_none() => {
                debug!("giving way to a new connection");
                close(conn.as_mut(), &mut closing);
            }
            changed = phase.changed() => match (changed, *phase.borrow()) {
                (Ok(()), Phase::Serving) => {}
                (Ok(()), Phase::Draining) => close(conn.as_mut(), &mut closing),
                (Ok(()), Phase::Stopped) | (Err(_), _) => return,
            },
            _ = sleep_until(grace_over), if closing.is_some() => return,
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
