//! The registry: the single writer that validates APIServices and publishes the immutable
//! [`RoutingTable`] the request path reads.
//!
//! Readers take one lock-free `arc-swap` load per request ([`Registry::snapshot`]).
//! Writers ([`Registry::apply`], [`Registry::run`], the availability controller through
//! [`Registry::set_available_condition`]) serialize on a mutex that the request path never
//! touches, rebuild the table, and swap it in whole.
//!
//! It plays the parts of several upstream pieces: the APIService registry strategy
//! ([`pkg/registry/apiservice/strategy.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/registry/apiservice/strategy.go):
//! validation on every write, status owned here and never taken from a source), the local
//! availability controller (a local APIService is `Available=True`, reason `Local`, at
//! once) and the registration controller that installs one proxy route per APIService
//! ([`pkg/apiserver/apiservice_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apiserver/apiservice_controller.go)).
//! Backend clients are built here, off the request path, when an APIService appears or
//! its TLS settings change, and are shared by every snapshot until then.
//!
//! Who hears about changes: [`StatusSink`]s (to write `status` back where APIServices
//! live), [`TableObserver`]s (the discovery and OpenAPI managers, through
//! [`Registry::feed`]), and [`Registry::changed`] waiters.
//!
//! ```
//! use kube_aggregator::apiservice::ApiService;
//! use kube_aggregator::registry::Registry;
//! use kube_aggregator::source::ApiServiceEvent;
//! use kube_aggregator::transport::InMemoryTransport;
//!
//! let registry = Registry::new(InMemoryTransport::new());
//! let local: ApiService = serde_json::from_str(r#"{
//!   "metadata": {"name": "v1.apps"},
//!   "spec": {"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}}"#).unwrap();
//! registry.apply(ApiServiceEvent::Applied(local)).unwrap();
//!
//! let table = registry.snapshot();
//! assert_eq!(table.generation(), 1);
//! let route = table.lookup("apps", "v1").unwrap();
//! // Local APIServices are available at once, as upstream's local controller makes them.
//! assert!(route.is_available() && route.remote().is_none());
//!
//! // An invalid APIService is refused with upstream's message; the table is unchanged.
//! let bad: ApiService = serde_json::from_str(r#"{
//!   "metadata": {"name": "wrong-name"},
//!   "spec": {"group": "apps", "version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1}}"#).unwrap();
//! let err = registry.apply(ApiServiceEvent::Applied(bad)).unwrap_err();
//! assert!(err.to_string().ends_with(r#"must be `spec.version+"."+spec.group`: "v2.apps""#), "{err}");
//! assert!(registry.snapshot().get("wrong-name").is_none());
//!
//! // A resync is the whole set: what it does not list goes, in one snapshot.
//! registry.apply(ApiServiceEvent::Resynced(Vec::new())).unwrap();
//! assert!(registry.snapshot().is_empty());
//! ```
//!
//! Floor 4 of the import order (docs/architecture.md): uses `apiservice`, `body`,
//! `discovery`, `resolver`, `rt`, `sharded`, `source`, `transport`; used by `aggregator`,
//! `apiregistration`, `availability`, `builder`, `fuzz_logic`.

mod changed;
mod feed;
mod observer;
mod table;
mod writer;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::task::Waker;

use arc_swap::{ArcSwap, Guard};

use crate::apiservice::{ApiService, CONDITION_AVAILABLE, ConditionStatus, ValidationError};
use crate::discovery::TargetSink;
use crate::resolver::ServiceResolver;
use crate::rt::{Timer, lock};
use crate::source::{ApiServiceEvent, ApiServiceSource};
use crate::transport::Transport;

use feed::Feed;
pub use table::{Backend, GroupRoutes, RemoteBackend, Route, RoutingTable};
use writer::{Draft, Writer};

pub use changed::Changed;
pub use observer::{StatusSink, TableObserver};

