//! The response body that gives its connection back to the pool when it ends.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::uri::Authority;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1;

use super::{H2Conn, PoolInner};
use crate::body::Body;

/// An HTTP/1.1 connection a response holds, returned to the idle list when the response
/// was read whole.
pub(super) struct Release {
    /// The pool the connection goes back to.
    pub(super) pool: Arc<PoolInner>,
    /// The backend it is idle for.
    pub(super) authority: Authority,
    /// The connection itself.
    pub(super) send: http1::SendRequest<Body>,
    /// The client certificate it was opened with: after a rotation the pool drops it
    /// instead of reusing it.
    pub(super) cert_generation: u64,
}

pin_project_lite::pin_project! {
    /// An HTTP/1.1 response body that hands its connection back when it has been read to
    /// its end.
    pub(super) struct PooledBody {
        #[pin]
        pub(super) inner: Incoming,
        // Taken when the body ends and given back; a body dropped before its end drops
        // it instead, and the connection is closed.
        pub(super) release: Option<Release>,
    }
}

impl http_body::Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        // Readers stop at the last frame when the body says it has ended, so that counts
        // as the end as much as `None` does.
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            _ => false,
        };
        match &polled {
            _ if ended => {
                if let Some(Release {
                    pool,
                    authority,
                    send,
                    cert_generation,
                }) = this.release.take()
                {
                    pool.return_http1(&authority, send, cert_generation);
                }
            }
            // A broken body: its HTTP/1.1 connection is not reused.
            Poll::Ready(Some(Err(_))) => {
                this.release.take();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One request counted on an HTTP/2 connection until dropped.
pub(super) struct StreamSlot(pub(super) Arc<H2Conn>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
