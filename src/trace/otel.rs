//! The OpenTelemetry side of [`TracingLayer`](super::TracingLayer): spans started and
//! ended, the W3C trace context read from and written into headers.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};
use std::time::SystemTime;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body::Frame;
use opentelemetry::global::BoxedTracer;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{Link, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use pin_project_lite::pin_project;
use tower::Service;

use crate::Body;
use crate::audit::AuditId;
use crate::authz::request_info::RequestInfo;
use crate::body::BoxError;
use crate::identity::UserInfo;

/// Upstream's `user.MonitoringGroup`, trusted with its trace context as `system:masters`.
const SYSTEM_MONITORING: &str = "system:monitoring";

/// When the request was received (upstream's `ReceivedTimestamp`), put in the extensions by
/// the outermost layer: the server span starts then, and authentication's span runs from
/// then until the user is known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received(pub(crate) SystemTime);

/// A tracer and the propagator of W3C trace context (`traceparent`, `tracestate`).
pub(super) struct Tracing {
    tracer: BoxedTracer,
    propagator: TraceContextPropagator,
}

impl Tracing {
    pub(super) fn new<T>(tracer: T) -> Tracing
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        Tracing {
            tracer: BoxedTracer::new(Box::new(tracer)),
            propagator: TraceContextPropagator::new(),
        }
    }

    /// Starts the request's server span and calls `inner` with it in the extensions.
    pub(super) fn call<S, B>(
        self: &Arc<Self>,
        inner: &mut S,
        mut req: Request<B>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<B>, Response = Response<Body>>,
    {
        let now = SystemTime::now();
        let received = req.extensions().get::<Received>().map_or(now, |r| r.0);
        // A path without a RequestInfo is refused behind; its span is named by the method.
        let _ = crate::authz::request_info::ensure(&mut req);
        let remote = self.propagator.extract(&Headers(req.headers()));
        let remote = remote.span().span_context().clone();
        let trusted = req.extensions().get::<UserInfo>().is_some_and(|user| {
            user.groups
                .iter()
                .any(|g| g == crate::identity::SYSTEM_MASTERS || g == SYSTEM_MONITORING)
        });
        let name = span_name(req.method(), req.extensions().get::<RequestInfo>());
        let mut builder = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(received);
        let parent = if trusted && remote.is_valid() {
            Context::new().with_remote_span_context(remote)
        } else {
            if remote.is_valid() {
                builder = builder.with_links(vec![Link::with_context(remote)]);
            }
            Context::new()
        };
        let span = self.tracer.build_with_context(builder, &parent);
        let cx = TraceContext(parent.with_span(span).with_value(self.clone()));
        // The sampler decided without them: a trace not sampled costs no attributes.
        if cx.0.span().is_recording() {
            cx.0.span().set_attributes(attributes(&req));
        }
        cx.child("authentication", SpanKind::Internal, received)
            .0
            .span()
            .end_with_timestamp(now);
        req.extensions_mut().insert(cx.clone());
        ResponseFuture {
            inner: inner.call(req),
            span: Some(EndOnDrop(cx.0)),
        }
    }
}

/// The server span's attributes: otelhttp's, with upstream's `http.target` and
/// `audit-id`.
fn attributes<B>(req: &Request<B>) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("http.request.method", req.method().as_str().to_owned()),
        KeyValue::new("url.path", req.uri().path().to_owned()),
        KeyValue::new(
            "http.target",
            req.uri()
                .path_and_query()
                .map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned()),
        ),
        KeyValue::new("network.protocol.version", protocol_version(req.version())),
    ];
    if let Some(agent) = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        attributes.push(KeyValue::new("user_agent.original", agent.to_owned()));
    }
    if let Some(AuditId(id)) = req.extensions().get::<AuditId>() {
        // Upstream's GetAuditIDTruncated: the first 64 bytes of the ASCII header.
        let id = String::from_utf8_lossy(&id.as_bytes()[..id.len().min(64)]).into_owned();
        attributes.push(KeyValue::new("audit-id", id));
    }
    attributes
}

/// Upstream's span name (`getSpanNameFromRequestInfo`): the method and, for a resource
/// request, its path with the namespace and name as placeholders.
fn span_name(method: &http::Method, info: Option<&RequestInfo>) -> String {
    let Some(info) = info.filter(|i| i.is_resource_request) else {
        return method.as_str().to_owned();
    };
    let mut name = format!("{} /{}", method, info.api_prefix);
    if !info.api_group.is_empty() {
        name.push('/');
        name.push_str(&info.api_group);
    }
    name.push('/');
    name.push_str(&info.api_version);
    if !info.namespace.is_empty() {
        name.push_str("/namespaces/{:namespace}");
    }
    name.push('/');
    name.push_str(&info.resource);
    if !info.name.is_empty() {
        name.push_str("/{:name}");
    }
    if !info.subresource.is_empty() {
        name.push('/');
        name.push_str(&info.subresource);
    }
    name
}

