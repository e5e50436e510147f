//! The body type used across the stack: [`Body`], one boxed streaming body of [`Bytes`]
//! frames, and [`read_limited`], the bounded read of the small documents the library
//! consumes itself.
//!
//! Every layer answers with `Response<Body>`, whatever body its inner service answers
//! with: the layers box an inner response's body once with [`Body::new`], and a body that
//! already is a [`Body`] passes through unboxed (axum-core's `Body::new` does the same,
//! [`axum-core/src/body.rs`](https://github.com/tokio-rs/axum/blob/main/axum-core/src/body.rs)).
//! Proxied requests carry a [`Body`] to the backend too, so request and response bodies
//! stream in both directions without buffering.
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::BodyExt;
//! use kube_aggregator::body::{Body, ReadError, read_limited};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Any body of `Bytes` frames converts; its error is boxed.
//! let body = Body::new(http_body_util::Full::new(Bytes::from_static(b"{}")));
//! assert_eq!(body.collect().await.unwrap().to_bytes(), "{}");
//!
//! // Documents the library reads (webhook answers, discovery, OpenAPI) are bounded.
//! let small = read_limited(Body::full("0123456789"), 16).await.unwrap();
//! assert_eq!(small.len(), 10);
//! let large = read_limited(Body::full("0123456789"), 4).await;
//! assert!(matches!(large, Err(ReadError::TooLarge { limit: 4 })));
//! # }
//! ```
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `aggregator`, `apiregistration`, `audit`, `authn`, `authz`, `availability`, `builder`,
//! `discovery`, `filter`, `fuzz_logic`, `impersonation`, `inflight`, `metrics`, `openapi`,
//! `proxy`, `registry`, `selfreview`, `server`, `status`, `tenancy`, `tenant`, `testing`,
//! `timeout`, `trace`, `transport`, `webhook`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::{BodyExt, Empty, Full, combinators::UnsyncBoxBody};

/// A boxed error, as tower and hyper use at service boundaries: the error of every
/// [`Body`], of backend and webhook clients, and of the inner services the layers wrap
/// (after `Into<BoxError>`). Downcast it to find the cause (e.g.
/// [`ConnectError::find`](crate::transport::ConnectError::find)).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What `http_body::Body::poll_frame` returns for a body of [`Bytes`] frames whose error
/// is a [`BoxError`], as [`Body`]'s does.
pub type PolledFrame = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// A future answering a request with `Response<Body>` or the service's error: what every
/// layer's service returns and what the layers' own futures wrap. Any such future is one
/// (a blanket impl), so a bound `F: Answer` reads as
/// `F: Future<Output = Result<Response<Body>, F::Error>>`.
pub trait Answer: Future<Output = Result<http::Response<Body>, <Self as Answer>::Error>> {
    /// The service's error.
    type Error;
}

impl<F: ?Sized, E> Answer for F
where
    F: Future<Output = Result<http::Response<Body>, E>>,
{
    type Error = E;
}

/// A service of `Request<Body>` answering `Response<Body>` or `E`, cloneable, `Send`, its
/// call `Send + 'static`: what the tests' hosts and backends are. Any such service is one
/// (a blanket impl), so a function returning one says `-> impl Handles<E>`.
#[cfg(any(test, fuzzing))]
pub(crate) trait Handles<E>:
    tower::Service<
        http::Request<Body>,
        Response = http::Response<Body>,
        Error = E,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

#[cfg(any(test, fuzzing))]
impl<S, E> Handles<E> for S
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = E>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
}

/// A boxed, `Send` [`Answer`]: the response future of the services whose call is an
/// `async` block.
pub type BoxAnswer<E> = Pin<Box<dyn Future<Output = Result<http::Response<Body>, E>> + Send>>;

/// The associated types of a `tower::Service` that answers `Response<Body>` with the
/// given error through the given future, and a `poll_ready` that is always ready (each
/// call does its own waiting).
macro_rules! answers {
    ($error:ty, $future:ty) => {
        type Response = ::http::Response<$crate::body::Body>;
        type Error = $error;
        type Future = $future;
        always_ready!();
    };
}
pub(crate) use answers;

/// [`answers!`] through a [`BoxAnswer`] of the given error. Its users outside the tests
/// are the `tokio` feature's clients.
#[cfg_attr(not(feature = "tokio"), allow(unused_macros))]
macro_rules! answers_boxed {
    ($error:ty) => {
        $crate::body::answers!($error, $crate::body::BoxAnswer<$error>);
    };
}
#[cfg_attr(not(feature = "tokio"), allow(unused_imports))]
pub(crate) use answers_boxed;

/// The body every service of the stack answers with, and the body of proxied requests:
/// a boxed, streaming `http_body::Body` of [`Bytes`] frames.
///
/// Small documents the library produces are one frame ([`Body::full`]); proxied
/// responses and watch streams flow frame by frame as the backend sends them.
///
/// It is `Send` but not `Sync` (an `UnsyncBoxBody`, as hyper's `Incoming` is not `Sync`
/// either), and its [`Default`] is the empty body. `size_hint` and `is_end_stream` are the
/// wrapped body's, so hyper still writes `Content-Length` for a [`Body::full`] and knows a
/// [`Body::empty`] has nothing to send.
pub struct Body(UnsyncBoxBody<Bytes, BoxError>);

