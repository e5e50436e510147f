//! [`TimeoutLayer`] and its service: the deadline raced against the response head, then
//! carried by the response body.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body::SizeHint;
use pin_project_lite::pin_project;

use super::{DEFAULT_REQUEST_TIMEOUT, LongRunningCheck, request_deadline, timeout_body};
use crate::authz::RequestInfo;
use crate::body::{Body, BoxError};
use crate::filter::{BodyService, Filter, Filtered, filter_layer};
use crate::rt::Timer;

/// Layer that applies kube-apiserver's request timeout (see the [module docs](super)).
///
/// Answers: the inner service's response when its head arrives before the deadline; 504
/// with upstream's body `{"metadata":{},"status":"Failure","message":"Timeout: request did
/// not complete within the allotted timeout","reason":"Timeout","details":{},"code":504}`
/// when it does not; 400 `BadRequest` for a `?timeout=` that is not a Go duration. A body
/// still streaming at the deadline ends with an error, which makes the server abort it.
/// Time is read from the injected [`Timer`].
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use kube_aggregator::Body;
/// use kube_aggregator::rt::Timer;
/// use kube_aggregator::timeout::TimeoutLayer;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let service = TimeoutLayer::new(Timer::tokio()).layer(tower::service_fn(|_: Request<Body>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Body::full("ok")))
/// }));
/// // An answer well within the deadline passes.
/// let req = Request::get("/api/v1/pods?timeout=30s").body(Body::empty()).unwrap();
/// assert_eq!(service.clone().oneshot(req).await.unwrap().status(), StatusCode::OK);
/// // A `?timeout=` that is not a Go duration is refused before the handler runs.
/// let req = Request::get("/api/v1/pods?timeout=soon").body(Body::empty()).unwrap();
/// assert_eq!(service.oneshot(req).await.unwrap().status(), StatusCode::BAD_REQUEST);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TimeoutLayer {
    shared: Arc<Shared>,
}

/// What every service of one layer reads: the timer, `--request-timeout`, and which
/// requests are exempt.
struct Shared {
    timer: Timer,
    maximum: Duration,
    long_running: LongRunningCheck,
    on_timeout: Option<OnTimeout>,
    on_abort: Option<OnTimeout>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("timer", &self.timer)
            .field("maximum", &self.maximum)
            .field("long_running", &self.long_running)
            .field("on_timeout", &self.on_timeout.is_some())
            .field("on_abort", &self.on_abort.is_some())
            .finish()
    }
}

/// What [`TimeoutLayer::on_timeout`] calls for each 504, and
/// [`TimeoutLayer::on_abort`] for each answer cut at the deadline: the request's method
/// and URI.
pub type OnTimeout = Arc<dyn Fn(&http::Method, &http::Uri) + Send + Sync>;

/// The request a deadline's callbacks are told of (when the layer has any).
struct Hooked {
    on_timeout: Option<OnTimeout>,
    on_abort: Option<OnTimeout>,
    method: http::Method,
    uri: http::Uri,
}

debug_fields!(Hooked { method, uri });

impl TimeoutLayer {
    /// kube-apiserver's defaults: 60 s, its long-running requests exempt.
    pub fn new(timer: Timer) -> TimeoutLayer {
        TimeoutLayer {
            shared: Arc::new(Shared {
                timer,
                maximum: DEFAULT_REQUEST_TIMEOUT,
                long_running: LongRunningCheck::kube_apiserver(),
                on_timeout: None,
                on_abort: None,
            }),
        }
    }

    /// The longest deadline, and the one given without `?timeout=`
    /// (`--request-timeout`). Zero is taken as "no timeout".
    pub fn request_timeout(self, maximum: Duration) -> TimeoutLayer {
        self.with(|s| s.maximum = maximum)
    }

    /// Which requests get no deadline (default [`LongRunningCheck::kube_apiserver`]).
    pub fn long_running(self, check: LongRunningCheck) -> TimeoutLayer {
        self.with(|s| s.long_running = check)
    }

    /// Calls `f` with each request answered 504 (the builder counts it in
    /// `apiserver_request_terminations_total`, as upstream's timeout filter does).
    pub fn on_timeout(self, f: OnTimeout) -> TimeoutLayer {
        self.with(|s| s.on_timeout = Some(f))
    }

    /// Calls `f` with each request whose answer was still streaming at the deadline and
    /// was cut (the builder counts it in `apiserver_request_aborts_total`, as upstream's
    /// timeout filter aborts such a handler).
    pub fn on_abort(self, f: OnTimeout) -> TimeoutLayer {
        self.with(|s| s.on_abort = Some(f))
    }

