//! Hot rotation without restart, under load, over real TLS on 127.0.0.1 (docs/known-failures.md
//! B27), on the gateway example as an operator runs it: the serving certificate,
//! `--client-ca-file`, `--requestheader-client-ca-file` and the proxy client certificate
//! are re-read from their files when they change (`--certificate-reload-interval`, on
//! `reload::watch_files`), and an APIService's `caBundle` from its manifest in
//! `--apiservice-dir`. Each rotation is checked on a new connection, while a load of requests on
//! credentials that stay valid runs throughout and must not see a single failure.

#[path = "../examples/support/mod.rs"]
pub mod support;

#[path = "common/refusal.rs"]
mod refusal;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_aggregator::apiservice::ApiService;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use support::flags::GatewayOptions;
use support::pki::{certs, provider};
use support::{gateway, pki};
use tokio::net::{TcpListener, TcpStream};

const APISERVICE: &str = "v1alpha1.widgets.example.io";
const BASE: &str = "/apis/widgets.example.io/v1alpha1";
const RELOAD: Duration = Duration::from_millis(100);
const TOKEN: &str = "load-token";

fn roots(pems: &[&str]) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for pem in pems {
        for c in certs(pem) {
            roots.add(c).expect("trust anchor");
        }
    }
    roots
}

fn common_name(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).expect("a certificate");
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Writes `contents` to `path` the way rotation tools do: a new file renamed over the old.
fn rotate(path: &Path, contents: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, contents).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

/// An HTTP/2 extension server that requires a front-proxy client certificate and answers
/// with the CN of the one it was given, and the `X-Remote-User` it was sent as
/// `X-Seen-User`; its serving certificate can be replaced.
struct Backend {
    addr: SocketAddr,
    tls: Arc<Mutex<Arc<rustls::ServerConfig>>>,
    front_proxy_ca: String,
}

