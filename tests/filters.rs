//! kube-apiserver's filters around the aggregator, over real TLS on 127.0.0.1: the
//! gateway `Aggregator::builder` assembles in upstream's order (Audit-Id, Cache-Control,
//! request timeout, x509 authentication, impersonation, in-flight limits, authorization
//! by a real HTTPS SubjectAccessReview webhook, self reviews, the aggregator) in front of
//! an HTTPS extension server.
//!
//! The rows come from docs/upstream-behaviour.md §8.5 (selectors), §11 (impersonation),
//! §12 (timeouts, long-running), §13 (max-in-flight), §16 (Audit-Id) and known failures
//! B07 and B20.

pub mod common;
#[path = "../examples/support/policy.rs"]
pub mod policy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{
    AsyncBackend, AsyncHandler, Client, H2_AND_HTTP11, HTTP11_ONLY, Pki, Protocol, channel_body,
    pki,
};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube_aggregator::Body;
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::authz::{
    PrivilegedGroups, SubjectAccessReviewAuthorizer, SubjectAccessReviewStatus, Union,
};
use kube_aggregator::inflight::InFlightLayer;
use kube_aggregator::rt::{Executor, Timer};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const WIDGETS: &str = "/apis/widgets.example.io/v1alpha1";
const GADGETS: &str = "/apis/gadgets.example.io/v1";
const WAIT: Duration = Duration::from_secs(10);

/// The SubjectAccessReview webhook with the test policy ([`rule`]).
type Webhook = policy::RecordingWebhook;

