//! Criterion benches of authorization, each group with its baseline in the same group so
//! results read as ratios: RequestInfo parsing against a bare path split, and an allowed
//! request through `AuthorizationLayer` with a SubjectAccessReview cache hit against the
//! same request with no authorization at all.

pub mod support;

use std::convert::Infallible;
use std::hint::black_box;
use std::task::{Context, Poll};

use criterion::{Criterion, criterion_group, criterion_main};
use http::{Method, Request, Response, Uri};
use kube_aggregator::Body;
use kube_aggregator::authn::UserInfo;
use kube_aggregator::authz::{AlwaysAllow, AuthorizationLayer, RequestInfo};
use kube_aggregator::rt::Timer;
use tower::{Layer, Service, ServiceExt};

/// Requests as a cluster's clients send them: kubectl, controllers' list/watch with
/// selectors, metrics-server, discovery, health checks, exec.
const PATHS: &[(&str, &str)] = &[
    ("GET", "/api/v1/namespaces/default/pods/web-0"),
    (
        "GET",
        "/api/v1/namespaces/kube-system/pods?labelSelector=k8s-app%3Dkube-dns&limit=500",
    ),
    (
        "GET",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&resourceVersion=0&watch=true",
    ),
    (
        "GET",
        "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb-0&watch=1",
    ),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web/status",
    ),
    ("DELETE", "/apis/batch/v1/namespaces/ci/jobs"),
    (
        "POST",
        "/api/v1/namespaces/default/pods/web-0/exec?command=sh&stdin=true&tty=true",
    ),
    ("GET", "/apis/metrics.k8s.io/v1beta1/nodes"),
    (
        "GET",
        "/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods/coredns-1",
    ),
    ("GET", "/api/v1/watch/namespaces/default/configmaps/cfg"),
    ("PUT", "/api/v1/namespaces/demo/finalize"),
    ("GET", "/apis/metrics.k8s.io/v1beta1"),
    ("GET", "/healthz"),
    ("GET", "/openapi/v2"),
];

fn request_info(c: &mut Criterion) {
    let requests: Vec<(Method, Uri)> = PATHS
        .iter()
        .map(|(m, p)| {
            let method = m.parse().unwrap_or_else(|e| panic!("{m}: {e}"));
            (method, Uri::from_static(p))
        })
        .collect();
    let mut group = c.benchmark_group("authz_request_info");
    group.bench_function("baseline_path_split", |b| {
        b.iter(|| {
            for (_, uri) in &requests {
                let parts: Vec<&str> = black_box(uri).path().trim_matches('/').split('/').collect();
                black_box(parts);
            }
        })
    });
    group.bench_function("request_info", |b| {
        b.iter(|| {
            for (method, uri) in &requests {
                let _ = black_box(RequestInfo::from_parts(black_box(method), black_box(uri)));
            }
        })
    });
    group.finish();
}

/// The handler behind authorization: 200 with an empty body at once.
#[derive(Debug, Clone, Copy)]
struct Ok200;

impl Service<Request<Body>> for Ok200 {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<Body>) -> Self::Future {
        std::future::ready(Ok(Response::new(Body::empty())))
    }
}

fn ok_handler() -> Ok200 {
    Ok200
}

/// An authenticated `kubectl top pods`-like request.
fn request() -> Request<Body> {
    let mut req = Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/kube-system/pods")
        .body(Body::empty())
        .unwrap_or_else(|e| panic!("bench request: {e}"));
    let user = UserInfo::new("alice", ["dev", "system:authenticated"]);
    req.extensions_mut().insert(user);
    req
}

fn fast_path(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let timer = Timer::tokio();
    let sar = support::allowing_sar(timer);
    let with_sar = AuthorizationLayer::new(sar).layer(ok_handler());
    let with_allow = AuthorizationLayer::new(AlwaysAllow).layer(ok_handler());
    let baseline = ok_handler();
    // Warm the cache: every later request is a hit.
    let warm = rt.block_on(with_sar.clone().oneshot(request()));
    assert!(matches!(warm, Ok(ref r) if r.status().is_success()));

    let mut group = c.benchmark_group("authz_fast_path");
    group.bench_function("baseline_no_authz", |b| {
        b.iter(|| black_box(rt.block_on(baseline.oneshot(request()))))
    });
    group.bench_function("always_allow", |b| {
        b.iter(|| black_box(rt.block_on(with_allow.clone().oneshot(request()))))
    });
    group.bench_function("sar_cache_hit", |b| {
        b.iter(|| black_box(rt.block_on(with_sar.clone().oneshot(request()))))
    });
    group.finish();
}

criterion_group!(benches, request_info, fast_path);
criterion_main!(benches);
