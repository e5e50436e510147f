//! Connections to extension servers over real TLS on 127.0.0.1, against backends that
//! misbehave the way real ones do (docs/known-failures.md B21, B22, B23): a connection
//! black-holed by the network, HTTP/2 GOAWAY under load, an HTTP/1.1 backend closing a
//! kept-alive connection, and a small `SETTINGS_MAX_CONCURRENT_STREAMS`.
//!
//! The gateway here is assembled by hand (the layers, and availability set by the test
//! instead of a controller), so each test owns every connection the backend sees.

pub mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{APISERVICE, BASE, Client, HTTP11_ONLY, Pki, Protocol, alice};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_aggregator::apiservice::ConditionStatus;
use kube_aggregator::authn::AuthenticationLayer;
use kube_aggregator::authz::{AlwaysAllow, AuthorizationLayer};
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, PoolConfig, PoolMetrics, RustlsTransport};
use kube_aggregator::{AggregatorLayer, Body, Registry, server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceBuilder;

/// A gateway whose widgets APIService (Available) is served at `service_addr`, with
/// `pool` for its backend connections.
async fn gateway(pki: &Pki, service_addr: SocketAddr, pool: PoolConfig) -> SocketAddr {
    gateway_with_deadline(pki, service_addr, pool, None).await
}

/// [`gateway`], whose requests are dropped (answered 504) after `deadline` when one is
/// given, as a client or a request timeout gives up on them.
async fn gateway_with_deadline(
    pki: &Pki,
    service_addr: SocketAddr,
    pool: PoolConfig,
    deadline: Option<Duration>,
) -> SocketAddr {
    gateway_and_pools(pki, service_addr, pool, deadline).await.0
}

/// [`gateway_with_deadline`], and its transport's connection-pool gauges.
async fn gateway_and_pools(
    pki: &Pki,
    service_addr: SocketAddr,
    pool: PoolConfig,
    deadline: Option<Duration>,
) -> (SocketAddr, PoolMetrics) {
    let proxy = pki.front_proxy_ca.client("front-proxy-client", &[]);
    let cert = ClientCertificate::from_pem(proxy.cert_pem.as_bytes(), proxy.key_pem.as_bytes())
        .expect("proxy client certificate");
    let transport = RustlsTransport::new(cert, Executor::tokio(), Timer::tokio()).pool_config(pool);
    let pools = transport.pool_metrics().clone();
    let registry = Registry::new(transport);
    registry
        .apply(ApiServiceEvent::Applied(common::widgets_apiservice(pki)))
        .expect("a valid APIService");
    registry.set_available_condition(
        APISERVICE,
        ConditionStatus::True,
        "Passed",
        "all checks passed",
    );
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("test-ns", "backend", 443, &service_addr.to_string())
        .expect("resolver entry");
    let host = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::full("host")))
    });
    let service = ServiceBuilder::new()
        .layer(AuthenticationLayer::new(alice()))
        .layer(AuthorizationLayer::new(AlwaysAllow))
        .layer(AggregatorLayer::new(registry, resolver, Timer::tokio()))
        .service(host);
    let service = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let call = tower::ServiceExt::oneshot(service.clone(), req);
        async move {
            let Some(deadline) = deadline else {
                return call.await;
            };
            match tokio::time::timeout(deadline, call).await {
                Ok(answered) => answered,
                Err(_) => {
                    let mut res = Response::new(Body::full("gave up"));
                    *res.status_mut() = StatusCode::GATEWAY_TIMEOUT;
                    Ok(res)
                }
            }
        }
    });
    (common::serve_gateway(pki, service).await, pools)
}

/// The value of each pool gauge `name` for the test's Service.
fn pool_gauge(pools: &PoolMetrics, name: &str) -> f64 {
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(pools.clone()));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let sample = format!("{name}{{service=\"backend.test-ns.svc\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&sample))
        .unwrap_or_else(|| panic!("{sample} in\n{text}"))
        .parse()
        .unwrap()
}

/// An HTTP/2 extension server built from `builder`, answering after `delay` with the
/// request's `n` query value; counts connections and the executions of each `n`, and
/// records which connection (numbered from 0 in the order accepted) carried each `n`.
struct H2Backend {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    executions: Arc<Mutex<HashMap<String, usize>>>,
    connection_of: Arc<Mutex<HashMap<String, usize>>>,
}

