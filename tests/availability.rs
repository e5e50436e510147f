//! The availability controller and the availability gate over real TLS on 127.0.0.1
//! (docs/upstream-behaviour.md §4, docs/conformance-vectors.md §6, known failures B11, B14, B15).
//!
//! Every test builds a throw-away PKI, an extension server that demands the front-proxy
//! client certificate, and a controller with short intervals, so a whole life cycle
//! (available, down, gated, back) takes a few seconds of wall time.
//!
//! The one stack assembled by hand, as a host that composes the layers itself does: a
//! `Registry`, an `AvailabilityController` it runs, and `AuthenticationLayer`,
//! `AuthorizationLayer` and `AggregatorLayer` in a `tower::ServiceBuilder` (every other
//! test uses `Aggregator::builder`).

#[path = "../examples/support/pki.rs"]
pub mod pki;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_aggregator::apiservice::{
    ApiService, ApiServiceCondition, ApiServiceSpec, ObjectMeta, ServiceReference,
};
use kube_aggregator::authn::{AuthenticationLayer, X509Authenticator};
use kube_aggregator::authz::{AlwaysAllow, AuthorizationLayer};
use kube_aggregator::availability::{
    AvailabilityConfig, AvailabilityController, AvailabilityMetrics, ResolveFuture,
    ServiceResolver, StaticServiceResolver,
};
use kube_aggregator::registry::{Registry, StatusSink};
use kube_aggregator::rt::{Executor, Timer, rfc3339_now};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, RustlsTransport};
use kube_aggregator::{AggregatorLayer, Body, server};
use pki::{Ca, Leaf};
use pki::{certs, key, provider};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceBuilder;

const GROUP: &str = "widgets.example.io";
const VERSION: &str = "v1alpha1";
const NAME: &str = "v1alpha1.widgets.example.io";
const NAMESPACE: &str = "widgets";
const SERVICE: &str = "widget-api";
const PROBE_PATH: &str = "/apis/widgets.example.io/v1alpha1";
const RESOURCE_PATH: &str = "/apis/widgets.example.io/v1alpha1/namespaces/ns1/widgets/w1";
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on anything that should happen within a few controller cycles.
const SOON: Duration = Duration::from_secs(5);

fn config() -> AvailabilityConfig {
    AvailabilityConfig {
        resync_period: Duration::from_millis(200),
        probe_timeout: PROBE_TIMEOUT,
        probe_attempts: 5,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(200),
        passive_recheck: Duration::from_millis(100),
        soft_failure_threshold: 3,
        degraded_recheck: Duration::from_millis(50),
    }
}

fn roots(ca: &Ca) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(&ca.cert_pem) {
        roots.add(c).expect("CA certificate is a trust anchor");
    }
    roots
}

/// Four trust domains, as in a real cluster: the extension server's serving CA, the
/// front-proxy CA the extension server trusts for the aggregator's identity, and the
/// gateway's serving and client CAs.
struct Pki {
    backend_ca: Ca,
    backend: Leaf,
    front_proxy_ca: Ca,
    proxy_client: Leaf,
    gateway_ca: Ca,
    gateway: Leaf,
    client_ca: Ca,
    alice: Leaf,
}

impl Pki {
    fn new() -> Pki {
        let backend_ca = Ca::new("widget-api-ca");
        let backend = backend_ca.server(SERVICE, &[&format!("{SERVICE}.{NAMESPACE}.svc")]);
        let front_proxy_ca = Ca::new("front-proxy-ca");
        let proxy_client = front_proxy_ca.client("front-proxy-client", &[]);
        let gateway_ca = Ca::new("gateway-ca");
        let gateway = gateway_ca.server("gateway", &["localhost"]);
        let client_ca = Ca::new("client-ca");
        let alice = client_ca.client("alice", &["devs"]);
        Pki {
            backend_ca,
            backend,
            front_proxy_ca,
            proxy_client,
            gateway_ca,
            gateway,
            client_ca,
            alice,
        }
    }

    /// The extension server's TLS: a client certificate from the front-proxy CA is
    /// mandatory, so a probe that does not present the proxy identity fails the handshake.
    fn backend_tls(&self) -> Arc<rustls::ServerConfig> {
        let alpn: &[&[u8]] = &[b"h2", b"http/1.1"];
        self.backend
            .server_config(&[&self.front_proxy_ca.cert_pem], alpn)
    }

    fn proxy_identity(&self) -> ClientCertificate {
        ClientCertificate::from_pem(
            self.proxy_client.cert_pem.as_bytes(),
            self.proxy_client.key_pem.as_bytes(),
        )
        .expect("proxy client certificate")
    }
}

/// A remote APIService for the widget API, verified with the backend CA.
fn remote_apiservice(pki: &Pki) -> ApiService {
    ApiService::remote(GROUP, VERSION, NAMESPACE, SERVICE)
        .priorities(1000, 15)
        .ca_bundle(pki.backend_ca.cert_pem.as_bytes())
}

