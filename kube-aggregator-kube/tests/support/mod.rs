//! A scripted Kubernetes API server for the crate's tests: HTTPS on 127.0.0.1 with a CA
//! of its own, serving `apiregistration.k8s.io/v1` APIServices, core/v1 Services and
//! `discovery.k8s.io/v1` EndpointSlices (of every namespace) with the semantics of
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

/// The kinds served: collection path, kind, apiVersion.
const KINDS: &[(&str, &str, &str)] = &[
    (
        "/apis/apiregistration.k8s.io/v1/apiservices",
        "APIService",
        "apiregistration.k8s.io/v1",
    ),
    ("/api/v1/services", "Service", "v1"),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        "EndpointSlice",
        "discovery.k8s.io/v1",
    ),
];

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
    /// Open watches and the collection each watches.
    watches: Vec<(&'static str, mpsc::UnboundedSender<Bytes>)>,
    /// Requests served, as `METHOD path?query`.
    requests: Vec<String>,
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
                        async move { Ok::<_, Infallible>(serve(&state, req)) }
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
    pub fn put(&self, mut object: Value) {
        let path = path_of(&object);
        let key = key_of(&object);
        let mut state = self.state.lock().unwrap();
        state.revision += 1;
        let revision = state.revision;
        let metadata = &mut object["metadata"];
        metadata["uid"] = json!(format!("uid-{key}"));
        metadata["creationTimestamp"] = json!("2026-12-07T00:00:00Z");
        metadata["resourceVersion"] = json!(revision.to_string());
        let existed = state
            .objects
            .entry(path)
            .or_default()
            .insert(key, object.clone())
            .is_some();
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        state.record(revision, path, kind, object);
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
        self.remove(KINDS[0].0, name);
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
        state.watches.retain(|(path, w)| {
            let (_, kind, api_version) = KINDS.iter().find(|(p, _, _)| p == path).unwrap();
            let line = event_line(
                "BOOKMARK",
                &json!({
                    "kind": kind,
                    "apiVersion": api_version,
                    "metadata": {"resourceVersion": revision},
                }),
            );
            w.send(line).is_ok()
        });
    }

    /// The requests served so far, `GET path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        let mut state = self.state.lock().unwrap();
        state.watches.retain(|(_, w)| !w.is_closed());
        state.watches.len()
    }
}

impl Store {
    fn record(&mut self, revision: u64, path: &'static str, kind: &'static str, object: Value) {
        let line = event_line(kind, &object);
        self.history.push((revision, path, kind, object));
        self.watches
            .retain(|(watched, w)| *watched != path || w.send(line.clone()).is_ok());
    }
}

/// The collection of `object`, by its `kind`.
fn path_of(object: &Value) -> &'static str {
    let kind = object["kind"].as_str().unwrap_or_default();
    KINDS
        .iter()
        .find(|(_, k, _)| *k == kind)
        .map(|(path, _, _)| *path)
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

fn serve(state: &Mutex<Store>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let mut store = state.lock().unwrap();
    store.requests.push(format!(
        "{} {}",
        req.method(),
        req.uri().path_and_query().map_or("", |p| p.as_str())
    ));
    let Some(&(path, kind, api_version)) = KINDS.iter().find(|(p, _, _)| *p == path) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if matches!(query.get("watch").map(String::as_str), Some("true" | "1")) {
        return watch(&mut store, path, &query);
    }
    list(&store, (path, kind, api_version), &query)
}

/// One page of the list at the store's revision (upstream pins a paginated list to the
/// revision of its first page; the objects here do not change between the pages of a
/// test's list, which is all the client can see of it).
fn list(
    store: &Store,
    (path, kind, api_version): (&str, &str, &str),
    query: &BTreeMap<String, String>,
) -> Response<Body> {
    let empty = BTreeMap::new();
    let objects = store.objects.get(path).unwrap_or(&empty);
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
            let mut item = o.clone();
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
            "kind": format!("{kind}List"),
            "apiVersion": api_version,
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn watch(
    store: &mut Store,
    path: &'static str,
    query: &BTreeMap<String, String>,
) -> Response<Body> {
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
            if *revision > from && *watched == path {
                let _ = tx.send(event_line(kind, object));
            }
        }
        store.watches.push((path, tx));
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