impl H2Backend {
    async fn start(
        pki: &Pki,
        delay: Duration,
        configure: impl Fn(&mut hyper::server::conn::http2::Builder<TokioExecutor>)
        + Send
        + Sync
        + 'static,
        goaway_after: Option<usize>,
    ) -> H2Backend {
        let acceptor = tokio_rustls::TlsAcceptor::from(common::backend_tls(pki, &[b"h2"]));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicUsize::new(0));
        let executions = Arc::new(Mutex::new(HashMap::new()));
        let connection_of = Arc::new(Mutex::new(HashMap::new()));
        let (conns, execs, carried) = (
            connections.clone(),
            executions.clone(),
            connection_of.clone(),
        );
        let configure = Arc::new(configure);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let index = conns.fetch_add(1, Ordering::SeqCst);
                let (acceptor, execs, carried, configure) = (
                    acceptor.clone(),
                    execs.clone(),
                    carried.clone(),
                    configure.clone(),
                );
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let served = Arc::new(AtomicUsize::new(0));
                    let (quit_tx, quit_rx) = tokio::sync::watch::channel(false);
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let execs = execs.clone();
                        let carried = carried.clone();
                        let served = served.clone();
                        let quit_tx = quit_tx.clone();
                        async move {
                            let n = req.uri().query().unwrap_or("").to_owned();
                            *execs.lock().unwrap().entry(n.clone()).or_default() += 1;
                            carried.lock().unwrap().insert(n.clone(), index);
                            if goaway_after
                                .is_some_and(|max| served.fetch_add(1, Ordering::SeqCst) + 1 == max)
                            {
                                let _ = quit_tx.send(true);
                            }
                            tokio::time::sleep(delay).await;
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(n))))
                        }
                    });
                    let mut builder =
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    configure(&mut builder);
                    let conn = builder.serve_connection(TokioIo::new(tls), svc);
                    let mut conn = std::pin::pin!(conn);
                    let mut quit_rx = quit_rx;
                    tokio::select! {
                        _ = conn.as_mut() => return,
                        _ = quit_rx.wait_for(|q| *q) => {}
                    }
                    // GOAWAY: streams in flight finish, later ones are refused.
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                });
            }
        });
        H2Backend {
            addr,
            connections,
            executions,
            connection_of,
        }
    }
}

/// A TCP relay to `target` that can black-hole the connections it already carries: they
/// stay open and silent, while new connections are relayed.
struct Relay {
    addr: SocketAddr,
    frozen_below: Arc<AtomicU64>,
    next: Arc<AtomicU64>,
    connections: Arc<AtomicUsize>,
    tasks: tokio::task::JoinSet<()>,
}

impl Relay {
    async fn start(target: SocketAddr) -> Relay {
        Relay::start_at(target, "127.0.0.1:0".parse().expect("address")).await
    }

