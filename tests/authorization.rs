//! Authorization over real TLS on 127.0.0.1: a gateway assembled from the library's layers
//! (x509 authentication, authorization by a SubjectAccessReview webhook, the aggregator)
//! in front of an extension server, and an HTTPS SubjectAccessReview webhook in the test
//! that records every review it receives and answers by a rule.
//!
//! The rows come from docs/upstream-behaviour.md §8 (Forbidden message, SAR body, failure policy, cache)
//! and §9 (the attributes RequestInfo gives), and known failure B10.

pub mod common;
#[path = "../examples/support/policy.rs"]
pub mod policy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{Backend, GROUP, H2_AND_HTTP11, JumpClock, Pki, ok, pki};
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::authz::{
    PrivilegedGroups, SubjectAccessReviewAuthorizer, SubjectAccessReviewStatus, Union,
};
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::webhook::{Backoff, Kubeconfig};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};

const BASE: &str = "/apis/widgets.example.io/v1alpha1";
const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// The SubjectAccessReview webhook
// ---------------------------------------------------------------------------------------

/// An HTTPS webhook on 127.0.0.1 that records each review's spec and answers by a rule.
type Webhook = policy::RecordingWebhook;

/// Starts a [`Webhook`] answering by `rule`, under a CA of its own.
async fn start_webhook(
    rule: impl Fn(&Value) -> SubjectAccessReviewStatus + Send + Sync + 'static,
) -> Webhook {
    let ca = pki::Ca::new("authz-ca");
    let leaf = ca.server("authz", &["127.0.0.1"]);
    Webhook::start(&ca.cert_pem, &leaf.cert_pem, &leaf.key_pem, rule).await
}

fn status(allowed: bool, denied: bool, reason: &str) -> SubjectAccessReviewStatus {
    let mut s = SubjectAccessReviewStatus::default();
    s.allowed = allowed;
    s.denied = denied;
    s.reason = reason.into();
    s
}

fn allow_all(_: &Value) -> SubjectAccessReviewStatus {
    status(true, false, "")
}

// ---------------------------------------------------------------------------------------
// The gateway and its client
// ---------------------------------------------------------------------------------------

/// Starts the gateway: x509 authentication, `authorizer`, then the aggregator routing the
/// widgets APIService to `backend` (the shared fixture), then a host handler answering 404.
async fn gateway(
    pki: &Pki,
    backend: SocketAddr,
    authorizer: SubjectAccessReviewAuthorizer,
) -> SocketAddr {
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    common::Gateway::start_with_authorizer(pki, x509, authorizer, backend)
        .await
        .addr
}

/// An HTTP/1.1 client presenting `bob`'s certificate (groups `dev`).
struct Bob {
    addr: SocketAddr,
    tls: tokio_rustls::TlsConnector,
    /// The `authentication.kubernetes.io/credential-id` the x509 authenticator derives.
    credential_id: String,
}

impl Bob {
    fn new(pki: &Pki, addr: SocketAddr) -> Bob {
        Bob::with_identity(pki, addr, "bob", &["dev"])
    }

    /// A client presenting a certificate for `user` in `groups`.
    fn with_identity(pki: &Pki, addr: SocketAddr, user: &str, groups: &[&str]) -> Bob {
        let leaf = pki.client_ca.client(user, groups);
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(pki.gateway_ca.cert_pem.as_bytes()) {
            roots.add(c.expect("CA PEM")).expect("trust anchor");
        }
        let certs = CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("client PEM");
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("client key");
        let fingerprint_of = certs.clone();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .expect("client certificate");
        let fingerprint = ring::digest::digest(&ring::digest::SHA256, &fingerprint_of[0]);
        let hex: String = fingerprint
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Bob {
            addr,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            credential_id: format!("X509SHA256={hex}"),
        }
    }

