//! Authentication over real TLS on 127.0.0.1: the gateway of `tests/common` with the
//! library's authenticators, clients presenting certificates and tokens, and a TokenReview
//! webhook served over HTTPS by the test itself.
//!
//! Rows: known failures B05 (client-supplied identity headers), B06 (user certificates
//! acting as the front proxy), FailOnError (a bad token with anonymous on is 401), and the
//! token cache (one webhook call for many concurrent requests, none within the TTL).

pub mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use common::{BASE, Client, Fixture, H2_AND_HTTP11, Pki, Protocol, ok, pki};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube_aggregator::authn::{
    Anonymous, BearerToken, CacheTtl, RequestHeaderAuthenticator, RequestHeaderConfig,
    TokenFileAuthenticator, TokenReviewAuthenticator, Union, X509Authenticator,
};
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::{Body, server};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

/// kube-apiserver's chain: front proxy (CN `front-proxy-client` only), then x509.
fn front_proxy_and_x509(front_proxy_ca: &str, client_ca: &str, allowed: &[&str]) -> Union {
    let rh = RequestHeaderAuthenticator::from_pem(
        front_proxy_ca.as_bytes(),
        RequestHeaderConfig::default(),
    )
    .expect("front-proxy CA")
    .with_allowed_names(allowed.iter().copied());
    let x509 = X509Authenticator::from_pem(client_ca.as_bytes()).expect("client CA");
    Union::new().push(rh).push(x509)
}

/// A client of `f`'s gateway. The fixture has its own PKI for the gateway and backend; the
/// tests' certificates come from their own `Pki`, whose CAs the authenticators trust.
fn client(f: &Fixture, cert: Option<&pki::Leaf>, protocol: Protocol) -> Client {
    Client::new(&f.pki, f.gateway.addr, cert, protocol)
}

const INJECTED: &[(&str, &str)] = &[
    ("x-remote-user", "system:admin"),
    ("x-remote-group", "system:masters"),
    ("x-remote-uid", "0"),
    ("x-remote-extra-scopes", "all"),
];

#[tokio::test]
async fn front_proxy_with_a_cn_not_allowed_is_refused() {
    let pki = Pki::new();
    let chain = front_proxy_and_x509(
        &pki.front_proxy_ca.cert_pem,
        &pki.client_ca.cert_pem,
        &["front-proxy-client"],
    );
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    let rogue = pki.front_proxy_ca.client("rogue-proxy", &[]);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let reply = client(&f, Some(&rogue), protocol)
            .get_with(&format!("{BASE}/widgets"), INJECTED)
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{protocol:?}");
        assert_eq!(reply.body, UNAUTHORIZED);
    }
    f.backend.assert_untouched();
    // The allowed proxy is trusted, and its headers name the user.
    let proxy = pki.front_proxy_ca.client("front-proxy-client", &[]);
    let reply = client(&f, Some(&proxy), Protocol::Http1)
        .get_with(
            &format!("{BASE}/widgets"),
            &[("x-remote-user", "bob"), ("x-remote-group", "devs")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = f.backend.next_request().await;
    assert_eq!(seen.all("x-remote-user"), ["bob"]);
    assert_eq!(seen.all("x-remote-group"), ["devs", "system:authenticated"]);
}

#[tokio::test]
async fn b06_a_user_certificate_from_the_requestheader_ca_cannot_set_x_remote_user() {
    let pki = Pki::new();
    let chain = front_proxy_and_x509(
        &pki.front_proxy_ca.cert_pem,
        &pki.client_ca.cert_pem,
        &["front-proxy-client"],
    );
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    let user_b = pki.front_proxy_ca.client("user-b", &["devs"]);
    let reply = client(&f, Some(&user_b), Protocol::Http1)
        .get_with(&format!("{BASE}/widgets"), INJECTED)
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    f.backend.assert_untouched();

    // Config B of B06: one CA for users and proxies, allowed names set. The user
    // certificate authenticates as itself through x509, and its headers are dropped.
    let shared = &pki.client_ca.cert_pem;
    let chain = front_proxy_and_x509(shared, shared, &["front-proxy-client"]);
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    let user_b = pki.client_ca.client("user-b", &["devs"]);
    let reply = client(&f, Some(&user_b), Protocol::Http2)
        .get_with(&format!("{BASE}/widgets"), INJECTED)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = f.backend.next_request().await;
    assert_eq!(seen.all("x-remote-user"), ["user-b"]);
    assert_eq!(seen.all("x-remote-group"), ["devs", "system:authenticated"]);
    assert!(seen.all("x-remote-extra-scopes").is_empty());

    // Config A: the shared CA with every CN allowed is refused up front.
    let ca: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(shared.as_bytes())
        .collect::<Result<_, _>>()
        .expect("PEM");
    let rh =
        RequestHeaderAuthenticator::from_pem(shared.as_bytes(), RequestHeaderConfig::default())
            .expect("CA");
    assert!(rh.check_client_ca_overlap(&ca).is_err());
}

#[tokio::test]
async fn b05_client_identity_headers_never_reach_the_backend() {
    let pki = Pki::new();
    let chain = front_proxy_and_x509(&pki.front_proxy_ca.cert_pem, &pki.client_ca.cert_pem, &[]);
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    let user_a = pki.client_ca.client("user-a", &["team-a"]);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let reply = client(&f, Some(&user_a), protocol)
            .get_with(&format!("{BASE}/widgets"), INJECTED)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{protocol:?}");
        let seen = f.backend.next_request().await;
        assert_eq!(seen.all("x-remote-user"), ["user-a"]);
        assert_eq!(
            seen.all("x-remote-group"),
            ["team-a", "system:authenticated"]
        );
        assert!(seen.all("x-remote-uid").is_empty());
        assert!(seen.all("x-remote-extra-scopes").is_empty());
    }
}

