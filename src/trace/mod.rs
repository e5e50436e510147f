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
//!
//! Floor 9 of the import order (docs/architecture.md): uses `audit`, `authz`, `body`,
//! `filter`, `gocompat`, `identity`, `span`; used by `builder`.

#[cfg(feature = "opentelemetry")]
mod config;
#[cfg(feature = "opentelemetry")]
mod server;
#[cfg(feature = "opentelemetry")]
pub use crate::span::TraceContext;
#[cfg(feature = "opentelemetry")]
pub use config::{DEFAULT_ENDPOINT, TracingConfigError, TracingConfiguration};

use http::Request;

use crate::filter::{BodyService, Filter, filter_layer};

/// Layer that traces each request (see the [module docs](self)).
#[derive(Clone, Default)]
pub struct TracingLayer {
    #[cfg(feature = "opentelemetry")]
    tracer: Option<std::sync::Arc<crate::span::Tracing>>,
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
    pub fn new<T>(tracer: T) -> TracingLayer
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        TracingLayer {
            tracer: Some(std::sync::Arc::new(crate::span::Tracing::new(tracer))),
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

filter_layer! {
    /// Service of [`TracingLayer`].
    pub type TracingService<S> = FilterService<TracingLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for TracingLayer {
    #[cfg(feature = "opentelemetry")]
    type Future = server::ResponseFuture<S::Future>;
    #[cfg(not(feature = "opentelemetry"))]
    type Future = S::Future;

    #[cfg(feature = "opentelemetry")]
    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        match &self.tracer {
            Some(tracing) => server::call(tracing, inner, req),
            None => server::ResponseFuture::untraced(inner.call(req)),
        }
    }

    #[cfg(not(feature = "opentelemetry"))]
    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        inner.call(req)
    }
}

#[cfg(all(test, feature = "opentelemetry"))]
mod tests;