    /// Sends `method path_and_query` on a new connection; the status and the whole body.
    async fn send(&self, method: Method, path_and_query: &str) -> (StatusCode, String) {
        let exchange = async {
            let tcp = TcpStream::connect(self.addr)
                .await
                .expect("connect to the gateway");
            let name = ServerName::try_from("localhost").expect("server name");
            let tls = self.tls.connect(name, tcp).await.expect("TLS handshake");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .expect("HTTP/1.1 handshake");
            tokio::spawn(conn);
            let req = Request::builder()
                .method(method)
                .uri(path_and_query)
                .header(header::HOST, "localhost")
                .body(Empty::<Bytes>::new())
                .expect("valid request");
            let res = sender.send_request(req).await.expect("the gateway answers");
            let status = res.status();
            let body = res
                .into_body()
                .collect()
                .await
                .expect("whole body")
                .to_bytes();
            (
                status,
                String::from_utf8(body.to_vec()).expect("UTF-8 body"),
            )
        };
        tokio::time::timeout(WAIT, exchange)
            .await
            .unwrap_or_else(|_| panic!("no answer within {WAIT:?}"))
    }

    async fn get(&self, path_and_query: &str) -> (StatusCode, String) {
        self.send(Method::GET, path_and_query).await
    }

    async fn get_owned(&self, path_and_query: String) -> (StatusCode, String) {
        self.send(Method::GET, &path_and_query).await
    }
}

/// What bob's reviews carry besides the attributes: the x509 identity (with the
/// credential id kube-apiserver's x509 authenticator adds) plus the group every
/// authenticated user gets.
fn bob_spec(bob: &Bob, attributes: Value) -> Value {
    let mut spec = json!({
        "user": "bob",
        "groups": ["dev", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [bob.credential_id]},
    });
    let key = if attributes.get("path").is_some() {
        "nonResourceAttributes"
    } else {
        "resourceAttributes"
    };
    spec[key] = attributes;
    spec
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

/// §9 through §8.5 (and B10 reproduction 3): the review for each request carries the
/// attributes kube-apiserver computes; allowed requests reach the backend.
#[tokio::test]
async fn reviews_carry_the_upstream_attributes() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let webhook = start_webhook(allow_all).await;
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("attributes"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig");
    let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);

    let g = GROUP;
    let v = "v1alpha1";
    let rows: Vec<(Method, String, Value, bool)> = vec![
        (
            Method::GET,
            format!("{BASE}/namespaces/ns1/widgets/w1/status"),
            json!({"namespace": "ns1", "verb": "get", "group": g, "version": v, "resource": "widgets", "subresource": "status", "name": "w1"}),
            true,
        ),
        (
            Method::GET,
            format!("{BASE}/widgets?watch=true"),
            json!({"verb": "watch", "group": g, "version": v, "resource": "widgets"}),
            true,
        ),
        (
            Method::GET,
            BASE.to_owned(),
            json!({"path": BASE, "verb": "get"}),
            true,
        ),
        (
            Method::GET,
            format!("{BASE}/namespaces/ns1/widgets"),
            json!({"namespace": "ns1", "verb": "list", "group": g, "version": v, "resource": "widgets"}),
            true,
        ),
        (
            Method::GET,
            format!("{BASE}/namespaces/ns1/widgets?fieldSelector=metadata.name%3Dw2"),
            // The selector also travels as requirements (§8.5).
            json!({"namespace": "ns1", "verb": "list", "group": g, "version": v, "resource": "widgets", "name": "w2",
                "fieldSelector": {"requirements": [{"key": "metadata.name", "operator": "In", "values": ["w2"]}]}}),
            true,
        ),
        (
            Method::GET,
            format!("{BASE}/watch/namespaces/ns1/widgets/w3"),
            json!({"namespace": "ns1", "verb": "watch", "group": g, "version": v, "resource": "widgets", "name": "w3"}),
            true,
        ),
        (
            Method::DELETE,
            format!("{BASE}/namespaces/ns1/widgets"),
            json!({"namespace": "ns1", "verb": "deletecollection", "group": g, "version": v, "resource": "widgets"}),
            true,
        ),
        (
            Method::DELETE,
            format!("{BASE}/namespaces/ns1/widgets/w1"),
            json!({"namespace": "ns1", "verb": "delete", "group": g, "version": v, "resource": "widgets", "name": "w1"}),
            true,
        ),
        (
            Method::POST,
            format!("{BASE}/namespaces/ns1/widgets"),
            json!({"namespace": "ns1", "verb": "create", "group": g, "version": v, "resource": "widgets"}),
            true,
        ),
        (
            Method::GET,
            "/api/v1/namespaces/ns/pods/p/log".to_owned(),
            json!({"namespace": "ns", "verb": "get", "version": "v1", "resource": "pods", "subresource": "log", "name": "p"}),
            false,
        ),
        (
            Method::GET,
            "/healthz".to_owned(),
            json!({"path": "/healthz", "verb": "get"}),
            false,
        ),
    ];
    for (method, path, attributes, proxied) in rows {
        let (status, body) = bob.send(method.clone(), &path).await;
        let want = if proxied {
            StatusCode::OK
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(status, want, "{method} {path}: {body}");
        assert_eq!(
            webhook.take(),
            [bob_spec(&bob, attributes)],
            "{method} {path}"
        );
        if proxied {
            let seen = backend.next_request().await;
            assert_eq!(
                (&seen.method, seen.path_and_query()),
                (&method, path.as_str())
            );
        }
    }
}

/// §8.6 and B10 reproduction 1: a request the webhook does not allow gets 403 with
/// kube-apiserver's exact body, with the webhook's reason appended, and never reaches the
/// backend.
#[tokio::test]
async fn denied_requests_get_the_upstream_forbidden_and_never_reach_the_backend() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let webhook = start_webhook(|spec| match spec["resourceAttributes"]["name"].as_str() {
        // No opinion without a reason, as RBAC answers.
        None => status(false, false, ""),
        Some(_) => status(false, true, "no widgets for you"),
    })
    .await;
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("denied"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig");
    let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);

    let (status, body) = bob.get(&format!("{BASE}/widgets")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"widgets.widgets.example.io is forbidden: User \\\"bob\\\" cannot list resource \\\"widgets\\\" in API group \\\"widgets.example.io\\\" at the cluster scope\",\"reason\":\"Forbidden\",\"details\":{\"group\":\"widgets.example.io\",\"kind\":\"widgets\"},\"code\":403}\n"
    );
    let (status, body) = bob.get(&format!("{BASE}/namespaces/ns1/widgets/w1")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"widgets.widgets.example.io \\\"w1\\\" is forbidden: User \\\"bob\\\" cannot get resource \\\"widgets\\\" in API group \\\"widgets.example.io\\\" in the namespace \\\"ns1\\\": no widgets for you\",\"reason\":\"Forbidden\",\"details\":{\"name\":\"w1\",\"group\":\"widgets.example.io\",\"kind\":\"widgets\"},\"code\":403}\n"
    );
    assert_eq!(webhook.count(), 2);
    backend.assert_untouched();
}

