//! The fixture of the proxy tests: a throw-away PKI, an HTTPS extension server that
//! requires the front-proxy client certificate and reports each request it receives, a
//! gateway built with `Aggregator::builder` behind `server::serve_tls`, and a client that
//! speaks HTTP/1.1 or HTTP/2 over its own TLS connection per request. Everything listens
//! on 127.0.0.1 and every network step is bounded by [`WAIT`].
//!
//! The gateway's worker runs, as in production: it checks the APIServices' availability
//! and fetches their discovery and OpenAPI documents from the extension servers. Those
//! requests carry the aggregator's own identities (`system:kube-aggregator`,
//! `system:aggregator`); the extension servers here answer them themselves (a probe or a
//! legacy discovery document passes, `/apis` and the OpenAPI paths are 404) and report
//! only the callers' requests, which are what the tests look at.

#[path = "../../examples/support/pki.rs"]
pub mod pki;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version, header};
use http_body::Frame;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::{AuthenticateFuture, Authenticator, UserInfo};
use kube_aggregator::authz::{AlwaysAllow, Authorizer};
use kube_aggregator::availability::{AvailabilityConfig, ServiceResolver, StaticServiceResolver};
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, RustlsTransport};
use kube_aggregator::{Aggregator, AggregatorBuilder, Body, Registry, server};
use pki::{certs, key, provider};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tower::Layer;

/// The widgets APIService's group.
pub const GROUP: &str = "widgets.example.io";
const VERSION: &str = "v1alpha1";
/// The widgets APIService's name.
pub const APISERVICE: &str = "v1alpha1.widgets.example.io";
/// The APIService's group/version prefix.
pub const BASE: &str = "/apis/widgets.example.io/v1alpha1";
/// Every network step gets at most this long, so a broken proxy fails fast.
pub const WAIT: Duration = Duration::from_secs(5);

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {WAIT:?}"))
}

// ---------------------------------------------------------------------------------------
// PKI
// ---------------------------------------------------------------------------------------

/// One CA per trust domain, as a real cluster keeps them apart (B06).
#[derive(Debug)]
pub struct Pki {
    /// Signs the gateway's serving certificate; clients trust it.
    pub gateway_ca: pki::Ca,
    /// Signs user certificates; the gateway's x509 authenticator trusts it.
    pub client_ca: pki::Ca,
    /// Signs the gateway's proxy client certificate; the backend requires it.
    pub front_proxy_ca: pki::Ca,
    /// Signs the backend's serving certificate; it is the APIService's caBundle.
    pub serving_ca: pki::Ca,
}

