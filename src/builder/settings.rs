//! [`AggregatorBuilder`]'s settings: what the host gives before [`AggregatorBuilder::build`].

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::audit::{AuditLayer, AuditSink, Policy};
use crate::authn::Authenticator;
use crate::authz::Authorizer;
use crate::availability::{AvailabilityConfig, AvailabilityMetrics, ServiceResolver};
use crate::discovery::DiscoveryConfig;
use crate::inflight::InFlightLayer;
use crate::metrics::RequestMetrics;
use crate::openapi::OpenApiConfig;
use crate::registry::{Registry, StatusSink};
use crate::rt::{Executor, Timer};
use crate::source::{ApiServiceEvent, ApiServiceSource};
use crate::tenant::{TenantEvent, TenantForwarding, TenantSource};
use crate::timeout::LongRunningCheck;
use crate::trace::TracingLayer;
use crate::transport::Transport;

/// Configures an [`Aggregator`](super::Aggregator); every setting is given once.
pub struct AggregatorBuilder {
    pub(super) transport: Arc<dyn Transport>,
    /// The status sinks, added to the registry when it is built.
    pub(super) sinks: Vec<AddSink>,
    pub(super) tenants: Option<TenantForwarding>,
    pub(super) tenant_source: Option<Box<dyn BoxedTenantSource>>,
    pub(super) resolver: Option<Arc<dyn ServiceResolver>>,
    pub(super) source: Option<Box<dyn BoxedSource>>,
    pub(super) authenticator: Option<Box<dyn Authenticator>>,
    pub(super) authorizer: Option<Box<dyn Authorizer>>,
    pub(super) executor: Option<Executor>,
    pub(super) timer: Option<Timer>,
    pub(super) metrics: Option<Arc<AvailabilityMetrics>>,
    pub(super) request_metrics: Option<Arc<RequestMetrics>>,
    pub(super) availability: AvailabilityConfig,
    /// When endpoints of Services with several are ejected.
    pub(super) outlier_detection: crate::aggregator::OutlierDetection,
    pub(super) discovery: DiscoveryConfig,
    pub(super) openapi: OpenApiConfig,
    pub(super) request_timeout: Duration,
    pub(super) long_running: LongRunningCheck,
    pub(super) inflight: InFlightLayer,
    pub(super) tracing: TracingLayer,
    pub(super) audit: AuditLayer,
}

debug_fields!(AggregatorBuilder {
    availability,
    tenants
});

impl AggregatorBuilder {
    /// Where `namespace/name:port` of each APIService's `spec.service` lives. Default: an
    /// empty [`StaticServiceResolver`](crate::availability::StaticServiceResolver) (every remote APIService `ServiceNotFound`).
    pub fn resolver(mut self, resolver: impl ServiceResolver) -> Self {
        self.resolver = Some(Arc::new(resolver));
        self
    }

    /// Where APIServices come from (a [`ManifestDir`](crate::source::ManifestDir), a
    /// watch, a database); the worker applies its events. Its first event (a directory's
    /// first read, a watch's initial list) and whatever the host applied before are the
    /// APIServices "known at start" that [`DiscoveryManager::has_synced`](crate::discovery::DiscoveryManager::has_synced) waits for.
    /// Without a source, the host pushes updates with [`Registry::apply`].
    pub fn source(mut self, source: impl ApiServiceSource) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Tells `sink` every change of an APIService's `Available` condition, so the host can
    /// write status back to where its APIServices live (as kube-aggregator's
    /// availability controller updates the APIService's status). May be given more than
    /// once; same as [`Registry::add_status_sink`] on [`Aggregator::registry`](super::Aggregator::registry).
    pub fn status_sink(mut self, sink: impl StatusSink) -> Self {
        self.sinks.push(Box::new(move |registry: &Registry| {
            registry.add_status_sink(sink)
        }));
        self
    }

    /// Authenticates callers (a [`Union`](crate::authn::Union) of x509, request-header,
    /// tokens, ...). Without one the stack expects the host to have put a [`UserInfo`](crate::authn::UserInfo)
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
    /// [`Aggregator::metrics`](super::Aggregator::metrics)).
    pub fn metrics(mut self, metrics: Arc<AvailabilityMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Where the request metrics go (default: a fresh set, see
    /// [`Aggregator::request_metrics`](super::Aggregator::request_metrics)).
    pub fn request_metrics(mut self, metrics: Arc<RequestMetrics>) -> Self {
        self.request_metrics = Some(metrics);
        self
    }

    /// Timing of availability checks (default: upstream's 30 s resync, 5 s probe timeout).
    pub fn availability(mut self, config: AvailabilityConfig) -> Self {
        self.availability = config;
        self
    }

    /// When an endpoint of a Service with several (a resolver's
    /// [`ServiceEndpoints::Many`](crate::availability::ServiceEndpoints::Many)) is ejected
    /// from its requests, and for how long (default: 5 failures in a row, 30 s growing
    /// to 300 s, at most half of the endpoints).
    pub fn outlier_detection(mut self, config: crate::aggregator::OutlierDetection) -> Self {
        self.outlier_detection = config;
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
    /// authentication, and the [`AuditIdLayer`](crate::audit::AuditIdLayer) auditing the requests authentication
    /// refuses (see [`AuditIdLayer::audit_refused`](crate::audit::AuditIdLayer::audit_refused)). Without this,
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
    /// [`Aggregator::tenants`](super::Aggregator::tenants); until one is mounted, every `/clusters/<name>` request is
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
}

/// An [`ApiServiceSource`] behind a box (its `impl Future` method is not object safe).
pub(super) trait BoxedSource: Send {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<ApiServiceEvent>>;
}

impl<S: ApiServiceSource> BoxedSource for S {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<ApiServiceEvent>> {
        Box::pin(self.next_event())
    }
}

/// A status sink waiting for the registry [`AggregatorBuilder::build`] makes.
pub(super) type AddSink = Box<dyn FnOnce(&Registry) + Send>;

/// A [`TenantSource`] behind a box.
pub(super) trait BoxedTenantSource: Send {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<TenantEvent>>;
}

impl<S: TenantSource> BoxedTenantSource for S {
    fn next_boxed(&mut self) -> BoxFuture<'_, Option<TenantEvent>> {
        Box::pin(self.next_event())
    }
}