/// A path RequestInfo cannot place (a bad escape, an empty resource segment) is refused
/// with a 400 Status before any SubjectAccessReview, and never reaches the backend.
#[tokio::test]
async fn malformed_paths_get_a_400_status_without_review() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let webhook = start_webhook(allow_all).await;
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("malformed"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig");
    let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);

    for (path, message) in [
        (format!("{BASE}/widgets%zz"), "invalid URL escape"),
        (format!("{BASE}//widgets"), "resource"),
    ] {
        let (status, body) = bob.get(&path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).expect("a Status");
        assert_eq!(v["kind"], "Status", "{path}: {body}");
        assert_eq!(v["reason"], "BadRequest", "{path}: {body}");
        assert_eq!(v["code"], 400, "{path}: {body}");
        let text = v["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{path}: {text}");
    }
    assert_eq!(webhook.count(), 0);
    backend.assert_untouched();
}

/// Reference §8.2/§8.4/§8.5 and B10 reproduction 2: when the webhook cannot answer, the
/// request fails closed with kube-apiserver's 500 text, and the backend is never reached.
#[tokio::test]
async fn webhook_failures_never_let_a_request_through() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let fast = Backoff {
        initial: Duration::from_millis(10),
        factor: 1.5,
        jitter: 0.2,
        steps: 3,
    };
    let path = format!("{BASE}/widgets");
    let prefix = format!("Internal Server Error: \"{path}\": ");

    // Nothing listening: connection refused on every attempt.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let closed_addr = closed.local_addr().expect("address");
    drop(closed);
    // Accepts TCP but never completes the TLS handshake: each attempt times out.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_addr = silent.local_addr().expect("address");
    // Answers, but with an error status or an impossible review.
    let failing = start_webhook(|_| status(true, true, "")).await;

    let ca = pki::Ca::new("unused-ca");
    let mut configs = vec![
        (
            "refused",
            policy::webhook_kubeconfig(
                &format!("https://{closed_addr}/authorize"),
                ca.cert_pem.as_bytes(),
            ),
            "connect",
        ),
        (
            "silent",
            policy::webhook_kubeconfig(
                &format!("https://{silent_addr}/authorize"),
                ca.cert_pem.as_bytes(),
            ),
            "context deadline exceeded",
        ),
        (
            "allow and deny",
            failing.kubeconfig.clone(),
            "webhook subject access review returned both allow and deny response",
        ),
    ];
    for (what, kubeconfig, cause) in configs.drain(..) {
        let client = Kubeconfig::parse(&kubeconfig, std::path::Path::new("."))
            .expect("kubeconfig")
            .client(Executor::tokio(), Timer::tokio())
            .expect("webhook client")
            .with_backoff(fast)
            .with_timeout(Duration::from_millis(300));
        let authorizer = SubjectAccessReviewAuthorizer::new(client, Timer::tokio());
        let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);
        for _ in 0..2 {
            let (status, body) = bob.get(&path).await;
            assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{what}: {body}");
            assert!(body.starts_with(&prefix), "{what}: {body}");
            assert!(body.contains(cause), "{what}: {body}");
        }
    }
    // As upstream, the impossible answer is a well-formed review, so it is cached and
    // keeps failing the same way; transport failures are never cached.
    assert_eq!(failing.count(), 1);
    drop(silent);
    backend.assert_untouched();
}

