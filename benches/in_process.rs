//! Criterion bench of one aggregated request to the same extension server reached two
//! ways from one stack: in the gateway's process through `InMemoryTransport`, and over
//! loopback mTLS through `RustlsTransport` (HTTP/2, one pooled connection). The extension
//! server is the same tower service both times, as the examples build one: the crate's
//! request-header authenticator (the front-proxy CA) in front of a handler answering a
//! small NodeMetricsList; over mTLS it runs behind `server::serve_tls`. The stack is
//! `Aggregator::builder`'s (host-provided user, a cached SubjectAccessReview, routing, the
//! proxy), called in memory, so the two measurements differ by the backend hop alone.
//! The baseline in the same group is the extension server called directly in memory.

#[path = "../examples/support/pki.rs"]
pub mod pki;
pub mod support;

use std::convert::Infallible;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::{
    AuthenticationLayer, ConnectionInfo, RequestHeaderAuthenticator, RequestHeaderConfig, UserInfo,
};
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, InMemoryTransport, RustlsTransport};
use kube_aggregator::{Aggregator, Body, server};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use support::read_answer;
use tokio::runtime::Runtime;
use tower::{Layer, ServiceExt};

/// The extension server's handler: the authenticated caller gets the list.
async fn answer<B>(req: Request<B>) -> Result<Response<Body>, Infallible> {
    let mut res = Response::new(Body::full(support::answer_at(req.uri().path())));
    if req.extensions().get::<UserInfo>().is_none() {
        *res.status_mut() = StatusCode::UNAUTHORIZED;
    }
    Ok(res)
}

fn front_proxy_authenticator(ca: &pki::Ca) -> RequestHeaderAuthenticator {
    RequestHeaderAuthenticator::from_pem(ca.cert_pem.as_bytes(), RequestHeaderConfig::default())
        .unwrap_or_else(|e| panic!("front-proxy CA: {e}"))
        .with_allowed_names(["front-proxy-client"])
}

fn apiservice(group: &str, service: &str, ca_bundle: &str) -> ApiService {
    ApiService::remote(group, "v1beta1", "kube-system", service).ca_bundle(ca_bundle)
}

fn request(path: &str) -> Request<Body> {
    let mut req = Request::get(path)
        .body(Body::empty())
        .unwrap_or_else(|e| panic!("request: {e}"));
    req.extensions_mut()
        .insert(UserInfo::new("alice", ["system:masters"]));
    req
}

