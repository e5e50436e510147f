//! Embedding in one step: [`Aggregator::builder`] wires kube-apiserver's usual stack around
//! the host's own handlers and returns it with the one background [`Worker`] the host must
//! run, as tower's `Buffer::pair` returns a service and its worker.
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use kube_aggregator::Aggregator;
//! use kube_aggregator::authn::X509Authenticator;
//! use kube_aggregator::authz::AlwaysAllow;
//! use kube_aggregator::source::ManifestDir;
//! use kube_aggregator::transport::RustlsTransport;
//! use tower::Layer;
//!
//! let transport = RustlsTransport::from_pem(&std::fs::read("proxy.crt")?, &std::fs::read("proxy.key")?)?;
//! let (aggregator, worker) = Aggregator::builder(transport)
//!     .authenticator(X509Authenticator::from_pem(&std::fs::read("client-ca.crt")?)?)
//!     .authorizer(AlwaysAllow)
//!     .source(ManifestDir::watch("apiservices/"))
//!     .build()?;
//! tokio::spawn(worker);
//! let service = aggregator.layer(tower::service_fn(|_req: http::Request<kube_aggregator::Body>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("the host's own API")))
//! }));
//! # let _ = service;
//! # Ok(()) }
//! ```
//!
//! What [`AggregatorBuilder::build`] assembles, outside in (kube-apiserver's order, the
//! `DefaultBuildHandlerChain` of k8s.io/apiserver
//! [`pkg/server/config.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/config.go)):
//! [`AuditIdLayer`], `Cache-Control: no-cache, private` when the handler set none,
//! [`TenantLayer`] (with [`AggregatorBuilder::tenants`]; a pass-through otherwise),
//! [`TimeoutLayer`], [`AuthenticationLayer`] (with the
//! builder's authenticator, or, without one, the [`UserInfo`] the host put into the
//! request extensions), [`TracingLayer`] (with [`AggregatorBuilder::tracing`]; a
//! pass-through otherwise), [`AuditLayer`] (with [`AggregatorBuilder::audit`]; a
//! pass-through otherwise), [`ImpersonationLayer`], [`InFlightLayer`],
//! [`AuthorizationLayer`], [`TenantGateLayer`], [`SelfReviewLayer`], then
//! [`AggregatorLayer`] with aggregated discovery and OpenAPI. Impersonation, authorization and the self reviews ask the one
//! authorizer. The [`Worker`] runs the
//! [`Registry`] feed from the builder's [`ApiServiceSource`](crate::source::ApiServiceSource), the
//! [`AvailabilityController`](crate::availability::AvailabilityController), the [`DiscoveryManager`] and the [`OpenApiManager`], and
//! with tenants their feed and every tenant's managers. Assembling the layers by hand
//! stays possible: each is public and documented, and then the host runs
//! [`Registry::run`] and [`AvailabilityController::run`](crate::availability::AvailabilityController::run) itself.
//!
//! A stack whose worker is not running cannot mark any remote APIService `Available`; it
//! says so instead of answering a silent 503: each request to a remote APIService gets
//! 503 `the aggregator's worker is not running: ...` and an error is logged (at most once a
//! minute).
//!
//! Floor 10 of the import order (docs/architecture.md): uses `aggregator`, `audit`,
//! `authn`, `authz`, `availability`, `body`, `discovery`, `impersonation`, `inflight`,
//! `metrics`, `openapi`, `registry`, `rt`, `selfreview`, `source`, `tenant`, `timeout`,
//! `trace`, `transport`, `worker`; used by no other room.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::HeaderValue;
use tower::Layer;
use tower_http::set_header::{SetResponseHeader, SetResponseHeaderLayer};

