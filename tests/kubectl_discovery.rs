//! Discovery and OpenAPI with the real `kubectl`, through the demo (gateway, sample
//! metrics server), with two more APIServices: a writable `widgets.example.io/v1` served
//! by a small extension server here, and `v1.blackhole.example.io`, whose backend accepts
//! TCP connections and never answers (the seed incident, known failures B13/B14).
//!
//! Fails (never skips) when `kubectl` is not on `PATH`.

pub mod kubectl_cli;
#[path = "../examples/support/mod.rs"]
pub mod support;

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kube_aggregator::Body;
use kubectl_cli::{kubectl, run_kubectl, scratch_dir};
use serde_json::{Value, json};
use support::demo::{self, ExtraApiService};
use support::pki::Ca;
use tokio::net::TcpListener;

/// The bound each kubectl command must finish within while a backend is black-holed.
const QUICK: Duration = Duration::from_secs(2);

/// Runs kubectl with a cache directory of its own (a fresh discovery cache) and returns
/// its output and how long it took.
async fn timed(
    kubeconfig: &Path,
    dir: &Path,
    name: &str,
    args: &[&str],
) -> (bool, String, String, Duration) {
    let cache = dir.join(format!("cache-{name}"));
    let start = Instant::now();
    let (ok, out, err) = run_kubectl(kubeconfig, &cache, args).await;
    (ok, out, err, start.elapsed())
}

// ---- the widgets extension server ------------------------------------------------------

const WIDGETS_GV: &str = "/apis/widgets.example.io/v1";

fn json_response(code: StatusCode, content_type: &str, body: &Value) -> Response<Body> {
    let mut res = Response::new(Body::full(serde_json::to_vec(body).unwrap_or_default()));
    *res.status_mut() = code;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap(),
    );
    res
}

fn widget_gvk() -> Value {
    json!({"group": "widgets.example.io", "version": "v1", "kind": "Widget"})
}

/// The OpenAPI v3 document of widgets.example.io/v1: the Widget schema and a PATCH
/// operation that declares `fieldValidation`, so kubectl leaves validation to the server.
fn widgets_v3() -> Value {
    let fv = json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    let body = json!({"content": {"application/json": {"schema": {"$ref": "#/components/schemas/com.example.widgets.v1.Widget"}}}});
    json!({
        "openapi": "3.0.0", "info": {"title": "widgets", "version": "v1"},
        "paths": {
            "/apis/widgets.example.io/v1/namespaces/{namespace}/widgets": {
                "post": {"operationId": "createWidget", "parameters": [fv.clone()], "requestBody": body.clone(),
                         "responses": {"201": {"description": "Created"}},
                         "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": widget_gvk()}},
            "/apis/widgets.example.io/v1/namespaces/{namespace}/widgets/{name}": {
                "patch": {"operationId": "patchWidget", "parameters": [fv],
                          "requestBody": {"content": {"application/merge-patch+json": {"schema": {"type": "object"}}}},
                          "responses": {"200": {"description": "OK"}},
                          "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": widget_gvk()}}
        },
        "components": {"schemas": {"com.example.widgets.v1.Widget": {
            "type": "object", "description": "A widget.",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"type": "object"},
                           "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
            "x-kubernetes-group-version-kind": [widget_gvk()]}}}
    })
}

type Store = Arc<Mutex<HashMap<String, Value>>>;
type Log = Arc<Mutex<Vec<(Method, String)>>>;

