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
//! - [`LeaderElection`]: one replica of several leads, holding a `coordination.k8s.io/v1`
//!   Lease with client-go's algorithm and timing.
//! - [`StatusWriter`]: the registry's `Available` conditions written to
//!   `apiservices/status` by the leader only, when they change, with optimistic
//!   concurrency.
//!
//! The library itself has no Kubernetes client; this crate is where one lives.
//!
//! One cost comes with it: `kube-client` turns on tracing's `log` feature, with which
//! every disabled trace and debug event of h2 and hyper checks the `log` crate at run
//! time (about 2% more instructions per proxied request, more on HTTP/2;
//! `benches/load/README.md`). A binary that links this crate compiles those checks out
//! of its release build with `log = { version = "0.4", features =
//! ["release_max_level_info"] }` among its dependencies, as the repository's examples do.

mod apiservices;
mod index;
mod leader;
mod services;
mod status;

/// The kube-rs client this crate is built on, for the host's `Client` and `Config`.
pub use kube;

pub use apiservices::ApiServiceWatch;
pub use leader::{LeaderElection, LeaderElectionError, Leadership, LeaseTiming, default_identity};
pub use services::{KubeServiceResolver, SERVICE_NAME_LABEL};
pub use status::StatusWriter;
