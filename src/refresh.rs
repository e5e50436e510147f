//! The refresh loop the discovery and OpenAPI managers share: items (a Service's
//! discovery document, an APIService's specs) each due at an instant, fetched by a few
//! workers, each fetch's result applied as it completes, and the loop woken early when
//! the set of items changes. What an item is, when it is due again and what a fetch does
//! stay with each manager; this is the scheduling both do alike.
//!
//! A leaf beside [`rt`](crate::rt): no runtime, all waiting on the injected [`Timer`].
//!
//! Floor 1 of the import order (docs/architecture.md): uses `rt`; used by `discovery`,
//! `openapi`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::rt::Timer;
use crate::rt::lock;

/// How long the loop sleeps when nothing is due: it is woken by [`Notify::wake`] before.
const IDLE: Duration = Duration::from_secs(3600);

/// A fetch the loop runs: its result goes to the loop's `apply`.
pub(crate) type Fetch<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The "look again" signal of a refresh loop: a flag, and the tasks waiting for it (the
/// loop, and whoever else waits on the manager, e.g. discovery's readiness).
#[derive(Default)]
pub(crate) struct Notify {
    notified: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Notify {
    /// Sets the flag and wakes every waiter.
    pub(crate) fn wake(&self) {
        self.notified.store(true, Ordering::Release);
        for w in lock(&self.wakers).drain(..) {
            w.wake();
        }
    }

    /// Wakes `waker` at the next [`Notify::wake`].
    pub(crate) fn register(&self, waker: &Waker) {
        let mut wakers = lock(&self.wakers);
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// Whether the flag was set (clearing it); registers `cx` when not, checking again
    /// after, so a wake between the two is not missed.
    fn poll_notified(&self, cx: &Context<'_>) -> bool {
        if self.notified.swap(false, Ordering::AcqRel) {
            return true;
        }
        self.register(cx.waker());
        self.notified.swap(false, Ordering::AcqRel)
    }
}

/// Starts the items due at `now`, the longest due first (then by key): an item tried
/// before takes one of `free` workers, an item never tried starts whatever the limit (so
/// a new APIService is not queued behind slow ones). `start` starts one, returning
/// `false` when it has nothing to fetch after all (then no worker is taken). Returns the
/// earliest due instant of the items not due yet.
pub(crate) fn start_due<K: Ord>(
    mut items: Vec<(K, Instant, bool)>,
    now: Instant,
    mut free: usize,
    mut start: impl FnMut(K) -> bool,
) -> Option<Instant> {
    items.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let mut next_due: Option<Instant> = None;
    for (key, due, tried) in items {
        if due > now {
            next_due = Some(next_due.map_or(due, |n| n.min(due)));
            continue;
        }
        if tried && free == 0 {
            continue;
        }
        if start(key) && tried {
            free -= 1;
        }
    }
    next_due
}

/// Runs forever: `start(now, spawn)` starts what is due (each fetch through `spawn`) and
/// returns when the next item is due; the loop then waits for a fetch to complete (its
/// result to `apply`), the next due instant, or a [`Notify::wake`], and goes round.
pub(crate) async fn run<T: Send + 'static>(
    timer: &Timer,
    notify: &Notify,
    mut start: impl FnMut(Instant, &mut dyn FnMut(Fetch<T>)) -> Option<Instant>,
    mut apply: impl FnMut(T),
) {
    let mut running: FuturesUnordered<Fetch<T>> = FuturesUnordered::new();
    loop {
        let next_due = start(timer.now(), &mut |fetch| running.push(fetch));
        let wait = next_due.map_or(IDLE, |d| d.saturating_duration_since(timer.now()));
        let mut sleep = timer.sleep(wait);
        let done = std::future::poll_fn(|cx| {
            if !running.is_empty() {
                if let Poll::Ready(Some(done)) = running.poll_next_unpin(cx) {
                    return Poll::Ready(Some(done));
                }
            }
            if notify.poll_notified(cx) || sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        if let Some(result) = done {
            apply(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn due_items_start_in_order_and_tried_ones_wait_for_a_worker() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let items = vec![
            ("late", t0 + 5 * s, true),
            ("b", t0, true),
            ("a", t0, true),
            ("new", t0, false),
            ("gone", t0 - s, true),
            ("later", t0 + 9 * s, false),
        ];
        let mut started = Vec::new();
        let next = start_due(items, t0, 1, |k| {
            started.push(k);
            k != "gone"
        });
        // "gone" is the longest due but has nothing to fetch: it takes no worker, so "a"
        // gets the one free worker; "b" waits; "new" was never tried and starts anyway.
        assert_eq!(started, ["gone", "a", "new"]);
        assert_eq!(next, Some(t0 + 5 * s));
    }

    #[test]
    fn a_wake_is_seen_once_and_wakes_the_registered() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let notify = Notify::default();
        let count = Arc::new(Count(0.into()));
        let waker = Waker::from(count.clone());
        let cx = Context::from_waker(&waker);
        assert!(!notify.poll_notified(&cx));
        notify.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(notify.poll_notified(&cx));
        assert!(!notify.poll_notified(&cx));
    }
}