/// Binds with `SO_REUSEADDR`, so a port whose previous connections linger in TIME_WAIT
/// can be listened on again, as a restarted extension server would.
fn bind_reusable(addr: SocketAddr) -> TcpListener {
    let socket = TcpSocket::new_v4().expect("TCP socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket
        .bind(addr)
        .unwrap_or_else(|e| panic!("cannot bind {addr}: {e}"));
    socket.listen(128).expect("listen")
}

// ---- The extension server ---------------------------------------------------------------

/// One request as the extension server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    /// CN of the client certificate the connection was made with.
    peer: Option<String>,
    /// When the request arrived.
    at: Instant,
}

struct BackendState {
    tls: Arc<rustls::ServerConfig>,
    /// Status answered on the discovery path (the probe target).
    probe_status: AtomicU16,
    /// How long the discovery path takes to answer, in milliseconds.
    probe_delay_ms: AtomicU64,
    /// When not zero, the discovery path answers by check, not by `probe_delay_ms`: the
    /// requests of one check (each check sends `config().probe_attempts`) take half this
    /// many milliseconds, those of the next two this many, and so on.
    flapping_ms: AtomicU64,
    /// Discovery requests received.
    probes: AtomicU64,
    connections: AtomicUsize,
    requests: Mutex<Vec<Seen>>,
}

impl BackendState {
    fn requests(&self) -> Vec<Seen> {
        self.requests.lock().expect("requests lock").clone()
    }
}

/// An HTTPS extension server that can be stopped (listener and every open connection
/// closed) and started again on the same port.
struct Backend {
    addr: SocketAddr,
    state: Arc<BackendState>,
    task: Option<JoinHandle<()>>,
}

impl Backend {
    fn start(tls: Arc<rustls::ServerConfig>) -> Backend {
        let listener = bind_reusable(SocketAddr::from(([127, 0, 0, 1], 0)));
        let addr = listener.local_addr().expect("local address");
        let state = Arc::new(BackendState {
            tls,
            probe_status: AtomicU16::new(200),
            probe_delay_ms: AtomicU64::new(0),
            flapping_ms: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            connections: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(serve_backend(listener, state.clone()));
        Backend {
            addr,
            state,
            task: Some(task),
        }
    }

    fn set_probe_status(&self, status: u16) {
        self.state.probe_status.store(status, Ordering::SeqCst);
    }

    /// Closes the listener and every connection, as a killed process would.
    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    fn restart(&mut self) {
        assert!(self.task.is_none(), "the backend is still running");
        let listener = bind_reusable(self.addr);
        self.task = Some(tokio::spawn(serve_backend(listener, self.state.clone())));
    }
}

async fn serve_backend(listener: TcpListener, state: Arc<BackendState>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(state.tls.clone());
    // Dropping the set (when this task is aborted) aborts every connection task, which
    // closes the sockets the aggregator's pool holds.
    let mut connections = JoinSet::new();
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        state.connections.fetch_add(1, Ordering::SeqCst);
        let acceptor = acceptor.clone();
        let state = state.clone();
        connections.spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let peer = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|leaf| common_name(leaf));
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let response = respond(&state, &req, peer.clone());
                let delay = if req.uri().path() == PROBE_PATH {
                    probe_delay(&state)
                } else {
                    Duration::ZERO
                };
                async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
        while connections.try_join_next().is_some() {}
    }
}

/// How long this discovery request takes (see [`BackendState::flapping_ms`]).
fn probe_delay(state: &BackendState) -> Duration {
    let n = state.probes.fetch_add(1, Ordering::SeqCst);
    let flapping = state.flapping_ms.load(Ordering::SeqCst);
    if flapping == 0 {
        return Duration::from_millis(state.probe_delay_ms.load(Ordering::SeqCst));
    }
    let check = n / config().probe_attempts as u64;
    if check % 3 == 0 {
        Duration::from_millis(flapping / 2)
    } else {
        Duration::from_millis(flapping)
    }
}

fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).ok()?;
    let cn = parsed.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}

fn respond(
    state: &BackendState,
    req: &Request<Incoming>,
    peer: Option<String>,
) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        method: req.method().to_string(),
        path: req.uri().path().to_owned(),
        user: header("x-remote-user"),
        groups: req
            .headers()
            .get_all("x-remote-group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect(),
        uid: header("x-remote-uid"),
        peer,
        at: Instant::now(),
    };
    let user = seen.user.clone().unwrap_or_default();
    state.requests.lock().expect("requests lock").push(seen);
    let mut res = Response::builder();
    if req.uri().path() != PROBE_PATH {
        let body = format!(
            r#"{{"kind":"Widget","servedPath":"{}","user":"{user}"}}"#,
            req.uri().path()
        );
        return res
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("response");
    }
    let status = state.probe_status.load(Ordering::SeqCst);
    let body = match status {
        200 => format!(
            r#"{{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"{GROUP}/{VERSION}","resources":[]}}"#
        ),
        // A redirect the probe must not follow: the backend would see `/test` if it did.
        302 => {
            res = res.header(header::LOCATION, "/test");
            String::new()
        }
        304 => String::new(),
        _ => "refused by the test backend".to_owned(),
    };
    res.status(status)
        .body(Full::new(Bytes::from(body)))
        .expect("response")
}

