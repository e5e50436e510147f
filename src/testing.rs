//! Test doubles shared by the unit tests and the fuzz logic: a transport that builds no
//! client, an executor that runs nothing, and three clocks (one whose sleeps end at once,
//! one whose sleeps end when it is stepped past them, one whose sleeps never end).
//!
//! Compiled for `cfg(test)` and `cfg(fuzzing)` only (the virtual clock, `MustBeReady` and
//! `later` for `cfg(test)` alone). Each clock's `now` is what the test
//! sets, never the wall clock, so a test decides how much time passes.
//!
//! Floor 4 of the import order (docs/architecture.md): uses `body`, `rt`, `transport`; used
//! by `fuzz_logic`.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
#[cfg(test)]
use std::task::Waker;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::rt::lock;
use crate::rt::{BoxTask, Executor, Timer};
use crate::transport::{BackendClient, BackendTarget, Transport, TransportError};

/// A transport that builds no client: the registry records the error for every remote
/// APIService, and no connection is ever attempted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoTransport;

impl Transport for NoTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        Err(TransportError::new(format!(
            "no transport here ({})",
            target.server_name
        )))
    }
}

/// An executor that drops what it is given: for stacks whose transport never upgrades a
/// connection (nothing is spliced, so nothing needs spawning).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoExecutor;

impl hyper::rt::Executor<BoxTask> for NoExecutor {
    fn execute(&self, _task: BoxTask) {}
}

impl NoExecutor {
    /// As the type-erased [`Executor`].
    pub(crate) fn executor() -> Executor {
        Executor::new(NoExecutor)
    }
}

/// A sleep that is over at once.
#[derive(Clone, Copy, Default)]
pub(crate) struct Over;

impl Future for Over {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

impl hyper::rt::Sleep for Over {}

/// A sleep that never ends.
#[derive(Clone, Copy, Default)]
pub(crate) struct Never;

impl Future for Never {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl hyper::rt::Sleep for Never {}

/// A clock moved by hand whose every sleep is an `S` ([`Over`] or [`Never`]).
#[derive(Clone)]
pub(crate) struct HandClock<S>(Arc<Mutex<Instant>>, PhantomData<S>);

/// A clock moved by hand whose sleeps are over at once: retries cost nothing while TTLs
/// follow [`HandClock::advance`].
pub(crate) type ManualClock = HandClock<Over>;

/// A clock moved by hand whose sleeps never end: a polled task waits instead of
/// spinning, and deadlines never pass (the fuzz targets' frozen clock).
pub(crate) type StoppedClock = HandClock<Never>;

impl<S: hyper::rt::Sleep + Default + Clone + Unpin + 'static> HandClock<S> {
    pub(crate) fn new() -> HandClock<S> {
        HandClock(Arc::new(Mutex::new(Instant::now())), PhantomData)
    }

    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        *lock(&self.0) += by;
    }

    pub(crate) fn timer(&self) -> Timer {
        Timer::new(self.clone())
    }
}

impl<S: hyper::rt::Sleep + Default + Clone + Unpin + 'static> hyper::rt::Timer for HandClock<S> {
    fn sleep(&self, _: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(S::default())
    }
    fn sleep_until(&self, _: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(S::default())
    }
    fn now(&self) -> Instant {
        *lock(&self.0)
    }
}

/// A clock stepped by hand whose sleeps end when [`VirtualClock::advance`] passes their
/// deadline, so timeouts can be tested without real waiting.
#[cfg(test)]
#[derive(Clone)]
pub(crate) struct VirtualClock(Arc<Mutex<VirtualState>>);

#[cfg(test)]
struct VirtualState {
    now: Instant,
    wakers: Vec<Waker>,
}

#[cfg(test)]
impl VirtualClock {
    pub(crate) fn new() -> VirtualClock {
        VirtualClock(Arc::new(Mutex::new(VirtualState {
            now: Instant::now(),
            wakers: Vec::new(),
        })))
    }

    /// Moves the clock on and wakes every sleep, which completes if its deadline passed.
    pub(crate) fn advance(&self, by: Duration) {
        let wakers = {
            let mut s = lock(&self.0);
            s.now += by;
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    pub(crate) fn timer(&self) -> Timer {
        Timer::new(self.clone())
    }
}

#[cfg(test)]
struct VirtualSleep {
    clock: VirtualClock,
    deadline: Instant,
}

#[cfg(test)]
impl Future for VirtualSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&self.clock.0);
        if s.now >= self.deadline {
            Poll::Ready(())
        } else {
            s.wakers.push(cx.waker().clone());
            Poll::Pending
        }
    }
}

#[cfg(test)]
impl hyper::rt::Sleep for VirtualSleep {}

#[cfg(test)]
impl hyper::rt::Timer for VirtualClock {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let deadline = self.now() + duration;
        self.sleep_until(deadline)
    }
    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(VirtualSleep {
            clock: self.clone(),
            deadline,
        })
    }
    fn now(&self) -> Instant {
        lock(&self.0).now
    }
}

/// Wraps a service so that calling an instance that was not made ready first fails: tower's
/// contract, which layers that take the readied service (or call it in place) keep. Clones
/// start unready, as tower's `Clone` docs say a clone's readiness is its own.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct MustBeReady<S> {
    inner: S,
    ready: bool,
}

#[cfg(test)]
impl<S> MustBeReady<S> {
    pub(crate) fn new(inner: S) -> MustBeReady<S> {
        MustBeReady {
            inner,
            ready: false,
        }
    }
}

#[cfg(test)]
impl<S: Clone> Clone for MustBeReady<S> {
    fn clone(&self) -> Self {
        MustBeReady::new(self.inner.clone())
    }
}

#[cfg(test)]
impl<S, R> tower::Service<R> for MustBeReady<S>
where
    S: tower::Service<R, Error = std::convert::Infallible>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = crate::body::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self.inner.poll_ready(cx) {
            Poll::Ready(Ok(())) => {
                self.ready = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => match e {},
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, req: R) -> Self::Future {
        if !std::mem::take(&mut self.ready) {
            return Box::pin(std::future::ready(Err(
                "called without poll_ready on this instance".into(),
            )));
        }
        let called = self.inner.call(req);
        Box::pin(async move {
            match called.await {
                Ok(res) => Ok(res),
                Err(e) => match e {},
            }
        })
    }
}

/// Resolves to `value` after answering `Pending` once (waking itself): a future that is
/// not ready at once, for the asynchronous path of a layer.
#[cfg(test)]
pub(crate) async fn later<T>(value: T) -> T {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
    value
}

/// The string field `key` of each object in the JSON array `list`, in order: a test's view
/// of the names in a list document. Panics, failing the test, where `list` is not an array
/// or an object lacks a string `key`.
#[cfg(test)]
pub(crate) fn strings<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    let items = list.as_array().expect("a JSON array");
    items
        .iter()
        .map(|item| item[key].as_str().expect(key))
        .collect()
}

/// Sends `req` through a clone of `service` and reads the answer: its status and its body
/// as text.
#[cfg(test)]
pub(crate) async fn answer<S>(
    service: &S,
    req: http::Request<crate::body::Body>,
) -> (http::StatusCode, String)
where
    S: tower::Service<
            http::Request<crate::body::Body>,
            Response = http::Response<crate::body::Body>,
            Error = std::convert::Infallible,
        > + Clone,
{
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let res = service.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}