impl Backend {
    async fn start(front_proxy_ca: &str, serving: &pki::Leaf) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let tls = Arc::new(Mutex::new(Backend::config(front_proxy_ca, serving)));
        let current = tls.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let config = current.lock().unwrap().clone();
                tokio::spawn(async move {
                    let accept = tokio_rustls::TlsAcceptor::from(config).accept(tcp);
                    let stream = match accept.into_fallible().await {
                        Ok(stream) => stream,
                        Err((_, tcp)) => return refusal::drain_then_close(tcp).await,
                    };
                    let cn = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map(|c| common_name(c))
                        .unwrap_or_default();
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let mut res = Response::new(Full::new(Bytes::from(cn.clone())));
                        // Who the backend was told the caller is.
                        if let Some(user) = req.headers().get("x-remote-user") {
                            res.headers_mut().insert("x-seen-user", user.clone());
                        }
                        async move { Ok::<_, Infallible>(res) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Backend {
            addr,
            tls,
            front_proxy_ca: front_proxy_ca.to_owned(),
        }
    }

    fn config(front_proxy_ca: &str, serving: &pki::Leaf) -> Arc<rustls::ServerConfig> {
        serving.server_config(&[front_proxy_ca], &[b"h2"])
    }

    /// New connections get `serving`.
    fn serve_with(&self, serving: &pki::Leaf) {
        *self.tls.lock().unwrap() = Backend::config(&self.front_proxy_ca, serving);
    }
}

/// `GET {BASE}/widgets` by a client trusting `serving_cas`, presenting `cert` (if any) and
/// sending `headers`; the status, the body (the CN of the proxy client certificate the
/// backend was given), and the CN of the gateway's certificate. One connection per call.
async fn call(
    addr: SocketAddr,
    serving_cas: &[&str],
    cert: Option<&pki::Leaf>,
    headers: &[(&str, &str)],
) -> (StatusCode, String, String) {
    let (status, _, body, server_cn) =
        call_path(addr, serving_cas, cert, &format!("{BASE}/widgets"), headers).await;
    (status, body, server_cn)
}

/// [`call`] for `path`, with the response headers too.
async fn call_path(
    addr: SocketAddr,
    serving_cas: &[&str],
    cert: Option<&pki::Leaf>,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, http::HeaderMap, String, String) {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots(serving_cas));
    let mut config = match cert {
        Some(leaf) => builder
            .with_client_auth_cert(
                certs(&leaf.cert_pem),
                PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("key"),
            )
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let exchange = async {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("TLS handshake");
        let server_cn = common_name(
            &tls.get_ref()
                .1
                .peer_certificates()
                .expect("a server certificate")[0],
        );
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("HTTP/1.1 handshake");
        tokio::spawn(conn);
        let mut req = Request::get(path).header("host", "localhost");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = sender
            .send_request(req.body(Empty::<Bytes>::new()).expect("request"))
            .await
            .expect("an answer");
        let (parts, body) = res.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&body).into_owned(),
            server_cn,
        )
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("an answer within 10 s")
}

/// Retries `check` (a fresh request each time) until it holds, for at most 5 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within 5 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes `apiservice` as the JSON manifest the gateway's `--apiservice-dir` reads.
fn write_manifest(path: &Path, apiservice: &ApiService) {
    let mut manifest = serde_json::to_value(apiservice).expect("APIService JSON");
    manifest["apiVersion"] = "apiregistration.k8s.io/v1".into();
    manifest["kind"] = "APIService".into();
    rotate(path, &manifest.to_string());
}

struct Files {
    dir: PathBuf,
}

impl Files {
    /// A scratch directory of its own for the test `name`.
    fn new(name: &str) -> Files {
        let dir = std::env::temp_dir().join(format!(
            "kube-aggregator-rotation-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Files { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, contents).expect("write");
        path
    }
}

/// The CAs of a rig: each file's first CA and the one it rotates to.
struct Cas {
    serving: pki::Ca,
    serving2: pki::Ca,
    client: pki::Ca,
    client2: pki::Ca,
    rh: pki::Ca,
    rh2: pki::Ca,
    front_proxy: pki::Ca,
    backend: pki::Ca,
    backend2: pki::Ca,
}

/// The gateway example as an operator runs it, every certificate and CA from a file and
/// the APIService from a manifest directory, all re-read while it serves; and the backend
/// behind it. `eventually` has seen the APIService available.
struct Rig {
    cas: Cas,
    files: Files,
    tls_crt: PathBuf,
    tls_key: PathBuf,
    client_ca_file: PathBuf,
    rh_ca_file: PathBuf,
    proxy_crt: PathBuf,
    proxy_key: PathBuf,
    manifest: PathBuf,
    apiservice: ApiService,
    backend: Backend,
    addr: SocketAddr,
    registry: kube_aggregator::registry::Registry,
}

const BACKEND_SANS: [&str; 1] = ["backend.test-ns.svc"];

impl Rig {
    /// Starts a rig in a scratch directory of its own for the test `name`, its manifest
    /// directory polled every 100 ms.
    async fn start(name: &str) -> Rig {
        Rig::start_with(name, Duration::from_millis(100), &[]).await
    }

    /// [`Rig::start`] with the manifest directory polled every `dir_poll`.
    async fn start_polling(name: &str, dir_poll: Duration) -> Rig {
        Rig::start_with(name, dir_poll, &[]).await
    }

    /// [`Rig::start_polling`] with more gateway flags.
    async fn start_with(name: &str, dir_poll: Duration, more: &[&str]) -> Rig {
        let cas = Cas {
            serving: pki::Ca::new("gateway-ca"),
            serving2: pki::Ca::new("gateway-ca-2"),
            client: pki::Ca::new("client-ca"),
            client2: pki::Ca::new("client-ca-2"),
            rh: pki::Ca::new("requestheader-ca"),
            rh2: pki::Ca::new("requestheader-ca-2"),
            front_proxy: pki::Ca::new("front-proxy-ca"),
            backend: pki::Ca::new("backend-ca"),
            backend2: pki::Ca::new("backend-ca-2"),
        };
        let files = Files::new(name);
        let serving = cas.serving.server("gateway", &["localhost"]);
        let tls_crt = files.write("tls.crt", &serving.cert_pem);
        let tls_key = files.write("tls.key", &serving.key_pem);
        let client_ca_file = files.write("client-ca.crt", &cas.client.cert_pem);
        let rh_ca_file = files.write("requestheader-ca.crt", &cas.rh.cert_pem);
        let proxy = cas.front_proxy.client("front-proxy-client", &[]);
        let proxy_crt = files.write("proxy.crt", &proxy.cert_pem);
        let proxy_key = files.write("proxy.key", &proxy.key_pem);

        // The backend, and the APIService trusting its CA.
        let backend = Backend::start(
            &cas.front_proxy.cert_pem,
            &cas.backend.server("backend", &BACKEND_SANS),
        )
        .await;
        let mut apiservice: ApiService = serde_json::from_value(serde_json::json!({
            "metadata": {"name": APISERVICE},
            "spec": {"group": "widgets.example.io", "version": "v1alpha1",
                     "service": {"namespace": "test-ns", "name": "backend", "port": 443},
                     "groupPriorityMinimum": 1000, "versionPriority": 15}
        }))
        .expect("an APIService");
        apiservice.spec.ca_bundle = cas.backend.cert_pem.clone().into_bytes();
        let apiservices = files.path("apiservices");
        std::fs::create_dir_all(&apiservices).expect("manifest dir");
        // JSON, read as YAML (the directory reads both).
        let manifest = apiservices.join("widgets.yaml");
        write_manifest(&manifest, &apiservice);
        let endpoints = files.write(
            "endpoints.json",
            &serde_json::json!([{"namespace": "test-ns", "name": "backend", "port": 443,
                                 "address": backend.addr.to_string()}])
            .to_string(),
        );
        let tokens = files.write("tokens.csv", &format!("{TOKEN},loader,1\n"));
        let flag = |name: &str, path: &Path| format!("--{name}={}", path.display());
        let opts = GatewayOptions::parse(
            [
                flag("tls-cert-file", &tls_crt),
                flag("tls-private-key-file", &tls_key),
                flag("client-ca-file", &client_ca_file),
                flag("requestheader-client-ca-file", &rh_ca_file),
                "--requestheader-username-headers=X-Remote-User".to_owned(),
                "--requestheader-group-headers=X-Remote-Group".to_owned(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
                flag("token-auth-file", &tokens),
                flag("proxy-client-cert-file", &proxy_crt),
                flag("proxy-client-key-file", &proxy_key),
                flag("apiservice-dir", &apiservices),
                format!("--apiservice-dir-poll-interval={}ms", dir_poll.as_millis()),
                flag("service-endpoints", &endpoints),
                "--authorization-mode=AlwaysAllow".to_owned(),
                format!("--certificate-reload-interval={}ms", RELOAD.as_millis()),
            ]
            .into_iter()
            .chain(more.iter().map(|f| (*f).to_owned())),
        )
        .unwrap_or_else(|e| panic!("gateway flags: {e:?}"));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (gateway, _serving) = gateway::start(opts, Some(listener), std::future::pending())
            .await
            .unwrap_or_else(|e| panic!("the gateway starts: {}", e.0));
        let registry = gateway.registry.clone();
        eventually("the APIService available", || async {
            registry
                .snapshot()
                .get(APISERVICE)
                .is_some_and(|r| r.is_available())
        })
        .await;
        Rig {
            cas,
            files,
            tls_crt,
            tls_key,
            client_ca_file,
            rh_ca_file,
            proxy_crt,
            proxy_key,
            manifest,
            apiservice,
            backend,
            addr: gateway.local_addr,
            registry,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_certificate_rotates_under_load_without_a_failed_request() {
    let rig = Rig::start("under-load").await;
    let Rig {
        cas,
        files,
        tls_crt,
        tls_key,
        client_ca_file,
        rh_ca_file,
        proxy_crt,
        proxy_key,
        manifest,
        apiservice,
        backend,
        addr,
        registry,
    } = &rig;
    let addr = *addr;
    let Cas {
        serving: serving_ca,
        serving2: serving_ca2,
        client: client_ca,
        client2: client_ca2,
        rh: rh_ca,
        rh2: rh_ca2,
        front_proxy: front_proxy_ca,
        backend: backend_ca,
        backend2: backend_ca2,
    } = cas;
    let backend_sans = BACKEND_SANS;

    // The load: a bearer token, trusting both serving CAs, never failing.
    let both_serving = [serving_ca.cert_pem.clone(), serving_ca2.cert_pem.clone()];
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (stop, sent, failed, cas) = (
                stop.clone(),
                sent.clone(),
                failed.clone(),
                both_serving.clone(),
            );
            tokio::spawn(async move {
                let bearer = format!("Bearer {TOKEN}");
                while !stop.load(Ordering::SeqCst) {
                    let cas: Vec<&str> = cas.iter().map(String::as_str).collect();
                    let (status, body, _) =
                        call(addr, &cas, None, &[("authorization", &bearer)]).await;
                    sent.fetch_add(1, Ordering::SeqCst);
                    if status != StatusCode::OK {
                        failed.lock().unwrap().push((status, body));
                    }
                }
            })
        })
        .collect();
    let cas1 = [serving_ca.cert_pem.as_str()];
    let both: Vec<&str> = both_serving.iter().map(String::as_str).collect();

    // Before: everything as configured at start.
    let alice = client_ca.client("alice", &["dev"]);
    let (status, body, server_cn) = call(addr, &cas1, Some(&alice), &[]).await;
    assert_eq!(
        (status, body.as_str(), server_cn.as_str()),
        (StatusCode::OK, "front-proxy-client", "gateway")
    );

    // 1. The serving certificate: new handshakes present the new one.
    let serving2 = serving_ca2.server("gateway-2", &["localhost"]);
    rotate(tls_key, &serving2.key_pem);
    rotate(tls_crt, &serving2.cert_pem);
    eventually("the new serving certificate", || async {
        call(addr, &both, Some(&alice), &[]).await.2 == "gateway-2"
    })
    .await;

    // 2. --client-ca-file: certificates of the new CA authenticate, of the old one not.
    let bob = client_ca2.client("bob", &["dev"]);
    rotate(client_ca_file, &client_ca2.cert_pem);
    eventually("the new client CA", || async {
        call(addr, &both, Some(&bob), &[]).await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(
        call(addr, &both, Some(&alice), &[]).await.0,
        StatusCode::UNAUTHORIZED
    );

    // 3. --requestheader-client-ca-file: a front proxy of the new CA may assert users.
    let proxy_old = rh_ca.client("front-proxy", &[]);
    let proxy_new = rh_ca2.client("front-proxy", &[]);
    let asserted = [("x-remote-user", "carol")];
    assert_eq!(
        call(addr, &both, Some(&proxy_old), &asserted).await.0,
        StatusCode::OK
    );
    rotate(rh_ca_file, &rh_ca2.cert_pem);
    eventually("the new requestheader CA", || async {
        call(addr, &both, Some(&proxy_new), &asserted).await.0 == StatusCode::OK
    })
    .await;
    assert_eq!(
        call(addr, &both, Some(&proxy_old), &asserted).await.0,
        StatusCode::UNAUTHORIZED
    );

    // 4. The proxy client certificate: backends see the new one; old connections drain.
    let proxy2 = front_proxy_ca.client("front-proxy-client-2", &[]);
    rotate(proxy_key, &proxy2.key_pem);
    rotate(proxy_crt, &proxy2.cert_pem);
    eventually("the new proxy client certificate", || async {
        call(addr, &both, Some(&bob), &[]).await.1 == "front-proxy-client-2"
    })
    .await;

    // 5. The APIService's caBundle, while the backend changes CA: first both, then the new,
    // each written to the manifest the gateway watches.
    let bundle_applied = |bundle: String| {
        let registry = registry.clone();
        async move {
            registry
                .snapshot()
                .get(APISERVICE)
                .is_some_and(|r| r.apiservice.spec.ca_bundle == bundle.as_bytes())
        }
    };
    let mut both_bundles = apiservice.clone();
    both_bundles.spec.ca_bundle =
        format!("{}{}", backend_ca.cert_pem, backend_ca2.cert_pem).into_bytes();
    write_manifest(manifest, &both_bundles);
    let both_pem = format!("{}{}", backend_ca.cert_pem, backend_ca2.cert_pem);
    eventually("both CA bundles", || bundle_applied(both_pem.clone())).await;
    backend.serve_with(&backend_ca2.server("backend", &backend_sans));
    let mut new_only = apiservice.clone();
    new_only.spec.ca_bundle = backend_ca2.cert_pem.clone().into_bytes();
    write_manifest(manifest, &new_only);
    eventually("the new CA bundle", || {
        bundle_applied(backend_ca2.cert_pem.clone())
    })
    .await;
    let (status, body, _) = call(addr, &both, Some(&bob), &[]).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "front-proxy-client-2")
    );

    // A half-written pair (the new certificate before its key) is refused; the last good
    // pair stays.
    let proxy3 = front_proxy_ca.client("front-proxy-client-3", &[]);
    rotate(proxy_crt, &proxy3.cert_pem);
    // The watcher inside the gateway has no observable refusal, so this negative check
    // spans four reload periods: each of them saw the half-written pair and refused it.
    tokio::time::sleep(RELOAD * 4).await;
    assert_eq!(
        call(addr, &both, Some(&bob), &[]).await.1,
        "front-proxy-client-2"
    );
    rotate(proxy_key, &proxy3.key_pem);
    eventually("the completed pair", || async {
        call(addr, &both, Some(&bob), &[]).await.1 == "front-proxy-client-3"
    })
    .await;

    stop.store(true, Ordering::SeqCst);
    for l in load {
        l.await.expect("load task");
    }
    assert_eq!(
        *failed.lock().unwrap(),
        Vec::new(),
        "requests of the load that failed"
    );
    assert!(sent.load(Ordering::SeqCst) > 20, "the load hardly ran");
    let _ = std::fs::remove_dir_all(&files.dir);
}

/// Pads each file of `files` with newlines (which PEM ignores) to the size of its new
/// contents when those are longer, keeping its modification time; then, once the
/// watcher has seen that (a few reload periods), writes each new contents by rename with
/// the size and modification time the file has: as `tar x`, `cp -p`, `rsync -t` and
/// reproducible builds leave files.
async fn rotate_keeping_size_and_time(files: &[(&Path, &str)]) {
    let time = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .expect("a modification time")
    };
    let set_time = |path: &Path, t| {
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(t))
            .expect("set the modification time");
    };
    let padded = |text: &str, len: usize| {
        let mut text = text.to_owned();
        while text.len() < len {
            text.push('\n');
        }
        text
    };
    for (path, contents) in files {
        let old = std::fs::read_to_string(path).expect("the old file");
        if old.len() < contents.len() {
            let modified = time(path);
            std::fs::write(path, padded(&old, contents.len())).expect("pad the old file");
            set_time(path, modified);
        }
    }
    tokio::time::sleep(RELOAD * 4).await;
    for (path, contents) in files {
        let (size, modified) = (std::fs::metadata(path).expect("metadata").len(), time(path));
        let new = padded(contents, usize::try_from(size).expect("a small file"));
        let tmp = path.with_extension("new");
        std::fs::write(&tmp, &new).expect("write");
        set_time(&tmp, modified);
        std::fs::rename(&tmp, path).expect("rename");
        let after = std::fs::metadata(path).expect("metadata");
        assert_eq!((after.len(), time(path)), (size, modified));
    }
}

/// A serving pair and a client CA replaced by files of the same sizes and modification
/// times are loaded all the same: the bytes are compared, not only size and time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_replaced_with_the_same_size_and_time_are_reloaded() {
    let rig = Rig::start("same-stamp").await;
    let cas = &rig.cas;
    let both = [
        cas.serving.cert_pem.as_str(),
        cas.serving2.cert_pem.as_str(),
    ];
    let alice = cas.client.client("alice", &["dev"]);
    let (status, _, server_cn) = call(rig.addr, &both, Some(&alice), &[]).await;
    assert_eq!((status, server_cn.as_str()), (StatusCode::OK, "gateway"));

    let serving2 = cas.serving2.server("gateway-2", &["localhost"]);
    rotate_keeping_size_and_time(&[
        (&rig.tls_key, &serving2.key_pem),
        (&rig.tls_crt, &serving2.cert_pem),
    ])
    .await;
    eventually("the new serving certificate", || async {
        call(rig.addr, &both, Some(&alice), &[]).await.2 == "gateway-2"
    })
    .await;

    let bob = cas.client2.client("bob", &["dev"]);
    assert_eq!(
        call(rig.addr, &both, Some(&bob), &[]).await.0,
        StatusCode::UNAUTHORIZED
    );
    rotate_keeping_size_and_time(&[(&rig.client_ca_file, &cas.client2.cert_pem)]).await;
    eventually("the new client CA", || async {
        call(rig.addr, &both, Some(&bob), &[]).await.0 == StatusCode::OK
    })
    .await;
    let _ = std::fs::remove_dir_all(&rig.files.dir);
}

/// Rewrites `path` in place (the same file, truncated first), in two writes `pause`
/// apart, as a shell's `>` or an editor saving in place does.
async fn write_in_place_slowly(path: &Path, first: &str, rest: &str, pause: Duration) {
    use std::io::Write;
    let mut f = std::fs::File::options()
        .write(true)
        .truncate(true)
        .open(path)
        .expect("open in place");
    f.write_all(first.as_bytes()).expect("first part");
    f.flush().expect("flush");
    tokio::time::sleep(pause).await;
    f.write_all(rest.as_bytes()).expect("the rest");
}

/// A manifest rewritten in place (its part before `service:` first, which alone is a
/// local APIService; or truncated to empty first) is never applied half-written: through
/// the rewrite the APIService stays the remote one and its requests keep reaching the
/// backend, never 404 (a local APIService the host does not serve) nor 503 (deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_rewritten_in_place_is_never_applied_half_written() {
    let rig = Rig::start_polling("in-place", Duration::from_secs(1)).await;
    let cas = &rig.cas;
    let serving = [cas.serving.cert_pem.as_str()];
    let alice = cas.client.client("alice", &["dev"]);
    // YAML with `service` last, so that what comes before it is a whole local APIService.
    use base64::Engine as _;
    let whole = format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {{name: {APISERVICE}}}\nspec:\n  group: widgets.example.io\n  version: v1alpha1\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n  caBundle: {}\n  service: {{namespace: test-ns, name: backend, port: 443}}\n",
        base64::engine::general_purpose::STANDARD.encode(&rig.apiservice.spec.ca_bundle)
    );
    let (head, rest) = whole.split_at(whole.find("  service:").expect("service"));
    let local: ApiService = serde_yaml_ng::from_str(head).expect("the head parses");
    assert!(local.is_local(), "the head alone is a local APIService");