impl Pki {
    /// Four new CAs.
    pub fn new() -> Pki {
        Pki {
            gateway_ca: pki::Ca::new("gateway-ca"),
            client_ca: pki::Ca::new("client-ca"),
            front_proxy_ca: pki::Ca::new("front-proxy-ca"),
            serving_ca: pki::Ca::new("serving-ca"),
        }
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

fn roots(ca_pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for c in certs(ca_pem) {
        roots.add(c).expect("generated CA is a trust anchor");
    }
    roots
}

// ---------------------------------------------------------------------------------------
// The extension server
// ---------------------------------------------------------------------------------------

/// The TLS of an extension server: serving certificate for `backend.test-ns.svc` from the
/// serving CA, a client certificate from the front-proxy CA required, ALPN `alpn`.
pub fn backend_tls(pki: &Pki, alpn: &[&[u8]]) -> Arc<ServerConfig> {
    backend_tls_for(pki, alpn, "backend.test-ns.svc")
}

/// As [`backend_tls`], serving `server_name` (`<service>.<namespace>.svc`).
pub fn backend_tls_for(pki: &Pki, alpn: &[&[u8]], server_name: &str) -> Arc<ServerConfig> {
    let leaf = pki.serving_ca.server("backend", &[server_name]);
    leaf.server_config(&[&pki.front_proxy_ca.cert_pem], alpn)
}

/// What the backend received: one request.
#[derive(Debug)]
pub struct Seen {
    /// The request's method.
    pub method: Method,
    /// The request's URI, as the backend saw it.
    pub uri: Uri,
    /// The HTTP version it came in.
    pub version: Version,
    /// Its headers.
    pub headers: HeaderMap,
}

impl Seen {
    /// What a request's head says.
    pub fn from_parts(parts: http::request::Parts) -> Seen {
        Seen {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
        }
    }

    /// Every value of `name`, in arrival order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().expect("ASCII header value"))
            .collect()
    }

    /// The one value of `name`, if any; more than one fails the test.
    pub fn one(&self, name: &str) -> Option<&str> {
        match self.all(name).as_slice() {
            [] => None,
            [v] => Some(v),
            many => panic!("{name}: expected one value, got {many:?}"),
        }
    }

    /// The target host: `Host` over HTTP/1.1, `:authority` over HTTP/2.
    pub fn host(&self) -> String {
        match self.version {
            Version::HTTP_2 => self.uri.authority().map(ToString::to_string),
            _ => self.one("host").map(str::to_owned),
        }
        .expect("the request names its host")
    }

    /// The path and query, as sent.
    pub fn path_and_query(&self) -> &str {
        self.uri.path_and_query().map_or("", |pq| pq.as_str())
    }

    /// A request of the aggregator itself (availability probe, discovery or OpenAPI
    /// fetch), not of a caller.
    pub fn is_background(&self) -> bool {
        matches!(
            self.one("x-remote-user"),
            Some("system:kube-aggregator" | "system:aggregator")
        )
    }

    /// An availability probe: the aggregator's `GET` of a group-version, sent with no
    /// `Accept` (discovery's legacy fetch of the same path asks for JSON).
    pub fn is_availability_probe(&self) -> bool {
        self.is_background() && !self.headers.contains_key(header::ACCEPT)
    }

    /// Header names (hyper lower-cases them), sorted, without duplicates.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.headers.keys().map(|n| n.as_str()).collect();
        names.sort_unstable();
        names
    }
}

type Handler = Arc<dyn Fn(&Seen) -> Response<Body> + Send + Sync>;

/// What an extension server answers a caller's request with.
pub trait Answer: Fn(&Seen) -> Response<Body> + Send + Sync + 'static {}

impl<F: Fn(&Seen) -> Response<Body> + Send + Sync + 'static> Answer for F {}

/// ALPN offers of the backend.
pub const H2_AND_HTTP11: &[&[u8]] = &[b"h2", b"http/1.1"];
/// The ALPN offer of a backend without HTTP/2.
pub const HTTP11_ONLY: &[&[u8]] = &[b"http/1.1"];

/// What an extension server answers itself instead of reporting: every request of the
/// aggregator ([`Seen::is_background`]), or only its availability probes (for the
/// discovery tests, which look at the fetches).
#[derive(Debug, Clone, Copy)]
pub enum Answers {
    /// Every request of the aggregator.
    Background,
    /// Only its availability probes.
    Probes,
}

impl Answers {
    /// The answer to `seen` when it is one of these, as an extension server answers:
    /// its group-versions pass the probe and serve an empty legacy document; it has no
    /// aggregated `/apis` and no OpenAPI.
    pub fn answer(self, seen: &Seen) -> Option<Response<Body>> {
        let ours = match self {
            Answers::Background => seen.is_background(),
            Answers::Probes => seen.is_availability_probe(),
        };
        if !ours {
            return None;
        }
        let path = seen.uri.path();
        Some(if path == "/apis" || path.starts_with("/openapi/") {
            respond(404, "404 page not found\n")
        } else {
            let group_version = path
                .trim_start_matches("/apis/")
                .trim_start_matches("/api/");
            let mut res = Response::new(Body::full(format!(
                r#"{{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"{group_version}","resources":[]}}"#
            )));
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            res
        })
    }
}

/// An HTTPS extension server on 127.0.0.1 that requires a client certificate from the
/// front-proxy CA, reports each request of a caller and counts the TCP connections that
/// carried one (the aggregator's own requests are answered, not reported: [`Answers`]).
#[derive(Debug)]
pub struct Backend {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: mpsc::UnboundedReceiver<Seen>,
    connections: Arc<AtomicUsize>,
    /// Every TLS connection accepted, the aggregator's own included.
    accepted: Arc<AtomicUsize>,
}

