//! HTTP/2 connections: the handshake, sending on a stream slot, which failures prove a
//! request unprocessed, and the connection task that publishes the stream limit.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::client::conn::http2;

use super::body::{PooledBody, Release, StreamSlot};
use super::connect::Io;
use super::retry::{AttemptError, Retry};
use super::{H2Conn, PoolInner};
use crate::body::Body;
use crate::rt::Executor;

impl PoolInner {
    /// The HTTP/2 handshake on a TLS stream whose ALPN chose `h2`: keep-alive PINGs every
    /// [`PoolConfig::keep_alive_interval`](super::PoolConfig::keep_alive_interval) of
    /// silence (idle or not), the connection closed when one goes unanswered for
    /// [`PoolConfig::keep_alive_timeout`](super::PoolConfig::keep_alive_timeout). The
    /// connection task is spawned on the executor; the returned record starts with no
    /// stream counted and remembers the certificate `generation` it was dialled with.
    /// A failed handshake is never retried: the request may have been written.
    pub(super) async fn handshake_h2(
        &self,
        io: Io,
        generation: u64,
    ) -> Result<Arc<H2Conn>, AttemptError> {
        let mut builder = http2::Builder::new(self.executor.clone());
        builder
            .timer(self.timer.clone())
            .keep_alive_interval(self.config.keep_alive_interval)
            .keep_alive_timeout(self.config.keep_alive_timeout)
            .keep_alive_while_idle(true);
        let (send, conn) = builder.handshake(io).await.map_err(|e| AttemptError {
            error: Box::new(e),
            retry: Retry::No,
        })?;
        let max_streams = Arc::new(AtomicUsize::new(conn.current_max_send_streams()));
        self.executor.spawn(WatchedH2 {
            conn,
            max_streams: max_streams.clone(),
        });
        Ok(Arc::new(H2Conn {
            send,
            in_flight: AtomicUsize::new(0),
            max_streams,
            cert_generation: generation,
            draining: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Sends `req` on `conn`, whose stream slot the caller has already counted. The slot
    /// is given back when the response body ends or is dropped (the [`StreamSlot`] rides
    /// in the [`PooledBody`]), or at once when sending fails. A failure that shows the
    /// connection going away marks it draining, so no later pick chooses it.
    pub(super) async fn send_h2(
        &self,
        conn: Arc<H2Conn>,
        req: Request<Body>,
    ) -> Result<Response<Body>, AttemptError> {
        let mut send = conn.send.clone();
        let release = Release::Http2 {
            _slot: StreamSlot(conn),
        };
        match send.send_request(req).await {
            Ok(res) => Ok(res.map(|body| {
                Body::new(PooledBody {
                    inner: body,
                    release: Some(release),
                })
            })),
            Err(e) => {
                let retry = h2_retry(&e);
                if retry == Retry::Fresh {
                    if let Release::Http2 { _slot } = &release {
                        _slot.0.draining.store(true, Ordering::Release);
                    }
                }
                drop(release);
                Err(AttemptError {
                    error: Box::new(e),
                    retry,
                })
            }
        }
    }
}

/// The `h2` error somewhere in `e`'s source chain (hyper keeps it there), to read its
/// reason and whether the peer sent it.
fn h2_error(e: &hyper::Error) -> Option<&h2::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            return Some(h2);
        }
        cur = err.source();
    }
    None
}

/// Whether an HTTP/2 request failed in a way that proves the backend did not process it:
/// a `REFUSED_STREAM` reset (the stream limit; any connection will do), or a GOAWAY from
/// the backend (h2 fails exactly the streams above its last stream id when one arrives)
/// or a connection already closed when the request was to be sent (a new connection).
fn h2_retry(e: &hyper::Error) -> Retry {
    if e.is_canceled() || e.is_closed() {
        return Retry::Fresh;
    }
    match h2_error(e) {
        Some(h2) if h2.is_remote() && h2.is_go_away() => Retry::Fresh,
        Some(h2) if h2.is_remote() && h2.reason() == Some(h2::Reason::REFUSED_STREAM) => {
            Retry::Elsewhere
        }
        _ => Retry::No,
    }
}

pin_project_lite::pin_project! {
    /// An HTTP/2 connection task that publishes the backend's stream limit as it changes.
    ///
    /// The limit (`SETTINGS_MAX_CONCURRENT_STREAMS`) can only change while the connection
    /// is polled, so it is read after every poll and stored where `pick` reads it
    /// without a lock. The task ends with the connection; an error ending it is logged at
    /// debug and otherwise seen by the requests on it.
    struct WatchedH2 {
        #[pin]
        conn: http2::Connection<Io, Body, Executor>,
        max_streams: Arc<AtomicUsize>,
    }
}

impl Future for WatchedH2 {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let polled = this.conn.as_mut().poll(cx);
        this.max_streams
            .store(this.conn.current_max_send_streams(), Ordering::Release);
        match polled {
            Poll::Ready(Ok(())) => Poll::Ready(()),
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "backend HTTP/2 connection ended with an error");
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
