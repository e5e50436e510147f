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
//! [`Registry`] feed from the builder's [`ApiServiceSource`], the
//! [`AvailabilityController`], the [`DiscoveryManager`] and the [`OpenApiManager`], and
//! with tenants their feed and every tenant's managers. Assembling the layers by hand
//! stays possible: each is public and documented, and then the host runs
//! [`Registry::run`] and [`AvailabilityController::run`] itself.
//!
//! A stack whose worker is not running cannot mark any remote APIService `Available`; it
//! says so instead of answering a silent 503: each request to a remote APIService gets
//! 503 `the aggregator's worker is not running: ...` and an error is logged (at most once a
//! minute).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use http::HeaderValue;
use tower::Layer;
use tower_http::set_header::{SetResponseHeader, SetResponseHeaderLayer};

use crate::aggregator::AggregatorLayer;
use crate::audit::{AuditIdLayer, AuditIdService, AuditLayer, AuditService, AuditSink, Policy};
use crate::authn::{
    AuthenticateFuture, AuthenticationLayer, AuthenticationMetrics, AuthenticationService,
    Authenticator, UserInfo,
};
use crate::authz::{AuthorizationLayer, AuthorizationMetrics, AuthorizationService, Authorizer};
use crate::availability::{
    AvailabilityConfig, AvailabilityController, AvailabilityMetrics, ServiceResolver,
    StaticServiceResolver,
};
use crate::discovery::{DiscoveryConfig, DiscoveryManager};
use crate::impersonation::{ImpersonationLayer, ImpersonationService};
use crate::inflight::{InFlightLayer, InFlightService};
use crate::metrics::{MetricsLayer, RequestMetrics};
use crate::openapi::{OpenApiConfig, OpenApiManager};
use crate::registry::{Registry, StatusSink};
use crate::rt::{Executor, Timer};
use crate::selfreview::SelfReviewLayer;
use crate::source::{ApiServiceEvent, ApiServiceSource};
use crate::tenant::client::{CachedTransport, ClientCache};
use crate::tenant::{
    TenantEvent, TenantForwarding, TenantGateLayer, TenantLayer, TenantService, TenantSource,
    Tenants, TenantsConfig,
};
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

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("registry", &self.registry)
            .field("tenants", &self.tenants)
            .finish_non_exhaustive()
    }
}

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

impl<E> Clone for AggregatorStack<E> {
    fn clone(&self) -> Self {
        AggregatorStack {
            inner: self.inner.clone(),
        }
    }
}

impl<E> std::fmt::Debug for AggregatorStack<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorStack").finish_non_exhaustive()
    }
}

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

/// Configures an [`Aggregator`]; every setting is given once.
pub struct AggregatorBuilder {
    transport: Arc<dyn Transport>,
    /// The status sinks, added to the registry when it is built.
    sinks: Vec<AddSink>,
    tenants: Option<TenantForwarding>,
    tenant_source: Option<Box<dyn BoxedTenantSource>>,
    resolver: Option<Arc<dyn ServiceResolver>>,
    source: Option<Box<dyn BoxedSource>>,
    authenticator: Option<Box<dyn Authenticator>>,
    authorizer: Option<Box<dyn Authorizer>>,
    executor: Option<Executor>,
    timer: Option<Timer>,
    metrics: Option<Arc<AvailabilityMetrics>>,
    request_metrics: Option<Arc<RequestMetrics>>,
    availability: AvailabilityConfig,
    discovery: DiscoveryConfig,
    openapi: OpenApiConfig,
    request_timeout: Duration,
    long_running: LongRunningCheck,
    inflight: InFlightLayer,
    tracing: TracingLayer,
    audit: AuditLayer,
}

impl std::fmt::Debug for AggregatorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregatorBuilder")
            .field("availability", &self.availability)
            .field("tenants", &self.tenants)
            .finish_non_exhaustive()
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

