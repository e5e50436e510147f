//! Runtime seams: hyper's [`rt::Executor`](https://docs.rs/hyper/1/hyper/rt/trait.Executor.html) and [`rt::Timer`](https://docs.rs/hyper/1/hyper/rt/trait.Timer.html),
//! injected by the host and stored type-erased, as hyper-util does.
//!
//! Everything in the crate that sleeps or spawns goes through these, so the library runs
//! on any runtime and tests can drive time. Tokio implementations come with the `tokio`
//! feature ([`Executor::tokio`], [`Timer::tokio`]).
//!
//! What uses them:
//!
//! - the [`Timer`]: the request deadline of the [`timeout`](crate::timeout) layer, the
//!   availability controller's probe timeouts, resync period and backoff, the discovery
//!   and OpenAPI managers' refresh periods and fetch deadlines, the webhooks' per-attempt
//!   timeouts and retry backoff, the decision and token caches' TTLs, and the wall clock
//!   of the timestamps the registry writes into APIService conditions;
//! - the [`Executor`]: the backend connection tasks of the pooled transport (one per
//!   HTTP/1.1 or HTTP/2 connection) and the byte splice of an upgraded connection
//!   (`kubectl exec`, `port-forward`, WebSocket watches).
//!
//! The two types are cheap to clone (one `Arc` each) and are handed to the
//! [`Aggregator`](crate::Aggregator) builder once; everything it builds shares them. This
//! mirrors hyper-util's `common::exec::Exec` and `common::timer::Timer`, which store
//! hyper's traits as `Arc<dyn ...>` the same way.
//!
//! ```
//! use std::time::Duration;
//! use kube_aggregator::rt::{Elapsed, Executor, Timer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let timer = Timer::tokio();
//! let executor = Executor::tokio();
//!
//! // A deadline that passes first is `Err(Elapsed)`, whose text is Go's.
//! let slow = timer.timeout(Duration::from_millis(1), std::future::pending::<()>());
//! assert_eq!(slow.await, Err(Elapsed));
//! assert_eq!(Elapsed.to_string(), "context deadline exceeded");
//!
//! // A future that finishes in time is `Ok` with its output.
//! assert_eq!(timer.timeout(Duration::from_secs(1), async { 7 }).await, Ok(7));
//!
//! // Spawned tasks run on the host's runtime.
//! let (tx, rx) = tokio::sync::oneshot::channel();
//! executor.spawn(async move { let _ = tx.send("ran"); });
//! assert_eq!(rx.await.unwrap(), "ran");
//!
//! // Conditions are stamped from the injected clock, as Kubernetes writes `metav1.Time`.
//! assert!(timer.rfc3339().ends_with('Z'));
//! # }
//! ```
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `aggregator`, `audit`, `authn`, `authz`, `availability`, `builder`, `discovery`,
//! `openapi`, `proxy`, `refresh`, `registry`, `reload`, `source`, `tenancy`, `testing`,
//! `timeout`, `transport`, `webhook`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use pin_project_lite::pin_project;

/// Locks `m`, taking over the data of a lock poisoned by a panic elsewhere: the library's
/// critical sections leave their data whole at every point a panic could come from, so
/// a panic in one task never takes the locks, and with them the request path, down with
/// it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A boxed `Send` future of `()`, the unit the [`Executor`] spawns.
pub type BoxTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A type-erased, cloneable executor: any hyper
/// [`rt::Executor`](https://docs.rs/hyper/1/hyper/rt/trait.Executor.html) of boxed
/// `Send + 'static` futures, behind an `Arc` (cloning shares it).
///
/// It is also a hyper executor itself, for any `Send + 'static` future of `()`, so it can
/// be passed where hyper's connection builders want one (`http2::Builder::new`). Spawned
/// futures must run to completion on their own: the library never joins them, and a
/// connection task that is dropped unpolled closes its connection.
#[derive(Clone)]
pub struct Executor(Arc<dyn hyper::rt::Executor<BoxTask> + Send + Sync>);

impl Executor {
    /// Wraps any hyper executor of boxed tasks.
    pub fn new<E>(exec: E) -> Executor
    where
        E: hyper::rt::Executor<BoxTask> + Send + Sync + 'static,
    {
        Executor(Arc::new(exec))
    }

    /// Spawns `fut` to run to completion in the background. Boxes it once (a [`BoxTask`])
    /// and hands it to the wrapped executor; never blocks.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.execute(Box::pin(fut));
    }

    /// The tokio executor (`tokio::spawn`, via hyper-util's `TokioExecutor`). Building it
    /// needs no runtime; spawning panics outside a tokio runtime, as `tokio::spawn` does.
    #[cfg(feature = "tokio")]
    pub fn tokio() -> Executor {
        Executor::new(hyper_util::rt::TokioExecutor::new())
    }
}

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        self.spawn(fut);
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Executor")
    }
}

