//! A scripted Kubernetes API server for the crate's tests: HTTPS on 127.0.0.1 with a CA
//! of its own, serving `apiregistration.k8s.io/v1` APIServices (with their `status`
//! subresource), core/v1 Services, `discovery.k8s.io/v1` EndpointSlices and
//! `coordination.k8s.io/v1` Leases with the semantics of
//! kube-apiserver that a client's list and watch depend on. The test changes the objects
//! and the server's history; each behaviour names the upstream file it imitates.
//!
//! - **List** (`GET /apis/apiregistration.k8s.io/v1/apiservices`, `/api/v1/services`,
//!   `/apis/discovery.k8s.io/v1/endpointslices`): an `APIServiceList` (and so on)
//!   whose `metadata.resourceVersion` is the store's current revision; items carry no
//!   `kind`/`apiVersion` (each is the typed object inside a typed list). With `limit`, a
//!   page and a `continue` token, the rest from the same revision
//!   (k8s.io/apiserver `pkg/storage/etcd3/store.go`, `GetList`).
//! - **Watch** (`?watch=true&resourceVersion=N`): a `200` stream of JSON lines
//!   `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": ...}`, first every event
//!   after `N` still in the history, then each new one
//!   (k8s.io/apimachinery `pkg/apis/meta/v1/watch.go`, k8s.io/apiserver
//!   `pkg/endpoints/handlers/watch.go`). A `resourceVersion` older than the history's start
//!   gets one `ERROR` event with a `410` `Status` of reason `Expired`, "too old resource
//!   version: N (M)", and the stream ends (k8s.io/apiserver `pkg/storage/cacher/watch_cache.go`,
//!   `errors.NewResourceExpired`). `BOOKMARK` events carry only the object's kind and
//!   `metadata.resourceVersion`, sent when the test asks (upstream sends them about once a
//!   minute to watches that allowed them).
//! - **Revisions**: one counter over the store, bumped by each create, update and delete;
//!   an object's `metadata.resourceVersion` is the revision that wrote it, and a delete
//!   event carries the object with the delete's revision (etcd3 store semantics).
//! - **Get** (`GET <collection>/<name>`, namespaced kinds under `namespaces/<ns>/`): the
//!   object with its `kind` and `apiVersion`, or `404` `NotFound` `<resource>.<group>
//!   "<name>" not found` (k8s.io/apimachinery `pkg/api/errors/errors.go`, `NewNotFound`).
//! - **Create** (`POST <collection>`): the object stored at a new revision, `201`; a name
//!   taken is `409` `AlreadyExists` `<resource>.<group> "<name>" already exists`
//!   (k8s.io/apiserver `pkg/registry/generic/registry/store.go`, `Create`).
//! - **Update** (`PUT <collection>/<name>`, and `.../status` for an APIService): a
//!   `metadata.resourceVersion` other than the stored one is `409` `Conflict` `Operation
//!   cannot be fulfilled on <resource>.<group> "<name>": the object has been modified;
//!   please apply your changes to the latest version and try again`; none at all is `422`
//!   `Invalid` (neither kind allows an unconditional update); a missing object is `404`
//!   (`store.go`, `Update`, and `pkg/storage/etcd3/store.go`, `GuaranteedUpdate`). An
//!   update of the main resource keeps the stored `status`, one of `status` keeps the
//!   stored `spec` (`pkg/registry/apiregistration/apiservice/strategy.go` of
//!   kube-aggregator, `PrepareForUpdate` of the strategy and the status strategy).
//!   An update that changes nothing is not written: no new revision, no event (etcd3
//!   `GuaranteedUpdate` returns the stored object when the bytes are the same).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube_aggregator_kube::kube;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The server: where it listens and the CA that signed its certificate.
pub struct ScriptedApiServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The CA of its serving certificate, PEM.
    pub ca_pem: String,
    state: Arc<Mutex<Store>>,
}

impl std::fmt::Debug for ScriptedApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// One kind the server serves.
struct Kind {
    /// The collection of every namespace: the key of the store's objects.
    path: &'static str,
    /// `/api/v1` or `/apis/<group>/<version>`.
    prefix: &'static str,
    /// The resource, plural.
    resource: &'static str,
    /// The API group (empty for core).
    group: &'static str,
    kind: &'static str,
    api_version: &'static str,
    namespaced: bool,
    /// Has a `status` subresource.
    status: bool,
}

