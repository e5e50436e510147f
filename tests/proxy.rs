//! The aggregator's proxy over real TLS on 127.0.0.1, with no mocks: a gateway built with
//! `Aggregator::builder` behind `server::serve_tls`, an extension server that requires the
//! front-proxy client certificate and reports every request it receives, and clients that
//! speak HTTP/1.1 or HTTP/2.
//!
//! The rows come from kube-aggregator `handler_proxy_test.go` (docs/conformance-vectors.md §5.1),
//! the derived URL rows (§5.3a), client-go's identity header escaping (§5.4), apimachinery's
//! redirect rejection (§5.5), and known failures B03, B05 and B07.

pub mod common;

use std::sync::Mutex;

use bytes::Bytes;
use common::{
    APISERVICE, BASE, Backend, Client, Fixture, GROUP, Gateway, H2_AND_HTTP11, HTTP11_ONLY, Lines,
    Pki, Protocol, Seen, alice, channel_body, ok, pki, respond,
};
use http::{Method, Response, StatusCode, Version, header};
use kube_aggregator::apiservice::{ApiService, ApiServiceSpec, ConditionStatus, ObjectMeta};
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::proxy::REDIRECT_REJECTED;
use kube_aggregator::source::ApiServiceEvent;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// The 401 body of k8s.io/apiserver's authentication filter, byte for byte.
const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

/// §3.4, §5.1, §5.4: the caller's identity arrives as front-proxy headers, one line per
/// group (a group containing a comma stays whole), extras escaped, forwarding headers set,
/// and nothing else added; path kept and query re-encoded (§5.3a). Over both protocols.
#[tokio::test]
async fn identity_and_forwarding_headers_arrive_exactly() {
    for (alpn, version) in [
        (HTTP11_ONLY, Version::HTTP_11),
        (H2_AND_HTTP11, Version::HTTP_2),
    ] {
        let mut f = Fixture::start(alpn, alice(), ok).await;
        let path = format!("{BASE}/namespaces/default/widgets");
        let reply = f
            .client(Protocol::Http1)
            .get_with(
                &format!(
                    "{path}?watch=false&labelSelector=a%3Db&fieldSelector=metadata.name=x&q=a%20b"
                ),
                &[
                    ("user-agent", "proxy-test/1.0"),
                    ("accept", "application/json"),
                ],
            )
            .await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::OK, "some data")
        );

        let seen = f.backend.next_request().await;
        let backend = f.backend.addr.to_string();
        assert_eq!(seen.version, version);
        assert_eq!(seen.method, Method::GET);
        assert_eq!(
            seen.path_and_query(),
            format!("{path}?fieldSelector=metadata.name%3Dx&labelSelector=a%3Db&q=a+b&watch=false")
        );
        assert_eq!(seen.host(), backend);
        assert_eq!(seen.one("x-remote-user"), Some("alice"));
        assert_eq!(
            seen.one("x-remote-uid"),
            Some("6b60d791-1af9-4513-92e5-e4252a1e0a78")
        );
        assert_eq!(
            seen.all("x-remote-group"),
            ["one", "two", "a,b", "system:authenticated"]
        );
        assert_eq!(seen.all("x-remote-extra-example.com%2ftwo"), ["x", "y"]);
        assert_eq!(seen.all("x-remote-extra-scopes"), ["s"]);
        assert_eq!(seen.one("x-forwarded-proto"), Some("https"));
        assert_eq!(seen.one("x-forwarded-for"), Some("127.0.0.1"));
        assert_eq!(seen.one("x-forwarded-uri"), Some(path.as_str()));
        assert_eq!(seen.one("x-forwarded-host"), Some(backend.as_str()));
        assert_eq!(seen.one("user-agent"), Some("proxy-test/1.0"));
        assert_eq!(seen.one("accept"), Some("application/json"));
        // Audit-Id: the stack's audit ID travels upstream, as kube-apiserver's proxy
        // copies it (docs/upstream-behaviour.md §16).
        let mut expected = vec![
            "accept",
            "audit-id",
            "user-agent",
            "x-forwarded-for",
            "x-forwarded-host",
            "x-forwarded-proto",
            "x-forwarded-uri",
            "x-remote-extra-example.com%2ftwo",
            "x-remote-extra-scopes",
            "x-remote-group",
            "x-remote-uid",
            "x-remote-user",
        ];
        if version == Version::HTTP_11 {
            expected.push("host");
            expected.sort_unstable();
        }
        assert_eq!(
            seen.names(),
            expected,
            "the complete header set over {version:?}"
        );
    }
}

