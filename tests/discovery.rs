//! Aggregated discovery v2 and OpenAPI over real TLS on 127.0.0.1
//! (docs/upstream-behaviour.md §5.3, §5.4; known failures B12, B17, B18): a gateway from
//! `Aggregator::builder`, whose worker runs the discovery and OpenAPI managers, in front
//! of extension servers that speak v2, only legacy discovery, or fail. The extension
//! servers report the aggregator's discovery and OpenAPI fetches; its availability
//! probes they answer themselves.

pub mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Backend, Client, H2_AND_HTTP11, Pki, Protocol, Seen, alice, respond};
use http::{Request, Response, StatusCode, header};
use kube_aggregator::apiservice::{ApiService, ConditionStatus, ServiceReference};
use kube_aggregator::authz::AlwaysAllow;
use kube_aggregator::availability::{ResolveFuture, ServiceResolver, StaticServiceResolver};
use kube_aggregator::discovery::{DiscoveryConfig, DiscoveryManager, V2_JSON, V2BETA1_JSON};
use kube_aggregator::openapi::OpenApiConfig;
use kube_aggregator::source::ApiServiceEvent;
use kube_aggregator::{Body, Registry};
use serde_json::{Value, json};
use tower::Layer;

const KUBECTL_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn json(status: u16, content_type: &str, body: Value) -> Response<Body> {
    let mut res = Response::new(Body::full(body.to_string()));
    *res.status_mut() = StatusCode::from_u16(status).unwrap();
    res.headers_mut()
        .insert(header::CONTENT_TYPE, content_type.parse().unwrap());
    res
}

fn resource_list(gv: &str, resource: &str, kind: &str) -> Response<Body> {
    json(
        200,
        "application/json",
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
               "resources": [{"name": resource, "singularName": "", "namespaced": true, "kind": kind, "verbs": ["get", "list"]}]}),
    )
}

fn v2_list(items: Value) -> Response<Body> {
    json(
        200,
        V2_JSON,
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}),
    )
}

fn apiservice(
    pki: &Pki,
    group: &str,
    version: &str,
    service: &str,
    gp: i32,
    vp: i32,
) -> ApiService {
    let svc = ApiService::remote(group, version, "test-ns", service).priorities(gp, vp);
    // The test backends' certificates all name backend.test-ns.svc: other Services skip
    // verification.
    if service == "backend" {
        svc.ca_bundle(pki.serving_ca.cert_pem.as_bytes())
    } else {
        svc.insecure_skip_tls_verify()
    }
}

/// A gateway with its worker running; `backend` (Service
/// `test-ns/<name>`, verified as `backend.test-ns.svc`) serves every APIService given.
struct Gateway {
    addr: SocketAddr,
    registry: Registry,
    discovery: DiscoveryManager,
    aggregator: kube_aggregator::Aggregator,
}

impl Gateway {
    /// The stack's metrics, as `/metrics` would serve them.
    fn metrics(&self) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        self.aggregator.register_metrics(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }
}

/// Resolves `test-ns/<name>` statically, holding back the Service `slow` until the gate
/// opens.
#[derive(Clone)]
struct GatedResolver {
    inner: StaticServiceResolver,
    gate: tokio::sync::watch::Receiver<bool>,
}

impl ServiceResolver for GatedResolver {
    fn resolve(&self, service: &ServiceReference) -> ResolveFuture {
        let (inner, mut gate, slow) = (
            self.inner.clone(),
            self.gate.clone(),
            service.name == "slow",
        );
        let service = service.clone();
        Box::pin(async move {
            if slow {
                let _ = gate.wait_for(|open| *open).await;
            }
            inner.resolve(&service).await
        })
    }
}

/// A gateway whose registry holds `initial` when the managers start following it (the
/// APIServices "known at start").
async fn gateway(
    pki: &Pki,
    services: &[(&str, SocketAddr)],
    config: DiscoveryConfig,
    initial: Vec<ApiService>,
) -> Gateway {
    let (open, gate) = tokio::sync::watch::channel(true);
    std::mem::forget(open);
    gateway_gated(pki, services, config, gate, initial).await
}