    /// A relay listening on `at` (a port of an earlier, stopped relay, say).
    async fn start_at(target: SocketAddr, at: SocketAddr) -> Relay {
        let listener = TcpListener::bind(at).await.expect("bind relay");
        let addr = listener.local_addr().expect("address");
        let frozen_below = Arc::new(AtomicU64::new(0));
        let next = Arc::new(AtomicU64::new(1));
        let connections = Arc::new(AtomicUsize::new(0));
        let (frozen, ids, count) = (frozen_below.clone(), next.clone(), connections.clone());
        let mut tasks = tokio::task::JoinSet::new();
        let relayed = Arc::new(Mutex::new(tokio::task::JoinSet::new()));
        let carried = relayed.clone();
        tasks.spawn(async move {
            let _keep = carried;
            while let Ok((client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let id = ids.fetch_add(1, Ordering::SeqCst);
                let frozen = frozen.clone();
                _keep.lock().unwrap().spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let mut a = [0u8; 16 * 1024];
                    let mut b = [0u8; 16 * 1024];
                    loop {
                        let alive = tokio::select! {
                            r = cr.read(&mut a) => match r {
                                Ok(n) if n > 0 && frozen.load(Ordering::SeqCst) <= id => sw.write_all(&a[..n]).await.is_ok(),
                                Ok(n) => n > 0,
                                Err(_) => false,
                            },
                            r = sr.read(&mut b) => match r {
                                Ok(n) if n > 0 && frozen.load(Ordering::SeqCst) <= id => cw.write_all(&b[..n]).await.is_ok(),
                                Ok(n) => n > 0,
                                Err(_) => false,
                            },
                        };
                        if !alive {
                            return;
                        }
                    }
                });
            }
        });
        Relay {
            addr,
            frozen_below,
            next,
            connections,
            tasks,
        }
    }

    /// Stops listening and closes every connection: the backend is gone.
    fn stop(mut self) {
        self.tasks.abort_all();
    }

    /// From now on, every connection relayed so far drops what it reads, both ways.
    fn black_hole_existing(&self) {
        self.frozen_below
            .store(self.next.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

/// `GET .../widgets?n=<n>`; the backends echo the query they received.
async fn get_status(client: &Client, n: usize) -> (StatusCode, String) {
    let reply = client.get(&format!("{BASE}/widgets?n={n}")).await;
    (reply.status, reply.body)
}

/// `GET .../widgets?n=<n>` for every `n` in `ns` at once, each on its own connection.
async fn get_all(client: &Arc<Client>, ns: std::ops::Range<usize>) -> Vec<(StatusCode, String)> {
    futures_util::future::join_all(ns.map(|n| {
        let client = client.clone();
        async move { get_status(&client, n).await }
    }))
    .await
}

/// The statuses of [`get_all`].
async fn statuses(client: &Arc<Client>, ns: std::ops::Range<usize>) -> Vec<StatusCode> {
    get_all(client, ns)
        .await
        .into_iter()
        .map(|(s, _)| s)
        .collect()
}

/// An HTTP/2 backend answering after `delay` that allows `streams` concurrent streams
/// per connection.
async fn limited_backend(pki: &Pki, delay: Duration, streams: u32) -> H2Backend {
    H2Backend::start(
        pki,
        delay,
        move |b| {
            b.max_concurrent_streams(streams);
        },
        None,
    )
    .await
}

/// B21: the pooled HTTP/2 connection goes silent (the network drops its packets, nothing
/// closes it). Keep-alive PINGs find it dead within interval + timeout, its requests fail
/// then (not at the request timeout), and later requests get a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_http2_connection_is_replaced_within_the_ping_bound() {
    let pki = Pki::new();
    let backend = H2Backend::start(&pki, Duration::ZERO, |_| {}, None).await;
    let relay = Relay::start(backend.addr).await;
    let pool = PoolConfig {
        keep_alive_interval: Duration::from_millis(400),
        keep_alive_timeout: Duration::from_millis(400),
        ..PoolConfig::default()
    };
    let addr = gateway(&pki, relay.addr, pool).await;
    let client = Client::new(&pki, addr, None, Protocol::Http2);
    assert_eq!(get_status(&client, 0).await.0, StatusCode::OK);
    assert_eq!(relay.connections.load(Ordering::SeqCst), 1);

    relay.black_hole_existing();
    let frozen_at = Instant::now();
    let mut first_failure: Option<(Duration, StatusCode, String)> = None;
    let recovered = loop {
        let started = Instant::now();
        let (status, body) = get_status(&client, 1).await;
        let took = started.elapsed();
        if status == StatusCode::OK {
            break frozen_at.elapsed();
        }
        first_failure.get_or_insert((took, status, body));
        assert!(
            frozen_at.elapsed() < Duration::from_secs(5),
            "still failing {:?} after the black hole",
            frozen_at.elapsed()
        );
    };
    // The bound: one PING interval plus its timeout (0.8 s here), with slack for the
    // request that was already waiting on the dead connection.
    assert!(
        recovered < Duration::from_secs(3),
        "recovered after {recovered:?}"
    );
    if let Some((took, status, body)) = first_failure {
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            body.starts_with("error trying to reach service: "),
            "{body}"
        );
        assert!(took < Duration::from_secs(2), "the failure took {took:?}");
    }
    assert!(
        relay.connections.load(Ordering::SeqCst) >= 2,
        "no new connection was made"
    );
}

