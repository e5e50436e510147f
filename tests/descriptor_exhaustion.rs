//! The accept loop under descriptor exhaustion, in a child process whose descriptor limit
//! is 64 (`ulimit -n`): clients hold every descriptor the server has, the server backs
//! off instead of spinning, keeps serving the connections it already holds, and accepts
//! again as soon as descriptors are free.
//!
//! A test binary of its own (no libtest harness): run by `cargo test`, it starts itself
//! again as the child with `--serve-with-few-descriptors <dir>`.

#[path = "../examples/support/pki.rs"]
pub mod pki;

use std::convert::Infallible;
use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use kube_aggregator::{Body, server};
use rustls::pki_types::ServerName;
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpStream;

const CHILD_FLAG: &str = "--serve-with-few-descriptors";
const LIMIT: u32 = 64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(i) = args.iter().position(|a| a == CHILD_FLAG) {
        let dir = args.get(i + 1).expect("the PKI directory");
        runtime.block_on(child(Path::new(dir)));
        return;
    }
    println!("running 1 test");
    runtime.block_on(parent());
    println!("test accept_loop_survives_descriptor_exhaustion ... ok");
}

/// The child: a TLS server answering `200 ok`, printing its address, until stdin closes.
async fn child(dir: &Path) {
    let read = |name: &str| std::fs::read(dir.join(name)).expect("PKI file");
    let tls = server::server_config(&read("tls.crt"), &read("tls.key"), &read("ca.crt"), true)
        .expect("TLS config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    println!("{}", listener.local_addr().expect("address"));
    let service = tower::service_fn(|_: Request<hyper::body::Incoming>| async {
        Ok::<_, Infallible>(Response::new(Body::full("ok")))
    });
    let stdin_closed = async {
        let _ = tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await;
    };
    server::serve_tls(listener, tls, service, stdin_closed).await;
}

/// CPU time (user + system) of process `pid`, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

async fn parent() {
    let dir = std::env::temp_dir().join(format!("kube-aggregator-fds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let ca = pki::Ca::new("fd-test-ca");
    let leaf = ca.server("gateway", &["localhost"]);
    std::fs::write(dir.join("tls.crt"), &leaf.cert_pem).expect("write");
    std::fs::write(dir.join("tls.key"), &leaf.key_pem).expect("write");
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem).expect("write");

    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {LIMIT} && exec \"$0\" {CHILD_FLAG} \"$1\""
        ))
        .arg(&exe)
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the child");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the child prints its address");
    let addr: SocketAddr = line.trim().parse().expect("an address");

    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()) {
        roots.add(c.expect("CA")).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let connect = |deadline: Duration| {
        let connector = connector.clone();
        async move {
            let tcp = TcpStream::connect(addr).await.ok()?;
            let name = ServerName::try_from("localhost").expect("name");
            tokio::time::timeout(deadline, connector.connect(name, tcp))
                .await
                .ok()?
                .ok()
        }
    };
    let get = |sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>| {
        let req = Request::get("/")
            .header("host", "localhost")
            .body(Empty::new())
            .expect("request");
        let pending = sender.send_request(req);
        async move {
            let res = tokio::time::timeout(Duration::from_secs(5), pending)
                .await
                .expect("an answer within 5 s")
                .expect("an answer");
            assert_eq!(res.status(), StatusCode::OK);
            res.into_body().collect().await.expect("body");
        }
    };

    // A connection held from before the exhaustion.
    let held = connect(Duration::from_secs(5))
        .await
        .expect("first connection");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(held))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    get(&mut sender).await;

    // Take every descriptor the child has left with bare TCP connections (each waits in
    // its TLS handshake), and more that wait in the listen backlog.
    let mut hogs = Vec::new();
    for _ in 0..(LIMIT * 2) {
        hogs.push(TcpStream::connect(addr).await.expect("TCP connect"));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        connect(Duration::from_secs(1)).await.is_none(),
        "a new handshake completed: the descriptors were not exhausted"
    );

    // Exhausted: no spinning, and the held connection is still served.
    let before = cpu_time(child.id());
    let window = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spent = cpu_time(child.id()) - before;
    assert!(
        spent < Duration::from_millis(400),
        "the child used {spent:?} of CPU in {:?} with no descriptor left",
        window.elapsed()
    );
    get(&mut sender).await;

    // Free the descriptors: new connections are served again, within the backoff's 1 s.
    drop(hogs);
    let freed = Instant::now();
    let fresh = loop {
        if let Some(tls) = connect(Duration::from_millis(500)).await {
            break tls;
        }
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "no new connection was served within 10 s of freeing the descriptors"
        );
    };
    let (mut fresh_sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(fresh))
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    get(&mut fresh_sender).await;
    get(&mut sender).await;
    println!(
        "served again {:?} after the descriptors were freed",
        freed.elapsed()
    );

    drop(child.stdin.take());
    let status = child.wait().expect("the child exits");
    assert!(status.success(), "the child failed: {status}");
    let _ = std::fs::remove_dir_all(&dir);
}