async fn widgets(req: Request<Incoming>, store: Store, log: Log) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or("", |pq| pq.as_str())
        .to_owned();
    log.lock().unwrap().push((parts.method.clone(), target));
    let path = parts.uri.path();
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let v3 = serde_json::to_vec(&widgets_v3()).unwrap();
    let hash = kube_aggregator::discovery::sha512_hex(&v3);
    let not_found = |what: &str| {
        json_response(
            StatusCode::NOT_FOUND,
            "application/json",
            &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{what} not found"), "reason": "NotFound", "code": 404}),
        )
    };
    match (&parts.method, path) {
        (&Method::GET, "/apis") => match kube_aggregator::discovery::negotiate(accept) {
            kube_aggregator::discovery::Negotiated::Aggregated(v) => json_response(
                StatusCode::OK,
                v.content_type(),
                &json!({
                "kind": "APIGroupDiscoveryList", "apiVersion": v.api_version(), "metadata": {},
                "items": [{"metadata": {"name": "widgets.example.io"}, "versions": [{"version": "v1", "freshness": "Current",
                    "resources": [{"resource": "widgets", "responseKind": widget_gvk(), "scope": "Namespaced",
                                   "singularResource": "widget", "verbs": ["create", "get", "list", "patch"]}]}]}]}),
            ),
            _ => not_found("the APIGroupList"),
        },
        (&Method::GET, WIDGETS_GV) => json_response(
            StatusCode::OK,
            "application/json",
            &json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "widgets.example.io/v1",
            "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget",
                           "verbs": ["create", "get", "list", "patch"]}]}),
        ),
        (&Method::GET, "/openapi/v3") => json_response(
            StatusCode::OK,
            "application/json",
            &json!({
            "paths": {"apis/widgets.example.io/v1": {"serverRelativeURL": format!("/openapi/v3/apis/widgets.example.io/v1?hash={hash}")}}}),
        ),
        (&Method::GET, "/openapi/v3/apis/widgets.example.io/v1") => {
            let mut res = Response::new(Body::full(v3));
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            res
        }
        (_, p) if p.starts_with("/apis/widgets.example.io/v1/namespaces/") => {
            let rest: Vec<&str> = p["/apis/widgets.example.io/v1/namespaces/".len()..]
                .split('/')
                .collect();
            match (&parts.method, rest.as_slice()) {
                (&Method::GET, [ns, "widgets", name]) => {
                    match store.lock().unwrap().get(&format!("{ns}/{name}")) {
                        Some(w) => json_response(StatusCode::OK, "application/json", w),
                        None => not_found(&format!("widgets.widgets.example.io \"{name}\"")),
                    }
                }
                (&Method::POST, [ns, "widgets"]) => {
                    let Ok(mut w) = serde_json::from_slice::<Value>(&body) else {
                        return json_response(
                            StatusCode::BAD_REQUEST,
                            "application/json",
                            &json!({"kind": "Status", "code": 400}),
                        );
                    };
                    let name = w["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    w["metadata"]["namespace"] = json!(ns);
                    w["metadata"]["resourceVersion"] = json!("1");
                    store
                        .lock()
                        .unwrap()
                        .insert(format!("{ns}/{name}"), w.clone());
                    json_response(StatusCode::CREATED, "application/json", &w)
                }
                _ => not_found("the resource"),
            }
        }
        _ => not_found("the path"),
    }
}

async fn start_widgets(ca: &Ca) -> (std::net::SocketAddr, Log) {
    let leaf = ca.server("widgets.test-ns.svc", &["widgets.test-ns.svc", "127.0.0.1"]);
    let tls = kube_aggregator::server::server_config(
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        ca.cert_pem.as_bytes(),
        true,
    )
    .expect("widgets TLS config");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (store, log): (Store, Log) = Default::default();
    let seen = log.clone();
    let svc = tower::service_fn(move |req: Request<Incoming>| {
        let (store, log) = (store.clone(), seen.clone());
        async move { Ok::<_, Infallible>(widgets(req, store, log).await) }
    });
    tokio::spawn(kube_aggregator::server::serve_tls(
        listener,
        tls,
        svc,
        std::future::pending(),
    ));
    (addr, log)
}

/// A listener that accepts TCP connections and never reads or writes: a black-holed
/// backend. Connections are held until the test ends.
async fn start_black_hole() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    addr
}

fn extra(
    name: &str,
    group: &str,
    service: &str,
    addr: std::net::SocketAddr,
    priority: i32,
) -> ExtraApiService {
    ExtraApiService {
        file: format!("{group}.yaml"),
        manifest: format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\nspec:\n  service:\n    namespace: test-ns\n    name: {service}\n    port: 443\n  group: {group}\n  version: v1\n  insecureSkipTLSVerify: true\n  groupPriorityMinimum: {priority}\n  versionPriority: 15\n"
        ),
        endpoint: format!(
            "- namespace: test-ns\n  name: {service}\n  port: 443\n  address: \"{addr}\"\n"
        ),
    }
}