/// A listener that accepts TCP and never answers the TLS handshake (known failure B14's
/// black-holed endpoint), recording when each connection arrived and from where, in the
/// order of the listen queue.
struct BlackHole {
    addr: SocketAddr,
    accepted: Arc<Mutex<Vec<(Instant, SocketAddr)>>>,
    task: JoinHandle<()>,
}

impl BlackHole {
    fn bind(addr: SocketAddr) -> BlackHole {
        let listener = bind_reusable(addr);
        let addr = listener.local_addr().expect("local address");
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let log = accepted.clone();
        let task = tokio::spawn(async move {
            // Held open so the client waits for a ServerHello that never comes.
            let mut held = Vec::new();
            loop {
                if let Ok((tcp, peer)) = listener.accept().await {
                    log.lock()
                        .expect("accepted lock")
                        .push((Instant::now(), peer));
                    held.push(tcp);
                }
            }
        });
        BlackHole {
            addr,
            accepted,
            task,
        }
    }

    fn accepted(&self) -> Vec<Instant> {
        let log = self.accepted.lock().expect("accepted lock");
        log.iter().map(|(at, _)| *at).collect()
    }

    fn peers(&self) -> Vec<SocketAddr> {
        let log = self.accepted.lock().expect("accepted lock");
        log.iter().map(|(_, peer)| *peer).collect()
    }

    async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

// ---- The gateway ---------------------------------------------------------------------------

/// Counts resolutions, to show that a gated request never even looks for an endpoint;
/// the test can point it elsewhere ([`Gateway::route_to`]).
#[derive(Clone)]
struct CountingResolver {
    inner: Arc<Mutex<StaticServiceResolver>>,
    calls: Arc<AtomicUsize>,
}

impl ServiceResolver for CountingResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.lock().expect("resolver lock").resolve(service)
    }
}

/// A kube-apiserver-shaped front: TLS with client certificates, x509 authentication,
/// AlwaysAllow, then the aggregator in front of a local handler answering 404.
struct Gateway {
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
    resolutions: Arc<AtomicUsize>,
    routes: Arc<Mutex<StaticServiceResolver>>,
}

impl Gateway {
    async fn start(pki: &Pki, registry: &Registry, resolver: StaticServiceResolver) -> Gateway {
        let x509 =
            X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
        let tls = server::server_config(
            pki.gateway.cert_pem.as_bytes(),
            pki.gateway.key_pem.as_bytes(),
            pki.client_ca.cert_pem.as_bytes(),
            true,
        )
        .expect("gateway TLS");
        let resolutions = Arc::new(AtomicUsize::new(0));
        let routes = Arc::new(Mutex::new(resolver));
        let resolver = CountingResolver {
            inner: routes.clone(),
            calls: resolutions.clone(),
        };
        let local = tower::service_fn(|_req: Request<Body>| async {
            let mut res = Response::new(Body::full("served locally"));
            *res.status_mut() = StatusCode::NOT_FOUND;
            Ok::<_, Infallible>(res)
        });
        let service = ServiceBuilder::new()
            .layer(AuthenticationLayer::new(x509))
            .layer(AuthorizationLayer::new(AlwaysAllow))
            .layer(AggregatorLayer::new(
                registry.clone(),
                resolver,
                Timer::tokio(),
            ))
            .service(local);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("gateway listener");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(server::serve_tls(
            listener,
            tls,
            service,
            std::future::pending(),
        ));
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots(&pki.gateway_ca))
            .with_client_auth_cert(certs(&pki.alice.cert_pem), key(&pki.alice.key_pem))
            .expect("client certificate");
        Gateway {
            addr,
            client: Arc::new(client),
            resolutions,
            routes,
        }
    }

    /// From now on the gateway (not the controller, which has a resolver of its own)
    /// finds the widget Service at `addr`.
    fn route_to(&self, addr: SocketAddr) {
        let mut routes = StaticServiceResolver::new();
        routes
            .insert(NAMESPACE, SERVICE, 443, &addr.to_string())
            .expect("address");
        *self.routes.lock().expect("resolver lock") = routes;
    }

    /// `GET path` as alice over a fresh HTTP/1.1 connection.
    async fn get(&self, path: &str) -> Reply {
        let call = async {
            let tcp = TcpStream::connect(self.addr)
                .await
                .expect("connect to the gateway");
            let name = ServerName::try_from("localhost").expect("server name");
            let tls = tokio_rustls::TlsConnector::from(self.client.clone())
                .connect(name, tcp)
                .await
                .expect("TLS handshake with the gateway");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .expect("HTTP/1.1 handshake");
            tokio::spawn(conn);
            let req = Request::get(path)
                .header(header::HOST, "localhost")
                .body(Empty::<Bytes>::new())
                .expect("request");
            let res = sender.send_request(req).await.expect("response");
            let status = res.status();
            let headers = res.headers().clone();
            let body = res.into_body().collect().await.expect("body").to_bytes();
            Reply {
                status,
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            }
        };
        tokio::time::timeout(SOON, call)
            .await
            .unwrap_or_else(|_| panic!("GET {path} through the gateway took over {SOON:?}"))
    }
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

