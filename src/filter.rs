//! What the filter layers share: one service type, the response future that is the inner
//! service's call, a call the layer wraps, or an answer the layer made itself.
//!
//! Each filter of kube-apiserver's chain (timeout, in-flight limit, tenant mount,
//! impersonation, self reviews) either passes a request on, passes it on with something
//! around the call (a deadline, a held slot, checks first), or answers it at once (a
//! `Status` refusing it). Their response futures are [`Filtered`], named per layer: for
//! example [`crate::timeout::ResponseFuture`] is `Filtered<F, Timed<F>>`.
//!
//! Their services are one: [`FilterService`], the layer's [`Filter`] in front of the
//! inner service, as tower-http's `ValidateRequestHeader` puts its `ValidateRequest` in
//! front of its inner service.
//!
//! Floor 2 of the import order (docs/architecture.md): uses `body`, `status`; used by
//! `aggregator`, `audit`, `authn`, `authz`, `impersonation`, `inflight`, `metrics`,
//! `proxy`, `selfreview`, `tenant`, `timeout`, `trace`.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower::Service;

use crate::body::Body;
use crate::status::Status;

/// `get_ref`, `get_mut` and `into_inner` on a service whose inner service is its field
/// `inner` of type `S`, as tower-http's services have them.
macro_rules! inner_service_accessors {
    () => {
        /// The inner service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The inner service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Consumes the service, returning the inner service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
pub(crate) use inner_service_accessors;

/// Names a filter layer's service, an alias of [`FilterService`] with the layer as its
/// filter, and implements `tower::Layer` for the layer: the layer, cloned, in front of
/// the inner service.
macro_rules! filter_layer {
    ($(#[$doc:meta])* pub type $service:ident<$($p:ident),+> = FilterService<$layer:ty, S>;) => {
        $(#[$doc])*
        pub type $service<$($p),+> = $crate::filter::FilterService<$layer, S>;

        impl<$($p),+> tower::Layer<S> for $layer {
            type Service = $service<$($p),+>;

            fn layer(&self, inner: S) -> Self::Service {
                $crate::filter::FilterService::new(Clone::clone(self), inner)
            }
        }
    };
}
pub(crate) use filter_layer;

pin_project! {
    /// The response future of a filter layer: the inner call as it is, the inner call
    /// wrapped by the layer (`W`), or an answer made without calling the inner service.
    #[project = Projected]
    // The variants are documented; their fields are the futures and the answer.
    #[allow(missing_docs)]
    pub enum Filtered<F, W> {
        /// The inner service's call, passed through.
        Inner { #[pin] inner: F },
        /// The layer's own future around the call (or instead of it).
        Wrapped { #[pin] wrapped: W },
        /// Answered by the layer (a refusal), taken on the first poll.
        Ready { response: Option<Response<Body>> },
    }
}

impl<F, W> Filtered<F, W> {
    /// The inner call, passed through.
    pub fn inner(inner: F) -> Self {
        Filtered::Inner { inner }
    }

    /// The layer's future.
    pub fn wrapped(wrapped: W) -> Self {
        Filtered::Wrapped { wrapped }
    }

    /// An answer made by the layer.
    pub fn ready(response: Response<Body>) -> Self {
        Filtered::Ready {
            response: Some(response),
        }
    }
}

impl<F, W> std::fmt::Debug for Filtered<F, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self {
            Filtered::Inner { .. } => "Inner",
            Filtered::Wrapped { .. } => "Wrapped",
            Filtered::Ready { .. } => "Ready",
        };
        f.debug_tuple("Filtered").field(&state).finish()
    }
}

impl<F, W, E> Future for Filtered<F, W>
where
    F: Future<Output = Result<Response<Body>, E>>,
    W: Future<Output = Result<Response<Body>, E>>,
{
    type Output = Result<Response<Body>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projected::Inner { inner } => inner.poll(cx),
            Projected::Wrapped { wrapped } => wrapped.poll(cx),
            Projected::Ready { response } => {
                Poll::Ready(Ok(response.take().unwrap_or_else(polled_after_completion)))
            }
        }
    }
}

/// A future polled again after it answered breaks `Future`'s contract; it gets a 500
/// rather than a panic in the request path.
pub(crate) fn polled_after_completion() -> Response<Body> {
    Status::failure(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        "response future polled after completion",
    )
    .into_response()
}

/// The `W` of a layer that never wraps the call: it cannot be made, so that variant of
/// its [`Filtered`] never occurs.
pub struct Unwrapped<F> {
    never: Infallible,
    _call: PhantomData<fn() -> F>,
}

impl<F> std::fmt::Debug for Unwrapped<F> {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.never {}
    }
}

impl<F: Future> Future for Unwrapped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<F::Output> {
        match self.never {}
    }
}

