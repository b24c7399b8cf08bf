//! The least rate at which a review's body must arrive.
//!
//! A connection whose request is being answered is busy, and a busy
//! connection is never closed to make room ([`super::conns`]). A body that
//! trickles in would keep its connection busy until the API server's
//! timeout, so a few addresses sending bodies a byte at a time could hold
//! every slot. So, after a grace, a body must keep up an average of
//! `bytes_per_second` since its head: each byte buys `1 / bytes_per_second`
//! of time. A body that falls behind is cut off: the handler answers 408
//! and, on HTTP/1, the connection closes with its body unread.
//!
//! The API server sends a review at once, over a LAN or loopback, and its
//! body's first bytes come with the head, so it never comes near the floor;
//! a sender that stalls a moment (a lost packet) has the credit of what it
//! sent. Averaged since the head rather than over a sliding window: a
//! window would cost a trickling client no more bytes to stay busy, and
//! would cut an honest sender off for a stall its earlier bytes paid for.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The floor a body's rate is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinBodyRate {
    /// Bytes a second, averaged since the head; 0: no floor.
    pub bytes_per_second: u64,
    /// How long a body may bring nothing before it is judged.
    pub grace: Duration,
}

impl MinBodyRate {
    /// `serve`'s grace: long enough for TCP to recover a lost packet or
    /// two, short against the API server's timeouts (the gate's own
    /// webhook sets 5 s).
    pub const GRACE: Duration = Duration::from_secs(2);

    /// `bytes_per_second` after [`Self::GRACE`].
    pub fn new(bytes_per_second: u64) -> Self {
        Self {
            bytes_per_second,
            grace: Self::GRACE,
        }
    }

    /// When a body begun at `started` falls behind, having brought
    /// `received` bytes; never, without a floor.
    fn due(&self, started: Instant, received: u64) -> Option<Instant> {
        if self.bytes_per_second == 0 {
            return None;
        }
        let paid_for = Duration::from_secs_f64(received as f64 / self.bytes_per_second as f64);
        Some(started + self.grace + paid_for.min(Duration::from_secs(86_400)))
    }
}

/// Why a body was cut off.
#[derive(Debug, thiserror::Error)]
#[error("the review's body arrived slower than {bytes_per_second} bytes a second")]
pub(crate) struct SlowBody {
    pub bytes_per_second: u64,
}

/// A request body held to a [`MinBodyRate`]; `on_slow` is called once when
/// it falls behind.
pub(crate) struct Paced<B> {
    inner: B,
    rate: MinBodyRate,
    started: Instant,
    received: u64,
    due: Option<Pin<Box<Sleep>>>,
    on_slow: Option<Box<dyn FnOnce() + Send>>,
}

impl<B> Paced<B> {
    pub fn new(inner: B, rate: MinBodyRate, on_slow: impl FnOnce() + Send + 'static) -> Self {
        let started = Instant::now();
        Self {
            inner,
            rate,
            started,
            received: 0,
            due: rate
                .due(started, 0)
                .map(|at| Box::pin(tokio::time::sleep_until(at))),
            on_slow: Some(Box::new(on_slow)),
        }
    }
}

impl<B> Body for Paced<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        // What has arrived counts before the clock is read.
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if let (Some(due), Some(at)) = (
                        this.due.as_mut(),
                        this.rate.due(this.started, this.received),
                    ) {
                        due.as_mut().reset(at);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                this.due = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                let behind = this
                    .due
                    .as_mut()
                    .is_some_and(|due| due.as_mut().poll(cx).is_ready());
                if !behind {
                    return Poll::Pending;
                }
                this.due = None;
                if let Some(on_slow) = this.on_slow.take() {
                    on_slow();
                }
                Poll::Ready(Some(Err(Box::new(SlowBody {
                    bytes_per_second: this.rate.bytes_per_second,
                }))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::SinkExt;
    use futures::channel::mpsc;
    use http_body_util::{BodyExt, StreamBody};

    type Sent = Result<Frame<Bytes>, std::convert::Infallible>;

    /// A body whose bytes the test sends when it likes.
    fn channel() -> (mpsc::Sender<Sent>, StreamBody<mpsc::Receiver<Sent>>) {
        let (tx, rx) = mpsc::channel(4);
        (tx, StreamBody::new(rx))
    }

    fn bytes(n: usize) -> Sent {
        Ok(Frame::data(Bytes::from(vec![b' '; n])))
    }

    fn rate() -> MinBodyRate {
        MinBodyRate {
            bytes_per_second: 100,
            grace: Duration::from_secs(2),
        }
    }

    #[test]
    fn each_byte_buys_time_after_the_grace() {
        let start = Instant::now();
        assert_eq!(rate().due(start, 0), Some(start + Duration::from_secs(2)));
        assert_eq!(
            rate().due(start, 250),
            Some(start + Duration::from_millis(4500))
        );
        assert_eq!(MinBodyRate::new(0).due(start, 0), None, "no floor");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_falls_behind_is_cut_off_once_and_one_that_keeps_up_is_read_whole() {
        // Keeps up: 100 bytes each second (paid for a second each), then ends.
        let (mut tx, body) = channel();
        let sender = tokio::spawn(async move {
            for _ in 0..5 {
                tx.send(bytes(100)).await.unwrap();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let slow = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = slow.clone();
        let paced = Paced::new(body, rate(), move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let read = paced.collect().await.expect("read whole").to_bytes();
        assert_eq!(read.len(), 500);
        sender.await.unwrap();

        // Falls behind: 100 bytes, then nothing; cut off once the grace and
        // the second they paid for are over.
        let (mut tx, body) = channel();
        tx.send(bytes(100)).await.unwrap();
        let counted = slow.clone();
        let mut paced = Paced::new(body, rate(), move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let started = Instant::now();
        assert!(paced.frame().await.unwrap().is_ok());
        let error = paced.frame().await.unwrap().unwrap_err();
        assert!(error.is::<SlowBody>(), "{error}");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert_eq!(slow.load(std::sync::atomic::Ordering::Relaxed), 1);
        drop(tx);
    }
}
