//! A sample extension API server for `metrics.k8s.io/v1beta1`, shaped like metrics-server.
//!
//! It shows the backend half of API aggregation. The aggregator dials this server over TLS
//! presenting its front-proxy client certificate and names the end user in `X-Remote-User`,
//! `X-Remote-Group` and `X-Remote-Extra-*`. Authentication is the library's
//! [`kube_aggregator::authn`] in the shape of k8s.io/apiserver's delegating authenticator
//! (docs/upstream-behaviour.md §7.1): the request-header authenticator trusts those headers only on a
//! connection whose client certificate verifies against the request-header CA with an
//! allowed CN, and anonymous access is limited to the probe paths, so anything else without
//! a front proxy gets 401. (The delegating chain's x509 and TokenReview steps need a
//! kube-apiserver to ask, which this sample has not.) Usage comes from
//! [`super::cluster`], so `kubectl top nodes` and `kubectl top pods -A` report the same
//! nodes and pods that the gateway example lists.

// Every example binary compiles this module privately, so its `pub` API is unreachable
// by construction; it stays `pub` because it is the interface the binaries share.
#![allow(unreachable_pub)]

use std::convert::Infallible;
use std::fmt::Display;
use std::future::{Future, ready};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use kube_aggregator::authn::{AuthenticationLayer, Union, UserInfo};
use kube_aggregator::{Body, server};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::Layer;

use super::cluster::{self, NODES, PODS, Usage};
use super::extension_server::{self, PROBES, ServingConfig, rfc3339};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";
const GV_PATH: &str = "/apis/metrics.k8s.io/v1beta1";
/// How long before "now" the sample scrape happened; metrics-server reports the scrape time.
const SCRAPE_AGE: Duration = Duration::from_secs(5);
/// The averaging window, printed the way Go prints a `time.Duration`.
const WINDOW: &str = "10.5s";

// ---- TLS serving and authentication ----------------------------------------------------

/// Where the server finds its TLS material and whom it accepts as a front proxy: the
/// serving flags every sample extension server shares.
pub type MetricsServerConfig = ServingConfig;

/// Serves until `shutdown` resolves; HTTP/1.1 and HTTP/2 (ALPN h2, http/1.1) over TLS.
///
/// Errors: a certificate, key or CA file that cannot be read or used; the message names
/// the file. After `shutdown`, open connections get up to 10 s to finish.
pub async fn serve(
    config: MetricsServerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    run(extension_server::prepare(&config)?, listener, shutdown).await
}

async fn run(
    (tls, authn): (Arc<rustls::ServerConfig>, Union),
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    let handler = tower::service_fn(|req: Request<hyper::body::Incoming>| {
        ready(Ok::<_, Infallible>(handle(&req).map(Body::new)))
    });
    let service = AuthenticationLayer::new(authn).layer(handler);
    server::serve_tls(listener, tls, service, shutdown).await;
    Ok(())
}

// ---- Routing ---------------------------------------------------------------------------

enum Route<'a> {
    GroupList,
    Group,
    ResourceList,
    Nodes,
    Node(&'a str),
    Pods(Option<&'a str>),
    Pod(&'a str, &'a str),
}

fn route(path: &str) -> Option<Route<'_>> {
    match path {
        "/apis" => return Some(Route::GroupList),
        "/apis/metrics.k8s.io" => return Some(Route::Group),
        GV_PATH => return Some(Route::ResourceList),
        _ => {}
    }
    let rest = path.strip_prefix(GV_PATH)?.strip_prefix('/')?;
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.contains(&"") {
        return None;
    }
    Some(match segments.as_slice() {
        ["nodes"] => Route::Nodes,
        ["nodes", name] => Route::Node(name),
        ["pods"] => Route::Pods(None),
        ["namespaces", ns, "pods"] => Route::Pods(Some(ns)),
        ["namespaces", ns, "pods", name] => Route::Pod(ns, name),
        _ => return None,
    })
}

