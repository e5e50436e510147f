//! [`AggregatorBuilder::build`]: the layers assembled in kube-apiserver's order and the
//! worker that feeds them.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use http::HeaderValue;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::aggregator::AggregatorLayer;
use crate::aggregator::tenants::client::{CachedTransport, ClientCache};
use crate::audit::AuditIdLayer;
use crate::authn::{AuthenticationLayer, AuthenticationMetrics};
use crate::authz::{AuthorizationLayer, AuthorizationMetrics};
use crate::availability::{AvailabilityController, StaticServiceResolver};
use crate::discovery::DiscoveryManager;
use crate::impersonation::ImpersonationLayer;
use crate::metrics::MetricsLayer;
use crate::openapi::OpenApiManager;
use crate::registry::Registry;
#[cfg(feature = "tokio")]
use crate::rt::{Executor, Timer};
use crate::selfreview::SelfReviewLayer;
use crate::tenant::{TenantGateLayer, TenantLayer, Tenants, TenantsConfig};
use crate::timeout::TimeoutLayer;

use super::{Aggregator, AggregatorBuilder, BuildError, HostAuthenticated, SharedAuthorizer};
use crate::worker::Worker;

impl AggregatorBuilder {
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
            .outlier_detection(self.outlier_detection.clone())
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
