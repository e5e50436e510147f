//! The one background future of a stack from [`Aggregator::builder`](crate::Aggregator::builder),
//! and the flag its aggregator layer reads to say when that future is not running.
//!
//! Shaped like tower's `Buffer::pair`: the builder returns the service and its worker
//! together, and a service whose worker is gone answers with the reason instead of
//! hanging or failing silently.
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `aggregator`, `builder`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

/// The background work of an [`Aggregator`](crate::Aggregator): the APIService feed, the
/// availability checks and the discovery and OpenAPI managers, and those of every tenant
/// when tenants are mounted. A future that never ends; spawn it.
#[must_use = "the aggregator marks no APIService Available until its worker runs: spawn it"]
pub struct Worker {
    work: BoxFuture<'static, ()>,
    state: Arc<WorkerState>,
}

debug_fields!(Worker {});

impl Worker {
    /// `work` (the builder's joined background futures) as a worker, and the state its stack reads; `now` is when the stack was
    /// built (the start of the grace before an unpolled worker counts as missing).
    pub(crate) fn new(work: BoxFuture<'static, ()>, now: Instant) -> (Worker, Arc<WorkerState>) {
        let state = Arc::new(WorkerState::new(now));
        (
            Worker {
                work,
                state: state.clone(),
            },
            state,
        )
    }
}

impl Future for Worker {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.state.phase.store(RUNNING, Ordering::Release);
        let done = self.work.as_mut().poll(cx);
        if done.is_ready() {
            self.state.phase.store(STOPPED, Ordering::Release);
        }
        done
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.state.phase.store(STOPPED, Ordering::Release);
    }
}

/// [`WorkerState`]'s phase: built, never polled.
const CREATED: u8 = 0;
/// Polled at least once, not dropped.
const RUNNING: u8 = 1;
/// Dropped, or finished (it never finishes on its own).
const STOPPED: u8 = 2;

/// How long a worker may go unpolled after
/// [`AggregatorBuilder::build`](crate::AggregatorBuilder::build) before the stack
/// calls it missing (a spawned task is polled at once; this only covers start-up).
const START_GRACE: Duration = Duration::from_secs(5);

/// Whether the [`Worker`] of a stack runs, shared with its aggregator layer, which reads
/// it on every remote request: one atomic load while the worker runs.
#[derive(Debug)]
pub(crate) struct WorkerState {
    phase: AtomicU8,
    built: Instant,
    /// Seconds since `built` of the last "not running" log line, plus one (0: never).
    logged: AtomicU64,
}

impl WorkerState {
    fn new(now: Instant) -> WorkerState {
        WorkerState {
            phase: AtomicU8::new(CREATED),
            built: now,
            logged: AtomicU64::new(0),
        }
    }

    /// `None` while the worker runs (or may still be about to); otherwise why not, logged
    /// at most once a minute.
    pub(crate) fn problem(&self, now: Instant) -> Option<&'static str> {
        let problem = match self.phase.load(Ordering::Acquire) {
            RUNNING => return None,
            CREATED if now.saturating_duration_since(self.built) < START_GRACE => return None,
            CREATED => {
                "the aggregator's worker is not running: spawn the Worker that Aggregator::builder(..).build() returned"
            }
            _ => {
                "the aggregator's worker has stopped: the Worker that Aggregator::builder(..).build() returned was dropped"
            }
        };
        let secs = now.saturating_duration_since(self.built).as_secs() + 1;
        let last = self.logged.load(Ordering::Acquire);
        if (last == 0 || secs >= last + 60)
            && self
                .logged
                .compare_exchange(last, secs, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            tracing::error!("{problem}");
        }
        Some(problem)
    }
}
