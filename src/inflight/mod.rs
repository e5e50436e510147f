//! In-flight limits: kube-apiserver's max-in-flight filter (k8s.io/apiserver
//! [`pkg/server/filters/maxinflight.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/maxinflight.go)),
//! and an optional limit per APIService.
//!
//! [`InFlightLayer`] counts the requests being served in two classes, read-only (verbs
//! `get`, `list`, `watch`) and mutating (every other verb, non-resource `post`, `put` and
//! `head` included), and refuses one that would go over its class's limit with upstream's
//! 429: `Retry-After: 1` and the plain-text body `Too many requests, please try again
//! later.`. There is no queue. A slot is held until the response body has been sent.
//! Long-running requests ([`LongRunningCheck`]) are never counted, and a request whose
//! user (after impersonation) is in `system:masters` is served even when its class is full.
//! A limit of 0 means no limit for that class.
//!
//! Beyond upstream, [`InFlightLayer::per_api_service`] caps the requests in flight for any
//! one APIService (the group/version a path names, `<version>.<group>`; `v1.` for the core
//! group), so an extension server that stops answering holds at most that many slots and
//! every other APIService and local path keeps answering. A request refused by it gets the
//! same 429 and takes no global slot.
//!
//! Mirrors k8s.io/apiserver
//! [`pkg/server/filters/maxinflight.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/filters/maxinflight.go).
//! It sits after impersonation and before authorization, as there.
//!
//! ```
//! use kube_aggregator::inflight::InFlightLayer;
//! // --max-requests-inflight=400 --max-mutating-requests-inflight=200, and at most 100
//! // requests to any one APIService.
//! let layer = InFlightLayer::new(400, 200).per_api_service(100);
//! assert_eq!(layer.in_flight().read_only, 0);
//! ```
//!
//! Floor 9 of the import order (docs/architecture.md): uses `authn`, `authz`, `body`,
//! `filter`, `metrics`, `status`, `tenancy`, `timeout`; used by `builder`.

mod service;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

pub use crate::timeout::LongRunningCheck;
pub use service::{Counted, InFlightLayer, InFlightService, ResponseFuture};

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

/// How many requests are counted right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InFlight {
    /// Read-only requests (`get`, `list`, `watch`) being served.
    pub read_only: usize,
    /// Mutating requests being served.
    pub mutating: usize,
}

/// One class's counter; `max == 0` is no limit.
#[derive(Debug)]
struct Limit {
    max: usize,
    current: AtomicUsize,
    /// The most in use since the last scrape (`apiserver_current_inflight_requests`).
    peak: AtomicUsize,
}

impl Limit {
    fn new(max: usize) -> Limit {
        Limit {
            max,
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// The most requests in use since the last call (at least those in use now), as
    /// upstream reports the most in use over the last period rather than one sample.
    fn take_peak(&self) -> usize {
        let now = self.current.load(Ordering::Acquire);
        self.peak.swap(now, Ordering::AcqRel).max(now)
    }

    /// Takes a slot unless the class is full: one atomic add, undone when it went over,
    /// so two racing requests can never both take the last slot.
    fn try_acquire(&self) -> bool {
        if self.max == 0 {
            return true;
        }
        let before = self.current.fetch_add(1, Ordering::AcqRel);
        if before < self.max {
            self.peak.fetch_max(before + 1, Ordering::AcqRel);
            true
        } else {
            self.current.fetch_sub(1, Ordering::AcqRel);
            false
        }
    }

    /// Gives a slot back (nothing to do without a limit).
    fn release(&self) {
        if self.max != 0 {
            self.current.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Requests in flight per APIService name; an entry lives while its count is above zero.
#[derive(Debug)]
struct PerApiService {
    max: usize,
    counts: Mutex<HashMap<String, usize>>,
}

impl PerApiService {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // Plain counters: a panic elsewhere cannot leave them inconsistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot for APIService `name` unless it already has `max` in flight.
    fn try_acquire(&self, name: &str) -> bool {
        let mut counts = self.counts();
        match counts.get_mut(name) {
            Some(n) if *n >= self.max => false,
            Some(n) => {
                *n += 1;
                true
            }
            None => {
                counts.insert(name.to_owned(), 1);
                true
            }
        }
    }

    /// Gives `name`'s slot back, forgetting the name at zero so the map holds only busy
    /// APIServices.
    fn release(&self, name: &str) {
        let mut counts = self.counts();
        if let Some(n) = counts.get_mut(name) {
            *n -= 1;
            if *n == 0 {
                counts.remove(name);
            }
        }
    }

    /// `name`'s requests in flight now.
    fn current(&self, name: &str) -> usize {
        self.counts().get(name).copied().unwrap_or(0)
    }
}

/// The limits every service of one layer counts against (so the limit is per layer, not
/// per clone), and which requests are exempt.
#[derive(Debug)]
struct Shared {
    read_only: Limit,
    mutating: Limit,
    per_api_service: Option<PerApiService>,
    long_running: LongRunningCheck,
    /// Where refusals are counted (`apiserver_request_terminations_total`).
    metrics: Option<Arc<crate::metrics::RequestMetrics>>,
}

/// The slots one request holds; dropping it gives them back.
#[derive(Debug)]
struct Slots {
    shared: Arc<Shared>,
    /// The global class, when one was taken (`Some(true)` mutating).
    class: Option<bool>,
    /// The APIService whose per-APIService slot was taken, if any.
    api_service: Option<String>,
}

impl Drop for Slots {
    fn drop(&mut self) {
        match self.class {
            Some(true) => self.shared.mutating.release(),
            Some(false) => self.shared.read_only.release(),
            None => {}
        }
        if let (Some(name), Some(per)) = (&self.api_service, &self.shared.per_api_service) {
            per.release(name);
        }
    }
}

#[cfg(test)]
mod tests;