impl Backend {
    /// Starts a backend offering `alpn` that answers callers with `handler`.
    pub async fn start(pki: &Pki, alpn: &[&[u8]], handler: impl Answer) -> Backend {
        Backend::start_with(pki, alpn, handler, false, Answers::Background).await
    }

    /// As [`Backend::start`], reporting the aggregator's discovery and OpenAPI fetches too
    /// (and passing them to `handler`); only its availability probes are answered here.
    pub async fn start_seeing_fetches(pki: &Pki, alpn: &[&[u8]], handler: impl Answer) -> Backend {
        Backend::start_with(pki, alpn, handler, false, Answers::Probes).await
    }

    /// As [`Backend::start`], reading each request body to its end before answering (the
    /// handler's answer when the body arrived whole, a 400 when it did not).
    pub async fn start_reading_bodies(pki: &Pki, alpn: &[&[u8]], handler: impl Answer) -> Backend {
        Backend::start_with(pki, alpn, handler, true, Answers::Background).await
    }

    /// As [`Backend::start`], for Service `<name>.<namespace>.svc` (`server_name`), with
    /// the aggregator's requests answered as `answers` says.
    pub async fn start_for(
        pki: &Pki,
        server_name: &str,
        answers: Answers,
        handler: impl Answer,
    ) -> Backend {
        let config = backend_tls_for(pki, H2_AND_HTTP11, server_name);
        Backend::start_on(config, handler, false, answers).await
    }

    async fn start_with(
        pki: &Pki,
        alpn: &[&[u8]],
        handler: impl Answer,
        read_bodies: bool,
        answers: Answers,
    ) -> Backend {
        Backend::start_on(backend_tls(pki, alpn), handler, read_bodies, answers).await
    }

    async fn start_on(
        config: Arc<ServerConfig>,
        handler: impl Answer,
        read_bodies: bool,
        answers: Answers,
    ) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let addr = listener.local_addr().expect("backend address");
        let (tx, seen) = mpsc::unbounded_channel();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        tokio::spawn(backend_accept_loop(
            listener,
            tokio_rustls::TlsAcceptor::from(config),
            Arc::new(handler),
            tx,
            (connections.clone(), accepted.clone()),
            read_bodies,
            answers,
        ));
        Backend {
            addr,
            seen,
            connections,
            accepted,
        }
    }

    /// The next request of a caller, waiting at most [`WAIT`].
    pub async fn next_request(&mut self) -> Seen {
        within("a request at the backend", self.seen.recv())
            .await
            .expect("the backend is running")
    }

    /// The next request for `path`, passing over the others (the aggregator's discovery and
    /// OpenAPI fetches of one Service run side by side, so their order is not fixed).
    pub async fn next_request_to(&mut self, path: &str) -> Seen {
        loop {
            let seen = self.next_request().await;
            if seen.uri.path() == path {
                return seen;
            }
        }
    }

    /// A request already received and not yet taken, if any.
    pub fn try_next(&mut self) -> Option<Seen> {
        self.seen.try_recv().ok()
    }

    /// The TCP connections that carried a caller's request so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Every TLS connection accepted so far, the aggregator's own included.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// No request of a caller reached the backend, and no connection carried one.
    pub fn assert_untouched(&mut self) {
        assert_eq!(
            self.connections(),
            0,
            "the backend accepted a connection for a caller"
        );
        if let Ok(seen) = self.seen.try_recv() {
            panic!("the backend received {} {}", seen.method, seen.uri);
        }
    }
}

async fn backend_accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    handler: Handler,
    tx: mpsc::UnboundedSender<Seen>,
    (connections, accepted): (Arc<AtomicUsize>, Arc<AtomicUsize>),
    read_bodies: bool,
    answers: Answers,
) {
    while let Ok((tcp, _)) = listener.accept().await {
        let (acceptor, handler, tx) = (acceptor.clone(), handler.clone(), tx.clone());
        let (connections, accepted) = (connections.clone(), accepted.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            accepted.fetch_add(1, Ordering::SeqCst);
            // Counted when it carries its first request of a caller.
            let counted = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (handler, tx) = (handler.clone(), tx.clone());
                let (connections, counted) = (connections.clone(), counted.clone());
                async move {
                    let (parts, body) = req.into_parts();
                    let seen = Seen::from_parts(parts);
                    if let Some(res) = answers.answer(&seen) {
                        return Ok::<_, Infallible>(res);
                    }
                    if !counted.swap(true, Ordering::SeqCst) {
                        connections.fetch_add(1, Ordering::SeqCst);
                    }
                    let whole = !read_bodies || body.collect().await.is_ok();
                    let res = if whole {
                        handler(&seen)
                    } else {
                        respond(400, "the body did not arrive whole")
                    };
                    let _ = tx.send(seen);
                    Ok::<_, Infallible>(res)
                }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        });
    }
}