/// B22: an HTTP/2 backend that sends GOAWAY after every 10 streams, under load: the
/// requests it refused (above its last stream id) are sent again on a new connection, so
/// no idempotent request fails, and none runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goaway_under_load_loses_no_idempotent_request() {
    let pki = Pki::new();
    let backend = H2Backend::start(&pki, Duration::from_millis(5), |_| {}, Some(10)).await;
    let addr = gateway(&pki, backend.addr, PoolConfig::default()).await;
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    let total = 200;
    let next = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let (client, next, failures) = (client.clone(), next.clone(), failures.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= total {
                        return;
                    }
                    let (status, body) = get_status(&client, n).await;
                    if status != StatusCode::OK || body != format!("n={n}") {
                        failures.lock().unwrap().push((n, status, body));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    assert_eq!(
        *failures.lock().unwrap(),
        Vec::new(),
        "requests that failed"
    );
    let executions = backend.executions.lock().unwrap();
    assert_eq!(executions.len(), total, "every request ran");
    assert!(
        executions.values().all(|&n| n == 1),
        "a request ran twice: {:?}",
        executions
            .iter()
            .filter(|(_, n)| **n > 1)
            .collect::<Vec<_>>()
    );
    // Streams already open when a connection's tenth arrives still run there, so a
    // connection may serve more than ten; several GOAWAYs are what matters.
    assert!(
        backend.connections.load(Ordering::SeqCst) >= 5,
        "the backend's GOAWAYs were not exercised"
    );
}

/// B23: a backend allowing 4 concurrent streams per connection, 32 slow requests at once:
/// the aggregator opens more connections instead of queueing behind one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_stream_limit_gets_more_connections() {
    let pki = Pki::new();
    let backend = limited_backend(&pki, Duration::from_millis(400), 4).await;
    let (addr, pools) = gateway_and_pools(&pki, backend.addr, PoolConfig::default(), None).await;
    // Warm one connection so the backend's SETTINGS are known.
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    assert_eq!(get_status(&client, 1000).await.0, StatusCode::OK);
    assert_eq!(
        pool_gauge(&pools, "aggregator_proxy_http2_connections"),
        1.0
    );
    assert_eq!(pool_gauge(&pools, "aggregator_proxy_http2_streams"), 0.0);
    let started = Instant::now();
    let all = tokio::spawn({
        let client = client.clone();
        async move { get_all(&client, 0..32).await }
    });
    // While the 32 are at the backend (400 ms each), the gauges show them.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let streams = pool_gauge(&pools, "aggregator_proxy_http2_streams");
    assert!(streams > 4.0, "{streams} requests in flight");
    let answers = all.await.unwrap();
    let took = started.elapsed();
    assert!(
        answers.iter().all(|(s, _)| *s == StatusCode::OK),
        "{answers:?}"
    );
    assert_eq!(pool_gauge(&pools, "aggregator_proxy_http2_streams"), 0.0);
    assert_eq!(
        pool_gauge(&pools, "aggregator_proxy_http2_connections"),
        backend.connections.load(Ordering::SeqCst) as f64,
        "every connection dialled stays open"
    );
    assert_eq!(
        pool_gauge(&pools, "aggregator_proxy_dials_in_progress"),
        0.0
    );
    let connections = backend.connections.load(Ordering::SeqCst);
    assert!(
        connections > 1,
        "one connection for 32 streams at 4 per connection"
    );
    assert!(connections <= PoolConfig::default().max_http2_connections);
    // 8 connections × 4 streams carry all 32 at once; one would take 8 rounds (3.2 s).
    assert!(
        took < Duration::from_millis(2500),
        "32 requests took {took:?}"
    );
}

/// Requests that arrive together at a gateway with no connection yet share one dial, as
/// in Go's transport and hyper-util's pool: the backend sees one HTTP/2 connection
/// carrying every stream, not one connection per early request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_at_start_shares_one_dial() {
    let pki = Pki::new();
    let backend = H2Backend::start(&pki, Duration::from_millis(200), |_| {}, None).await;
    // A slow network in front of the backend: each connection is carried 300 ms after it
    // is accepted, so the whole burst arrives while the first dial is under way.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let slow = listener.local_addr().expect("address");
    let target = backend.addr;
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if let Ok(mut upstream) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut upstream).await;
                }
            });
        }
    });
    let addr = gateway(&pki, slow, PoolConfig::default()).await;
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    let answers = get_all(&client, 0..16).await;
    for (n, (status, body)) in answers.iter().enumerate() {
        assert_eq!(
            (*status, body.as_str()),
            (StatusCode::OK, format!("n={n}").as_str())
        );
    }
    assert_eq!(
        backend.connections.load(Ordering::SeqCst),
        1,
        "16 streams fit on one connection"
    );
}

