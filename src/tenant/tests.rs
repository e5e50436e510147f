use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::{Layer, ServiceExt};

use super::*;
use crate::Aggregator;
use crate::apiservice::ApiService;
use crate::authn::UserInfo;
use crate::authz::{Attributes, Authorization, AuthorizeFuture, Authorizer, Decision, RequestInfo};
use crate::body::{Body, BoxError};
use crate::source::ApiServiceEvent;
use crate::testing::answer;
use crate::transport::InMemoryTransport;

#[test]
fn tenant_names_are_kcp_logical_cluster_names() {
    for ok in ["a", "team-a", "root:org:team-a", "0", &"a".repeat(63)] {
        assert!(Tenant::new(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "-a",
        "a-",
        "A",
        "a_b",
        "a:",
        ":a",
        "a::b",
        "a/b",
        "a%2Db",
        &"a".repeat(64),
    ] {
        let e = Tenant::new(bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("invalid cluster: {bad:?} does not match the regex")
        );
    }
}

/// What the layer passes on: the URI and the tenant, or its 400.
async fn through_layer(uri: &str) -> Result<(String, Option<String>), (StatusCode, String)> {
    let inner = tower::service_fn(|req: Request<Body>| async move {
        // A RequestInfo of the path before the tenant was taken off does not survive.
        assert!(
            req.headers().get(TENANT_HEADER).is_none(),
            "a client's tenant header"
        );
        let stale = req.extensions().get::<RequestInfo>().is_some();
        assert!(!(stale && req.extensions().get::<Tenant>().is_some()));
        let tenant = req
            .extensions()
            .get::<Tenant>()
            .map(|t| t.name().to_owned());
        let mut res = Response::new(Body::full(req.uri().to_string()));
        res.extensions_mut().insert(tenant);
        Ok::<_, Infallible>(res)
    });
    let mut req = Request::get(uri)
        .header("x-kubernetes-cluster", "team-x")
        .body(Body::empty())
        .unwrap();
    // Computed before the layer, for the path as it was: must not survive it.
    req.extensions_mut().insert(RequestInfo::default());
    let res = TenantLayer::new().layer(inner).oneshot(req).await.unwrap();
    let status = res.status();
    let tenant = res.extensions().get::<Option<String>>().cloned().flatten();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    if status == StatusCode::OK {
        Ok((body, tenant))
    } else {
        Err((status, body))
    }
}

#[tokio::test]
async fn the_layer_takes_the_tenant_off_the_path() {
    let cases = [
        (
            "/clusters/team-a/apis/g/v1/things?limit=1",
            "/apis/g/v1/things?limit=1",
            Some("team-a"),
        ),
        ("/clusters/team-a", "/", Some("team-a")),
        ("/clusters/team-a/", "/", Some("team-a")),
        ("/clusters/root:org/api/v1", "/api/v1", Some("root:org")),
        // The rest is what RequestInfo and the mux then judge: `//apis` routes nowhere.
        (
            "/clusters/team-a//apis/g/v1/x",
            "//apis/g/v1/x",
            Some("team-a"),
        ),
        (
            "https://gw:6443/clusters/team-a/apis",
            "https://gw:6443/apis",
            Some("team-a"),
        ),
        // Not tenant paths.
        ("/clusters", "/clusters", None),
        (
            "/apis/g/v1/clusters/team-a",
            "/apis/g/v1/clusters/team-a",
            None,
        ),
        ("/Clusters/team-a/apis", "/Clusters/team-a/apis", None),
    ];
    for (uri, want, tenant) in cases {
        let (got, t) = through_layer(uri)
            .await
            .unwrap_or_else(|e| panic!("{uri}: {e:?}"));
        assert_eq!(got, want, "{uri}");
        assert_eq!(t.as_deref(), tenant, "{uri}");
    }
    for (uri, message) in [
        (
            "/clusters//apis",
            "invalid cluster: \\\"\\\" does not match the regex",
        ),
        (
            "/clusters/",
            "invalid cluster: \\\"\\\" does not match the regex",
        ),
        (
            "/clusters/Team/apis",
            "invalid cluster: \\\"Team\\\" does not match the regex",
        ),
        (
            "/clusters/team%2Da/apis",
            "invalid cluster: \\\"team%2Da\\\" does not match the regex",
        ),
        (
            "/clusters%2Fteam-a/apis/g/v1/x",
            "must not be percent-encoded",
        ),
        (
            "/%63lusters/team-a/apis/g/v1/x",
            "must not be percent-encoded",
        ),
    ] {
        let (status, body) = through_layer(uri).await.unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(body.contains("\"reason\":\"BadRequest\""), "{uri}: {body}");
        assert!(body.contains(message), "{uri}: {body}");
    }
}

fn apiservice(group: &str, namespace: &str, service: &str) -> ApiService {
    ApiService::remote(group, "v1", namespace, service)
        .priorities(1000, 15)
        .insecure_skip_tls_verify()
}

#[tokio::test]
async fn tenants_follow_the_feed() {
    let tenants = Tenants::new(
        TenantsConfig::default(),
        crate::testing::NoTransport,
        crate::availability::StaticServiceResolver::new(),
        crate::rt::Timer::tokio(),
    );
    let g0 = tenants.generation();
    let widgets = apiservice("widgets.example.io", "ns", "widgets");
    tenants
        .apply(TenantEvent::Applied(TenantSpec::new(
            "team-a",
            vec![widgets.clone()],
        )))
        .unwrap();
    assert!(tenants.generation() > g0);
    assert_eq!(tenants.names(), ["team-a"]);
    let a = tenants.registry("team-a").unwrap();
    assert!(a.snapshot().get("v1.widgets.example.io").is_some());

    // An APIService change inside a tenant; one for a tenant that is not mounted.
    tenants
        .apply(TenantEvent::ApiService {
            tenant: "team-a".into(),
            event: ApiServiceEvent::Deleted("v1.widgets.example.io".into()),
        })
        .unwrap();
    assert!(a.snapshot().is_empty());
    let err = tenants
        .apply(TenantEvent::ApiService {
            tenant: "team-x".into(),
            event: ApiServiceEvent::Applied(widgets.clone()),
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "clusters \"team-x\" not found");

    // A resync: team-a stays (the same registry), team-b comes, bad names are reported
    // and skipped, invalid APIServices reported with upstream's message.
    let mut invalid = widgets.clone();
    invalid.spec.version = String::new();
    let err = tenants
        .apply(TenantEvent::Resynced(vec![
            TenantSpec::new("team-a", vec![widgets.clone()]),
            TenantSpec::new("team-b", vec![widgets.clone(), invalid]),
            TenantSpec::new("Team-C", vec![]),
        ]))
        .unwrap_err();
    assert_eq!(err.errors.len(), 2, "{err}");
    assert!(matches!(&err.errors[0], TenantError::InvalidName(_)));
    assert!(
        matches!(&err.errors[1], TenantError::ApiServices { tenant, .. } if tenant == "team-b")
    );
    assert_eq!(tenants.names(), ["team-a", "team-b"]);
    assert!(a.snapshot().get("v1.widgets.example.io").is_some());
    assert!(
        tenants
            .registry("team-b")
            .unwrap()
            .snapshot()
            .get("v1.widgets.example.io")
            .is_some()
    );

    tenants
        .apply(TenantEvent::Resynced(vec![TenantSpec::new(
            "team-b",
            vec![],
        )]))
        .unwrap();
    assert_eq!(tenants.names(), ["team-b"]);
    tenants
        .apply(TenantEvent::Deleted("team-b".into()))
        .unwrap();
    assert!(tenants.names().is_empty());
    let seen = tenants.generation();
    // Deleting what is not there changes nothing.
    tenants
        .apply(TenantEvent::Deleted("team-b".into()))
        .unwrap();
    assert_eq!(tenants.generation(), seen);
}

/// Allows everything and records what it was asked.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<Attributes>>>);

impl Authorizer for Recording {
    fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
        self.0.lock().unwrap().push(attrs.clone());
        Box::pin(std::future::ready(Ok(Authorization::new(Decision::Allow))))
    }
}

/// An in-process backend that answers with its name and what it saw.
fn echo(name: &'static str) -> impl crate::body::Handles<BoxError> + Sync {
    tower::service_fn(move |req: Request<Body>| async move {
        let h = |n: &str| {
            req.headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let seen = serde_json::json!({
            "backend": name,
            "path": req.uri().path(),
            "user": h("x-remote-user"),
            "cluster": h("x-kubernetes-cluster"),
            "forwardedUri": h("x-forwarded-uri"),
        });
        let mut res = Response::new(Body::full(seen.to_string()));
        res.headers_mut().insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        Ok::<_, BoxError>(res)
    })
}

struct Stack<S> {
    service: S,
    tenants: Tenants,
    authorizer: Recording,
}

async fn stack(forwarding: TenantForwarding) -> Stack<impl crate::body::Handles<Infallible>> {
    let transport = InMemoryTransport::new();
    transport.insert("widgets.team-a.svc", echo("a"));
    transport.insert("widgets.team-b.svc", echo("b"));
    let resolver = transport.resolver();
    let authorizer = Recording::default();
    let (aggregator, worker) = Aggregator::builder(transport)
        .resolver(resolver)
        .authorizer(authorizer.clone())
        .tenants(forwarding)
        .build()
        .unwrap();
    tokio::spawn(worker);
    let tenants = aggregator.tenants().expect("tenancy is on");
    tenants
        .apply(TenantEvent::Resynced(vec![
            TenantSpec::new(
                "team-a",
                vec![apiservice("widgets.example.io", "team-a", "widgets")],
            ),
            TenantSpec::new(
                "team-b",
                vec![apiservice("widgets.example.io", "team-b", "widgets")],
            ),
        ]))
        .unwrap();
    // Both checked by the one availability controller.
    for name in ["team-a", "team-b"] {
        let registry = tenants.registry(name).unwrap();
        let available = registry.wait_until(|table| {
            let route = table.get("v1.widgets.example.io");
            route.is_some_and(|r| r.is_available())
        });
        tokio::time::timeout(std::time::Duration::from_secs(5), available)
            .await
            .expect("each tenant's APIService becomes Available");
    }
    let host = tower::service_fn(|req: Request<Body>| async move {
        let tenant = req
            .extensions()
            .get::<Tenant>()
            .map_or_else(String::new, |t| t.to_string());
        let mut res = Response::new(Body::full(format!("host {tenant} {}", req.uri().path())));
        *res.status_mut() = StatusCode::NOT_FOUND;
        Ok::<_, Infallible>(res)
    });
    Stack {
        service: aggregator.layer(host),
        tenants: tenants.clone(),
        authorizer,
    }
}

/// A GET of `uri` with `headers`, from alice of tenant `team-b` (a user extra).
fn get(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::get(uri);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let mut req = req.body(Body::empty()).unwrap();
    let mut user = UserInfo::new("alice", ["dev"]);
    user.extra = BTreeMap::from([(TENANT_EXTRA_KEY.to_owned(), vec!["team-b".to_owned()])]);
    req.extensions_mut().insert(user);
    req
}

/// A POST of the JSON `body` to `uri`, from alice.
fn post(uri: &str, body: &'static str) -> Request<Body> {
    let mut req = Request::post(uri)
        .header("content-type", "application/json")
        .body(Body::full(body))
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice", ["dev"]));
    req
}

#[tokio::test]
async fn each_tenant_routes_by_its_own_table() {
    let Stack {
        service,
        tenants,
        authorizer,
    } = stack(TenantForwarding::Header).await;
    let path = "/apis/widgets.example.io/v1/things";
    for (tenant, backend) in [("team-a", "a"), ("team-b", "b")] {
        let (status, body) = answer(
            &service,
            get(
                &format!("/clusters/{tenant}{path}"),
                // A client's own tenant header is never believed.
                &[("x-kubernetes-cluster", "team-x")],
            ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            seen,
            serde_json::json!({"backend": backend, "path": path, "user": "alice", "cluster": tenant, "forwardedUri": path})
        );
        let attrs = authorizer.0.lock().unwrap().pop().unwrap();
        assert_eq!(attrs.tenant, tenant);
        assert_eq!(attrs.api_group, "widgets.example.io");
        assert_eq!(attrs.path, path);
    }
    // The stack's own table has no widgets: the host answers, outside any tenant, and no
    // backend sees a tenant header a client sent.
    let (status, body) = answer(&service, get(path, &[("x-kubernetes-cluster", "team-a")])).await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::NOT_FOUND,
            "host  /apis/widgets.example.io/v1/things"
        )
    );
    assert_eq!(authorizer.0.lock().unwrap().pop().unwrap().tenant, "");

    // Legacy discovery per tenant.
    for tenant in ["team-a", "team-b"] {
        let (status, body) = answer(&service, get(&format!("/clusters/{tenant}/apis"), &[])).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            body.contains("\"name\":\"widgets.example.io\""),
            "{tenant}: {body}"
        );
    }
    let (_, body) = answer(&service, get("/apis", &[])).await;
    assert!(!body.contains("widgets.example.io"), "{body}");

    // An unknown tenant is 404 after authorization; a doubled slash after the tenant or an
    // empty tenant never reaches a backend.
    let (status, body) = answer(&service, get(&format!("/clusters/team-c{path}"), &[])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.contains(r#""message":"clusters \"team-c\" not found""#),
        "{body}"
    );
    assert_eq!(authorizer.0.lock().unwrap().pop().unwrap().tenant, "team-c");
    let (status, body) = answer(&service, get(&format!("/clusters/team-a/{path}"), &[])).await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::NOT_FOUND,
            "host team-a //apis/widgets.example.io/v1/things"
        )
    );
    let (status, _) = answer(&service, get(&format!("/clusters/{path}"), &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Self reviews ask within the tenant, and only in a mounted one.
    let review = r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"list","group":"widgets.example.io","resource":"things"}}}"#;
    let ssar = |tenant: &str| {
        format!("/clusters/{tenant}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    };
    let (status, body) = answer(&service, post(&ssar("team-a"), review)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(body.contains(r#""allowed":true"#), "{body}");
    let asked = authorizer.0.lock().unwrap().pop().unwrap();
    assert_eq!(
        (asked.tenant.as_str(), asked.resource.as_str()),
        ("team-a", "things")
    );
    let (status, body) = answer(&service, post(&ssar("team-c"), review)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body.contains(r#"clusters \"team-c\" not found"#), "{body}");

    // Unmounted: 404 at once.
    tenants
        .apply(TenantEvent::Deleted("team-b".into()))
        .unwrap();
    let (status, _) = answer(&service, get(&format!("/clusters/team-b{path}"), &[])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = answer(&service, get(&format!("/clusters/team-a{path}"), &[])).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_path_prefix_can_be_kept_for_the_backend() {
    let Stack { service, .. } = stack(TenantForwarding::PathPrefix).await;
    let path = "/clusters/team-b/apis/widgets.example.io/v1/things";
    let (status, body) = answer(&service, get(path, &[("x-kubernetes-cluster", "team-a")])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        seen,
        serde_json::json!({"backend": "b", "path": path, "user": "alice", "cluster": "", "forwardedUri": path})
    );
}
