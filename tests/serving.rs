//! The connection limits of `server::serve_tls_with` over real TLS on 127.0.0.1, each
//! with short configured timeouts (upstream's are 32 s and 90 s): a connection that sends
//! nothing, a header trickled one byte at a time (of the first request, and of a later
//! one after an idle wait), idle HTTP/1.1 keep-alive and HTTP/2 connections; requests in
//! flight are never cut; `Host` is required on HTTP/1.1; header sets up to 1 MiB are
//! accepted; HTTP/2 streams copy the service only on a runtime with several workers.

pub mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Client, Pki, Protocol};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_aggregator::Body;
use kube_aggregator::server::{self, ServeConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// Starts a server answering `200 ok` (after 1.5 s for `/slow`) with `config`.
async fn serve(pki: &Pki, config: ServeConfig) -> SocketAddr {
    let tls = common::gateway_tls(pki);
    let (listener, addr) = common::listen().await;
    let service = tower::service_fn(|req: Request<Incoming>| async move {
        if req.uri().path() == "/slow" {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        let body = req.into_body().collect().await.map(|b| b.to_bytes().len());
        Ok::<_, Infallible>(Response::new(Body::full(format!("ok {body:?}"))))
    });
    tokio::spawn(server::serve_tls_with(
        listener,
        tls,
        service,
        std::future::pending(),
        config,
    ));
    addr
}

/// Reads until the server closes the stream (EOF or an error); how long that took, and
/// what it sent. Panics after `limit`.
async fn time_to_close(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    limit: Duration,
) -> (Duration, Vec<u8>) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((start + limit).into(), stream.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open for {limit:?}"),
            Ok(Ok(0) | Err(_)) => return (start.elapsed(), got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// A TLS connection to the server at `addr`, offering `protocol`.
async fn connect(pki: &Pki, addr: SocketAddr, protocol: Protocol) -> TlsStream<TcpStream> {
    Client::new(pki, addr, None, protocol).connect().await
}

/// Asserts that `took` lies in `millis`; `what` names the moment it counts from.
fn assert_between(took: Duration, millis: std::ops::Range<u64>, what: &str) {
    let range = Duration::from_millis(millis.start)..Duration::from_millis(millis.end);
    assert!(range.contains(&took), "closed {took:?} after {what}");
}

/// Waits for the server to close the connection `driver` runs; how long that took.
async fn closed_cleanly(driver: tokio::task::JoinHandle<Result<(), hyper::Error>>) -> Duration {
    let idle_from = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), driver)
        .await
        .expect("the server closes the idle connection")
        .expect("driver task")
        .expect("a clean close");
    idle_from.elapsed()
}

fn short() -> ServeConfig {
    ServeConfig::default()
        .read_header_timeout(Duration::from_millis(400))
        .idle_timeout(Duration::from_millis(1200))
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_at_the_header_timeout() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;

    // TLS done, then silence.
    let mut tls = connect(&pki, addr, Protocol::Http1).await;
    let (took, sent) = time_to_close(&mut tls, Duration::from_secs(5)).await;
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");
    assert!(sent.is_empty(), "the server answered {sent:?}");

    // Not even a handshake: the handshake has the header timeout too.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let (took, _) = time_to_close(&mut tcp, Duration::from_secs(5)).await;
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");

    // HTTP/2 without a request.
    let mut h2 = connect(&pki, addr, Protocol::Http2).await;
    let (took, _) = time_to_close(&mut h2, Duration::from_secs(5)).await;
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");
}

/// Starts a request header on `write` and trickles one more byte every 100 ms, for longer
/// than any timeout here allows, until the server closes; asserts that it closed at the
/// header timeout (0.3 to 3 s after the first byte, `what`) and answered nothing.
async fn assert_trickle_cut_off(
    what: &str,
    mut read: impl tokio::io::AsyncRead + Unpin,
    mut write: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
) {
    write
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .expect("write");
    let start = Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b"a").await.is_err() || write.flush().await.is_err() {
                return;
            }
        }
    });
    let (_, sent) = time_to_close(&mut read, Duration::from_secs(5)).await;
    let took = start.elapsed();
    trickle.abort();
    assert!(sent.is_empty(), "the server answered {sent:?}");
    assert_between(took, 300..3000, what);
}