/// An answer that may take its time: the backend calls it per request and awaits it.
pub type AsyncHandler =
    Arc<dyn Fn(Seen) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync>;

/// An HTTPS extension server like [`Backend`] whose handler is async (it may never
/// answer); counts each request of a caller as it arrives and the handler futures
/// dropped before they finished (a cancelled stream or closed connection). The
/// aggregator's own requests are answered as [`Answers::Background`] says.
#[derive(Debug)]
pub struct AsyncBackend {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Requests of callers that arrived.
    pub arrived: Arc<AtomicUsize>,
    /// Handler futures dropped before they finished.
    pub cancelled: Arc<AtomicUsize>,
}

impl AsyncBackend {
    /// Starts a backend offering `alpn` whose callers get `handler`'s answer.
    pub async fn start(pki: &Pki, alpn: &[&[u8]], handler: AsyncHandler) -> AsyncBackend {
        let config = backend_tls(pki, alpn);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let addr = listener.local_addr().expect("backend address");
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (arrived, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, c) = (arrived.clone(), cancelled.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, handler, a, c) =
                    (acceptor.clone(), handler.clone(), a.clone(), c.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (handler, a, c) = (handler.clone(), a.clone(), c.clone());
                        async move {
                            let (parts, _body) = req.into_parts();
                            let seen = Seen::from_parts(parts);
                            if let Some(res) = Answers::Background.answer(&seen) {
                                return Ok::<_, Infallible>(res);
                            }
                            a.fetch_add(1, Ordering::SeqCst);
                            // Counts a drop before the answer: the gateway let go.
                            struct Guard(Option<Arc<AtomicUsize>>);
                            impl Drop for Guard {
                                fn drop(&mut self) {
                                    if let Some(c) = self.0.take() {
                                        c.fetch_add(1, Ordering::SeqCst);
                                    }
                                }
                            }
                            let mut guard = Guard(Some(c));
                            let res = handler(seen).await;
                            guard.0 = None;
                            Ok::<_, Infallible>(res)
                        }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        AsyncBackend {
            addr,
            arrived,
            cancelled,
        }
    }
}

/// The widgets APIService's twin, `v1.gadgets.example.io`, served by the same Service.
pub fn gadgets_apiservice(pki: &Pki) -> ApiService {
    let mut svc = widgets_apiservice(pki);
    svc.metadata.name = "v1.gadgets.example.io".into();
    svc.spec.group = "gadgets.example.io".into();
    svc.spec.version = "v1".into();
    svc
}

/// The proxy client certificate the gateway presents to extension servers.
pub fn proxy_identity(pki: &Pki) -> ClientCertificate {
    let proxy_leaf = pki.front_proxy_ca.client("front-proxy-client", &[]);
    ClientCertificate::from_pem(
        proxy_leaf.cert_pem.as_bytes(),
        proxy_leaf.key_pem.as_bytes(),
    )
    .expect("proxy client certificate")
}

/// A gateway's builder: extension servers reached over rustls with the front-proxy
/// identity, Services resolved by `resolver`, and a worker that checks each APIService
/// once at start and then not again within a test's lifetime (every period is an hour),
/// so a condition a test sets stays as set.
pub fn builder_with(pki: &Pki, resolver: impl ServiceResolver) -> AggregatorBuilder {
    let hour = Duration::from_secs(3600);
    Aggregator::builder(RustlsTransport::new(
        proxy_identity(pki),
        Executor::tokio(),
        Timer::tokio(),
    ))
    .resolver(resolver)
    .availability(AvailabilityConfig {
        resync_period: hour,
        backoff_base: hour,
        backoff_max: hour,
        ..AvailabilityConfig::default()
    })
}

/// [`builder_with`] a resolver that sends `test-ns/backend:443` to `service_addr`.
pub fn builder(pki: &Pki, service_addr: SocketAddr) -> AggregatorBuilder {
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("test-ns", "backend", 443, &service_addr.to_string())
        .expect("resolver entry");
    builder_with(pki, resolver)
}

/// Builds the gateway, registers `apiservices`, runs its worker, serves it in front of
/// `host` over TLS ([`serve_gateway`]) and waits until each APIService's first
/// availability check is done (`Available=True` when its backend answers the probe).
pub async fn start_gateway<S, RB>(
    pki: &Pki,
    builder: AggregatorBuilder,
    apiservices: Vec<ApiService>,
    host: S,
) -> (SocketAddr, Aggregator)
where
    S: tower::Service<Request<Body>, Response = Response<RB>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    RB: http_body::Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (aggregator, worker) = builder.build().expect("the gateway's stack");
    let names: Vec<String> = apiservices
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();
    aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(apiservices))
        .expect("valid APIServices");
    tokio::spawn(worker);
    let addr = serve_gateway(pki, aggregator.layer(host)).await;
    let registry = aggregator.registry();
    let checked = registry.wait_until(|table| {
        names.iter().all(|name| {
            let route = table.get(name);
            route.is_some_and(|r| r.apiservice.available_condition().is_some())
        })
    });
    within("the first availability checks", checked).await;
    // The discovery manager's first fetches too, so that no fetch of its own races the
    // test's requests for a backend connection.
    within(
        "the first discovery fetches",
        aggregator.discovery().synced(),
    )
    .await;
    (addr, aggregator)
}

