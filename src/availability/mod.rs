//! Availability: the `Available` condition of each APIService, and the gate that refuses
//! requests to unavailable ones fast.
//!
//! [`AvailabilityController`] mirrors kube-aggregator's remote availability controller
//! (docs/upstream-behaviour.md §4): it resolves each remote APIService's Service through a
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

mod controller;
mod metrics;

pub use crate::resolver::{
    InvalidAddress, ResolveError, ResolveFuture, ServiceResolver, StaticServiceResolver,
};
pub use controller::{AvailabilityConfig, AvailabilityController};
pub use metrics::AvailabilityMetrics;
