//! Labels as upstream derives them, and the layer's records through a real body.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use tower::{Layer as _, ServiceExt as _};

use super::*;
use crate::body::Body;

/// A namespaced list of pod metrics.
const PODS: &str = "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods";

fn request(method: &str, uri: &str) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .unwrap();
    crate::authz::request_info::ensure(&mut req).unwrap();
    req
}

fn labels(method: &str, uri: &str) -> RequestLabels {
    let req = request(method, uri);
    let info = req.extensions().get::<RequestInfo>().unwrap();
    RequestLabels::of(info, req.method(), req.uri().query(), None)
}

#[test]
fn verbs_and_scopes_follow_upstream() {
    let cases = [
        (
            "GET",
            "/apis/metrics.k8s.io/v1beta1/nodes",
            "LIST",
            "cluster",
        ),
        (
            "GET",
            "/apis/metrics.k8s.io/v1beta1/nodes/n1",
            "GET",
            "resource",
        ),
        (
            "HEAD",
            "/apis/metrics.k8s.io/v1beta1/nodes/n1",
            "GET",
            "resource",
        ),
        (
            "GET",
            "/apis/example.io/v1/namespaces/ns/widgets",
            "LIST",
            "namespace",
        ),
        (
            "GET",
            "/apis/example.io/v1/namespaces/ns/widgets?watch=true",
            "WATCH",
            "namespace",
        ),
        (
            "GET",
            "/apis/example.io/v1/widgets?watch=0",
            "LIST",
            "cluster",
        ),
        (
            "GET",
            "/apis/example.io/v1/watch/widgets",
            "WATCH",
            "cluster",
        ),
        (
            "POST",
            "/apis/example.io/v1/namespaces/ns/widgets",
            "POST",
            "resource",
        ),
        (
            "PUT",
            "/apis/example.io/v1/namespaces/ns/widgets/w",
            "PUT",
            "resource",
        ),
        (
            "PATCH",
            "/apis/example.io/v1/namespaces/ns/widgets/w",
            "PATCH",
            "resource",
        ),
        (
            "DELETE",
            "/apis/example.io/v1/namespaces/ns/widgets/w",
            "DELETE",
            "resource",
        ),
        (
            "DELETE",
            "/apis/example.io/v1/namespaces/ns/widgets",
            "DELETECOLLECTION",
            "namespace",
        ),
        (
            "POST",
            "/api/v1/namespaces/ns/pods/p/exec",
            "CONNECT",
            "resource",
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/pods/p/log",
            "CONNECT",
            "resource",
        ),
        ("OPTIONS", "/apis/example.io/v1/widgets", "other", "cluster"),
        ("GET", "/healthz", "GET", ""),
        ("GET", "/apis", "GET", ""),
        ("POST", "/version", "POST", ""),
        ("OPTIONS", "/version", "other", ""),
    ];
    for (method, uri, verb, scope) in cases {
        let l = labels(method, uri);
        assert_eq!((l.verb, l.scope), (verb, scope), "{method} {uri}");
        assert_eq!(l.component, "apiserver");
    }
    let l = labels("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/p");
    assert_eq!(
        (
            l.group.as_str(),
            l.version.as_str(),
            l.resource.as_str(),
            l.subresource.as_str()
        ),
        ("metrics.k8s.io", "v1beta1", "pods", "")
    );
    assert_eq!(
        labels("GET", "/api/v1/nodes/n/status").subresource,
        "status"
    );

    let mut req = request("PATCH", "/apis/example.io/v1/namespaces/ns/widgets/w");
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/apply-patch+yaml"),
    );
    let info = req.extensions().get::<RequestInfo>().unwrap();
    let ct = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.as_bytes());
    assert_eq!(
        RequestLabels::of(info, req.method(), None, ct).verb,
        "APPLY"
    );
}

#[test]
fn dry_run_is_empty_all_or_invalid() {
    assert_eq!(dry_run(None), "");
    assert_eq!(dry_run(Some("watch=1")), "");
    assert_eq!(dry_run(Some("dryRun=All")), "All");
    assert_eq!(dry_run(Some("dryRun=All&dryRun=All")), "All");
    assert_eq!(dry_run(Some("dryRun=Some")), "invalid");
    assert_eq!(dry_run(Some("dryRun=All&dryRun=x")), "invalid");
    assert_eq!(dry_run(Some("nodryRun=1")), "");
}