/// Once a burst has opened several connections, requests gather on the first one with a
/// free stream, as Go's transport picks, instead of spreading one per connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_gather_on_the_first_connection_with_a_free_stream() {
    let pki = Pki::new();
    let backend = limited_backend(&pki, Duration::from_millis(300), 2).await;
    let addr = gateway(&pki, backend.addr, PoolConfig::default()).await;
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    // Learn the limit, then open more connections with 6 at once.
    assert_eq!(get_status(&client, 1000).await.0, StatusCode::OK);
    let burst = statuses(&client, 0..6).await;
    assert!(burst.iter().all(|s| *s == StatusCode::OK), "{burst:?}");
    assert!(backend.connections.load(Ordering::SeqCst) >= 2);
    // Two at once now fit on the first connection.
    let pair = statuses(&client, 100..102).await;
    assert!(pair.iter().all(|s| *s == StatusCode::OK), "{pair:?}");
    let carried = backend.connection_of.lock().unwrap().clone();
    assert_eq!(
        (carried["n=100"], carried["n=101"]),
        (carried["n=1000"], carried["n=1000"]),
        "both on the first connection: {carried:?}"
    );
}

/// A shared dial that fails fails every request that waited for it, with its error and at
/// once: they do not dial again one after another, each paying the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_failed_dial_get_its_error() {
    let pki = Pki::new();
    // Accepts TCP connections and never answers the TLS handshake.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent = listener.local_addr().expect("address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(tcp);
        }
    });
    let pool = PoolConfig {
        tls_handshake_timeout: Duration::from_millis(1500),
        ..PoolConfig::default()
    };
    let addr = gateway(&pki, silent, pool).await;
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    let started = Instant::now();
    let answers = get_all(&client, 0..8).await;
    let took = started.elapsed();
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            body.starts_with("error trying to reach service: ")
                && body.contains("TLS handshake timeout"),
            "{body}"
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one dial for the burst");
    // One handshake timeout, not eight in a row.
    assert!(
        took < Duration::from_millis(4500),
        "the burst took {took:?}"
    );
}

/// A request that gives up while its dial is under way (a client gone, a request
/// timeout) ends the dial's count: the next request dials instead of waiting for a dial
/// that will never end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_gives_up_mid_dial_lets_the_next_one_dial() {
    let pki = Pki::new();
    // Accepts TCP connections and never answers the TLS handshake.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent = listener.local_addr().expect("address");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(tcp);
        }
    });
    let addr = gateway_with_deadline(
        &pki,
        silent,
        PoolConfig::default(),
        Some(Duration::from_millis(500)),
    )
    .await;
    let client = Client::new(&pki, addr, None, Protocol::Http1);
    assert_eq!(get_status(&client, 1).await.0, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(get_status(&client, 2).await.0, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the second request waited for the first one's abandoned dial"
    );
}

/// B23 from a cold start: the same 32 requests with no connection yet. The first dial
/// waits for the backend's SETTINGS before the requests waiting for it are let on, so
/// they learn the limit of 4 and open more connections instead of all queueing on one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_stream_limit_gets_more_connections_from_a_cold_start() {
    let pki = Pki::new();
    let backend = limited_backend(&pki, Duration::from_millis(400), 4).await;
    let addr = gateway(&pki, backend.addr, PoolConfig::default()).await;
    let client = Arc::new(Client::new(&pki, addr, None, Protocol::Http1));
    let answers = get_all(&client, 0..32).await;
    assert!(
        answers.iter().all(|(s, _)| *s == StatusCode::OK),
        "{answers:?}"
    );
    let connections = backend.connections.load(Ordering::SeqCst);
    assert!(connections > 1, "one connection for 32 streams at 4 each");
    assert!(connections <= PoolConfig::default().max_http2_connections);
    // Queued behind one connection's 4 streams, most would have gone to the first; spread
    // by the limit, none carries much more than its 4 at once (a connection may take one
    // of a late request once a stream is free).
    let carried = backend.connection_of.lock().unwrap().clone();
    let mut per_connection = HashMap::new();
    for connection in carried.values() {
        *per_connection.entry(*connection).or_insert(0) += 1;
    }
    assert!(
        per_connection.values().all(|&n| n <= 8),
        "requests per connection: {per_connection:?}"
    );
}