// ---- Status and timing ----------------------------------------------------------------------

/// Records every status change the registry reports, in order.
#[derive(Clone, Default)]
struct RecordingSink(Arc<Mutex<Vec<(String, ApiServiceCondition)>>>);

impl StatusSink for RecordingSink {
    fn status_changed(&self, apiservice: &ApiService) {
        if let Some(c) = apiservice.available_condition() {
            self.0
                .lock()
                .expect("sink lock")
                .push((apiservice.name().to_owned(), c.clone()));
        }
    }
}

impl RecordingSink {
    fn heard(&self, name: &str) -> Vec<ApiServiceCondition> {
        let events = self.0.lock().expect("sink lock");
        events
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| c.clone())
            .collect()
    }
}

fn condition(registry: &Registry, name: &str) -> Option<ApiServiceCondition> {
    registry
        .snapshot()
        .get(name)
        .and_then(|r| r.apiservice.available_condition().cloned())
}

/// A condition's status, reason and message, to compare at once.
fn said(c: &ApiServiceCondition) -> (&str, &str, &str) {
    (&c.status, &c.reason, &c.message)
}

/// Polls `check` every 10 ms until it returns `Ok`, failing after `limit` with the last
/// `Err` (a description of the state seen).
async fn eventually<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("{what}: not within {limit:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// `name`'s condition once it is set and not `True`.
async fn unavailable(registry: &Registry, name: &str) -> ApiServiceCondition {
    eventually(name, SOON, || {
        let c = condition(registry, name).filter(|c| c.status != "True");
        c.ok_or_else(|| "no condition".to_owned())
    })
    .await
}

/// Waits until the RFC 3339 wall clock (second resolution, as `lastTransitionTime`) is
/// past `stamp`, so a rewritten transition time would be visible.
async fn wall_clock_past(stamp: &str) {
    eventually("the wall clock to pass the transition second", SOON, || {
        let now = rfc3339_now();
        if now.as_str() > stamp {
            Ok(())
        } else {
            Err(now)
        }
    })
    .await;
}

fn spawn_controller(
    registry: &Registry,
    resolver: StaticServiceResolver,
    config: AvailabilityConfig,
) -> Arc<AvailabilityMetrics> {
    let metrics = Arc::new(AvailabilityMetrics::default());
    let controller = AvailabilityController::new(
        registry.clone(),
        resolver,
        Timer::tokio(),
        config,
        metrics.clone(),
    );
    tokio::spawn(controller.run());
    metrics
}

/// A registry whose transport presents the front-proxy identity.
fn registry(pki: &Pki) -> Registry {
    Registry::new(RustlsTransport::new(
        pki.proxy_identity(),
        Executor::tokio(),
        Timer::tokio(),
    ))
}

/// Everything a remote APIService needs: backend, resolver, registry with a recording
/// sink, a running controller and a gateway.
struct Fixture {
    pki: Pki,
    backend: Backend,
    registry: Registry,
    sink: RecordingSink,
    metrics: Arc<AvailabilityMetrics>,
    gateway: Gateway,
}

impl Fixture {
    async fn start() -> Fixture {
        Fixture::start_with(config()).await
    }

    /// [`Fixture::start`] with the controller's timing `config`.
    async fn start_with(config: AvailabilityConfig) -> Fixture {
        let pki = Pki::new();
        let backend = Backend::start(pki.backend_tls());
        let mut resolver = StaticServiceResolver::new();
        resolver
            .insert(NAMESPACE, SERVICE, 443, &backend.addr.to_string())
            .expect("backend address");
        let registry = registry(&pki);
        let sink = RecordingSink::default();
        registry.add_status_sink(sink.clone());
        let metrics = spawn_controller(&registry, resolver.clone(), config);
        let gateway = Gateway::start(&pki, &registry, resolver).await;
        Fixture {
            pki,
            backend,
            registry,
            sink,
            metrics,
            gateway,
        }
    }

    /// Registers [`remote_apiservice`].
    fn apply_remote(&self) {
        let apiservice = remote_apiservice(&self.pki);
        let applied = self.registry.apply(ApiServiceEvent::Applied(apiservice));
        applied.expect("valid APIService");
    }

    /// [`NAME`]'s condition once `pred` holds (within [`SOON`]); `what` names it.
    async fn wait(
        &self,
        what: &str,
        pred: impl Fn(&ApiServiceCondition) -> bool,
    ) -> ApiServiceCondition {
        eventually(what, SOON, || match condition(&self.registry, NAME) {
            Some(c) if pred(&c) => Ok(c),
            other => Err(format!("{other:?}")),
        })
        .await
    }

    /// The condition once it is `Available=True`.
    async fn available(&self) -> ApiServiceCondition {
        self.wait("Available=True", |c| c.status == "True").await
    }

    fn url(&self) -> String {
        format!("https://{}{PROBE_PATH}", self.backend.addr)
    }

    async fn metrics_eventually(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        eventually(what, SOON, || {
            let text = self.metrics.render();
            if pred(&text) { Ok(text) } else { Err(text) }
        })
        .await
    }
}

/// Runs a test's body, failing it after 20 s.
async fn with_timeout(body: impl Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(20), body)
        .await
        .expect("test finished within 20 s");
}

