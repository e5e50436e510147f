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

mod discovery;
mod openapi;
mod remote;
mod route;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

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

use route::Target;

/// Layer that puts the aggregator in front of the host's own handlers.
#[derive(Clone)]
pub struct AggregatorLayer {
    shared: Arc<Shared>,
}

#[derive(Clone)]
struct Shared {
    registry: Registry,
    resolver: Arc<dyn ServiceResolver>,
    timer: Timer,
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    executor: Option<Executor>,
    /// The worker of a stack from [`Aggregator::builder`](crate::Aggregator::builder);
    /// `None` when assembled by hand (the host runs the controller itself).
    worker: Option<Arc<crate::worker::WorkerState>>,
    discovery: Option<DiscoveryManager>,
    host_cache: Arc<discovery::HostCache>,
    openapi: Option<OpenApiManager>,
    openapi_cache: Arc<openapi::OpenApiCache>,
}

impl std::fmt::Debug for AggregatorLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorLayer")
            .field("registry", &self.shared.registry)
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
                registry,
                resolver: Arc::new(resolver),
                timer,
                executor,
                worker: None,
                discovery: None,
                host_cache: Arc::default(),
                openapi: None,
                openapi_cache: Arc::default(),
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
        shared.discovery = Some(manager);
        AggregatorLayer {
            shared: Arc::new(shared),
        }
    }

    /// Serves `/openapi/v2` (merged, JSON or protobuf) and `/openapi/v3` (the merged root,
    /// remote group-versions proxied to their APIService) from `manager`'s published
    /// specs. Without one, those paths go to the inner service.
    pub fn openapi(self, manager: OpenApiManager) -> AggregatorLayer {
        let mut shared = (*self.shared).clone();
        shared.openapi = Some(manager);
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
        let table = self.shared.registry.snapshot();
        let target = match route::route(&table, &mut req, &self.shared) {
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
                let Some(manager) = self.shared.discovery.clone() else {
                    return Box::pin(inner.oneshot(req));
                };
                let cache = self.shared.host_cache.clone();
                if core {
                    discovery::core(inner, req, manager, cache, version)
                } else {
                    discovery::group_list(inner, req, manager, cache, version)
                }
            }
            Target::OpenApi { v3_root } => {
                let Some(manager) = self.shared.openapi.clone() else {
                    return Box::pin(inner.oneshot(req));
                };
                let cache = self.shared.openapi_cache.clone();
                if v3_root {
                    openapi::v3_root(inner, req, manager, cache)
                } else {
                    openapi::v2(inner, req, manager, cache)
                }
            }
            Target::Remote(route, backend) => {
                remote::remote(self.shared.clone(), route, backend, req)
            }
            Target::Inner | Target::Ready(_) => Box::pin(inner.oneshot(req)),
        }
    }
}

/// A `200` with `bytes` as `application/json`.
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
