//! The connections of one APIService's client: HTTP/2 connections held as h2
//! `SendRequest` handles, several per backend address once the backend's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` is reached, kept alive and checked with PINGs; or,
//! for backends without h2, a pool of idle HTTP/1.1 keep-alive connections.
//!
//! This replaces a generic pool lookup per request (hyper-util's legacy client) for the
//! failure modes kube-aggregator users meet (docs/known-failures.md B21, B22, B23, B27):
//!
//! - a connection whose backend stopped answering is found dead by an unanswered PING
//!   within [`PoolConfig::keep_alive_interval`] + [`PoolConfig::keep_alive_timeout`] and
//!   replaced, instead of being used for ~45 s;
//! - a request the backend provably never processed (refused with `REFUSED_STREAM`, above
//!   the last stream id of a GOAWAY, or sent on a reused HTTP/1.1 connection the backend
//!   had closed) is sent once more, on another connection, when it can be replayed: an
//!   idempotent method (GET, HEAD, OPTIONS) or a body not yet started, as Go's transport
//!   retries;
//! - more than one connection per backend when streams run out, and only then: a
//!   request takes the first connection with a free stream, as Go's transport does, and
//!   requests that arrive while a connection is being dialled wait for it (as many as it
//!   will carry) rather than each dialling its own, and share its error if it fails, as
//!   Go's transport shares a dial;
//! - after the proxy client certificate changes, new requests go to connections that
//!   present the new one, and the old connections drain.

mod body;
mod connect;
mod h1;
mod h2;
mod retry;
mod send;
mod stats;

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::Request;
use http::uri::Authority;
use hyper::client::conn::http1;
use tower::Service;

use super::{ClientCertificate, ConnectError};
use crate::body::{Body, BoxError};
use crate::rt::{Executor, Timer};

pub(crate) use connect::{Connector, Gathered, OnRead};
pub(crate) use h1::origin_form;
pub(crate) use stats::{PoolStats, WeakPool};

/// How the connections to one APIService's backends are managed. Defaults follow
/// client-go's transport where it has a setting (30 s dial, 10 s TLS handshake, 25 idle
/// HTTP/1.1 connections, 90 s idle) and detect a dead HTTP/2 connection within 10 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// TCP connect timeout. Default 30 s.
    pub connect_timeout: Duration,
    /// TLS handshake timeout; also how long a new HTTP/2 connection waits for the
    /// backend's SETTINGS frame before the requests waiting for it are let on. Default
    /// 10 s.
    pub tls_handshake_timeout: Duration,
    /// HTTP/2 connections per backend address, opened as the backend's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` fills up: a request takes the first connection
    /// with a free stream, and while a dial is under way, as many requests as it is
    /// expected to carry (the backend's last known limit, 100 before it is known) wait
    /// for it. Past this number, requests share the least loaded connection (h2 queues
    /// them for a stream). Default 8.
    pub max_http2_connections: usize,
    /// A PING is sent on an HTTP/2 connection that has received nothing for this long,
    /// busy or idle. Default 5 s.
    pub keep_alive_interval: Duration,
    /// An HTTP/2 connection whose PING is not answered within this is closed, and its
    /// requests fail at once. Default 5 s.
    pub keep_alive_timeout: Duration,
    /// Idle HTTP/1.1 connections kept per backend address. Default 25.
    pub max_idle_http1: usize,
    /// An idle HTTP/1.1 connection older than this is closed. Default 90 s.
    pub idle_timeout: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            connect_timeout: Duration::from_secs(30),
            tls_handshake_timeout: Duration::from_secs(10),
            max_http2_connections: 8,
            keep_alive_interval: Duration::from_secs(5),
            keep_alive_timeout: Duration::from_secs(5),
            max_idle_http1: 25,
            idle_timeout: Duration::from_secs(90),
        }
    }
}

/// One APIService's connections, by backend address.
#[derive(Clone)]
pub(crate) struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    connector: Connector,
    config: PoolConfig,
    executor: Executor,
    timer: Timer,
    client_cert: ClientCertificate,
    hosts: Mutex<HashMap<HostKey, Host>>,
}

/// A backend address as the pool's key. `Authority` compares case-insensitively and
/// hashes byte by byte; this hashes the whole string at once (lower-cased first only
/// when it has upper-case letters, so that equal keys still hash alike), which matters
/// because every request looks its backend up.
#[derive(Clone, PartialEq, Eq)]
struct HostKey(Authority);

impl HostKey {
    fn of(authority: &Authority) -> HostKey {
        HostKey(authority.clone())
    }
}

impl std::hash::Hash for HostKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let s = self.0.as_str();
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            state.write(s.to_ascii_lowercase().as_bytes());
        } else {
            state.write(s.as_bytes());
        }
    }
}

