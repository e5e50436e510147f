//! Criterion benches of the request path, one group per concern, each with a baseline
//! measured in the same group so results read as ratios (see `benches/README.md`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;

#[path = "../examples/support/pki.rs"]
pub mod pki;
pub mod support;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main,
};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::{BearerToken, ConnectionInfo, Union, UserInfo, X509Authenticator};
use kube_aggregator::authz::RequestInfo;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::body::BoxError;
use kube_aggregator::proxy::upstream_request;
use kube_aggregator::rt::Timer;
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{BackendClient, InMemoryTransport};
use kube_aggregator::{Aggregator, Body, Registry};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};

/// The Service every benched APIService points at, and where the resolver sends it.
const SERVICE_NAMESPACE: &str = "kube-system";
const SERVICE_NAME: &str = "metrics-server";
const BACKEND_ADDRESS: &str = "10.0.0.5:4443";

/// An extension server that lives in memory: answers 200 with an empty body at once.
fn in_memory_backend() -> BackendClient {
    BoxCloneSyncService::new(tower::service_fn(|_req: Request<Body>| async {
        Ok::<_, BoxError>(Response::new(Body::empty()))
    }))
}

/// A remote APIService `<version>.<group>` served by the benched Service.
fn remote_apiservice(group: &str, version: &str) -> ApiService {
    ApiService::remote(group, version, SERVICE_NAMESPACE, SERVICE_NAME).insecure_skip_tls_verify()
}

/// The benched Service's backend, in memory.
fn transport() -> InMemoryTransport {
    let transport = InMemoryTransport::new();
    transport.insert(
        format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc"),
        in_memory_backend(),
    );
    transport
}

/// `count` remote APIServices `v1.group<i>.example.com`.
fn apiservices(count: usize) -> Vec<ApiService> {
    (0..count)
        .map(|i| remote_apiservice(&format!("group{i}.example.com"), "v1"))
        .collect()
}

/// A registry of `count` remote APIServices `v1.group<i>.example.com`.
fn registry_with(count: usize) -> Registry {
    let registry = Registry::new(transport());
    if let Err(e) = registry.apply(ApiServiceEvent::Resynced(apiservices(count))) {
        panic!("bench APIServices rejected: {e}");
    }
    registry
}

/// Resource, subresource, selector, discovery and non-resource requests, as a cluster
/// sees them.
fn request_info(c: &mut Criterion) {
    let requests: Vec<(Method, Uri)> = [
        (Method::GET, "/api/v1/namespaces/default/pods/web-0"),
        (
            Method::GET,
            "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods?labelSelector=app%3Dweb&limit=500",
        ),
        (
            Method::GET,
            "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-0&watch=true",
        ),
        (
            Method::POST,
            "/api/v1/namespaces/default/pods/web-0/exec?command=sh&stdin=true",
        ),
        (Method::GET, "/apis/metrics.k8s.io/v1beta1"),
        (Method::GET, "/healthz"),
    ]
    .into_iter()
    .map(|(m, u)| (m, Uri::from_static(u)))
    .collect();

    let mut group = c.benchmark_group("request_info");
    group.bench_function("baseline_split_count", |b| {
        b.iter(|| {
            for (_, uri) in &requests {
                black_box(black_box(uri).path().split('/').count());
            }
        })
    });
    group.bench_function("from_parts", |b| {
        b.iter(|| {
            for (method, uri) in &requests {
                let _ = black_box(RequestInfo::from_parts(black_box(method), black_box(uri)));
            }
        })
    });
    group.finish();
}

/// The routing table with 10, 1,000 and 10,000 APIServices: finding a route, and
/// applying one update.
fn routing(c: &mut Criterion) {
    let mut group = c.benchmark_group("routing");
    routing_lookup(&mut group);
    routing_update(&mut group);
    group.finish();
}