/// The demo's admin user's requests for per-group-version discovery, as the metrics
/// server logged them.
fn admin_discovery_requests() -> usize {
    support::metrics_server::request_log()
        .iter()
        .filter(|(user, method, path)| {
            user == "demo-admin"
                && method == "GET"
                && path.starts_with("/apis/metrics.k8s.io/v1beta1")
                && !path.contains("/nodes")
                && !path.contains("pods")
        })
        .count()
}

/// Runs `kubectl explain <args>` and asserts that its output has each of `lines`.
async fn explains(kubeconfig: &Path, cache: &Path, args: &[&str], lines: &[&str]) {
    let explained = kubectl(kubeconfig, cache, &[&["explain"], args].concat()).await;
    for line in lines {
        assert!(explained.contains(line), "{line:?} in {explained}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovery_and_openapi_with_a_black_holed_apiservice() {
    let dir = scratch_dir("discovery");
    std::fs::create_dir_all(&dir).unwrap();
    let widgets_ca = Ca::new("widgets-ca");
    let (widgets_addr, widgets_log) = start_widgets(&widgets_ca).await;
    let hole = start_black_hole().await;
    let started = Instant::now();
    let demo = demo::start_with(
        &dir.join("demo"),
        Duration::from_secs(30),
        &[
            extra(
                "v1.widgets.example.io",
                "widgets.example.io",
                "widgets",
                widgets_addr,
                500,
            ),
            extra(
                "v1.blackhole.example.io",
                "blackhole.example.io",
                "blackhole",
                hole,
                2000,
            ),
        ],
    )
    .await
    .expect("the demo starts and the metrics APIService becomes Available");
    let kc = demo.kubeconfig.clone();

    // Start-up is not held hostage: the demo returned once metrics.k8s.io was Available,
    // and widgets is too, well before the black hole's 5 s probe timeout.
    let available = |name: &str| {
        demo.gateway
            .registry
            .snapshot()
            .get(name)
            .is_some_and(|r| r.is_available())
    };
    let returned = Instant::now();
    while !available("v1.widgets.example.io") {
        assert!(
            returned.elapsed() < Duration::from_secs(1),
            "widgets not Available"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!available("v1.blackhole.example.io"));

    // The seed incident: with a fresh cache each, these finish without waiting on the
    // black hole.
    let (ok, out, err, took) = timed(&kc, &dir, "get-nodes", &["get", "nodes"]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("node-a"), "{out}");
    assert!(took < QUICK, "kubectl get nodes took {took:?}");
    let (ok, out, err, took) = timed(&kc, &dir, "top-nodes", &["top", "nodes"]).await;
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("node-b"), "{out}");
    assert!(took < QUICK, "kubectl top nodes took {took:?}");
    let before = admin_discovery_requests();
    let (_, out, err, took) = timed(&kc, &dir, "api-resources", &["api-resources"]).await;
    assert!(took < QUICK, "kubectl api-resources took {took:?}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let has = |name: &str, gv: &str| {
        rows.iter()
            .any(|r| r.first() == Some(&name) && r.contains(&gv))
    };
    assert!(has("nodes", "metrics.k8s.io/v1beta1"), "{out}");
    assert!(has("pods", "metrics.k8s.io/v1beta1"), "{out}");
    assert!(has("widgets", "widgets.example.io/v1"), "{out}");
    assert!(has("apiservices", "apiregistration.k8s.io/v1"), "{out}");
    // The black-holed group stays in the aggregated document, Stale and empty (client-go
    // leaves Stale versions out of what it prints, as against kube-apiserver).
    assert!(!out.contains("blackhole"), "{out}\n{err}");
    let doc = demo.gateway.discovery.document();
    let hole = doc
        .groups()
        .iter()
        .find(|g| g.name() == "blackhole.example.io")
        .expect("the black-holed group is listed");
    assert_eq!(
        hole.versions()[0].discovery.freshness,
        Some(kube_aggregator::discovery::v2::Freshness::Stale)
    );
    // One aggregated document, no request per group-version reached the extension server.
    assert_eq!(
        admin_discovery_requests(),
        before,
        "kubectl api-resources asked the metrics server for its discovery"
    );
    let raw = kubectl(&kc, &dir.join("cache-raw"), &["get", "--raw", "/apis"]).await;
    assert!(raw.contains("\"blackhole.example.io\""), "{raw}");

    // Readiness waits for the black hole's first fetch (5 s) and no longer (B14).
    let ready = loop {
        let (ok, out, _) =
            run_kubectl(&kc, &dir.join("cache-ready"), &["get", "--raw", "/readyz"]).await;
        if ok && out == "ok" {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "/readyz not ok 8 s after start: {out}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        ready >= Duration::from_secs(4),
        "ready after {ready:?}, before the black hole's fetch timed out"
    );

    // OpenAPI: the v3 root lists the aggregated group-version; explain prints fields from
    // v3 and from the v2 protobuf.
    let cache = dir.join("cache-openapi");
    let root: Value =
        serde_json::from_str(&kubectl(&kc, &cache, &["get", "--raw", "/openapi/v3"]).await)
            .unwrap();
    let url = root["paths"]["apis/metrics.k8s.io/v1beta1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    assert!(
        url.starts_with("/openapi/v3/apis/metrics.k8s.io/v1beta1?hash="),
        "{root}"
    );
    assert!(root["paths"].get("apis/blackhole.example.io/v1").is_none());
    explains(
        &kc,
        &cache,
        &["nodes", "--api-version=metrics.k8s.io/v1beta1"],
        &[
            "KIND:       NodeMetrics",
            "usage\t<map[string]string> -required-",
        ],
    )
    .await;
    let containers = [
        "FIELD: containers <[]ContainerMetrics>",
        "  name\t<string> -required-",
    ];
    explains(&kc, &cache, &["podmetrics.containers"], &containers).await;
    explains(
        &kc,
        &cache,
        &["--output=plaintext-openapiv2", "podmetrics.containers"],
        &[
            "RESOURCE: containers <[]Object>",
            "   usage\t<map[string]string> -required-",
        ],
    )
    .await;

    // The core API's own OpenAPI (the host's), merged with the APIServices': each form of
    // explain a user types.
    assert!(root["paths"].get("api/v1").is_some(), "{root}");
    let node = ["KIND:       Node\nVERSION:    v1", "status\t<NodeStatus>"];
    explains(&kc, &cache, &["nodes"], &node).await;
    let containers = [
        "FIELD: containers <[]Container>",
        "  name\t<string> -required-",
    ];
    explains(&kc, &cache, &["pods.spec.containers"], &containers).await;
    explains(&kc, &cache, &["nodemetrics"], &["KIND:       NodeMetrics"]).await;
    // A group-qualified name no core resource shares.
    explains(
        &kc,
        &cache,
        &["widgets.widgets.example.io"],
        &["KIND:       Widget"],
    )
    .await;
    // kubectl takes the first resource named `nodes` whose group-resource prefixes the
    // argument, and the core group comes first: `nodes.metrics.k8s.io` is the core Node
    // with the field path `metrics.k8s.io`, as against kube-apiserver (kubectl
    // pkg/explain/explain.go, SplitAndParseResourceRequestWithMatchingPrefix). The schema's
    // header is printed, then the field is not found; kubectl's error names the last
    // field of the path, whichever one was missing (`nodes.spec.x.y` says "y"), so
    // kube-apiserver's answer is this one to the letter.
    let (ok, out, err) = run_kubectl(&kc, &cache, &["explain", "nodes.metrics.k8s.io"]).await;
    assert!(!ok, "{out}");
    assert!(out.contains("KIND:       Node\nVERSION:    v1"), "{out}");
    assert!(err.contains("field \"io\" does not exist"), "{err}");
    let (_, _, err) = run_kubectl(&kc, &cache, &["explain", "nodes.spec.x.y"]).await;
    assert!(err.contains("field \"y\" does not exist"), "{err}");

    // kubectl apply with validation on (strict, the default).
    let manifest = dir.join("widget.yaml");
    std::fs::write(&manifest, "apiVersion: widgets.example.io/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n").unwrap();
    let applied = kubectl(
        &kc,
        &dir.join("cache-apply"),
        &["apply", "-f", manifest.to_str().unwrap()],
    )
    .await;
    assert_eq!(applied.trim(), "widget.widgets.example.io/w1 created");
    let posts: Vec<String> = widgets_log
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| *m == Method::POST)
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert!(posts[0].contains("fieldValidation=Strict"), "{posts:?}");

    demo.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
