//! The aggregator layer: routes each request by the current [`RoutingTable`](crate::registry::RoutingTable) snapshot.
//!
//! | path | answer |
//! |---|---|
//! | `/apis`, `/apis/` | the `APIGroupList` (apiregistration.k8s.io, APIService groups, then the host's own) |
//! | `/apis` with an aggregated `Accept`, given a [`DiscoveryManager`] | the `APIGroupDiscoveryList` ([`crate::discovery`]) |
//! | `/api` with an aggregated `Accept`, given a [`DiscoveryManager`] | the host's core group as an `APIGroupDiscoveryList` |
//! | `/openapi/v2`, `/openapi/v3`, given an [`OpenApiManager`] | the merged documents ([`crate::openapi`]) |
//! | `/openapi/v3/apis/<g>/<v>` listed by a remote APIService | availability gate, then the mTLS proxy |
//! | `/apis/apiregistration.k8s.io/...` | the read-only APIService API |
//! | `/apis/<g>`, `/apis/<g>/` with APIServices | that group's `APIGroup` |
//! | `/apis/<g>/<v>[/...]` of a remote APIService | availability gate, then the mTLS proxy |
//! | anything else, local APIServices included | the inner service (the host's handlers) |
//!
//! Mirrors the mux of kube-aggregator `apiserver.go` and `handler_proxy.go` (docs/upstream-behaviour.md
//! §2.2, §3.1). The service is always ready; each request does one snapshot load.
//!
//! A request in a tenant (a [`Tenant`] in its extensions, see [`crate::tenant`]) is routed
//! the same way by that tenant's own table, discovery and OpenAPI documents, given
//! [`AggregatorLayer::tenants`]; a tenant that is not mounted is 404 `clusters "<name>"
//! not found`. That is one more lock-free load.

mod discovery;
mod openapi;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use tower::{Layer, Service, ServiceExt};

use crate::authn::{ConnectionInfo, UserInfo};
use crate::authz::ApiPath;
use crate::availability::ServiceResolver;
use crate::body::{Body, BoxError};
use crate::discovery::{AggregatedVersion, DiscoveryManager, Negotiated};
use crate::openapi::{OpenApiManager, V3Entry};
use crate::registry::{Registry, RemoteBackend, Route};
use crate::rt::{Executor, Timer};
use crate::status::plain_text_error;
use crate::tenant::{Tenant, Tenants};

/// Layer that puts the aggregator in front of the host's own handlers.
#[derive(Clone)]
pub struct AggregatorLayer {
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Shared {
    /// The stack's own APIServices: every request outside a tenant.
    root: Scope,
    /// The mounted tenants, for requests with a [`Tenant`] in their extensions.
    tenants: Option<Tenants>,
    resolver: Arc<dyn ServiceResolver>,
    timer: Timer,
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    executor: Option<Executor>,
    /// The worker of a stack from [`Aggregator::builder`](crate::Aggregator::builder);
    /// `None` when assembled by hand (the host runs the controller itself).
    worker: Option<Arc<crate::worker::WorkerState>>,
}

/// One APIService table and the documents served from it: the stack's own, or one
/// tenant's. Routing, discovery, OpenAPI and the availability gate of a request all read
/// the one scope it is in.
#[derive(Clone)]
pub(crate) struct Scope {
    pub(crate) registry: Registry,
    pub(crate) discovery: Option<DiscoveryManager>,
    pub(crate) openapi: Option<OpenApiManager>,
    host_cache: Arc<discovery::HostCache>,
    openapi_cache: Arc<openapi::OpenApiCache>,
}

impl Scope {
    pub(crate) fn new(
        registry: Registry,
        discovery: Option<DiscoveryManager>,
        openapi: Option<OpenApiManager>,
    ) -> Scope {
        Scope {
            registry,
            discovery,
            openapi,
            host_cache: Arc::default(),
            openapi_cache: Arc::default(),
        }
    }
}

impl std::fmt::Debug for AggregatorLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorLayer")
            .field("registry", &self.shared.root.registry)
            .field("tenants", &self.shared.tenants)
            .finish_non_exhaustive()
    }
}

impl AggregatorLayer {
    /// Routes by `registry`, resolving Services with `resolver`; `timer` times the 5 s
    /// discovery deadline.
    ///
    /// With the `tokio` feature, upgrade requests are spliced on the tokio executor;
    /// [`AggregatorLayer::executor`] sets another one.
    pub fn new(
        registry: Registry,
        resolver: impl ServiceResolver,
        timer: Timer,
    ) -> AggregatorLayer {
        #[cfg(feature = "tokio")]
        let executor = Some(Executor::tokio());
        #[cfg(not(feature = "tokio"))]
        let executor = None;
        AggregatorLayer {
            shared: Arc::new(Shared {
                root: Scope::new(registry, None, None),
                tenants: None,
                resolver: Arc::new(resolver),
                timer,
                executor,
                worker: None,
            }),
        }
    }

