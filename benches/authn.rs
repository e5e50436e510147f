//! Criterion benches of authentication per request: a cached bearer token (TokenReview
//! webhook in memory, answer already cached) and a client certificate (chain verified on
//! every request, as kube-apiserver does), next to a no-authn baseline in the same group.

pub mod support;

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::FutureExt;
use http::{Request, Response};
use kube_aggregator::Body;
use kube_aggregator::authn::{AuthenticationLayer, BearerToken, ConnectionInfo, X509Authenticator};
use kube_aggregator::rt::Timer;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use tower::{Layer, Service, ServiceExt};

fn backend() -> impl Service<
    Request<Body>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(|_req: Request<Body>| async { Ok(Response::new(Body::empty())) })
}

/// A client CA and a client certificate it signed (DER).
fn client_pki() -> (
    rustls_pki_types::CertificateDer<'static>,
    rustls_pki_types::CertificateDer<'static>,
) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.distinguished_name.push(DnType::CommonName, "client-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("key");
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, ca_key);
    let mut leaf = CertificateParams::new(Vec::<String>::new()).expect("params");
    leaf.distinguished_name.push(DnType::CommonName, "alice");
    leaf.distinguished_name
        .push(DnType::OrganizationName, "dev");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().expect("key");
    let cert = leaf.signed_by(&key, &issuer).expect("leaf");
    (ca_cert.der().clone(), cert.der().clone())
}

fn request(conn: &ConnectionInfo, authorization: Option<&str>) -> Request<Body> {
    let mut b = Request::get("/apis/metrics.k8s.io/v1beta1/nodes");
    if let Some(a) = authorization {
        b = b.header("authorization", a);
    }
    let mut req = b.body(Body::empty()).expect("request");
    req.extensions_mut().insert(conn.clone());
    req
}

fn authn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let (ca, leaf) = client_pki();
    let no_cert = ConnectionInfo::default();
    let with_cert = ConnectionInfo {
        remote_addr: None,
        peer_certificates: Arc::from(vec![leaf]),
    };

    let tokens = AuthenticationLayer::new(BearerToken::new(support::token_review(Timer::tokio())))
        .layer(backend());
    // Fill the cache once; every measured request is then a cache hit.
    let warm = rt.block_on(
        tokens
            .clone()
            .oneshot(request(&no_cert, Some("Bearer t0k"))),
    );
    assert_eq!(warm.expect("infallible").status(), 200);
    let certs =
        AuthenticationLayer::new(X509Authenticator::new([ca]).expect("client CA")).layer(backend());

    let mut group = c.benchmark_group("authn_per_request");
    // Cache hits and certificate checks complete without waiting, so each call is driven
    // to completion in place.
    group.bench_function("baseline_no_authn", |b| {
        b.iter(|| {
            let res = backend().oneshot(request(&no_cert, None)).now_or_never();
            black_box(res)
        })
    });
    group.bench_function("cached_bearer_token", |b| {
        b.iter(|| {
            let res = tokens
                .clone()
                .oneshot(request(&no_cert, Some("Bearer t0k")))
                .now_or_never();
            assert!(matches!(&res, Some(Ok(r)) if r.status() == 200));
            black_box(res)
        })
    });
    group.bench_function("client_certificate", |b| {
        b.iter(|| {
            let res = certs
                .clone()
                .oneshot(request(&with_cert, None))
                .now_or_never();
            assert!(matches!(&res, Some(Ok(r)) if r.status() == 200));
            black_box(res)
        })
    });
    group.finish();
}

criterion_group!(benches, authn);
criterion_main!(benches);
