//! The tower service of a connection as hyper's service: [`ReadyService`].
//!
//! hyper calls its service by shared reference, a tower service needs `&mut self` and a
//! `poll_ready` before each call. hyper-util's `TowerToHyperService` meets that by cloning
//! the whole stack for every request and driving the clone with `Oneshot`. An HTTP/1.1
//! connection serves one request at a time from its own task, so there this keeps the
//! stack in a `RefCell` and calls it in place when it is ready at once (every layer of
//! this crate is); a service that is not ready yet is cloned and waited for, as before.
//! HTTP/2 streams keep the clone on a runtime with several workers: each stream is a task
//! of its own, and the stack's work for a request (authentication, authorization, routing)
//! runs in that task, on any worker, not in the one task of the connection that every
//! stream shares. On a runtime with one worker, which runs every task, HTTP/2 streams are
//! called in place as well (`conn.rs` chooses).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use pin_project_lite::pin_project;
use tower::Service;
use tower::util::Oneshot;

/// A tower service called by hyper (see the module docs).
pub(super) struct ReadyService<S> {
    inner: RefCell<S>,
    /// Every request gets a clone, called from its own future (HTTP/2).
    per_stream: bool,
}

impl<S> ReadyService<S> {
    /// For a connection whose requests are called from its own task (HTTP/1.1, and
    /// HTTP/2 on a runtime with one worker): the stack is called in place when it is ready.
    pub(super) fn in_place(inner: S) -> ReadyService<S> {
        ReadyService {
            inner: RefCell::new(inner),
            per_stream: false,
        }
    }

    /// For a connection whose requests run as tasks of their own (HTTP/2 streams): each is
    /// served by a clone of the stack, made ready and called when its future is polled.
    pub(super) fn per_stream(inner: S) -> ReadyService<S> {
        ReadyService {
            inner: RefCell::new(inner),
            per_stream: true,
        }
    }
}

impl<S, R> hyper::service::Service<R> for ReadyService<S>
where
    S: Service<R> + Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ReadyFuture<S, R>;

    fn call(&self, req: R) -> Self::Future {
        // Borrowed only here: hyper calls a connection's service from the connection's
        // task, one call at a time, and the stack cannot reach back into this wrapper.
        let mut inner = self.inner.borrow_mut();
        if self.per_stream {
            return ReadyFuture::Waiting {
                oneshot: Oneshot::new(inner.clone(), req),
            };
        }
        // Readiness asked with a waker that does nothing: when the answer is "not yet",
        // the clone below asks again with the connection's waker.
        match inner.poll_ready(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(())) => ReadyFuture::Called {
                future: inner.call(req),
            },
            Poll::Ready(Err(e)) => ReadyFuture::Failed { error: Some(e) },
            Poll::Pending => ReadyFuture::Waiting {
                oneshot: Oneshot::new(inner.clone(), req),
            },
        }
    }
}

pin_project! {
    /// The response future of [`ReadyService`].
    #[project = Projected]
    pub(super) enum ReadyFuture<S: Service<R>, R> {
        /// The service was ready and called.
        Called { #[pin] future: S::Future },
        /// A clone of the service, waited for and then called.
        Waiting { #[pin] oneshot: Oneshot<S, R> },
        /// The service failed when asked whether it is ready.
        Failed { error: Option<S::Error> },
    }
}

impl<S: Service<R>, R> Future for ReadyFuture<S, R> {
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            Projected::Called { future } => future.poll(cx),
            Projected::Waiting { oneshot } => oneshot.poll(cx),
            Projected::Failed { error } => match error.take() {
                Some(e) => Poll::Ready(Err(e)),
                None => panic!("ReadyFuture polled after it completed"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::service::Service as _;

    use super::*;

    /// Ready every other time it is asked; counts the questions and the calls.
    #[derive(Clone)]
    struct Flaky {
        asked: Arc<AtomicUsize>,
        called: Arc<AtomicUsize>,
    }

    impl Service<u32> for Flaky {
        type Response = u32;
        type Error = &'static str;
        type Future = std::future::Ready<Result<u32, &'static str>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            if self.asked.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
                Poll::Ready(Ok(()))
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }

        fn call(&mut self, req: u32) -> Self::Future {
            self.called.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if req == 0 { Err("zero") } else { Ok(req * 2) })
        }
    }

    impl Flaky {
        fn new() -> Flaky {
            Flaky {
                asked: Arc::default(),
                called: Arc::default(),
            }
        }
    }

    #[tokio::test]
    async fn a_ready_service_is_called_in_place_and_a_pending_one_through_a_clone() {
        let flaky = Flaky::new();
        let (asked, called) = (flaky.asked.clone(), flaky.called.clone());
        let service = ReadyService::in_place(flaky);
        // Ready at once: called in place.
        let first = service.call(21);
        assert!(matches!(first, ReadyFuture::Called { .. }));
        assert_eq!(first.await, Ok(42));
        // Not ready: a clone waits (and is asked again with a real waker), then answers.
        let second = service.call(5);
        assert!(matches!(second, ReadyFuture::Waiting { .. }));
        assert_eq!(second.await, Ok(10));
        assert_eq!(called.load(Ordering::SeqCst), 2);
        assert_eq!(
            asked.load(Ordering::SeqCst),
            3,
            "asked twice for the second call"
        );
        // Errors of the call pass through.
        assert_eq!(service.call(0).await, Err("zero"));
    }

    /// A service whose readiness fails gives that error for the request.
    #[tokio::test]
    async fn a_readiness_error_is_the_answer() {
        #[derive(Clone)]
        struct Broken;
        impl Service<u32> for Broken {
            type Response = u32;
            type Error = &'static str;
            type Future = std::future::Ready<Result<u32, &'static str>>;
            fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                Poll::Ready(Err("broken"))
            }
            fn call(&mut self, _: u32) -> Self::Future {
                unreachable!("never called after failing readiness")
            }
        }
        assert_eq!(ReadyService::in_place(Broken).call(1).await, Err("broken"));
        assert_eq!(
            ReadyService::per_stream(Broken).call(1).await,
            Err("broken")
        );
    }

    /// Per stream, nothing is called until the request's own future runs.
    #[tokio::test]
    async fn per_stream_calls_a_clone_from_the_request_future() {
        let flaky = Flaky::new();
        let called = flaky.called.clone();
        let service = ReadyService::per_stream(flaky);
        let pending = [service.call(1), service.call(2)];
        assert!(
            pending
                .iter()
                .all(|f| matches!(f, ReadyFuture::Waiting { .. }))
        );
        assert_eq!(called.load(Ordering::SeqCst), 0, "not called before polled");
        let [a, b] = pending;
        assert_eq!((b.await, a.await), (Ok(4), Ok(2)));
        assert_eq!(called.load(Ordering::SeqCst), 2);
    }
}