impl AggregatorBuilder {
    /// Where `namespace/name:port` of each APIService's `spec.service` lives. Default: an
    /// empty [`StaticServiceResolver`] (every remote APIService `ServiceNotFound`).
    pub fn resolver(mut self, resolver: impl ServiceResolver) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// Where APIServices come from (a [`ManifestDir`](crate::source::ManifestDir), a
    /// watch, a database); the worker applies its events. Its first event (a directory's
    /// first read, a watch's initial list) and whatever the host applied before are the
    /// APIServices "known at start" that [`DiscoveryManager::has_synced`] waits for.
    /// Without a source, the host pushes updates with [`Registry::apply`].
    pub fn source(mut self, source: impl ApiServiceSource) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Tells `sink` every change of an APIService's `Available` condition, so the host can
    /// write status back to where its APIServices live (as kube-aggregator's
    /// availability controller updates the APIService's status). May be given more than
    /// once; same as [`Registry::add_status_sink`] on [`Aggregator::registry`].
    pub fn status_sink(mut self, sink: impl StatusSink) -> Self {
        self.sinks.push(Box::new(move |registry: &Registry| {
            registry.add_status_sink(sink)
        }));
        self
    }

    /// Authenticates callers (a [`Union`](crate::authn::Union) of x509, request-header,
    /// tokens, ...). Without one the stack expects the host to have put a [`UserInfo`]
    /// into the request extensions, and answers 401 when there is none.
    pub fn authenticator(mut self, authenticator: impl Authenticator) -> Self {
        self.authenticator = Some(Box::new(authenticator));
        self
    }

