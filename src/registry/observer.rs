//! Who hears of the registry's changes: a [`StatusSink`] of every condition change (to
//! write status back), a [`TableObserver`] of every table published.

use std::sync::Arc;

use super::RoutingTable;
use crate::apiservice::ApiService;

/// Receives every change of an APIService's `Available` condition, so the host can write
/// status back to where APIServices live (the `UpdateStatus` of upstream's availability
/// controller), and `kubectl get apiservices` shows it.
///
/// Called after the change is published, on the task that made it (the availability
/// controller's worker, or the caller of [`Registry::apply`](super::Registry::apply) for a local APIService), once
/// per change and sink. A change is a different status, reason or message: repeated
/// checks with the same outcome are not reported. It must not block; hand slow writes to
/// a task of the host's.
pub trait StatusSink: Send + Sync + 'static {
    /// `apiservice` carries the new status (its `Available` condition with reason,
    /// message and `lastTransitionTime`); called after the snapshot is published.
    fn status_changed(&self, apiservice: &ApiService);
}

/// Hears every published [`RoutingTable`], after the writer that published it released
/// the registry: the discovery and OpenAPI managers follow the APIServices this way, so a
/// deleted APIService leaves their documents before [`Registry::apply`](super::Registry::apply) returns.
///
/// Called on the writer's task with the newest table (two writers in a row may both
/// report the same one); must not block.
pub trait TableObserver: Send + Sync + 'static {
    /// `table` is the current snapshot.
    fn table_published(&self, table: &Arc<RoutingTable>);
}