    /// The executor that runs spliced upgrade connections (SPDY, WebSocket).
    pub fn executor(self, executor: Executor) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.executor = Some(executor);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }

    /// Answers remote requests with a 503 naming the problem while `worker` is not running.
    pub(crate) fn with_worker(self, worker: Arc<crate::worker::WorkerState>) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.worker = Some(worker);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }

    /// Serves aggregated discovery (`apidiscovery.k8s.io/v2`, `v2beta1`) for `/apis` and
    /// `/api` from `manager`'s published document. Without one, `/apis` answers only the
    /// legacy `APIGroupList` (which kubectl then follows with one request per
    /// group-version).
    pub fn discovery(self, manager: DiscoveryManager) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.root.discovery = Some(manager);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }

    /// Serves `/openapi/v2` (merged, JSON or protobuf) and `/openapi/v3` (the merged root,
    /// remote group-versions proxied to their APIService) from `manager`'s published
    /// specs. Without one, those paths go to the inner service.
    pub fn openapi(self, manager: OpenApiManager) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.root.openapi = Some(manager);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }

    /// Routes the requests of a tenant (a [`Tenant`] in their extensions, put there by
    /// [`TenantLayer`](crate::tenant::TenantLayer)) by that tenant's own table, discovery
    /// and OpenAPI documents in `tenants`; a tenant that is not mounted is 404 `clusters
    /// "<name>" not found`. Without this, every tenant's request is 404.
    pub fn tenants(self, tenants: Tenants) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.tenants = Some(tenants);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }
}

impl<S> Layer<S> for AggregatorLayer {
    type Service = AggregatorService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AggregatorService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// Service of [`AggregatorLayer`].
#[derive(Clone)]
pub struct AggregatorService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for AggregatorService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S> AggregatorService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the layer, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The response future of [`AggregatorService`]; `E` is the inner service's error.
pub type ResponseFuture<E = Infallible> =
    Pin<Box<dyn Future<Output = Result<Response<Body>, E>> + Send>>;

/// The inner service answers with any body of [`Bytes`] frames (an axum `Router`, a
/// `tower::service_fn` returning `String`s, ...); it is boxed into [`Body`] once, and not
/// at all when it already is one. Its errors pass through unchanged: everything the
/// aggregator answers itself is an `Ok` response.
impl<S, B, RB> Service<Request<B>> for AggregatorService<S>
where
    S: Service<Request<Body>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    /// Always ready: local requests go to a clone of the inner service with `oneshot`.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let mut req = req.map(Body::new);
        // A tenant's request is routed by its tenant's table alone (one more lock-free
        // load); an unknown tenant goes nowhere.
        let mounted = match req.extensions().get::<Tenant>() {
            None => None,
            Some(tenant) => match self
                .shared
                .tenants
                .as_ref()
                .and_then(|t| t.get(tenant.name()))
            {
                Some(mounted) => Some(mounted),
                None => {
                    let res = crate::tenant::not_found(tenant);
                    return Box::pin(std::future::ready(Ok(res)));
                }
            },
        };
        let scope = mounted.as_ref().map_or(&self.shared.root, |m| &m.scope);
        let table = scope.registry.snapshot();
        let target = match route(&table, &mut req, scope) {
            Target::Ready(res) => return Box::pin(std::future::ready(Ok(res))),
            target => target,
        };
        // The host's answers in our body type, boxed once (not at all when already ours).
        let inner = self
            .inner
            .clone()
            .map_response(|res: Response<RB>| res.map(Body::new));
        match target {
            Target::GroupList => group_list(inner, req, table.api_group_list_json().clone()),
            Target::Aggregated { core, version } => {
                let Some(manager) = scope.discovery.clone() else {
                    return Box::pin(inner.oneshot(req));
                };
                let cache = scope.host_cache.clone();
                if core {
                    discovery::core(inner, req, manager, cache, version)
                } else {
                    discovery::group_list(inner, req, manager, cache, version)
                }
            }
            Target::OpenApi { v3_root } => {
                let Some(manager) = scope.openapi.clone() else {
                    return Box::pin(inner.oneshot(req));
                };
                let cache = scope.openapi_cache.clone();
                if v3_root {
                    openapi::v3_root(inner, req, manager, cache)
                } else {
                    openapi::v2(inner, req, manager, cache)
                }
            }
            Target::Remote(route, backend) => {
                let registry = scope.registry.clone();
                remote(self.shared.clone(), registry, route, backend, req)
            }
            Target::Inner | Target::Ready(_) => Box::pin(inner.oneshot(req)),
        }
    }
}