fn in_process_vs_mtls(c: &mut Criterion) {
    let rt: Runtime = support::one_worker_runtime();
    let front_proxy_ca = pki::Ca::new("front-proxy-ca");
    let serving_ca = pki::Ca::new("serving-ca");
    let serving = serving_ca.server("metrics-over-mtls", &["metrics-over-mtls.kube-system.svc"]);
    let front_proxy = front_proxy_ca.client("front-proxy-client", &[]);
    let identity = ClientCertificate::from_pem(
        front_proxy.cert_pem.as_bytes(),
        front_proxy.key_pem.as_bytes(),
    )
    .unwrap_or_else(|e| panic!("front-proxy client certificate: {e}"));

    let authenticated = AuthenticationLayer::new(front_proxy_authenticator(&front_proxy_ca));
    let in_process = authenticated.layer(tower::service_fn(answer::<Body>));
    let (stack, direct) = rt.block_on(async {
        // The same server over loopback mTLS, as an extension server is deployed.
        let tls = server::server_config(
            serving.cert_pem.as_bytes(),
            serving.key_pem.as_bytes(),
            front_proxy_ca.cert_pem.as_bytes(),
            true,
        )
        .unwrap_or_else(|e| panic!("backend TLS: {e}"));
        let (listener, addr) = support::bind_loopback("the backend").await;
        let networked = authenticated.layer(tower::service_fn(answer::<Incoming>));
        tokio::spawn(server::serve_tls(
            listener,
            tls,
            networked,
            std::future::pending(),
        ));

        let timer = Timer::tokio();
        let memory = InMemoryTransport::new()
            .client_certificate(identity.clone())
            .fallback(RustlsTransport::new(
                identity,
                Executor::tokio(),
                timer.clone(),
            ));
        memory.insert("metrics-in-process.kube-system.svc", in_process.clone());
        let mut network = StaticServiceResolver::new();
        if let Err(e) = network.insert("kube-system", "metrics-over-mtls", 443, &addr.to_string()) {
            panic!("resolver: {e}");
        }
        let (aggregator, worker) = Aggregator::builder(memory.clone())
            .resolver(memory.resolver().or(network))
            .authorizer(support::allowing_sar(timer))
            .build()
            .unwrap_or_else(|e| panic!("the stack: {e}"));
        let registry = aggregator.registry().clone();
        let apiservices = vec![
            apiservice("in-process.example.io", "metrics-in-process", ""),
            apiservice(
                "over-mtls.example.io",
                "metrics-over-mtls",
                &serving_ca.cert_pem,
            ),
        ];
        if let Err(e) = registry.apply(ApiServiceEvent::Resynced(apiservices)) {
            panic!("the APIServices: {e}");
        }
        tokio::spawn(worker);
        support::available(&registry, "v1beta1.in-process.example.io").await;
        support::available(&registry, "v1beta1.over-mtls.example.io").await;
        let host = tower::service_fn(|_req: Request<Body>| async {
            let mut res = Response::new(Body::empty());
            *res.status_mut() = StatusCode::NOT_FOUND;
            Ok::<_, Infallible>(res)
        });
        (aggregator.layer(host), in_process)
    });

    // What the aggregator sends the in-process server, for the baseline: its identity as
    // the peer and the caller in X-Remote-*.
    let chain: std::sync::Arc<[CertificateDer<'static>]> =
        CertificateDer::pem_slice_iter(front_proxy.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("front-proxy chain: {e}"))
            .into();
    let direct_request = || {
        let mut req = Request::get("https://metrics-in-process.kube-system.svc:443/apis/in-process.example.io/v1beta1/nodes")
            .header("x-remote-user", "alice")
            .header("x-remote-group", "system:masters")
            .body(Body::empty())
            .unwrap_or_else(|e| panic!("request: {e}"));
        req.extensions_mut().insert(ConnectionInfo {
            remote_addr: None,
            peer_certificates: chain.clone(),
        });
        req
    };
    let in_process_path = "/apis/in-process.example.io/v1beta1/nodes";
    let mtls_path = "/apis/over-mtls.example.io/v1beta1/nodes";
    // Bench the proxied path, not an error page; this also fills the caches and opens
    // the pooled backend connection.
    rt.block_on(async {
        for path in [in_process_path, mtls_path] {
            for _ in 0..3 {
                let res = stack.clone().oneshot(request(path)).await;
                let status = read_answer(res.unwrap_or_else(|e| match e {})).await;
                assert_eq!(status, StatusCode::OK, "{path}: not proxied");
            }
        }
        let res = direct.clone().oneshot(direct_request()).await;
        let status = read_answer(res.unwrap_or_else(|e| match e {})).await;
        assert_eq!(status, StatusCode::OK, "the server refused the aggregator");
    });

    let mut group = c.benchmark_group("in_process_vs_mtls");
    group.bench_function("baseline_server_direct", |b| {
        b.iter_batched(
            direct_request,
            |req| {
                rt.block_on(async {
                    let res = direct.clone().oneshot(req).await;
                    black_box(read_answer(res.unwrap_or_else(|e| match e {})).await)
                })
            },
            BatchSize::SmallInput,
        )
    });
    for (name, path) in [
        ("in_process", in_process_path),
        ("loopback_mtls_http2", mtls_path),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || request(path),
                |req| {
                    rt.block_on(async {
                        let res = stack.clone().oneshot(req).await;
                        black_box(read_answer(res.unwrap_or_else(|e| match e {})).await)
                    })
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, in_process_vs_mtls);
criterion_main!(benches);