/// The kinds served.
const KINDS: &[Kind] = &[
    Kind {
        path: "/apis/apiregistration.k8s.io/v1/apiservices",
        prefix: "/apis/apiregistration.k8s.io/v1",
        resource: "apiservices",
        group: "apiregistration.k8s.io",
        kind: "APIService",
        api_version: "apiregistration.k8s.io/v1",
        namespaced: false,
        status: true,
    },
    Kind {
        path: "/api/v1/services",
        prefix: "/api/v1",
        resource: "services",
        group: "",
        kind: "Service",
        api_version: "v1",
        namespaced: true,
        status: true,
    },
    Kind {
        path: "/apis/discovery.k8s.io/v1/endpointslices",
        prefix: "/apis/discovery.k8s.io/v1",
        resource: "endpointslices",
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        api_version: "discovery.k8s.io/v1",
        namespaced: true,
        status: false,
    },
    Kind {
        path: "/apis/coordination.k8s.io/v1/leases",
        prefix: "/apis/coordination.k8s.io/v1",
        resource: "leases",
        group: "coordination.k8s.io",
        kind: "Lease",
        api_version: "coordination.k8s.io/v1",
        namespaced: true,
        status: false,
    },
];

impl Kind {
    /// `<resource>.<group>`, or `<resource>` for the core group, as errors name a kind.
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// What a request's path names: a kind, maybe a namespace, maybe an object, maybe its
/// `status`.
struct Target {
    kind: &'static Kind,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

impl Target {
    /// The store's key of the named object.
    fn key(&self) -> Option<String> {
        let name = self.name.as_ref()?;
        Some(match &self.namespace {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name.clone(),
        })
    }
}

/// Reads `path` as `<prefix>[/namespaces/<ns>]/<resource>[/<name>[/status]]`.
fn target(path: &str) -> Option<Target> {
    KINDS.iter().find_map(|kind| {
        let rest = path.strip_prefix(kind.prefix)?.strip_prefix('/')?;
        let mut parts: Vec<&str> = rest.split('/').collect();
        let namespace = if kind.namespaced && parts.first() == Some(&"namespaces") {
            if parts.len() < 3 {
                return None;
            }
            let namespace = parts[1].to_owned();
            parts.drain(..2);
            Some(namespace)
        } else {
            None
        };
        if parts.first() != Some(&kind.resource) {
            return None;
        }
        let (name, status) = match &parts[1..] {
            [] => (None, false),
            [name] => (Some((*name).to_owned()), false),
            [name, "status"] if kind.status => (Some((*name).to_owned()), true),
            _ => return None,
        };
        if kind.namespaced && name.is_some() && namespace.is_none() {
            return None;
        }
        Some(Target {
            kind,
            namespace,
            name,
            status,
        })
    })
}

/// The objects of every kind, the history of changes, and the open watches.
#[derive(Default)]
struct Store {
    /// One counter over every kind, as etcd's revision.
    revision: u64,
    /// Collection path, then `namespace/name` (`name` for a cluster-scoped kind).
    objects: BTreeMap<&'static str, BTreeMap<String, Value>>,
    /// `(revision, collection path, type, object)` of every change not yet compacted.
    history: Vec<(u64, &'static str, &'static str, Value)>,
    /// The history starts after this revision: older watches get 410.
    compacted: u64,
    /// Open watches.
    watches: Vec<Watch>,
    /// Requests served, as `METHOD path?query`.
    requests: Vec<String>,
    /// Status updates before which another writer changes the object first.
    interfere: usize,
}

type Body = BoxBody<Bytes, Infallible>;

impl ScriptedApiServer {
    /// Starts a server with no objects, at revision 0.
    pub async fn start() -> ScriptedApiServer {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "scripted-apiserver-ca");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state: Arc<Mutex<Store>> = Arc::default();
        let served = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, state) = (acceptor.clone(), served.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(serve(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        ScriptedApiServer {
            addr,
            ca_pem: ca.pem(),
            state,
        }
    }

    /// A kube client of this server (its CA trusted, no credentials).
    pub fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(format!("https://{}", self.addr).parse().unwrap());
        let ders = rustls_pemfile_ders(&self.ca_pem);
        config.root_cert = Some(ders);
        kube::Client::try_from(config).unwrap()
    }

    /// Writes a kubeconfig for this server into `dir` (with its CA beside it), as
    /// `kubectl config` would; its path.
    pub fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let ca = dir.join("scripted-ca.crt");
        std::fs::write(&ca, &self.ca_pem).unwrap();
        let path = dir.join("scripted.kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: scripted\n  cluster:\n    server: https://{}\n    certificate-authority: {}\nusers:\n- name: scripted\n  user: {{}}\ncontexts:\n- name: scripted\n  context: {{cluster: scripted, user: scripted}}\ncurrent-context: scripted\n",
            self.addr,
            ca.display()
        );
        std::fs::write(&path, config).unwrap();
        path
    }