/// What one filter layer does with a request, given the inner service: the part of a
/// layer that differs from the others. [`FilterService`] makes it a `tower::Service`, ready
/// when the inner service is.
pub trait Filter<S, B>
where
    S: Service<Request<B>>,
{
    /// The response future; the inner service's error passes through unchanged.
    type Future: Future<Output = Result<Response<Body>, S::Error>>;

    /// Handles `req`: calls `inner` (once, after it was ready), or answers itself.
    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future;
}

/// A service of `Request<B>` that answers `Response<Body>`, as every layer of the stack
/// does: the inner service most filters take. Implemented for every such service.
pub trait BodyService<B>: Service<Request<B>, Response = Response<Body>> {}

impl<S, B> BodyService<B> for S where S: Service<Request<B>, Response = Response<Body>> {}

/// The inner service of a layer that awaits a decision before calling it (authentication,
/// authorization): cloned for the call, as tower's `poll_ready` contract asks; its call
/// and its error `Send` across the layer's await; answering with any body of [`Bytes`]
/// frames, which the layer boxes into [`Body`] once (not at all when it already is one).
/// Implemented for every such service.
///
/// [`Bytes`]: bytes::Bytes
pub trait AwaitedService<B>:
    Service<
        Request<B>,
        Response = Response<<Self as AwaitedService<B>>::Body>,
        Future: Send,
        Error: Send + 'static,
    > + Clone
    + Send
    + 'static
{
    /// The body the service answers with.
    type Body: http_body::Body<Data = bytes::Bytes, Error: Into<crate::body::BoxError>>
        + Send
        + 'static;
}

impl<S, B, RB> AwaitedService<B> for S
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<crate::body::BoxError>,
{
    type Body = RB;
}

/// The service of a filter layer: the layer's [`Filter`] (the layer itself, cloned) in
/// front of the inner service `S`.
#[derive(Debug, Clone)]
pub struct FilterService<F, S> {
    filter: F,
    inner: S,
}

impl<F, S> FilterService<F, S> {
    /// `filter` in front of `inner`.
    pub fn new(filter: F, inner: S) -> Self {
        FilterService { filter, inner }
    }

    /// The filter (the layer that made this service).
    pub fn filter(&self) -> &F {
        &self.filter
    }

    inner_service_accessors!();
}

impl<F, S, B> Service<Request<B>> for FilterService<F, S>
where
    S: Service<Request<B>>,
    F: Filter<S, B>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = F::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.filter.filter(&mut self.inner, req)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::future::{Future, Ready, ready};
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use http::{Response, StatusCode};

    use super::{Filtered, Unwrapped};
    use crate::body::Body;

    type Call = Ready<Result<Response<Body>, Infallible>>;

    fn answer(code: StatusCode) -> Response<Body> {
        let mut res = Response::new(Body::empty());
        *res.status_mut() = code;
        res
    }

    fn poll_status(future: std::pin::Pin<&mut Filtered<Call, Unwrapped<Call>>>) -> StatusCode {
        let mut cx = Context::from_waker(Waker::noop());
        match future.poll(&mut cx) {
            Poll::Ready(Ok(res)) => res.status(),
            Poll::Pending => panic!("a ready answer is pending"),
        }
    }

    #[test]
    fn the_inner_call_and_the_layers_answer_both_resolve() {
        let inner = pin!(Filtered::<Call, Unwrapped<Call>>::inner(ready(Ok(answer(
            StatusCode::OK
        )))));
        assert_eq!(poll_status(inner), StatusCode::OK);
        let refused = pin!(Filtered::<Call, Unwrapped<Call>>::ready(answer(
            StatusCode::TOO_MANY_REQUESTS
        )));
        assert_eq!(poll_status(refused), StatusCode::TOO_MANY_REQUESTS);
    }

    #[test]
    fn an_answer_polled_again_is_a_500_not_a_panic() {
        let mut refused = pin!(Filtered::<Call, Unwrapped<Call>>::ready(answer(
            StatusCode::BAD_REQUEST
        )));
        assert_eq!(poll_status(refused.as_mut()), StatusCode::BAD_REQUEST);
        assert_eq!(poll_status(refused), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
