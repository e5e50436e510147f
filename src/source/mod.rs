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
//!
//! Upstream, APIServices come from the aggregator's own storage through an informer
//! ([`pkg/apiserver/apiservice_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/apiservice_controller.go)
//! adds and removes routes as they change); here the host decides where they live, and
//! the registry validates each one on the way in. A source only carries `metadata` and
//! `spec`: the registry owns `status` and ignores a source's.
//!
//! ```
//! use kube_aggregator::apiservice::ApiService;
//! use kube_aggregator::registry::Registry;
//! use kube_aggregator::source::{ApiServiceEvent, ApiServiceSource};
//! use kube_aggregator::transport::InMemoryTransport;
//!
//! /// A source over a channel: the host sends what its watch sees.
//! struct Channel(tokio::sync::mpsc::UnboundedReceiver<ApiServiceEvent>);
//!
//! impl ApiServiceSource for Channel {
//!     async fn next_event(&mut self) -> Option<ApiServiceEvent> {
//!         self.0.recv().await
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
//! let apps: ApiService = serde_json::from_str(r#"{"metadata": {"name": "v1.apps"},
//!   "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}}"#)?;
//! tx.send(ApiServiceEvent::Resynced(vec![apps]))?;
//! tx.send(ApiServiceEvent::Deleted("v1.apps".into()))?;
//! drop(tx); // the source ends, and so does `run`
//!
//! let registry = Registry::new(InMemoryTransport::new());
//! registry.clone().run(Channel(rx)).await;
//! assert!(registry.snapshot().is_empty());
//! assert_eq!(registry.snapshot().generation(), 2);
//! # Ok(()) }
//! ```
//!
//! Floor 2 of the import order (docs/architecture.md): uses `apiservice`, `rt`; used by
//! `aggregator`, `builder`, `fuzz_logic`, `registry`.

mod dir;

use std::future::Future;

#[cfg(fuzzing)]
pub(crate) use dir::parse_manifests;
pub use dir::{ManifestDir, ManifestError};

use crate::apiservice::ApiService;

/// One change to the set of APIServices: the vocabulary of every [`ApiServiceSource`], as
/// tower's `discover::Change` or kube-runtime's watcher events.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // events are moved once, never stored in bulk
pub enum ApiServiceEvent {
    /// Created or updated: the whole object, replacing any of the same name (its `status`
    /// is ignored).
    Applied(ApiService),
    /// Deleted, by name (`<version>.<group>`); an unknown name changes nothing.
    Deleted(String),
    /// The complete current set: anything not listed is deleted. Applied atomically, in
    /// one snapshot, so a request never sees half a resync. A watch sends one at start
    /// and after every relist.
    Resynced(Vec<ApiService>),
}

/// A feed of [`ApiServiceEvent`]s, consumed by
/// [`Registry::run`](crate::registry::Registry::run) one event at a time.
///
/// Implement it with `async fn next_event` over a watch, a channel, a poll loop. Each
/// event is applied before the next is asked for, so a source needs no buffering of its
/// own and sees backpressure from the registry.
pub trait ApiServiceSource: Send + 'static {
    /// The next event; `None` when the source has ended for good (then `run` returns,
    /// and the APIServices stay as they are). A source that only loses its connection
    /// should wait and resync rather than end.
    fn next_event(&mut self) -> impl Future<Output = Option<ApiServiceEvent>> + Send;
}