/// §5.3a: the upstream URL is the decoded path re-escaped and the query parsed and
/// re-encoded with sorted keys, as Go's `url.Values.Encode`.
#[tokio::test]
async fn upstream_url_is_rebuilt_as_upstream_does() {
    let mut f = Fixture::start(H2_AND_HTTP11, alice(), ok).await;
    let client = f.client(Protocol::Http1);
    for (sent, upstream) in [
        (
            "/apis/widgets.example.io/v1alpha1/pods?watch=true&labelSelector=a%3Db&fieldSelector=metadata.name=x",
            "/apis/widgets.example.io/v1alpha1/pods?fieldSelector=metadata.name%3Dx&labelSelector=a%3Db&watch=true",
        ),
        (
            "/apis/widgets.example.io/v1alpha1/things?q=a%20b",
            "/apis/widgets.example.io/v1alpha1/things?q=a+b",
        ),
        (
            "/apis/widgets.example.io/v1alpha1/foo%2Fbar",
            "/apis/widgets.example.io/v1alpha1/foo/bar",
        ),
        (
            "/apis/widgets.example.io/v1alpha1",
            "/apis/widgets.example.io/v1alpha1",
        ),
    ] {
        let reply = client.get(sent).await;
        assert_eq!(reply.status, StatusCode::OK, "{sent}");
        let seen = f.backend.next_request().await;
        assert_eq!(seen.path_and_query(), upstream, "{sent}");
    }
}

/// B05, B07: identity and credential headers a client sends never reach the backend;
/// only the identity the real x509 authenticator established does.
#[tokio::test]
async fn spoofed_identity_and_credentials_are_removed() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let gateway = Gateway::start(&pki, x509, backend.addr).await;
    let bob = pki.client_ca.client("bob", &["dev"]);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, gateway.addr, Some(&bob), protocol);
        let reply = client
            .get_with(
                &format!("{BASE}/widgets"),
                &[
                    ("X-Remote-User", "system:admin"),
                    ("X-Remote-Group", "system:masters"),
                    ("x-remote-group", "system:masters"),
                    ("X-Remote-Uid", "0"),
                    ("X-Remote-Extra-Foo", "bar"),
                    ("X-Remote-Extra-Scopes", "all"),
                    ("Authorization", "Bearer secret"),
                    ("Proxy-Authorization", "Basic c2VjcmV0"),
                    // Impersonation is honoured, not stripped: tests/impersonation.rs.
                    ("Impersonate-Something-Else", "x"),
                    ("X-Forwarded-For", "192.0.2.1"),
                ],
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{protocol:?}: {}", reply.body);

        let seen = backend.next_request().await;
        assert_eq!(seen.one("x-remote-user"), Some("bob"), "{protocol:?}");
        assert_eq!(
            seen.all("x-remote-group"),
            ["dev", "system:authenticated"],
            "{protocol:?}"
        );
        // The only extra is the one the x509 authenticator itself adds, as upstream does:
        // the credential id of bob's certificate, never the client's own extras.
        let credential_id = seen.all("x-remote-extra-authentication.kubernetes.io%2fcredential-id");
        assert_eq!(credential_id.len(), 1, "{protocol:?}: {:?}", seen.headers);
        assert!(
            credential_id[0].starts_with("X509SHA256="),
            "{credential_id:?}"
        );
        for name in seen.names() {
            assert!(
                !matches!(
                    name,
                    "authorization" | "proxy-authorization" | "x-remote-uid"
                ) && (!name.starts_with("x-remote-extra-")
                    || name == "x-remote-extra-authentication.kubernetes.io%2fcredential-id")
                    && !name.starts_with("impersonate-"),
                "{protocol:?}: {name} reached the backend: {:?}",
                seen.headers
            );
        }
        // A client's X-Forwarded-For is kept and the peer appended, as Go's ReverseProxy.
        assert_eq!(seen.one("x-forwarded-for"), Some("192.0.2.1, 127.0.0.1"));
    }
}