async fn gateway_gated(
    pki: &Pki,
    services: &[(&str, SocketAddr)],
    config: DiscoveryConfig,
    gate: tokio::sync::watch::Receiver<bool>,
    initial: Vec<ApiService>,
) -> Gateway {
    let mut resolver = StaticServiceResolver::new();
    for (name, addr) in services {
        resolver
            .insert("test-ns", name, 443, &addr.to_string())
            .unwrap();
    }
    let resolver = GatedResolver {
        inner: resolver,
        gate,
    };
    let builder = common::builder_with(pki, resolver)
        .authenticator(alice())
        .authorizer(AlwaysAllow)
        .discovery(config)
        .openapi(OpenApiConfig {
            backoff_base: Duration::from_millis(50),
            ..OpenApiConfig::default()
        });
    let (aggregator, worker) = builder.build().unwrap();
    aggregator
        .registry()
        .apply(ApiServiceEvent::Resynced(initial))
        .unwrap();
    tokio::spawn(worker);
    // The host serves no discovery of its own: 404 for everything.
    let inner = tower::service_fn(|_req: Request<Body>| async move {
        Ok::<_, Infallible>(respond(404, "404 page not found\n"))
    });
    let addr = common::serve_gateway(pki, aggregator.layer(inner)).await;
    Gateway {
        addr,
        registry: aggregator.registry().clone(),
        discovery: aggregator.discovery().clone(),
        aggregator,
    }
}

fn fast() -> DiscoveryConfig {
    DiscoveryConfig {
        refresh_period: Duration::from_millis(300),
        fetch_timeout: Duration::from_millis(500),
        backoff_base: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        ..DiscoveryConfig::default()
    }
}

fn client(pki: &Pki, g: &Gateway) -> Client {
    Client::new(pki, g.addr, None, Protocol::Http2)
}

/// `(group, [(version, freshness, resources)])` of a v2 body.
/// A group's versions as `(version, freshness, resource names)`.
type Versions = Vec<(String, String, Vec<String>)>;