    for (first, rest) in [(head, rest), ("", whole.as_str())] {
        let watch = async {
            let deadline = Instant::now() + Duration::from_millis(3500);
            while Instant::now() < deadline {
                let route = rig
                    .registry
                    .snapshot()
                    .get(APISERVICE)
                    .map(|r| (r.apiservice.spec.service.is_some(), r.is_available()));
                assert_eq!(route, Some((true, true)), "the APIService changed");
                let (status, body, _) = call(rig.addr, &serving, Some(&alice), &[]).await;
                assert_eq!(
                    (status, body.as_str()),
                    (StatusCode::OK, "front-proxy-client")
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let write = write_in_place_slowly(&rig.manifest, first, rest, Duration::from_millis(600));
        tokio::join!(watch, write);
        assert_eq!(
            std::fs::read_to_string(&rig.manifest).expect("manifest"),
            whole
        );
    }
    let _ = std::fs::remove_dir_all(&rig.files.dir);
}

/// A refused file keeps only its own previous content: garbage in `--client-ca-file`
/// does not stop a serving-certificate rotation, and a serving certificate written
/// before its key does not stop a client-CA rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_refused_file_does_not_block_the_others() {
    let rig = Rig::start("one-refused").await;
    let cas = &rig.cas;
    let both = [
        cas.serving.cert_pem.as_str(),
        cas.serving2.cert_pem.as_str(),
    ];
    let alice = cas.client.client("alice", &["dev"]);

    rotate(&rig.client_ca_file, "not a PEM bundle\n");
    let serving2 = cas.serving2.server("gateway-2", &["localhost"]);
    rotate(&rig.tls_key, &serving2.key_pem);
    rotate(&rig.tls_crt, &serving2.cert_pem);
    eventually(
        "the new serving certificate beside a broken client CA",
        || async { call(rig.addr, &both, Some(&alice), &[]).await.2 == "gateway-2" },
    )
    .await;
    assert_eq!(
        call(rig.addr, &both, Some(&alice), &[]).await.0,
        StatusCode::OK,
        "the broken client CA file replaced the good bundle"
    );

    // A certificate without its key: refused, and the client CA rotates all the same.
    let serving3 = cas.serving.server("gateway-3", &["localhost"]);
    rotate(&rig.tls_crt, &serving3.cert_pem);
    let bob = cas.client2.client("bob", &["dev"]);
    rotate(&rig.client_ca_file, &cas.client2.cert_pem);
    eventually(
        "the new client CA beside a half-written serving pair",
        || async { call(rig.addr, &both, Some(&bob), &[]).await.0 == StatusCode::OK },
    )
    .await;
    let (status, _, server_cn) = call(rig.addr, &both, Some(&alice), &[]).await;
    assert_eq!(
        (status, server_cn.as_str()),
        (StatusCode::UNAUTHORIZED, "gateway-2")
    );

    // Both refusals were counted, by flag.
    let (status, _, metrics, _) = call_path(rig.addr, &both, Some(&bob), "/metrics", &[]).await;
    assert_eq!(status, StatusCode::OK);
    for flag in ["--client-ca-file", "--tls-cert-file/--tls-private-key-file"] {
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "certificate_reload_refused_total{{flag=\"{flag}\"}}"
                ))
            })
            .unwrap_or_else(|| panic!("no refusal counted for {flag}:\n{metrics}"));
        assert!(!line.ends_with(" 0"), "{line}");
    }
    let _ = std::fs::remove_dir_all(&rig.files.dir);
}

