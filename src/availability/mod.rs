//! Availability: the `Available` condition of each APIService, and the gate that refuses
//! requests to unavailable ones fast.
//!
//! [`AvailabilityController`] mirrors kube-aggregator's remote availability controller
//! ([`pkg/controllers/status/remote/remote_available_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/remote/remote_available_controller.go)): it resolves each remote APIService's Service through a
//! [`ServiceResolver`] (failures become `ServiceNotFound`, `ServicePortError`,
//! `EndpointsNotFound`, `MissingEndpoints`), then probes `GET /apis/<group>/<version>`
//! through the APIService's own backend client (so with the proxy TLS settings and client
//! certificate) as `system:kube-aggregator` in `system:masters`: 5 attempts in parallel,
//! each with a 5 s timeout, redirects not followed, only 2xx passes. The outcome is written
//! to the registry with upstream condition semantics and reported to any
//! [`StatusSink`](crate::registry::StatusSink). Successful checks repeat every resync
//! period (30 s); failures retry with exponential backoff from 5 ms up to 30 s. All
//! timing goes through the injected [`Timer`](crate::rt::Timer), so tests use short periods.
//!
//! The gate itself lives in the aggregator's routing: a remote APIService whose condition
//! is not `True` gets 503 `service unavailable` without a connection attempt.
//!
//! Beyond upstream, a proxied request that cannot connect to its backend at all (a
//! [`ConnectError`](crate::transport::ConnectError)) marks the APIService unavailable at
//! once and has it re-checked within [`AvailabilityConfig::passive_recheck`], so a dead
//! backend costs one failed connection rather than one per request until the next check.
//!
//! Local APIServices (no `spec.service`) are `Available=True` with reason `Local` from the
//! moment they are applied, as upstream's local controller writes them; the controller
//! leaves them alone.
//!
//! ```
//! use std::sync::Arc;
//! use http::{Request, Response};
//! use kube_aggregator::Body;
//! use kube_aggregator::availability::{
//!     AvailabilityConfig, AvailabilityController, AvailabilityMetrics, StaticServiceResolver,
//! };
//! use kube_aggregator::registry::Registry;
//! use kube_aggregator::rt::Timer;
//! use kube_aggregator::source::ApiServiceEvent;
//! use kube_aggregator::transport::InMemoryTransport;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // A backend that answers its discovery document.
//! let transport = InMemoryTransport::new();
//! transport.insert("metrics-server.kube-system.svc", tower::service_fn(|_: Request<Body>| async {
//!     Ok::<_, std::convert::Infallible>(Response::new(Body::full("{}")))
//! }));
//! let registry = Registry::new(transport);
//! registry.apply(ApiServiceEvent::Applied(serde_json::from_str(r#"{
//!   "metadata": {"name": "v1beta1.metrics.k8s.io"},
//!   "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"},
//!            "group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
//!            "groupPriorityMinimum": 100, "versionPriority": 100}}"#)?))?;
//!
//! // Where the Service lives (port 443: `spec.service.port` defaulted).
//! let mut resolver = StaticServiceResolver::new();
//! resolver.insert("kube-system", "metrics-server", 443, "10.0.0.5:4443")?;
//!
//! let metrics = Arc::new(AvailabilityMetrics::default());
//! let controller = AvailabilityController::new(
//!     registry.clone(), resolver, Timer::tokio(), AvailabilityConfig::default(), metrics,
//! );
//! tokio::spawn(controller.run());
//!
//! // The first check runs at once; wait for the condition it writes.
//! let name = "v1beta1.metrics.k8s.io";
//! registry.wait_until(|table| table.get(name).is_some_and(|r| r.is_available())).await;
//! let table = registry.snapshot();
//! let condition = table.get("v1beta1.metrics.k8s.io").unwrap().apiservice.available_condition().unwrap();
//! assert_eq!((condition.reason.as_str(), condition.message.as_str()), ("Passed", "all checks passed"));
//! # Ok(()) }
//! ```
//!
//! Floor 5 of the import order (docs/architecture.md): uses `apiservice`, `body`,
//! `gocompat`, `identity`, `registry`, `resolver`, `rt`, `status`, `tenancy`, `transport`;
//! used by `aggregator`, `builder`, `fuzz_logic`.

mod cause;
mod controller;
mod metrics;
mod preflight;
mod probe;
pub(crate) use probe::Probe;
mod tenants;

#[cfg(feature = "dns")]
pub use crate::resolver::{DEFAULT_CLUSTER_DOMAIN, DnsConfigError, DnsServiceResolver};
pub use crate::resolver::{
    EndpointsFuture, InvalidAddress, ResolveError, ResolveFuture, ServiceEndpoints,
    ServiceResolver, StaticServiceResolver,
};
pub use cause::UnavailableCause;
pub use controller::{AvailabilityConfig, AvailabilityController};
pub use metrics::AvailabilityMetrics;
pub use preflight::proxy_certificate_warnings;
pub use tenants::MountedTenants;
