//! Tenants under `/clusters/<name>` over real TLS: the same group and version in two
//! tenants routed to two extension servers, each tenant's discovery and APIService list
//! its own, the tenant in the authorizer's attributes and at the backend, tenants mounted
//! and unmounted at run time, and the paths that must never reach a backend.

pub mod common;

use std::time::Duration;

use common::{Answers, Backend, Client, Pki, Protocol, Seen, respond};
use http::StatusCode;
use kube_aggregator::apiservice::{ApiService, ServiceReference};
use kube_aggregator::authn::X509Authenticator;
use kube_aggregator::authz::{Attributes, Authorization, AuthorizeFuture, Authorizer, Decision};
use kube_aggregator::availability::StaticServiceResolver;
use kube_aggregator::registry::RoutingTable;
use kube_aggregator::tenant::{TenantEvent, TenantForwarding, TenantSpec, Tenants};
use serde_json::Value;
use tower::Layer;

const THINGS: &str = "/apis/widgets.example.io/v1alpha1/things";
const V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// alice may act in team-a, team-c and outside any tenant, bob in team-b; anyone may
/// read non-resource paths (discovery).
struct Policy;

impl Authorizer for Policy {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        let allowed = !attrs.is_resource_request
            || matches!(
                (attrs.user.name.as_str(), attrs.tenant.as_str()),
                ("alice", "" | "team-a" | "team-c") | ("bob", "team-b")
            );
        let decision = if allowed {
            Decision::Allow
        } else {
            Decision::NoOpinion
        };
        Box::pin(std::future::ready(Ok(Authorization::new(decision))))
    }
}

/// The widgets APIService (or its gadgets twin) of Service `<namespace>/widgets`.
fn apiservice(pki: &Pki, group: &str, namespace: &str) -> ApiService {
    let mut svc = common::widgets_apiservice(pki);
    if group != common::GROUP {
        svc.metadata.name = format!("v1alpha1.{group}");
        svc.spec.group = group.into();
    }
    svc.spec.service = Some(ServiceReference {
        namespace: namespace.into(),
        name: "widgets".into(),
        port: Some(443),
    });
    svc
}

/// The next request of a caller (the aggregator's own are skipped).
async fn next_caller(backend: &mut Backend) -> Seen {
    loop {
        let seen = backend.next_request().await;
        if !seen.is_background() {
            return seen;
        }
    }
}

/// No request of a caller is waiting at `backend`.
fn assert_no_caller(backend: &mut Backend) {
    while let Some(seen) = backend.try_next() {
        assert!(
            seen.is_background(),
            "the backend received {} {}",
            seen.method,
            seen.uri
        );
    }
}

async fn wait_available(tenants: &Tenants, tenant: &str, names: &[&str]) {
    let registry = tenants.registry(tenant).expect("mounted");
    let all = |table: &RoutingTable| {
        let available = |n: &&str| table.get(n).is_some_and(|r| r.is_available());
        names.iter().all(available)
    };
    tokio::time::timeout(Duration::from_secs(10), registry.wait_until(all))
        .await
        .unwrap_or_else(|_| panic!("{tenant}: {names:?} did not become Available"));
}