/// A type-erased, cloneable timer.
///
/// Besides hyper's monotonic [`now`](Timer::now) it keeps the wall clock reading taken
/// when it was wrapped, so [`Timer::wall_clock`] follows the injected clock: a paused or
/// hand-moved test clock moves the timestamps the library writes (APIService conditions)
/// too.
#[derive(Clone)]
pub struct Timer {
    timer: Arc<dyn hyper::rt::Timer + Send + Sync>,
    /// The wall clock and the timer's `now` at the same moment.
    anchor: (SystemTime, Instant),
}

impl Timer {
    /// Wraps any hyper timer, and reads the system's wall clock once to anchor
    /// [`Timer::wall_clock`] to the timer's `now` at this moment.
    pub fn new<T>(timer: T) -> Timer
    where
        T: hyper::rt::Timer + Send + Sync + 'static,
    {
        let anchor = (SystemTime::now(), timer.now());
        Timer {
            timer: Arc::new(timer),
            anchor,
        }
    }

    /// The wall clock as this timer sees it: the wall time when the timer was wrapped,
    /// moved on by as much as the timer's [`now`](Timer::now) has moved since.
    pub fn wall_clock(&self) -> SystemTime {
        let (wall, then) = self.anchor;
        let now = self.now();
        match now.checked_duration_since(then) {
            Some(ahead) => wall + ahead,
            None => wall - then.duration_since(now),
        }
    }

    /// [`Timer::wall_clock`] as RFC 3339 (UTC, seconds), as Kubernetes writes
    /// `metav1.Time`.
    pub fn rfc3339(&self) -> String {
        humantime::format_rfc3339_seconds(self.wall_clock()).to_string()
    }

    /// The tokio timer (`tokio::time`, via hyper-util's `TokioTimer`), so a paused tokio
    /// clock (`tokio::time::pause`, `#[tokio::test(start_paused = true)]`) applies to every
    /// deadline, period and TTL in the library. Sleeping needs a tokio runtime.
    #[cfg(feature = "tokio")]
    pub fn tokio() -> Timer {
        Timer::new(hyper_util::rt::TokioTimer::new())
    }

    /// A future that completes after `duration` (as measured by the wrapped timer, so a
    /// paused test clock applies).
    pub fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.timer.sleep(duration)
    }

    /// The timer's notion of now: monotonic, and following a paused clock where the
    /// wrapped timer does. Every elapsed-time check in the library (cache entries,
    /// idle connections, backoff) compares against this, never `Instant::now()`.
    pub fn now(&self) -> Instant {
        self.timer.now()
    }

    /// Runs `fut` with a deadline of `duration`; `Err(Elapsed)` when the deadline passes first.
    ///
    /// The future is polled before the deadline on each wake-up, so one that is ready at
    /// the same moment the deadline passes still counts as in time. Dropping the
    /// [`Timeout`] drops `fut` with it.
    pub fn timeout<F: Future>(&self, duration: Duration, fut: F) -> Timeout<F> {
        self.timeout_if(Some(duration), fut)
    }

    /// [`Timer::timeout`] when `duration` is `Some`; with `None`, `fut` alone, never
    /// `Elapsed`: one type for a call that has a deadline only sometimes.
    pub(crate) fn timeout_if<F: Future>(&self, duration: Option<Duration>, fut: F) -> Timeout<F> {
        Timeout {
            fut,
            sleep: duration.map(|d| self.sleep(d)),
        }
    }
}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.timer.sleep(duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.timer.sleep_until(deadline)
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        self.timer.reset(sleep, new_deadline)
    }

    fn now(&self) -> Instant {
        self.timer.now()
    }
}

impl fmt::Debug for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Timer")
    }
}

/// The deadline of a [`Timer::timeout`] passed before the future completed.
///
/// Its text is Go's `context.DeadlineExceeded` (`context deadline exceeded`), because
/// upstream messages that quote a timed-out call (a webhook, an availability probe) end
/// with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("context deadline exceeded")]
pub struct Elapsed;

pin_project! {
    /// Future of [`Timer::timeout`].
    pub struct Timeout<F> {
        #[pin]
        fut: F,
        sleep: Option<Pin<Box<dyn hyper::rt::Sleep>>>,
    }
}

impl<F: fmt::Debug> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("fut", &self.fut)
            .finish_non_exhaustive()
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.sleep.as_mut().map(|sleep| sleep.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(Elapsed)),
            _ => Poll::Pending,
        }
    }
}

/// RFC 3339 (UTC, seconds) of the system's wall clock, as Kubernetes writes
/// `metav1.Time`. The library itself writes timestamps from its injected
/// [`Timer::wall_clock`].
pub fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Polls `fut` once with a waker that does nothing: `Ready` when it can answer at once.
/// On `Pending` it is polled again later with a real waker (a future registers the waker
/// of its latest poll), so a layer can take a synchronous path for answers that are
/// already there (a cache hit) and the asynchronous one otherwise.
pub(crate) fn poll_now<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(std::task::Waker::noop()))
}
