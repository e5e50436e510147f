//! The spans of the request path, under the request's span that
//! [`TracingLayer`](crate::trace::TracingLayer) starts: a leaf the layers behind it
//! (authorization, the webhook client, the proxy, the transport's dial) use without
//! knowing whether the request is traced, or whether the crate was built with the
//! `opentelemetry` feature at all. Uses nothing of the crate; its public names are
//! re-exported from [`crate::trace`].
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `audit`, `authz`, `proxy`, `trace`, `transport`, `webhook`.

#[cfg(feature = "opentelemetry")]
mod otel;
#[cfg(feature = "opentelemetry")]
pub use otel::TraceContext;
#[cfg(feature = "opentelemetry")]
pub(crate) use otel::{Received, Tracing};

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
