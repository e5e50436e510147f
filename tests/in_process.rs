//! An extension server in the gateway's own process, through `InMemoryTransport`, beside
//! one over mTLS in the same stack: the in-process server authenticates the aggregator
//! with the crate's request-header authenticator exactly as the remote one does, sees
//! the caller's identity and never a client's own, and is checked for availability and
//! listed in discovery like any other.

pub mod common;

use std::sync::{Arc, Mutex};

use common::{Backend, Client, H2_AND_HTTP11, Pki, Protocol, respond};
use http::{Request, Response, StatusCode};
use kube_aggregator::Body;
use kube_aggregator::apiservice::ApiService;
use kube_aggregator::authn::{
    AuthenticationLayer, ConnectionInfo, RequestHeaderAuthenticator, RequestHeaderConfig, UserInfo,
    X509Authenticator,
};
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::rt::{Executor, Timer};
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::{InMemoryTransport, RustlsTransport};
use serde_json::Value;
use tower::{Layer, ServiceExt};

/// What the in-process server saw of one caller's request.
#[derive(Debug, Clone)]
struct Seen {
    user: UserInfo,
    path: String,
    headers: http::HeaderMap,
    peer_remote_addr: Option<std::net::SocketAddr>,
}

/// An extension server as the examples build one: the crate's request-header
/// authenticator (the front-proxy CA, CN `front-proxy-client`) in front of a handler that
/// serves `gizmos.example.io/v1` with one resource and records its callers' requests.
fn in_process_server(
    pki: &Pki,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<Body>,
    Error = std::convert::Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let front_proxy = RequestHeaderAuthenticator::from_pem(
        pki.front_proxy_ca.cert_pem.as_bytes(),
        RequestHeaderConfig::default(),
    )
    .unwrap()
    .with_allowed_names(["front-proxy-client".to_owned()]);
    let handler = tower::service_fn(move |req: Request<Body>| {
        let seen = seen.clone();
        async move {
            let user = req
                .extensions()
                .get::<UserInfo>()
                .cloned()
                .unwrap_or_default();
            let path = req.uri().path().to_owned();
            if user.name == "system:kube-aggregator" || user.name == "system:aggregator" {
                return Ok(if path == "/apis/gizmos.example.io/v1" {
                    let mut res = respond(200, "");
                    *res.body_mut() = Body::full(
                        r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"gizmos.example.io/v1","resources":[{"name":"gizmos","singularName":"gizmo","namespaced":true,"kind":"Gizmo","verbs":["get","list"]}]}"#,
                    );
                    res.headers_mut().insert(
                        "content-type",
                        http::HeaderValue::from_static("application/json"),
                    );
                    res
                } else {
                    respond(404, "404 page not found\n")
                });
            }
            seen.lock().unwrap().push(Seen {
                user,
                path,
                headers: req.headers().clone(),
                peer_remote_addr: req
                    .extensions()
                    .get::<ConnectionInfo>()
                    .and_then(|c| c.remote_addr),
            });
            Ok::<_, std::convert::Infallible>(respond(200, "in process"))
        }
    });
    AuthenticationLayer::new(front_proxy).layer(handler)
}