use crate::aggregator::AggregatorLayer;
use crate::audit::{AuditIdLayer, AuditIdService, AuditLayer, AuditService};
use crate::authn::{
    AuthenticateFuture, AuthenticationLayer, AuthenticationMetrics, AuthenticationService,
    Authenticator, UserInfo,
};
use crate::authz::{AuthorizationLayer, AuthorizationMetrics, AuthorizationService, Authorizer};
use crate::availability::{AvailabilityConfig, AvailabilityMetrics};
use crate::discovery::{DiscoveryConfig, DiscoveryManager};
use crate::impersonation::{ImpersonationLayer, ImpersonationService};
use crate::inflight::{InFlightLayer, InFlightService};
use crate::metrics::{MetricsLayer, RequestMetrics};
use crate::openapi::{OpenApiConfig, OpenApiManager};
use crate::registry::Registry;
use crate::selfreview::SelfReviewLayer;
use crate::tenant::{TenantGateLayer, TenantLayer, TenantService, Tenants};
use crate::timeout::{LongRunningCheck, TimeoutLayer, TimeoutService};
use crate::trace::{TracingLayer, TracingService};
use crate::transport::Transport;
pub use crate::worker::Worker;

/// The authorizer a built stack shares between impersonation, authorization and the self
/// reviews.
pub type SharedAuthorizer = Arc<dyn Authorizer>;

/// The stack [`Aggregator::builder`] builds: a [`Layer`] that wraps the host's handlers in
/// kube-apiserver's filter chain and the aggregator.
#[derive(Clone)]
pub struct Aggregator {
    audit_id: AuditIdLayer,
    cache_control: SetResponseHeaderLayer<HeaderValue>,
    tenant: TenantLayer,
    timeout: TimeoutLayer,
    authentication: AuthenticationLayer<Box<dyn Authenticator>>,
    tracing: TracingLayer,
    audit: AuditLayer,
    impersonation: ImpersonationLayer<SharedAuthorizer>,
    inflight: InFlightLayer,
    authorization: AuthorizationLayer<SharedAuthorizer>,
    request_metrics: MetricsLayer,
    authentication_metrics: Arc<AuthenticationMetrics>,
    authorization_metrics: Arc<AuthorizationMetrics>,
    tenant_gate: TenantGateLayer,
    selfreview: SelfReviewLayer<SharedAuthorizer>,
    aggregator: AggregatorLayer,
    registry: Registry,
    metrics: Arc<AvailabilityMetrics>,
    discovery: DiscoveryManager,
    openapi: OpenApiManager,
    transport: Arc<dyn Transport>,
    tenants: Option<Tenants>,
}

debug_fields!(Aggregator { registry, tenants });

/// The handlers' end of the stack: the request metrics, the tenant gate, the self reviews
/// and the aggregator around the host's handlers, boxed (see [`AggregatorStack`]).
pub type Handlers<E> =
    tower::util::BoxCloneSyncService<http::Request<crate::Body>, http::Response<crate::Body>, E>;

/// The filters of [`Aggregator`] around the [`Handlers`], outside in.
///
pub type Layered<E> = AuditIdService<
    SetResponseHeader<
        TenantService<
            TimeoutService<
                AuthenticationService<
                    TracingService<
                        AuditService<
                            ImpersonationService<
                                InFlightService<
                                    AuthorizationService<Handlers<E>, SharedAuthorizer>,
                                >,
                                SharedAuthorizer,
                            >,
                        >,
                    >,
                    Box<dyn Authenticator>,
                >,
            >,
        >,
        HeaderValue,
    >,
>;

/// The service of [`Aggregator`] around the host's handlers: the [`Layered`] filters
/// around the [`Handlers`], each part behind one boxed service, so that a crate calling it
/// names a small type. Proving that a dozen nested layers are a `Service` for one concrete
/// host costs the compiler minutes and gigabytes at every place that calls it, and more
/// than four times as much with each layer added; boxed in two parts, each proof is made
/// once, for any host, when this crate is built. Costs two allocations per request (the
/// boxed futures). `E` is the host's error type.
pub struct AggregatorStack<E> {
    inner: tower::util::BoxCloneSyncService<
        http::Request<crate::Body>,
        http::Response<crate::Body>,
        E,
    >,
}