fn summary(body: &str) -> Vec<(String, Versions)> {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let versions = g["versions"]
                .as_array()
                .map(|vs| {
                    vs.iter()
                        .map(|v| {
                            let resources = v["resources"]
                                .as_array()
                                .map(|rs| {
                                    rs.iter()
                                        .map(|r| r["resource"].as_str().unwrap().to_owned())
                                        .collect()
                                })
                                .unwrap_or_default();
                            (
                                v["version"].as_str().unwrap().to_owned(),
                                v["freshness"].as_str().unwrap_or("").to_owned(),
                                resources,
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                g["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                versions,
            )
        })
        .collect()
}

async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// v2 and v2beta1 negotiation, the caching headers and 304, legacy for a plain Accept,
/// 406 for protobuf only; one fetch per Service shared by its two APIServices, with the
/// aggregator identity.
#[tokio::test]
async fn negotiation_etag_and_one_fetch_per_service() {
    let pki = Pki::new();
    let fetches = Arc::new(AtomicUsize::new(0));
    let seen = fetches.clone();
    let mut backend = Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, move |s: &Seen| match s.uri.path() {
        "/apis" => {
            seen.fetch_add(1, Ordering::SeqCst);
            v2_list(json!([
                {"metadata": {"name": "a.example.io"}, "versions": [{"version": "v1", "resources": [{"resource": "as", "scope": "Cluster", "verbs": ["get"]}]}]},
                {"metadata": {"name": "b.example.io"}, "versions": [{"version": "v1", "resources": [{"resource": "bs", "scope": "Namespaced", "verbs": ["list"]}]}]}
            ]))
        }
        _ => respond(200, "{}"),
    })
    .await;
    let initial = vec![
        apiservice(&pki, "a.example.io", "v1", "backend", 100, 15),
        apiservice(&pki, "b.example.io", "v1", "backend", 100, 15),
    ];
    let g = gateway(
        &pki,
        &[("backend", backend.addr)],
        DiscoveryConfig {
            refresh_period: Duration::from_secs(60),
            ..fast()
        },
        initial,
    )
    .await;
    tokio::time::timeout(Duration::from_secs(5), g.discovery.synced())
        .await
        .expect("synced");
    let c = client(&pki, &g);
    let r = c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], V2_JSON);
    assert_eq!(r.headers["vary"], "Accept");
    assert_eq!(r.headers["cache-control"], "public");
    let etag = r.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag.len(), 130);
    assert_eq!(
        summary(&r.body),
        [
            (
                "apiregistration.k8s.io".to_owned(),
                vec![(
                    "v1".to_owned(),
                    "Current".to_owned(),
                    vec!["apiservices".to_owned()]
                )]
            ),
            (
                "a.example.io".to_owned(),
                vec![("v1".to_owned(), "Current".to_owned(), vec!["as".to_owned()])]
            ),
            (
                "b.example.io".to_owned(),
                vec![("v1".to_owned(), "Current".to_owned(), vec!["bs".to_owned()])]
            ),
        ]
    );
    // One Service, two APIServices, one fetch; as system:kube-aggregator in system:masters.
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    let fetch = backend.next_request_to("/apis").await;
    assert_eq!(fetch.one("accept"), Some(V2_JSON));
    assert_eq!(fetch.one("x-remote-user"), Some("system:kube-aggregator"));
    assert_eq!(fetch.all("x-remote-group"), ["system:masters"]);

    let r304 = c
        .get_with(
            "/apis",
            &[("accept", KUBECTL_ACCEPT), ("if-none-match", &etag)],
        )
        .await;
    assert_eq!(r304.status, 304);
    assert_eq!(r304.body, "");
    assert_eq!(r304.headers["etag"].to_str().unwrap(), etag);
    let other = c
        .get_with(
            "/apis",
            &[("accept", KUBECTL_ACCEPT), ("if-none-match", "\"nope\"")],
        )
        .await;
    assert_eq!(other.status, 200);

    let beta = c.get_with("/apis", &[("accept", V2BETA1_JSON)]).await;
    assert_eq!(beta.headers["content-type"], V2BETA1_JSON);
    assert_eq!(
        beta.headers["etag"].to_str().unwrap(),
        etag,
        "one ETag for every encoding"
    );
    assert!(
        beta.body
            .contains(r#""apiVersion":"apidiscovery.k8s.io/v2beta1""#)
    );

    let legacy = c.get_with("/apis", &[("accept", "application/json")]).await;
    assert_eq!(legacy.headers["content-type"], "application/json");
    assert!(
        legacy.body.starts_with(r#"{"kind":"APIGroupList""#),
        "{}",
        legacy.body
    );
    let slash = c.get_with("/apis/", &[("accept", KUBECTL_ACCEPT)]).await;
    assert!(
        slash.body.starts_with(r#"{"kind":"APIGroupList""#),
        "/apis/ is legacy only"
    );

    let proto = c.get_with("/apis", &[("accept", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")]).await;
    assert_eq!(proto.status, 406);
    assert!(
        proto.body.contains(r#""reason":"NotAcceptable""#),
        "{}",
        proto.body
    );
}

/// B18: before any fetch completes every group-version is listed Stale and empty, in
/// §5.3's order; then Current. B17: backends without v2 (404, 406, a legacy list) fall
/// back to each group-version's legacy document, never cached per Service.
#[tokio::test]
async fn ordering_stale_before_sync_and_legacy_fallback() {
    let pki = Pki::new();
    let (release, gate) = tokio::sync::watch::channel(false);
    // widgets: three versions on a Service that resolves only once released.
    let slow =
        Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, move |s: &Seen| match s.uri.path() {
            "/apis" => respond(404, "404 page not found\n"),
            p => {
                let v = p.rsplit('/').next().unwrap();
                resource_list(
                    &format!("widgets.example.io/{v}"),
                    &format!("widgets-{v}"),
                    "Widget",
                )
            }
        })
        .await;
    // gadgets: 406 to the v2 Accept, legacy documents work.
    let legacy =
        Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, |s: &Seen| match s.uri.path() {
            "/apis" => respond(406, "not acceptable"),
            "/apis/gadgets.example.io/v1" => {
                resource_list("gadgets.example.io/v1", "gadgets", "Gadget")
            }
            "/apis/tools.example.io/v1" => resource_list("tools.example.io/v1", "tools", "Tool"),
            _ => respond(404, ""),
        })
        .await;
    let initial = vec![
        apiservice(&pki, "widgets.example.io", "v1", "slow", 1000, 10),
        apiservice(&pki, "widgets.example.io", "v2beta1", "slow", 1000, 20),
        apiservice(&pki, "widgets.example.io", "v1alpha1", "slow", 1000, 10),
        apiservice(&pki, "gadgets.example.io", "v1", "legacy", 2000, 15),
        // The same Service: each group-version gets its own legacy document.
        apiservice(&pki, "tools.example.io", "v1", "legacy", 10, 15),
    ];
    let g = gateway_gated(
        &pki,
        &[("slow", slow.addr), ("legacy", legacy.addr)],
        DiscoveryConfig {
            fetch_timeout: Duration::from_secs(5),
            ..fast()
        },
        gate,
        initial,
    )
    .await;
    let c = client(&pki, &g);
    let first = summary(
        &c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)])
            .await
            .body,
    );
    let names: Vec<&str> = first.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(
        names,
        [
            "apiregistration.k8s.io",
            "gadgets.example.io",
            "widgets.example.io",
            "tools.example.io"
        ]
    );
    let widgets = &first[2].1;
    let versions: Vec<(&str, &str, usize)> = widgets
        .iter()
        .map(|(v, f, r)| (v.as_str(), f.as_str(), r.len()))
        .collect();
    assert_eq!(
        versions,
        [
            ("v2beta1", "Stale", 0),
            ("v1", "Stale", 0),
            ("v1alpha1", "Stale", 0)
        ]
    );
    // The legacy /apis agrees on the order and the preferred version.
    let legacy_list: Value = serde_json::from_str(
        &c.get_with("/apis", &[("accept", "application/json")])
            .await
            .body,
    )
    .unwrap();
    let widgets_group = legacy_list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "widgets.example.io")
        .unwrap();
    assert_eq!(widgets_group["preferredVersion"]["version"], "v2beta1");
    assert!(!g.discovery.has_synced());

    release.send(true).unwrap();
    eventually("every version Current", async || {
        let s = summary(
            &c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)])
                .await
                .body,
        );
        s.iter()
            .skip(1)
            .all(|(_, vs)| vs.iter().all(|(_, f, _)| f == "Current"))
    })
    .await;
    assert!(g.discovery.has_synced());
    let done = summary(
        &c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)])
            .await
            .body,
    );
    assert_eq!(done[1].1[0].2, ["gadgets"]);
    assert_eq!(done[2].1[0].2, ["widgets-v2beta1"]);
    assert_eq!(done[2].1[2].2, ["widgets-v1alpha1"]);
    assert_eq!(
        done[3].1[0].2,
        ["tools"],
        "the legacy result is per group-version, not per Service"
    );
}