fn protocol_version(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// A traced request's span, in its extensions: the layers behind start their spans under
/// it, and a host's handlers can too.
#[derive(Clone, Debug)]
pub struct TraceContext(Context);

impl TraceContext {
    /// The OpenTelemetry context whose active span is this one.
    pub fn context(&self) -> &Context {
        &self.0
    }

    /// The trace context of the future being polled, if it runs under a traced request's
    /// span (see [`opentelemetry::context::FutureExt::with_context`]).
    pub fn current() -> Option<TraceContext> {
        let cx = Context::current();
        cx.get::<Arc<Tracing>>()?;
        Some(TraceContext(cx))
    }

    /// Starts a span named `name` under this one, at `start`; under a span that is not
    /// recorded, that span itself.
    pub fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        start: SystemTime,
    ) -> TraceContext {
        // Under a span not recorded (not sampled) nothing is recorded either: the
        // context it would propagate is its parent's.
        let Some(tracing) = self.0.get::<Arc<Tracing>>() else {
            return self.clone();
        };
        if !self.is_recording() {
            return self.clone();
        }
        let builder = tracing
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(start);
        let span = tracing.tracer.build_with_context(builder, &self.0);
        TraceContext(self.0.with_span(span))
    }

    /// Writes this span's `traceparent` (and `tracestate`) into `headers`, replacing any
    /// there.
    pub fn inject(&self, headers: &mut HeaderMap) {
        if let Some(tracing) = self.0.get::<Arc<Tracing>>() {
            // A client's trace context never travels beside this one: its `tracestate`
            // would describe another trace.
            headers.remove("traceparent");
            headers.remove("tracestate");
            tracing
                .propagator
                .inject_context(&self.0, &mut HeadersMut(headers));
        }
    }

    /// Whether this span is recorded (sampled): attributes of one that is not are lost.
    pub fn is_recording(&self) -> bool {
        self.0.span().is_recording()
    }

    /// Adds `attribute` to this span.
    pub fn set_attribute(&self, attribute: KeyValue) {
        self.0.span().set_attribute(attribute);
    }

    /// Marks this span failed with `description`.
    pub fn set_error(&self, description: impl Into<Cow<'static, str>>) {
        self.0.span().set_status(Status::error(description));
    }

    /// Records an event named `name` on this span, now.
    pub fn add_event(&self, name: impl Into<Cow<'static, str>>) {
        self.0.span().add_event(name, Vec::new());
    }

    /// Ends this span now.
    pub fn end(&self) {
        self.0.span().end();
    }
}

/// Request headers read by the propagator.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Request headers written by the propagator.
struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        // An empty `tracestate` is no state: not sent.
        if value.is_empty() {
            return;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Ends the span of its context when dropped.
struct EndOnDrop(Context);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.span().end();
    }
}

impl std::fmt::Debug for EndOnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EndOnDrop")
            .field(&self.0.span().span_context())
            .finish()
    }
}

pin_project! {
    /// Response future of [`TracingService`](super::TracingService).
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        span: Option<EndOnDrop>,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn untraced(inner: F) -> ResponseFuture<F> {
        ResponseFuture { inner, span: None }
    }
}

impl<F, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<Body>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let Some(span) = this.span.take() else {
            return Poll::Ready(result);
        };
        Poll::Ready(match result {
            Ok(res) => {
                let code = res.status();
                let active = span.0.span();
                active.set_attribute(KeyValue::new(
                    "http.response.status_code",
                    i64::from(code.as_u16()),
                ));
                // otelhttp's server spans: a 5xx is an error, a 4xx is the client's.
                if code.is_server_error() {
                    active.set_status(Status::error(""));
                }
                Ok(res.map(|body| {
                    Body::new(SpanBody {
                        inner: body,
                        span: Some(span),
                    })
                }))
            }
            Err(err) => {
                span.0
                    .span()
                    .set_status(Status::error("the handler failed"));
                Err(err)
            }
        })
    }
}

/// A response body that ends the request's span when it ends, fails or is dropped.
struct SpanBody {
    inner: Body,
    span: Option<EndOnDrop>,
}

impl http_body::Body for SpanBody {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, BoxError>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            None => drop(self.span.take()),
            Some(Err(err)) => {
                if let Some(span) = self.span.take() {
                    span.0.span().set_status(Status::error(err.to_string()));
                }
            }
            Some(Ok(_)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