/// An HTTP/1.1 extension server that answers the first request of each connection with
/// keep-alive, then reads the next request and closes the connection without answering
/// (a backend closing an idle connection just as a request arrives). Records each request
/// line it read.
async fn closing_http1_backend(pki: &Pki) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(common::backend_tls(pki, HTTP11_ONLY));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                for answer in [true, false] {
                    let Some(line) = read_request(&mut tls).await else {
                        return;
                    };
                    log.lock().unwrap().push(line);
                    if !answer {
                        return;
                    }
                    let _ = tls
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .await;
                }
            });
        }
    });
    (addr, seen)
}

/// Reads one request (head, then a `Content-Length` body); its request line.
async fn read_request(io: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if io.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    io.read_exact(&mut body).await.ok()?;
    head.lines().next().map(str::to_owned)
}

/// A kept-alive HTTP/1.1 connection closed by the backend as a request arrives: a GET is
/// sent again on a new connection and succeeds; a POST is never replayed and gets an
/// honest 503.
#[tokio::test]
async fn a_closed_pooled_http1_connection_retries_get_but_not_post() {
    let pki = Pki::new();
    let (backend, seen) = closing_http1_backend(&pki).await;
    let addr = gateway(&pki, backend, PoolConfig::default()).await;
    let client = Client::new(&pki, addr, None, Protocol::Http1);
    let get = |n: usize| format!("GET {BASE}/widgets?n={n} HTTP/1.1");
    assert_eq!(get_status(&client, 1).await, (StatusCode::OK, "ok".into()));
    // Second request on the kept-alive connection: closed unanswered, then sent again.
    assert_eq!(get_status(&client, 2).await, (StatusCode::OK, "ok".into()));
    assert_eq!(*seen.lock().unwrap(), [get(1), get(2), get(2)]);

    // The connection of the retried GET is kept alive; a POST on it is closed unanswered.
    let res = client
        .send(
            Method::POST,
            &format!("{BASE}/widgets?n=3"),
            Bytes::from_static(b"{}"),
        )
        .await;
    assert_eq!(res.status, StatusCode::SERVICE_UNAVAILABLE, "{}", res.body);
    assert!(
        res.body.starts_with("error trying to reach service: "),
        "{}",
        res.body
    );
    let posts = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("POST "))
        .count();
    assert_eq!(posts, 1, "the POST was replayed");
}