/// The host's own handlers: 404 naming the request, so a test can tell they answered.
pub fn host() -> tower::util::BoxCloneSyncService<Request<Body>, Response<Body>, Infallible> {
    tower::util::BoxCloneSyncService::new(tower::service_fn(|req: Request<Body>| async move {
        let mut res = Response::new(Body::full(format!(
            "inner: {} {}",
            req.method(),
            req.uri().path()
        )));
        *res.status_mut() = StatusCode::NOT_FOUND;
        Ok::<_, Infallible>(res)
    }))
}

/// Serves `service` over TLS on 127.0.0.1 with the gateway's certificate; client
/// certificates from the client CA are asked for.
pub async fn serve_gateway(pki: &Pki, service: impl server::Handler) -> SocketAddr {
    let (listener, addr) = listen().await;
    tokio::spawn(server::serve_tls(
        listener,
        gateway_tls(pki),
        service,
        std::future::pending(),
    ));
    addr
}

/// The gateway's TLS server config: a certificate for `localhost` from the gateway CA,
/// client certificates from the client CA asked for, HTTP/2 and HTTP/1.1 offered.
pub fn gateway_tls(pki: &Pki) -> Arc<ServerConfig> {
    let leaf = pki.gateway_ca.server("gateway", &["localhost"]);
    server_tls(&leaf, &pki.client_ca.cert_pem)
}

/// A TLS server config serving `leaf`, asking for client certificates from
/// `client_ca_pem` (none asked for when it is empty), HTTP/2 and HTTP/1.1 offered.
pub fn server_tls(leaf: &pki::Leaf, client_ca_pem: &str) -> Arc<ServerConfig> {
    server::server_config(
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        client_ca_pem.as_bytes(),
        true,
    )
    .expect("TLS server config")
}

/// A listener on 127.0.0.1, on a free port, and its address.
pub async fn listen() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    (listener, addr)
}

/// A response of `status` with `body`.
pub fn respond(status: u16, body: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::full(body));
    *res.status_mut() = StatusCode::from_u16(status).expect("valid status");
    res
}

/// A body written frame by frame as the test sends chunks; it ends when the sender is
/// dropped.
pub fn channel_body(mut rx: mpsc::UnboundedReceiver<Bytes>) -> Body {
    let chunks = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|b| b.map(|b| Ok::<_, Infallible>(Frame::data(b))))
    });
    Body::new(http_body_util::StreamBody::new(chunks))
}

// ---------------------------------------------------------------------------------------
// The gateway
// ---------------------------------------------------------------------------------------

