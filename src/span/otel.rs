//! The OpenTelemetry side of [`PathSpan`](super::PathSpan): the tracer, the W3C trace
//! context read from and written into headers, and the request's span in its extensions.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::global::BoxedTracer;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    SpanBuilder, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// When the request was received (upstream's `ReceivedTimestamp`), put in the extensions by
/// the outermost layer: the server span starts then, and authentication's span runs from
/// then until the user is known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received(pub(crate) SystemTime);

/// A tracer and the propagator of W3C trace context (`traceparent`, `tracestate`).
pub(crate) struct Tracing {
    tracer: BoxedTracer,
    propagator: TraceContextPropagator,
}

impl Tracing {
    pub(crate) fn new<T>(tracer: T) -> Tracing
    where
        T: opentelemetry::trace::Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        Tracing {
            tracer: BoxedTracer::new(Box::new(tracer)),
            propagator: TraceContextPropagator::new(),
        }
    }

    /// The trace context a client sent in `headers` (invalid when none or malformed).
    pub(crate) fn extract(&self, headers: &HeaderMap) -> SpanContext {
        let remote = self.propagator.extract(&Headers(headers));
        remote.span().span_context().clone()
    }

    /// A builder of a span named `name`.
    pub(crate) fn span_builder(&self, name: impl Into<Cow<'static, str>>) -> SpanBuilder {
        self.tracer.span_builder(name)
    }

    /// The span `builder` describes, started under `parent` (an empty context for a new
    /// trace): the request's span, under which [`PathSpan`](super::PathSpan)s start.
    pub(crate) fn start(self: &Arc<Self>, builder: SpanBuilder, parent: Context) -> TraceContext {
        let span = self.tracer.build_with_context(builder, &parent);
        TraceContext(parent.with_span(span).with_value(self.clone()))
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

    /// Ends this span at `end`.
    pub fn end_at(&self, end: SystemTime) {
        self.0.span().end_with_timestamp(end);
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
