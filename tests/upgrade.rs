//! Upgrade requests through the aggregator over real TLS on loopback: a WebSocket-style
//! upgrade is spliced end to end, and a backend that refuses the upgrade can never leave a
//! tunnel open (CVE-2018-1002105) nor have a non-101 success relayed (CVE-2020-8559).

#[path = "../examples/support/pki.rs"]
pub mod pki;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::TokioIo;
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{ClientCertificate, RustlsTransport};
use kube_aggregator::{Aggregator, Body, server};
use pki::{certs, provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower::Layer;

const T: Duration = Duration::from_secs(5);

struct Fixture {
    gateway: SocketAddr,
    client_tls: Arc<rustls::ClientConfig>,
    backend_requests: Arc<AtomicUsize>,
}

/// The backend: `/apis/stream.example.com/v1/echo` upgrades and answers "hello " + the
/// first 5 bytes; `.../switch` answers 101 whatever was asked; `.../refuse` answers 400
/// `some data`; `.../redirect` answers 302. It
/// counts the callers' requests; the aggregator's own (availability probe, discovery and
/// OpenAPI fetches) it answers as an extension server with no aggregated discovery and no
/// OpenAPI, uncounted.
async fn backend(
    request: Request<Incoming>,
    count: Arc<AtomicUsize>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    let user = request
        .headers()
        .get("x-remote-user")
        .map(HeaderValue::to_str);
    let user = user.and_then(Result::ok).unwrap_or("").to_owned();
    if user == "system:kube-aggregator" || user == "system:aggregator" {
        let res = if path == "/apis/stream.example.com/v1" {
            Response::new(Full::new(Bytes::from_static(
                br#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"stream.example.com/v1","resources":[]}"#,
            )))
        } else {
            let mut res = Response::new(Full::default());
            *res.status_mut() = StatusCode::NOT_FOUND;
            res
        };
        return Ok(res);
    }
    count.fetch_add(1, Ordering::SeqCst);
    if path.ends_with("/switch") {
        // A switch nobody asked for (the request carries no `Upgrade`).
        return Ok(switching_to_websocket());
    }
    if path.ends_with("/echo") && user == "alice" {
        let on_upgrade = hyper::upgrade::on(request);
        tokio::spawn(async move {
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let mut io = TokioIo::new(upgraded);
            let mut buf = [0u8; 5];
            if io.read_exact(&mut buf).await.is_ok() {
                let _ = io.write_all(&[b"hello ".as_slice(), &buf].concat()).await;
                let _ = io.shutdown().await;
            }
        });
        return Ok(switching_to_websocket());
    }
    let res = if path.ends_with("/redirect") {
        Response::builder()
            .status(302)
            .header("location", "https://example.com/there")
            .body(Full::default())
    } else {
        Response::builder()
            .status(400)
            .body(Full::new(Bytes::from_static(b"some data")))
    };
    Ok(res.unwrap())
}

/// A 101 switching to `websocket`.
fn switching_to_websocket() -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .body(Full::default())
        .unwrap()
}

async fn start() -> Fixture {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cluster_ca = pki::Ca::new("cluster-ca");
    let front_proxy_ca = pki::Ca::new("front-proxy-ca");
    let service_ca = pki::Ca::new("service-ca");

    // Backend: HTTP/1.1 with upgrades, requiring the front-proxy client certificate.
    let serving = service_ca.server("streamer.default.svc", &["streamer.default.svc"]);
    let backend_tls = serving.server_config(&[&front_proxy_ca.cert_pem], &[b"http/1.1"]);
    let acceptor = tokio_rustls::TlsAcceptor::from(backend_tls);
    let backend_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_addr = backend_listener.local_addr().unwrap();
    let backend_requests = Arc::new(AtomicUsize::new(0));
    let count = backend_requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = backend_listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let count = count.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |r| backend(r, count.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });

    // The gateway.
    let proxy_client = front_proxy_ca.client("front-proxy-client", &[]);
    let (exec, timer) = (Executor::tokio(), Timer::tokio());
    let proxy_cert = ClientCertificate::from_pem(
        proxy_client.cert_pem.as_bytes(),
        proxy_client.key_pem.as_bytes(),
    )
    .unwrap();
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("default", "streamer", 443, &backend_addr.to_string())
        .unwrap();
    let (aggregator, worker) = Aggregator::builder(RustlsTransport::new(proxy_cert, exec, timer))
        .resolver(resolver)
        .authenticator(X509Authenticator::from_pem(cluster_ca.cert_pem.as_bytes()).unwrap())
        .authorizer(AlwaysAllow)
        .build()
        .unwrap();
    let svc: ApiService = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "v1.stream.example.com"},
        "spec": {"service": {"namespace": "default", "name": "streamer"}, "group": "stream.example.com", "version": "v1",
                 "caBundle": base64_pem(&service_ca.cert_pem), "groupPriorityMinimum": 100, "versionPriority": 10}
    }))
    .unwrap();
    aggregator
        .registry()
        .apply(ApiServiceEvent::Applied(svc))
        .unwrap();
    tokio::spawn(worker);

    let gateway_serving = cluster_ca.server("gateway", &["127.0.0.1"]);
    let tls = server::server_config(
        gateway_serving.cert_pem.as_bytes(),
        gateway_serving.key_pem.as_bytes(),
        cluster_ca.cert_pem.as_bytes(),
        true,
    )
    .unwrap();
    let inner = tower::service_fn(|_: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::empty()))
    });
    let stack = aggregator.layer(inner);
    // The availability check passes before any test request.
    let registry = aggregator.registry();
    let name = "v1.stream.example.com";
    let available = registry.wait_until(|table| table.get(name).is_some_and(|r| r.is_available()));
    tokio::time::timeout(T, available)
        .await
        .expect("v1.stream.example.com Available");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = listener.local_addr().unwrap();
    tokio::spawn(server::serve_tls(
        listener,
        tls,
        stack,
        std::future::pending(),
    ));

    // A client certificate user, speaking HTTP/1.1 (upgrades cannot happen over HTTP/2).
    let alice = cluster_ca.client("alice", &["dev"]);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certs(&cluster_ca.cert_pem).remove(0)).unwrap();
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            certs(&alice.cert_pem),
            PrivateKeyDer::from_pem_slice(alice.key_pem.as_bytes()).unwrap(),
        )
        .unwrap();
    client_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Fixture {
        gateway,
        client_tls: Arc::new(client_tls),
        backend_requests,
    }
}

