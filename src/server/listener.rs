//! The webhook's accept loop: every socket with `TCP_NODELAY`, a TLS
//! handshake with a deadline, a slot from the connection table once it is
//! done ([`super::conns`]), a deadline for the first request, and HTTP/1 or
//! HTTP/2 served by hyper until the connection ends, is told to give way,
//! or the server drains. Each request is refused at once when its peer
//! has as many connections busy as it may, and its body is held to the
//! least rate ([`super::pace`]).

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum_server::accept::Accept;
use axum_server::tls_rustls::RustlsAcceptor;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until};
use tower::ServiceExt;
use tracing::debug;

use super::conns::{Activity, Table, Ticket, Waiting};
use super::pace::{MinBodyRate, Paced};

/// How long a connection told to close gets to finish what it is doing
/// (an HTTP/2 client its streams after GOAWAY) before it is dropped. Its
/// slot is free already.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Where the server is in its life; connections follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Serving,
    /// Each open connection that has answered a review closes once idle
    /// (HTTP/2: GOAWAY). New connections are still taken and each is
    /// answered its first review (HTTP/1: with `Connection: close`): the
    /// API server may still be routed here while endpoints catch up, and a
    /// review it has sent is never dropped unanswered. Accepting stops
    /// once no connection is open and none came for [`QUIET`].
    Draining,
    /// Whatever is left is dropped.
    Stopped,
}

/// While draining, how long without a new connection (and none open)
/// before the listener closes: the endpoints have moved on.
const QUIET: Duration = Duration::from_secs(2);

/// What every connection of the webhook is served with.
pub(crate) struct Webhook {
    pub table: Arc<Table>,
    pub tls: RustlsAcceptor,
    /// The deadline for a request's head once its first byte came, and
    /// for the first request after the handshake when the gate is half
    /// full or draining.
    pub header_read: Duration,
    /// How long a connection may sit with nothing arriving. Longer than
    /// the API server's 90 s keep-alive, so that the API server always
    /// closes an idle connection first: a server that closes one under a
    /// client races the client's next review on it, which fails (`EOF`,
    /// "use of closed network connection"), never retried.
    pub idle: Duration,
    /// The least rate a request's body must arrive at.
    pub min_body_rate: MinBodyRate,
    pub http: auto::Builder<TokioExecutor>,
    pub app: Router,
}

