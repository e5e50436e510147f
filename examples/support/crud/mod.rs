//! A CRUD + watch extension API server: `servicecatalog.example.io/v1beta1` with a
//! namespaced `ServiceInstance` and a cluster-scoped `ClusterServiceBroker`, in memory
//! with an optional JSON file, behind the aggregator. What the Kubernetes service-catalog
//! was: an API with storage of its own and kube-apiserver's REST semantics, so that
//! kubectl (`apply`, `get -w`, `patch`, `explain`) and client libraries work against it
//! unchanged.
//!
//! | module | mirrors |
//! |---|---|
//! | [`kinds`] | the Go types: schema, Table columns, selectable fields |
//! | [`schema`] | strict decoding and validation (`fieldValidation`) |
//! | [`store`] | etcd and the watch cache: resourceVersions, history, the file |
//! | [`rest`] | the generic registry and the endpoint handlers |
//! | [`patch`] | JSON, merge and strategic merge patch |
//! | [`watch`] | the watch handler: events, bookmarks, 410 |
//! | [`output`] | `Table` and `PartialObjectMetadata` conversion |
//! | [`openapi`] | discovery and OpenAPI v2/v3 |

pub mod kinds;
pub mod openapi;
pub mod output;
pub mod patch;
pub mod rest;
pub mod schema;
pub mod store;
pub mod watch;

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kube_aggregator::Body;
use kube_aggregator::discovery::{Negotiated, etag_of, negotiate, sha512_hex};
use kube_aggregator::status::Status;
use tokio::net::TcpListener;

use crate::support::api_status::{not_acceptable, path_not_found};
use crate::support::extension_server::{self, BoxError, ServingConfig, json, respond};
use kinds::{GROUP, GROUP_VERSION, Kind};
use rest::Call;
use store::Store;

/// Options besides TLS and front-proxy trust.
#[derive(Debug, Clone)]
pub struct CrudConfig {
    /// `--storage-file`: where objects persist across restarts; in memory only when `None`.
    pub storage_file: Option<PathBuf>,
    /// How often a watch with `allowWatchBookmarks=true` gets a `BOOKMARK` (upstream's
    /// watch cache: about once a minute).
    pub bookmark_interval: Duration,
}

impl Default for CrudConfig {
    fn default() -> Self {
        CrudConfig {
            storage_file: None,
            bookmark_interval: Duration::from_secs(60),
        }
    }
}

/// The server's state.
#[derive(Debug, Clone)]
pub struct Crud {
    store: Store,
    bookmark_interval: Duration,
    log: Arc<Mutex<VecDeque<Seen>>>,
}

/// One request as the server received it: what a client really sent.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The method.
    pub method: Method,
    /// The target: escaped path and raw query.
    pub target: String,
    /// The `Content-Type`, empty when absent.
    pub content_type: String,
    /// The `Accept`, empty when absent.
    pub accept: String,
}

/// How many requests [`Crud::log`] keeps.
pub const LOG_SIZE: usize = 512;

/// Request bodies larger than this get 413, as apiserver's `MaxRequestBodyBytes` (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

impl Crud {
    /// Opens the store (reading `config.storage_file` if it exists).
    pub fn open(config: &CrudConfig) -> Result<Crud, BoxError> {
        let store = Store::open(config.storage_file.clone())?;
        Ok(Crud {
            store,
            bookmark_interval: config.bookmark_interval,
            log: Arc::default(),
        })
    }

