//! A cap on open webhook connections. Past it, a new connection is closed
//! at once, before its TLS handshake: idle or slow clients cannot hold every
//! socket the gate has, and the connections already open keep being served.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::debug;

/// Wraps an acceptor so that at most `max` connections are open at once.
#[derive(Clone)]
pub(crate) struct CappedAcceptor<A> {
    inner: A,
    slots: Arc<Semaphore>,
}

impl<A> CappedAcceptor<A> {
    pub fn new(inner: A, max: usize) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max.max(1))),
        }
    }
}

impl<A, I, S> Accept<I, S> for CappedAcceptor<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Capped<A::Stream>;
    type Service = A::Service;
    type Future = Pin<Box<dyn Future<Output = io::Result<(Self::Stream, Self::Service)>> + Send>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            debug!("connection cap reached: a new connection is closed");
            // Dropping the stream closes the connection.
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other(
                "the connection cap is reached",
            ))));
        };
        let accepted = self.inner.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = accepted.await?;
            Ok((
                Capped {
                    inner: stream,
                    _slot: slot,
                },
                service,
            ))
        })
    }
}

/// A connection that holds its slot until it closes.
pub(crate) struct Capped<S> {
    inner: S,
    _slot: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
