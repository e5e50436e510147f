//! Runtime seams: hyper's [`rt::Executor`](https://docs.rs/hyper/1/hyper/rt/trait.Executor.html) and [`rt::Timer`](https://docs.rs/hyper/1/hyper/rt/trait.Timer.html),
//! injected by the host and stored type-erased, as hyper-util does.
//!
//! Everything in the crate that sleeps or spawns goes through these, so the library runs
//! on any runtime and tests can drive time. Tokio implementations come with the `tokio`
//! feature ([`Executor::tokio`], [`Timer::tokio`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use pin_project_lite::pin_project;

/// A boxed `Send` future of `()`, the unit the [`Executor`] spawns.
pub type BoxTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A type-erased, cloneable executor.
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

    /// Spawns `fut` to run to completion in the background.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.execute(Box::pin(fut));
    }

    /// The tokio executor (`tokio::spawn`); needs a tokio runtime when called.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
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
    /// Wraps any hyper timer.
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

    /// The tokio timer (`tokio::time`, so a paused tokio clock applies).
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn tokio() -> Timer {
        Timer::new(hyper_util::rt::TokioTimer::new())
    }

    /// A future that completes after `duration`.
    pub fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.timer.sleep(duration)
    }

    /// The timer's notion of now (follows a paused clock where the timer does).
    pub fn now(&self) -> Instant {
        self.timer.now()
    }

    /// Runs `fut` with a deadline of `duration`; `Err(Elapsed)` when the deadline passes first.
    pub fn timeout<F: Future>(&self, duration: Duration, fut: F) -> Timeout<F> {
        Timeout {
            fut,
            sleep: self.sleep(duration),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("context deadline exceeded")]
pub struct Elapsed;

pin_project! {
    /// Future of [`Timer::timeout`].
    pub struct Timeout<F> {
        #[pin]
        fut: F,
        sleep: Pin<Box<dyn hyper::rt::Sleep>>,
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
        match this.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// RFC 3339 (UTC, seconds) of the system's wall clock, as Kubernetes writes
/// `metav1.Time`. The library itself writes timestamps from its injected
/// [`Timer::wall_clock`].
pub fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