impl Body {
    /// Boxes any `http_body::Body` with `Bytes` frames. A body that already is a [`Body`]
    /// is returned as it is, not boxed again (as axum-core's `Body::new` does).
    pub fn new<B>(body: B) -> Body
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        match try_downcast::<Body, B>(body) {
            Ok(body) => body,
            Err(body) => Body(body.map_err(Into::into).boxed_unsync()),
        }
    }

    /// A body holding `bytes` in one frame, with an exact size hint (so hyper sends
    /// `Content-Length`). Cheap for `Bytes` and `&'static` data: no copy.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        Body::new(Full::new(bytes.into()))
    }

    /// An empty body: no frame, `is_end_stream` true, size hint exactly 0.
    pub fn empty() -> Body {
        Body::new(Empty::<Bytes>::new())
    }
}

/// `k` as a `T` when `K` is `T` (axum-core's `try_downcast`); `Err(k)`, unchanged,
/// otherwise. Both are `'static`, so the check is a `TypeId` comparison through `Any`:
/// no allocation, and the value moves out of the `Option` slot only on a match.
fn try_downcast<T: 'static, K: 'static>(k: K) -> Result<T, K> {
    let mut slot = Some(k);
    if let Some(t) = (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<T>>() {
        if let Some(t) = t.take() {
            return Ok(t);
        }
    }
    match slot {
        Some(k) => Err(k),
        // Only a successful downcast empties the slot, and that returned above.
        None => unreachable!("try_downcast: slot emptied without a downcast"),
    }
}

impl Default for Body {
    fn default() -> Body {
        Body::empty()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Body")
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> PolledFrame {
        Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// A [`Body`] that holds `G` (a slot, an in-flight count) until the body has yielded its
/// last frame or is dropped, whichever comes first: what a request holds while its
/// response streams. Frames, `is_end_stream` and `size_hint` are the wrapped body's.
pub(crate) struct Guarded<G> {
    body: Body,
    guard: Option<G>,
}

impl<G> Guarded<G> {
    /// `body`, holding `guard` (nothing when `None`) until it ends.
    pub(crate) fn new(body: Body, guard: Option<G>) -> Guarded<G> {
        Guarded { body, guard }
    }
}

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> PolledFrame {
        let frame = std::task::ready!(Pin::new(&mut self.body).poll_frame(cx));
        if frame.is_none() {
            self.guard = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Boxes any body into a [`Body`] (same as [`Body::new`]). Kept for the transport, which
/// maps its responses with it; new code calls [`Body::new`].
pub fn boxed<B>(body: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    Body::new(body)
}

/// A body was refused while it was being read into memory by [`read_limited`].
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It was larger than the limit (announced by `Content-Length` or seen while reading).
    #[error("the document is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body failed while it was read.
    #[error("reading the body: {0}")]
    Body(#[source] BoxError),
}

/// Reads `body` into one buffer of at most `limit` bytes, refusing a larger one as soon as
/// its size hint or the bytes read so far say so (never buffering without bound).
///
/// `limit` is in bytes; a body of exactly `limit` bytes is accepted. Trailers are read and
/// dropped. The buffer is allocated once up front when the body announces an exact size
/// (capped at `limit`), so a `Content-Length` document costs one allocation.
///
/// # Errors
///
/// - [`ReadError::TooLarge`] when the size hint's lower bound (`Content-Length`) is over
///   `limit`, before anything is read, or as soon as the bytes read pass it;
/// - [`ReadError::Body`] with the body's own error when a frame fails (a reset stream, a
///   connection closed mid-body).
///
/// The discovery and OpenAPI managers read backends' documents with it
/// ([`DiscoveryConfig::max_document_bytes`](crate::discovery::DiscoveryConfig::max_document_bytes)),
/// and the aggregator reads the host's own `/apis` and OpenAPI documents with it.
pub async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let hint = body.size_hint();
    if hint.lower() > limit as u64 {
        return Err(ReadError::TooLarge { limit });
    }
    let mut body = std::pin::pin!(body);
    let capacity = hint.exact().map_or(0, |n| n.min(limit as u64) as usize);
    let mut out = bytes::BytesMut::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Body(e.into()))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(ReadError::TooLarge { limit });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_not_boxed_twice_and_others_are_boxed() {
        assert!(try_downcast::<Body, Body>(Body::full("x")).is_ok());
        let text = try_downcast::<Body, String>(String::from("text"));
        assert_eq!(text.as_ref().err().map(String::as_str), Some("text"));
        let boxed = Body::new(String::from("text"));
        assert_eq!(boxed.collect().await.unwrap().to_bytes(), "text");
    }
}