    /// Creates or replaces the APIService `<version>.<group>` served by Service
    /// `namespace/name`.
    pub fn apply(&self, group: &str, version: &str, service: (&str, &str)) {
        self.put(json!({
            "kind": "APIService",
            "apiVersion": "apiregistration.k8s.io/v1",
            "metadata": {"name": format!("{version}.{group}")},
            "spec": {
                "group": group,
                "version": version,
                "service": {"namespace": service.0, "name": service.1, "port": 443},
                "insecureSkipTLSVerify": true,
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
            "status": {},
        }));
    }

    /// Creates or replaces `object` (its `kind` says which collection): the server sets
    /// `uid`, `creationTimestamp` and `resourceVersion`, as on a create or an update.
    pub fn put(&self, object: Value) {
        let path = path_of(&object);
        let key = key_of(&object);
        let mut state = self.state.lock().unwrap();
        let existed = state
            .objects
            .get(path)
            .is_some_and(|o| o.contains_key(&key));
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        state.write(path, key, object, kind);
    }

    /// Creates or replaces the ClusterIP Service `namespace/name` at `cluster_ip` with
    /// `ports` (`(port, name)`), IPv4 single-stack, as the API server defaults it.
    pub fn service(&self, namespace: &str, name: &str, cluster_ip: &str, ports: &[(i32, &str)]) {
        self.put(json!({
            "kind": "Service",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": cluster_ip,
                "clusterIPs": [cluster_ip],
                "ipFamilies": ["IPv4"],
                "ipFamilyPolicy": "SingleStack",
                "ports": ports.iter().map(|(port, port_name)| json!({
                    "name": port_name,
                    "port": port,
                    "protocol": "TCP",
                    "targetPort": port,
                })).collect::<Vec<_>>(),
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }));
    }

    /// Creates or replaces the IPv4 EndpointSlice `namespace/name` of Service `service`,
    /// one port `(name, port)`, and `endpoints` as `(address, ready)`.
    pub fn endpoint_slice(
        &self,
        namespace: &str,
        name: &str,
        service: &str,
        port: (&str, i32),
        endpoints: &[(&str, bool)],
    ) {
        self.put(json!({
            "kind": "EndpointSlice",
            "apiVersion": "discovery.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {
                    "kubernetes.io/service-name": service,
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                },
            },
            "addressType": "IPv4",
            "endpoints": endpoints.iter().map(|(address, ready)| json!({
                "addresses": [address],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
            })).collect::<Vec<_>>(),
            "ports": [{"name": port.0, "port": port.1, "protocol": "TCP"}],
        }));
    }

    /// Deletes the APIService `name`.
    pub fn delete(&self, name: &str) {
        self.remove(KINDS[0].path, name);
    }

    /// Deletes the object at `key` (`namespace/name`, or `name`) of the collection `path`.
    pub fn remove(&self, path: &str, key: &str) {
        let mut state = self.state.lock().unwrap();
        let Some((path, objects)) = state.objects.iter_mut().find(|(p, _)| **p == path) else {
            return;
        };
        let path: &'static str = path;
        let Some(mut object) = objects.remove(key) else {
            return;
        };
        state.revision += 1;
        let revision = state.revision;
        object["metadata"]["resourceVersion"] = json!(revision.to_string());
        state.record(revision, path, "DELETED", object);
    }

    /// Ends every open watch, as a restarted API server or a dropped connection does.
    pub fn cut_watches(&self) {
        self.state.lock().unwrap().watches.clear();
    }