/// A reload can never open the hole start-up refuses: with no
/// `--requestheader-allowed-names`, a request-header CA bundle that would hold the client
/// CA (or a client CA bundle that would hold the request-header CA) is refused and the
/// previous bundle stays, so alice's certificate cannot assert `mallory`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_into_a_shared_ca_is_refused() {
    let rig = Rig::start("shared-ca").await;
    let cas = &rig.cas;
    let serving = [cas.serving.cert_pem.as_str()];
    let alice = cas.client.client("alice", &["dev"]);
    let assert_as = [
        ("x-remote-user", "mallory"),
        ("x-remote-group", "system:masters"),
    ];
    let seen_user = || async {
        let (status, headers, _, _) = call_path(
            rig.addr,
            &serving,
            Some(&alice),
            &format!("{BASE}/widgets"),
            &assert_as,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        headers["x-seen-user"].to_str().expect("text").to_owned()
    };
    assert_eq!(seen_user().await, "alice");

    // The request-header bundle rotated to also hold the client CA.
    rotate(
        &rig.rh_ca_file,
        &format!("{}{}", cas.rh.cert_pem, cas.client.cert_pem),
    );
    // A certificate from the request-header CA alone, with no headers, is no user: the
    // x509 authenticator does not trust its CA.
    let proxy = cas.rh.client("front-proxy", &[]);
    // The client bundle rotated to also hold the request-header CA.
    rotate(
        &rig.client_ca_file,
        &format!("{}{}", cas.client.cert_pem, cas.rh.cert_pem),
    );
    // No observable sign of a refusal but the metric: wait for both to be counted.
    eventually("both refusals counted", || async {
        let (_, _, metrics, _) = call_path(rig.addr, &serving, Some(&alice), "/metrics", &[]).await;
        ["--requestheader-client-ca-file", "--client-ca-file"]
            .iter()
            .all(|flag| {
                metrics.lines().any(|l| {
                    l.starts_with(&format!(
                        "certificate_reload_refused_total{{flag=\"{flag}\"}}"
                    )) && !l.ends_with(" 0")
                })
            })
    })
    .await;
    assert_eq!(
        seen_user().await,
        "alice",
        "alice asserted another identity"
    );
    assert_eq!(
        call(rig.addr, &serving, Some(&proxy), &[]).await.0,
        StatusCode::UNAUTHORIZED,
        "the client CA took the request-header CA in"
    );

    // A rotation that keeps them apart is applied.
    let proxy2 = cas.rh2.client("front-proxy", &[]);
    rotate(&rig.rh_ca_file, &cas.rh2.cert_pem);
    eventually("the new request-header CA", || async {
        let (status, headers, _, _) = call_path(
            rig.addr,
            &serving,
            Some(&proxy2),
            &format!("{BASE}/widgets"),
            &[("x-remote-user", "carol")],
        )
        .await;
        status == StatusCode::OK && headers["x-seen-user"] == "carol"
    })
    .await;
    let _ = std::fs::remove_dir_all(&rig.files.dir);
}

