//! Criterion bench of one aggregated request over real loopback mTLS (tokio, rustls):
//! a client with a user certificate -> the stack of `Aggregator::builder` behind
//! `server::serve_tls` (kube-apiserver's filter chain with x509 authentication and a
//! cached SubjectAccessReview, routing, the proxy over `RustlsTransport` with the
//! front-proxy client certificate) -> an HTTPS extension server
//! that requires that certificate. The baseline in the same group is the same request
//! sent straight to the extension server with the front-proxy certificate and
//! `X-Remote-*` headers, as the aggregator would send it. HTTP/1.1 and HTTP/2, each over
//! one kept-alive connection, one request at a time (latency, not throughput: see
//! `benches/load/` for load).
//!
//! Two more groups: `proxy_tls_streams` sends 16 requests at once over one HTTP/2
//! connection (the client side multiplexed as kubectl's and client-go's are; the
//! gateway's backend side opens more connections only when the backend's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` is reached), against the same 16 straight to the
//! backend; `proxy_tls_rotation` compares the steady request with one made right after
//! the proxy client certificate was replaced (`ClientCertificate::set_pem`), which must
//! dial and handshake a new backend connection while the old one drains: the cost of a
//! rotation, paid once, and the proof that the steady path pays nothing for it.
//! `proxy_tls_retry` compares, behind the same HTTP/2 backend (the `h2` crate's server),
//! the steady request with one whose first stream the backend refuses with
//! `REFUSED_STREAM` and which the pool therefore sends again (a request the backend
//! provably never processed): the cost of that retry, against a steady path that pays
//! only for the copy kept in case of one.

#[path = "../examples/support/pki.rs"]
pub mod pki;
pub mod support;

use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, RustlsTransport};
use kube_aggregator::{Aggregator, Body, server};
use pki::{certs, key, provider};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tower::Layer;

const PATH: &str = "/apis/metrics.k8s.io/v1beta1/nodes";

fn roots(ca_pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for c in certs(ca_pem) {
        roots.add(c).unwrap_or_else(|e| panic!("generated CA: {e}"));
    }
    roots
}

/// The extension server's TLS: requires a client certificate from `front_proxy_ca` and
/// offers `alpn`.
fn backend_acceptor(
    serving: &pki::Leaf,
    front_proxy_ca: &pki::Ca,
    alpn: &[&[u8]],
) -> tokio_rustls::TlsAcceptor {
    tokio_rustls::TlsAcceptor::from(serving.server_config(&[&front_proxy_ca.cert_pem], alpn))
}

/// The extension server: requires a client certificate from `front_proxy_ca`, offers
/// HTTP/2 and HTTP/1.1, answers every request with a small NodeMetricsList.
async fn start_backend(serving: &pki::Leaf, front_proxy_ca: &pki::Ca) -> SocketAddr {
    let acceptor = backend_acceptor(serving, front_proxy_ca, &[b"h2", b"http/1.1"]);
    let (listener, addr) = support::bind_loopback("the backend").await;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                    // A real extension server reads who is asking.
                    let user = req.headers().get("x-remote-user").is_some();
                    let mut res = Response::new(http_body_util::Full::new(Bytes::from_static(
                        support::ANSWER.as_bytes(),
                    )));
                    if !user {
                        *res.status_mut() = StatusCode::UNAUTHORIZED;
                    }
                    Ok::<_, Infallible>(res)
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

/// An HTTP/2-only extension server on the `h2` crate's server, so that it can refuse a
/// stream. With `refuse_first`, it answers `PATH` on every other stream and resets the
/// others with `REFUSED_STREAM`: one request at a time, each request's first attempt is
/// refused and its retry answered. Other paths (the availability probe) are always
/// answered. Returns the address and the count of refused streams.
async fn start_h2_backend(
    serving: &pki::Leaf,
    front_proxy_ca: &pki::Ca,
    refuse_first: bool,
) -> (SocketAddr, Arc<AtomicU64>) {
    let acceptor = backend_acceptor(serving, front_proxy_ca, &[b"h2"]);
    let (listener, addr) = support::bind_loopback("the HTTP/2 backend").await;
    let refused = Arc::new(AtomicU64::new(0));
    let counter = refused.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let refused = counter.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut conn) = h2::server::handshake(tls).await else {
                    return;
                };
                let mut refuse_next = refuse_first;
                // Accepting drives the connection: the answers written below are flushed
                // while the next stream is awaited.
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    if req.uri().path() == PATH {
                        if refuse_next {
                            refuse_next = false;
                            refused.fetch_add(1, Ordering::Relaxed);
                            respond.send_reset(h2::Reason::REFUSED_STREAM);
                            continue;
                        }
                        refuse_next = refuse_first;
                    }
                    let status = if req.headers().contains_key("x-remote-user") {
                        StatusCode::OK
                    } else {
                        StatusCode::UNAUTHORIZED
                    };
                    let mut res = Response::new(());
                    *res.status_mut() = status;
                    if let Ok(mut body) = respond.send_response(res, false) {
                        let _ =
                            body.send_data(Bytes::from_static(support::ANSWER.as_bytes()), true);
                    }
                }
            });
        }
    });
    (addr, refused)
}