/// Finding the route of a group/version among many APIServices.
fn routing_lookup(group: &mut BenchmarkGroup<'_, WallTime>) {
    for count in [10usize, 1_000, 10_000] {
        let registry = registry_with(count);
        // A group in the middle of the discovery order, so nothing benefits from being first.
        let wanted = format!("group{}.example.com", count / 2);
        let table = registry.snapshot_owned();
        let baseline: HashMap<String, _> = table
            .routes()
            .map(|r| (r.apiservice.spec.group.clone(), r.clone()))
            .collect();
        assert!(table.lookup(&wanted, "v1").is_some());

        group.bench_with_input(
            BenchmarkId::new("lookup_baseline_hashmap_get", count),
            &wanted,
            |b, wanted| {
                b.iter(|| black_box(baseline.get(black_box(wanted.as_str())).map(Arc::as_ptr)))
            },
        );
        // Includes the per-request snapshot load, as the aggregator pays it.
        group.bench_with_input(BenchmarkId::new("lookup", count), &wanted, |b, wanted| {
            b.iter(|| {
                let table = registry.snapshot();
                black_box(
                    table
                        .lookup(black_box(wanted.as_str()), "v1")
                        .map(Arc::as_ptr),
                )
            })
        });
    }
}

/// Applying one changed APIService to a table of many (the registry rebuilds only the
/// group it touches), against inserting one entry into a plain map of that size.
fn routing_update(group: &mut BenchmarkGroup<'_, WallTime>) {
    for count in [10usize, 1_000, 10_000] {
        let registry = registry_with(count);
        let name = format!("group{}.example.com", count / 2);
        let mut baseline: HashMap<String, usize> = (0..count)
            .map(|i| (format!("group{i}.example.com"), i))
            .collect();
        let mut flip = 0usize;
        group.bench_with_input(
            BenchmarkId::new("update_baseline_hashmap_insert", count),
            &name,
            |b, name| {
                b.iter(|| {
                    flip += 1;
                    black_box(baseline.insert(name.clone(), flip))
                })
            },
        );
        let mut priority = 0;
        group.bench_with_input(BenchmarkId::new("update", count), &name, |b, name| {
            b.iter_batched(
                || {
                    // Alternate the priority so every apply is a real change.
                    priority = if priority == 100 { 200 } else { 100 };
                    let mut svc = remote_apiservice(name, "v1");
                    svc.spec.version_priority = priority;
                    svc
                },
                |svc| registry.apply(ApiServiceEvent::Applied(svc)),
                BatchSize::SmallInput,
            )
        });
    }
}