/// The rotation that costs operators the most: the proxy client certificate rotated to a
/// new issuer the extension server does not trust. Within one resync the APIService's
/// condition names the new issuer and says where it must be trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_certificate_from_an_untrusted_issuer_is_named_in_the_condition() {
    let resync = Duration::from_millis(500);
    let rig = Rig::start_with(
        "untrusted-proxy-issuer",
        Duration::from_millis(100),
        &[&format!(
            "--availability-resync-period={}ms",
            resync.as_millis()
        )],
    )
    .await;
    let new_ca = pki::Ca::new("front-proxy-ca-next");
    let proxy = new_ca.client("front-proxy-client", &[]);
    rotate(&rig.proxy_key, &proxy.key_pem);
    rotate(&rig.proxy_crt, &proxy.cert_pem);
    let rotated = Instant::now();
    let message = loop {
        let condition = rig
            .registry
            .snapshot()
            .get(APISERVICE)
            .and_then(|r| r.apiservice.available_condition().cloned())
            .expect("a condition");
        if condition.status.as_str() == "False" {
            break condition.message;
        }
        assert!(
            rotated.elapsed() < RELOAD * 4 + resync * 2 + Duration::from_secs(2),
            "still {condition:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for words in [
        "the extension server refused our client certificate during the TLS handshake",
        r#"issued by "CN=front-proxy-ca-next""#,
        r#"the extension server's --requestheader-client-ca-file must contain the CA "CN=front-proxy-ca-next""#,
    ] {
        assert!(message.contains(words), "{words:?} not in {message:?}");
    }
    let _ = std::fs::remove_dir_all(&rig.files.dir);
}
