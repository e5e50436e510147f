//! The request body's pipe onto its HTTP/2 stream, hyper's `PipeToSendStream`, and the
//! guard that resets the stream when the caller gives up before the response.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use h2::{Reason, SendStream};
use http_body::Body as _;

use crate::body::Body;

/// Sends a request body on its stream as the backend's flow-control window allows, then
/// ends the stream (with trailers, when the body has them). Mirrors hyper 1.12's
/// `PipeToSendStream`: send capacity is claimed only for a chunk in hand (claiming it
/// ahead of the body can deadlock a second stream with backends that send WINDOW_UPDATE
/// only once their window is used up, hyper#4003), a reset from the backend is watched
/// for while waiting on the body or the window, and a body that fails resets the stream
/// with the HTTP/2 reason in its error (`INTERNAL_ERROR` when none). When the request's
/// caller gives up before the response (`cancel` fires), the stream is reset with
/// `CANCEL`, so the backend stops and the connection's window is freed.
pub(super) struct PipeBody {
    pub(super) body: Body,
    pub(super) tx: SendStream<Bytes>,
    /// A chunk taken from the body that waits for send capacity, and whether it ends it.
    pub(super) buffered: Option<(Bytes, bool)>,
    /// Fires when the caller dropped the request before its response; closed (and then
    /// dropped here) once the response came.
    pub(super) cancel: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Future for PipeBody {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if let Some(cancel) = &mut this.cancel {
            match Pin::new(cancel).poll(cx) {
                Poll::Ready(Ok(())) => {
                    tracing::debug!(
                        "request dropped before its response; resetting the backend stream"
                    );
                    this.tx.send_reset(Reason::CANCEL);
                    return Poll::Ready(());
                }
                Poll::Ready(Err(_)) => this.cancel = None,
                Poll::Pending => {}
            }
        }
        loop {
            if let Poll::Ready(reset) = this.tx.poll_reset(cx) {
                tracing::debug!(?reset, "backend reset the stream of a request body");
                return Poll::Ready(());
            }
            if let Some((data, end)) = this.buffered.take() {
                if this.tx.capacity() == 0 {
                    loop {
                        match this.tx.poll_capacity(cx) {
                            Poll::Ready(Some(Ok(0))) => {}
                            Poll::Ready(Some(Ok(_))) => break,
                            Poll::Ready(Some(Err(e))) => {
                                tracing::debug!(error = %e, "backend HTTP/2 request body not sent");
                                return Poll::Ready(());
                            }
                            Poll::Ready(None) => return Poll::Ready(()),
                            Poll::Pending => {
                                this.buffered = Some((data, end));
                                return Poll::Pending;
                            }
                        }
                    }
                }
                if this.tx.send_data(data, end).is_err() || end {
                    return Poll::Ready(());
                }
                continue;
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let end = this.body.is_end_stream();
                        if data.is_empty() {
                            // Needs no capacity: an explicit end goes straight out.
                            if this.tx.send_data(data, end).is_err() || end {
                                return Poll::Ready(());
                            }
                            continue;
                        }
                        // A small claim; h2 raises it to the chunk's length as it sends.
                        this.tx.reserve_capacity(1);
                        this.buffered = Some((data, end));
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            this.tx.reserve_capacity(0);
                            let _ = this.tx.send_trailers(trailers);
                            return Poll::Ready(());
                        }
                    }
                },
                Some(Err(e)) => {
                    let reason = h2_reason(&*e);
                    tracing::debug!(error = %e, ?reason, "client request body failed; resetting the backend stream");
                    this.tx.send_reset(reason);
                    return Poll::Ready(());
                }
                None => {
                    this.tx.reserve_capacity(0);
                    let _ = this.tx.send_data(Bytes::new(), true);
                    return Poll::Ready(());
                }
            }
        }
    }
}

/// The HTTP/2 reason of the first `h2` error in `e`'s source chain (a client stream
/// reset with `CANCEL`, say), else `INTERNAL_ERROR`: what a failed body resets with.
pub(super) fn h2_reason(e: &(dyn std::error::Error + 'static)) -> Reason {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(reason) = err.downcast_ref::<h2::Error>().and_then(h2::Error::reason) {
            return reason;
        }
        cur = err.source();
    }
    Reason::INTERNAL_ERROR
}

/// Held by a request waiting for its response while its body's pipe runs in a task of
/// its own: dropped unanswered (the caller gave up), it tells the pipe to reset the
/// stream.
pub(super) struct CancelOnDrop(pub(super) Option<tokio::sync::oneshot::Sender<()>>);

impl CancelOnDrop {
    /// The response came: the pipe goes on sending the body.
    pub(super) fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}
