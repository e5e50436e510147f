use std::convert::Infallible;

use http::{Request, Response};
use http_body_util::BodyExt as _;
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tower::{Layer as _, ServiceExt as _};

use super::{TraceContext, TracingLayer};
use crate::Body;
use crate::audit::AuditId;
use crate::identity::UserInfo;

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// A layer recording every span into the returned exporter.
fn recorded() -> (TracingLayer, InMemorySpanExporter, SdkTracerProvider) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    (
        TracingLayer::new(provider.tracer("test")),
        exporter,
        provider,
    )
}

/// A request to `uri` by `user`, with the client's `traceparent`.
fn request(uri: &str, user: UserInfo) -> Request<Body> {
    let mut req = Request::get(uri)
        .header("traceparent", format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"))
        .header("tracestate", "vendor=client")
        .header("user-agent", "kubectl/v1.32.0")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(user);
    req.extensions_mut()
        .insert(AuditId(http::HeaderValue::from_static("3f5b1c2e-audit")));
    req
}

/// A handler that starts a span under the request's and answers with the `traceparent`
/// it would send on, in a streamed body.
async fn handler(req: Request<Body>) -> Result<Response<Body>, Infallible> {
    let traced = req
        .extensions()
        .get::<TraceContext>()
        .expect("a traced request");
    let proxy = traced.child("proxy", SpanKind::Client, std::time::SystemTime::now());
    let mut headers = req.headers().clone();
    proxy.inject(&mut headers);
    proxy.end();
    let parent = headers["traceparent"].to_str().unwrap().to_owned();
    // The client's state goes on with the client's trace only, when it is joined.
    let state = headers
        .get("tracestate")
        .map(|v| v.to_str().unwrap().to_owned());
    let joined = req
        .extensions()
        .get::<UserInfo>()
        .unwrap()
        .groups
        .iter()
        .any(|g| g == "system:masters");
    assert_eq!(state.as_deref(), joined.then_some("vendor=client"));
    Ok(Response::new(Body::full(parent)))
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

fn by_name<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name} in {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

#[tokio::test]
async fn a_privileged_callers_trace_is_joined_and_the_span_lasts_the_body() {
    let (layer, exporter, _provider) = recorded();
    let admin = UserInfo::new("admin", ["system:masters", "system:authenticated"]);
    let res = layer
        .layer(tower::service_fn(handler))
        .oneshot(request(
            "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods/coredns?limit=1",
            admin,
        ))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The body is not read yet: the server span has not ended.
    let spans = exporter.get_finished_spans().unwrap();
    let names: Vec<_> = spans.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["authentication", "proxy"]);

    let sent =
        String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let server = by_name(
        &spans,
        "GET /apis/metrics.k8s.io/v1beta1/namespaces/{:namespace}/pods/{:name}",
    );
    assert_eq!(server.span_kind, SpanKind::Server);
    assert_eq!(
        server.span_context.trace_id(),
        TraceId::from_hex(CLIENT_TRACE).unwrap()
    );
    assert_eq!(
        server.parent_span_id,
        SpanId::from_hex(CLIENT_SPAN).unwrap()
    );
    assert!(server.parent_span_is_remote);
    assert_eq!(
        attribute(server, "http.target").as_deref(),
        Some("/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods/coredns?limit=1")
    );
    assert_eq!(
        attribute(server, "audit-id").as_deref(),
        Some("3f5b1c2e-audit")
    );
    assert_eq!(
        attribute(server, "user_agent.original").as_deref(),
        Some("kubectl/v1.32.0")
    );
    assert_eq!(
        server
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "http.response.status_code")
            .map(|kv| kv.value.clone()),
        Some(opentelemetry::Value::I64(200))
    );
    for child in ["authentication", "proxy"] {
        let child = by_name(&spans, child);
        assert_eq!(
            child.span_context.trace_id(),
            server.span_context.trace_id()
        );
        assert_eq!(child.parent_span_id, server.span_context.span_id());
        assert!(child.start_time >= server.start_time && child.end_time <= server.end_time);
    }
    // What the handler would send on names its own span in the client's trace.
    let proxy = by_name(&spans, "proxy");
    assert_eq!(
        sent,
        format!("00-{CLIENT_TRACE}-{}-01", proxy.span_context.span_id())
    );
}

#[tokio::test]
async fn anyone_elses_trace_is_linked_not_joined() {
    let (layer, exporter, _provider) = recorded();
    let viewer = UserInfo::new("viewer", ["system:authenticated"]);
    let res = layer
        .layer(tower::service_fn(handler))
        .oneshot(request("/version", viewer))
        .await
        .unwrap();
    res.into_body().collect().await.unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    // A non-resource request's span is named by its method.
    let server = by_name(&spans, "GET");
    assert_ne!(
        server.span_context.trace_id(),
        TraceId::from_hex(CLIENT_TRACE).unwrap()
    );
    assert_eq!(server.parent_span_id, SpanId::INVALID);
    let links: Vec<_> = server
        .links
        .links
        .iter()
        .map(|l| l.span_context.clone())
        .collect();
    assert_eq!(links.len(), 1);
    assert_eq!(
        links[0].trace_id(),
        TraceId::from_hex(CLIENT_TRACE).unwrap()
    );
    assert_eq!(links[0].span_id(), SpanId::from_hex(CLIENT_SPAN).unwrap());
}

#[tokio::test]
async fn off_passes_requests_through_untraced() {
    let layer = TracingLayer::off();
    assert!(!layer.is_on());
    let res = layer
        .layer(tower::service_fn(|req: Request<Body>| async move {
            assert!(req.extensions().get::<TraceContext>().is_none());
            Ok::<_, Infallible>(Response::new(Body::empty()))
        }))
        .oneshot(request("/version", UserInfo::new("a", ["b"])))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn a_trace_not_sampled_records_nothing_and_still_propagates() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOff)
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = TracingLayer::new(provider.tracer("test"));
    // A viewer's traceparent is not joined: the new trace, not sampled, is what goes on.
    let res = layer
        .layer(tower::service_fn(handler))
        .oneshot(request("/version", UserInfo::new("viewer", ["viewers"])))
        .await
        .unwrap();
    let sent = res.into_body().collect().await.unwrap().to_bytes();
    let sent = std::str::from_utf8(&sent).unwrap();
    assert!(sent.starts_with("00-") && sent.ends_with("-00"), "{sent}");
    assert!(!sent.contains(CLIENT_TRACE), "{sent}");
    assert!(exporter.get_finished_spans().unwrap().is_empty());
}