#[derive(Default)]
struct Host {
    http2: Vec<Arc<H2Conn>>,
    /// Connections being dialled that may turn out to be HTTP/2.
    dialing: usize,
    /// The backend chose HTTP/1.1 by ALPN.
    http1_only: bool,
    http1_idle: Vec<Idle>,
    /// Signalled when a dial ends; `dials_ended` counts them.
    dialed: Arc<tokio::sync::Notify>,
    dials_ended: u64,
    /// Requests waiting for a dial to end ([`Pick::Wait`]), counted until they pick again.
    waiting: usize,
    /// The last dial that failed: `dials_ended` once it had ended, and what failed.
    failed_dial: Option<(u64, DialFailure)>,
    /// The stream limit this backend's connections last showed, for dials under way when
    /// no connection is left to ask (after a certificate rotation, say).
    streams_hint: Option<usize>,
}

/// Why a dial failed, kept for the requests that waited for it.
#[derive(Clone)]
struct DialFailure {
    message: Arc<str>,
    /// Connecting failed (TCP or TLS): the waiters get a [`ConnectError`] as the dialler
    /// did, which flips the APIService's availability.
    connect: bool,
    /// The proxy client certificate's generation the dial presented.
    generation: u64,
    /// The kind of the I/O error under the failure, if any (a refused connection, a
    /// timeout), so that the waiters' errors tell it as the dialler's does.
    io_kind: Option<std::io::ErrorKind>,
}

impl DialFailure {
    fn error(&self) -> BoxError {
        if self.connect {
            let source = self
                .io_kind
                .map(|kind| Box::new(std::io::Error::from(kind)) as BoxError);
            Box::new(ConnectError::new(self.message.to_string(), source))
        } else {
            BoxError::from(self.message.to_string())
        }
    }
}

struct H2Conn {
    send: ::h2::client::SendRequest<bytes::Bytes>,
    in_flight: AtomicUsize,
    /// The stream limit and whether the connection task has ended.
    watch: Arc<h2::ConnWatch>,
    /// The proxy client certificate's generation at dial time.
    cert_generation: u64,
    /// The backend sent GOAWAY: no new streams here.
    draining: std::sync::atomic::AtomicBool,
}

struct Idle {
    send: http1::SendRequest<Body>,
    since: Instant,
    cert_generation: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A request counted in its host's [`Host::waiting`]; uncounted on drop.
struct Waiting<'a> {
    pool: &'a PoolInner,
    authority: &'a Authority,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(host) = lock(&self.pool.hosts).get_mut(&HostKey::of(self.authority)) {
            host.waiting = host.waiting.saturating_sub(1);
        }
    }
}

/// A dial under way. Its end is accounted once: by [`Dialling::end`], or on drop (the
/// request gave up mid-dial) as a dial that ended with neither a connection nor an error,
/// so that the requests waiting for it pick again instead of waiting on a dial that will
/// never end.
struct Dialling<'a> {
    pool: &'a PoolInner,
    authority: &'a Authority,
    /// Counted in [`Host::dialing`] (every dial but those to an HTTP/1.1-only host).
    counted: bool,
    ended: bool,
}

/// How a dial ended.
enum DialEnd {
    /// ALPN chose HTTP/1.1.
    Http1,
    /// An HTTP/2 connection, the dialler's stream on it already counted.
    Http2(Arc<H2Conn>),
    Failed(DialFailure),
    Abandoned,
}

impl Dialling<'_> {
    fn end(&mut self, end: DialEnd) {
        self.ended = true;
        let mut hosts = lock(&self.pool.hosts);
        let host = hosts.entry(HostKey::of(self.authority)).or_default();
        if self.counted {
            host.dialing = host.dialing.saturating_sub(1);
        }
        host.dials_ended += 1;
        match end {
            DialEnd::Http1 => host.http1_only = true,
            DialEnd::Http2(conn) => host.http2.push(conn),
            DialEnd::Failed(failure) => host.failed_dial = Some((host.dials_ended, failure)),
            DialEnd::Abandoned => {}
        }
        host.dialed.notify_waiters();
    }
}

impl Drop for Dialling<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.end(DialEnd::Abandoned);
        }
    }
}

/// When a request began to wait for a dial ([`Pick::Wait`]), for its next pick.
#[derive(Clone, Copy)]
struct Waited {
    /// The host's count of ended dials then.
    since: u64,
    /// No dial ended within the wait's bound.
    timed_out: bool,
}

/// What to send a request on.
enum Pick {
    Http2(Arc<H2Conn>),
    Http1(http1::SendRequest<Body>),
    /// Dial a new connection; `true` when counted in [`Host::dialing`].
    Dial(bool),
    /// A dial under way is expected to have a stream for this request, or every allowed
    /// connection is still being dialled: wait for a dial to end (the host's count of
    /// ended dials when this was decided, and its signal). Counted in [`Host::waiting`].
    Wait(u64, Arc<tokio::sync::Notify>),
    /// A dial failed while this request waited, no other dial is under way, and no
    /// connection can take it: the dial's error, as Go's transport gives every caller of
    /// a shared dial the dial's error.
    Failed(BoxError),
}

impl Pool {
    pub(crate) fn new(
        connector: Connector,
        config: PoolConfig,
        executor: Executor,
        timer: Timer,
        client_cert: ClientCertificate,
    ) -> Pool {
        Pool {
            inner: Arc::new(PoolInner {
                connector,
                config,
                executor,
                timer,
                client_cert,
                hosts: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl Service<Request<Body>> for Pool {
    crate::body::answers_boxed!(BoxError);

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(req).await })
    }
}