/// The request `kubectl top pods` sends, with the 10 headers it carries through a
/// front proxy.
fn kubectl_request() -> Request<Body> {
    let mut req = Request::get(
        "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods?labelSelector=app%3Dweb&limit=500",
    )
    .body(Body::empty())
    .unwrap_or_default();
    for (name, value) in [
        ("host", "kubernetes.default.svc:443"),
        (
            "user-agent",
            "kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9",
        ),
        (
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        ),
        ("accept-encoding", "gzip"),
        (
            "authorization",
            "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.e30.c2ln",
        ),
        ("kubectl-command", "kubectl top pods"),
        ("kubectl-session", "4b8e1e0c-5ad2-4a8f-9d64-0b5d9f7c2a11"),
        ("audit-id", "b7f3c2d1-7e44-4c1c-9f0a-3b9b2f5d8e77"),
        ("x-forwarded-for", "192.0.2.10"),
        ("connection", "keep-alive"),
    ] {
        req.headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    req
}

/// Rewriting a client request into the backend request.
fn proxy_rewrite(c: &mut Criterion) {
    let (template, _) = kubectl_request().into_parts();
    let authority: http::uri::Authority = BACKEND_ADDRESS.parse().unwrap_or_else(|e| {
        panic!("{BACKEND_ADDRESS} is not an authority: {e}");
    });
    let mut user = UserInfo::new("alice", ["dev", "ops", "system:authenticated"]);
    user.uid = "7db46926-e803-4337-9a29-f9c1fab7d34a".to_owned();
    user.extra.insert(
        "authentication.kubernetes.io/credential-id".to_owned(),
        vec!["X509SHA256=8f4e1a9c".to_owned()],
    );
    let remote: SocketAddr = SocketAddr::from(([192, 0, 2, 20], 51234));

    let mut group = c.benchmark_group("proxy_rewrite");
    group.bench_function("baseline_clone_parts", |b| {
        b.iter(|| black_box(black_box(&template).clone()))
    });
    group.bench_function("upstream_request", |b| {
        b.iter_batched(
            || Request::from_parts(template.clone(), Body::empty()),
            |req| black_box(upstream_request(req, &authority, &user, Some(remote))),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn first_der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no certificate in generated PEM"))
}

/// A whole request as the gateway runs it, through the stack of `Aggregator::builder`:
/// kube-apiserver's filter chain (Audit-Id, Cache-Control, request timeout,
/// authentication by x509 client certificates then bearer tokens by TokenReview,
/// impersonation, in-flight limits, SubjectAccessReview authorization, self reviews) and
/// the aggregator routing among 11 APIServices and proxying over [`InMemoryTransport`] to
/// an extension server in memory; its worker runs beside it. The chain verdict, the token
/// and the review are cached after the first request, as in a steady stream of requests.
fn stack(c: &mut Criterion) {
    // Criterion's async support needs a feature the crate does not enable; blocking on a
    // pre-built current-thread runtime per iteration costs the same on every bench.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot build the bench runtime: {e}"));
    let _guard = rt.enter();
    let timer = Timer::tokio();

    let mut resolver = StaticServiceResolver::new();
    if let Err(e) = resolver.insert(SERVICE_NAMESPACE, SERVICE_NAME, 443, BACKEND_ADDRESS) {
        panic!("{e}");
    }
    let host = tower::service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(
            Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(Body::empty())
                .unwrap_or_default(),
        )
    });

    let client_ca = pki::Ca::new("client-ca");
    let alice = first_der(&client_ca.client("alice", &["dev"]).cert_pem);
    let x509 = X509Authenticator::new([first_der(&client_ca.cert_pem)])
        .unwrap_or_else(|e| panic!("client CA: {e}"));
    let authn = Union::new()
        .push(x509)
        .push(BearerToken::new(support::token_review(timer.clone())));
    let (aggregator, worker) = Aggregator::builder(transport())
        .resolver(resolver)
        .authenticator(authn)
        .authorizer(support::allowing_sar(timer))
        .build()
        .unwrap_or_else(|e| panic!("the stack: {e}"));
    let mut services = apiservices(10);
    services.push(remote_apiservice("metrics.k8s.io", "v1beta1"));
    if let Err(e) = aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(services))
    {
        panic!("bench APIServices rejected: {e}");
    }
    // The gate answers 503 until the worker's availability check said True.
    rt.spawn(worker);
    rt.block_on(support::available(
        aggregator.registry(),
        "v1beta1.metrics.k8s.io",
    ));
    let stack = aggregator.layer(host);
    let backend = in_memory_backend();

    let remote_addr = Some(SocketAddr::from(([192, 0, 2, 20], 51234)));
    let with_certificate = ConnectionInfo {
        remote_addr,
        peer_certificates: Arc::from(vec![alice]),
    };
    let without_certificate = ConnectionInfo {
        remote_addr,
        ..ConnectionInfo::default()
    };
    let certificate_request = || {
        let mut req = kubectl_request();
        req.headers_mut().remove(http::header::AUTHORIZATION);
        req.extensions_mut().insert(with_certificate.clone());
        req
    };
    let token_request = || {
        let mut req = kubectl_request();
        req.extensions_mut().insert(without_certificate.clone());
        req
    };
    // Bench the proxied path, not an error page; this also fills the caches.
    for (what, req) in [("x509", certificate_request()), ("token", token_request())] {
        let status = rt.block_on(stack.clone().oneshot(req)).map(|r| r.status());
        assert_eq!(
            status.ok(),
            Some(StatusCode::OK),
            "the {what} request was not proxied"
        );
    }

    let mut group = c.benchmark_group("stack");
    group.bench_function("baseline_backend_direct", |b| {
        b.iter_batched(
            token_request,
            |req| black_box(rt.block_on(backend.clone().oneshot(req)).is_ok()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("x509", |b| {
        b.iter_batched(
            certificate_request,
            |req| black_box(rt.block_on(stack.clone().oneshot(req)).is_ok()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("cached_token", |b| {
        b.iter_batched(
            token_request,
            |req| black_box(rt.block_on(stack.clone().oneshot(req)).is_ok()),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, request_info, routing, proxy_rewrite, stack);
criterion_main!(benches);