/// The last requests the server answered, as `(user, method, path and query)`, oldest
/// first, at most [`REQUEST_LOG_SIZE`]: what an operator would read in its request log.
static REQUEST_LOG: std::sync::Mutex<std::collections::VecDeque<(String, String, String)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());
/// How many requests [`request_log`] keeps.
pub const REQUEST_LOG_SIZE: usize = 4096;

/// A copy of the request log: `(user, method, path and query)`, oldest first.
pub fn request_log() -> Vec<(String, String, String)> {
    let log = REQUEST_LOG.lock().unwrap_or_else(|p| p.into_inner());
    log.iter().cloned().collect()
}

/// Answers an authenticated request; the [`UserInfo`] is in its extensions.
fn handle<B>(req: &Request<B>) -> Response<Full<Bytes>> {
    let (method, path) = (req.method(), req.uri().path());
    if PROBES.contains(&path) {
        return respond(StatusCode::OK, "text/plain; charset=utf-8", "ok".into());
    }
    let user = req
        .extensions()
        .get::<UserInfo>()
        .cloned()
        .unwrap_or_default();
    let UserInfo {
        name,
        groups,
        extra,
        ..
    } = &user;
    tracing::debug!(user = %name, ?groups, ?extra, %method, path, "request");
    remember(&user);
    {
        let mut log = REQUEST_LOG.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == REQUEST_LOG_SIZE {
            log.pop_front();
        }
        let target = req.uri().path_and_query().map_or(path, |pq| pq.as_str());
        log.push_back((name.clone(), method.to_string(), target.to_owned()));
    }
    if method == Method::GET {
        if let Some(res) = super::metrics_openapi::handle(path, req.uri().query(), req.headers()) {
            return res;
        }
    }
    // Authorization: every authenticated user may read metrics.
    let Some(route) = route(path) else {
        let message = "the server could not find the requested resource";
        return status(StatusCode::NOT_FOUND, "NotFound", message, Some(json!({})));
    };
    if method != Method::GET {
        let message = "the server does not allow this method on the requested resource";
        let code = StatusCode::METHOD_NOT_ALLOWED;
        return status(code, "MethodNotAllowed", message, Some(json!({})));
    }
    let selected = NameSelector::from_query(req.uri().query());
    let now = SystemTime::now();
    let body = match route {
        Route::GroupList => {
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
        }
        Route::Group => {
            let mut group = group();
            group["kind"] = "APIGroup".into();
            group["apiVersion"] = "v1".into();
            group
        }
        Route::ResourceList => resource_list(),
        Route::Nodes => {
            let nodes = NODES.iter().filter(|n| selected.matches(n.name));
            list(
                "NodeMetricsList",
                nodes.map(|n| node_metrics(n, now)).collect(),
            )
        }
        Route::Node(name) => match NODES.iter().find(|n| n.name == name) {
            Some(node) => typed("NodeMetrics", node_metrics(node, now)),
            None => return not_found("nodemetrics", name),
        },
        Route::Pods(ns) => {
            let in_ns = |p: &&cluster::Pod| ns.is_none_or(|ns| p.namespace == ns);
            let mut pods: Vec<_> = PODS.iter().filter(in_ns).collect();
            pods.retain(|p| selected.matches(p.name));
            pods.sort_by_key(|p| (p.namespace, p.name));
            list(
                "PodMetricsList",
                pods.into_iter().map(|p| pod_metrics(p, now)).collect(),
            )
        }
        Route::Pod(ns, name) => match PODS.iter().find(|p| p.namespace == ns && p.name == name) {
            Some(pod) => typed("PodMetrics", pod_metrics(pod, now)),
            None => return not_found("podmetrics", &format!("{ns}/{name}")),
        },
    };
    // JSON whatever the Accept header prefers: kubectl asks for protobuf first and takes
    // JSON. The trailing newline is what Go's json.Encoder writes.
    respond(
        StatusCode::OK,
        "application/json",
        format!("{body}\n").into(),
    )
}

