//! A Service with three endpoints (`ServiceEndpoints::Many`, as `KubeServiceResolver`
//! gives with `--enable-aggregator-routing`), over real TLS on 127.0.0.1: requests spread
//! over the three; one endpoint killed mid-load (its listener and connections gone, as a
//! dead pod's) costs only the requests sent to it before it is ejected after the
//! configured failures, no request reaches it while it is out, and it is probed back in
//! once it answers again. Then the same with the endpoints of a Service's EndpointSlices
//! (`KubeServiceResolver` against the scripted API server), where an endpoint that is not
//! ready never gets a request.

pub mod common;
#[path = "../kube-aggregator-kube/tests/support/mod.rs"]
pub mod scripted;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Answers, BASE, Client, H2_AND_HTTP11, Pki, Protocol, Seen, alice};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_aggregator::Body;
use kube_aggregator::aggregator::OutlierDetection;
use kube_aggregator::apiservice::ServiceReference;
use kube_aggregator::availability::{
    EndpointsFuture, ResolveFuture, ServiceEndpoints, ServiceResolver,
};
use tokio::net::TcpListener;

/// Requests each endpoint served, by its name.
type Served = Arc<Mutex<HashMap<String, usize>>>;

/// An extension server that can be killed (listener and connections closed) and started
/// again on the same port.
struct Endpoint {
    name: String,
    addr: SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Endpoint {
    async fn start(pki: &Pki, name: &str, served: &Served) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let mut endpoint = Endpoint {
            name: name.to_owned(),
            addr,
            task: None,
        };
        endpoint.serve(pki, listener, served);
        endpoint
    }

    fn serve(&mut self, pki: &Pki, listener: TcpListener, served: &Served) {
        let acceptor = tokio_rustls::TlsAcceptor::from(common::backend_tls(pki, H2_AND_HTTP11));
        let (name, served) = (self.name.clone(), served.clone());
        self.task = Some(tokio::spawn(async move {
            // Connections live in the set: aborting this task closes them all.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, name, served) = (acceptor.clone(), name.clone(), served.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (name, served) = (name.clone(), served.clone());
                        async move {
                            let seen = Seen::from_parts(req.into_parts().0);
                            if let Some(res) = Answers::Background.answer(&seen) {
                                return Ok::<_, Infallible>(res);
                            }
                            *served.lock().unwrap().entry(name.clone()).or_default() += 1;
                            Ok(Response::new(Body::full(name)))
                        }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        }));
    }

    /// Closes the listener and every connection.
    async fn kill(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    /// Listens again on the same port.
    async fn revive(&mut self, pki: &Pki, served: &Served) {
        let listener = TcpListener::bind(self.addr)
            .await
            .expect("bind the same port");
        self.serve(pki, listener, served);
    }
}

/// The three endpoints of `test-ns/backend`.
struct Three(Vec<http::uri::Authority>);

impl ServiceResolver for Three {
    fn resolve(&self, _: &ServiceReference) -> ResolveFuture {
        Box::pin(std::future::ready(Ok(self.0[0].clone())))
    }