/// §7.9: no certificate, or one from a CA the gateway does not trust, is 401 with the
/// upstream Status body, and the backend is never contacted.
#[tokio::test]
async fn unauthenticated_clients_get_401_and_never_reach_the_backend() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA");
    let gateway = Gateway::start(&pki, x509, backend.addr).await;
    let stranger = pki::Ca::new("unknown-ca").client("mallory", &["system:masters"]);
    for cert in [None, Some(&stranger)] {
        let client = Client::new(&pki, gateway.addr, cert, Protocol::Http1);
        let reply = client
            .get_with(
                &format!("{BASE}/widgets"),
                &[("X-Remote-User", "system:admin")],
            )
            .await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert_eq!(reply.body, UNAUTHORIZED);
        assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    }
    backend.assert_untouched();
}

/// B03, §5.5: a backend 3xx with a Location becomes 502 with the fixed message and no
/// backend headers; a 304 without Location and a 200 pass through.
#[tokio::test]
async fn backend_redirects_become_502() {
    let f = Fixture::start(H2_AND_HTTP11, alice(), |seen: &Seen| {
        let path = seen.uri.path();
        let code: u16 = path
            .rsplit('/')
            .next()
            .and_then(|c| c.parse().ok())
            .expect("the path ends with a status code");
        let mut res = respond(code, if code == 304 { "" } else { "some data" });
        if path.contains("/redirect/") {
            res.headers_mut().insert(
                header::LOCATION,
                "https://127.0.0.1:9/elsewhere".parse().expect("valid"),
            );
            res.headers_mut()
                .insert("x-backend", "leaked".parse().expect("valid"));
        }
        res
    })
    .await;
    let client = f.client(Protocol::Http1);
    for code in [301, 302, 303, 307, 308, 304] {
        let reply = client.get(&format!("{BASE}/redirect/{code}")).await;
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{code}");
        assert_eq!(reply.body, REDIRECT_REJECTED, "{code}");
        assert_eq!(
            reply.body,
            "the backend attempted to redirect this request, which is not permitted"
        );
        assert_eq!(
            reply.headers[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert!(
            !reply.headers.contains_key(header::LOCATION),
            "{code}: {:?}",
            reply.headers
        );
        assert!(
            !reply.headers.contains_key("x-backend"),
            "{code}: {:?}",
            reply.headers
        );
    }
    let reply = client.get(&format!("{BASE}/status/304")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::NOT_MODIFIED, "")
    );
    let reply = client.get(&format!("{BASE}/status/200")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "some data")
    );
}

/// §3.5, B20: a watch streams: the client has the first event before the backend writes
/// the second, so nothing on the way buffers the body.
#[tokio::test]
async fn watch_events_stream_through_without_buffering() {
    let (events, rx) = mpsc::unbounded_channel::<Bytes>();
    let rx = Mutex::new(Some(rx));
    let f = Fixture::start(HTTP11_ONLY, alice(), move |seen: &Seen| {
        assert_eq!(seen.uri.query(), Some("watch=true"));
        let rx = rx.lock().expect("lock").take().expect("one watch request");
        let mut res = Response::new(channel_body(rx));
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("valid"),
        );
        res
    })
    .await;
    let first =
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Widget\",\"metadata\":{\"name\":\"a\"}}}\n";
    let second =
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Widget\",\"metadata\":{\"name\":\"a\"}}}\n";
    events
        .send(Bytes::from_static(first.as_bytes()))
        .expect("backend body open");

    let res = f
        .client(Protocol::Http1)
        .open(
            &format!("{BASE}/namespaces/default/widgets?watch=true"),
            &[],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_TYPE], "application/json");
    let mut lines = Lines::new(res.into_body());
    assert_eq!(lines.next().await.as_deref(), Some(first));
    events
        .send(Bytes::from_static(second.as_bytes()))
        .expect("backend body open");
    assert_eq!(lines.next().await.as_deref(), Some(second));
    drop(events);
    assert_eq!(
        lines.next().await,
        None,
        "the stream ends when the backend ends it"
    );
}

