//! [`Changed`]: waits for the registry's next table, as the availability controller and
//! the managers' feed do.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Registry, lock};

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