/// A kube-apiserver-like host: the stack of `Aggregator::builder` (kube-apiserver's
/// filter chain, then the aggregator) in front of the host's own handlers ([`host`]).
#[derive(Debug)]
pub struct Gateway {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its APIService registry.
    pub registry: Registry,
}

impl Gateway {
    /// Starts a gateway whose `test-ns/backend:443` Service resolves to `service_addr`,
    /// with the widgets APIService registered and checked once.
    pub async fn start(
        pki: &Pki,
        authenticator: impl Authenticator,
        service_addr: SocketAddr,
    ) -> Gateway {
        Gateway::start_with_authorizer(pki, authenticator, AlwaysAllow, service_addr).await
    }

    /// As [`Gateway::start`], with `authorizer` deciding requests.
    pub async fn start_with_authorizer(
        pki: &Pki,
        authenticator: impl Authenticator,
        authorizer: impl Authorizer,
        service_addr: SocketAddr,
    ) -> Gateway {
        let builder = builder(pki, service_addr)
            .authenticator(authenticator)
            .authorizer(authorizer);
        let (addr, aggregator) =
            start_gateway(pki, builder, vec![widgets_apiservice(pki)], host()).await;
        Gateway {
            addr,
            registry: aggregator.registry().clone(),
        }
    }
}

/// `v1alpha1.widgets.example.io` served by `test-ns/backend:443`, verified with the
/// serving CA.
pub fn widgets_apiservice(pki: &Pki) -> ApiService {
    ApiService::remote(GROUP, VERSION, "test-ns", "backend")
        .priorities(1000, 15)
        .ca_bundle(pki.serving_ca.cert_pem.as_bytes())
}

/// Vouches for every request as one fixed user, as a token or OIDC authenticator would.
#[derive(Debug, Clone)]
pub struct FixedUser(UserInfo);

impl Authenticator for FixedUser {
    fn authenticate(&self, _parts: &http::request::Parts) -> AuthenticateFuture {
        Box::pin(std::future::ready(Ok(Some(self.0.clone()))))
    }
}

/// A user exercising every identity header: a UID, a group containing a comma (which must
/// never be joined with or split from its neighbours) and extra keys needing escapes.
pub fn alice() -> FixedUser {
    FixedUser(UserInfo {
        name: "alice".into(),
        uid: "6b60d791-1af9-4513-92e5-e4252a1e0a78".into(),
        groups: vec!["one".into(), "two".into(), "a,b".into()],
        extra: BTreeMap::from([
            ("example.com/two".into(), vec!["x".into(), "y".into()]),
            ("scopes".into(), vec!["s".into()]),
        ]),
    })
}

/// A backend and a gateway in front of it.
#[derive(Debug)]
pub struct Fixture {
    /// The CAs of both.
    pub pki: Pki,
    /// The extension server.
    pub backend: Backend,
    /// The gateway in front of it.
    pub gateway: Gateway,
}

impl Fixture {
    /// Starts a backend answering with `handler` and a gateway authenticating callers
    /// with `authenticator` in front of it.
    pub async fn start(
        alpn: &[&[u8]],
        authenticator: impl Authenticator + Clone,
        handler: impl Answer,
    ) -> Fixture {
        let pki = Pki::new();
        let backend = Backend::start(&pki, alpn, handler).await;
        let gateway = Gateway::start(&pki, authenticator, backend.addr).await;
        Fixture {
            pki,
            backend,
            gateway,
        }
    }

    /// A client presenting no certificate.
    pub fn client(&self, protocol: Protocol) -> Client {
        Client::new(&self.pki, self.gateway.addr, None, protocol)
    }
}

// ---------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------

/// The HTTP version a [`Client`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (ALPN `http/1.1`).
    Http1,
    /// HTTP/2 (ALPN `h2`).
    Http2,
}

/// One new TLS connection per request, so each request's protocol is exactly the one
/// asked for.
pub struct Client {
    addr: SocketAddr,
    tls: tokio_rustls::TlsConnector,
    protocol: Protocol,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.addr)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

/// A request body a client sends.
pub trait RequestBody:
    http_body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
    + Send
    + Unpin
    + 'static
{
}

