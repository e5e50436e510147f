//! Traces end to end (the `otlp` feature): a gateway built with `Aggregator::builder`
//! exports its spans over OTLP/gRPC, from a `TracingConfiguration`, to a collector started
//! here (an HTTP/2 server decoding `ExportTraceServiceRequest`s), while requests pass it
//! over real TLS to an extension server that reports the `traceparent` it received.

pub mod common;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes};
use common::{AsyncBackend, BASE, Client, Pki, Protocol, builder, host, start_gateway};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_aggregator::Body;
use kube_aggregator::authn::{AuthenticateFuture, Authenticator, UserInfo};
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::trace::{TracingConfiguration, TracingLayer};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tokio::net::TcpListener;

/// The spans a collector received, with their resource's `service.name`.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

impl Collector {
    /// An OTLP/gRPC collector (plain HTTP/2, as `--tracing-config-file`'s endpoint is
    /// dialled) on a loopback port.
    async fn start() -> (Collector, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind collector");
        let addr = listener.local_addr().expect("collector address");
        let collector = Collector::default();
        let spans = collector.spans.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let spans = spans.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let spans = spans.clone();
                    async move {
                        assert_eq!(
                            req.uri().path(),
                            "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
                        );
                        let mut body = req.into_body().collect().await.expect("body").to_bytes();
                        // gRPC framing: uncompressed flag, 4-byte length, the message.
                        while body.has_remaining() {
                            assert_eq!(body.get_u8(), 0, "compressed gRPC message");
                            let len = body.get_u32() as usize;
                            let message = body.split_to(len);
                            let export = ExportTraceServiceRequest::decode(message)
                                .expect("an ExportTraceServiceRequest");
                            for resource in export.resource_spans {
                                let service = resource
                                    .resource
                                    .iter()
                                    .flat_map(|r| &r.attributes)
                                    .find(|kv| kv.key == "service.name")
                                    .map(|kv| text(kv.value.as_ref()))
                                    .unwrap_or_default();
                                for scope in resource.scope_spans {
                                    for span in scope.spans {
                                        spans.lock().unwrap().push((service.clone(), span));
                                    }
                                }
                            }
                        }
                        // An empty ExportTraceServiceResponse, then grpc-status 0.
                        let mut trailers = HeaderMap::new();
                        trailers.insert("grpc-status", HeaderValue::from_static("0"));
                        let frames = vec![
                            Ok::<_, Infallible>(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]))),
                            Ok(Frame::trailers(trailers)),
                        ];
                        let mut res =
                            Response::new(StreamBody::new(futures_util::stream::iter(frames)));
                        res.headers_mut()
                            .insert("content-type", HeaderValue::from_static("application/grpc"));
                        Ok::<_, Infallible>(res)
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tcp), service),
                );
            }
        });
        (collector, addr)
    }

    fn spans(&self) -> Vec<(String, Span)> {
        self.spans.lock().unwrap().clone()
    }
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| text(kv.value.as_ref()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `admin` (in `system:masters`) when the request says `X-Test-User: admin`, `viewer`
/// otherwise: the user decides whether a client's `traceparent` is joined.
#[derive(Clone)]
struct ByHeader;

impl Authenticator for ByHeader {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let user = match parts.headers.get("x-test-user") {
            Some(v) if v == "admin" => UserInfo::new("admin", ["system:masters"]),
            _ => UserInfo::new("viewer", ["viewers"]),
        };
        Box::pin(std::future::ready(Ok(Some(user))))
    }
}

const CLIENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_one_trace_exported_over_otlp_with_its_filters_and_the_backends_traceparent()
 {
    let (collector, collector_addr) = Collector::start().await;
    let config = TracingConfiguration::from_bytes(
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n\
             endpoint: {collector_addr}\nsamplingRatePerMillion: 1000000\n"
        )
        .as_bytes(),
    )
    .expect("a valid configuration");
    let provider = config
        .tracer_provider("apiserver", "test-gateway")
        .expect("a tracer provider");

    // The extension server: HTTP/1.1 only, each answer after 300 ms, so that requests
    // at once need connections of their own, dialled inside their traces.
    let pki = Pki::new();
    let received: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let seen = received.clone();
    let backend = AsyncBackend::start(
        &pki,
        &[b"http/1.1"],
        Arc::new(move |req| {
            let seen = seen.clone();
            Box::pin(async move {
                let parent = req.one("traceparent").unwrap_or_default().to_owned();
                seen.lock()
                    .unwrap()
                    .insert(req.path_and_query().to_owned(), parent);
                tokio::time::sleep(Duration::from_millis(300)).await;
                Response::new(Body::full("{}"))
            })
        }),
    )
    .await;
    let stack = builder(&pki, backend.addr)
        .authenticator(ByHeader)
        .authorizer(AlwaysAllow)
        .tracing(TracingLayer::new(provider.tracer("k8s.io/kube-aggregator")));
    let (gateway, _aggregator) =
        start_gateway(&pki, stack, vec![common::widgets_apiservice(&pki)], host()).await;
    let client = Client::new(&pki, gateway, None, Protocol::Http1);

    // The admin's trace is joined; eight viewers at once, each with a trace of its own
    // (one names a parent, which is linked, not joined).
    let client_parent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let admin = client
        .get_with(
            &format!("{BASE}/namespaces/default/widgets/w0"),
            &[("x-test-user", "admin"), ("traceparent", &client_parent)],
        )
        .await;
    assert_eq!(admin.status, 200, "{}", admin.body);
    let viewers = futures_util::future::join_all((1..=8).map(|i| {
        let client = &client;
        let parent = client_parent.clone();
        async move {
            let path = format!("{BASE}/namespaces/default/widgets/w{i}");
            let headers: &[(&str, &str)] = if i == 1 {
                &[("traceparent", &parent)]
            } else {
                &[]
            };
            client.get_with(&path, headers).await
        }
    }))
    .await;
    for reply in &viewers {
        assert_eq!(reply.status, 200, "{}", reply.body);
    }

    // The batch goes out on a flush (and within 5 s without one).
    let flushed = provider.clone();
    tokio::task::spawn_blocking(move || flushed.force_flush())
        .await
        .expect("the flush ran")
        .expect("the spans were exported");
    let spans = collector.spans();
    assert!(spans.iter().all(|(service, _)| service == "apiserver"));
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();

    let name = "GET /apis/widgets.example.io/v1alpha1/namespaces/{:namespace}/widgets/{:name}";
    let servers: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        servers.len(),
        9,
        "one server span per request: {:#?}",
        names(&spans)
    );
    let mut traces: Vec<String> = servers.iter().map(|s| hex(&s.trace_id)).collect();
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), 9, "each request is a trace of its own");

    let mut dialled = 0;
    for server in &servers {
        let target = attribute(server, "http.target").expect("http.target");
        let trace = hex(&server.trace_id);
        let in_trace: Vec<&Span> = spans
            .iter()
            .filter(|s| s.trace_id == server.trace_id)
            .collect();
        let child = |name: &str| -> &Span {
            let found: Vec<_> = in_trace.iter().filter(|s| s.name == name).collect();
            assert_eq!(
                found.len(),
                1,
                "{target}: one {name} span in {:#?}",
                names(&in_trace.iter().copied().cloned().collect::<Vec<_>>())
            );
            found[0]
        };
        for name in ["authentication", "authorization", "proxy"] {
            let span = child(name);
            assert_eq!(
                span.parent_span_id, server.span_id,
                "{target}: {name} under the server span"
            );
            assert!(span.start_time_unix_nano >= server.start_time_unix_nano);
            assert!(span.end_time_unix_nano <= server.end_time_unix_nano);
        }
        assert_eq!(
            attribute(server, "http.response.status_code").as_deref(),
            Some("200")
        );
        assert!(attribute(server, "audit-id").is_some_and(|id| !id.is_empty()));
        // The extension server saw the proxy span as its parent.
        let proxy = child("proxy");
        assert_eq!(
            received.lock().unwrap().get(&target).map(String::as_str),
            Some(format!("00-{trace}-{}-01", hex(&proxy.span_id)).as_str()),
            "{target}: the traceparent the extension server received"
        );
        if in_trace.iter().any(|s| s.name == "connect") {
            for name in ["connect", "tls handshake"] {
                assert_eq!(
                    child(name).parent_span_id,
                    proxy.span_id,
                    "{target}: {name} under proxy"
                );
            }
            assert_eq!(
                attribute(child("tls handshake"), "tls.alpn").as_deref(),
                Some("http/1.1")
            );
            dialled += 1;
        }
        if target.ends_with("/w0") {
            assert_eq!(trace, CLIENT_TRACE, "the admin's trace is the client's");
            assert_eq!(hex(&server.parent_span_id), CLIENT_SPAN);
        } else {
            assert_ne!(trace, CLIENT_TRACE, "a viewer's trace is its own");
            assert!(server.parent_span_id.is_empty());
            let linked: Vec<String> = server.links.iter().map(|l| hex(&l.trace_id)).collect();
            let expected: &[&str] = if target.ends_with("/w1") {
                &[CLIENT_TRACE]
            } else {
                &[]
            };
            assert_eq!(linked, expected, "{target}: links");
        }
    }
    // Eight requests at once on HTTP/1.1, more than the connections the aggregator's own
    // fetches left idle: some dialled, inside their traces.
    assert!(
        dialled >= 2,
        "{dialled} requests dialled the extension server: {:#?}",
        names(&spans)
    );
}

fn names(spans: &[Span]) -> Vec<(String, String, String)> {
    spans
        .iter()
        .map(|s| (s.name.clone(), hex(&s.span_id), hex(&s.parent_span_id)))
        .collect()
}