/// Passive availability (beyond upstream): once a request finds the backend unreachable
/// (connection refused), the APIService is `Available=False` at once, later requests get
/// the gate's fast 503 instead of a dial each, and a re-check soon after brings it back
/// when the backend returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_backend_is_marked_unavailable_at_once_and_comes_back() {
    use kube_aggregator::Aggregator;
    use kube_aggregator::availability::AvailabilityConfig;
    use tower::Layer;

    let pki = Pki::new();
    let backend = H2Backend::start(&pki, Duration::ZERO, |_| {}, None).await;
    let relay = Relay::start(backend.addr).await;
    let relay_addr = relay.addr;
    let proxy = pki.front_proxy_ca.client("front-proxy-client", &[]);
    let transport = RustlsTransport::from_pem(proxy.cert_pem.as_bytes(), proxy.key_pem.as_bytes())
        .expect("proxy client certificate");
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("test-ns", "backend", 443, &relay_addr.to_string())
        .expect("resolver entry");
    let (aggregator, worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(alice())
        .authorizer(AlwaysAllow)
        .availability(AvailabilityConfig {
            // Only the passive path may notice within this test.
            resync_period: Duration::from_secs(600),
            passive_recheck: Duration::from_millis(300),
            backoff_max: Duration::from_secs(1),
            ..AvailabilityConfig::default()
        })
        .build()
        .expect("the stack");
    let registry = aggregator.registry().clone();
    registry
        .apply(ApiServiceEvent::Applied(common::widgets_apiservice(&pki)))
        .expect("a valid APIService");
    tokio::spawn(worker);
    let host = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::full("host")))
    });
    let tls = common::gateway_tls(&pki);
    let (listener, addr) = common::listen().await;
    tokio::spawn(server::serve_tls(
        listener,
        tls,
        aggregator.layer(host),
        std::future::pending(),
    ));
    let client = Client::new(&pki, addr, None, Protocol::Http1);
    let available = || {
        registry
            .snapshot()
            .get(APISERVICE)
            .is_some_and(|r| r.is_available())
    };
    let until = |want: bool, within: Duration| async move {
        let deadline = Instant::now() + within;
        while available() != want {
            assert!(
                Instant::now() < deadline,
                "Available did not become {want} within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    until(true, Duration::from_secs(5)).await;
    assert_eq!(get_status(&client, 1).await.0, StatusCode::OK);

    // The backend goes away: its connections close, new ones are refused.
    relay.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, body) = get_status(&client, 2).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.starts_with("error trying to reach service: "),
        "{body}"
    );
    assert!(
        !available(),
        "one refused request did not mark the APIService unavailable"
    );
    let condition = registry
        .snapshot()
        .get(APISERVICE)
        .and_then(|r| {
            r.apiservice
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == "Available")
                .cloned()
        })
        .expect("an Available condition");
    assert_eq!(condition.reason, "FailedDiscoveryCheck");
    assert!(
        condition
            .message
            .starts_with("failing or missing response from https://"),
        "{}",
        condition.message
    );
    // Later requests are refused by the gate, without a dial.
    let (status, body) = get_status(&client, 3).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "service unavailable\n")
    );

    // Back on the same address: a re-check finds it within a few passive delays.
    let back = Relay::start_at(backend.addr, relay_addr).await;
    until(true, Duration::from_secs(5)).await;
    assert_eq!(get_status(&client, 4).await.0, StatusCode::OK);
    drop(back);
}

/// Bodies larger than the HTTP/2 flow-control windows on either side cross a backend
/// connection whole, both ways: the request body waits for the backend's window (64 KiB
/// here) to open as it reads, and the response body gives the gateway's window back as
/// the client reads, so neither stalls. A small body crosses too. The backend sees the
/// client's `Content-Length`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_larger_than_the_http2_windows_cross_whole_both_ways() {
    use http_body_util::BodyExt;

    let pki = Pki::new();
    let acceptor = tokio_rustls::TlsAcceptor::from(common::backend_tls(&pki, &[b"h2"]));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let backend_addr = listener.local_addr().expect("address");
    let seen_length = Arc::new(Mutex::new(Vec::new()));
    let lengths = seen_length.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, lengths) = (acceptor.clone(), lengths.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let lengths = lengths.clone();
                    async move {
                        let declared = req
                            .headers()
                            .get(http::header::CONTENT_LENGTH)
                            .map(|v| v.to_str().unwrap_or("?").to_owned());
                        lengths.lock().unwrap().push(declared);
                        // The request body read whole, then sent back as the answer.
                        let body = req.into_body().collect().await.map(|b| b.to_bytes());
                        let body = body.unwrap_or_else(|e| Bytes::from(format!("broken: {e}")));
                        Ok::<_, Infallible>(Response::new(Full::new(body)))
                    }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .initial_stream_window_size(65_535)
                    .initial_connection_window_size(65_535)
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    let addr = gateway(&pki, backend_addr, PoolConfig::default()).await;
    // 3 MiB: past the backend's 64 KiB windows and the gateway's 2 MiB stream window.
    let sent: String = (0..3 * 1024 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    // And a small one, which is all there when the stream opens and goes out at once.
    let small = r#"{"kind":"Widget"}"#.to_owned();
    let mut expected = Vec::new();
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, addr, None, protocol);
        for body in [&sent, &small] {
            let reply = client
                .send(
                    Method::POST,
                    &format!("{BASE}/widgets"),
                    Bytes::from(body.clone()),
                )
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{protocol:?}");
            assert_eq!(reply.body.len(), body.len(), "{protocol:?}");
            assert!(reply.body == *body, "{protocol:?}: the echo differs");
            expected.push(Some(body.len().to_string()));
        }
    }
    assert_eq!(*seen_length.lock().unwrap(), expected);
}
