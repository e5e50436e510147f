//! How the availability controller and the managers' driver learn of a change in any
//! tenant: one counter with its wakers, bumped when the tenant set changes and when any
//! tenant's registry publishes a table.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::registry::{RoutingTable, TableObserver};

/// Bumped by every change of the tenant set and every table a tenant publishes.
#[derive(Default)]
pub(super) struct Signal {
    /// The count of changes so far; a waiter compares it with the value it last saw, so
    /// a change between two polls is never missed.
    pub(super) generation: AtomicU64,
    /// The tasks waiting in [`Changed`], each woken once by the next bump.
    wakers: Mutex<Vec<Waker>>,
}

impl Signal {
    /// Counts one change and wakes every waiter.
    pub(super) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        for w in lock(&self.wakers).drain(..) {
            w.wake();
        }
    }
}

/// Bumps the tenants' signal on every table a tenant publishes.
pub(super) struct Bump(pub(super) Arc<Signal>);

impl TableObserver for Bump {
    fn table_published(&self, _table: &Arc<RoutingTable>) {
        self.0.bump();
    }
}

/// Future of [`Tenants::changed`](super::Tenants::changed).
pub struct Changed {
    pub(super) signal: Arc<Signal>,
    pub(super) seen: u64,
}

impl std::fmt::Debug for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changed")
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl Future for Changed {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let g = self.signal.generation.load(Ordering::Acquire);
        if g > self.seen {
            return Poll::Ready(g);
        }
        {
            let mut wakers = lock(&self.signal.wakers);
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
        }
        // Re-checked after registering, so a bump between the two loads is not missed.
        let g = self.signal.generation.load(Ordering::Acquire);
        if g > self.seen {
            Poll::Ready(g)
        } else {
            Poll::Pending
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