#[tokio::test]
async fn a_header_trickled_one_byte_at_a_time_is_cut_off_at_the_header_timeout() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;
    let tls = connect(&pki, addr, Protocol::Http1).await;
    let (read, write) = tokio::io::split(tls);
    assert_trickle_cut_off("the first byte", read, write).await;
}

#[tokio::test]
async fn a_later_request_trickled_after_an_idle_wait_is_cut_off_at_the_header_timeout() {
    let pki = Pki::new();
    // An idle timeout far beyond the bound below, so only the header timeout can close.
    let config = short().idle_timeout(Duration::from_secs(6));
    let addr = serve(&pki, config).await;
    let tls = connect(&pki, addr, Protocol::Http1).await;
    let (mut read, mut write) = tokio::io::split(tls);
    write
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.ends_with(b"ok Ok(0)") {
        let n = tokio::time::timeout(Duration::from_secs(5), read.read(&mut buf))
            .await
            .expect("the first answer in time")
            .expect("read");
        assert!(n > 0, "closed before the first answer: {answer:?}");
        answer.extend_from_slice(&buf[..n]);
    }
    // Idle for longer than the header timeout (not the idle timeout): the next request's
    // header timeout counts from its first byte, not from when the connection went idle.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_trickle_cut_off("the second request's first byte", read, write).await;
}

#[tokio::test]
async fn idle_http1_keep_alive_waits_for_the_idle_timeout_not_the_header_timeout() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;
    let tls = connect(&pki, addr, Protocol::Http1).await;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("handshake");
    let driver = tokio::spawn(conn);
    let get = || {
        Request::get("/")
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .expect("request")
    };
    let res = sender.send_request(get()).await.expect("first answer");
    assert_eq!(res.status(), StatusCode::OK);
    res.into_body().collect().await.expect("body");

    // Idle for longer than the header timeout: still open.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let res = sender.send_request(get()).await.expect("second answer");
    assert_eq!(res.status(), StatusCode::OK);
    res.into_body().collect().await.expect("body");

    assert_between(closed_cleanly(driver).await, 1000..4000, "going idle");
}

#[tokio::test]
async fn idle_http2_connections_are_closed_but_streams_in_flight_are_not() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;
    let tls = connect(&pki, addr, Protocol::Http2).await;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("HTTP/2 handshake");
    let driver = tokio::spawn(conn);
    let get = |path: &str| {
        Request::get(format!("https://localhost:{}{path}", addr.port()))
            .body(Empty::<Bytes>::new())
            .expect("request")
    };
    // A request that takes longer than the idle timeout is answered.
    let res = sender.send_request(get("/slow")).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    res.into_body().collect().await.expect("body");

    // A clean close is the server's GOAWAY.
    assert_between(closed_cleanly(driver).await, 1000..4000, "going idle");
}

/// Sends raw bytes on a new HTTP/1.1 TLS connection; everything the server sent until it
/// closed.
async fn raw_exchange(pki: &Pki, addr: SocketAddr, request: &[u8]) -> String {
    let mut tls = connect(pki, addr, Protocol::Http1).await;
    tls.write_all(request).await.expect("write");
    let (_, sent) = time_to_close(&mut tls, Duration::from_secs(5)).await;
    String::from_utf8(sent).expect("UTF-8 answer")
}

#[tokio::test]
async fn http11_requests_need_exactly_one_host_header() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;
    for (request, message) in [
        (
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            "missing required Host header",
        ),
        (
            &b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"[..],
            "too many Host headers",
        ),
    ] {
        let answer = raw_exchange(&pki, addr, request).await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{answer}"
        );
        let body = answer.split_once("\r\n\r\n").expect("a body").1;
        let status: Value = serde_json::from_str(body).expect("a Status body");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 400);
        assert_eq!(status["reason"], "BadRequest");
        assert_eq!(status["message"], message);
    }
    // HTTP/1.0 may omit it.
    let answer = raw_exchange(&pki, addr, b"GET / HTTP/1.0\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.0 200 "), "{answer}");
}