/// Where [`route`] sends a request.
enum Target {
    /// Answered already (discovery of one group, the APIService API, a path error).
    Ready(Response<Body>),
    /// `/apis`: our group list merged with the host's.
    GroupList,
    /// `/apis` (or `/api` when `core`) with an aggregated `Accept`.
    Aggregated {
        core: bool,
        version: AggregatedVersion,
    },
    /// `/openapi/v2`, or the `/openapi/v3` root.
    OpenApi { v3_root: bool },
    /// A remote APIService, and how it is reached.
    Remote(Arc<Route>, Arc<RemoteBackend>),
    /// The host's own handlers.
    Inner,
}

/// The mux of kube-aggregator's `apiserver.go`. Reads the RequestInfo authorization read
/// (or computes the same one when no authorization layer runs), so routing and
/// authorization see one group and version (docs/upstream-behaviour.md §2.2).
fn route(table: &crate::registry::RoutingTable, req: &mut Request<Body>, scope: &Scope) -> Target {
    let is_get = req.method() == Method::GET || req.method() == Method::HEAD;
    if let Err(e) = crate::authz::request_info::ensure(req) {
        return Target::Ready(e.into_response(req.uri()));
    }
    let req = &*req;
    let Some(info) = req.extensions().get::<crate::authz::RequestInfo>() else {
        // `ensure` stored it; never reached, and never a reason to route.
        let uri = req.uri().to_string();
        return Target::Ready(crate::status::internal_error(&uri, &"no RequestInfo"));
    };
    match info.api_path() {
        ApiPath::GroupList if is_get => match aggregated(req, scope, info.path == "/apis") {
            Some(target) => target,
            None => Target::GroupList,
        },
        ApiPath::Group(crate::apiservice::API_GROUP)
        | ApiPath::GroupVersion {
            group: crate::apiservice::API_GROUP,
            ..
        } => Target::Ready(crate::apiregistration::handle(table, req, info)),
        ApiPath::Group(g) if is_get => match table.group(g) {
            Some(group) => Target::Ready(json(group.api_group_json.clone())),
            None => Target::Inner,
        },
        ApiPath::GroupVersion { group, version } => match table.lookup(group, version) {
            Some(route) => remote_target(route),
            None => Target::Inner,
        },
        // The legacy core API is proxied only when `v1.` is a remote APIService.
        ApiPath::Legacy => match table.get("v1.").filter(|r| r.remote().is_some()) {
            Some(route) => remote_target(route),
            None if is_get && matches!(info.path.as_str(), "/api" | "/api/") => {
                match aggregated(req, scope, true) {
                    Some(Target::Aggregated { version, .. }) => Target::Aggregated {
                        core: true,
                        version,
                    },
                    _ => Target::Inner,
                }
            }
            None => Target::Inner,
        },
        ApiPath::Other if is_get && scope.openapi.is_some() => {
            openapi_target(table, req, info, scope)
        }
        _ => Target::Inner,
    }
}

/// The proxy for a remote APIService's route, the inner service for a local one.
fn remote_target(route: &Arc<Route>) -> Target {
    match route.remote() {
        Some(backend) => Target::Remote(route.clone(), backend.clone()),
        None => Target::Inner,
    }
}

/// `/openapi/v2`, `/openapi/v3` and the v3 group-version documents remote APIServices
/// listed; every other path (the host's own v3 documents included) goes to the inner
/// service.
fn openapi_target(
    table: &crate::registry::RoutingTable,
    req: &Request<Body>,
    info: &crate::authz::RequestInfo,
    scope: &Scope,
) -> Target {
    let Some(manager) = &scope.openapi else {
        return Target::Inner;
    };
    match info.path.as_str() {
        "/openapi/v2" => Target::OpenApi { v3_root: false },
        "/openapi/v3" => Target::OpenApi { v3_root: true },
        path => {
            let Some(key) = path.strip_prefix("/openapi/v3/") else {
                return Target::Inner;
            };
            match manager.snapshot().v3.get(key) {
                Some(V3Entry::Remote { apiservice, .. }) => match table.get(apiservice) {
                    Some(route) => remote_target(route),
                    None => Target::Inner,
                },
                Some(V3Entry::Converted(doc)) => Target::Ready(openapi::converted(req, key, doc)),
                None => Target::Inner,
            }
        }
    }
}

