//! The audited response: the future that writes `ResponseStarted` and `ResponseComplete`
//! as the inner service answers, and the body whose end writes `ResponseComplete`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use http::Response;
use http_body::Frame;
use pin_project_lite::pin_project;

use super::{Pending, Shared, Wait, audit_refused};
use crate::body::Body;

pin_project! {
    /// Response future of [`AuditService`] and [`FailedAuthenticationAuditService`].
    ///
    /// The inner future appears once, not once per state: every copy of it in an enum's
    /// variants multiplies what the compiler proves of the stack's nested futures.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: Option<F>,
        state: State,
        // What a blocking sink makes the request wait for: before the inner future is
        // polled, or (with `held`) before the answer goes out.
        pub(super) wait: Option<Wait>,
        held: Option<Response<Body>>,
    }
}

/// What a [`ResponseFuture`] does with the answer.
#[derive(Debug)]
pub(super) enum State {
    /// Not audited.
    Passthrough,
    /// Audited: the event waits for the answer (and then its body).
    Audited(Option<Box<Pending>>),
    /// Refused by authentication, perhaps: audited if so.
    Authentication(Option<(Arc<Shared>, SystemTime)>),
    /// Answered here, without the inner service.
    Ready(Option<Response<Body>>),
}

impl<F> ResponseFuture<F> {
    pub(super) fn new(inner: F, state: State) -> Self {
        ResponseFuture {
            inner: Some(inner),
            state,
            wait: None,
            held: None,
        }
    }

    pub(super) fn passthrough(inner: F) -> Self {
        ResponseFuture::new(inner, State::Passthrough)
    }

    pub(super) fn ready(response: Response<Body>) -> Self {
        ResponseFuture {
            inner: None,
            state: State::Ready(Some(response)),
            wait: None,
            held: None,
        }
    }
}

debug_fields!(ResponseFuture<F> { state });

impl<F: crate::body::Answer> Future for ResponseFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(wait) = this.wait {
            let kept = std::task::ready!(wait.as_mut().poll(cx));
            *this.wait = None;
            if let Some(res) = this.held.take() {
                return Poll::Ready(Ok(res));
            }
            if !kept {
                // The `RequestReceived` event was lost: refused, the inner future unpolled.
                if let State::Audited(pending) = this.state {
                    if let Some(mut pending) = pending.take() {
                        this.inner.set(None);
                        return Poll::Ready(Ok(pending.refuse()));
                    }
                }
            }
        }
        if let State::Ready(response) = this.state {
            return match response.take() {
                Some(res) => Poll::Ready(Ok(res)),
                None => Poll::Pending,
            };
        }
        let Some(inner) = this.inner.as_pin_mut() else {
            return Poll::Pending;
        };
        let mut res = std::task::ready!(inner.poll(cx))?;
        let wait = match this.state {
            State::Audited(pending) => match pending.take() {
                Some(mut pending) => {
                    let wait = pending.started(&res);
                    res = res.map(|body| {
                        Body::new(AuditedBody {
                            inner: body,
                            pending: Some(*pending),
                            finishing: None,
                        })
                    });
                    wait
                }
                None => None,
            },
            State::Authentication(audit) => match audit.take() {
                Some((shared, received)) => audit_refused(&shared, received, &mut res),
                None => None,
            },
            State::Passthrough | State::Ready(_) => None,
        };
        if let Some(mut wait) = wait {
            if wait.as_mut().poll(cx).is_pending() {
                *this.wait = Some(wait);
                *this.held = Some(res);
                return Poll::Pending;
            }
        }
        Poll::Ready(Ok(res))
    }
}

pin_project! {
    /// A response body whose end (or abandonment) writes the `ResponseComplete` event;
    /// with a blocking sink, its end waits for the sink.
    pub(super) struct AuditedBody<B> {
        #[pin]
        inner: B,
        pending: Option<Pending>,
        finishing: Option<Wait>,
    }
}

impl<B> http_body::Body for AuditedBody<B>
where
    B: http_body::Body<Data = bytes::Bytes>,
{
    type Data = bytes::Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, B::Error>>> {
        let this = self.project();
        if let Some(wait) = this.finishing {
            std::task::ready!(wait.as_mut().poll(cx));
            *this.finishing = None;
            return Poll::Ready(None);
        }
        let frame = std::task::ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            // The body is complete: write the event now rather than when it is dropped.
            if let Some(mut wait) = this.pending.take().and_then(|mut p| p.complete()) {
                if wait.as_mut().poll(cx).is_pending() {
                    *this.finishing = Some(wait);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        // Not before the event is written: a server that saw the end here would finish
        // the response without polling again, and a blocking sink would not be waited for.
        self.pending.is_none() && self.finishing.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