/// The aggregator from `Aggregator::builder`: x509 authentication, SubjectAccessReview
/// authorization, the `v1beta1.metrics.k8s.io` APIService on `kube-system/metrics-server`
/// at `backend`, its worker running (the APIService is Available once checked).
async fn start_gateway(
    serving: &pki::Leaf,
    client_ca: &pki::Ca,
    serving_ca: &pki::Ca,
    front_proxy: &pki::Leaf,
    backend: SocketAddr,
) -> (SocketAddr, ClientCertificate) {
    let timer = Timer::tokio();
    let proxy_cert = ClientCertificate::from_pem(
        front_proxy.cert_pem.as_bytes(),
        front_proxy.key_pem.as_bytes(),
    )
    .unwrap_or_else(|e| panic!("front-proxy client certificate: {e}"));
    let mut resolver = StaticServiceResolver::new();
    if let Err(e) = resolver.insert("kube-system", "metrics-server", 443, &backend.to_string()) {
        panic!("resolver: {e}");
    }
    let x509 = X509Authenticator::new(certs(&client_ca.cert_pem))
        .unwrap_or_else(|e| panic!("client CA: {e}"));
    let (aggregator, worker) = Aggregator::builder(RustlsTransport::new(
        proxy_cert.clone(),
        Executor::tokio(),
        timer.clone(),
    ))
    .resolver(resolver)
    .authenticator(x509)
    .authorizer(support::allowing_sar(timer))
    .build()
    .unwrap_or_else(|e| panic!("the stack: {e}"));
    let apiservice =
        ApiService::remote("metrics.k8s.io", "v1beta1", "kube-system", "metrics-server")
            .ca_bundle(serving_ca.cert_pem.as_bytes());
    let registry = aggregator.registry().clone();
    if let Err(e) = registry.apply(ApiServiceEvent::Applied(apiservice)) {
        panic!("the metrics APIService: {e}");
    }
    tokio::spawn(worker);
    support::available(&registry, "v1beta1.metrics.k8s.io").await;
    let host = tower::service_fn(|_req: Request<Body>| async {
        let mut res = Response::new(Body::empty());
        *res.status_mut() = StatusCode::NOT_FOUND;
        Ok::<_, Infallible>(res)
    });
    let service = aggregator.layer(host);
    let tls = server::server_config(
        serving.cert_pem.as_bytes(),
        serving.key_pem.as_bytes(),
        client_ca.cert_pem.as_bytes(),
        true,
    )
    .unwrap_or_else(|e| panic!("gateway TLS: {e}"));
    let (listener, addr) = support::bind_loopback("the gateway").await;
    tokio::spawn(server::serve_tls(
        listener,
        tls,
        service,
        std::future::pending(),
    ));
    (addr, proxy_cert)
}

