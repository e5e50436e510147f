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
#[path = "support/rig.rs"]
pub mod rig;
pub mod support;

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Response, StatusCode};
use rig::{Connection, DIRECT_HEADERS, PATH, Rig, backend_acceptor, start_gateway};
use tokio::runtime::Runtime;

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
                        let _ = body.send_data(
                            Bytes::from_static(support::answer_at(req.uri().path()).as_bytes()),
                            true,
                        );
                    }
                }
            });
        }
    });
    (addr, refused)
}

fn proxy_tls(c: &mut Criterion) {
    let rt: Runtime = support::one_worker_runtime();
    let rig = rt.block_on(Rig::start());
    let (backend, gateway) = (rig.backend, rig.gateway);
    let direct_headers = DIRECT_HEADERS;
    let backend_authority = backend.to_string();
    let gateway_authority = gateway.to_string();

    let mut group = c.benchmark_group("proxy_tls");
    for (protocol, http2) in [("http1", false), ("http2", true)] {
        let (mut direct, mut via) = rt.block_on(rig.connections(http2));
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
    let (direct, via) = rt.block_on(rig.connections(true));
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
        rig.front_proxy_ca.client("front-proxy-client", &[]),
        rig.front_proxy_ca.client("front-proxy-client", &[]),
    ];
    let mut via = rt.block_on(Connection::open(
        gateway,
        "localhost",
        &rig.gateway_ca,
        &rig.user,
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
            rig.proxy_cert
                .set_pem(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes())
                .unwrap_or_else(|e| panic!("rotation: {e}"));
            black_box(rt.block_on(via.get(&gateway_authority, &[])))
        })
    });
    group.finish();

    // The same request behind an HTTP/2 backend that answers at once, and behind one that
    // refuses each request's first stream (REFUSED_STREAM), which the pool sends again.
    let (steady_addr, retried_addr, refused) = rt.block_on(async {
        let (steady, _) = start_h2_backend(&rig.backend_serving, &rig.front_proxy_ca, false).await;
        let (refusing, refused) =
            start_h2_backend(&rig.backend_serving, &rig.front_proxy_ca, true).await;
        let (steady, _) = start_gateway(
            &rig.gateway_serving,
            &rig.client_ca,
            &rig.serving_ca,
            &rig.front_proxy,
            steady,
        )
        .await;
        let (retried, _) = start_gateway(
            &rig.gateway_serving,
            &rig.client_ca,
            &rig.serving_ca,
            &rig.front_proxy,
            refusing,
        )
        .await;
        (steady, retried, refused)
    });
    let (steady_authority, retried_authority) = (steady_addr.to_string(), retried_addr.to_string());
    let (mut steady, mut retried) = rt.block_on(async {
        let steady =
            Connection::open(steady_addr, "localhost", &rig.gateway_ca, &rig.user, true).await;
        let retried =
            Connection::open(retried_addr, "localhost", &rig.gateway_ca, &rig.user, true).await;
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