/// The aggregated-discovery target of a discovery request, when a manager serves it:
/// only the exact path (`/apis`, not `/apis/`, as upstream's mux) with an aggregated
/// `Accept`; `Some(Ready(406))` when the `Accept` allows nothing JSON.
fn aggregated(req: &Request<Body>, scope: &Scope, exact: bool) -> Option<Target> {
    scope.discovery.as_ref()?;
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    match crate::discovery::negotiate(accept) {
        Negotiated::Aggregated(version) if exact => Some(Target::Aggregated {
            core: false,
            version,
        }),
        Negotiated::NotAcceptable if exact => {
            Some(Target::Ready(crate::discovery::not_acceptable()))
        }
        _ => None,
    }
}

fn json(bytes: Bytes) -> Response<Body> {
    let mut res = Response::new(Body::full(bytes));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

/// `/apis`: our list, with the groups the inner service lists appended.
fn group_list<S, RB>(inner: S, req: Request<Body>, ours: Bytes) -> ResponseFuture<S::Error>
where
    S: Service<Request<Body>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    Box::pin(async move {
        let mut probe = Request::get(req.uri().clone())
            .body(Body::empty())
            .unwrap_or_default();
        probe
            .headers_mut()
            .insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        *probe.extensions_mut() = req.extensions().clone();
        let res = inner.oneshot(probe).await?;
        if res.status() != StatusCode::OK {
            return Ok(json(ours));
        }
        // The host's list is a small document; anything unreadable is ignored.
        let theirs = match res.into_body().collect().await {
            Ok(c) => c.to_bytes(),
            Err(_) => return Ok(json(ours)),
        };
        Ok(json(
            crate::discovery::merge_group_lists(&ours, &theirs).unwrap_or(ours),
        ))
    })
}

/// A remote APIService: the gate, then the proxy (docs/upstream-behaviour.md §3.1 steps 3–8).
fn remote<E: Send + 'static>(
    shared: Arc<Shared>,
    registry: Registry,
    route: Arc<Route>,
    backend: Arc<RemoteBackend>,
    mut req: Request<Body>,
) -> ResponseFuture<E> {
    Box::pin(async move {
        if let Some(problem) = shared
            .worker
            .as_ref()
            .and_then(|w| w.problem(shared.timer.now()))
        {
            return Ok(plain_text_error(StatusCode::SERVICE_UNAVAILABLE, problem));
        }
        if !route.is_available() {
            return Ok(plain_text_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
        let client = match &backend.client {
            Ok(c) => c.clone(),
            Err(e) => {
                return Ok(plain_text_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &e.to_string(),
                ));
            }
        };
        // Taken out, not cloned: nothing behind the proxy reads the extensions.
        let Some(user) = req.extensions_mut().remove::<UserInfo>() else {
            return Ok(plain_text_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "missing user",
            ));
        };
        let authority = match shared.resolver.resolve(&backend.service).await {
            Ok(a) => a,
            Err(e) => {
                // Upstream logs the real error and tells the client only this.
                tracing::warn!(apiservice = route.apiservice.name(), error = %e, "cannot resolve service");
                return Ok(plain_text_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service unavailable",
                ));
            }
        };
        let remote_addr = req
            .extensions()
            .get::<ConnectionInfo>()
            .and_then(|c| c.remote_addr);
        if crate::proxy::is_upgrade_request(&req) {
            #[cfg(feature = "tokio")]
            if let (Some(executor), Ok(c)) = (&shared.executor, &backend.upgrade_client) {
                let client = c.clone();
                return Ok(crate::proxy::forward_upgrade(
                    client,
                    executor,
                    &authority,
                    &user,
                    remote_addr,
                    req,
                )
                .await);
            }
            let text = "error trying to reach service: upgrade requests are not supported by this transport";
            return Ok(plain_text_error(StatusCode::SERVICE_UNAVAILABLE, text));
        }
        let mut res =
            crate::proxy::forward(client, &shared.timer, &authority, &user, remote_addr, req).await;
        // Passive availability: a backend that cannot even be connected to is down for
        // every request, so say so now rather than at the next check.
        if let Some(crate::proxy::Unreachable(error)) = res.extensions_mut().remove() {
            let spec = &route.apiservice.spec;
            let url = if spec.group.is_empty() {
                format!("https://{authority}/api/{}", spec.version)
            } else {
                format!("https://{authority}/apis/{}/{}", spec.group, spec.version)
            };
            let message = format!("failing or missing response from {url}: {error}");
            if registry.report_unreachable(route.apiservice.name(), &message) {
                tracing::warn!(apiservice = route.apiservice.name(), %message, "backend unreachable; marked unavailable");
            }
        }
        Ok(res)
    })
}
