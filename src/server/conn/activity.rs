//! What keeps a connection open and what closes it: the bytes it moves, the requests in
//! flight on it, and the idle, header-read and keep-alive deadlines that end it, as Go's
//! `net/http` server measures them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use std::time::{Duration, Instant};

use crate::server::ServeConfig;
use crate::transport::OnRead;

/// Which timeout a deadline belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expiry {
    /// A request header (or the first request) did not arrive in time: close at once.
    Header,
    /// Nothing in flight for the idle timeout: finish gracefully.
    Idle,
    /// A graceful close took too long: drop the connection.
    Grace,
}

/// What the timeouts of one connection depend on. Times are nanoseconds since `base`
/// plus one, so that 0 means "not set".
#[derive(Debug)]
pub(super) struct Activity {
    /// The connection's start; every stamp below counts from it.
    base: Instant,
    /// HTTP/1.1 has a header timeout per request; HTTP/2 only the first one.
    http1: bool,
    /// Requests whose response (body included) is not finished.
    in_flight: AtomicUsize,
    /// Requests served so far: none means the first request's header timeout runs.
    requests: AtomicU64,
    /// When the last in-flight request finished: the start of the idle timeout.
    idle_since: AtomicU64,
    /// When the first byte of the next HTTP/1.1 request arrived: the start of its
    /// header timeout.
    reading_since: AtomicU64,
    /// A handler asked to close the connection ([`CloseConnection`]).
    pub(super) close_requested: AtomicBool,
    /// Wakes the connection's task when a close is requested (deadlines do not: the
    /// connection's timer looks them up when it fires).
    pub(super) changed: tokio::sync::Notify,
}

impl Activity {
    pub(super) fn new(http1: bool) -> Activity {
        Activity {
            base: Instant::now(),
            http1,
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            reading_since: AtomicU64::new(0),
            close_requested: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// Now as a stamp: never 0, which means "not set".
    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// The instant a stamp stands for.
    fn at(&self, stamp: u64) -> Instant {
        self.base + Duration::from_nanos(stamp.saturating_sub(1))
    }
}

/// The accepted stream tells [`Activity`] when bytes arrive.
impl OnRead for Activity {
    /// Bytes arrived. On an idle HTTP/1.1 connection the first of them starts the header
    /// timeout of the next request.
    fn on_read(&self) {
        if self.http1
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.reading_since.load(Ordering::Acquire) == 0
        {
            self.reading_since.store(self.now(), Ordering::Release);
        }
    }
}

impl Activity {
    /// A request's head was parsed: its header timeout is over and no idle timeout runs
    /// until every request in flight has finished.
    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.requests.fetch_add(1, Ordering::AcqRel);
        self.reading_since.store(0, Ordering::Release);
    }

    /// A response finished (or was abandoned); the last one starts the idle timeout.
    fn request_finished(&self) {
        // Stamped before the count drops, so that a deadline read in between (from
        // another worker) never sees no request in flight with an older idle start.
        self.idle_since.store(self.now(), Ordering::Release);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Close after the requests in flight, as Go does for `Connection: close`.
    pub(super) fn request_close(&self) {
        self.close_requested.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// When the connection times out if nothing changes; `None` while a request is in
    /// flight (its duration is the request timeout's business, not the connection's).
    pub(super) fn deadline(&self, config: &ServeConfig) -> Option<(Instant, Expiry)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if self.requests.load(Ordering::Acquire) == 0 {
            return Some((self.base + config.read_header_timeout, Expiry::Header));
        }
        let reading = self.reading_since.load(Ordering::Acquire);
        if self.http1 && reading != 0 {
            return Some((
                self.at(reading) + config.read_header_timeout,
                Expiry::Header,
            ));
        }
        let idle = self.idle_since.load(Ordering::Acquire);
        Some((self.at(idle) + config.idle_timeout, Expiry::Idle))
    }
}

/// Counts one request in flight until dropped (with the response body, or with the
/// response future when the client went away first).
#[derive(Debug)]
pub(super) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(super) fn new(activity: Arc<Activity>) -> InFlight {
        activity.request_started();
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}
