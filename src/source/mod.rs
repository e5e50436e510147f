//! Where APIServices come from.
//!
//! The host implements [`ApiServiceSource`] over whatever holds its APIServices (a
//! Kubernetes watch, etcd, a database) and hands it to
//! [`Registry::run`](crate::registry::Registry::run). The vocabulary is small, like
//! kube-runtime's watcher events: an object applied, an object deleted, or the full set
//! (a resync, applied atomically). Hosts that push updates themselves call
//! [`Registry::apply`](crate::registry::Registry::apply) directly: that is the in-memory
//! handle, and it answers each update with its validation result.
//!
//! [`ManifestDir`] is a ready source over a directory of YAML/JSON manifests.

mod dir;

use std::future::Future;

#[cfg(fuzzing)]
pub(crate) use dir::parse_manifests;
pub use dir::{ManifestDir, ManifestError};

use crate::apiservice::ApiService;

/// One change to the set of APIServices.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // events are moved once, never stored in bulk
pub enum ApiServiceEvent {
    /// Created or updated.
    Applied(ApiService),
    /// Deleted, by name.
    Deleted(String),
    /// The complete current set: anything not listed is deleted. Applied atomically.
    Resynced(Vec<ApiService>),
}

/// A feed of [`ApiServiceEvent`]s.
pub trait ApiServiceSource: Send + 'static {
    /// The next event; `None` when the source has ended for good.
    fn next_event(&mut self) -> impl Future<Output = Option<ApiServiceEvent>> + Send;
}