fn base64_pem(pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

async fn connect(f: &Fixture) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(f.gateway).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(f.client_tls.clone())
        .connect(name, tcp)
        .await
        .unwrap()
}

fn upgrade_request(path: &str) -> String {
    format!(
        "GET /apis/stream.example.com/v1/{path} HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Remote-User: system:admin\r\n\r\n"
    )
}

/// Reads until the end of the response head and returns it (and anything after it).
async fn read_head(io: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(T, io.read(&mut byte))
            .await
            .expect("response head in time")
            .unwrap();
        assert!(
            n > 0,
            "connection closed before the response head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    String::from_utf8(buf).unwrap()
}

/// A started fixture and a connection to its gateway.
async fn connected() -> (
    Fixture,
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) {
    let f = start().await;
    let io = connect(&f).await;
    (f, io)
}

/// Sends the upgrade request for `path` on `io`; the response head, asserted to start
/// with `status`.
async fn ask_upgrade(
    io: &mut (impl AsyncWriteExt + AsyncReadExt + Unpin),
    path: &str,
    status: u16,
) -> String {
    io.write_all(upgrade_request(path).as_bytes())
        .await
        .unwrap();
    let head = read_head(io).await;
    assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
    head
}

/// The next `len` bytes of `io`, within [`T`].
async fn read_body(io: &mut (impl AsyncReadExt + Unpin), len: usize) -> Vec<u8> {
    let mut body = vec![0u8; len];
    tokio::time::timeout(T, io.read_exact(&mut body))
        .await
        .expect("body in time")
        .unwrap();
    body
}

#[tokio::test]
async fn upgrade_is_spliced_with_the_callers_identity() {
    let (_f, mut io) = connected().await;
    ask_upgrade(&mut io, "echo", 101).await;
    io.write_all(b"world").await.unwrap();
    let mut echoed = Vec::new();
    tokio::time::timeout(T, io.read_to_end(&mut echoed))
        .await
        .expect("echo in time")
        .unwrap();
    // The backend only upgrades for `alice`: the spoofed X-Remote-User was replaced.
    assert_eq!(echoed, b"hello world");
}

#[tokio::test]
async fn refused_upgrade_is_relayed_and_the_connection_closed() {
    let (f, mut io) = connected().await;
    let head = ask_upgrade(&mut io, "refuse", 400).await;
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let mut rest = Vec::new();
    tokio::time::timeout(T, io.read_to_end(&mut rest))
        .await
        .expect("connection closes")
        .ok();
    assert!(
        rest.ends_with(b"some data"),
        "{:?}",
        String::from_utf8_lossy(&rest)
    );
    // A second request on the same socket goes nowhere: the socket is closed, never a tunnel.
    let before = f.backend_requests.load(Ordering::SeqCst);
    let _ = io
        .write_all(b"GET /apis/stream.example.com/v1/refuse HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut more = Vec::new();
    let _ = tokio::time::timeout(T, io.read_to_end(&mut more)).await;
    assert!(more.is_empty(), "{:?}", String::from_utf8_lossy(&more));
    // A request on a new connection, answered after the closed one was closed: had the
    // stray request been forwarded before the close, the backend would have counted it
    // first.
    let mut next = connect(&f).await;
    ask_upgrade(&mut next, "refuse", 400).await;
    assert_eq!(f.backend_requests.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn non_101_success_is_never_relayed() {
    let (_f, mut io) = connected().await;
    let head = ask_upgrade(&mut io, "redirect", 503).await;
    assert!(
        !head.to_ascii_lowercase().contains("example.com/there"),
        "{head}"
    );
    let expected = b"invalid upgrade response: status code 302\n";
    assert_eq!(read_body(&mut io, expected.len()).await, expected);
}

/// RFC 9110 §15.2.2: a server may not switch protocols unasked. A backend's 101 to a
/// plain request is answered 503 with the error Go's reverse proxy reports, never passed
/// on as a bare 101; the client's connection stays usable for the next request.
#[tokio::test]
async fn a_101_to_a_request_without_upgrade_is_503() {
    let (f, mut io) = connected().await;
    let plain = "GET /apis/stream.example.com/v1/switch HTTP/1.1\r\nHost: gateway\r\n\r\n";
    let expected = "backend tried to switch protocol \"websocket\" when \"\" was requested\n";
    for _ in 0..2 {
        io.write_all(plain.as_bytes()).await.unwrap();
        let head = read_head(&mut io).await;
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("upgrade"), "{head}");
        assert!(
            lower.contains(&format!("content-length: {}", expected.len())),
            "{head}"
        );
        let body = read_body(&mut io, expected.len()).await;
        assert_eq!(String::from_utf8_lossy(&body), expected);
    }
    assert_eq!(f.backend_requests.load(Ordering::SeqCst), 2);
}