#[tokio::test]
async fn a_bad_bearer_token_with_anonymous_enabled_is_401() {
    let tokens = TokenFileAuthenticator::from_csv("good-token,alice,uid-1,\"dev,ops\"\n")
        .expect("token file");
    let chain = Union::new()
        .push(BearerToken::new(tokens))
        .with_anonymous(Anonymous::new());
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let reply = f
            .client(protocol)
            .get_with(
                &format!("{BASE}/widgets"),
                &[("authorization", "Bearer wrong")],
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{protocol:?}");
        assert_eq!(reply.body, UNAUTHORIZED);
    }
    f.backend.assert_untouched();
    let reply = f
        .client(Protocol::Http1)
        .get(&format!("{BASE}/widgets"))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = f.backend.next_request().await;
    assert_eq!(seen.all("x-remote-user"), ["system:anonymous"]);
    assert_eq!(seen.all("x-remote-group"), ["system:unauthenticated"]);
    let reply = f
        .client(Protocol::Http2)
        .get_with(
            &format!("{BASE}/widgets"),
            &[("authorization", "Bearer good-token")],
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let seen = f.backend.next_request().await;
    assert_eq!(seen.all("x-remote-user"), ["alice"]);
    assert_eq!(
        seen.all("x-remote-group"),
        ["dev", "ops", "system:authenticated"]
    );
    assert!(seen.all("authorization").is_empty());
}

/// An HTTPS TokenReview webhook that accepts `webhook-token` after a pause (so concurrent
/// lookups overlap) as wendy, and counts its calls.
async fn token_review_webhook(pki: &Pki) -> (std::path::PathBuf, Arc<AtomicUsize>) {
    let wendy = serde_json::json!({"username": "wendy", "uid": "w-1", "groups": ["hooked"]});
    token_review_webhook_as(pki, wendy).await
}

/// [`token_review_webhook`] answering `user` (a TokenReview `status.user`) for
/// `webhook-token`.
async fn token_review_webhook_as(
    pki: &Pki,
    user: serde_json::Value,
) -> (std::path::PathBuf, Arc<AtomicUsize>) {
    let ca = pki::Ca::new("webhook-ca");
    let serving = ca.server("localhost", &["localhost", "127.0.0.1"]);
    let tls = common::server_tls(&serving, &pki.client_ca.cert_pem);
    let (listener, addr) = common::listen().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let svc = tower::service_fn(move |req: Request<hyper::body::Incoming>| {
        let counter = counter.clone();
        let user = user.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            let body = req.into_body().collect().await.map(|b| b.to_bytes());
            let review: serde_json::Value =
                serde_json::from_slice(&body.unwrap_or_default()).unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(200)).await;
            let ok = review["spec"]["token"] == "webhook-token";
            let status = if ok {
                serde_json::json!({"authenticated": true, "user": user})
            } else {
                serde_json::json!({"authenticated": false})
            };
            let answer = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status});
            Ok::<_, Infallible>(Response::new(Body::full(answer.to_string())))
        }
    });
    tokio::spawn(server::serve_tls(
        listener,
        tls,
        svc,
        std::future::pending(),
    ));
    let dir = std::env::temp_dir().join(format!(
        "kube-aggregator-authn-{}-{}",
        std::process::id(),
        addr.port()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("webhook.kubeconfig");
    let b64 = base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem);
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: webhook\n  cluster:\n    server: https://localhost:{}/authenticate\n    certificate-authority-data: {b64}\nusers:\n- name: gateway\n  user: {{}}\ncontexts:\n- name: webhook\n  context:\n    cluster: webhook\n    user: gateway\ncurrent-context: webhook\n",
            addr.port()
        ),
    )
    .expect("kubeconfig");
    (kubeconfig, calls)
}