/// Reference §8.5 cache: an Allow is reused within the authorized TTL; a Deny is
/// reused within the unauthorized TTL and asked again after it.
#[tokio::test]
async fn allow_is_cached_and_deny_is_asked_again_after_its_ttl() {
    let pki = Pki::new();
    let backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let webhook = start_webhook(|spec| {
        let allowed = spec["resourceAttributes"]["name"] == "w1";
        status(allowed, false, "")
    })
    .await;
    // The cache reads the injected clock, which the test moves: TTLs far longer than the
    // test takes, so only the moves end them.
    let unauthorized_ttl = Duration::from_secs(60);
    let clock = JumpClock::default();
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("cache"),
        Executor::tokio(),
        clock.timer(),
    )
    .expect("webhook kubeconfig")
    .authorized_ttl(Duration::from_secs(300))
    .unauthorized_ttl(unauthorized_ttl);
    let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);
    let allowed = format!("{BASE}/namespaces/ns1/widgets/w1");
    let denied = format!("{BASE}/namespaces/ns1/widgets/w2");

    for _ in 0..3 {
        assert_eq!(bob.get(&allowed).await.0, StatusCode::OK);
    }
    assert_eq!(webhook.count(), 1, "the Allow is reused");
    for _ in 0..2 {
        assert_eq!(bob.get(&denied).await.0, StatusCode::FORBIDDEN);
    }
    assert_eq!(webhook.count(), 2, "the Deny is reused within its TTL");

    clock.advance(unauthorized_ttl / 2);
    assert_eq!(bob.get(&denied).await.0, StatusCode::FORBIDDEN);
    assert_eq!(webhook.count(), 2, "the Deny is reused until its TTL ends");
    clock.advance(unauthorized_ttl / 2 + Duration::from_secs(1));
    assert_eq!(bob.get(&denied).await.0, StatusCode::FORBIDDEN);
    assert_eq!(webhook.count(), 3, "the Deny is asked again after its TTL");
    assert_eq!(bob.get(&allowed).await.0, StatusCode::OK);
    assert_eq!(webhook.count(), 3, "the Allow is still within its TTL");
}