    /// The most recent requests, oldest first.
    pub fn log(&self) -> Vec<Seen> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The store, for inspection.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Serves until `shutdown` resolves.
    pub async fn serve(
        self,
        serving: &ServingConfig,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), BoxError> {
        let handler = move |req: Request<Incoming>| {
            let crud = self.clone();
            async move { crud.handle(req).await }
        };
        extension_server::serve(serving, listener, handler, shutdown).await
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
            Ok(c) => c.to_bytes(),
            Err(_) => {
                let message = "Request entity too large: limit is 3145728";
                return Status::failure(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestEntityTooLarge",
                    message,
                )
                .into_response();
            }
        };
        let path = parts.uri.path();
        tracing::debug!(method = %parts.method, path, "servicecatalog request");
        self.remember(&parts);
        if let Some(res) = self.documents(&parts.method, path, parts.uri.query(), &parts.headers) {
            return res;
        }
        let Some(rest) = path.strip_prefix(&format!("/apis/{GROUP_VERSION}/")) else {
            return path_not_found();
        };
        let segments: Vec<&str> = rest.split('/').collect();
        let (namespace, kind, name) = match segments.as_slice() {
            ["namespaces", ns, plural] => {
                (*ns, kinds::by_plural(plural).filter(|k| k.namespaced), None)
            }
            ["namespaces", ns, plural, name] => (
                *ns,
                kinds::by_plural(plural).filter(|k| k.namespaced),
                Some(*name),
            ),
            [plural] => ("", kinds::by_plural(plural), None),
            [plural, name] => (
                "",
                kinds::by_plural(plural).filter(|k| !k.namespaced),
                Some(*name),
            ),
            _ => ("", None, None),
        };
        let Some(kind) = kind else {
            return path_not_found();
        };
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        let Some(form) = output::negotiate(accept) else {
            return not_acceptable(
                "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io, application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            );
        };
        let call = Call {
            store: &self.store,
            kind,
            namespace,
            query: parts.uri.query(),
            form,
        };
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        self.verb(&call, &parts.method, name, content_type, &body)
    }

    fn remember(&self, parts: &http::request::Parts) {
        let header = |name: header::HeaderName| {
            let value = parts.headers.get(name).and_then(|v| v.to_str().ok());
            value.unwrap_or_default().to_owned()
        };
        let seen = Seen {
            method: parts.method.clone(),
            target: parts
                .uri
                .path_and_query()
                .map_or("/", |pq| pq.as_str())
                .to_owned(),
            content_type: header(header::CONTENT_TYPE),
            accept: header(header::ACCEPT),
        };
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == LOG_SIZE {
            log.pop_front();
        }
        log.push_back(seen);
    }

    fn verb(
        &self,
        call: &Call<'_>,
        method: &Method,
        name: Option<&str>,
        content_type: &str,
        body: &Bytes,
    ) -> Response<Body> {
        let all_namespaces = call.kind.namespaced && call.namespace.is_empty();
        match (method, name) {
            (&Method::GET, None) => {
                let opts = match rest::list_options(call) {
                    Ok(o) => o,
                    Err(res) => return res,
                };
                if opts.watch {
                    watch::watch(call, opts, self.bookmark_interval)
                } else {
                    rest::list(call, &opts)
                }
            }
            (&Method::POST, None) if !all_namespaces => rest::create(call, content_type, body),
            (&Method::DELETE, None) if !all_namespaces => match rest::list_options(call) {
                Ok(opts) => rest::delete_collection(call, &opts),
                Err(res) => res,
            },
            (&Method::GET, Some(name)) => rest::get(call, name),
            (&Method::PUT, Some(name)) => rest::update(call, name, content_type, body),
            (&Method::PATCH, Some(name)) => rest::patch(call, name, content_type, body),
            (&Method::DELETE, Some(name)) => rest::delete(call, name, body),
            _ => Status::failure(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
            .with_details(Default::default())
            .into_response(),
        }
    }

    /// Discovery and OpenAPI, or `None` for any other path.
    fn documents(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<Response<Body>> {
        if method != Method::GET {
            return None;
        }
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        Some(match path {
            "/apis" => match negotiate(accept) {
                Negotiated::Aggregated(v) => {
                    let body = serde_json::to_vec(&openapi::aggregated(v.api_version()))
                        .unwrap_or_default();
                    let mut res = respond(StatusCode::OK, v.content_type(), body.clone());
                    res.headers_mut().insert(header::ETAG, etag_of(&body));
                    res.headers_mut()
                        .insert(header::VARY, HeaderValue::from_static("Accept"));
                    res
                }
                _ => json(
                    StatusCode::OK,
                    &serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [openapi::group()]}),
                ),
            },
            p if p == format!("/apis/{GROUP}") => {
                let mut g = openapi::group();
                g["kind"] = "APIGroup".into();
                g["apiVersion"] = "v1".into();
                json(StatusCode::OK, &g)
            }
            p if p == format!("/apis/{GROUP_VERSION}") => {
                json(StatusCode::OK, &openapi::resource_list())
            }
            "/openapi/v2" => json(StatusCode::OK, &openapi::v2_spec()),
            "/openapi/v3" => {
                let hash = sha512_hex(&v3_bytes());
                json(
                    StatusCode::OK,
                    &kube_aggregator::openapi::v3::root_document([(
                        openapi::V3_KEY,
                        hash.as_str(),
                    )]),
                )
            }
            p if p == format!("/openapi/v3/{}", openapi::V3_KEY) => v3_group_version(query),
            _ => return None,
        })
    }
}