#[tokio::test]
async fn token_review_webhook_is_called_once_for_concurrent_requests_and_cached() {
    let pki = Pki::new();
    let (kubeconfig, calls) = token_review_webhook(&pki).await;
    let review = TokenReviewAuthenticator::from_kubeconfig(
        &kubeconfig,
        Executor::tokio(),
        Timer::tokio(),
        CacheTtl::both(Duration::from_secs(60)),
    )
    .expect("webhook kubeconfig");
    let chain = Union::new().push(BearerToken::new(review));
    let mut f = Fixture::start(H2_AND_HTTP11, chain, ok).await;
    let path = format!("{BASE}/widgets");
    let auth = [("authorization", "Bearer webhook-token")];
    let clients: Vec<Client> = (0..12)
        .map(|i| {
            f.client(if i % 2 == 0 {
                Protocol::Http1
            } else {
                Protocol::Http2
            })
        })
        .collect();
    let replies =
        futures_util::future::join_all(clients.iter().map(|c| c.get_with(&path, &auth))).await;
    assert!(
        replies.iter().all(|r| r.status == StatusCode::OK),
        "{replies:?}"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one webhook call for 12 concurrent requests"
    );
    for _ in 0..12 {
        let seen = f.backend.next_request().await;
        assert_eq!(seen.all("x-remote-user"), ["wendy"]);
        assert_eq!(
            seen.all("x-remote-group"),
            ["hooked", "system:authenticated"]
        );
    }
    let reply = f.client(Protocol::Http1).get_with(&path, &auth).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "within the TTL the cache answers"
    );
    f.backend.next_request().await;
    // A different token is a different key, and a rejected one is 401.
    let reply = f
        .client(Protocol::Http2)
        .get_with(&path, &[("authorization", "Bearer other")])
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let _ = std::fs::remove_dir_all(kubeconfig.parent().expect("dir"));
}