// The shared parts behind `Arc`s: no `E: Clone` needed.
clone_fields!(AggregatorStack<E> { inner });

debug_fields!(AggregatorStack<E> {});

impl<B, E> tower::Service<http::Request<B>> for AggregatorStack<E>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<crate::body::BoxError>,
{
    type Response = http::Response<crate::Body>;
    type Error = E;
    type Future = BoxFuture<'static, Result<http::Response<crate::Body>, E>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), E>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        self.inner.call(req.map(crate::Body::new))
    }
}

impl Aggregator {
    /// Starts a builder whose APIServices are reached through `transport` (a
    /// [`RustlsTransport`](crate::transport::RustlsTransport) in production, an
    /// [`InMemoryTransport`](crate::transport::InMemoryTransport) for in-process backends).
    pub fn builder(transport: impl Transport) -> AggregatorBuilder {
        AggregatorBuilder {
            transport: Arc::new(transport),
            sinks: Vec::new(),
            tenants: None,
            tenant_source: None,
            resolver: None,
            source: None,
            authenticator: None,
            authorizer: None,
            executor: None,
            timer: None,
            metrics: None,
            request_metrics: None,
            availability: AvailabilityConfig::default(),
            outlier_detection: crate::aggregator::OutlierDetection::default(),
            discovery: DiscoveryConfig::default(),
            openapi: OpenApiConfig::default(),
            request_timeout: crate::timeout::DEFAULT_REQUEST_TIMEOUT,
            long_running: LongRunningCheck::kube_apiserver(),
            inflight: InFlightLayer::default(),
            audit: AuditLayer::off(),
            tracing: TracingLayer::off(),
        }
    }

    /// The registry: the current APIServices and their status; [`Registry::apply`] pushes
    /// updates directly.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// kube-apiserver's request metrics (`apiserver_request_total`, ...) the stack
    /// records, for the host's `/metrics` (see [`Aggregator::register_metrics`]).
    pub fn request_metrics(&self) -> &Arc<RequestMetrics> {
        self.request_metrics.metrics()
    }

    /// Adds every metric the stack keeps to `registry`: the request metrics
    /// (`apiserver_request_*`, `apiserver_current_inflight_requests`), the authentication
    /// and authorization metrics, `aggregator_discovery_aggregation_count_total`, the
    /// OpenAPI v2 regeneration metrics, the proxy's latency per APIService
    /// (`aggregator_proxy_request_duration_seconds`), the transport's own
    /// ([`Transport::register_metrics`]: a `RustlsTransport`'s connection-pool gauges), the
    /// availability metrics and, when auditing, the audit metrics. A host serves
    /// `/metrics` from it behind the stack, so the request is authorized as upstream
    /// authorizes it (`get` on the non-resource URL `/metrics`).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.request_metrics().register(registry);
        self.inflight.register_metrics(registry);
        registry.register_collector(Box::new(SharedCollector(
            self.authentication_metrics.clone(),
        )));
        registry.register_collector(Box::new(SharedCollector(
            self.authorization_metrics.clone(),
        )));
        registry.register_collector(Box::new(crate::discovery::AggregationCount(
            self.discovery.clone(),
        )));
        registry.register_collector(Box::new(self.openapi.metrics().clone()));
        registry.register_collector(Box::new(self.aggregator.proxy_metrics().clone()));
        self.transport.register_metrics(registry);
        self.metrics.register(registry);
        if let Some(audit) = self.audit.metrics() {
            audit.register(registry);
        }
    }

    /// The availability metrics the worker maintains; a host with a `prometheus-client`
    /// registry adds them with [`AvailabilityMetrics::register`].
    pub fn metrics(&self) -> &Arc<AvailabilityMetrics> {
        &self.metrics
    }

    /// The in-flight limits: [`InFlightLayer::in_flight`] and
    /// [`InFlightLayer::in_flight_for`] read the current counts (upstream's
    /// `apiserver_current_inflight_requests`).
    pub fn inflight(&self) -> &InFlightLayer {
        &self.inflight
    }

    /// The aggregated discovery manager: [`DiscoveryManager::has_synced`] says whether
    /// every APIService known at start was tried once (kube-apiserver's
    /// `apiservice-discovery-controller` post-start hook, for `/readyz`).
    pub fn discovery(&self) -> &DiscoveryManager {
        &self.discovery
    }

    /// The mounted tenants, when [`AggregatorBuilder::tenants`] mounted `/clusters/`:
    /// [`Tenants::apply`] mounts, changes and unmounts them at run time.
    pub fn tenants(&self) -> Option<&Tenants> {
        self.tenants.as_ref()
    }
}