fn group_names(list: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(list).unwrap_or_else(|e| panic!("{e}: {list}"));
    let key = if v["kind"] == "APIGroupDiscoveryList" {
        "items"
    } else {
        "groups"
    };
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            g["metadata"]["name"]
                .as_str()
                .or(g["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_see_only_their_own_apiservices_over_tls() {
    let pki = Pki::new();
    let mut a = Backend::start_for(&pki, "widgets.team-a.svc", Answers::Background, |_| {
        respond(200, "from a")
    })
    .await;
    // b also reports the aggregator's discovery and OpenAPI fetches, to see them carry
    // its tenant; it answers them as a server without aggregated discovery does.
    let mut b = Backend::start_for(&pki, "widgets.team-b.svc", Answers::Probes, |seen| {
        let path = seen.uri.path();
        if seen.is_background() && (path == "/apis" || path.starts_with("/openapi/")) {
            respond(404, "404 page not found\n")
        } else if seen.is_background() {
            let gv = path.trim_start_matches("/apis/");
            let mut res = respond(200, "");
            *res.body_mut() = kube_aggregator::Body::full(format!(
                r#"{{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"{gv}","resources":[]}}"#
            ));
            res
        } else {
            respond(200, "from b")
        }
    })
    .await;
    let mut resolver = StaticServiceResolver::new();
    for (namespace, backend) in [("team-a", &a), ("team-b", &b)] {
        resolver
            .insert(namespace, "widgets", 443, &backend.addr.to_string())
            .unwrap();
    }
    let x509 = X509Authenticator::from_pem(pki.client_ca.cert_pem.as_bytes()).unwrap();
    let (aggregator, worker) = common::builder_with(&pki, resolver)
        .authenticator(x509)
        .authorizer(Policy)
        .tenants(TenantForwarding::Header)
        .build()
        .unwrap();
    tokio::spawn(worker);
    let tenants = aggregator.tenants().unwrap().clone();
    tenants
        .apply(TenantEvent::Resynced(vec![
            TenantSpec::new("team-a", vec![apiservice(&pki, common::GROUP, "team-a")]),
            TenantSpec::new(
                "team-b",
                vec![
                    apiservice(&pki, common::GROUP, "team-b"),
                    apiservice(&pki, "gadgets.example.io", "team-b"),
                ],
            ),
        ]))
        .unwrap();
    wait_available(&tenants, "team-a", &[common::APISERVICE]).await;
    wait_available(
        &tenants,
        "team-b",
        &[common::APISERVICE, "v1alpha1.gadgets.example.io"],
    )
    .await;
    // The aggregator's own requests of b's backend (its discovery and OpenAPI fetches)
    // carry b's tenant too.
    let fetch = b.next_request().await;
    assert!(fetch.is_background(), "{} {}", fetch.method, fetch.uri);
    assert_eq!(
        fetch.one("x-kubernetes-cluster"),
        Some("team-b"),
        "{}",
        fetch.uri
    );
    let addr = common::serve_gateway(&pki, aggregator.layer(common::host())).await;
    let alice = Client::new(
        &pki,
        addr,
        Some(&pki.client_ca.client("alice", &["dev"])),
        Protocol::Http2,
    );
    let bob = Client::new(
        &pki,
        addr,
        Some(&pki.client_ca.client("bob", &["dev"])),
        Protocol::Http1,
    );

    // One group/version, two tenants, two backends; the tenant travels in
    // X-Kubernetes-Cluster, never the client's own.
    let reply = alice
        .get_with(
            &format!("/clusters/team-a{THINGS}?limit=5"),
            &[("x-kubernetes-cluster", "team-b")],
        )
        .await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "from a")
    );
    let seen = next_caller(&mut a).await;
    assert_eq!(seen.path_and_query(), format!("{THINGS}?limit=5"));
    assert_eq!(seen.one("x-remote-user"), Some("alice"));
    assert_eq!(seen.one("x-kubernetes-cluster"), Some("team-a"));
    let reply = bob.get(&format!("/clusters/team-b{THINGS}")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "from b")
    );
    let seen = next_caller(&mut b).await;
    assert_eq!(seen.path_and_query(), THINGS);
    assert_eq!(seen.one("x-remote-user"), Some("bob"));
    assert_eq!(seen.one("x-kubernetes-cluster"), Some("team-b"));
    // The tenant is what the authorizer decides on: alice is not in team-b.
    let reply = alice.get(&format!("/clusters/team-b{THINGS}")).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert!(
        reply.body.contains(
            r#"User \"alice\" cannot list resource \"things\" in API group \"widgets.example.io\""#
        ),
        "{}",
        reply.body
    );
    // Outside any tenant there are no widgets: the host answers.
    let reply = alice.get(THINGS).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert!(reply.body.starts_with("inner: GET"), "{}", reply.body);

    // Discovery, each tenant its own: legacy, aggregated v2 and the APIService list.
    for (client, tenant, want) in [
        (
            &alice,
            "team-a",
            vec!["apiregistration.k8s.io", "widgets.example.io"],
        ),
        (
            &bob,
            "team-b",
            vec![
                "apiregistration.k8s.io",
                "gadgets.example.io",
                "widgets.example.io",
            ],
        ),
    ] {
        let legacy = client.get(&format!("/clusters/{tenant}/apis")).await;
        assert_eq!(legacy.status, StatusCode::OK, "{}", legacy.body);
        assert_eq!(group_names(&legacy.body), want, "{tenant}");
        let v2 = client
            .get_with(&format!("/clusters/{tenant}/apis"), &[("accept", V2)])
            .await;
        assert_eq!(v2.status, StatusCode::OK, "{}", v2.body);
        assert!(
            v2.headers["content-type"]
                .to_str()
                .unwrap()
                .contains("apidiscovery.k8s.io")
        );
        assert_eq!(group_names(&v2.body), want, "{tenant}");
        let list = client
            .get(&format!(
                "/clusters/{tenant}/apis/apiregistration.k8s.io/v1/apiservices"
            ))
            .await;
        let list: Value = serde_json::from_str(&list.body).unwrap();
        assert_eq!(
            list["items"].as_array().unwrap().len(),
            want.len() - 1,
            "{tenant}: {list}"
        );
        assert_eq!(
            list["items"][0]["status"]["conditions"][0]["status"],
            "True"
        );
    }
    let root = alice.get("/apis").await;
    assert_eq!(group_names(&root.body), ["apiregistration.k8s.io"]);

    // A tenant that is not mounted: 404 Status, after authorization.
    let reply = alice.get("/clusters/team-x/apis").await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let status: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(status["message"], "clusters \"team-x\" not found");
    assert_eq!(status["details"]["kind"], "clusters");

    // Paths that must never reach a backend: each is refused, or authorized as what it
    // names and then routed to the host, never to an APIService.
    for (client, target, want) in [
        // Authorized as widgets in team-b: bob may, and the doubled slash routes nowhere.
        (
            &bob,
            format!("/clusters/team-b/{THINGS}"),
            StatusCode::NOT_FOUND,
        ),
        // alice may not act in team-b, whatever the spelling.
        (
            &alice,
            format!("/clusters/team-b/{THINGS}"),
            StatusCode::FORBIDDEN,
        ),
        (
            &alice,
            format!(
                "/clusters/team-b{}",
                THINGS.replacen("/apis/", "/apis//", 1)
            ),
            StatusCode::FORBIDDEN,
        ),
        (
            &bob,
            format!(
                "/clusters/team-b{}",
                THINGS.replacen("/apis/", "/apis//", 1)
            ),
            StatusCode::NOT_FOUND,
        ),
        (
            &bob,
            format!(
                "/clusters/team-b{}",
                THINGS.replacen("/apis/widgets.example.io", "/apis/widgets.example.io%2F", 1)
            ),
            StatusCode::NOT_FOUND,
        ),
        // No tenant, or one spelt with escapes: 400.
        (&bob, format!("/clusters/{THINGS}"), StatusCode::BAD_REQUEST),
        (&bob, "/clusters//apis".to_owned(), StatusCode::BAD_REQUEST),
        (
            &bob,
            format!("/clusters%2Fteam-b{THINGS}"),
            StatusCode::BAD_REQUEST,
        ),
        (
            &bob,
            format!("/clusters/team%2Db{THINGS}"),
            StatusCode::BAD_REQUEST,
        ),
        // A doubled slash in front: not a tenant path, a non-resource one for the host.
        (
            &bob,
            format!("//clusters/team-b{THINGS}"),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let reply = client.get(&target).await;
        assert_eq!(reply.status, want, "{target}: {}", reply.body);
        if want == StatusCode::NOT_FOUND {
            assert!(
                reply.body.starts_with("inner: GET"),
                "{target}: {}",
                reply.body
            );
        }
    }
    assert_no_caller(&mut a);
    assert_no_caller(&mut b);

    // Tenants come and go at run time. team-c shares a's backend (one Service serving
    // two tenants): team-a's pooled connections, no new one, and its own tenant header.
    // The stack's own APIServices share that pool too.
    let dialed = a.accepted();
    tenants
        .apply(TenantEvent::Applied(TenantSpec::new(
            "team-c",
            vec![apiservice(&pki, common::GROUP, "team-a")],
        )))
        .unwrap();
    wait_available(&tenants, "team-c", &[common::APISERVICE]).await;
    let own = aggregator.registry();
    own.apply(kube_aggregator::source::ApiServiceEvent::Applied(
        apiservice(&pki, common::GROUP, "team-a"),
    ))
    .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        own.wait_until(|table| {
            let route = table.get(common::APISERVICE);
            route.is_some_and(|r| r.is_available())
        })
        .await
    })
    .await
    .expect("the stack's own widgets become Available");
    let reply = alice.get(THINGS).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "from a")
    );
    assert_eq!(next_caller(&mut a).await.one("x-kubernetes-cluster"), None);
    let reply = alice.get(&format!("/clusters/team-c{THINGS}")).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (StatusCode::OK, "from a")
    );
    assert_eq!(
        next_caller(&mut a).await.one("x-kubernetes-cluster"),
        Some("team-c")
    );
    assert_eq!(
        a.accepted(),
        dialed,
        "team-c and the stack's own use team-a's pooled connections"
    );
    tenants
        .apply(TenantEvent::Deleted("team-b".into()))
        .unwrap();
    let reply = bob.get(&format!("/clusters/team-b{THINGS}")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    assert!(
        reply.body.contains("clusters \\\"team-b\\\" not found"),
        "{}",
        reply.body
    );
    assert_no_caller(&mut b);
    assert_eq!(tenants.names(), ["team-a", "team-c"]);
}
