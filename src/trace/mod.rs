//! Traces of requests, as kube-apiserver's `WithTracing` filter makes them
//! (k8s.io/apiserver `pkg/endpoints/filters/traces.go`), with the `opentelemetry` feature.
//!
//! [`TracingLayer`] stands where upstream's filter stands: right after authentication,
//! before audit. Per request it starts one server span, named as upstream names it
//! (`GET /apis/metrics.k8s.io/v1beta1/namespaces/{:namespace}/pods/{:name}` for a resource
//! request, the method alone otherwise), with the request's `http.target` and `audit-id`
//! (its first 64 characters) as attributes, its start set back to when the request was
//! received, and its end when the response body ends (so a watch's span lasts the watch).
//! Under it:
//!
//! - `authentication`: from the request's arrival until the user was known;
//! - `authorization`: the authorizer's decision, with the SubjectAccessReview webhook's
//!   calls under it;
//! - `proxy`: an APIService's request to its extension server until the response head
//!   (its first byte), with a dial's `connect` and `tls handshake` under it; the W3C
//!   `traceparent` the extension server receives names this span.
//!
//! A client's `traceparent` is the parent of the server span only for a user in
//! `system:masters` or `system:monitoring`; anyone else's trace is linked, not joined
//! (upstream's `WithPublicEndpointFn(notSystemPrivilegedGroup)`), so that an untrusted
//! client cannot force spans to be sampled. Whether a trace is recorded is the tracer's
//! sampler's decision (kube-apiserver's is `ParentBased(TraceIDRatioBased(rate))`, see
//! `TracingConfiguration::tracer_provider` with the `otlp` feature).
//!
//! Without the `opentelemetry` feature, or with [`TracingLayer::off`], the layer passes
//! requests through untouched and nothing is measured.

#[cfg(feature = "opentelemetry")]
mod config;
#[cfg(feature = "opentelemetry")]
mod otel;
#[cfg(feature = "opentelemetry")]
pub use config::{DEFAULT_ENDPOINT, TracingConfigError, TracingConfiguration};
#[cfg(feature = "opentelemetry")]
pub(crate) use otel::Received;
#[cfg(feature = "opentelemetry")]
pub use otel::TraceContext;

use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use crate::Body;

/// Layer that traces each request (see the [module docs](self)).
#[derive(Clone, Default)]
pub struct TracingLayer {
    #[cfg(feature = "opentelemetry")]
    tracer: Option<std::sync::Arc<otel::Tracing>>,
}

impl std::fmt::Debug for TracingLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingLayer")
            .field("on", &self.is_on())
            .finish()
    }
}

impl TracingLayer {
    /// A layer that traces nothing.
    pub fn off() -> TracingLayer {
        TracingLayer::default()
    }

    /// A layer that traces requests with `tracer` (an OpenTelemetry SDK tracer, say
    /// `SdkTracerProvider::tracer("k8s.io/kube-aggregator")`).
    #[cfg(feature = "opentelemetry")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
    pub fn new<T>(tracer: T) -> TracingLayer
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        TracingLayer {
            tracer: Some(std::sync::Arc::new(otel::Tracing::new(tracer))),
        }
    }

    /// Whether requests are traced.
    pub fn is_on(&self) -> bool {
        #[cfg(feature = "opentelemetry")]
        return self.tracer.is_some();
        #[cfg(not(feature = "opentelemetry"))]
        false
    }
}

impl<S> Layer<S> for TracingLayer {
    type Service = TracingService<S>;

    fn layer(&self, inner: S) -> TracingService<S> {
        TracingService {
            inner,
            #[cfg(feature = "opentelemetry")]
            tracer: self.tracer.clone(),
        }
    }
}

/// Service of [`TracingLayer`].
#[derive(Clone)]
pub struct TracingService<S> {
    inner: S,
    #[cfg(feature = "opentelemetry")]
    tracer: Option<std::sync::Arc<otel::Tracing>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for TracingService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracingService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<Request<B>> for TracingService<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    #[cfg(feature = "opentelemetry")]
    type Future = otel::ResponseFuture<S::Future>;
    #[cfg(not(feature = "opentelemetry"))]
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    #[cfg(feature = "opentelemetry")]
    fn call(&mut self, req: Request<B>) -> Self::Future {
        match &self.tracer {
            Some(tracing) => tracing.call(&mut self.inner, req),
            None => otel::ResponseFuture::untraced(self.inner.call(req)),
        }
    }