    fn resolve_endpoints(&self, _: &ServiceReference) -> EndpointsFuture {
        let all = ServiceEndpoints::from_addresses(self.0.clone()).expect("three");
        Box::pin(std::future::ready(Ok(all)))
    }
}

const FAILURES: u32 = 3;
const EJECTION: Duration = Duration::from_secs(1);

/// A gateway in front of the widgets APIService, its Service resolved by `resolver`,
/// ejecting after [`FAILURES`] for [`EJECTION`]; a client of it, and the stack (kept for
/// the test's length).
async fn gateway(
    pki: &Pki,
    resolver: impl ServiceResolver,
    protocol: Protocol,
) -> (Client, kube_aggregator::Aggregator) {
    let builder = common::builder_with(pki, resolver)
        .authenticator(alice())
        .authorizer(kube_aggregator::authz::AlwaysAllow)
        .outlier_detection(OutlierDetection {
            consecutive_failures: FAILURES,
            base_ejection_time: EJECTION,
            max_ejection_time: Duration::from_secs(10),
            max_ejection_percent: 50,
        });
    let (addr, aggregator) = common::start_gateway(
        pki,
        builder,
        vec![common::widgets_apiservice(pki)],
        common::host(),
    )
    .await;
    (Client::new(pki, addr, None, protocol), aggregator)
}

/// Sends `n` requests for widgets, one after the other; how many did not get a 200.
async fn send(client: &Client, n: usize) -> usize {
    let path = format!("{BASE}/widgets");
    let mut failed = 0;
    for _ in 0..n {
        if client.get(&path).await.status != StatusCode::OK {
            failed += 1;
        }
    }
    failed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_is_ejected_and_probed_back() {
    let pki = Pki::new();
    let served: Served = Arc::default();
    let mut endpoints = Vec::new();
    for name in ["a", "b", "c"] {
        endpoints.push(Endpoint::start(&pki, name, &served).await);
    }
    let resolver = Three(
        endpoints
            .iter()
            .map(|e| e.addr.to_string().parse().expect("authority"))
            .collect(),
    );
    let (client, _aggregator) = gateway(&pki, resolver, Protocol::Http2).await;
    let send = |n: usize| send(&client, n);

    // All three take requests.
    assert_eq!(send(60).await, 0);
    let counts = served.lock().unwrap().clone();
    for name in ["a", "b", "c"] {
        assert!(counts.get(name).copied().unwrap_or(0) >= 5, "{counts:?}");
    }

    // "b" dies: only the requests sent to it before its ejection fail.
    endpoints[1].kill().await;
    let killed = Instant::now();
    let failed = send(60).await;
    assert!(
        (1..=FAILURES as usize).contains(&failed),
        "{failed} requests failed; at most {FAILURES} may"
    );
    // Every request after those went elsewhere: while it is out (ejected, then waiting
    // for a probe that fails as long as it is dead), nothing is sent its way.

    // Back up: once its ejection is over, a probe passes and requests reach it again.
    endpoints[1].revive(&pki, &served).await;
    let before = served.lock().unwrap().get("b").copied().unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(
            send(10).await,
            0,
            "a revived endpoint is let back only once it answers"
        );
        if served.lock().unwrap().get("b").copied().unwrap_or(0) > before {
            break;
        }
        assert!(Instant::now() < deadline, "b never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "{failed} requests failed after the kill; b back {:?} after it",
        killed.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ready_endpoints_of_a_services_endpointslices_take_the_requests() {
    use kube_aggregator_kube::KubeServiceResolver;
    let pki = Pki::new();
    let served: Served = Arc::default();
    let mut endpoints = Vec::new();
    for name in ["a", "b", "c", "unready"] {
        endpoints.push(Endpoint::start(&pki, name, &served).await);
    }
    // One slice per endpoint: each has its own port on 127.0.0.1.
    let cluster = scripted::ScriptedApiServer::start().await;
    cluster.service("test-ns", "backend", "10.96.0.9", &[(443, "https")]);
    let slice = |endpoint: &Endpoint, ready: bool| {
        cluster.endpoint_slice(
            "test-ns",
            &format!("backend-{}", endpoint.name),
            "backend",
            ("https", i32::from(endpoint.addr.port())),
            &[("127.0.0.1", ready)],
        );
    };
    for (i, endpoint) in endpoints.iter().enumerate() {
        slice(endpoint, i < 3);
    }
    let resolver = KubeServiceResolver::endpoint_slices(cluster.client());
    resolver.ready().await;
    let (client, _aggregator) = gateway(&pki, resolver, Protocol::Http1).await;
    let send = |n: usize| send(&client, n);
    let count = |name: &str| served.lock().unwrap().get(name).copied().unwrap_or(0);

    assert_eq!(send(60).await, 0);
    for name in ["a", "b", "c"] {
        assert!(count(name) >= 5, "{:?}", served.lock().unwrap());
    }

    // "c" dies mid-load; the EndpointSlice controller marks it not ready a moment later.
    endpoints[2].kill().await;
    let failed = send(30).await;
    slice(&endpoints[2], false);
    let failed = failed + send(30).await;
    assert!(
        failed <= FAILURES as usize,
        "{failed} requests failed; at most {FAILURES} may"
    );

    // Back, and ready again: it takes requests.
    endpoints[2].revive(&pki, &served).await;
    slice(&endpoints[2], true);
    let before = count("c");
    let deadline = Instant::now() + Duration::from_secs(10);
    while count("c") == before {
        assert_eq!(send(10).await, 0);
        assert!(Instant::now() < deadline, "c never came back");
    }
    assert_eq!(
        count("unready"),
        0,
        "a request reached an endpoint that is not ready"
    );
}
