//! A backend HTTP/2 connection's task: the connection driven, its stream limit
//! published, and keep-alive PINGs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::PingPong;
use h2::client::Connection;

use super::{ConnWatch, H2Io};
use crate::rt::Timer;

/// Keep-alive PINGs on one connection: one when nothing has been received for
/// `interval` (busy or idle, as hyper's client with `keep_alive_while_idle`), and the
/// connection given up when its answer has not come `timeout` after it was sent.
pub(super) struct KeepAlive {
    pub(super) ping: Option<PingPong>,
    pub(super) interval: Duration,
    pub(super) timeout: Duration,
    pub(super) awaiting_pong: bool,
    /// Until the silence is long enough for a PING, or until the awaited answer is late.
    pub(super) sleep: Pin<Box<dyn hyper::rt::Sleep>>,
    /// Reads that brought bytes on the connection's stream, counted by it.
    pub(super) reads: Arc<AtomicU64>,
    pub(super) reads_seen: u64,
    /// When the count was last seen to move.
    pub(super) last_read: Instant,
    pub(super) timer: Timer,
}

impl KeepAlive {
    /// `Ready` when the connection is to be closed: its PING went unanswered.
    fn poll_dead(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(ping) = &mut self.ping else {
            return Poll::Pending;
        };
        let reads = self.reads.load(Ordering::Relaxed);
        if reads != self.reads_seen {
            self.reads_seen = reads;
            self.last_read = self.timer.now();
        }
        loop {
            if self.awaiting_pong {
                match ping.poll_pong(cx) {
                    Poll::Ready(Ok(_)) => {
                        self.awaiting_pong = false;
                        self.last_read = self.timer.now();
                        self.sleep = self.timer.sleep(self.interval);
                    }
                    // The connection is closing; its own poll reports why.
                    Poll::Ready(Err(_)) => {
                        self.ping = None;
                        return Poll::Pending;
                    }
                    Poll::Pending => {}
                }
            }
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if self.awaiting_pong {
                return Poll::Ready(());
            }
            let quiet = self.timer.now().saturating_duration_since(self.last_read);
            if quiet < self.interval {
                // Something came meanwhile: wait out the rest of a silence.
                self.sleep = self.timer.sleep(self.interval - quiet);
                continue;
            }
            if ping.send_ping(h2::Ping::opaque()).is_err() {
                self.ping = None;
                return Poll::Pending;
            }
            self.awaiting_pong = true;
            self.sleep = self.timer.sleep(self.timeout);
        }
    }
}

pin_project_lite::pin_project! {
    /// A backend HTTP/2 connection's task: drives the connection, publishes the backend's
    /// stream limit as it changes (it can only change while the connection is polled, so
    /// it is read after every poll and stored where `pick` reads it without a lock), and
    /// closes the connection when a keep-alive PING goes unanswered. Dropping the
    /// connection fails its open streams at once. The task ends with the connection; an
    /// error ending it is logged at debug and otherwise seen by the requests on it.
    pub(super) struct ConnTask {
        #[pin]
        pub(super) conn: Connection<H2Io, Bytes>,
        pub(super) watch: Arc<ConnWatch>,
        pub(super) keep_alive: KeepAlive,
    }

    impl PinnedDrop for ConnTask {
        fn drop(this: Pin<&mut Self>) {
            this.watch.close();
        }
    }
}

impl Future for ConnTask {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let polled = this.conn.as_mut().poll(cx);
        this.watch.publish(this.conn.max_concurrent_send_streams());
        match polled {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "backend HTTP/2 connection ended with an error");
            }
            Poll::Pending => {
                if this.keep_alive.poll_dead(cx).is_pending() {
                    return Poll::Pending;
                }
                tracing::debug!(
                    timeout = ?this.keep_alive.timeout,
                    "backend HTTP/2 connection did not answer a PING; closing it"
                );
            }
        }
        // Not for new streams from now on, whenever the executor drops the task.
        this.watch.close();
        Poll::Ready(())
    }
}