/// Issue: routing and authorization once read `//` differently, so
/// `/apis//widgets.example.io/v1alpha1/...` was authorized as the core group (version
/// `widgets.example.io`) and proxied to the widgets APIService. Both now read one parse
/// of the path: every variant a policy allowing only the core group sees is either
/// authorized as widgets (403) or routed nowhere (the host's 404), and none reaches the
/// backend. Upstream's mux matches only `/apis/<g>/<v>` and `/apis/<g>/<v>/...`.
#[tokio::test]
async fn double_slash_and_escaped_slash_paths_never_reach_a_backend_unauthorized() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    // Anything in the core group and any non-resource URL; nothing in widgets.
    let webhook = start_webhook(|spec| {
        let core =
            spec["resourceAttributes"]["group"].is_null() && spec["resourceAttributes"].is_object();
        let non_resource = spec["nonResourceAttributes"].is_object();
        status(core || non_resource, false, "")
    })
    .await;
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("double-slash"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig");
    let bob = Bob::new(&pki, gateway(&pki, backend.addr, authorizer).await);

    let rest = "namespaces/kube-system/widgets/secret-thing";
    for (path, want) in [
        (format!("{BASE}/{rest}"), StatusCode::FORBIDDEN),
        (
            format!("/apis//{GROUP}/v1alpha1/{rest}"),
            StatusCode::NOT_FOUND,
        ),
        // Group widgets, version "", resource v1alpha1: asked of the policy as widgets.
        (
            format!("/apis/{GROUP}//v1alpha1/{rest}"),
            StatusCode::FORBIDDEN,
        ),
        (
            format!("/apis/%2F{GROUP}/v1alpha1/{rest}"),
            StatusCode::NOT_FOUND,
        ),
        (
            format!("/apis/{GROUP}%2F%2Fv1alpha1/{rest}"),
            StatusCode::FORBIDDEN,
        ),
        (
            format!("/apis%2F{GROUP}/v1alpha1/{rest}"),
            StatusCode::FORBIDDEN,
        ),
        (
            format!("//apis/{GROUP}/v1alpha1/{rest}"),
            StatusCode::FORBIDDEN,
        ),
        (
            format!("/apis/{GROUP}%2Fv1alpha1/{rest}"),
            StatusCode::FORBIDDEN,
        ),
        (format!("/apis//{GROUP}/v1alpha1"), StatusCode::NOT_FOUND),
        (format!("/apis//{GROUP}/v1alpha1/"), StatusCode::NOT_FOUND),
        (format!("/apis/{GROUP}//v1alpha1"), StatusCode::FORBIDDEN),
    ] {
        let (status, body) = bob.get(&path).await;
        assert_eq!(status, want, "{path}: {body}");
        if want == StatusCode::NOT_FOUND {
            assert!(body.starts_with("inner: GET "), "{path}: {body}");
        }
    }
    backend.assert_untouched();
}