/// The identities of the most recent requests served, oldest first (at most 1,000): what
/// an end-to-end test reads to see whom the aggregator presented.
pub fn callers() -> Vec<UserInfo> {
    CALLERS
        .lock()
        .map(|c| c.iter().cloned().collect())
        .unwrap_or_default()
}

static CALLERS: std::sync::Mutex<std::collections::VecDeque<UserInfo>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

fn remember(user: &UserInfo) {
    if let Ok(mut c) = CALLERS.lock() {
        if c.len() == 1000 {
            c.pop_front();
        }
        c.push_back(user.clone());
    }
}

/// The `fieldSelector` terms on `metadata.name` (`=`, `==`, `!=`); other fields and label
/// selectors are accepted and ignored, which is enough for `kubectl top`.
struct NameSelector(Vec<(String, bool)>);

impl NameSelector {
    fn from_query(query: Option<&str>) -> Self {
        let mut terms = Vec::new();
        let pairs = form_urlencoded::parse(query.unwrap_or_default().as_bytes());
        for (_, selector) in pairs.filter(|(k, _)| k == "fieldSelector") {
            for term in selector.split(',').map(str::trim) {
                let Some(rest) = term.strip_prefix("metadata.name") else {
                    continue;
                };
                if let Some(v) = rest.strip_prefix("!=") {
                    terms.push((v.to_owned(), false));
                } else if let Some(v) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('=')) {
                    terms.push((v.to_owned(), true));
                }
            }
        }
        Self(terms)
    }

    fn matches(&self, name: &str) -> bool {
        self.0
            .iter()
            .all(|(value, equal)| (value == name) == *equal)
    }
}

// ---- metrics.k8s.io/v1beta1 documents ------------------------------------------------

fn group() -> Value {
    let version = json!({"groupVersion": GROUP_VERSION, "version": "v1beta1"});
    json!({"name": "metrics.k8s.io", "versions": [version], "preferredVersion": version})
}

/// What metrics-server's discovery says: singularName empty, verbs get and list.
fn resource_list() -> Value {
    let resource = |name, namespaced, kind| {
        json!({
            "name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
            "verbs": ["get", "list"],
        })
    };
    let resources = [
        resource("nodes", false, "NodeMetrics"),
        resource("pods", true, "PodMetrics"),
    ];
    json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": resources,
    })
}

/// CPU in nanocores (`612345678n`), memory working set in KiB (`5242880Ki`). Real
/// metrics-server canonicalises the quantities (`1834m`, `5Gi`); clients parse both.
fn usage(usage: Usage) -> Value {
    let Usage {
        cpu_nanos,
        memory_kib,
    } = usage;
    json!({"cpu": format!("{cpu_nanos}n"), "memory": format!("{memory_kib}Ki")})
}

/// The common part of NodeMetrics and PodMetrics, as metrics-server fills it: a creation
/// time of now, the object's labels, the scrape time and window.
fn metrics(name: &str, namespace: Option<&str>, labels: Value, now: SystemTime) -> Value {
    let mut meta = json!({"name": name, "creationTimestamp": rfc3339(now), "labels": labels});
    if let Some(namespace) = namespace {
        meta["namespace"] = namespace.into();
    }
    json!({"metadata": meta, "timestamp": rfc3339(now - SCRAPE_AGE), "window": WINDOW})
}

fn node_metrics(node: &cluster::Node, now: SystemTime) -> Value {
    let labels = json!({
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
    });
    let mut item = metrics(node.name, None, labels, now);
    item["usage"] = usage(node.usage);
    item
}