/// APIServices that an update could not apply, each with the upstream validation message.
/// Everything else in the update was applied.
///
/// Its text is the rejected APIServices' messages joined with `; `, each as
/// kube-apiserver would answer the create (`APIService.apiregistration.k8s.io "x" is
/// invalid: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", rejected.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
pub struct ApplyError {
    /// One entry per rejected APIService.
    pub rejected: Vec<ValidationError>,
}

struct Shared {
    table: ArcSwap<RoutingTable>,
    writer: Mutex<Writer>,
    transport: Arc<dyn Transport>,
    sinks: Mutex<Vec<Arc<dyn StatusSink>>>,
    observers: Mutex<Vec<Arc<dyn TableObserver>>>,
    wakers: Mutex<Vec<Waker>>,
    /// Where condition and creation timestamps come from; the system clock when unset.
    clock: Mutex<Option<Timer>>,
    /// APIServices found unreachable by requests, with the cause's name, for the
    /// availability controller.
    unreachable: Mutex<Vec<(String, String)>>,
}

/// A cloneable handle to the registry: the one writer of APIServices and the source of
/// every [`RoutingTable`] snapshot.
///
/// Clones share everything (one `Arc`). [`Registry::snapshot`] is the request path's one
/// atomic load; every writing method takes the writer's mutex, so updates from a source,
/// the host and the availability controller apply one at a time, each as a whole.
#[derive(Clone)]
pub struct Registry {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("generation", &self.snapshot().generation())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry (generation 0) that builds backend clients with `transport`.
    /// Timestamps come from the system clock until [`Registry::set_clock`].
    pub fn new(transport: impl Transport) -> Registry {
        Registry {
            shared: Arc::new(Shared {
                table: ArcSwap::from_pointee(RoutingTable::default()),
                writer: Mutex::new(Writer::default()),
                transport: Arc::new(transport),
                sinks: Mutex::new(Vec::new()),
                observers: Mutex::new(Vec::new()),
                wakers: Mutex::new(Vec::new()),
                clock: Mutex::new(None),
                unreachable: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Takes the timestamps it writes (`metadata.creationTimestamp`, each condition's
    /// `lastTransitionTime`) from `timer`'s [`wall_clock`](Timer::wall_clock) instead of the
    /// system clock, so a paused or hand-moved test clock moves them too.
    /// [`Aggregator::builder`](crate::Aggregator::builder) does this with its timer.
    pub fn set_clock(&self, timer: Timer) {
        *lock(&self.shared.clock) = Some(timer);
    }

    /// Now as RFC 3339 (UTC, seconds) from the clock of [`Registry::set_clock`].
    fn now_rfc3339(&self) -> String {
        match &*lock(&self.shared.clock) {
            Some(timer) => timer.rfc3339(),
            None => crate::rt::rfc3339_now(),
        }
    }

    /// The current snapshot: one lock-free load. Holding the guard keeps that snapshot
    /// alive but blocks nothing; do not hold it across an `await` (use
    /// [`Registry::snapshot_owned`]).
    pub fn snapshot(&self) -> Guard<Arc<RoutingTable>> {
        self.shared.table.load()
    }

    /// The current snapshot as an owned `Arc` (for holding across awaits).
    pub fn snapshot_owned(&self) -> Arc<RoutingTable> {
        self.shared.table.load_full()
    }

    /// Adds a sink that hears every status change from now on (not the current ones).
    pub fn add_status_sink(&self, sink: impl StatusSink) {
        lock(&self.shared.sinks).push(Arc::new(sink));
    }

    /// Adds an observer of every published table; it hears the current one at once, on
    /// the calling task.
    pub fn add_observer(&self, observer: impl TableObserver) {
        let observer: Arc<dyn TableObserver> = Arc::new(observer);
        lock(&self.shared.observers).push(observer.clone());
        observer.table_published(&self.snapshot_owned());
    }

    /// Keeps `sink` (a [`DiscoveryManager`](crate::discovery::DiscoveryManager), an
    /// [`OpenApiManager`](crate::openapi::OpenApiManager)) following the APIServices:
    /// every published table becomes a [`TargetSet`](crate::discovery::TargetSet) of the remote APIServices, whose
    /// fetchers resolve Services with `resolver` and send through each APIService's
    /// backend client (its TLS settings and the proxy client certificate).
    pub fn feed(&self, resolver: impl ServiceResolver, sink: impl TargetSink) {
        self.add_observer(Feed {
            resolver: Arc::new(resolver),
            sink,
        });
    }

    fn observe(&self) {
        let observers: Vec<Arc<dyn TableObserver>> = lock(&self.shared.observers).clone();
        if observers.is_empty() {
            return;
        }
        let table = self.snapshot_owned();
        for o in &observers {
            o.table_published(&table);
        }
    }

    /// Applies one event: the in-memory handle for hosts that push updates.
    ///
    /// Each APIService is validated with upstream's rules and messages
    /// ([`pkg/apis/apiregistration/validation/validation.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/validation/validation.go));
    /// an invalid one is rejected whole and the previous version of that name, if any,
    /// stays. For [`ApiServiceEvent::Resynced`] every valid object is applied and every
    /// name not listed is deleted, in one published snapshot.
    ///
    /// The `status` of an applied object is ignored: the registry keeps the status it
    /// has (the availability controller writes it), as upstream's strategy keeps status
    /// on update. An unchanged APIService keeps its route, clients and pooled connections;
    /// a changed `caBundle` or `insecureSkipTLSVerify` builds new clients. Deleting an
    /// unknown name is not an error.
    ///
    /// Every event publishes a new snapshot (the generation grows by one), then observers
    /// and sinks hear of it, before this returns.
    ///
    /// # Errors
    ///
    /// [`ApplyError`] listing every APIService that failed validation; the rest of the
    /// event was applied.
    pub fn apply(&self, event: ApiServiceEvent) -> Result<(), ApplyError> {
        let mut rejected = Vec::new();
        let mut changed_status = Vec::new();
        let mut w = lock(&self.shared.writer);
        let prev = w.current.clone();
        let mut next = Draft {
            map: prev.by_name.clone(),
            touched: Vec::new(),
        };
        match event {
            ApiServiceEvent::Applied(svc) => self.upsert(
                &mut next,
                &prev.by_name,
                svc,
                &mut rejected,
                &mut changed_status,
            ),
            ApiServiceEvent::Deleted(name) => {
                if let Some((key, _)) = next.map.remove(name.as_str()) {
                    next.touched.push(key);
                }
            }
            ApiServiceEvent::Resynced(all) => {
                let keep: HashSet<&str> = all.iter().map(|s| s.metadata.name.as_str()).collect();
                let removed = next.map.retain(|name| keep.contains(name));
                next.touched.extend(removed);
                drop(keep);
                for svc in all {
                    self.upsert(
                        &mut next,
                        &prev.by_name,
                        svc,
                        &mut rejected,
                        &mut changed_status,
                    );
                }
            }
        }
        self.publish(&mut w, next);
        drop(w);
        self.observe();
        self.notify(&changed_status);
        if rejected.is_empty() {
            Ok(())
        } else {
            Err(ApplyError { rejected })
        }
    }

    /// Sets the `Available` condition of `name` with upstream semantics (reason and
    /// message always, `lastTransitionTime` only when the status flips) and publishes it
    /// when anything changed. Returns the previous availability, or `None` when `name` is
    /// unknown or nothing changed.
    ///
    /// This is upstream's `SetAPIServiceCondition`
    /// ([`pkg/apis/apiregistration/v1/helper/helpers.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/apis/apiregistration/v1/helper/helpers.go)).
    /// The availability controller calls it after each check; a host that decides
    /// availability itself may call it too. `reason` is one CamelCase word
    /// (`Passed`, `FailedDiscoveryCheck`, `ServiceNotFound`, ...).
    pub fn set_available_condition(
        &self,
        name: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> Option<bool> {
        let mut w = lock(&self.shared.writer);
        let prev = w.current.clone();
        let (key, route) = prev.by_name.get_key_value(name)?;
        let was_available = route.is_available();
        let mut svc = route.apiservice.clone();
        if !svc.set_condition(
            CONDITION_AVAILABLE,
            status,
            reason,
            message,
            &self.now_rfc3339(),
        ) {
            return None;
        }
        let updated = Arc::new(Route {
            apiservice: svc.clone(),
            backend: route.backend.clone(),
        });
        let mut next = Draft {
            map: prev.by_name.clone(),
            touched: Vec::new(),
        };
        next.insert(key.clone(), updated);
        self.publish(&mut w, next);
        drop(w);
        self.observe();
        self.notify(std::slice::from_ref(&svc));
        Some(was_available)
    }

    /// Tells every sink about each APIService whose status changed.
    fn notify(&self, changed: &[ApiService]) {
        if changed.is_empty() {
            return;
        }
        let sinks: Vec<Arc<dyn StatusSink>> = lock(&self.shared.sinks).clone();
        for svc in changed {
            for sink in &sinks {
                sink.status_changed(svc);
            }
        }
    }

    /// A request to `name` could not reach its backend at all (a
    /// [`ConnectError`](crate::transport::ConnectError)): marks it `Available=False` with
    /// reason `FailedDiscoveryCheck` and `message` at once, and asks the availability
    /// controller to probe it again soon ([`AvailabilityConfig::passive_recheck`], then
    /// with backoff), which brings it back when the backend answers. True when this call
    /// made it unavailable (concurrent reports flip it once).
    ///
    /// The aggregator calls it for every proxied request that found the backend
    /// unreachable; a host with its own health signal may call it too. An APIService that
    /// is already unavailable (or unknown) is left alone and `false` is returned.
    ///
    /// [`AvailabilityConfig::passive_recheck`]: crate::availability::AvailabilityConfig::passive_recheck
    pub fn report_unreachable(&self, name: &str, message: &str) -> bool {
        self.report_unreachable_because(name, message, "ReportedUnreachable")
    }

    /// [`Registry::report_unreachable`] with the name of the cause, for the metrics.
    pub(crate) fn report_unreachable_because(
        &self,
        name: &str,
        message: &str,
        cause: &str,
    ) -> bool {
        if !self.snapshot().get(name).is_some_and(|r| r.is_available()) {
            return false;
        }
        let flipped = self.set_available_condition(
            name,
            crate::apiservice::ConditionStatus::False,
            "FailedDiscoveryCheck",
            message,
        ) == Some(true);
        if flipped {
            lock(&self.shared.unreachable).push((name.to_owned(), cause.to_owned()));
        }
        flipped
    }

    /// What the transport presents to backends as the proxy client certificate
    /// ([`Transport::client_certificate`]), for messages that must name it.
    pub fn client_certificate(&self) -> Option<crate::transport::CertificateSummary> {
        self.shared.transport.client_certificate()
    }

    /// The APIServices [`Registry::report_unreachable`] flipped since the last call, with
    /// their causes' names.
    pub(crate) fn take_unreachable(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *lock(&self.shared.unreachable))
    }

    /// Applies every event of `source` until it ends, logging rejected APIServices with
    /// their reasons (the last good version of each stays). The
    /// [`Aggregator`](crate::Aggregator)'s worker runs this for the source it was given;
    /// a host assembling layers by hand spawns it.
    pub async fn run<S: ApiServiceSource>(self, mut source: S) {
        while let Some(event) = source.next_event().await {
            self.apply_logged(event);
        }
    }

    /// [`Registry::apply`], logging each rejected APIService with its reason.
    pub(crate) fn apply_logged(&self, event: ApiServiceEvent) {
        if let Err(e) = self.apply(event) {
            for r in &e.rejected {
                tracing::warn!(error = %r, "APIService rejected");
            }
        }
    }
}

#[cfg(test)]
mod tests;