/// An HTTPS webhook that reads each review and never answers; counts the reviews.
async fn hanging_webhook(calls: Arc<std::sync::atomic::AtomicUsize>) -> String {
    let ca = pki::Ca::new("hanging-authz-ca");
    let leaf = ca.server("authz", &["127.0.0.1"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let tls = common::server_tls(&leaf, "");
    let service = tower::service_fn(move |_: Request<hyper::body::Incoming>| {
        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::pending::<
            Result<http::Response<kube_aggregator::Body>, std::convert::Infallible>,
        >()
    });
    tokio::spawn(kube_aggregator::server::serve_tls(
        listener,
        tls,
        service,
        std::future::pending(),
    ));
    policy::webhook_kubeconfig(&format!("https://{addr}/authorize"), ca.cert_pem.as_bytes())
}

/// A SubjectAccessReview webhook that hangs costs each request exactly one call (a timed
/// out attempt is not retried, as upstream's `DefaultShouldRetry`), and the request fails
/// closed at the client timeout; `system:masters` is allowed by the privileged-group
/// authorizer in front of it without asking the webhook at all.
#[tokio::test]
async fn a_hanging_webhook_gets_one_call_per_request_and_masters_never_wait_for_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let kubeconfig = hanging_webhook(calls.clone()).await;
    let timeout = Duration::from_millis(500);
    // The default backoff (5 steps): nothing here shortens the retries.
    let client = Kubeconfig::parse(&kubeconfig, std::path::Path::new("."))
        .expect("kubeconfig")
        .client(Executor::tokio(), Timer::tokio())
        .expect("webhook client")
        .with_timeout(timeout);
    let authorizer = Union::new()
        .push("privileged-groups", PrivilegedGroups::system_masters())
        .push(
            "Webhook",
            SubjectAccessReviewAuthorizer::new(client, Timer::tokio()),
        );
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let addr = common::Gateway::start_with_authorizer(&pki, x509, authorizer, backend.addr)
        .await
        .addr;
    let bob = Bob::new(&pki, addr);
    let root = Bob::with_identity(&pki, addr, "root", &["system:masters"]);

    for i in 1..=3 {
        let started = std::time::Instant::now();
        let (status, body) = bob
            .get(&format!("{BASE}/namespaces/ns1/widgets/w{i}"))
            .await;
        let took = started.elapsed();
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
        assert!(body.contains("context deadline exceeded"), "{body}");
        assert!(
            took >= timeout && took < timeout * 3,
            "answered after {took:?} with a {timeout:?} webhook timeout"
        );
        assert_eq!(calls.load(Ordering::SeqCst), i, "calls after request {i}");
    }

    // Twenty at once: twenty calls, not a hundred.
    let answers = futures_util::future::join_all(
        (0..20).map(|i| bob.get_owned(format!("{BASE}/namespaces/ns2/widgets/c{i}"))),
    )
    .await;
    assert!(
        answers
            .iter()
            .all(|(s, _)| *s == StatusCode::INTERNAL_SERVER_ERROR)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 23);

    let started = std::time::Instant::now();
    let (status, body) = root
        .get(&format!("{BASE}/namespaces/kube-system/widgets/w1"))
        .await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "some data"));
    assert!(
        started.elapsed() < timeout,
        "system:masters waited {:?}",
        started.elapsed()
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        23,
        "system:masters was asked of the webhook"
    );
    backend.next_request().await;
}

/// A traced request's decision by the webhook is a `webhook` span under `authorization`,
/// both in the request's trace (the `opentelemetry` feature).
#[cfg(feature = "opentelemetry")]
#[tokio::test]
async fn the_webhooks_call_is_a_span_under_authorization() {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let pki = Pki::new();
    let backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let webhook = start_webhook(allow_all).await;
    let authorizer = SubjectAccessReviewAuthorizer::from_kubeconfig(
        &webhook.config_file("traced"),
        Executor::tokio(),
        Timer::tokio(),
    )
    .expect("webhook kubeconfig");
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let stack = common::builder(&pki, backend.addr)
        .authenticator(x509)
        .authorizer(authorizer)
        .tracing(kube_aggregator::trace::TracingLayer::new(
            provider.tracer("test"),
        ));
    let (addr, _aggregator) = common::start_gateway(
        &pki,
        stack,
        vec![common::widgets_apiservice(&pki)],
        common::host(),
    )
    .await;
    let (status, body) = Bob::new(&pki, addr)
        .send(
            Method::GET,
            &format!("{}/namespaces/ns1/widgets/w1", common::BASE),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(webhook.count(), 1, "one review");

    let spans = exporter.get_finished_spans().expect("spans");
    let one = |name: &str| {
        let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "one {name} span: {spans:#?}");
        found[0]
    };
    let (authorization, call) = (one("authorization"), one("webhook"));
    assert_eq!(call.parent_span_id, authorization.span_context.span_id());
    assert_eq!(
        call.span_context.trace_id(),
        authorization.span_context.trace_id()
    );
    assert!(call.start_time >= authorization.start_time && call.end_time <= authorization.end_time);
    let attribute = |span: &opentelemetry_sdk::trace::SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        attribute(authorization, "decision").as_deref(),
        Some("allow")
    );
    assert_eq!(
        attribute(call, "http.response.status_code").as_deref(),
        Some("200")
    );
    assert!(
        attribute(call, "url.full").is_some_and(|u| u.ends_with("/authorize")),
        "{call:?}"
    );
}