// ---- Tests ------------------------------------------------------------------------------------

/// Available, backend killed, gated (503 without a dial), backend back on the same port,
/// available again (B11, B14).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_backend_flips_the_condition_gates_requests_and_recovers() {
    with_timeout(async {
        let mut f = Fixture::start().await;
        f.apply_remote();

        let up = f.available().await;
        assert_eq!(up.reason, "Passed");
        assert_eq!(up.message, "all checks passed");
        assert!(up.last_transition_time.is_some(), "{up:?}");
        let heard = f.sink.heard(NAME);
        assert_eq!(heard.len(), 1, "one change, one report: {heard:?}");
        assert_eq!(heard[0], up);

        let ok = f.gateway.get(RESOURCE_PATH).await;
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
        assert!(ok.body.contains(r#""servedPath":"/apis/widgets.example.io/v1alpha1/namespaces/ns1/widgets/w1""#), "{}", ok.body);
        assert!(ok.body.contains(r#""user":"alice""#), "the backend sees the caller, not the proxy: {}", ok.body);

        // The extension server goes away: connection refused from now on.
        f.backend.stop().await;
        let down = f.wait("Available=False", |c| c.status == "False").await;
        assert_eq!(down.reason, "FailedDiscoveryCheck");
        let prefix = format!("failing or missing response from {}", f.url());
        assert!(down.message.starts_with(&prefix), "{:?} does not start with {prefix:?}", down.message);
        let flipped_at = down.last_transition_time.clone().expect("lastTransitionTime");
        f.metrics_eventually("the available->unavailable transition counted", |m| {
            m.contains(&format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}} 1\n"))
                && m.contains(&format!(
                    "aggregator_unavailable_apiservice_total{{name=\"{NAME}\",reason=\"FailedDiscoveryCheck\"}} 1\n"
                ))
        })
        .await;

        // Something now listens on the port but never completes a handshake. Bound only
        // after the transition second has passed, so the failures it causes would carry a
        // new lastTransitionTime if failed syncs rewrote it.
        wall_clock_past(&flipped_at).await;
        let hole = BlackHole::bind(f.backend.addr);
        eventually("the controller's probe reaching the black hole", SOON, || {
            hole.accepted().first().copied().ok_or_else(|| "no connection yet".to_owned())
        })
        .await;
        // While the probe waits out its timeout, the gateway (only the gateway) finds the
        // Service at a decoy, so a dial made for the gated request could only land there.
        let decoy = BlackHole::bind(SocketAddr::from(([127, 0, 0, 1], 0)));
        f.gateway.route_to(decoy.addr);
        let resolutions = f.gateway.resolutions.load(Ordering::SeqCst);

        let gated = f.gateway.get(RESOURCE_PATH).await;
        assert_eq!(gated.status, StatusCode::SERVICE_UNAVAILABLE, "{}", gated.body);
        assert_eq!(gated.body, "service unavailable\n");
        assert_eq!(gated.headers[header::CONTENT_TYPE], "text/plain; charset=utf-8");
        assert_eq!(gated.headers["x-content-type-options"], "nosniff");
        assert_eq!(
            f.gateway.resolutions.load(Ordering::SeqCst),
            resolutions,
            "the gated request resolved the service"
        );
        // A connection of ours, made after the answer: the decoy accepts in queue order,
        // so a dial for the gated request would have been accepted before it.
        let ours = TcpStream::connect(decoy.addr).await.expect("connect to the decoy");
        let own = ours.local_addr().expect("local address");
        let peers = eventually("the decoy accepting our connection", SOON, || {
            let peers = decoy.peers();
            if peers.contains(&own) { Ok(peers) } else { Err(format!("{peers:?}")) }
        })
        .await;
        assert_eq!(peers, [own], "the gated request dialed the backend");
        drop(ours);
        decoy.close().await;
        f.gateway.route_to(f.backend.addr);

        let hung = f.wait("the probe timing out on the black hole", |c| {
            c.message.contains("context deadline exceeded")
        })
        .await;
        let url = f.url();
        // Upstream's words first, then the elapsed time against the budget.
        let upstream = format!("failing or missing response from {url}: Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers): no response in ");
        assert!(hung.message.starts_with(&upstream), "{}", hung.message);
        assert!(hung.message.contains("(the budget is 1s); the extension server is slow or hung"), "{}", hung.message);
        assert_eq!((hung.status.as_str(), hung.reason.as_str()), ("False", "FailedDiscoveryCheck"));
        assert_eq!(hung.last_transition_time.as_deref(), Some(flipped_at.as_str()), "a failed sync rewrote lastTransitionTime");

        // The real server comes back on the same port.
        hole.close().await;
        f.backend.restart();
        let back = f.wait("Available=True again", |c| c.status == "True").await;
        assert_eq!((back.reason.as_str(), back.message.as_str()), ("Passed", "all checks passed"));
        let back_at = back.last_transition_time.clone().expect("lastTransitionTime");
        assert!(back_at > flipped_at, "the flip back moves lastTransitionTime: {back_at} vs {flipped_at}");
        let ok = f.gateway.get(RESOURCE_PATH).await;
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);

        // Every report while unavailable kept the transition time of the flip.
        let heard = f.sink.heard(NAME);
        let mut statuses: Vec<&str> = heard.iter().map(|c| c.status.as_str()).collect();
        statuses.dedup();
        assert_eq!(statuses, ["True", "False", "True"], "{heard:?}");
        let failures: Vec<_> = heard.iter().filter(|c| c.status == "False").collect();
        assert!(failures.len() >= 2, "refused and timed out are two reports: {failures:?}");
        for c in failures {
            assert_eq!(c.last_transition_time.as_deref(), Some(flipped_at.as_str()), "{c:?}");
        }
        f.metrics_eventually("the gauge back to 0", |m| {
            m.contains(&format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}} 0\n"))
        })
        .await;
    })
    .await;
}