impl<B> RequestBody for B where
    B: http_body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + Unpin
        + 'static
{
}

/// A complete response.
#[derive(Debug)]
pub struct Reply {
    /// The status.
    pub status: StatusCode,
    /// The HTTP version it came in.
    pub version: Version,
    /// The headers.
    pub headers: HeaderMap,
    /// The body, UTF-8.
    pub body: String,
}

impl Reply {
    /// `res` with its body read whole (within [`WAIT`]).
    pub async fn read(res: Response<Incoming>) -> Reply {
        let (parts, body) = res.into_parts();
        let body = within("response body", body.collect())
            .await
            .expect("the response body arrives whole")
            .to_bytes();
        Reply {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body: String::from_utf8(body.to_vec()).expect("UTF-8 body"),
        }
    }
}

impl Client {
    /// A client of the gateway at `addr` trusting `pki`'s gateway CA, presenting `cert`
    /// when given.
    pub fn new(
        pki: &Pki,
        addr: SocketAddr,
        cert: Option<&pki::Leaf>,
        protocol: Protocol,
    ) -> Client {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots(&pki.gateway_ca.cert_pem));
        let mut config = match cert {
            Some(leaf) => builder
                .with_client_auth_cert(certs(&leaf.cert_pem), key(&leaf.key_pem))
                .expect("client certificate"),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = match protocol {
            Protocol::Http1 => vec![b"http/1.1".to_vec()],
            Protocol::Http2 => vec![b"h2".to_vec()],
        };
        Client {
            addr,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            protocol,
        }
    }

    /// A new TLS connection to the gateway, as `localhost`.
    pub async fn connect(&self) -> tokio_rustls::client::TlsStream<TcpStream> {
        let tcp = within("connect to the gateway", TcpStream::connect(self.addr))
            .await
            .expect("the gateway accepts connections");
        let server_name = ServerName::try_from("localhost").expect("valid server name");
        within(
            "TLS handshake with the gateway",
            self.tls.connect(server_name, tcp),
        )
        .await
        .expect("TLS handshake with the gateway")
    }

    /// Sends `GET path_and_query` with `headers` and returns the response head; the body
    /// streams.
    pub async fn open(&self, path_and_query: &str, headers: &[(&str, &str)]) -> Response<Incoming> {
        let mut req = self.request(Method::GET, path_and_query);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let req = req.body(Empty::<Bytes>::new()).expect("valid request");
        self.exchange(req).await.expect("the gateway answers")
    }

    /// A request of `method` for `path_and_query` in this client's protocol: an absolute
    /// URI on HTTP/2, a `Host` header on HTTP/1.1.
    fn request(&self, method: Method, path_and_query: &str) -> http::request::Builder {
        let host = format!("localhost:{}", self.addr.port());
        match self.protocol {
            Protocol::Http1 => Request::builder()
                .method(method)
                .uri(path_and_query)
                .header(header::HOST, &host),
            Protocol::Http2 => Request::builder()
                .method(method)
                .uri(format!("https://{host}{path_and_query}")),
        }
    }

    /// Sends `req` on a new connection (checking that the gateway negotiated this client's
    /// protocol) and returns the response head as it arrives (within [`WAIT`]).
    async fn exchange(&self, req: Request<impl RequestBody>) -> hyper::Result<Response<Incoming>> {
        let tls = self.connect().await;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let io = TokioIo::new(tls);
        match self.protocol {
            Protocol::Http1 => {
                assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
                let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
                    .await
                    .expect("HTTP/1.1 handshake");
                tokio::spawn(conn);
                within("response head", sender.send_request(req)).await
            }
            Protocol::Http2 => {
                let negotiated = Some(&b"h2"[..]);
                assert_eq!(alpn.as_deref(), negotiated, "the gateway negotiates h2");
                let (mut sender, conn) =
                    hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                        .await
                        .expect("HTTP/2 handshake");
                tokio::spawn(conn);
                within("response head", sender.send_request(req)).await
            }
        }
    }

