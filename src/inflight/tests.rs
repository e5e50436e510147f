//! The scenarios of upstream's `maxinflight_test.go` (TestMaxInFlightNonMutating,
//! TestMaxInFlightMutating, TestMaxInFlightSkipsMasters), plus the per-APIService limit.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{Layer, Service};

use super::*;
use crate::authn::UserInfo;
use crate::body::Body;

type Waiters = Arc<Mutex<Vec<tokio::sync::oneshot::Sender<()>>>>;

/// Paths containing `wait` hang until released; the rest answer at once.
#[derive(Clone, Default)]
struct Blocking(Waiters);

impl Service<Request<Body>> for Blocking {
    crate::body::answers_boxed!(Infallible);
    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let path = req.uri().path().to_owned();
        let blocked = path.contains("wait") && !path.contains("dontwait");
        let rx = blocked.then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            self.0.lock().unwrap().push(tx);
            rx
        });
        Box::pin(async move {
            if let Some(rx) = rx {
                let _ = rx.await;
            }
            Ok(Response::new(Body::full("done")))
        })
    }
}

fn request(method: Method, uri: &str, groups: &[&str]) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    req.extensions_mut()
        .insert(UserInfo::new("someone", groups.iter().copied()));
    req
}

type Svc = InFlightService<Blocking>;

/// Starts a request and drives it until it is parked in the handler (or answered).
fn start(
    svc: &mut Svc,
    method: Method,
    uri: &str,
    groups: &[&str],
) -> ResponseFuture<<Blocking as Service<Request<Body>>>::Future> {
    let mut fut = svc.call(request(method, uri, groups));
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    if let Poll::Ready(res) = Pin::new(&mut fut).poll(&mut cx) {
        panic!("{uri} answered at once: {:?}", res.map(|r| r.status()));
    }
    fut
}

async fn status(svc: &mut Svc, method: Method, uri: &str, groups: &[&str]) -> StatusCode {
    svc.call(request(method, uri, groups))
        .await
        .unwrap()
        .status()
}

fn release_all(w: &Waiters) {
    for tx in w.lock().unwrap().drain(..) {
        let _ = tx.send(());
    }
}

