//! kube-aggregator in a cluster: what the library learns through its seams, taken from
//! the Kubernetes API with [kube-rs](https://kube.rs).
//!
//! - [`ApiServiceWatch`]: an [`ApiServiceSource`](kube_aggregator::source::ApiServiceSource)
//!   over a watch of `apiregistration.k8s.io/v1` APIServices, feeding the registry exactly
//!   as the manifest directory does.
//! - [`KubeServiceResolver`]: a [`ServiceResolver`](kube_aggregator::availability::ServiceResolver)
//!   over watches of Services and EndpointSlices: the ClusterIP (upstream's default) or a
//!   ready endpoint (`--enable-aggregator-routing`), with the availability controller's
//!   reasons when a Service cannot be reached.
//!
//! The library itself has no Kubernetes client; this crate is where one lives.

mod apiservices;
mod index;
mod services;

/// The kube-rs client this crate is built on, for the host's `Client` and `Config`.
pub use kube;

pub use apiservices::ApiServiceWatch;
pub use services::{KubeServiceResolver, SERVICE_NAME_LABEL};