    fn with(self, f: impl FnOnce(&mut Shared)) -> TimeoutLayer {
        let mut shared = Shared {
            timer: self.shared.timer.clone(),
            maximum: self.shared.maximum,
            long_running: self.shared.long_running.clone(),
            on_timeout: self.shared.on_timeout.clone(),
            on_abort: self.shared.on_abort.clone(),
        };
        f(&mut shared);
        TimeoutLayer {
            shared: Arc::new(shared),
        }
    }
}

filter_layer! {
    /// Service of [`TimeoutLayer`]. Ready when the inner service is; the deadline starts when
    /// `call` is made, so time spent waiting for readiness does not count, as upstream's
    /// starts with the request.
    pub type TimeoutService<S> = FilterService<TimeoutLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for TimeoutLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        // A path RequestInfo refuses is answered by the authorization layer or the
        // aggregator; here it just gets the normal deadline.
        let parsed = crate::authz::request_info::ensure(&mut req).is_ok();
        let (parts, body) = req.into_parts();
        let long_running = parsed
            && parts
                .extensions
                .get::<RequestInfo>()
                .is_some_and(|info| self.shared.long_running.is_long_running(&parts, info));
        if long_running || self.shared.maximum.is_zero() {
            let inner = inner.call(Request::from_parts(parts, body));
            return Filtered::inner(inner);
        }
        let deadline = match request_deadline(&parts.uri, self.shared.maximum) {
            Ok(d) => d,
            Err(e) => {
                return Filtered::ready(e.into_response());
            }
        };
        let sleep = self.shared.timer.sleep(deadline);
        // What a 504 or a cut answer is counted as; clones of shared parts, no allocation.
        let shared = &self.shared;
        let head = (shared.on_timeout.is_some() || shared.on_abort.is_some()).then(|| Hooked {
            on_timeout: shared.on_timeout.clone(),
            on_abort: shared.on_abort.clone(),
            method: parts.method.clone(),
            uri: parts.uri.clone(),
        });
        let inner = inner.call(Request::from_parts(parts, body));
        Filtered::wrapped(Timed {
            inner,
            sleep: Some(sleep),
            head,
        })
    }
}

/// Response future of [`TimeoutService`]: a long-running request's call as it is, the
/// call raced against its deadline, or the 400 for a bad `?timeout=`.
pub type ResponseFuture<F> = Filtered<F, Timed<F>>;

pin_project! {
    /// The inner call raced against the request's deadline. The deadline is taken by the
    /// response body once the head came in time.
    pub struct Timed<F> {
        #[pin]
        inner: F,
        sleep: Option<Pin<Box<dyn hyper::rt::Sleep>>>,
        head: Option<Hooked>,
    }
}

impl<F> std::fmt::Debug for Timed<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("expired", &self.sleep.is_none())
            .field("head", &self.head)
            .finish_non_exhaustive()
    }
}

impl<F: crate::body::Answer> Future for Timed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (sleep, head) = (this.sleep, this.head);
        if let Poll::Ready(result) = this.inner.poll(cx) {
            return Poll::Ready(result.map(|res| match sleep.take() {
                // The head came in time; the body keeps the same deadline.
                Some(sleep) if !http_body::Body::is_end_stream(res.body()) => {
                    let head = head.take();
                    res.map(|body| Body::new(DeadlineBody { body, sleep, head }))
                }
                _ => res,
            }));
        }
        match sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
            Some(Poll::Ready(())) | None => {
                // Dropping the inner future (when this one is dropped) cancels the
                // work: a proxied request's backend stream or connection is released.
                *sleep = None;
                if let Some(Hooked {
                    on_timeout: Some(on_timeout),
                    method,
                    uri,
                    ..
                }) = head.take()
                {
                    on_timeout(&method, &uri);
                }
                Poll::Ready(Ok(timed_out()))
            }
            Some(Poll::Pending) => Poll::Pending,
        }
    }
}

/// Upstream's 504. It sets no `Content-Type`; Go's server then sniffs the JSON text as
/// `text/plain; charset=utf-8`, which is sent here explicitly.
fn timed_out() -> Response<Body> {
    let mut res = Response::new(Body::full(timeout_body()));
    *res.status_mut() = StatusCode::GATEWAY_TIMEOUT;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    res
}

/// The error a response body ends with when the deadline passes while it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request did not complete within the allotted timeout")]
pub(crate) struct BodyTimedOut;

/// A response body that fails once the request's deadline passes.
struct DeadlineBody {
    body: Body,
    sleep: Pin<Box<dyn hyper::rt::Sleep>>,
    head: Option<Hooked>,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> crate::body::PolledFrame {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                if let Some(Hooked {
                    on_abort: Some(on_abort),
                    method,
                    uri,
                    ..
                }) = self.head.take()
                {
                    on_abort(&method, &uri);
                }
                Poll::Ready(Some(Err(Box::new(BodyTimedOut))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
