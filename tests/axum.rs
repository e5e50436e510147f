//! An axum `Router` as the host's own handlers behind a stack from `Aggregator::builder`,
//! over real TLS on 127.0.0.1: the router answers its own paths (authenticated, with the
//! caller in the extensions), the aggregated group reaches its extension server over mTLS
//! with the caller's identity, and `/apis` lists both.

pub mod common;

use std::convert::Infallible;

use axum::Router;
use axum::extract::Extension;
use axum::routing::get;
use common::{BASE, Backend, Client, H2_AND_HTTP11, Pki, Protocol, ok};
use http::StatusCode;
use kube_aggregator::Aggregator;
use kube_aggregator::authn::{UserInfo, X509Authenticator};
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::server;
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::transport::RustlsTransport;
use tower::Layer;

#[tokio::test]
async fn an_axum_router_behind_the_built_stack() {
    let pki = Pki::new();
    let mut backend = Backend::start(&pki, H2_AND_HTTP11, ok).await;
    let proxy = pki.front_proxy_ca.client("front-proxy-client", &[]);
    let transport = RustlsTransport::from_pem(proxy.cert_pem.as_bytes(), proxy.key_pem.as_bytes())
        .expect("proxy client certificate");
    let mut resolver = StaticServiceResolver::new();
    resolver
        .insert("test-ns", "backend", 443, &backend.addr.to_string())
        .expect("resolver entry");
    let (aggregator, worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authenticator(
            X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).expect("client CA"),
        )
        .authorizer(AlwaysAllow)
        .build()
        .expect("the stack");
    aggregator
        .registry()
        .apply(ApiServiceEvent::Applied(common::widgets_apiservice(&pki)))
        .expect("a valid APIService");
    tokio::spawn(worker);

    let router = Router::new().route(
        "/whoami",
        get(|Extension(user): Extension<UserInfo>| async move {
            format!("{} {:?}", user.name, user.groups)
        }),
    );
    let service = aggregator.layer(router);
    let tls = common::gateway_tls(&pki);
    let (listener, addr) = common::listen().await;
    let service = tower::ServiceBuilder::new()
        .map_err(|e: Infallible| match e {})
        .service(service);
    tokio::spawn(server::serve_tls(
        listener,
        tls,
        service,
        std::future::pending(),
    ));

    let alice = pki.client_ca.client("alice", &["dev"]);
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let client = Client::new(&pki, addr, Some(&alice), protocol);
        let reply = client.get("/whoami").await;
        assert_eq!(reply.status, StatusCode::OK, "{protocol:?}: {}", reply.body);
        assert_eq!(reply.body, r#"alice ["dev", "system:authenticated"]"#);

        // The first availability check runs as soon as the worker does.
        let mut reply = client.get(&format!("{BASE}/widgets")).await;
        for _ in 0..100 {
            if reply.status != StatusCode::SERVICE_UNAVAILABLE {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            reply = client.get(&format!("{BASE}/widgets")).await;
        }
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (StatusCode::OK, "some data"),
            "{protocol:?}"
        );
        // Availability probes and discovery fetches (as system:kube-aggregator) and the
        // OpenAPI download (as system:aggregator) reach the backend too.
        let seen = loop {
            let seen = backend.next_request().await;
            if !matches!(
                seen.one("x-remote-user"),
                Some("system:kube-aggregator" | "system:aggregator")
            ) {
                break seen;
            }
        };
        assert_eq!(seen.one("x-remote-user"), Some("alice"));
        assert_eq!(seen.all("x-remote-group"), ["dev", "system:authenticated"]);

        let reply = client.get("/apis").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(
            reply.body.contains("\"widgets.example.io\""),
            "{}",
            reply.body
        );

        // Without a client certificate: 401 before the router.
        let anonymous = Client::new(&pki, addr, None, protocol);
        assert_eq!(
            anonymous.get("/whoami").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
}
