//! The timeout filter: `?timeout=` parsing with Go's errors, the long-running
//! classification, and, on a virtual clock, the 504 at the deadline, the shortened and
//! maximum deadlines, exempt requests, and bodies aborted mid-stream.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use tower::{Layer, Service, ServiceExt};

use super::*;
use crate::body::Body;
use crate::testing::VirtualClock;

fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    Pin::new(fut).poll(&mut cx)
}

#[test]
fn timeout_query_parsing_follows_upstream() {
    let max = Duration::from_secs(60);
    let deadline =
        |q: &str| request_deadline(&format!("/api/v1/pods{q}").parse::<Uri>().unwrap(), max);
    for (query, want) in [
        ("", max),
        ("?timeout=", max),
        ("?timeout=30s", Duration::from_secs(30)),
        ("?timeout=500ms", Duration::from_millis(500)),
        ("?timeout=1m30s", max),
        ("?timeout=59.5s", Duration::from_millis(59_500)),
        // Zero, negative and at-or-over the maximum silently become the maximum.
        ("?timeout=0", max),
        ("?timeout=0s", max),
        ("?timeout=-5s", max),
        ("?timeout=1m", max),
        ("?timeout=2h", max),
        // Go's Query().Get: the first value, pairs with ';' dropped.
        ("?timeout=10s&timeout=20s", Duration::from_secs(10)),
        ("?a=1;timeout=1s&timeout=2s", Duration::from_secs(2)),
        ("?timeout=%31s", Duration::from_secs(1)),
    ] {
        assert_eq!(deadline(query), Ok(want), "{query}");
    }
    for (query, message) in [
        (
            "?timeout=foo",
            r#"invalid timeout specified in the request URL - time: invalid duration "foo""#,
        ),
        (
            "?timeout=10",
            r#"invalid timeout specified in the request URL - time: missing unit in duration "10""#,
        ),
        (
            "?timeout=1d",
            r#"invalid timeout specified in the request URL - time: unknown unit "d" in duration "1d""#,
        ),
        (
            "?timeout=%FF",
            r#"invalid timeout specified in the request URL - time: invalid duration "\xff""#,
        ),
    ] {
        assert_eq!(deadline(query).unwrap_err().to_string(), message, "{query}");
    }
}

#[test]
fn long_running_classification() {
    let check = LongRunningCheck::kube_apiserver();
    let generic = LongRunningCheck::basic(["watch"], Vec::<String>::new());
    let console = LongRunningCheck::kube_apiserver().or(|_, i| i.subresource == "console");
    let classify = |c: &LongRunningCheck, method: Method, uri: &str| {
        let req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .body(())
            .unwrap();
        let (parts, ()) = req.into_parts();
        let info = RequestInfo::from_parts(&method, &parts.uri).unwrap();
        c.is_long_running(&parts, &info)
    };
    // (method, path, kube-apiserver, generic apiserver default, with console)
    for (method, uri, kube, gen_default, with_console) in [
        (Method::GET, "/api/v1/pods?watch=true", true, true, true),
        (Method::GET, "/api/v1/watch/pods", true, true, true),
        (Method::GET, "/api/v1/pods", false, false, false),
        (
            Method::GET,
            "/api/v1/namespaces/ns/pods/p/log",
            true,
            false,
            true,
        ),
        (
            Method::POST,
            "/api/v1/namespaces/ns/pods/p/exec",
            true,
            false,
            true,
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ns/pods/p/attach",
            true,
            false,
            true,
        ),
        (
            Method::POST,
            "/api/v1/namespaces/ns/pods/p/portforward",
            true,
            false,
            true,
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ns/pods/p/proxy",
            true,
            false,
            true,
        ),
        (
            Method::GET,
            "/api/v1/proxy/namespaces/ns/pods/p",
            true,
            false,
            true,
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ns/pods/p/status",
            false,
            false,
            false,
        ),
        (Method::GET, "/debug/pprof/profile", true, true, true),
        (Method::GET, "/debug/pprof", false, false, false),
        // A subresource name as a non-resource path is not long-running.
        (Method::GET, "/logs/exec", false, false, false),
        (
            Method::GET,
            "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console",
            false,
            false,
            true,
        ),
    ] {
        assert_eq!(
            classify(&check, method.clone(), uri),
            kube,
            "kube-apiserver {uri}"
        );
        assert_eq!(
            classify(&generic, method.clone(), uri),
            gen_default,
            "generic {uri}"
        );
        assert_eq!(
            classify(&console, method.clone(), uri),
            with_console,
            "console {uri}"
        );
    }
}