    /// Forgets the history up to the current revision (etcd compaction): a watch from
    /// an older revision gets 410 Gone.
    pub fn compact(&self) {
        let mut state = self.state.lock().unwrap();
        state.compacted = state.revision;
        state.history.clear();
    }

    /// Sends a bookmark at the current revision to every open watch (the object has only
    /// its kind and `metadata.resourceVersion`).
    pub fn bookmark(&self) {
        let mut state = self.state.lock().unwrap();
        let revision = state.revision.to_string();
        state.watches.retain(|w| {
            let kind = KINDS.iter().find(|k| k.path == w.path).unwrap();
            let line = event_line(
                "BOOKMARK",
                &json!({
                    "kind": kind.kind,
                    "apiVersion": kind.api_version,
                    "metadata": {"resourceVersion": revision},
                }),
            );
            w.tx.send(line).is_ok()
        });
    }

    /// The stored object at `key` (`namespace/name`, or `name`) of the collection
    /// `path`, as a get would return it.
    pub fn object(&self, path: &str, key: &str) -> Option<Value> {
        let state = self.state.lock().unwrap();
        state.objects.get(path).and_then(|o| o.get(key)).cloned()
    }

    /// Before each of the next `n` updates of a `status`, another writer updates the
    /// object first (its
    /// `resourceVersion` moves, nothing else), so that the update is stale: the race an
    /// optimistic writer meets when two write at once.
    pub fn interfere_with_updates(&self, n: usize) {
        self.state.lock().unwrap().interfere = n;
    }

    /// The requests served so far, `GET path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        let mut state = self.state.lock().unwrap();
        state.watches.retain(|w| !w.tx.is_closed());
        state.watches.len()
    }
}

/// An open watch: the collection, the namespace if only one, where its events go.
struct Watch {
    path: &'static str,
    namespace: Option<String>,
    tx: mpsc::UnboundedSender<Bytes>,
}

impl Store {
    /// Stores `object` at `key` of `path` at the next revision (with the `uid` and
    /// `creationTimestamp` a create sets) and records the change; the object stored.
    fn write(
        &mut self,
        path: &'static str,
        key: String,
        mut object: Value,
        kind: &'static str,
    ) -> Value {
        self.revision += 1;
        let revision = self.revision;
        let metadata = &mut object["metadata"];
        if metadata["uid"].is_null() {
            metadata["uid"] = json!(format!("uid-{key}"));
        }
        if metadata["creationTimestamp"].is_null() {
            metadata["creationTimestamp"] = json!("2026-12-07T00:00:00Z");
        }
        metadata["resourceVersion"] = json!(revision.to_string());
        self.objects
            .entry(path)
            .or_default()
            .insert(key, object.clone());
        self.record(revision, path, kind, object.clone());
        object
    }

    fn record(&mut self, revision: u64, path: &'static str, kind: &'static str, object: Value) {
        let line = event_line(kind, &object);
        self.watches.retain(|w| {
            w.path != path
                || !in_namespace(&object, w.namespace.as_deref())
                || w.tx.send(line.clone()).is_ok()
        });
        self.history.push((revision, path, kind, object));
    }
}

/// Whether `object` is in `namespace` (every object is when `None`).
fn in_namespace(object: &Value, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
}

/// The collection of `object`, by its `kind`.
fn path_of(object: &Value) -> &'static str {
    let kind = object["kind"].as_str().unwrap_or_default();
    KINDS
        .iter()
        .find(|k| k.kind == kind)
        .map(|k| k.path)
        .unwrap_or_else(|| panic!("the scripted server does not serve kind {kind:?}"))
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn key_of(object: &Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    line.push(b'\n');
    Bytes::from(line)
}

/// The DER certificates of a PEM bundle.
fn rustls_pemfile_ders(pem: &str) -> Vec<Vec<u8>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap().to_vec())
        .collect()
}