    #[cfg(not(feature = "opentelemetry"))]
    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.inner.call(req)
    }
}

/// What a span of the request path is, in OpenTelemetry's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Work inside the gateway (authorization).
    Internal,
    /// A call to another server (an extension server, a webhook).
    Client,
}

/// A span of the request path under the request's, or nothing when the request is not
/// traced (and always nothing without the `opentelemetry` feature): the layers behind
/// [`TracingLayer`] measure themselves with it without caring which.
#[derive(Debug, Default)]
pub(crate) struct PathSpan {
    #[cfg(feature = "opentelemetry")]
    span: Option<TraceContext>,
}

impl PathSpan {
    /// A span named `name` under the traced request's (its `extensions`), started now.
    pub(crate) fn start(
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))]
        extensions: &http::Extensions,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] name: &'static str,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] kind: Kind,
    ) -> PathSpan {
        PathSpan {
            #[cfg(feature = "opentelemetry")]
            span: extensions
                .get::<TraceContext>()
                .map(|t| t.child(name, kind.into(), std::time::SystemTime::now())),
        }
    }

    /// A span named `name` under the span of the future being polled (see
    /// [`PathSpan::within`]), started now: for work that does not see the request.
    pub(crate) fn current(
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] name: &'static str,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] kind: Kind,
    ) -> PathSpan {
        PathSpan {
            #[cfg(feature = "opentelemetry")]
            span: TraceContext::current()
                .map(|t| t.child(name, kind.into(), std::time::SystemTime::now())),
        }
    }

    /// Writes this span's W3C `traceparent` into `headers` (replacing a client's), when
    /// traced.
    pub(crate) fn inject(
        &self,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))]
        headers: &mut http::HeaderMap,
    ) {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = &self.span {
            span.inject(headers);
        }
    }

    /// Adds the attribute `key` with a text `value`.
    pub(crate) fn text(
        &self,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] key: &'static str,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] value: &str,
    ) {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = self.span.as_ref().filter(|s| s.is_recording()) {
            span.set_attribute(opentelemetry::KeyValue::new(key, value.to_owned()));
        }
    }

    /// Adds the attribute `key` with a number `value`.
    pub(crate) fn number(
        &self,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] key: &'static str,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))] value: i64,
    ) {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = self.span.as_ref().filter(|s| s.is_recording()) {
            span.set_attribute(opentelemetry::KeyValue::new(key, value));
        }
    }

    /// Marks the span failed, saying why.
    pub(crate) fn error(
        &self,
        #[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))]
        why: &dyn std::fmt::Display,
    ) {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = self.span.as_ref().filter(|s| s.is_recording()) {
            span.set_error(why.to_string());
        }
    }

    /// `future`, polled with this span as the current one, so that the spans it starts
    /// with [`PathSpan::current`] are this one's children.
    pub(crate) fn within<F: std::future::Future>(
        &self,
        future: F,
    ) -> impl std::future::Future<Output = F::Output> + use<F> {
        #[cfg(feature = "opentelemetry")]
        return match &self.span {
            Some(span) => futures_util::future::Either::Left(
                opentelemetry::context::FutureExt::with_context(future, span.context().clone()),
            ),
            None => futures_util::future::Either::Right(future),
        };
        #[cfg(not(feature = "opentelemetry"))]
        future
    }

    /// Ends the span now.
    pub(crate) fn end(self) {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = &self.span {
            span.end();
        }
    }
}

#[cfg(feature = "opentelemetry")]
impl From<Kind> for opentelemetry::trace::SpanKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Internal => opentelemetry::trace::SpanKind::Internal,
            Kind::Client => opentelemetry::trace::SpanKind::Client,
        }
    }
}

#[cfg(all(test, feature = "opentelemetry"))]
mod tests;