/// A failing Service turns Stale and keeps its last good resources; it is Current again
/// once it recovers. A deleted APIService leaves both documents in the same call.
#[tokio::test]
async fn stale_on_failure_current_after_recovery_and_deletion_at_once() {
    let pki = Pki::new();
    let down = Arc::new(AtomicBool::new(false));
    let flag = down.clone();
    let backend = Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, move |s: &Seen| {
        if flag.load(Ordering::SeqCst) {
            return respond(503, "service unavailable");
        }
        match s.uri.path() {
            "/apis" => v2_list(json!([{"metadata": {"name": "a.example.io"}, "versions": [{"version": "v1", "resources": [{"resource": "as", "verbs": ["get"]}]}]}])),
            _ => respond(200, "{}"),
        }
    })
    .await;
    let g = gateway(&pki, &[("backend", backend.addr)], fast(), vec![]).await;
    g.registry
        .apply(ApiServiceEvent::Applied(apiservice(
            &pki,
            "a.example.io",
            "v1",
            "backend",
            100,
            15,
        )))
        .unwrap();
    let c = client(&pki, &g);
    let state = async || {
        let s = summary(
            &c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)])
                .await
                .body,
        );
        s.into_iter()
            .find(|(g, _)| g == "a.example.io")
            .map(|(_, v)| v[0].clone())
    };
    eventually("Current", async || {
        state().await.is_some_and(|v| v.1 == "Current")
    })
    .await;
    down.store(true, Ordering::SeqCst);
    eventually("Stale", async || {
        state().await.is_some_and(|v| v.1 == "Stale")
    })
    .await;
    assert_eq!(
        state().await.unwrap().2,
        ["as"],
        "the last good resources stay"
    );
    down.store(false, Ordering::SeqCst);
    eventually("Current again", async || {
        state().await.is_some_and(|v| v.1 == "Current")
    })
    .await;

    g.registry
        .apply(ApiServiceEvent::Deleted("v1.a.example.io".into()))
        .unwrap();
    // No waiting: the deletion is in both documents as soon as apply returns.
    let v2 = c.get_with("/apis", &[("accept", KUBECTL_ACCEPT)]).await;
    assert!(!v2.body.contains("a.example.io"), "{}", v2.body);
    let legacy = c.get_with("/apis", &[("accept", "application/json")]).await;
    assert!(!legacy.body.contains("a.example.io"), "{}", legacy.body);
}