async fn serve(state: &Mutex<Store>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let query: BTreeMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut store = state.lock().unwrap();
    store.requests.push(format!(
        "{} {}",
        parts.method,
        parts.uri.path_and_query().map_or("", |p| p.as_str())
    ));
    let Some(target) = target(parts.uri.path()) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    match (&parts.method, target.name.is_some()) {
        (&hyper::Method::GET, false) if watching => watch(&mut store, &target, &query),
        (&hyper::Method::GET, false) => list(&store, &target, &query),
        (&hyper::Method::GET, true) => get(&store, &target),
        (&hyper::Method::POST, false) => match serde_json::from_slice(&body) {
            Ok(object) => create(&mut store, &target, object),
            Err(e) => bad_request(&e),
        },
        (&hyper::Method::PUT, true) => match serde_json::from_slice(&body) {
            Ok(object) => update(&mut store, &target, object),
            Err(e) => bad_request(&e),
        },
        _ => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!(
                "the server does not allow this method on the requested resource ({} {})",
                parts.method,
                parts.uri.path()
            ),
        ),
    }
}

fn bad_request(e: &serde_json::Error) -> Response<Body> {
    status(
        StatusCode::BAD_REQUEST,
        "BadRequest",
        &format!("the object provided is unrecognized: {e}"),
    )
}

/// The stored object at `target`, with its `kind` and `apiVersion`.
fn get(store: &Store, target: &Target) -> Response<Body> {
    let key = target.key().unwrap_or_default();
    match store
        .objects
        .get(target.kind.path)
        .and_then(|o| o.get(&key))
    {
        Some(object) => json_response(StatusCode::OK, object),
        None => not_found(target),
    }
}

fn not_found(target: &Target) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!(
            "{} \"{}\" not found",
            target.kind.qualified(),
            target.name.as_deref().unwrap_or_default()
        ),
    )
}

/// `metadata.<field>` of `object` as a string; empty when it is not one.
fn metadata(object: &Value, field: &str) -> String {
    let value = object["metadata"][field].as_str();
    value.unwrap_or_default().to_owned()
}

/// The 422 `Invalid` of `kind` `name` for `problem` (`<field>: <what is wrong>`).
fn invalid(kind: &str, name: &str, problem: &str) -> Response<Body> {
    let message = format!("{kind} \"{name}\" is invalid: {problem}");
    status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", &message)
}

/// `POST` of `object` to the collection at `target`.
fn create(store: &mut Store, target: &Target, mut object: Value) -> Response<Body> {
    let kind = target.kind;
    let name = metadata(&object, "name");
    if name.is_empty() {
        let required = "metadata.name: Required value: name or generateName is required";
        return invalid(kind.kind, "", required);
    }
    if let Some(namespace) = &target.namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object["kind"] = json!(kind.kind);
    object["apiVersion"] = json!(kind.api_version);
    let key = key_of(&object);
    if store
        .objects
        .get(kind.path)
        .is_some_and(|o| o.contains_key(&key))
    {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            &format!("{} \"{name}\" already exists", kind.qualified()),
        );
    }
    let object = store.write(kind.path, key, object, "ADDED");
    json_response(StatusCode::CREATED, &object)
}

/// `PUT` of `object` at `target` (its `status` when `target.status`).
fn update(store: &mut Store, target: &Target, mut object: Value) -> Response<Body> {
    let kind = target.kind;
    let key = target.key().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let Some(stored) = store
        .objects
        .get(kind.path)
        .and_then(|o| o.get(&key))
        .cloned()
    else {
        return not_found(target);
    };
    let stored = if target.status && store.interfere > 0 {
        store.interfere -= 1;
        store.write(kind.path, key.clone(), stored, "MODIFIED")
    } else {
        stored
    };
    let sent = metadata(&object, "resourceVersion");
    if sent.is_empty() {
        let unset = "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update";
        return invalid(kind.kind, &name, unset);
    }
    if sent != metadata(&stored, "resourceVersion") {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                kind.qualified()
            ),
        );
    }
    let mut next = stored.clone();
    if target.status {
        next["status"] = object["status"].take();
    } else {
        let kept = stored.get("status").cloned();
        next = object;
        next["kind"] = json!(kind.kind);
        next["apiVersion"] = json!(kind.api_version);
        // What the server owns in metadata stays as stored.
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "resourceVersion",
        ] {
            match stored["metadata"].get(field) {
                Some(value) => next["metadata"][field] = value.clone(),
                None => {
                    if let Some(metadata) = next["metadata"].as_object_mut() {
                        metadata.remove(field);
                    }
                }
            }
        }
        if let Some(status) = kept.filter(|_| kind.status) {
            next["status"] = status;
        }
    }
    if next == stored {
        return json_response(StatusCode::OK, &stored);
    }
    let object = store.write(kind.path, key, next, "MODIFIED");
    json_response(StatusCode::OK, &object)
}