    /// Decides requests (required). kube-apiserver asks
    /// [`PrivilegedGroups`](crate::authz::PrivilegedGroups) for `system:masters` before
    /// its configured modes; put one first in a [`Union`](crate::authz::Union) to do the
    /// same.
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Some(Box::new(authorizer));
        self
    }

    /// The executor (spliced upgrade connections) and timer (probes, deadlines) of a host
    /// not on tokio. With the `tokio` feature the defaults are tokio's.
    pub fn runtime(mut self, executor: Executor, timer: Timer) -> Self {
        self.executor = Some(executor);
        self.timer = Some(timer);
        self
    }

    /// Where the availability metrics go (default: a fresh set, see
    /// [`Aggregator::metrics`]).
    pub fn metrics(mut self, metrics: Arc<AvailabilityMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Where the request metrics go (default: a fresh set, see
    /// [`Aggregator::request_metrics`]).
    pub fn request_metrics(mut self, metrics: Arc<RequestMetrics>) -> Self {
        self.request_metrics = Some(metrics);
        self
    }

    /// Timing of availability checks (default: upstream's 30 s resync, 5 s probe timeout).
    pub fn availability(mut self, config: AvailabilityConfig) -> Self {
        self.availability = config;
        self
    }

    /// How backends' discovery documents are fetched (default: upstream's 1 min refresh, 5 s
    /// timeout, 16 MiB limit).
    pub fn discovery(mut self, config: DiscoveryConfig) -> Self {
        self.discovery = config;
        self
    }

    /// How backends' OpenAPI specs are fetched (default: 1 min refresh, 16 MiB limit).
    pub fn openapi(mut self, config: OpenApiConfig) -> Self {
        self.openapi = config;
        self
    }

    /// `--request-timeout`: the deadline of requests that are not long-running, and the cap
    /// of their `?timeout=` (default 60 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Which requests are long-running (no request timeout, not counted in flight):
    /// kube-apiserver's rule by default; [`LongRunningCheck::or`] adds the host's own.
    pub fn long_running(mut self, check: LongRunningCheck) -> Self {
        self.long_running = check;
        self
    }

    /// `--max-requests-inflight` and `--max-mutating-requests-inflight` (default 400 and
    /// 200; 0 means no limit), and an optional limit per APIService (0: none).
    pub fn max_requests_inflight(
        mut self,
        read: usize,
        mutating: usize,
        per_api_service: usize,
    ) -> Self {
        self.inflight = InFlightLayer::new(read, mutating).per_api_service(per_api_service);
        self
    }

    /// Audits requests by `policy` (`--audit-policy-file`) into `sink` (a
    /// [`LogSink`](crate::audit::LogSink), or the host's own): the [`AuditLayer`] after
    /// authentication, and the [`AuditIdLayer`] auditing the requests authentication
    /// refuses (see [`AuditIdLayer::audit_refused`]). Without this,
    /// nothing is audited (requests still get their `Audit-Id`).
    pub fn audit(mut self, policy: Policy, sink: impl AuditSink) -> Self {
        self.audit = AuditLayer::new(policy, sink);
        self
    }

    /// As [`AggregatorBuilder::audit`], with a layer the host made (one counting into
    /// the [`AuditMetrics`](crate::audit::AuditMetrics) its sinks count into, say). Its
    /// long-running check is replaced by the builder's.
    pub fn audit_layer(mut self, layer: AuditLayer) -> Self {
        self.audit = layer;
        self
    }

    /// Traces requests with `layer` (see [`crate::trace`]; `--tracing-config-file`).
    /// Without this, nothing is traced.
    pub fn tracing(mut self, layer: TracingLayer) -> Self {
        self.tracing = layer;
        self
    }

    /// Mounts tenants under `/clusters/<name>/...` (kcp's shape, see [`crate::tenant`]):
    /// each with its own APIServices, discovery, OpenAPI and availability, on this
    /// builder's transport, resolver and worker; their requests reach their backends as
    /// `forwarding` says. Tenants come from [`AggregatorBuilder::tenant_source`] or
    /// [`Aggregator::tenants`]; until one is mounted, every `/clusters/<name>` request is
    /// 404. Without this, `/clusters/...` paths are the host's like any other.
    pub fn tenants(mut self, forwarding: TenantForwarding) -> Self {
        self.tenants = Some(forwarding);
        self
    }

    /// Where tenants come from (a watch of workspaces, a database); the worker applies
    /// its events. Mounts `/clusters/` with the default [`TenantForwarding`] unless
    /// [`AggregatorBuilder::tenants`] chose one.
    pub fn tenant_source(mut self, source: impl TenantSource) -> Self {
        self.tenants.get_or_insert_with(TenantForwarding::default);
        self.tenant_source = Some(Box::new(source));
        self
    }

    /// The stack and its worker. Spawn the worker (`tokio::spawn(worker)`, or the host's
    /// executor): it runs until the process ends.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoAuthorizer`] without an authorizer; [`BuildError::NoRuntime`]
    /// without an executor and timer when the `tokio` feature is off.
    pub fn build(self) -> Result<(Aggregator, Worker), BuildError> {
        let authorizer = self.authorizer.ok_or(BuildError::NoAuthorizer)?;
        let (executor, timer) = match (self.executor, self.timer) {
            (Some(e), Some(t)) => (e, t),
            #[cfg(feature = "tokio")]
            _ => (Executor::tokio(), Timer::tokio()),
            #[cfg(not(feature = "tokio"))]
            _ => return Err(BuildError::NoRuntime),
        };
        let resolver = self
            .resolver
            .unwrap_or_else(|| Arc::new(StaticServiceResolver::new()));
        let metrics = self.metrics.unwrap_or_default();
        let transport = self.transport.clone();
        // With tenants, the stack's own APIServices and every tenant's take their clients
        // from one cache: one pool of connections per backend, whoever reaches it.
        let (own, tenants) = match self.tenants {
            None => (Registry::new(self.transport.clone()), None),
            Some(forwarding) => {
                let config = TenantsConfig {
                    forwarding,
                    discovery: self.discovery.clone(),
                    openapi: self.openapi.clone(),
                };
                let clients = Arc::new(ClientCache::new(self.transport.clone()));
                let tenants =
                    Tenants::with_clients(config, clients.clone(), resolver.clone(), timer.clone());
                (Registry::new(CachedTransport(clients)), Some(tenants))
            }
        };
        own.set_clock(timer.clone());
        for add in self.sinks {
            add(&own);
        }
        let mut controller = AvailabilityController::new(
            own.clone(),
            resolver.clone(),
            timer.clone(),
            self.availability,
            metrics.clone(),
        );
        if let Some(tenants) = &tenants {
            controller = controller.tenants(tenants.clone());
        }
        let discovery = DiscoveryManager::new(timer.clone(), self.discovery);
        let openapi = OpenApiManager::new(timer.clone(), self.openapi);
        let (registry, mut source) = (own.clone(), self.source);
        let (feed_resolver, to_discovery, to_openapi) =
            (resolver.clone(), discovery.clone(), openapi.clone());
        let follow = async move {
            // The APIServices known at start are what the host applied before the worker
            // ran plus the source's first event (a directory's first read, a watch's
            // initial list). The managers follow the registry only from then on, so
            // `DiscoveryManager::has_synced` (the `/readyz` post-start hook) covers them.
            if let Some(source) = &mut source {
                if let Some(event) = source.next_boxed().await {
                    registry.apply_logged(event);
                }
            }
            registry.feed(feed_resolver.clone(), to_discovery);
            registry.feed(feed_resolver, to_openapi);
            if let Some(mut source) = source {
                while let Some(event) = source.next_boxed().await {
                    registry.apply_logged(event);
                }
            }
        };
        let managers = (discovery.clone().run(), openapi.clone().run());
        // The tenants' managers and feed, in the same worker.
        let (to_tenants, mut tenant_source) = (tenants.clone(), self.tenant_source);
        let tenant_work = async move {
            let Some(tenants) = to_tenants else {
                return;
            };
            let follow = async {
                if let Some(source) = &mut tenant_source {
                    while let Some(event) = source.next_boxed().await {
                        tenants.apply_logged(event);
                    }
                }
            };
            futures_util::future::join(tenants.clone().run_managers(), follow).await;
        };
        let work: BoxFuture<'static, ()> = Box::pin(async move {
            let stack =
                futures_util::future::join4(controller.run(), managers.0, managers.1, follow);
            futures_util::future::join(stack, tenant_work).await;
        });
        let (worker, state) = Worker::new(work, timer.now());
        let mut aggregator = AggregatorLayer::new(own.clone(), resolver, timer.clone())
            .executor(executor)
            .discovery(discovery.clone())
            .openapi(openapi.clone())
            .with_worker(state);
        if let Some(tenants) = &tenants {
            aggregator = aggregator.tenants(tenants.clone());
        }
        let authenticator = self
            .authenticator
            .unwrap_or_else(|| Box::new(HostAuthenticated));
        let authorizer: SharedAuthorizer = Arc::from(authorizer);
        let audit = self.audit.long_running(self.long_running.clone());
        let request_metrics = self.request_metrics.unwrap_or_default();
        let authentication_metrics = Arc::new(AuthenticationMetrics::default());
        let authorization_metrics = Arc::new(AuthorizationMetrics::default());
        Ok((
            Aggregator {
                audit_id: AuditIdLayer::new().audit_refused(&audit),
                cache_control: SetResponseHeaderLayer::if_not_present(
                    http::header::CACHE_CONTROL,
                    HeaderValue::from_static("no-cache, private"),
                ),
                tenant: if tenants.is_some() {
                    TenantLayer::new()
                } else {
                    TenantLayer::off()
                },
                timeout: TimeoutLayer::new(timer.clone())
                    .request_timeout(self.request_timeout)
                    .long_running(self.long_running.clone())
                    .on_timeout({
                        let metrics = request_metrics.clone();
                        Arc::new(move |method, uri| metrics.terminated_request(method, uri, 504))
                    })
                    .on_abort({
                        let metrics = request_metrics.clone();
                        Arc::new(move |method, uri| metrics.aborted_request(method, uri))
                    }),
                authentication: AuthenticationLayer::new(authenticator)
                    .metrics(authentication_metrics.clone()),
                tracing: self.tracing,
                audit,
                impersonation: ImpersonationLayer::new(authorizer.clone()),
                inflight: self
                    .inflight
                    .long_running(self.long_running.clone())
                    .metrics(request_metrics.clone()),
                authorization: AuthorizationLayer::new(authorizer.clone())
                    .metrics(authorization_metrics.clone()),
                request_metrics: MetricsLayer::new(request_metrics).long_running(self.long_running),
                authentication_metrics,
                authorization_metrics,
                tenant_gate: match &tenants {
                    Some(t) => TenantGateLayer::new(t.clone()),
                    None => TenantGateLayer::off(),
                },
                selfreview: SelfReviewLayer::new(authorizer),
                aggregator,
                registry: own,
                metrics,
                discovery,
                openapi,
                transport,
                tenants,
            },
            worker,
        ))
    }
}

/// An [`ApiServiceSource`] behind a box (its `impl Future` method is not object safe).
trait BoxedSource: Send {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<ApiServiceEvent>>;
}

impl<S: ApiServiceSource> BoxedSource for S {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<ApiServiceEvent>> {
        Box::pin(self.next_event())
    }
}

/// A status sink waiting for the registry [`AggregatorBuilder::build`] makes.
type AddSink = Box<dyn FnOnce(&Registry) + Send>;

/// A [`TenantSource`] behind a box.
trait BoxedTenantSource: Send {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<TenantEvent>>;
}

impl<S: TenantSource> BoxedTenantSource for S {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<TenantEvent>> {
        Box::pin(self.next_event())
    }
}

/// The authenticator of a stack built without one: the [`UserInfo`] an earlier layer of
/// the host put into the request extensions, or nobody (401).
#[derive(Debug, Clone, Copy)]
struct HostAuthenticated;

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