/// §3.1 step 8: a backend that cannot be reached is 503 naming the error.
#[tokio::test]
async fn unreachable_backend_is_503() {
    let pki = Pki::new();
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        l.local_addr().expect("address")
    };
    let gateway = Gateway::start(&pki, alice(), closed).await;
    // The check at start failed; as if the backend went away after passing it.
    gateway.registry.set_available_condition(
        APISERVICE,
        ConditionStatus::True,
        "Passed",
        "all checks passed",
    );
    let reply = Client::new(&pki, gateway.addr, None, Protocol::Http1)
        .get(&format!("{BASE}/widgets"))
        .await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        reply.body.starts_with("error trying to reach service: ") && reply.body.ends_with('\n'),
        "{:?}",
        reply.body
    );
    assert_eq!(
        reply.headers[header::CONTENT_TYPE],
        "text/plain; charset=utf-8"
    );
    assert_eq!(reply.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
}

/// §3.1 step 3, B11: an APIService whose Available condition is False is 503
/// `service unavailable` without any connection to the backend; once True it is proxied.
#[tokio::test]
async fn unavailable_apiservice_is_503_without_a_connection() {
    let mut f = Fixture::start(H2_AND_HTTP11, alice(), ok).await;
    f.gateway.registry.set_available_condition(
        APISERVICE,
        ConditionStatus::False,
        "FailedDiscoveryCheck",
        "failing or missing response",
    );
    let client = f.client(Protocol::Http1);
    for path in [format!("{BASE}/widgets"), BASE.to_owned()] {
        let reply = client.get(&path).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(reply.body, "service unavailable\n", "{path}");
        assert_eq!(
            reply.headers[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
    f.backend.assert_untouched();

    f.gateway.registry.set_available_condition(
        APISERVICE,
        ConditionStatus::True,
        "Passed",
        "all checks passed",
    );
    let reply = client.get(&format!("{BASE}/widgets")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "some data")
    );
    assert_eq!(f.backend.connections(), 1);
}

/// §3.8: HTTP/2 from the client, and to the backend when it offers h2 by ALPN; a backend
/// that offers only http/1.1 is reached over HTTP/1.1.
#[tokio::test]
async fn http2_end_to_end_and_http11_fallback() {
    for (alpn, upstream) in [
        (H2_AND_HTTP11, Version::HTTP_2),
        (HTTP11_ONLY, Version::HTTP_11),
    ] {
        let mut f = Fixture::start(alpn, alice(), ok).await;
        let client = f.client(Protocol::Http2);
        for _ in 0..4 {
            let reply = client.get(&format!("{BASE}/widgets")).await;
            assert_eq!(reply.version, Version::HTTP_2);
            assert_eq!(
                (reply.status, reply.body.as_str()),
                (StatusCode::OK, "some data")
            );
            let seen = f.backend.next_request().await;
            assert_eq!(seen.version, upstream);
            if upstream == Version::HTTP_2 {
                assert_eq!(seen.uri.scheme_str(), Some("https"));
            }
            assert_eq!(seen.one("x-remote-user"), Some("alice"));
            assert_eq!(seen.host(), f.backend.addr.to_string());
        }
        // The APIService's client pools its backend connection across requests. Over
        // HTTP/2 every request shares one; over HTTP/1.1 the aggregator's own discovery
        // fetch, when it runs just then, holds the idle connection, and a caller's request
        // takes a second one: four requests on at most two connections is the pooling.
        let connections = f.backend.connections();
        if upstream == Version::HTTP_2 {
            assert_eq!(connections, 1, "{upstream:?}");
        } else {
            assert!(
                (1..=2).contains(&connections),
                "{upstream:?}: {connections}"
            );
        }
    }
}

/// §2.2, §5.1, §5.2: local APIServices and unknown paths go to the host's handlers;
/// `/apis` lists apiregistration.k8s.io first, then the groups by priority; `/apis/<g>`
/// is that group's APIGroup.
#[tokio::test]
async fn local_and_unknown_paths_reach_the_inner_service_and_discovery_is_served() {
    let mut f = Fixture::start(H2_AND_HTTP11, alice(), ok).await;
    f.gateway
        .registry
        .apply(ApiServiceEvent::Applied(ApiService {
            metadata: ObjectMeta {
                name: "v1.local.example.io".into(),
                ..ObjectMeta::default()
            },
            spec: ApiServiceSpec {
                group: "local.example.io".into(),
                version: "v1".into(),
                group_priority_minimum: 2000,
                version_priority: 10,
                ..ApiServiceSpec::default()
            },
            ..ApiService::default()
        }))
        .expect("the local APIService is valid");
    let client = f.client(Protocol::Http1);

    for path in [
        "/apis/local.example.io/v1/things",
        "/apis/unknown.example.io/v1/things",
        "/healthz",
    ] {
        let reply = client.get(path).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(reply.body, format!("inner: GET {path}"));
    }

    let reply = client.get("/apis").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    let list: serde_json::Value = serde_json::from_str(&reply.body).expect("APIGroupList JSON");
    assert_eq!(
        (&list["kind"], &list["apiVersion"]),
        (&"APIGroupList".into(), &"v1".into())
    );
    let groups = list["groups"].as_array().expect("groups");
    let names: Vec<&str> = groups
        .iter()
        .map(|g| g["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["apiregistration.k8s.io", "local.example.io", GROUP]);
    let gv =
        serde_json::json!({"groupVersion": "widgets.example.io/v1alpha1", "version": "v1alpha1"});
    assert_eq!(
        groups[2],
        serde_json::json!({"name": GROUP, "versions": [gv], "preferredVersion": gv})
    );

    let reply = client.get("/apis/widgets.example.io").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.body,
        r#"{"kind":"APIGroup","apiVersion":"v1","name":"widgets.example.io","versions":[{"groupVersion":"widgets.example.io/v1alpha1","version":"v1alpha1"}],"preferredVersion":{"groupVersion":"widgets.example.io/v1alpha1","version":"v1alpha1"}}"#
    );
    f.backend.assert_untouched();
}

/// A request whose chunked body is malformed is the client's fault: 400 with a Status,
/// not 503 "error trying to reach service" (Go's server answers a body it cannot read
/// with 400).
#[tokio::test]
async fn a_malformed_chunked_body_gets_400_not_503() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for alpn in [HTTP11_ONLY, H2_AND_HTTP11] {
        let pki = Pki::new();
        let backend = Backend::start_reading_bodies(&pki, alpn, ok).await;
        let gateway = Gateway::start(&pki, alice(), backend.addr).await;
        let client = Client::new(&pki, gateway.addr, None, Protocol::Http1);
        let mut tls = client.connect().await;
        let request = format!(
            "POST {BASE}/namespaces/ns1/widgets HTTP/1.1\r\nHost: localhost\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\nzz\r\n"
        );
        tls.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(common::WAIT, tls.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400 "), "{alpn:?}: {answer}");
        let body = answer.split_once("\r\n\r\n").expect("a body").1;
        let status: serde_json::Value = serde_json::from_str(body).expect("a Status");
        assert_eq!(status["reason"], "BadRequest", "{body}");
        assert_eq!(status["code"], 400, "{body}");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("the request body could not be read: ")),
            "{body}"
        );
    }
}

/// A YAML self review whose aliases expand a 21 KB body into millions of nodes is refused
/// as sigs.k8s.io/yaml refuses it (400, `document contains excessive aliasing`), while
/// other requests keep being answered; a small YAML review is still answered.
#[tokio::test]
async fn a_yaml_alias_bomb_is_400_and_stalls_nobody() {
    let f = Fixture::start(H2_AND_HTTP11, alice(), ok).await;
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let mut bomb = String::from(
        "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes: {verb: get, resource: pods}\nmetadata:\n  annotations: {}\nstatus: {}\nx: &a [",
    );
    bomb.push_str(&vec!["1"; 3000].join(","));
    bomb.push_str("]\ny: [");
    bomb.push_str(&vec!["*a"; 3000].join(","));
    bomb.push_str("]\n");
    assert!(bomb.len() < 22_000, "{}", bomb.len());
    let client = f.client(Protocol::Http2);
    let send = |body: String| {
        let client = &client;
        async move {
            let res = client
                .send_typed(
                    Method::POST,
                    path,
                    "application/yaml",
                    http_body_util::Full::new(Bytes::from(body)),
                )
                .await
                .expect("the gateway answers");
            let status = res.status();
            let body = http_body_util::BodyExt::collect(res.into_body())
                .await
                .expect("body")
                .to_bytes();
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    // Two at once, and a plain request beside them.
    let plain = f.client(Protocol::Http1);
    let (a, b, version) = tokio::join!(send(bomb.clone()), send(bomb), plain.get("/version"));
    for (status, body) in [a, b] {
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("a Status");
        assert_eq!(v["reason"], "BadRequest", "{v}");
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("yaml: document contains excessive aliasing")),
            "{v}"
        );
    }
    // The host behind the stack answered the plain request beside them.
    assert_eq!(version.body, "inner: GET /version", "{version:?}");
    let small = "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes: &r {verb: get, resource: pods}\n";
    let (status, body) = send(small.to_owned()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["spec"]["resourceAttributes"]["verb"], "get", "{v}");
}

/// `GET .../apiservices` honours `labelSelector` and `fieldSelector` as upstream's
/// registry does (labels; `metadata.name`, and `metadata.namespace`, always empty), and
/// answers 400 `BadRequest` for a selector that does not parse or another field.
#[tokio::test]
async fn apiservice_lists_honour_selectors() {
    let pki = Pki::new();
    let backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let builder = common::builder(&pki, backend.addr)
        .authenticator(alice())
        .authorizer(kube_aggregator::authz::AlwaysAllow);
    let mut widgets = common::widgets_apiservice(&pki);
    widgets.metadata.labels.insert("tier".into(), "a".into());
    widgets.metadata.labels.insert("weight".into(), "10".into());
    let mut gadgets = common::gadgets_apiservice(&pki);
    gadgets.metadata.labels.insert("tier".into(), "b".into());
    let (addr, _aggregator) =
        common::start_gateway(&pki, builder, vec![widgets, gadgets], common::host()).await;
    let client = Client::new(&pki, addr, None, Protocol::Http2);
    let list = |query: &'static str| {
        let client = &client;
        async move {
            let reply = client
                .get(&format!(
                    "/apis/apiregistration.k8s.io/v1/apiservices?{query}"
                ))
                .await;
            assert_eq!(reply.status, StatusCode::OK, "{query}: {}", reply.body);
            let v: serde_json::Value = serde_json::from_str(&reply.body).expect("JSON");
            let mut names: Vec<String> = v["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                .collect();
            names.sort();
            names
        }
    };
    let both = ["v1.gadgets.example.io", "v1alpha1.widgets.example.io"];
    let widgets = ["v1alpha1.widgets.example.io"];
    assert_eq!(list("").await, both);
    assert_eq!(list("labelSelector=tier%3Da").await, widgets);
    assert_eq!(list("labelSelector=tier+in+(a,b)").await, both);
    assert_eq!(
        list("labelSelector=tier!%3Da").await,
        ["v1.gadgets.example.io"]
    );
    assert_eq!(list("labelSelector=weight").await, widgets);
    assert_eq!(
        list("labelSelector=!weight").await,
        ["v1.gadgets.example.io"]
    );
    assert_eq!(list("labelSelector=weight%3E9").await, widgets);
    assert!(list("labelSelector=weight%3C10").await.is_empty());
    assert!(list("labelSelector=tier%3Dc").await.is_empty());
    assert_eq!(
        list("fieldSelector=metadata.name%3Dv1alpha1.widgets.example.io").await,
        widgets
    );
    assert_eq!(
        list("fieldSelector=metadata.name!%3Dv1alpha1.widgets.example.io").await,
        ["v1.gadgets.example.io"]
    );
    assert!(list("fieldSelector=metadata.name%3Dnone").await.is_empty());
    assert_eq!(list("fieldSelector=metadata.namespace%3D").await, both);
    assert!(
        list("fieldSelector=metadata.namespace%3Ddefault")
            .await
            .is_empty()
    );
    assert_eq!(
        list("fieldSelector=metadata.name%3Dv1alpha1.widgets.example.io&labelSelector=tier%3Db")
            .await,
        Vec::<String>::new()
    );

    for (query, message) in [
        (
            "fieldSelector=spec.service.name%3Dbackend",
            r#""spec.service.name" is not a known field selector: only "metadata.name", "metadata.namespace""#,
        ),
        (
            "fieldSelector=metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        (
            "labelSelector=tier+in+a",
            r#"unable to parse label selector "tier in a""#,
        ),
    ] {
        let reply = client
            .get(&format!(
                "/apis/apiregistration.k8s.io/v1/apiservices?{query}"
            ))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            reply.body
        );
        let v: serde_json::Value = serde_json::from_str(&reply.body).expect("a Status");
        assert_eq!(
            (v["kind"].as_str(), v["reason"].as_str(), v["code"].as_u64()),
            (Some("Status"), Some("BadRequest"), Some(400)),
            "{v}"
        );
        assert_eq!(v["message"], message, "{query}");
    }
}