fn pod_metrics(pod: &cluster::Pod, now: SystemTime) -> Value {
    // Pods of a Deployment are named <app>-<pod-template-hash>-<suffix>.
    let labels = match pod.name.rsplitn(3, '-').collect::<Vec<_>>().as_slice() {
        [_, hash, app] => json!({"app": app, "pod-template-hash": hash}),
        _ => json!({"app": pod.name}),
    };
    let mut item = metrics(pod.name, Some(pod.namespace), labels, now);
    let container = |c: &cluster::Container| {
        let usage = usage(c.usage);
        json!({"name": c.name, "usage": usage})
    };
    item["containers"] = pod.containers.iter().map(container).collect();
    item
}

/// A single GET carries kind and apiVersion; list items do not.
fn typed(kind: &str, mut object: Value) -> Value {
    object["kind"] = kind.into();
    object["apiVersion"] = GROUP_VERSION.into();
    object
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": GROUP_VERSION, "metadata": {}, "items": items})
}

// ---- Responses -----------------------------------------------------------------------

/// `<resource>.metrics.k8s.io "<name>" not found`, as `errors.NewNotFound` words it.
fn not_found(resource: &str, name: &str) -> Response<Full<Bytes>> {
    let message = format!("{resource}.metrics.k8s.io \"{name}\" not found");
    let details = json!({"name": name, "group": "metrics.k8s.io", "kind": resource});
    status(StatusCode::NOT_FOUND, "NotFound", &message, Some(details))
}

/// A metav1 Status failure with its keys in Go's field order, so the 401 body is byte for
/// byte the upstream one; no `details` key when `None`.
fn status(
    code: StatusCode,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Response<Full<Bytes>> {
    let details = details
        .map(|d| format!(r#""details":{d},"#))
        .unwrap_or_default();
    let (message, reason, number) = (Value::from(message), Value::from(reason), code.as_u16());
    let body = format!(
        concat!(
            r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","#,
            r#""message":{message},"reason":{reason},{details}"code":{number}}}"#,
        ),
        message = message,
        reason = reason,
        details = details,
        number = number,
    );
    respond(code, "application/json", format!("{body}\n").into())
}

fn respond(code: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = code;
    let content_type = HeaderValue::from_static(content_type);
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

// ---- Command line --------------------------------------------------------------------

/// Runs the server from command-line flags on a new tokio runtime until Ctrl-C.
///
/// Flags, as metrics-server spells them: `--bind-address` (default 127.0.0.1),
/// `--secure-port` (default 4443), `--tls-cert-file`, `--tls-private-key-file`,
/// `--requestheader-client-ca-file` (all three required) and
/// `--requestheader-allowed-names` (comma-separated), as `--flag=value` or `--flag value`.
/// Logs go to stderr, filtered by `RUST_LOG` (default `info`).
///
/// Exit codes: 0 after a clean shutdown, 2 for a bad flag or an unreadable file (one line
/// on stderr naming it), 1 when the address cannot be bound or serving fails.
pub fn main_from_args(args: impl Iterator<Item = String>) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env();
    let filter = filter.unwrap_or_else(|_| "info".into());
    let subscriber = tracing_subscriber::fmt().with_env_filter(filter);
    subscriber.with_writer(std::io::stderr).try_init().ok();
    let fail = |code: u8, err: &dyn Display| {
        eprintln!("metrics_server: {err}");
        ExitCode::from(code)
    };
    let (addr, config, _) = match extension_server::parse_flags(args, 4443, &[]) {
        Ok(parsed) => parsed,
        Err(err) => return fail(2, &err),
    };
    let prepared = match extension_server::prepare(&config) {
        Ok(prepared) => prepared,
        Err(err) => return fail(2, &err),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => return fail(1, &format!("starting the tokio runtime: {err}")),
    };
    let result = runtime.block_on(async move {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("binding {addr}: {e}"))?;
        tracing::info!("metrics.k8s.io/v1beta1 serving on https://{addr}");
        let ctrl_c = async {
            // Without a signal handler, serve until killed rather than stopping at once.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            tracing::info!("shutting down");
        };
        run(prepared, listener, ctrl_c).await
    });
    result.map_or_else(|err| fail(1, &err), |()| ExitCode::SUCCESS)
}