#[tokio::test]
async fn read_only_limit_counts_only_accounted_requests() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(3, 1);
    let mut svc = layer.layer(handler.clone());
    // Watches hang but are not counted.
    let watches: Vec<_> = (0..3)
        .map(|_| {
            start(
                &mut svc,
                Method::GET,
                "/api/v1/namespaces/default/wait?watch=true",
                &[],
            )
        })
        .collect();
    assert_eq!(
        status(&mut svc, Method::GET, "/dontwait", &[]).await,
        StatusCode::OK
    );
    let held: Vec<_> = (0..3)
        .map(|_| start(&mut svc, Method::GET, "/wait", &[]))
        .collect();
    assert_eq!(
        layer.in_flight(),
        InFlight {
            read_only: 3,
            mutating: 0
        }
    );
    for _ in 0..2 {
        let res = svc
            .call(request(Method::GET, "/dontwait", &[]))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()["retry-after"], "1");
        assert_eq!(res.headers()["content-type"], "text/plain; charset=utf-8");
        assert_eq!(res.headers()["x-content-type-options"], "nosniff");
        let body = res.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "Too many requests, please try again later.\n");
    }
    // Long-running by path, and the mutating class, still answer.
    assert_eq!(
        status(
            &mut svc,
            Method::GET,
            "/api/v1/watch/namespaces/default/dontwait",
            &[]
        )
        .await,
        StatusCode::OK
    );
    assert_eq!(
        status(&mut svc, Method::POST, "/dontwait", &[]).await,
        StatusCode::OK
    );
    release_all(&handler.0);
    for f in held {
        let res = f.await.unwrap();
        // The slot is held until the body has been read.
        assert_ne!(layer.in_flight().read_only, 0);
        let _ = res.into_body().collect().await;
    }
    assert_eq!(layer.in_flight(), InFlight::default());
    for f in watches {
        let _ = f.await;
    }
    assert_eq!(
        status(&mut svc, Method::GET, "/dontwait", &[]).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn mutating_limit_and_upstreams_verb_classes() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(1, 3);
    let mut svc = layer.layer(handler.clone());
    let held: Vec<_> = (0..3)
        .map(|_| start(&mut svc, Method::POST, "/foo/wait", &[]))
        .collect();
    for _ in 0..2 {
        assert_eq!(
            status(&mut svc, Method::POST, "/foo/bar/", &[]).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    // A non-resource HEAD is verb `head`: mutating. A resource HEAD is `get`: read-only.
    assert_eq!(
        status(&mut svc, Method::HEAD, "/healthz", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&mut svc, Method::HEAD, "/api/v1/pods", &[]).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&mut svc, Method::GET, "/dontwait", &[]).await,
        StatusCode::OK
    );
    // Deletes and patches of resources are mutating too.
    assert_eq!(
        status(&mut svc, Method::DELETE, "/api/v1/namespaces/a/pods/b", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    release_all(&handler.0);
    for f in held {
        let _ = f.await.unwrap().into_body().collect().await;
    }
    assert_eq!(
        status(&mut svc, Method::POST, "/foo/bar", &[]).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn system_masters_is_served_uncounted_when_full() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(1, 1);
    let mut svc = layer.layer(handler.clone());
    let _held = start(&mut svc, Method::POST, "/foo/wait", &[]);
    assert_eq!(
        status(&mut svc, Method::POST, "/dontwait", &["dev"]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let _master = start(
        &mut svc,
        Method::POST,
        "/foo/wait",
        &["dev", "system:masters"],
    );
    assert_eq!(
        layer.in_flight().mutating,
        1,
        "the master's request is not counted"
    );
    release_all(&handler.0);
}

#[tokio::test]
async fn zero_limits_count_nothing() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(0, 0);
    let mut svc = layer.layer(handler.clone());
    let held: Vec<_> = (0..50)
        .map(|_| start(&mut svc, Method::GET, "/wait", &[]))
        .collect();
    assert_eq!(layer.in_flight(), InFlight::default());
    release_all(&handler.0);
    drop(held);
}

#[tokio::test]
async fn one_apiservice_cannot_take_every_slot() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(10, 10).per_api_service(4);
    let mut svc = layer.layer(handler.clone());
    let slow = "/apis/metrics.k8s.io/v1beta1/wait";
    let held: Vec<_> = (0..4)
        .map(|_| start(&mut svc, Method::GET, slow, &[]))
        .collect();
    assert_eq!(layer.in_flight_for("v1beta1.metrics.k8s.io"), 4);
    for _ in 0..20 {
        assert_eq!(
            status(&mut svc, Method::GET, slow, &[]).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
    // Refusals took no global slot: other APIServices, the core group, local paths answer.
    assert_eq!(layer.in_flight().read_only, 4);
    for ok in [
        "/apis/custom.metrics.k8s.io/v1beta2/dontwait",
        "/apis/metrics.k8s.io/v1/dontwait",
        "/api/v1/dontwait",
        "/healthz",
    ] {
        assert_eq!(
            status(&mut svc, Method::GET, ok, &[]).await,
            StatusCode::OK,
            "{ok}"
        );
    }
    // The group-version's discovery document counts against the same APIService.
    assert_eq!(
        status(&mut svc, Method::GET, "/apis/metrics.k8s.io/v1beta1", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let _master = start(&mut svc, Method::GET, slow, &["system:masters"]);
    assert_eq!(layer.in_flight_for("v1beta1.metrics.k8s.io"), 4);
    release_all(&handler.0);
    for f in held {
        let _ = f.await.unwrap().into_body().collect().await;
    }
    assert_eq!(layer.in_flight_for("v1beta1.metrics.k8s.io"), 0);
    assert_eq!(
        status(&mut svc, Method::GET, "/apis/metrics.k8s.io/v1beta1/x", &[]).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_dropped_request_gives_its_slot_back() {
    let handler = Blocking::default();
    let layer = InFlightLayer::new(1, 1).per_api_service(1);
    let mut svc = layer.layer(handler.clone());
    let held = start(&mut svc, Method::GET, "/apis/a.io/v1/wait", &[]);
    assert_eq!(
        status(&mut svc, Method::GET, "/apis/b.io/v1/x", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    drop(held); // e.g. the request timed out
    assert_eq!(layer.in_flight(), InFlight::default());
    assert_eq!(layer.in_flight_for("v1.a.io"), 0);
    assert_eq!(
        status(&mut svc, Method::GET, "/apis/b.io/v1/x", &[]).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn refusals_and_the_peak_in_flight_are_counted() {
    let metrics = Arc::new(crate::metrics::RequestMetrics::default());
    let layer = InFlightLayer::new(1, 1).metrics(metrics.clone());
    let mut registry = prometheus_client::registry::Registry::default();
    layer.register_metrics(&mut registry);
    let render = |registry: &prometheus_client::registry::Registry| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text
    };
    let blocking = Blocking::default();
    let mut svc = layer.layer(blocking.clone());
    let held = start(&mut svc, Method::GET, "/apis/example.io/v1/wait", &[]);
    assert_eq!(
        status(&mut svc, Method::GET, "/apis/example.io/v1/widgets", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    let labels = r#"verb="LIST",group="example.io",version="v1",resource="widgets",subresource="",scope="cluster",component="apiserver",code="429""#;
    let text = metrics.render();
    assert!(
        text.contains(&format!(
            "apiserver_request_terminations_total{{{labels}}} 1"
        )),
        "{text}"
    );
    assert!(
        text.contains(r#"apiserver_request_total{verb="LIST",dry_run="",group="example.io""#),
        "{text}"
    );

    let text = render(&registry);
    assert!(
        text.contains("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("apiserver_current_inflight_requests{request_kind=\"mutating\"} 0"),
        "{text}"
    );
    release_all(&blocking.0);
    let res = held.await.unwrap();
    drop(res.into_body().collect().await);
    // The request that is over still counts for the scrape after it, then no more.
    assert!(render(&registry).contains("request_kind=\"readOnly\"} 1"));
    assert!(render(&registry).contains("request_kind=\"readOnly\"} 0"));
}