/// The test policy: `admin` may do anything and impersonate anyone but
/// `system:masters`; `bob` (and group `team`) may read widgets and gadgets; everyone may
/// read non-resource paths; `mallory` nothing else.
fn rule(spec: &Value) -> SubjectAccessReviewStatus {
    let mut s = SubjectAccessReviewStatus::default();
    let user = spec["user"].as_str().unwrap_or("");
    let r = &spec["resourceAttributes"];
    let verb = r["verb"].as_str().unwrap_or("");
    if spec.get("nonResourceAttributes").is_some() {
        s.allowed = true;
    } else if verb == "impersonate" {
        s.allowed = user == "admin" && r["name"] != "system:masters";
        if !s.allowed {
            s.reason = "no escalation".into();
        }
    } else if user == "admin" {
        s.allowed = true;
    } else if user == "bob"
        || spec["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "team"))
    {
        s.allowed = matches!(verb, "get" | "list" | "watch");
    }
    s
}

/// Starts the [`Webhook`] under a CA of its own.
async fn start_webhook() -> Webhook {
    let ca = pki::Ca::new("authz-ca");
    let leaf = ca.server("authz", &["127.0.0.1"]);
    Webhook::start(&ca.cert_pem, &leaf.cert_pem, &leaf.key_pem, rule).await
}

/// `--max-requests-inflight`, `--max-mutating-requests-inflight` and the limit per
/// APIService of a gateway.
type Limits = (usize, usize, usize);

/// kube-apiserver's defaults, no limit per APIService.
const DEFAULT_LIMITS: Limits = (400, 200, 0);

/// Starts the gateway `Aggregator::builder` assembles, in kube-apiserver's order;
/// `timeout` is `--request-timeout`. Returns its address and its in-flight limits (to read
/// their counts).
async fn gateway(
    pki: &Pki,
    backend: SocketAddr,
    webhook: &Webhook,
    timeout: Duration,
    (read, mutating, per_api_service): Limits,
) -> (SocketAddr, InFlightLayer) {
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    // No decision cache: every request asks the webhook, so the reviews show each check.
    let sar = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("filters"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig")
    .authorized_ttl(Duration::ZERO)
    .unauthorized_ttl(Duration::ZERO);
    let authorizer = Union::new()
        .push("privileged-groups", PrivilegedGroups::system_masters())
        .push("Webhook", sar);
    let builder = common::builder(pki, backend)
        .authenticator(x509)
        .authorizer(authorizer)
        .request_timeout(timeout)
        .max_requests_inflight(read, mutating, per_api_service);
    let apiservices = vec![
        common::widgets_apiservice(pki),
        common::gadgets_apiservice(pki),
    ];
    let (addr, aggregator) = common::start_gateway(pki, builder, apiservices, common::host()).await;
    (addr, aggregator.inflight().clone())
}

/// What the backend received, as (path and query, headers).
type Arrivals = mpsc::UnboundedReceiver<(String, HeaderMap)>;

/// The backend: `.../hang` never answers, `?watch=true` streams two events 1.5 s apart,
/// everything else answers `ok`.
async fn backend(pki: &Pki, alpn: &[&[u8]]) -> (AsyncBackend, Arrivals) {
    let (tx, rx) = mpsc::unbounded_channel();
    let handler: AsyncHandler = Arc::new(move |seen: common::Seen| {
        let path = seen.path_and_query().to_owned();
        let _ = tx.send((path.clone(), seen.headers.clone()));
        Box::pin(async move {
            if path.contains("/hang") {
                std::future::pending::<()>().await;
            }
            if path.contains("watch=true") {
                let (chunks, body) = mpsc::unbounded_channel();
                tokio::spawn(async move {
                    let _ = chunks.send(Bytes::from_static(b"{\"type\":\"ADDED\"}\n"));
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    let _ = chunks.send(Bytes::from_static(b"{\"type\":\"MODIFIED\"}\n"));
                });
                return Response::new(channel_body(body));
            }
            Response::new(Body::full("ok"))
        })
    });
    (AsyncBackend::start(pki, alpn, handler).await, rx)
}

fn values<'a>(h: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    h.get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_is_checked_with_the_webhook_and_never_reaches_the_backend() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let (backend, mut arrivals) = backend(&pki, H2_AND_HTTP11).await;
    let addr = gateway(
        &pki,
        backend.addr,
        &webhook,
        Duration::from_secs(60),
        DEFAULT_LIMITS,
    )
    .await
    .0;
    let admin = pki.client_ca.client("admin", &["ops"]);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, addr, Some(&admin), protocol);
        let reply = client
            .get_with(
                &format!("{WIDGETS}/widgets"),
                &[
                    ("Impersonate-User", "bob"),
                    ("Impersonate-Group", "team"),
                    ("Impersonate-Extra-Scopes", "s1"),
                    ("Impersonate-Uid", "u-1"),
                ],
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{protocol:?}: {}", reply.body);
        assert!(reply.headers.contains_key("audit-id"));
        let (_, seen) = tokio::time::timeout(WAIT, arrivals.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(values(&seen, "x-remote-user"), ["bob"]);
        assert_eq!(
            values(&seen, "x-remote-group"),
            ["team", "system:authenticated"]
        );
        assert_eq!(values(&seen, "x-remote-extra-scopes"), ["s1"]);
        assert!(
            seen.keys().all(|k| !k.as_str().starts_with("impersonate-")),
            "{protocol:?}: {seen:?}"
        );
        // Every check, in upstream's order, for the requester; then the request, for bob.
        let reviews = webhook.take();
        let checks: Vec<[&str; 4]> = reviews
            .iter()
            .map(|r| {
                let a = &r["resourceAttributes"];
                ["verb", "resource", "subresource", "name"].map(|k| a[k].as_str().unwrap_or(""))
            })
            .collect();
        assert_eq!(
            checks,
            [
                ["impersonate", "users", "", "bob"],
                ["impersonate", "groups", "", "team"],
                ["impersonate", "userextras", "scopes", "s1"],
                ["impersonate", "uids", "", "u-1"],
                ["list", "widgets", "", ""],
            ]
        );
        assert_eq!(reviews[0]["user"], "admin");
        assert_eq!(
            reviews[2]["resourceAttributes"]["group"],
            "authentication.k8s.io"
        );
        assert_eq!(reviews[4]["user"], "bob");
        assert_eq!(reviews[4]["uid"], "u-1");
        assert_eq!(
            reviews[4]["groups"],
            json!(["team", "system:authenticated"])
        );
        assert_eq!(reviews[4]["extra"], json!({"scopes": ["s1"]}));
    }

    // Refused: a group the policy keeps, another user impersonating, a group without a
    // user. Nothing reaches the backend.
    let arrived = backend.arrived.load(Ordering::SeqCst);
    let client = Client::new(&pki, addr, Some(&admin), Protocol::Http1);
    let reply = client
        .get_with(
            &format!("{WIDGETS}/widgets"),
            &[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "system:masters"),
            ],
        )
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert_eq!(
        reply.body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"groups \\\"system:masters\\\" is forbidden: User \\\"admin\\\" cannot impersonate resource \\\"groups\\\" in API group \\\"\\\" at the cluster scope: Webhook: no escalation\",\"reason\":\"Forbidden\",\"details\":{\"name\":\"system:masters\",\"kind\":\"groups\"},\"code\":403}\n"
    );
    let mallory = pki.client_ca.client("mallory", &[]);
    let reply = Client::new(&pki, addr, Some(&mallory), Protocol::Http2)
        .get_with(
            &format!("{WIDGETS}/widgets"),
            &[(
                "Impersonate-User",
                "system:serviceaccount:kube-system:admin",
            )],
        )
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(reply.body.contains(r#""message":"serviceaccounts \"admin\" is forbidden: User \"mallory\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"kube-system\": Webhook: no escalation""#), "{}", reply.body);
    let reply = client
        .get_with(
            &format!("{WIDGETS}/widgets"),
            &[("Impersonate-Group", "team")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply
            .body
            .contains("requested [{Group  team    }] without impersonating a user"),
        "{}",
        reply.body
    );
    assert_eq!(
        backend.arrived.load(Ordering::SeqCst),
        arrived,
        "the backend saw none of them"
    );
}

/// A request whose body is still arriving when its deadline passes: the client gets the
/// 504, and the backend's HTTP/2 stream is reset, not left open with the body's pipe
/// still waiting on the client (which would hold the backend's work and the connection's
/// window for as long as the client keeps its upload open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_by_its_deadline_resets_the_backend_stream() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let admin = pki.client_ca.client("admin", &[]);
    let (backend, _arrivals) = backend(&pki, &[b"h2"]).await;
    let addr = gateway(
        &pki,
        backend.addr,
        &webhook,
        Duration::from_secs(60),
        DEFAULT_LIMITS,
    )
    .await
    .0;
    let path = format!("{WIDGETS}/namespaces/a/widgets/w/hang?timeout=300ms");
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, addr, Some(&admin), protocol);
        let cancelled = backend.cancelled.load(Ordering::SeqCst);
        // One chunk now; the sender is kept, so the body never ends.
        let (chunks, body) = mpsc::unbounded_channel();
        chunks
            .send(Bytes::from_static(b"{\"kind\":"))
            .expect("the body channel is open");
        let status = client
            .send_body(Method::POST, &path, channel_body(body))
            .await
            .expect("an answer")
            .status();
        assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{protocol:?}");
        let deadline = Instant::now() + WAIT;
        while backend.cancelled.load(Ordering::SeqCst) == cancelled {
            assert!(
                Instant::now() < deadline,
                "{protocol:?}: the backend stream of the cut upload was never reset"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(chunks);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_backend_gets_the_504_and_its_stream_is_released_while_a_watch_outlives_it() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let admin = pki.client_ca.client("admin", &[]);
    for alpn in [H2_AND_HTTP11, HTTP11_ONLY] {
        let (backend, _arrivals) = backend(&pki, alpn).await;
        let addr = gateway(
            &pki,
            backend.addr,
            &webhook,
            Duration::from_secs(1),
            DEFAULT_LIMITS,
        )
        .await
        .0;
        for protocol in [Protocol::Http1, Protocol::Http2] {
            let client = Client::new(&pki, addr, Some(&admin), protocol);
            let cancelled = backend.cancelled.load(Ordering::SeqCst);
            let started = Instant::now();
            let reply = client
                .get(&format!("{WIDGETS}/namespaces/a/widgets/w/hang"))
                .await;
            let took = started.elapsed();
            assert_eq!(
                reply.status,
                StatusCode::GATEWAY_TIMEOUT,
                "{alpn:?} {protocol:?}"
            );
            assert!(
                took >= Duration::from_millis(950) && took < Duration::from_secs(5),
                "{took:?}"
            );
            assert_eq!(
                reply.body,
                "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n"
            );
            assert!(reply.headers.contains_key("audit-id"));
            // The backend's request is cancelled: its stream reset or connection closed.
            let deadline = Instant::now() + WAIT;
            while backend.cancelled.load(Ordering::SeqCst) == cancelled {
                assert!(
                    Instant::now() < deadline,
                    "{alpn:?} {protocol:?}: the backend request was never released"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // ?timeout= shortens the deadline.
            let started = Instant::now();
            let reply = client
                .get(&format!(
                    "{WIDGETS}/namespaces/a/widgets/w/hang?timeout=200ms"
                ))
                .await;
            assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
            assert!(
                started.elapsed() < Duration::from_millis(900),
                "{:?}",
                started.elapsed()
            );
            let reply = client.get(&format!("{WIDGETS}/widgets?timeout=soon")).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST);
            assert!(reply.body.contains(r#"invalid timeout specified in the request URL - time: invalid duration \"soon\""#), "{}", reply.body);
        }
        // A watch is long-running: its second event comes after the 1 s timeout.
        let client = Client::new(&pki, addr, Some(&admin), Protocol::Http2);
        let started = Instant::now();
        let res = client
            .open(&format!("{WIDGETS}/widgets?watch=true"), &[])
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        let mut lines = common::Lines::new(res.into_body());
        assert_eq!(
            lines.next().await.as_deref(),
            Some("{\"type\":\"ADDED\"}\n")
        );
        assert_eq!(
            lines.next().await.as_deref(),
            Some("{\"type\":\"MODIFIED\"}\n")
        );
        assert!(started.elapsed() > Duration::from_millis(1400));
    }
}

/// Sends `count` GETs of `path` over `connections` HTTP/2 connections at once; the
/// status (and `Retry-After`) of each as it is answered.
async fn pile_up(
    client: &Client,
    path: &str,
    count: usize,
    connections: usize,
) -> mpsc::UnboundedReceiver<(StatusCode, Option<String>)> {
    let mut senders = Vec::new();
    for _ in 0..connections {
        let tls = client.connect().await;
        let (sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .expect("HTTP/2 handshake");
        tokio::spawn(conn);
        senders.push(sender);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..count {
        let mut sender = senders[i % connections].clone();
        let tx = tx.clone();
        let uri = format!("https://localhost{path}");
        tokio::spawn(async move {
            let req = Request::get(uri).body(Empty::<Bytes>::new()).unwrap();
            if let Ok(res) = sender.send_request(req).await {
                let retry = res
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap().to_owned());
                let _ = tx.send((res.status(), retry));
                let _ = res.into_body().collect().await;
            }
        });
    }
    drop(tx);
    rx
}

/// The first `n` answers of [`pile_up`], each within [`WAIT`] of the one before.
async fn answers(
    rx: &mut mpsc::UnboundedReceiver<(StatusCode, Option<String>)>,
    n: usize,
) -> Vec<(StatusCode, Option<String>)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(WAIT, rx.recv()).await {
            Ok(Some(answer)) => out.push(answer),
            Ok(None) => panic!("only {} of {n} requests answered", out.len()),
            Err(_) => panic!(
                "{} of {n} requests answered, no more within {WAIT:?}",
                out.len()
            ),
        }
    }
    out
}

/// Waits until the backend has seen `n` requests.
async fn arrived(backend: &AsyncBackend, n: usize) {
    let deadline = Instant::now() + WAIT;
    while backend.arrived.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} requests reached the backend within {WAIT:?}",
            backend.arrived.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pile_up_on_one_apiservice_leaves_the_others_answering() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let (backend, _arrivals) = backend(&pki, H2_AND_HTTP11).await;
    let (addr, limits) = gateway(
        &pki,
        backend.addr,
        &webhook,
        Duration::from_secs(60),
        (40, 20, 10),
    )
    .await;
    let admin = pki.client_ca.client("admin", &[]);
    let client = Client::new(&pki, addr, Some(&admin), Protocol::Http2);
    let mut pending = pile_up(
        &client,
        &format!("{WIDGETS}/namespaces/a/widgets/w/hang"),
        1000,
        4,
    )
    .await;
    // 10 hang at the backend, the rest are refused at once; once the 10 are there, no
    // request is left to answer.
    let answered = answers(&mut pending, 990).await;
    assert!(
        answered
            .iter()
            .all(|(s, r)| *s == StatusCode::TOO_MANY_REQUESTS && r.as_deref() == Some("1"))
    );
    arrived(&backend, 10).await;
    assert!(
        pending.try_recv().is_err(),
        "a hanging request was answered"
    );
    assert_eq!(limits.in_flight_for("v1alpha1.widgets.example.io"), 10);
    assert_eq!(limits.in_flight().read_only, 10);
    assert_eq!(backend.arrived.load(Ordering::SeqCst), 10);
    // Another APIService and a local path answer.
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let other = Client::new(&pki, addr, Some(&admin), protocol);
        let reply = other.get(&format!("{GADGETS}/gadgets")).await;
        assert_eq!((reply.status, reply.body.as_str()), (StatusCode::OK, "ok"));
        let reply = other.get("/api/v1/nodes").await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::NOT_FOUND, "inner: GET /api/v1/nodes")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_answers_429_with_retry_after_and_masters_are_exempt() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let (backend, _arrivals) = backend(&pki, H2_AND_HTTP11).await;
    let addr = gateway(
        &pki,
        backend.addr,
        &webhook,
        Duration::from_secs(60),
        (3, 1, 0),
    )
    .await
    .0;
    let admin = pki.client_ca.client("admin", &[]);
    let client = Client::new(&pki, addr, Some(&admin), Protocol::Http2);
    let mut pending = pile_up(
        &client,
        &format!("{WIDGETS}/namespaces/a/widgets/w/hang"),
        3,
        1,
    )
    .await;
    // The three take the three read-only places and hang at the backend; the next request
    // is refused, so none of the three has been answered (it would have freed its place).
    arrived(&backend, 3).await;
    let reply = Client::new(&pki, addr, Some(&admin), Protocol::Http1)
        .get(&format!("{GADGETS}/gadgets"))
        .await;
    assert!(
        pending.try_recv().is_err(),
        "a hanging request was answered"
    );
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.body, "Too many requests, please try again later.\n");
    assert_eq!(reply.headers["retry-after"], "1");
    assert_eq!(reply.headers["content-type"], "text/plain; charset=utf-8");
    assert!(reply.headers.contains_key("audit-id"));
    // A watch is not counted; system:masters is served anyway.
    let res = client
        .open(&format!("{GADGETS}/gadgets?watch=true"), &[])
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let root = pki.client_ca.client("root", &["system:masters"]);
    let reply = Client::new(&pki, addr, Some(&root), Protocol::Http1)
        .get(&format!("{GADGETS}/gadgets"))
        .await;
    assert_eq!((reply.status, reply.body.as_str()), (StatusCode::OK, "ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stray_connection_upgrade_is_a_plain_request_and_selectors_reach_the_webhook() {
    let pki = Pki::new();
    let webhook = start_webhook().await;
    let (_backend, mut arrivals) = backend(&pki, H2_AND_HTTP11).await;
    let addr = gateway(
        &pki,
        _backend.addr,
        &webhook,
        Duration::from_secs(60),
        DEFAULT_LIMITS,
    )
    .await
    .0;
    let bob = pki.client_ca.client("bob", &["dev"]);
    let client = Client::new(&pki, addr, Some(&bob), Protocol::Http1);
    let reply = client
        .get_with(&format!("{WIDGETS}/widgets?labelSelector=app%3Dweb&fieldSelector=metadata.namespace!%3Dkube-system"), &[("Connection", "Upgrade")])
        .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "ok"),
        "proxied as the plain GET it is"
    );
    let (path, seen) = arrivals.recv().await.unwrap();
    assert!(path.starts_with("/apis/widgets.example.io/v1alpha1/widgets?"));
    assert!(
        !seen.contains_key("upgrade") && !seen.contains_key("connection"),
        "{seen:?}"
    );
    let review = webhook.take().pop().unwrap();
    assert_eq!(
        review["resourceAttributes"],
        json!({
            "verb": "list", "group": "widgets.example.io", "version": "v1alpha1", "resource": "widgets",
            "fieldSelector": {"requirements": [{"key": "metadata.namespace", "operator": "NotIn", "values": ["kube-system"]}]},
            "labelSelector": {"requirements": [{"key": "app", "operator": "In", "values": ["web"]}]},
        })
    );
}