fn v3_bytes() -> Vec<u8> {
    serde_json::to_vec(&openapi::v3_document()).unwrap_or_default()
}

/// kube-openapi's handler3: the document with `Etag`; a stale `?hash=` is answered 301 to
/// the current one, a matching one adds `Cache-Control: public, immutable`.
fn v3_group_version(query: Option<&str>) -> Response<Body> {
    let body = v3_bytes();
    let hash = sha512_hex(&body);
    let asked = extension_server::query_param(query, "hash");
    if asked.as_ref().is_some_and(|h| *h != hash) {
        let mut res = respond(
            StatusCode::MOVED_PERMANENTLY,
            "application/json",
            Bytes::new(),
        );
        if let Ok(v) =
            HeaderValue::from_str(&format!("/openapi/v3/{}?hash={hash}", openapi::V3_KEY))
        {
            res.headers_mut().insert(header::LOCATION, v);
        }
        return res;
    }
    let mut res = respond(StatusCode::OK, "application/json", body);
    if let Ok(v) = HeaderValue::from_str(&format!("\"{hash}\"")) {
        res.headers_mut().insert(header::ETAG, v);
    }
    if asked.is_some() {
        res.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        );
    }
    res
}

/// The kind served under `plural`, for callers outside this module.
pub fn kind(plural: &str) -> Option<&'static Kind> {
    kinds::by_plural(plural)
}

/// Runs the server from command-line flags until Ctrl-C: the generic serving flags of
/// [`extension_server::parse_flags`] (default port 7443), `--storage-file` and
/// `--bookmark-interval` (seconds).
pub fn main_from_args(args: impl Iterator<Item = String>) -> ExitCode {
    let (addr, serving, extra) =
        match extension_server::parse_flags(args, 7443, &["storage-file", "bookmark-interval"]) {
            Ok(parsed) => parsed,
            Err(err) => {
                eprintln!("crud_server: {err}");
                return ExitCode::from(2);
            }
        };
    let mut config = CrudConfig::default();
    for (flag, value) in extra {
        match flag.as_str() {
            "storage-file" => config.storage_file = Some(PathBuf::from(value)),
            _ => match value.parse::<u64>() {
                Ok(secs) if secs > 0 => config.bookmark_interval = Duration::from_secs(secs),
                _ => {
                    eprintln!("crud_server: invalid value {value:?} for --{flag}");
                    return ExitCode::from(2);
                }
            },
        }
    }
    let crud = match Crud::open(&config) {
        Ok(crud) => crud,
        Err(err) => {
            eprintln!("crud_server: {err}");
            return ExitCode::from(2);
        }
    };
    extension_server::run_until_ctrl_c("crud_server", move |ctrl_c| async move {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| format!("binding {addr}: {e}"))?;
        tracing::info!("{GROUP_VERSION} serving on https://{addr}");
        crud.serve(&serving, listener, ctrl_c).await
    })
}
