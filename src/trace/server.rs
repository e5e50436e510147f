//! The request's server span: started when the request comes, ended when its answer's
//! body ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, ready};
use std::time::SystemTime;

use http::{Request, Response};
use http_body::Frame;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt as _};
use opentelemetry::{Context, KeyValue};
use pin_project_lite::pin_project;
use tower::Service;

use crate::Body;
use crate::audit::AuditId;
use crate::authz::request_info::RequestInfo;
use crate::body::BoxError;
use crate::identity::UserInfo;
use crate::span::{Received, TraceContext, Tracing};

/// Upstream's `user.MonitoringGroup`, trusted with its trace context as `system:masters`.
const SYSTEM_MONITORING: &str = "system:monitoring";

/// Starts the request's server span and calls `inner` with it in the extensions.
pub(super) fn call<S, B>(
    tracing: &Arc<Tracing>,
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
    let remote = tracing.extract(req.headers());
    let trusted = req.extensions().get::<UserInfo>().is_some_and(|user| {
        user.groups
            .iter()
            .any(|g| g == crate::identity::SYSTEM_MASTERS || g == SYSTEM_MONITORING)
    });
    let name = span_name(req.method(), req.extensions().get::<RequestInfo>());
    let mut builder = tracing
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
    let cx = tracing.start(builder, parent);
    // The sampler decided without them: a trace not sampled costs no attributes.
    if cx.is_recording() {
        for attribute in attributes(&req) {
            cx.set_attribute(attribute);
        }
    }
    cx.child("authentication", SpanKind::Internal, received)
        .end_at(now);
    req.extensions_mut().insert(cx.clone());
    ResponseFuture {
        inner: inner.call(req),
        span: Some(EndOnDrop(cx)),
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

/// Ends the span of its context when dropped.
struct EndOnDrop(TraceContext);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl std::fmt::Debug for EndOnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EndOnDrop").field(&self.0).finish()
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

impl<F: crate::body::Answer> Future for ResponseFuture<F> {
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
                span.0.set_attribute(KeyValue::new(
                    "http.response.status_code",
                    i64::from(code.as_u16()),
                ));
                // otelhttp's server spans: a 5xx is an error, a 4xx is the client's.
                if code.is_server_error() {
                    span.0.set_error("");
                }
                Ok(res.map(|body| {
                    Body::new(SpanBody {
                        inner: body,
                        span: Some(span),
                    })
                }))
            }
            Err(err) => {
                span.0.set_error("the handler failed");
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
                    span.0.set_error(err.to_string());
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