/// The probe is `GET /apis/<g>/<v>` as system:kube-aggregator with the proxy client
/// certificate; only 2xx passes, redirects are not followed (docs/conformance-vectors.md §6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_identity_and_non_2xx_answers() {
    with_timeout(async {
        let f = Fixture::start().await;
        f.backend.set_probe_status(403);
        f.apply_remote();
        let url = f.url();

        let forbidden =
            f.wait("403 reported", |c| c.status == "False").await;
        assert_eq!(forbidden.reason, "FailedDiscoveryCheck");
        assert_eq!(
            forbidden.message,
            format!(
                "failing or missing response from {url}: bad status from {url}: 403: the extension server did not accept the front-proxy identity: \
                 the proxy client certificate has subject \"CN=front-proxy-client\" issued by \"CN=front-proxy-ca\"; \
                 check that its --requestheader-client-ca-file contains the CA \"CN=front-proxy-ca\" and that its --requestheader-allowed-names, if set, lists \"front-proxy-client\""
            )
        );
        let flipped_at = forbidden
            .last_transition_time
            .clone()
            .expect("lastTransitionTime");

        let probes = f.backend.state.requests();
        assert!(
            probes.len() >= 5,
            "one check is five parallel attempts: {probes:?}"
        );
        for p in &probes {
            assert_eq!(p.method, "GET", "{p:?}");
            assert_eq!(p.path, PROBE_PATH, "{p:?}");
            assert_eq!(p.user.as_deref(), Some("system:kube-aggregator"), "{p:?}");
            assert_eq!(p.groups, ["system:masters"], "{p:?}");
            assert_eq!(p.uid, None, "{p:?}");
            assert_eq!(p.peer.as_deref(), Some("front-proxy-client"), "{p:?}");
        }
        assert!(f.backend.state.connections.load(Ordering::SeqCst) >= 1);

        // Later failures change the message, never the transition time.
        wall_clock_past(&flipped_at).await;
        f.backend.set_probe_status(302);
        let redirect = f.wait("302 reported", |c| {
            c.message.ends_with(": 302")
        })
        .await;
        assert_eq!(
            redirect.message,
            format!("failing or missing response from {url}: bad status from {url}: 302")
        );
        assert_eq!(
            (redirect.status.as_str(), redirect.reason.as_str()),
            ("False", "FailedDiscoveryCheck")
        );
        assert_eq!(
            redirect.last_transition_time.as_deref(),
            Some(flipped_at.as_str())
        );

        f.backend.set_probe_status(304);
        let not_modified = f.wait("304 reported", |c| {
            c.message.ends_with(": 304")
        })
        .await;
        assert_eq!(
            not_modified.message,
            format!("failing or missing response from {url}: bad status from {url}: 304")
        );
        assert_eq!(not_modified.status, "False");
        assert_eq!(
            not_modified.last_transition_time.as_deref(),
            Some(flipped_at.as_str())
        );

        let paths: Vec<String> = f
            .backend
            .state
            .requests()
            .into_iter()
            .map(|s| s.path)
            .collect();
        assert!(
            paths.iter().all(|p| p == PROBE_PATH),
            "the redirect was followed: {paths:?}"
        );

        f.backend.set_probe_status(200);
        let up = f.available().await;
        assert_eq!(
            (up.reason.as_str(), up.message.as_str()),
            ("Passed", "all checks passed")
        );
        let heard = f.sink.heard(NAME);
        assert!(
            heard
                .iter()
                .filter(|c| c.status == "False")
                .all(|c| c.last_transition_time.as_deref() == Some(flipped_at.as_str())),
            "{heard:?}"
        );
    })
    .await;
}