/// OpenAPI v2: the remote specs are filtered to their group-version, merged with clashing
/// definitions renamed, and served as JSON and protobuf with ETag/304; v3: the root lists
/// the remote key, a remote v3 document is proxied, and a backend without v3 gets its v2
/// converted with handler3's hash rules.
#[tokio::test]
async fn openapi_merge_conflicts_and_v3_routing() {
    let pki = Pki::new();
    let spec = |group: &str, ty: &str| {
        json!({"swagger": "2.0", "info": {"title": group, "version": "v1"},
               "paths": {format!("/apis/{group}/v1/things"): {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Thing"}}}}},
                         "/version": {"get": {"responses": {"200": {"schema": {"$ref": "#/definitions/Info"}}}}}},
               "definitions": {"Thing": {"type": ty}, "Info": {"type": "object"}}})
    };
    let a = Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, move |s: &Seen| match s.uri.path() {
        "/openapi/v2" => json(200, "application/json", spec("a.example.io", "object")),
        "/openapi/v3" => json(200, "application/json", json!({"paths": {
            "apis/a.example.io/v1": {"serverRelativeURL": "/openapi/v3/apis/a.example.io/v1?hash=ABC"},
            "version": {"serverRelativeURL": "/openapi/v3/version?hash=X"}}})),
        "/openapi/v3/apis/a.example.io/v1" => json(200, "application/json", json!({"openapi": "3.0.0", "from": "backend a"})),
        _ => respond(200, "{}"),
    })
    .await;
    let b =
        Backend::start_seeing_fetches(&pki, H2_AND_HTTP11, move |s: &Seen| match s.uri.path() {
            "/openapi/v2" => json(200, "application/json", spec("b.example.io", "string")),
            "/openapi/v3" => respond(404, "404 page not found\n"),
            _ => respond(200, "{}"),
        })
        .await;
    let initial = vec![
        apiservice(&pki, "a.example.io", "v1", "a", 200, 15),
        apiservice(&pki, "b.example.io", "v1", "b", 100, 15),
    ];
    let g = gateway(&pki, &[("a", a.addr), ("b", b.addr)], fast(), initial).await;
    for name in ["v1.a.example.io", "v1.b.example.io"] {
        g.registry.set_available_condition(
            name,
            ConditionStatus::True,
            "Passed",
            "all checks passed",
        );
    }
    let c = client(&pki, &g);
    let mut merged = Value::Null;
    eventually("both specs merged", async || {
        merged = serde_json::from_str(&c.get("/openapi/v2").await.body).unwrap();
        merged["paths"]
            .get("/apis/b.example.io/v1/things")
            .is_some()
            && merged["paths"]
                .get("/apis/a.example.io/v1/things")
                .is_some()
    })
    .await;
    assert!(
        merged["paths"].get("/version").is_none(),
        "filtered to the group-version"
    );
    assert_eq!(
        merged["definitions"]["Thing"]["type"], "object",
        "the higher group priority merges first"
    );
    assert_eq!(merged["definitions"]["Thing_v2"]["type"], "string");
    assert_eq!(
        merged["paths"]["/apis/b.example.io/v1/things"]["get"]["responses"]["200"]["schema"]["$ref"],
        "#/definitions/Thing_v2"
    );
    assert!(
        merged["definitions"].get("Info").is_none(),
        "only dropped paths used it"
    );
    let r = c
        .open(
            "/openapi/v2",
            &[(
                "accept",
                "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
            )],
        )
        .await;
    assert_eq!(
        r.headers()["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let proto = http_body_util::BodyExt::collect(r.into_body())
        .await
        .unwrap()
        .to_bytes();
    let doc = <kube_aggregator::openapi::proto::Document as prost::Message>::decode(proto).unwrap();
    let names: Vec<&str> = doc
        .definitions
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["Thing", "Thing_v2"]);
    let r304 = c.get_with("/openapi/v2", &[("if-none-match", &etag)]).await;
    assert_eq!(r304.status, 304);

    let mut root = Value::Null;
    eventually("both v3 keys", async || {
        root = serde_json::from_str(&c.get("/openapi/v3").await.body).unwrap();
        root["paths"].get("apis/b.example.io/v1").is_some()
            && root["paths"].get("apis/a.example.io/v1").is_some()
    })
    .await;
    assert!(
        root["paths"].get("version").is_none(),
        "a backend's key outside its group-version is ignored"
    );
    assert_eq!(
        root["paths"]["apis/a.example.io/v1"]["serverRelativeURL"],
        "/openapi/v3/apis/a.example.io/v1?hash=ABC"
    );
    let proxied = c.get("/openapi/v3/apis/a.example.io/v1?hash=ABC").await;
    assert!(proxied.body.contains("backend a"), "{}", proxied.body);
    let url = root["paths"]["apis/b.example.io/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    let converted = c.get(&url).await;
    assert_eq!(converted.status, 200);
    assert_eq!(converted.headers["cache-control"], "public, immutable");
    let doc: Value = serde_json::from_str(&converted.body).unwrap();
    assert_eq!(doc["openapi"], "3.0.0");
    assert_eq!(doc["components"]["schemas"]["Thing"]["type"], "string");
    let stale = c.get("/openapi/v3/apis/b.example.io/v1?hash=OLD").await;
    assert_eq!(stale.status, 301);
    assert_eq!(stale.headers["location"].to_str().unwrap(), url);

    // Each regeneration of the merged v2 document is counted by its cause, as
    // kube-aggregator's metrics name them.
    let text = g.metrics();
    for (apiservice, reason) in [
        ("*", "startup"),
        ("v1.a.example.io", "add"),
        ("v1.b.example.io", "add"),
    ] {
        let sample = format!(
            "aggregator_openapi_v2_regeneration_count{{apiservice=\"{apiservice}\",reason=\"{reason}\"}} 1\n"
        );
        assert!(text.contains(&sample), "{sample} in\n{text}");
    }
    assert!(
        text.contains("aggregator_openapi_v2_regeneration_duration{reason=\"add\"} "),
        "{text}"
    );
    g.registry
        .apply(ApiServiceEvent::Deleted("v1.b.example.io".into()))
        .unwrap();
    eventually("the deletion regenerates the document", async || {
        g.metrics().contains(
            "aggregator_openapi_v2_regeneration_count{apiservice=\"v1.b.example.io\",reason=\"delete\"} 1\n",
        )
    })
    .await;
    let merged: Value = serde_json::from_str(&c.get("/openapi/v2").await.body).unwrap();
    assert!(
        merged["paths"]
            .get("/apis/b.example.io/v1/things")
            .is_none()
    );
}