/// One kept-alive client connection of either protocol.
enum Connection {
    Http1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Connection {
    /// Connects to `addr` (verified as `server_name` by `ca`) presenting `identity`.
    async fn open(
        addr: SocketAddr,
        server_name: &'static str,
        ca: &pki::Ca,
        identity: &pki::Leaf,
        http2: bool,
    ) -> Connection {
        let mut config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|e| panic!("TLS versions: {e}"))
            .with_root_certificates(roots(&ca.cert_pem))
            .with_client_auth_cert(certs(&identity.cert_pem), key(&identity.key_pem))
            .unwrap_or_else(|e| panic!("client certificate: {e}"));
        config.alpn_protocols = vec![if http2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        let tcp = TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(server_name).unwrap_or_else(|e| panic!("{e}"));
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("TLS to {addr}: {e}"));
        let io = TokioIo::new(tls);
        if http2 {
            let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap_or_else(|e| panic!("HTTP/2 handshake with {addr}: {e}"));
            tokio::spawn(conn);
            Connection::Http2(send)
        } else {
            let (send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .unwrap_or_else(|e| panic!("HTTP/1.1 handshake with {addr}: {e}"));
            tokio::spawn(conn);
            Connection::Http1(send)
        }
    }

    /// Sends `n` requests at once over this HTTP/2 connection and reads every answer;
    /// returns how many were 200.
    async fn get_many(&self, authority: &str, headers: &[(&str, &str)], n: usize) -> usize {
        let Connection::Http2(send) = self else {
            panic!("get_many needs an HTTP/2 connection");
        };
        let requests = (0..n).map(|_| {
            let mut conn = Connection::Http2(send.clone());
            async move { conn.get(authority, headers).await }
        });
        futures_util::future::join_all(requests)
            .await
            .into_iter()
            .filter(|s| *s == StatusCode::OK)
            .count()
    }

    /// Sends `GET PATH` (with `headers`) and reads the whole answer; returns its status.
    async fn get(&mut self, authority: &str, headers: &[(&str, &str)]) -> StatusCode {
        let mut req = Request::get(format!("https://{authority}{PATH}"));
        if let Connection::Http1(_) = self {
            // HTTP/1.1 needs exactly one Host (the gateway answers 400 without it).
            req = req.header(http::header::HOST, authority);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .unwrap_or_else(|e| panic!("request: {e}"));
        let res = match self {
            Connection::Http1(send) => {
                if let Err(e) = send.ready().await {
                    panic!("HTTP/1.1 connection lost: {e}");
                }
                send.send_request(req).await
            }
            Connection::Http2(send) => send.send_request(req).await,
        };
        let res = res.unwrap_or_else(|e| panic!("request failed: {e}"));
        support::read_answer(res).await
    }
}

fn proxy_tls(c: &mut Criterion) {
    let rt: Runtime = support::one_worker_runtime();
    let gateway_ca = pki::Ca::new("gateway-ca");
    let client_ca = pki::Ca::new("client-ca");
    let front_proxy_ca = pki::Ca::new("front-proxy-ca");
    let serving_ca = pki::Ca::new("serving-ca");
    let backend_serving = serving_ca.server("metrics-server", &["metrics-server.kube-system.svc"]);
    let gateway_serving = gateway_ca.server("gateway", &["localhost"]);
    let front_proxy = front_proxy_ca.client("front-proxy-client", &[]);
    let user = client_ca.client("alice", &["system:masters"]);

    let (backend, (gateway, proxy_cert)) = rt.block_on(async {
        let backend = start_backend(&backend_serving, &front_proxy_ca).await;
        let gateway = start_gateway(
            &gateway_serving,
            &client_ca,
            &serving_ca,
            &front_proxy,
            backend,
        )
        .await;
        (backend, gateway)
    });
    let direct_headers = [
        ("x-remote-user", "alice"),
        ("x-remote-group", "system:masters"),
    ];
    let backend_authority = backend.to_string();
    let gateway_authority = gateway.to_string();

    let mut group = c.benchmark_group("proxy_tls");
    for (protocol, http2) in [("http1", false), ("http2", true)] {
        let (mut direct, mut via) = rt.block_on(async {
            let direct = Connection::open(
                backend,
                "metrics-server.kube-system.svc",
                &serving_ca,
                &front_proxy,
                http2,
            )
            .await;
            let via = Connection::open(gateway, "localhost", &gateway_ca, &user, http2).await;
            (direct, via)
        });
        // Bench the proxied path, not an error page; this also fills the caches and
        // opens the gateway's backend connection.
        for _ in 0..3 {
            let status = rt.block_on(via.get(&gateway_authority, &[]));
            assert_eq!(
                status,
                StatusCode::OK,
                "{protocol}: the gateway did not proxy"
            );
        }
        let status = rt.block_on(direct.get(&backend_authority, &direct_headers));
        assert_eq!(status, StatusCode::OK, "{protocol}: the backend refused");

        group.bench_function(format!("baseline_direct_{protocol}"), |b| {
            b.iter(|| black_box(rt.block_on(direct.get(&backend_authority, &direct_headers))))
        });
        group.bench_function(format!("via_aggregator_{protocol}"), |b| {
            b.iter(|| black_box(rt.block_on(via.get(&gateway_authority, &[]))))
        });
    }
    group.finish();

    // Several streams in flight on one client connection.
    const STREAMS: usize = 16;
    let (direct, via) = rt.block_on(async {
        let direct = Connection::open(
            backend,
            "metrics-server.kube-system.svc",
            &serving_ca,
            &front_proxy,
            true,
        )
        .await;
        let via = Connection::open(gateway, "localhost", &gateway_ca, &user, true).await;
        (direct, via)
    });
    assert_eq!(
        rt.block_on(via.get_many(&gateway_authority, &[], STREAMS)),
        STREAMS,
        "the gateway did not proxy every stream"
    );
    let mut group = c.benchmark_group("proxy_tls_streams");
    group.throughput(criterion::Throughput::Elements(STREAMS as u64));
    group.bench_function(format!("baseline_direct_http2_x{STREAMS}"), |b| {
        b.iter(|| {
            black_box(rt.block_on(direct.get_many(&backend_authority, &direct_headers, STREAMS)))
        })
    });
    group.bench_function(format!("via_aggregator_http2_x{STREAMS}"), |b| {
        b.iter(|| black_box(rt.block_on(via.get_many(&gateway_authority, &[], STREAMS))))
    });
    group.finish();

    // The proxy client certificate replaced before each request, against the steady path.
    let rotations = [
        front_proxy_ca.client("front-proxy-client", &[]),
        front_proxy_ca.client("front-proxy-client", &[]),
    ];
    let mut via = rt.block_on(Connection::open(
        gateway,
        "localhost",
        &gateway_ca,
        &user,
        true,
    ));
    let mut group = c.benchmark_group("proxy_tls_rotation");
    group.bench_function("steady_http2", |b| {
        b.iter(|| black_box(rt.block_on(via.get(&gateway_authority, &[]))))
    });
    let mut next = 0;
    group.bench_function("after_rotation_http2", |b| {
        b.iter(|| {
            let leaf = &rotations[next % rotations.len()];
            next += 1;
            proxy_cert
                .set_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
                .unwrap_or_else(|e| panic!("rotation: {e}"));
            black_box(rt.block_on(via.get(&gateway_authority, &[])))
        })
    });
    group.finish();

    // The same request behind an HTTP/2 backend that answers at once, and behind one that
    // refuses each request's first stream (REFUSED_STREAM), which the pool sends again.
    let (steady_addr, retried_addr, refused) = rt.block_on(async {
        let (steady, _) = start_h2_backend(&backend_serving, &front_proxy_ca, false).await;
        let (refusing, refused) = start_h2_backend(&backend_serving, &front_proxy_ca, true).await;
        let (steady, _) = start_gateway(
            &gateway_serving,
            &client_ca,
            &serving_ca,
            &front_proxy,
            steady,
        )
        .await;
        let (retried, _) = start_gateway(
            &gateway_serving,
            &client_ca,
            &serving_ca,
            &front_proxy,
            refusing,
        )
        .await;
        (steady, retried, refused)
    });
    let (steady_authority, retried_authority) = (steady_addr.to_string(), retried_addr.to_string());
    let (mut steady, mut retried) = rt.block_on(async {
        let steady = Connection::open(steady_addr, "localhost", &gateway_ca, &user, true).await;
        let retried = Connection::open(retried_addr, "localhost", &gateway_ca, &user, true).await;
        (steady, retried)
    });
    // Measure the retry only if it happens and succeeds: every request refused once, then
    // answered.
    rt.block_on(async {
        for _ in 0..4 {
            let status = steady.get(&steady_authority, &[]).await;
            assert_eq!(status, StatusCode::OK, "the steady HTTP/2 backend");
            let status = retried.get(&retried_authority, &[]).await;
            assert_eq!(
                status,
                StatusCode::OK,
                "a request retried after REFUSED_STREAM"
            );
        }
    });
    assert_eq!(
        refused.load(Ordering::Relaxed),
        4,
        "each of 4 requests should have been refused once and retried"
    );
    let mut group = c.benchmark_group("proxy_tls_retry");
    group.bench_function("steady_http2", |b| {
        b.iter(|| black_box(rt.block_on(steady.get(&steady_authority, &[]))))
    });
    group.bench_function("refused_then_retried_http2", |b| {
        b.iter(|| black_box(rt.block_on(retried.get(&retried_authority, &[]))))
    });
    group.finish();
}

criterion_group!(benches, proxy_tls);
criterion_main!(benches);