/// Resolver failures come before any probe, with upstream reasons and messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolver_failures_name_the_service() {
    with_timeout(async {
        let pki = Pki::new();
        let mut resolver = StaticServiceResolver::new();
        // Known on 443 only; nothing listens there because nothing may be dialed.
        resolver
            .insert("extensions", "listed", 443, "127.0.0.1:9")
            .expect("address");
        let registry = registry(&pki);
        let metrics = spawn_controller(&registry, resolver, config());
        let remote = |version: &str, service: &str, port: Option<i32>| {
            let mut svc = remote_apiservice(&pki);
            svc.metadata.name = format!("{version}.{GROUP}");
            svc.spec.version = version.into();
            svc.spec.service = Some(ServiceReference {
                namespace: "extensions".into(),
                name: service.into(),
                port,
            });
            svc
        };
        registry
            .apply(ApiServiceEvent::Resynced(vec![
                remote("v1", "absent", None),
                remote("v2", "listed", Some(8443)),
            ]))
            .expect("valid APIServices");

        let missing = unavailable(&registry, "v1.widgets.example.io").await;
        let absent = r#"service/absent in "extensions" is not present"#;
        assert_eq!(said(&missing), ("False", "ServiceNotFound", absent));
        let wrong_port = unavailable(&registry, "v2.widgets.example.io").await;
        let closed = r#"service/listed in "extensions" is not listening on port 8443"#;
        assert_eq!(said(&wrong_port), ("False", "ServicePortError", closed));

        // Never available, so no available->unavailable transition is counted.
        let text = eventually("both gauges at 1", SOON, || {
            let m = metrics.render();
            let both = m
                .contains("aggregator_unavailable_apiservice{name=\"v1.widgets.example.io\"} 1\n")
                && m.contains(
                    "aggregator_unavailable_apiservice{name=\"v2.widgets.example.io\"} 1\n",
                );
            if both { Ok(m) } else { Err(m) }
        })
        .await;
        assert!(
            !text.contains("aggregator_unavailable_apiservice_total{"),
            "{text}"
        );
    })
    .await;
}

/// The gauge follows every check, the counter counts only available->unavailable
/// transitions, retries back off (B15), and deletion forgets the gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_transitions_and_deletion() {
    with_timeout(async {
        let f = Fixture::start().await;
        f.apply_remote();
        f.available().await;
        let gauge = |v: u8| format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}} {v}\n");
        let counter = format!(
            "aggregator_unavailable_apiservice_total{{name=\"{NAME}\",reason=\"FailedDiscoveryCheck\"}} 1\n"
        );
        let text = f.metrics_eventually("gauge 0", |m| m.contains(&gauge(0))).await;
        assert!(!text.contains("aggregator_unavailable_apiservice_total{"), "{text}");

        f.backend.set_probe_status(500);
        f.wait("Available=False", |c| c.status == "False").await;
        f.metrics_eventually("gauge 1 and one transition", |m| m.contains(&gauge(1)) && m.contains(&counter))
            .await;

        // Failures keep coming back within the backoff cap, but neither spin nor count
        // again: 5 attempts per check, delays 10, 20, 40, 80, 160, 200, 200... ms after
        // each failed check. Thirty probes span at least six checks, so five delays: at
        // least 10 + 20 + 40 + 80 + 160 ms from the first of them to the last.
        let before = f.backend.state.requests().len();
        let probes = eventually("thirty more probes", SOON, || {
            let seen = f.backend.state.requests();
            if seen.len() >= before + 30 {
                Ok(seen[before..before + 30].to_vec())
            } else {
                Err(format!("{} probes", seen.len() - before))
            }
        })
        .await;
        let span = probes[29].at.saturating_duration_since(probes[0].at);
        assert!(span >= Duration::from_millis(310), "retry storm: 30 probes in {span:?}");
        let text = f.metrics.render();
        assert!(text.contains(&counter), "{text}");

        f.registry
            .apply(ApiServiceEvent::Deleted(NAME.into()))
            .expect("delete");
        f.metrics_eventually("the gauge of the deleted APIService removed", |m| {
            !m.contains(&format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}}"))
        })
        .await;
    })
    .await;
}

/// A check still running when its APIService is deleted does not bring the deleted
/// APIService's gauge back when it ends (upstream forgets a deleted APIService's metrics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_ends_after_deletion_leaves_no_gauge() {
    with_timeout(async {
        let f = Fixture::start().await;
        f.apply_remote();
        f.available().await;
        let gauge = format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}}");
        f.metrics_eventually("the gauge", |m| m.contains(&gauge))
            .await;
        // Failing checks keep coming; the next probe is held for 800 ms.
        f.backend.state.probe_delay_ms.store(800, Ordering::SeqCst);
        f.backend.set_probe_status(500);
        let before = f.backend.state.requests().len();
        eventually("a held probe", SOON, || {
            let seen = f.backend.state.requests().len();
            if seen > before {
                Ok(())
            } else {
                Err(format!("{seen} requests"))
            }
        })
        .await;
        f.registry
            .apply(ApiServiceEvent::Deleted(NAME.into()))
            .expect("delete");
        f.metrics_eventually("the gauge removed", |m| !m.contains(&gauge))
            .await;
        // The held probe ends, and its check with it.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let text = f.metrics.render();
        assert!(!text.contains(&gauge), "the gauge came back: {text}");
    })
    .await;
}