/// An identity that cannot be written whole as front-proxy headers (a CR, LF or DEL in a
/// certificate's CN or O, or in a TokenReview's user, UID, group or extra) is never
/// forwarded: the client gets Go's 503 naming the header and the backend receives
/// nothing. Dropping the header instead would let the extension server run the request
/// as someone else (its next authenticator) or without a restricting `scopes` extra.
#[tokio::test]
async fn an_identity_that_cannot_be_carried_whole_never_reaches_the_backend() {
    let unsendable = |header: &str| {
        format!(
            "error trying to reach service: net/http: invalid header field value for \"{header}\""
        )
    };
    // Client certificates from the trusted CA.
    let pki = Pki::new();
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let mut f = Fixture::start(H2_AND_HTTP11, x509, ok).await;
    for (cert, header) in [
        (pki.client_ca.client("eve\nx", &["dev"]), "X-Remote-User"),
        (pki.client_ca.client("eve\x7f", &["dev"]), "X-Remote-User"),
        (
            pki.client_ca
                .client("eve", &["dev", "ops\r\nsystem:masters"]),
            "X-Remote-Group",
        ),
    ] {
        for protocol in [Protocol::Http1, Protocol::Http2] {
            let reply = client(&f, Some(&cert), protocol)
                .get(&format!("{BASE}/widgets"))
                .await;
            assert_eq!(
                reply.status,
                StatusCode::SERVICE_UNAVAILABLE,
                "{protocol:?}"
            );
            assert_eq!(reply.body.trim_end(), unsendable(header), "{protocol:?}");
        }
    }
    f.backend.assert_untouched();
    // The same CA's well-formed certificate still goes through.
    let fine = pki.client_ca.client("eve", &["dev"]);
    let reply = client(&f, Some(&fine), Protocol::Http1)
        .get(&format!("{BASE}/widgets"))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(f.backend.next_request().await.all("x-remote-user"), ["eve"]);

    // TokenReview users.
    for (user, header) in [
        (
            serde_json::json!({"username": "wendy\r\nx"}),
            "X-Remote-User",
        ),
        (
            serde_json::json!({"username": "wendy", "uid": "w\n1"}),
            "X-Remote-Uid",
        ),
        (
            serde_json::json!({"username": "wendy", "groups": ["a", "b\nc"]}),
            "X-Remote-Group",
        ),
        (
            serde_json::json!({"username": "wendy", "extra": {"scopes": ["read-only\r\n"]}}),
            "X-Remote-Extra-Scopes",
        ),
    ] {
        let pki = Pki::new();
        let (kubeconfig, calls) = token_review_webhook_as(&pki, user.clone()).await;
        let review = TokenReviewAuthenticator::from_kubeconfig(
            &kubeconfig,
            Executor::tokio(),
            Timer::tokio(),
            CacheTtl::both(Duration::from_secs(60)),
        )
        .expect("webhook kubeconfig");
        let mut f = Fixture::start(H2_AND_HTTP11, BearerToken::new(review), ok).await;
        let reply = f
            .client(Protocol::Http2)
            .get_with(
                &format!("{BASE}/widgets"),
                &[("authorization", "Bearer webhook-token")],
            )
            .await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{user}");
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{user}");
        assert_eq!(reply.body.trim_end(), unsendable(header), "{user}");
        f.backend.assert_untouched();
        let _ = std::fs::remove_dir_all(kubeconfig.parent().expect("dir"));
    }
}

/// Reference §3.8: over HTTP/2 a 401 also ends the connection (GOAWAY), so an
/// unauthenticated client cannot keep streams open; an authenticated one keeps it.
#[tokio::test]
async fn http2_401_closes_the_connection() {
    let pki = Pki::new();
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let f = Fixture::start(H2_AND_HTTP11, Union::new().push(x509), ok).await;

    let (status, _sender, driver) = client(&f, None, Protocol::Http2)
        .h2_status_and_connection(&format!("{BASE}/widgets"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), driver).await;
    assert!(
        ended.is_ok(),
        "the server keeps an unauthenticated HTTP/2 connection open"
    );

    let alice = pki.client_ca.client("alice", &[]);
    let (status, _sender, driver) = client(&f, Some(&alice), Protocol::Http2)
        .h2_status_and_connection(&format!("{BASE}/widgets"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let ended = tokio::time::timeout(std::time::Duration::from_millis(300), driver).await;
    assert!(
        ended.is_err(),
        "an authenticated HTTP/2 connection stays open"
    );
}