/// The value of the sample `name` in `text`, or a panic naming what is there.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn requests_are_counted_when_their_body_ends_with_upstream_names_and_buckets() {
    let metrics = Arc::new(RequestMetrics::default());
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(1);
    let rx = Arc::new(std::sync::Mutex::new(Some(rx)));
    let handler = tower::service_fn(move |req: Request<Body>| {
        let stream = (req.uri().query() == Some("watch=true"))
            .then(|| rx.lock().unwrap().take())
            .flatten();
        async move {
            let res = match (req.uri().path(), stream) {
                (_, Some(rx)) => Response::new(Body::new(http_body_util::StreamBody::new(
                    futures_util::stream::unfold(rx, |mut rx| async move {
                        let chunk = rx.recv().await?;
                        Some((Ok::<_, Infallible>(http_body::Frame::data(chunk)), rx))
                    }),
                ))),
                ("/apis/metrics.k8s.io/v1beta1/nodes", None) => {
                    Response::new(Body::full(vec![b'x'; 1500]))
                }
                _ => {
                    let mut res = Response::new(Body::full("missing"));
                    *res.status_mut() = StatusCode::NOT_FOUND;
                    res
                }
            };
            Ok::<_, Infallible>(res)
        }
    });
    let service = MetricsLayer::new(metrics.clone()).layer(handler);

    let res = service
        .clone()
        .oneshot(request("GET", "/apis/metrics.k8s.io/v1beta1/nodes"))
        .await
        .unwrap();
    // Nothing is recorded before the body has been sent.
    assert!(!metrics.render().contains("apiserver_request_total{"));
    assert_eq!(
        res.into_body().collect().await.unwrap().to_bytes().len(),
        1500
    );
    let text = metrics.render();
    let list = r#"verb="LIST",dry_run="",group="metrics.k8s.io",version="v1beta1",resource="nodes",subresource="",scope="cluster",component="apiserver""#;
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_request_total{{{list},code=\"200\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_request_duration_seconds_count{{{list}}}")
        ),
        1.0
    );
    let sizes = r#"verb="LIST",group="metrics.k8s.io",version="v1beta1",resource="nodes",subresource="",scope="cluster",component="apiserver""#;
    assert_eq!(
        sample(&text, &format!("apiserver_response_sizes_sum{{{sizes}}}")),
        1500.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_response_sizes_bucket{{le=\"1000.0\",{sizes}}}")
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_response_sizes_bucket{{le=\"10000.0\",{sizes}}}")
        ),
        1.0
    );
    // Upstream's latency buckets, from 5 ms to 60 s.
    for le in ["0.005", "0.025", "1.25", "45.0", "60.0", "+Inf"] {
        assert!(
            text.contains(&format!(
                "apiserver_request_duration_seconds_bucket{{le=\"{le}\",{list}}}"
            )),
            "bucket {le}:\n{text}"
        );
    }

    // A made-up path's 404 is counted without what the client chose.
    let res = service
        .clone()
        .oneshot(request("GET", "/apis/made.up/v9/things-1234"))
        .await
        .unwrap();
    drop(res.into_body().collect().await);
    let text = metrics.render();
    assert!(!text.contains("made.up"), "{text}");
    let bounded = r#"verb="LIST",dry_run="",group="",version="",resource="",subresource="",scope="cluster",component="apiserver",code="404""#;
    assert_eq!(
        sample(&text, &format!("apiserver_request_total{{{bounded}}}")),
        1.0
    );

    // A watch is long-running while its body streams, and counted once it ends.
    let watch = service
        .clone()
        .oneshot(request("GET", "/apis/example.io/v1/widgets?watch=true"))
        .await
        .unwrap();
    let gauge = r#"apiserver_longrunning_requests{verb="WATCH",group="example.io",version="v1",resource="widgets",subresource="",scope="cluster",component="apiserver"}"#;
    assert_eq!(sample(&metrics.render(), gauge), 1.0);
    tx.send(bytes::Bytes::from_static(b"{}\n")).await.unwrap();
    drop(tx);
    assert_eq!(
        watch.into_body().collect().await.unwrap().to_bytes(),
        "{}\n"
    );
    let text = metrics.render();
    assert_eq!(sample(&text, gauge), 0.0);
    assert!(
        text.contains(r#"apiserver_request_total{verb="WATCH""#),
        "{text}"
    );

    // A request without a RequestInfo is not recorded; a dropped body still is.
    let before = metrics.render();
    let res = service
        .clone()
        .oneshot(Request::new(Body::empty()))
        .await
        .unwrap();
    drop(res);
    assert_eq!(metrics.render(), before);

    metrics.terminated(&labels("GET", "/apis/metrics.k8s.io/v1beta1/nodes"), 429);
    let text = metrics.render();
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_request_total{{{list},code=\"429\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("apiserver_request_terminations_total{{{sizes},code=\"429\"}}")
        ),
        1.0
    );
    assert!(text.contains("# HELP apiserver_request Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n"), "{text}");
}

#[tokio::test]
async fn an_answer_that_breaks_off_is_counted_as_aborted() {
    let metrics = Arc::new(RequestMetrics::default());
    // The backend's body fails after its first bytes, as a proxied answer whose
    // connection broke.
    let handler = tower::service_fn(|_req: Request<Body>| async {
        let frames = futures_util::stream::iter([
            Ok(http_body::Frame::data(bytes::Bytes::from_static(
                b"{\"items\":[",
            ))),
            Err(crate::body::BoxError::from("connection reset")),
        ]);
        Ok::<_, Infallible>(Response::new(Body::new(http_body_util::StreamBody::new(
            frames,
        ))))
    });
    let service = MetricsLayer::new(metrics.clone()).layer(handler);
    let res = service.oneshot(request("GET", PODS)).await.unwrap();
    assert!(res.into_body().collect().await.is_err());
    let text = metrics.render();
    let aborted = r#"apiserver_request_aborts_total{verb="LIST",group="metrics.k8s.io",version="v1beta1",resource="pods",subresource="",scope="namespace"}"#;
    assert_eq!(sample(&text, aborted), 1.0);
    // Upstream's help text.
    assert!(
        text.contains("# HELP apiserver_request_aborts Number of requests which apiserver aborted possibly due to a timeout, for each group, version, verb, resource, subresource and scope.\n"),
        "{text}"
    );
    // A body that ends is no abort.
    let fine = tower::service_fn(|_req: Request<Body>| async {
        Ok::<_, Infallible>(Response::new(Body::full("{}")))
    });
    let service = MetricsLayer::new(metrics.clone()).layer(fine);
    let res = service.oneshot(request("GET", PODS)).await.unwrap();
    drop(res.into_body().collect().await.unwrap());
    assert_eq!(sample(&metrics.render(), aborted), 1.0);
}

/// A request's labels are those of `RequestLabels::of`, hashed alike; once a set has been
/// recorded, later requests with it share it, and a 404's set (whose path a client made
/// up) is never remembered, so that made-up paths cannot grow what is kept.
#[test]
fn label_sets_seen_before_are_shared() {
    let metrics = RequestMetrics::default();
    let shared = |method: &str, uri: &str| {
        let req = request(method, uri);
        let info = req.extensions().get::<RequestInfo>().unwrap();
        metrics.labels_of(info, req.method(), req.uri().query(), None)
    };
    for (method, uri) in [("GET", PODS), ("POST", PODS), ("GET", "/api/v1/nodes/n1")] {
        let got = shared(method, uri);
        let owned = Shared::new(labels(method, uri));
        assert_eq!((&*got.0, got.1), (&*owned.0, owned.1), "{method} {uri}");
    }
    // Nothing recorded yet: each request has its own copy.
    assert!(!Arc::ptr_eq(&shared("GET", PODS).0, &shared("GET", PODS).0));
    metrics.observe_shared(&shared("GET", PODS), 200, 0.01, 10);
    let (first, second) = (shared("GET", PODS), shared("GET", PODS));
    assert!(Arc::ptr_eq(&first.0, &second.0));
    assert_eq!(*first.0, labels("GET", PODS));
    // Another verb on the same path is another set.
    assert_eq!(*shared("POST", PODS).0, labels("POST", PODS));
    let made_up = "/apis/made.up/v1/things";
    metrics.observe_shared(&shared("GET", made_up), 404, 0.01, 10);
    assert!(!Arc::ptr_eq(
        &shared("GET", made_up).0,
        &shared("GET", made_up).0
    ));
    assert_eq!(*shared("GET", made_up).0, labels("GET", made_up));
}