/// Accepts while serving and while draining, until no connection is open
/// and none came for [`QUIET`], or the phase is `Stopped`; then waits for
/// the connections to end.
pub(crate) async fn serve(
    listener: TcpListener,
    webhook: Arc<Webhook>,
    mut phase: watch::Receiver<Phase>,
) -> io::Result<()> {
    // Each connection task holds a sender; `recv` ends when all are gone.
    let (live, mut ended) = mpsc::channel::<Infallible>(1);
    let mut last_accept = Instant::now();
    loop {
        let now = *phase.borrow_and_update();
        if now == Phase::Stopped {
            break;
        }
        let draining = now == Phase::Draining;
        let accepted = tokio::select! {
            biased;
            changed = phase.changed() => match changed {
                Ok(()) => continue,
                Err(_) => break,
            },
            _ = sleep(QUIET / 4), if draining => {
                // Only this loop's own sender left: no connection is open.
                if live.strong_count() == 1 && last_accept.elapsed() >= QUIET {
                    break;
                }
                continue;
            }
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
        last_accept = Instant::now();
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
    // HTTP/2 (by ALPN) may be told to go at any time: GOAWAY says which
    // streams to send again. HTTP/1 has no such word, so a connection is
    // closed under no review the client may have sent.
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    let Some(activity) = ticket.open() else {
        return;
    };
    // Checked a few times per header-read deadline.
    let mut check = tokio::time::interval(webhook.header_read / 4);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let on_request = activity.clone();
    let served = webhook.clone();
    let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = on_request.begin();
        let served = served.clone();
        async move {
            let Some(busy) = busy else {
                served.table.refused("peer_busy");
                return Ok(peer_busy(request.version(), served.table.busy_per_peer()));
            };
            let table = served.table.clone();
            let request = request.map(|body| {
                axum::body::Body::new(Paced::new(body, served.min_body_rate, move || {
                    table.refused("slow_body")
                }))
            });
            let answer = served.app.clone().oneshot(request).await;
            drop(busy);
            answer
        }
    });
    let heard = Heard {
        io: tls,
        activity: activity.clone(),
    };
    let conn = webhook
        .http
        .serve_connection_with_upgrades(TokioIo::new(heard), TowerToHyperService::new(service));
    tokio::pin!(conn);

    // When the connection was told to close, and until when it may take.
    let mut closing: Option<Instant> = None;
    let close = |conn: std::pin::Pin<&mut _>, closing: &mut Option<Instant>| {
        if closing.is_none() {
            auto::UpgradeableConnection::graceful_shutdown(conn);
            *closing = Some(Instant::now() + CLOSE_GRACE);
        }
    };
    // Draining already: an HTTP/1 connection is still answered its first
    // review (the API server sent it here), and closes after it.
    if *phase.borrow_and_update() != Phase::Serving && http2 {
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
            _ = check.tick(), if closing.is_none() => {
                let draining = *phase.borrow() != Phase::Serving;
                if let Some(reason) = overdue(&activity, &webhook, draining || ticket.table().under_pressure()) {
                    debug!(reason, "closing");
                    ticket.table().closed(reason);
                    ticket.release();
                    // Nothing is in flight. HTTP/2 is told (GOAWAY); an
                    // HTTP/1 connection is dropped, since hyper would wait
                    // for a head that began to end before closing it.
                    if !http2 {
                        return;
                    }
                    close(conn.as_mut(), &mut closing);
                }
            }
            _ = &mut ticket.closed, if closing.is_none() => {
                debug!("giving way to a new connection");
                close(conn.as_mut(), &mut closing);
            }
            changed = phase.changed() => match (changed, *phase.borrow()) {
                (Ok(()), Phase::Serving) => {}
                // A connection that has answered a review closes once idle;
                // an HTTP/1 one that has not yet is answered first.
                (Ok(()), Phase::Draining) if http2 || activity.has_sent_a_request() => {
                    close(conn.as_mut(), &mut closing)
                }
                (Ok(()), Phase::Draining) => {}
                (Ok(()), Phase::Stopped) | (Err(_), _) => return,
            },
            _ = sleep_until(grace_over), if closing.is_some() => return,
        }
    }
}

/// The answer to a request whose peer already has `busy_per_peer`
/// connections busy: 503, and on HTTP/1 the connection closes (its body,
/// if any, is never read).
fn peer_busy(version: hyper::Version, busy_per_peer: usize) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let mut answer = (
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "this address has {busy_per_peer} reviews in flight already, the most it may; the API server may retry\n"
        ),
    )
        .into_response();
    if version <= hyper::Version::HTTP_11 {
        answer.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    answer
}

/// Why a connection is past its deadline, if it is: a request head
/// arriving for longer than the header-read deadline; nothing arriving for
/// the idle deadline; or, when `pressed` (half full, or draining), no
/// first request by the header-read deadline after the handshake.
fn overdue(activity: &Activity, webhook: &Webhook, pressed: bool) -> Option<&'static str> {
    match activity.waiting() {
        Waiting::Busy => None,
        Waiting::Head(for_) => (for_ >= webhook.header_read).then_some("header_timeout"),
        Waiting::Idle(for_) if !activity.has_sent_a_request() && pressed => {
            (for_ >= webhook.header_read).then_some("no_first_request")
        }
        Waiting::Idle(for_) => (for_ >= webhook.idle).then_some("idle_timeout"),
    }
}

/// The connection's stream, telling its [`Activity`] when bytes come.
struct Heard<S> {
    io: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Heard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.heard();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Heard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}