#[tokio::test]
async fn header_sets_up_to_one_mebibyte_are_accepted_as_go_does() {
    let pki = Pki::new();
    let addr = serve(&pki, short()).await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, addr, None, protocol);
        // 500 headers (hyper's default limit is 100), and 900 KB of them.
        let many: Vec<(String, String)> = (0..500)
            .map(|i| (format!("impersonate-extra-scope-{i}"), format!("value-{i}")))
            .collect();
        let big: Vec<(String, String)> = (0..100)
            .map(|i| (format!("x-big-{i}"), "v".repeat(9000)))
            .collect();
        for headers in [&many, &big] {
            let refs: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let reply = client.get_with("/", &refs).await;
            assert_eq!(reply.status, StatusCode::OK, "{protocol:?}");
        }
    }
    // Well past 1 MiB: 431 on HTTP/1.1. hyper checks its limit between reads, and a read
    // may fill the buffer's spare capacity, so heads up to about twice the limit can
    // still complete; 3 MB never does.
    let mut tls = connect(&pki, addr, Protocol::Http1).await;
    let mut request = b"GET / HTTP/1.1\r\nHost: localhost\r\n".to_vec();
    for i in 0..330 {
        request.extend_from_slice(format!("x-big-{i}: {}\r\n", "v".repeat(9000)).as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    let _ = tls.write_all(&request).await;
    let (_, sent) = time_to_close(&mut tls, Duration::from_secs(5)).await;
    let answer = String::from_utf8_lossy(&sent);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

/// A service answering `200 ok` that counts how often it was cloned.
#[derive(Clone)]
struct CountsClones {
    clones: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CountsClones {
    fn clones(&self) -> usize {
        self.clones.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A clone that says so.
struct Counted(CountsClones);

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.0
            .clones
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(self.0.clone())
    }
}

impl tower::Service<Request<Incoming>> for Counted {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Incoming>) -> Self::Future {
        std::future::ready(Ok(Response::new(Body::full("ok"))))
    }
}

/// How often the service was cloned for each of 4 HTTP/2 requests on one connection,
/// after the first (which also pays for the connection's own copy).
async fn clones_per_http2_request() -> usize {
    let pki = Pki::new();
    let tls = common::gateway_tls(&pki);
    let (listener, addr) = common::listen().await;
    let counts = CountsClones {
        clones: Default::default(),
    };
    tokio::spawn(server::serve_tls_with(
        listener,
        tls,
        Counted(counts.clone()),
        std::future::pending(),
        ServeConfig::default(),
    ));
    let stream = connect(&pki, addr, Protocol::Http2).await;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    let mut after_first = 0;
    for i in 0..4 {
        let req = Request::get(format!("https://localhost:{}/", addr.port()))
            .body(Empty::<Bytes>::new())
            .expect("request");
        let res = sender.send_request(req).await.expect("answer");
        assert_eq!(res.status(), StatusCode::OK);
        res.into_body().collect().await.expect("body");
        if i == 0 {
            after_first = counts.clones();
        }
    }
    (counts.clones() - after_first) / 3
}

/// On a runtime with one worker (current-thread, or multi-threaded with one thread)
/// HTTP/2 streams are served by the connection's own copy of the service; with several
/// workers each stream gets a copy, so that its work runs in its own task on any worker.
#[tokio::test]
async fn http2_streams_share_the_service_on_a_current_thread_runtime() {
    assert_eq!(clones_per_http2_request().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn http2_streams_share_the_service_on_one_worker_thread() {
    assert_eq!(clones_per_http2_request().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_get_a_copy_of_the_service_on_two_worker_threads() {
    assert_eq!(clones_per_http2_request().await, 1);
}