/// One page of the list at the store's revision (upstream pins a paginated list to the
/// revision of its first page; the objects here do not change between the pages of a
/// test's list, which is all the client can see of it).
fn list(store: &Store, target: &Target, query: &BTreeMap<String, String>) -> Response<Body> {
    let empty = BTreeMap::new();
    let objects: BTreeMap<&String, &Value> = store
        .objects
        .get(target.kind.path)
        .unwrap_or(&empty)
        .iter()
        .filter(|(_, o)| in_namespace(o, target.namespace.as_deref()))
        .collect();
    let start: usize = query
        .get("continue")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let items: Vec<Value> = objects
        .values()
        .skip(start)
        .take(limit)
        .map(|o| {
            let mut item = (*o).clone();
            let map = item.as_object_mut().unwrap();
            map.remove("kind");
            map.remove("apiVersion");
            item
        })
        .collect();
    let mut metadata = json!({"resourceVersion": store.revision.to_string()});
    let next = start + items.len();
    if next < objects.len() {
        metadata["continue"] = json!(next.to_string());
        metadata["remainingItemCount"] = json!(objects.len() - next);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", target.kind.kind),
            "apiVersion": target.kind.api_version,
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn watch(store: &mut Store, target: &Target, query: &BTreeMap<String, String>) -> Response<Body> {
    let path = target.kind.path;
    let namespace = target.namespace.clone();
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|r| r.parse().ok())
        .unwrap_or(store.revision);
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    if from < store.compacted {
        let expired = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version: {from} ({})", store.compacted),
            "reason": "Expired",
            "code": 410,
        });
        let _ = tx.send(event_line("ERROR", &expired));
        drop(tx);
    } else {
        for (revision, watched, kind, object) in &store.history {
            if *revision > from && *watched == path && in_namespace(object, namespace.as_deref()) {
                let _ = tx.send(event_line(kind, object));
            }
        }
        store.watches.push(Watch {
            path,
            namespace,
            tx,
        });
    }
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|line| (Ok::<_, Infallible>(Frame::data(line)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .unwrap()
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(value).unwrap())).boxed())
        .unwrap()
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(
        code,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code.as_u16(),
        }),
    )
}

/// A lease timing short enough for tests: a 2 s lease renewed every 200 ms.
pub const TIMING: kube_aggregator_kube::LeaseTiming = kube_aggregator_kube::LeaseTiming {
    lease_duration: std::time::Duration::from_secs(2),
    renew_deadline: std::time::Duration::from_secs(1),
    retry_period: std::time::Duration::from_millis(200),
};

/// Replica `i`'s candidacy for the `kube-system/kube-aggregator` lease, with [`TIMING`].
pub fn candidacy(server: &ScriptedApiServer, i: usize) -> kube_aggregator_kube::Leadership {
    kube_aggregator_kube::LeaderElection::new(
        server.client(),
        "kube-system",
        "kube-aggregator",
        format!("replica-{i}"),
    )
    .timing(TIMING)
    .spawn()
    .unwrap()
}

/// Polls `now` every 10 ms until it gives `expected`, at most `within`; how long that
/// took. The failure names `what` it watched, and its last value.
pub async fn until_equal<T: PartialEq + std::fmt::Debug>(
    what: &str,
    within: std::time::Duration,
    expected: &T,
    now: impl Fn() -> T,
) -> std::time::Duration {
    let start = std::time::Instant::now();
    loop {
        let now = now();
        if now == *expected {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "after {within:?} {what} is {now:?}, not {expected:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Waits until exactly one of `candidates` leads, at most `within`; its index.
pub async fn until_one_leads(
    candidates: &[&kube_aggregator_kube::Leadership],
    within: std::time::Duration,
) -> usize {
    let start = std::time::Instant::now();
    loop {
        let leaders: Vec<usize> = (0..candidates.len())
            .filter(|i| candidates[*i].is_leader())
            .collect();
        if let [leader] = leaders[..] {
            return leader;
        }
        assert!(
            start.elapsed() < within,
            "after {within:?}, {} candidates lead",
            leaders.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