/// A local APIService is Available=True, reason Local, as soon as it is applied; the
/// controller never probes it, and deleting it forgets its gauge as upstream's local
/// controller does (`ForgetAPIService` on NotFound). Nothing here is dialed, so it runs
/// on tokio's paused clock, which the controller's timer follows.
#[tokio::test(start_paused = true)]
async fn local_apiservice_is_available_on_apply() {
    with_timeout(async {
        let pki = Pki::new();
        let registry = registry(&pki);
        let name = "v1.local.example.io";
        let local = ApiService {
            metadata: ObjectMeta {
                name: name.into(),
                ..ObjectMeta::default()
            },
            spec: ApiServiceSpec {
                group: "local.example.io".into(),
                version: "v1".into(),
                group_priority_minimum: 1000,
                version_priority: 15,
                ..ApiServiceSpec::default()
            },
            ..ApiService::default()
        };
        registry
            .apply(ApiServiceEvent::Applied(local))
            .expect("valid local APIService");
        let c = condition(&registry, name).expect("Available condition set by apply");
        assert_eq!(c.type_, "Available");
        let always = "Local APIServices are always available";
        assert_eq!(said(&c), ("True", "Local", always));
        assert!(c.last_transition_time.is_some(), "{c:?}");

        let metrics = spawn_controller(&registry, StaticServiceResolver::new(), config());
        let gauge = format!("aggregator_unavailable_apiservice{{name=\"{name}\"}}");
        eventually("the local APIService's gauge at 0", SOON, || {
            let m = metrics.render();
            if m.contains(&format!("{gauge} 0\n")) {
                Ok(())
            } else {
                Err(m)
            }
        })
        .await;
        // Several resync periods later (on the paused clock: at once) nothing has changed.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(condition(&registry, name), Some(c));

        registry
            .apply(ApiServiceEvent::Deleted(name.into()))
            .expect("delete");
        eventually("the deleted local APIService's gauge removed", SOON, || {
            let m = metrics.render();
            if m.contains(&gauge) { Err(m) } else { Ok(()) }
        })
        .await;
    })
    .await;
}

/// No flapping: a server whose discovery answers in time, then overruns the budget on
/// two checks in a row, over and over (the 5 s budget of a server answering in 5 s ± 0.5 s,
/// at its worst), never turns `Available=False`: two soft failures are under the default
/// threshold of three, the condition only says it is degraded, and every proxied request
/// succeeds meanwhile. A server that is gone (connection refused: a hard failure) still
/// turns unavailable at its next check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_discovery_never_flaps_and_a_dead_server_still_flips() {
    with_timeout(async {
        // Times shortened (upstream's 5 s budget to 300 ms) so that 20 checks take a few
        // seconds; the soft-failure threshold and the attempts are the defaults.
        let budget = Duration::from_millis(300);
        let config = AvailabilityConfig {
            probe_timeout: budget,
            resync_period: Duration::from_millis(200),
            degraded_recheck: Duration::from_millis(100),
            ..AvailabilityConfig::default()
        };
        let mut f = Fixture::start_with(config.clone()).await;
        // 1.5 times the budget, then 0.75 times: wide margins against a busy machine.
        let slow = budget.as_millis() as u64 * 3 / 2;
        f.backend.state.flapping_ms.store(slow, Ordering::SeqCst);
        f.apply_remote();
        f.available().await;
        let attempts = config.probe_attempts as u64;
        let mut degraded = None;
        let mut requests = 0;
        while f.backend.state.probes.load(Ordering::SeqCst) < 21 * attempts {
            if let Some(c) = condition(&f.registry, NAME) {
                assert_ne!(c.status, "False", "flipped: {c:?}");
                if c.message.starts_with("degraded: ") {
                    degraded = Some(c);
                }
            }
            let reply = f.gateway.get(RESOURCE_PATH).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            requests += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let degraded = degraded.expect("a degraded condition was seen");
        assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "Passed"));
        assert!(
            degraded.message.contains("of 3 checks in a row failed; requests still flow")
                && degraded.message.contains("(the budget is 300ms)"),
            "{}",
            degraded.message
        );
        assert!(requests > 20, "{requests} requests");
        f.metrics_eventually("the soft failures counted", |m| {
            m.contains(&format!(
                "aggregator_apiservice_failed_checks_total{{name=\"{NAME}\",cause=\"DiscoveryTimeout\"}}"
            ))
        })
        .await;

        // Gone: the connection ends or is refused, hard failures, so it flips at once.
        f.backend.stop().await;
        let stopped = Instant::now();
        let down =
            f.wait("Available=False", |c| c.status == "False").await;
        // A check in flight when it went sees the connection end; the next ones are
        // refused: both are hard failures.
        assert_eq!(down.reason, "FailedDiscoveryCheck", "{down:?}");
        let within = config.resync_period + budget;
        assert!(
            stopped.elapsed() <= within + Duration::from_secs(1),
            "flipped {:?} after the server went, one resync is {:?}",
            stopped.elapsed(),
            config.resync_period
        );
    })
    .await;
}
