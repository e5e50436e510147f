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
//! Mirrors the mux of kube-aggregator
//! [`pkg/apiserver/apiserver.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/apiserver.go) (exact paths
//! first, then the longest prefix, then the delegate, as
//! [`pkg/server/mux/pathrecorder.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/mux/pathrecorder.go)
//! matches) and the decisions of
//! [`pkg/apiserver/handler_proxy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/handler_proxy.go). The
//! service is always ready; each request does one snapshot load.
//!
//! A remote APIService's request is answered, in upstream's order: 503 `service
//! unavailable` when its `Available` condition is not `True` (no connection is tried);
//! 500 with the transport's error when no client could be built; 500 `missing user` when
//! no [`UserInfo`](crate::authn::UserInfo) is in the extensions (authentication must run
//! first); 503 `service unavailable` when the Service does not resolve; otherwise the
//! proxied backend answer, or 503 `error trying to reach service: ...` when the backend
//! cannot be reached. These are plain-text bodies, as upstream writes them with Go's
//! `http.Error`. A stack built by the [`Aggregator`](crate::Aggregator) builder also
//! answers 503 naming the problem while its worker is not running.
//!
//! The layer sits innermost in the stack, behind authentication and authorization (it
//! reads the [`RequestInfo`](crate::authz::RequestInfo) authorization computed, or
//! computes the same one), as the aggregator's mux sits behind kube-apiserver's filters.
//!
//! A request in a tenant (a [`Tenant`] in its extensions, see [`crate::tenant`]) is routed
//! the same way by that tenant's own table, discovery and OpenAPI documents, given
//! [`AggregatorLayer::tenants`]; a tenant that is not mounted is 404 `clusters "<name>"
//! not found`. That is one more lock-free load.
//!
//! ```
//! use http::{Request, Response, StatusCode};
//! use kube_aggregator::availability::StaticServiceResolver;
//! use kube_aggregator::registry::Registry;
//! use kube_aggregator::rt::Timer;
//! use kube_aggregator::source::ApiServiceEvent;
//! use kube_aggregator::transport::InMemoryTransport;
//! use kube_aggregator::{AggregatorLayer, Body};
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let registry = Registry::new(InMemoryTransport::new());
//! registry.apply(ApiServiceEvent::Applied(serde_json::from_str(r#"{
//!   "metadata": {"name": "v1beta1.metrics.k8s.io"},
//!   "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"},
//!            "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
//!            "groupPriorityMinimum": 100, "versionPriority": 100}}"#)?))?;
//!
//! // The host's own handlers: any service answering any body of `Bytes`.
//! let host = tower::service_fn(|req: Request<Body>| async move {
//!     Ok::<_, std::convert::Infallible>(Response::new(format!("host: {}", req.uri().path())))
//! });
//! let aggregator = AggregatorLayer::new(registry, StaticServiceResolver::new(), Timer::tokio())
//!     .layer(host);
//!
//! // `/apis` lists apiregistration.k8s.io first, then the APIService groups.
//! let res = aggregator.clone().oneshot(Request::get("/apis").body(Body::empty())?).await?;
//! assert_eq!(res.status(), StatusCode::OK);
//!
//! // A remote APIService not yet checked is not available: 503, no connection tried.
//! let req = Request::get("/apis/metrics.k8s.io/v1beta1/nodes").body(Body::empty())?;
//! let res = aggregator.clone().oneshot(req).await?;
//! assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
//!
//! // Everything else is the host's.
//! let res = aggregator.oneshot(Request::get("/healthz").body(Body::empty())?).await?;
//! assert_eq!(res.status(), StatusCode::OK);
//! # Ok(()) }
//! ```
//!
//! Floor 8 of the import order (docs/architecture.md): uses `apiregistration`,
//! `apiservice`, `authn`, `authz`, `availability`, `body`, `discovery`, `filter`,
//! `gocompat`, `openapi`, `proxy`, `registry`, `resolver`, `rt`, `source`, `status`,
//! `tenancy`, `transport`, `worker`; used by `builder`, `tenant`.

mod balance;
mod discovery;
mod metrics;
mod openapi;
mod remote;
mod route;
pub(crate) mod tenants;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use tower::{Layer, Service, ServiceExt};

use crate::body::{Body, BoxError};
use crate::discovery::DiscoveryManager;
use crate::openapi::OpenApiManager;
use crate::registry::Registry;
use crate::resolver::ServiceResolver;
use crate::rt::{Executor, Timer};
use crate::tenancy::Tenant;

use crate::filter::inner_service_accessors;
pub use balance::OutlierDetection;
pub use metrics::ProxyMetrics;
use remote::remote;
use route::{Target, route};
use tenants::Tenants;

/// Layer that puts the aggregator in front of the host's own handlers.
///
/// Built from a [`Registry`], a [`ServiceResolver`] and a [`Timer`]; the discovery and
/// OpenAPI managers and the tenants are optional and add their paths. Cloning shares
/// everything; the builder methods return a new layer and leave services already built
/// alone.
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
    /// The proxy's latency per APIService.
    proxy_metrics: ProxyMetrics,
    /// The endpoints of Services with several, and which are ejected.
    balancer: Arc<balance::Balancer>,
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
                proxy_metrics: ProxyMetrics::default(),
                balancer: Arc::new(balance::Balancer::new(OutlierDetection::default())),
            }),
        }
    }

    /// The proxy's latency per APIService (`aggregator_proxy_request_duration_seconds`),
    /// for the host to register; [`Aggregator::register_metrics`](crate::Aggregator::register_metrics)
    /// does.
    pub fn proxy_metrics(&self) -> &ProxyMetrics {
        &self.shared.proxy_metrics
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
    inner_service_accessors!();
}

/// The response future of [`AggregatorService`]; `E` is the inner service's error.
pub type ResponseFuture<E = Infallible> = crate::body::BoxAnswer<E>;

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

    // Always ready: local requests go to a clone of the inner service with `oneshot`.
    always_ready!();

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
                    let res = crate::tenancy::not_found(tenant);
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
                discovery::aggregated(inner, req, (manager, cache), version, core)
            }
            Target::OpenApi { v3_root } => {
                let Some(manager) = scope.openapi.clone() else {
                    return Box::pin(inner.oneshot(req));
                };
                let cache = scope.openapi_cache.clone();
                openapi::document_of(inner, req, (manager, cache), v3_root)
            }
            Target::Remote(route, backend) => {
                let registry = scope.registry.clone();
                remote(self.shared.clone(), registry, route, backend, req)
            }
            Target::Inner | Target::Ready(_) => Box::pin(inner.oneshot(req)),
        }
    }
}

/// `bytes` as an `application/json` 200.
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