/// An inner service whose responses the test releases; counts calls and dropped futures.
#[derive(Clone, Default)]
struct Held {
    calls: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    release: Arc<std::sync::Mutex<Vec<tokio::sync::oneshot::Sender<Response<Body>>>>>,
}

struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Service<Request<Body>> for Held {
    crate::body::answers_boxed!(Infallible);
    fn call(&mut self, _req: Request<Body>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.release.lock().unwrap().push(tx);
        let guard = DropCount(self.dropped.clone());
        Box::pin(async move {
            let _guard = guard;
            Ok(rx.await.unwrap_or_else(|_| Response::new(Body::empty())))
        })
    }
}

impl Held {
    fn answer(&self, res: Response<Body>) {
        let tx = self.release.lock().unwrap().remove(0);
        let _ = tx.send(res);
    }
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

async fn body_text(res: Response<Body>) -> String {
    String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

#[tokio::test]
async fn a_slow_request_gets_upstreams_504_at_the_deadline_and_its_work_is_dropped() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let metrics = Arc::new(crate::metrics::RequestMetrics::default());
    let counted = metrics.clone();
    let mut svc = TimeoutLayer::new(clock.timer())
        .on_timeout(Arc::new(move |method, uri| {
            counted.terminated_request(method, uri, 504)
        }))
        .layer(held.clone());
    let mut fut = svc.call(get("/apis/metrics.k8s.io/v1beta1/nodes"));
    assert!(poll_once(&mut fut).is_pending());
    clock.advance(Duration::from_secs(59));
    assert!(poll_once(&mut fut).is_pending(), "not before 60 s");
    clock.advance(Duration::from_secs(1));
    let Poll::Ready(Ok(res)) = poll_once(&mut fut) else {
        panic!("504 at 60 s");
    };
    drop(fut);
    assert_eq!(
        held.dropped.load(Ordering::SeqCst),
        1,
        "the inner work is dropped"
    );
    assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
    // Counted as upstream's timeout filter counts it.
    let text = metrics.render();
    assert!(
        text.contains(r#"apiserver_request_terminations_total{verb="LIST",group="metrics.k8s.io",version="v1beta1",resource="nodes",subresource="",scope="cluster",component="apiserver",code="504"} 1"#),
        "{text}"
    );
    assert!(!text.contains("apiserver_request_total"), "{text}");
    assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        body_text(res).await,
        "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n"
    );
}

#[tokio::test]
async fn timeout_query_shortens_the_deadline_and_flag_sets_the_maximum() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let layer = TimeoutLayer::new(clock.timer()).request_timeout(Duration::from_secs(10));
    let mut svc = layer.layer(held.clone());
    let mut short = svc.call(get("/api/v1/pods?timeout=2s"));
    let mut long = svc.call(get("/api/v1/pods?timeout=30s"));
    assert!(poll_once(&mut short).is_pending());
    assert!(poll_once(&mut long).is_pending());
    clock.advance(Duration::from_secs(2));
    assert!(matches!(poll_once(&mut short), Poll::Ready(Ok(r)) if r.status() == 504));
    assert!(
        poll_once(&mut long).is_pending(),
        "30s is capped at 10s, not shortened"
    );
    clock.advance(Duration::from_secs(8));
    assert!(matches!(poll_once(&mut long), Poll::Ready(Ok(r)) if r.status() == 504));
}