impl Aggregator {
    /// The [`Layered`] filters around `handlers`.
    fn layered<E: Send + 'static>(&self, handlers: Handlers<E>) -> Layered<E> {
        let authorized = self.authorization.layer(handlers);
        let impersonated = self.impersonation.layer(self.inflight.layer(authorized));
        let audited = self.tracing.layer(self.audit.layer(impersonated));
        let authenticated = self.authentication.layer(audited);
        // The tenant comes off the path before anything reads it: the timeout, in-flight
        // and authorization layers all parse the path that remains, once.
        let timed = self.tenant.layer(self.timeout.layer(authenticated));
        self.audit_id.layer(self.cache_control.layer(timed))
    }
}

impl<S, RB> Layer<S> for Aggregator
where
    S: tower::Service<http::Request<crate::Body>, Response = http::Response<RB>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<crate::body::BoxError>,
{
    type Service = AggregatorStack<S::Error>;

    fn layer(&self, inner: S) -> Self::Service {
        // The [`Handlers`] around the host's handlers `inner`, boxed, then the filters.
        let aggregator = self.aggregator.clone().layer(inner);
        // An unknown tenant is 404 once authorized, before the self reviews answer for it.
        let reviewed = self.tenant_gate.layer(self.selfreview.layer(aggregator));
        let handlers: Handlers<S::Error> =
            tower::util::BoxCloneSyncService::new(self.request_metrics.layer(reviewed));
        AggregatorStack {
            inner: tower::util::BoxCloneSyncService::new(self.layered(handlers)),
        }
    }
}

/// Why [`AggregatorBuilder::build`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No [`AggregatorBuilder::authorizer`]: a policy gate without a policy would have to
    /// allow or deny everything silently; name one (`AlwaysAllow` included) instead.
    #[error(
        "no authorizer: call AggregatorBuilder::authorizer (AlwaysAllow, a Union, a SubjectAccessReviewAuthorizer, ...)"
    )]
    NoAuthorizer,
    /// No executor or timer, and the `tokio` feature (which supplies them) is off.
    #[error(
        "no runtime: call AggregatorBuilder::runtime with an executor and a timer (the tokio feature is off)"
    )]
    NoRuntime,
}

mod build;
mod settings;

pub use settings::AggregatorBuilder;

/// The authenticator of a stack built without one: the [`UserInfo`] an earlier layer of
/// the host put into the request extensions, or nobody (401).
#[derive(Debug, Clone, Copy)]
pub(super) struct HostAuthenticated;

impl Authenticator for HostAuthenticated {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let user = parts.extensions.get::<UserInfo>().cloned();
        Box::pin(std::future::ready(Ok(user)))
    }
}

#[cfg(test)]
mod tests;

/// A collector shared with the layer that records into it.
#[derive(Debug)]
struct SharedCollector<C>(Arc<C>);

impl<C: prometheus_client::collector::Collector> prometheus_client::collector::Collector
    for SharedCollector<C>
{
    fn encode(
        &self,
        encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> std::fmt::Result {
        self.0.encode(encoder)
    }
}