    /// Sends `GET path` over a new HTTP/2 connection and returns the response status, the
    /// request sender (kept alive so the client does not close the connection itself) and
    /// the task driving the connection, which ends when the server closes it.
    pub async fn h2_status_and_connection(
        &self,
        path: &str,
    ) -> (
        StatusCode,
        hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
        tokio::task::JoinHandle<Result<(), hyper::Error>>,
    ) {
        let tls = self.connect().await;
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .expect("HTTP/2 handshake");
        let driver = tokio::spawn(conn);
        let host = format!("localhost:{}", self.addr.port());
        let req = Request::get(format!("https://{host}{path}"))
            .body(Empty::<Bytes>::new())
            .expect("valid request");
        let res = within("response head", sender.send_request(req))
            .await
            .expect("the gateway answers");
        (res.status(), sender, driver)
    }

    /// `GET path_and_query` with `headers`, read whole.
    pub async fn get_with(&self, path_and_query: &str, headers: &[(&str, &str)]) -> Reply {
        let res = self.open(path_and_query, headers).await;
        Reply::read(res).await
    }

    /// Sends `method path_and_query` with `body` (as JSON, possibly still streaming) on a
    /// new connection and returns the response head as it arrives (within [`WAIT`]).
    pub async fn send_body<B: RequestBody>(
        &self,
        method: Method,
        path_and_query: &str,
        body: B,
    ) -> hyper::Result<Response<Incoming>> {
        self.send_typed(method, path_and_query, "application/json", body)
            .await
    }

    /// [`Client::send_body`] with `content_type` for the body.
    pub async fn send_typed<B: RequestBody>(
        &self,
        method: Method,
        path_and_query: &str,
        content_type: &str,
        body: B,
    ) -> hyper::Result<Response<Incoming>> {
        let req = self
            .request(method, path_and_query)
            .header(header::CONTENT_TYPE, content_type)
            .body(body)
            .expect("valid request");
        self.exchange(req).await
    }

    /// `GET path_and_query`, read whole.
    pub async fn get(&self, path_and_query: &str) -> Reply {
        self.get_with(path_and_query, &[]).await
    }

    /// Sends `method path_and_query` with `body` (as JSON) on a new connection.
    pub async fn send(&self, method: Method, path_and_query: &str, body: Bytes) -> Reply {
        let res = self
            .send_body(method, path_and_query, http_body_util::Full::new(body))
            .await
            .expect("the gateway answers");
        Reply::read(res).await
    }
}

/// Reads a streaming body line by line, each read bounded by [`WAIT`].
#[derive(Debug)]
pub struct Lines {
    body: Incoming,
    buf: Vec<u8>,
}

impl Lines {
    /// Lines of `body`.
    pub fn new(body: Incoming) -> Lines {
        Lines {
            body,
            buf: Vec::new(),
        }
    }

    /// The next line, with its `\n`; `None` at the end of the body.
    pub async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(String::from_utf8(line).expect("UTF-8 line"));
            }
            match within("the next body frame", self.body.frame()).await {
                Some(frame) => {
                    if let Ok(data) = frame.expect("body frame").into_data() {
                        self.buf.extend_from_slice(&data);
                    }
                }
                None => {
                    assert!(self.buf.is_empty(), "unterminated line {:?}", self.buf);
                    return None;
                }
            }
        }
    }
}

/// The plain backend answer: 200 `some data` to everything.
pub fn ok(_: &Seen) -> Response<Body> {
    respond(200, "some data")
}

/// A timer on tokio's clock that can be moved ahead by hand: `now` is tokio's now plus
/// every [`JumpClock::advance`] so far, and sleeps measure against that `now`. For what
/// reads the injected clock only to compare times (TTLs), so a test moves past a TTL
/// instead of waiting it out.
#[derive(Debug, Clone, Default)]
pub struct JumpClock(Arc<std::sync::Mutex<Duration>>);

impl JumpClock {
    /// Moves the clock `by` ahead.
    pub fn advance(&self, by: Duration) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += by;
    }

    /// A [`Timer`] on this clock.
    pub fn timer(&self) -> Timer {
        Timer::new(self.clone())
    }
}

impl hyper::rt::Timer for JumpClock {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        hyper_util::rt::TokioTimer::new().sleep(duration)
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep(deadline.saturating_duration_since(self.now()))
    }

    fn now(&self) -> std::time::Instant {
        let ahead = *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tokio::time::Instant::now().into_std() + ahead
    }
}