#[tokio::test]
async fn an_answer_in_time_passes_and_a_bad_timeout_is_a_400() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let mut svc = TimeoutLayer::new(clock.timer()).layer(held.clone());
    let mut fut = svc.call(get("/healthz"));
    assert!(poll_once(&mut fut).is_pending());
    held.answer(Response::new(Body::full("ok")));
    let res = fut.await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(body_text(res).await, "ok");

    let res = svc.call(get("/api/v1/pods?timeout=soon")).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        body_text(res).await,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"invalid timeout specified in the request URL - time: invalid duration \\\"soon\\\"\",\"reason\":\"BadRequest\",\"code\":400}\n"
    );
    assert_eq!(
        held.calls.load(Ordering::SeqCst),
        1,
        "a bad timeout never reaches the handler"
    );
}

#[tokio::test]
async fn long_running_requests_outlive_the_timeout_even_with_a_bad_timeout_value() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let check = LongRunningCheck::kube_apiserver().or(|_, i| i.subresource == "console");
    let mut svc = TimeoutLayer::new(clock.timer())
        .long_running(check)
        .layer(held.clone());
    let mut watch = svc.call(get(
        "/apis/metrics.k8s.io/v1beta1/pods?watch=1&timeout=bogus",
    ));
    let mut console = svc.call(get("/apis/kubevirt.io/v1/namespaces/ns/vmis/vm/console"));
    clock.advance(Duration::from_secs(3600));
    assert!(poll_once(&mut watch).is_pending());
    assert!(poll_once(&mut console).is_pending());
    assert_eq!(held.dropped.load(Ordering::SeqCst), 0);
}

/// A body that yields one frame, then waits forever.
struct Stalls(bool);
impl http_body::Body for Stalls {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.0 {
            Poll::Pending
        } else {
            self.0 = true;
            Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(
                b"partial",
            )))))
        }
    }
}

#[tokio::test]
async fn a_body_still_streaming_at_the_deadline_is_aborted() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let metrics = Arc::new(crate::metrics::RequestMetrics::default());
    let (timeouts, aborts) = (metrics.clone(), metrics.clone());
    let mut svc = TimeoutLayer::new(clock.timer())
        .on_timeout(Arc::new(move |method, uri| {
            timeouts.terminated_request(method, uri, 504)
        }))
        .on_abort(Arc::new(move |method, uri| {
            aborts.aborted_request(method, uri)
        }))
        .layer(held.clone());
    let mut fut = svc.call(get("/api/v1/pods"));
    assert!(poll_once(&mut fut).is_pending());
    held.answer(Response::new(Body::new(Stalls(false))));
    let res = fut.await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut body = res.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "partial");
    let mut next = Box::pin(body.frame());
    assert!(poll_once(&mut next).is_pending());
    clock.advance(Duration::from_secs(60));
    let Poll::Ready(Some(Err(e))) = poll_once(&mut next) else {
        panic!("the body fails at the deadline");
    };
    assert_eq!(
        e.to_string(),
        "request did not complete within the allotted timeout"
    );
    // Counted as an abort (upstream's timeout filter aborts the handler), not a 504.
    let text = metrics.render();
    assert!(
        text.contains("apiserver_request_aborts_total{verb=\"LIST\",group=\"\",version=\"v1\",resource=\"pods\",subresource=\"\",scope=\"cluster\"} 1\n"),
        "{text}"
    );
    assert!(
        !text.contains("apiserver_request_terminations_total{"),
        "{text}"
    );
}

#[tokio::test]
async fn zero_request_timeout_means_none() {
    let clock = VirtualClock::new();
    let held = Held::default();
    let svc = TimeoutLayer::new(clock.timer())
        .request_timeout(Duration::ZERO)
        .layer(held.clone());
    let mut fut = Box::pin(svc.oneshot(get("/api/v1/pods")));
    clock.advance(Duration::from_secs(86_400));
    assert!(poll_once(&mut fut).is_pending());
}