fn gizmos() -> ApiService {
    ApiService::remote("gizmos.example.io", "v1", "in-proc", "gizmos").priorities(1000, 15)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_server_sees_what_a_remote_one_sees() {
    let pki = Pki::new();
    let mut remote = Backend::start(&pki, H2_AND_HTTP11, |_| respond(200, "over mtls")).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let identity = common::proxy_identity(&pki);
    let memory = InMemoryTransport::new()
        .client_certificate(identity.clone())
        .fallback(RustlsTransport::new(
            identity,
            Executor::tokio(),
            Timer::tokio(),
        ));
    memory.insert("gizmos.in-proc.svc", in_process_server(&pki, seen.clone()));
    let mut network = StaticServiceResolver::new();
    network
        .insert("test-ns", "backend", 443, &remote.addr.to_string())
        .unwrap();
    let builder = kube_aggregator::Aggregator::builder(memory.clone())
        .resolver(memory.resolver().or(network))
        .authenticator(X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).unwrap())
        .authorizer(AlwaysAllow);
    let (addr, aggregator) = common::start_gateway(
        &pki,
        builder,
        vec![gizmos(), common::widgets_apiservice(&pki)],
        common::host(),
    )
    .await;
    let table = aggregator.registry().snapshot();
    for name in ["v1.gizmos.example.io", common::APISERVICE] {
        let route = table.get(name).unwrap();
        assert!(
            route.is_available(),
            "{name}: {:?}",
            route.apiservice.available_condition()
        );
    }
    drop(table);

    // A caller whose client sends identity headers of its own: the in-process server sees
    // the authenticated caller, in the same headers a remote server gets.
    let alice = Client::new(
        &pki,
        addr,
        // One organization (a group holding a comma, sent whole).
        Some(&pki.client_ca.client("alice", &["a,b"])),
        Protocol::Http2,
    );
    let spoof = [
        ("x-remote-user", "system:admin"),
        ("x-remote-group", "system:masters"),
        ("x-remote-extra-scopes", "everything"),
        ("x-kubernetes-cluster", "team-x"),
    ];
    let reply = alice
        .get_with(
            "/apis/gizmos.example.io/v1/namespaces/default/gizmos",
            &spoof,
        )
        .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "in process")
    );
    let reply = alice
        .get_with(&format!("{}/things", common::BASE), &spoof)
        .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "over mtls")
    );
    let inside = seen
        .lock()
        .unwrap()
        .pop()
        .expect("the in-process server was called");
    let outside = remote.next_request().await;
    assert_eq!(inside.user.name, "alice");
    assert_eq!(inside.user.groups, ["a,b", "system:authenticated"]);
    // The x509 authenticator's credential id, not the client's "scopes".
    let keys: Vec<&String> = inside.user.extra.keys().collect();
    assert_eq!(keys, ["authentication.kubernetes.io/credential-id"]);
    assert_eq!(
        inside.path,
        "/apis/gizmos.example.io/v1/namespaces/default/gizmos"
    );
    assert_eq!(inside.peer_remote_addr, None, "no socket between them");
    // The identity and tenant headers are the same ones, whichever way the request went;
    // the request-header authenticator consumed the front-proxy headers in process.
    for name in [
        "x-remote-user",
        "x-remote-group",
        "x-remote-extra-scopes",
        "x-kubernetes-cluster",
    ] {
        assert!(
            inside.headers.get(name).is_none(),
            "{name} passed the authenticator"
        );
    }
    assert_eq!(outside.one("x-remote-user"), Some("alice"));
    assert_eq!(
        outside.all("x-remote-group"),
        ["a,b", "system:authenticated"]
    );
    assert!(outside.one("x-remote-extra-scopes").is_none());
    assert!(outside.one("x-kubernetes-cluster").is_none());
    for name in ["x-forwarded-proto", "x-forwarded-uri", "x-forwarded-host"] {
        assert_eq!(
            inside.headers.contains_key(name),
            outside.headers.contains_key(name),
            "{name}"
        );
    }
    assert_eq!(inside.headers["x-forwarded-host"], "gizmos.in-proc.svc:443");

    // Discovery lists the in-process group with the resources it serves.
    let v2 = alice
        .get_with(
            "/apis",
            &[(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            )],
        )
        .await;
    let doc: Value = serde_json::from_str(&v2.body).unwrap();
    let gizmos = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "gizmos.example.io")
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(
        gizmos["versions"][0]["resources"][0]["resource"], "gizmos",
        "{gizmos}"
    );
}

/// Without the aggregator's certificate the in-process server refuses it as a remote one
/// refuses a client without one: its probe gets 401 and the APIService is not Available,
/// with the reason in its condition; requests to it are 503, never served.
#[tokio::test]
async fn without_the_proxy_certificate_the_server_refuses_the_aggregator() {
    let pki = Pki::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let memory = InMemoryTransport::new();
    memory.insert("gizmos.in-proc.svc", in_process_server(&pki, seen.clone()));
    let (aggregator, worker) = kube_aggregator::Aggregator::builder(memory.clone())
        .resolver(memory.resolver())
        .authorizer(AlwaysAllow)
        .build()
        .unwrap();
    aggregator
        .registry()
        .apply(ApiServiceEvent::Applied(gizmos()))
        .unwrap();
    tokio::spawn(worker);
    let registry = aggregator.registry().clone();
    let condition = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            let generation = registry.snapshot().generation();
            if let Some(c) = registry
                .snapshot()
                .get("v1.gizmos.example.io")
                .and_then(|r| r.apiservice.available_condition().cloned())
            {
                return c;
            }
            registry.changed(generation).await;
        }
    })
    .await
    .expect("checked");
    assert_eq!(condition.reason, "FailedDiscoveryCheck");
    assert!(
        condition.message.starts_with(
            "failing or missing response from https://gizmos.in-proc.svc:443/apis/gizmos.example.io/v1: bad status from https://gizmos.in-proc.svc:443/apis/gizmos.example.io/v1: 401: \
             the extension server did not accept the front-proxy identity: no proxy client certificate is sent"
        ),
        "{}",
        condition.message
    );
    let mut req = Request::get("/apis/gizmos.example.io/v1/gizmos")
        .body(Body::empty())
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice", ["dev"]));
    let res = aggregator.layer(common::host()).oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(seen.lock().unwrap().is_empty());
}
