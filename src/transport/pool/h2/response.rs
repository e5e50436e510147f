//! The response body of a backend's HTTP/2 stream.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use h2::{Reason, RecvStream};
use http_body::{Frame, SizeHint};

use crate::transport::pool::body::StreamSlot;

/// A backend's HTTP/2 response body. The stream's receive window is given back as data
/// is read, so the backend may send more; the stream slot is given back when the body is
/// dropped (h2 resets a stream dropped before its end with `CANCEL`).
pub(super) struct H2Body {
    pub(super) recv: RecvStream,
    pub(super) data_done: bool,
    /// What `Content-Length` says is still to come.
    pub(super) remaining: Option<u64>,
    pub(super) _slot: StreamSlot,
}

impl http_body::Body for H2Body {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    if let Some(left) = &mut this.remaining {
                        *left = left.saturating_sub(data.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                // A backend that resets with these has finished what it meant to send.
                Some(Err(e)) if matches!(e.reason(), Some(Reason::NO_ERROR | Reason::CANCEL)) => {
                    return Poll::Ready(None);
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.data_done = true,
            }
        }
        match ready!(this.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(left) => SizeHint::with_exact(left),
            None if self.recv.is_end_stream() => SizeHint::with_exact(0),
            None => SizeHint::default(),
        }
    }
}
