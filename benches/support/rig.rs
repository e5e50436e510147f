//! The benches' rig over real loopback mTLS: an extension server that requires the
//! front-proxy client certificate, the stack of `Aggregator::builder` in front of it
//! behind `server::serve_tls`, and a client connection of either protocol to either.
//! `proxy_tls` times requests through it; `allocations` counts what they allocate.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
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
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tower::Layer;

use crate::pki::{self, certs, key, provider};
use crate::support;

/// The path every request asks for: the metrics APIService's node list.
pub const PATH: &str = "/apis/metrics.k8s.io/v1beta1/nodes";

fn roots(ca_pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for c in certs(ca_pem) {
        roots.add(c).unwrap_or_else(|e| panic!("generated CA: {e}"));
    }
    roots
}

/// The extension server's TLS: requires a client certificate from `front_proxy_ca` and
/// offers `alpn`.
pub fn backend_acceptor(
    serving: &pki::Leaf,
    front_proxy_ca: &pki::Ca,
    alpn: &[&[u8]],
) -> tokio_rustls::TlsAcceptor {
    tokio_rustls::TlsAcceptor::from(serving.server_config(&[&front_proxy_ca.cert_pem], alpn))
}

/// The extension server: requires a client certificate from `front_proxy_ca`, offers
/// HTTP/2 and HTTP/1.1, answers every request with a small NodeMetricsList.
pub async fn start_backend(serving: &pki::Leaf, front_proxy_ca: &pki::Ca) -> SocketAddr {
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
                        support::answer_at(req.uri().path()).as_bytes(),
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

/// The aggregator from `Aggregator::builder`: x509 authentication, SubjectAccessReview
/// authorization, the `v1beta1.metrics.k8s.io` APIService on `kube-system/metrics-server`
/// at `backend`, its worker running (the APIService is Available once checked).
pub async fn start_gateway(
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
#[derive(Debug)]
pub enum Connection {
    /// HTTP/1.1.
    Http1(hyper::client::conn::http1::SendRequest<Empty<Bytes>>),
    /// HTTP/2.
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

impl Connection {
    /// Connects to `addr` (verified as `server_name` by `ca`) presenting `identity`.
    pub async fn open(
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
    pub async fn get_many(&self, authority: &str, headers: &[(&str, &str)], n: usize) -> usize {
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
    pub async fn get(&mut self, authority: &str, headers: &[(&str, &str)]) -> StatusCode {
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

/// One rig: its certificates, the extension server and the gateway in front of it.
#[derive(Debug)]
pub struct Rig {
    /// The CA of the gateway's serving certificate (the clients trust it).
    pub gateway_ca: pki::Ca,
    /// The CA of the users' client certificates (the gateway trusts it).
    pub client_ca: pki::Ca,
    /// The CA of the front-proxy client certificate (the extension server trusts it).
    pub front_proxy_ca: pki::Ca,
    /// The CA of the extension server's serving certificate (the APIService's caBundle).
    pub serving_ca: pki::Ca,
    /// The extension server's serving certificate, `metrics-server.kube-system.svc`.
    pub backend_serving: pki::Leaf,
    /// The gateway's serving certificate, `localhost`.
    pub gateway_serving: pki::Leaf,
    /// The front-proxy client certificate the gateway presents to the extension server.
    pub front_proxy: pki::Leaf,
    /// The user `alice` in `system:masters`.
    pub user: pki::Leaf,
    /// Where the extension server listens.
    pub backend: SocketAddr,
    /// Where the gateway listens.
    pub gateway: SocketAddr,
    /// The gateway's proxy client certificate, to rotate.
    pub proxy_cert: ClientCertificate,
}

/// The headers the gateway adds for `alice`, for the requests sent straight to the backend.
pub const DIRECT_HEADERS: [(&str, &str); 2] = [
    ("x-remote-user", "alice"),
    ("x-remote-group", "system:masters"),
];

impl Rig {
    /// New certificates, the extension server and the gateway, its APIService Available.
    pub async fn start() -> Rig {
        let gateway_ca = pki::Ca::new("gateway-ca");
        let client_ca = pki::Ca::new("client-ca");
        let front_proxy_ca = pki::Ca::new("front-proxy-ca");
        let serving_ca = pki::Ca::new("serving-ca");
        let backend_serving =
            serving_ca.server("metrics-server", &["metrics-server.kube-system.svc"]);
        let gateway_serving = gateway_ca.server("gateway", &["localhost"]);
        let front_proxy = front_proxy_ca.client("front-proxy-client", &[]);
        let user = client_ca.client("alice", &["system:masters"]);
        let backend = start_backend(&backend_serving, &front_proxy_ca).await;
        let (gateway, proxy_cert) = start_gateway(
            &gateway_serving,
            &client_ca,
            &serving_ca,
            &front_proxy,
            backend,
        )
        .await;
        Rig {
            gateway_ca,
            client_ca,
            front_proxy_ca,
            serving_ca,
            backend_serving,
            gateway_serving,
            front_proxy,
            user,
            backend,
            gateway,
            proxy_cert,
        }
    }

    /// A connection straight to the extension server with the front-proxy certificate,
    /// and one to the gateway as `alice`, both of one protocol.
    pub async fn connections(&self, http2: bool) -> (Connection, Connection) {
        let name = "metrics-server.kube-system.svc";
        let direct = Connection::open(
            self.backend,
            name,
            &self.serving_ca,
            &self.front_proxy,
            http2,
        );
        let via = Connection::open(
            self.gateway,
            "localhost",
            &self.gateway_ca,
            &self.user,
            http2,
        );
        (direct.await, via.await)
    }
}
