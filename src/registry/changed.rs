//! Waiting on the registry: [`Registry::changed`] for its next table, as the availability
//! controller and the managers' feed do, and [`Registry::wait_until`] for a table that
//! satisfies a predicate, as a host waiting for an APIService to be `Available` does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Registry, RoutingTable};
use crate::rt::lock;

impl Registry {
    /// Completes once the published generation is greater than `seen`, with the new
    /// generation. Pass [`RoutingTable::generation`] of the snapshot last read; a change
    /// published before the first poll is seen at once, so none is missed.
    ///
    /// ```
    /// use kube_aggregator::registry::Registry;
    /// use kube_aggregator::source::ApiServiceEvent;
    /// use kube_aggregator::transport::InMemoryTransport;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let registry = Registry::new(InMemoryTransport::new());
    /// let seen = registry.snapshot().generation();
    /// let waiter = tokio::spawn(registry.changed(seen));
    /// registry.apply(ApiServiceEvent::Deleted("v1.nothing".into())).unwrap();
    /// assert_eq!(waiter.await.unwrap(), seen + 1);
    /// # }
    /// ```
    pub fn changed(&self, seen: u64) -> Changed {
        Changed {
            registry: self.clone(),
            seen,
        }
    }

    /// Completes once `ready` holds for the published table: the current one first, then
    /// each one published after it. For instance, until an APIService is `Available`:
    ///
    /// ```
    /// # use kube_aggregator::registry::Registry;
    /// # async fn f(registry: Registry) {
    /// let name = "v1beta1.metrics.k8s.io";
    /// registry
    ///     .wait_until(|table| table.get(name).is_some_and(|r| r.is_available()))
    ///     .await;
    /// # }
    /// ```
    pub async fn wait_until(&self, ready: impl Fn(&RoutingTable) -> bool) {
        loop {
            let table = self.snapshot_owned();
            if ready(&table) {
                return;
            }
            self.changed(table.generation()).await;
        }
    }
}

/// Future of [`Registry::changed`]: the generation that is greater than the one given.
///
/// Waiting tasks are woken by every publish; one waker is kept per task however often it
/// polls.
#[derive(Debug)]
pub struct Changed {
    pub(super) registry: Registry,
    pub(super) seen: u64,
}

impl Future for Changed {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let g = self.registry.snapshot().generation();
        if g > self.seen {
            return Poll::Ready(g);
        }
        {
            // One entry per waiting task: a task that polls again replaces nothing.
            let mut wakers = lock(&self.registry.shared.wakers);
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
        }
        // Re-check after registering, so a publish between the two loads is not missed.
        let g = self.registry.snapshot().generation();
        if g > self.seen {
            Poll::Ready(g)
        } else {
            Poll::Pending
        }
    }
}
