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
mod stats;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::uri::Authority;
use http::{Request, Response};
use hyper::client::conn::http1;
use tower::Service;

use super::{ClientCertificate, ConnectError};
use crate::body::{Body, BoxError};
use crate::rt::{Executor, Timer};

pub(crate) use connect::{Connector, Gathered};
pub(crate) use h1::origin_form;
use retry::{AttemptError, Retry, replay_copy};
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
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { inner.send(req).await })
    }
}

impl PoolInner {
    async fn send(self: Arc<Self>, req: Request<Body>) -> Result<Response<Body>, BoxError> {
        let authority =
            req.uri().authority().cloned().ok_or_else(|| {
                BoxError::from(format!("backend URI {} has no address", req.uri()))
            })?;
        let replay = replay_copy(&req);
        match self.attempt(&authority, req, false).await {
            Ok(res) => Ok(res),
            Err(AttemptError { error, retry }) if retry != Retry::No && replay.is_some() => {
                tracing::debug!(%authority, %error, "backend never processed the request; sending it again");
                let req = replay.map(|r| r.map(|()| Body::empty()));
                match req {
                    // Boxed: the retry's state stays out of every request's future.
                    Some(req) => Box::pin(self.attempt(&authority, req, retry == Retry::Fresh))
                        .await
                        .map_err(|e| e.error),
                    None => Err(error),
                }
            }
            Err(e) => Err(e.error),
        }
    }

    /// Picks (or dials) a connection for a request to `authority`; `fresh` dials a new one
    /// (a retry after its connection went away, allowed past the connection limit).
    /// `waited` is when this request last began to wait for a dial: one that failed since
    /// then (with the current client certificate, no other dial under way, and no
    /// connection to queue on at the limit) fails the request rather than being tried
    /// again.
    fn pick(&self, authority: &Authority, fresh: bool, waited: Option<Waited>) -> Pick {
        let generation = self.client_cert.generation();
        let now = self.timer.now();
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(HostKey::of(authority)).or_default();
        // Closed, draining after a GOAWAY, or made with an older client certificate:
        // not for new requests (those in flight finish).
        host.http2.retain(|c| {
            !c.watch.closed.load(Ordering::Acquire)
                && !c.draining.load(Ordering::Acquire)
                && c.cert_generation == generation
        });
        if fresh {
            host.dialing += usize::from(!host.http1_only);
            return Pick::Dial(!host.http1_only);
        }
        if host.http1_only {
            while let Some(idle) = host.http1_idle.pop() {
                let stale = idle.cert_generation != generation
                    || now.saturating_duration_since(idle.since) > self.config.idle_timeout;
                // Returned when its last response ended; hyper may not have marked it
                // ready yet, which `send_h1` waits for.
                if !stale && !idle.send.is_closed() {
                    return Pick::Http1(idle.send);
                }
            }
            return Pick::Dial(false);
        }
        // The first connection with a free stream, oldest first, as Go's transport picks:
        // requests gather on as few connections as the backend's limit allows, rather than
        // each of several connections carrying a request or two at a time.
        let free = host
            .http2
            .iter()
            .find(|c| c.in_flight.load(Ordering::Acquire) < c.watch.max_streams());
        if let Some(conn) = free {
            conn.in_flight.fetch_add(1, Ordering::AcqRel);
            return Pick::Http2(conn.clone());
        }
        let max_connections = self.config.max_http2_connections.max(1);
        // A dial failed while this request waited: so does the request, unless another
        // dial is under way (it waits for that one), the client certificate changed since
        // (it dials with the new one), or the limit is reached and a connection can queue
        // it.
        let can_queue =
            !host.http2.is_empty() && host.http2.len() + host.dialing >= max_connections;
        if let (Some(waited), Some((at, failure))) = (waited, &host.failed_dial) {
            if *at > waited.since
                && failure.generation == generation
                && host.dialing == 0
                && !can_queue
            {
                return Pick::Failed(failure.error());
            }
        }
        // Every connection is full (or there is none). A dial under way will carry about
        // as many streams as this backend's connections allow (the last limit they showed;
        // h2's assumption of 100 before any), one of them its dialler's: requests up to
        // that number wait for it rather than each dialling its own, as Go's transport and
        // hyper-util's pool share one dial. Several connections opened by one burst at
        // start would otherwise each carry a request or two, and the backend would read
        // them one by one. A request whose last wait timed out dials.
        if let Some(limit) = host.http2.iter().map(|c| c.watch.max_streams()).min() {
            host.streams_hint = Some(limit);
        }
        if host.dialing > 0 && !waited.is_some_and(|w| w.timed_out) {
            let per_connection = host.streams_hint.unwrap_or(h2::INITIAL_MAX_SEND_STREAMS);
            let room = host
                .dialing
                .saturating_mul(per_connection.saturating_sub(1));
            if host.waiting < room {
                host.waiting += 1;
                return Pick::Wait(host.dials_ended, host.dialed.clone());
            }
        }
        if host.http2.len() + host.dialing < max_connections {
            host.dialing += 1;
            return Pick::Dial(true);
        }
        let least_loaded = host
            .http2
            .iter()
            .min_by_key(|c| c.in_flight.load(Ordering::Acquire))
            .cloned();
        match least_loaded {
            Some(conn) => {
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                Pick::Http2(conn)
            }
            None => {
                host.waiting += 1;
                Pick::Wait(host.dials_ended, host.dialed.clone())
            }
        }
    }

    async fn attempt(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
        fresh: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let mut waited = None;
        let pick = loop {
            match self.pick(authority, fresh, waited) {
                Pick::Wait(seen, dialed) => {
                    // Uncounted when this wait ends, however it ends.
                    let _waiting = Waiting {
                        pool: self,
                        authority,
                    };
                    let notified = dialed.notified();
                    let mut notified = std::pin::pin!(notified);
                    notified.as_mut().enable();
                    // A dial that ended since the pick has already signalled.
                    let ended = lock(&self.hosts)
                        .get(&HostKey::of(authority))
                        .is_none_or(|h| h.dials_ended != seen);
                    // A dial ends within the connect and handshake timeouts (twice the
                    // handshake's for HTTP/2: its SETTINGS frame is waited for too), or
                    // when the request dialling gives up; a second more for the margin.
                    let mut timed_out = false;
                    if !ended {
                        let wait = self
                            .config
                            .connect_timeout
                            .saturating_add(self.config.tls_handshake_timeout.saturating_mul(2))
                            .saturating_add(Duration::from_secs(1));
                        timed_out = Box::pin(self.timer.timeout(wait, notified)).await.is_err();
                    }
                    waited = Some(Waited {
                        since: seen,
                        timed_out,
                    });
                }
                Pick::Failed(error) => {
                    return Err(AttemptError {
                        error,
                        retry: Retry::No,
                    });
                }
                pick => break pick,
            }
        };
        match pick {
            Pick::Wait(..) | Pick::Failed(_) => {
                unreachable!("the loop above never ends with Wait or Failed")
            }
            Pick::Http2(conn) => self.send_h2(conn, req).await,
            Pick::Http1(send) => self.send_h1(authority, send, req, true).await,
            // Boxed: dialling (TCP, TLS, the HTTP/2 handshake) is rare, and its futures are
            // large; inline, every request's future would carry (and copy) their space.
            Pick::Dial(counted) => Box::pin(self.dial_and_send(authority, req, counted)).await,
        }
    }

    async fn dial_and_send(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
        counted: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let mut dialling = Dialling {
            pool: self,
            authority,
            counted,
            ended: false,
        };
        let generation = self.client_cert.generation();
        let (io, h2) = match self.connector.connect(authority).await {
            Ok(dialed) => dialed,
            Err(e) => {
                let io_kind = crate::transport::error_sources(&e)
                    .find_map(|e| e.downcast_ref::<std::io::Error>())
                    .map(std::io::Error::kind);
                dialling.end(DialEnd::Failed(DialFailure {
                    message: e.to_string().into(),
                    connect: true,
                    generation,
                    io_kind,
                }));
                return Err(AttemptError {
                    error: Box::new(e),
                    retry: Retry::No,
                });
            }
        };
        if !h2 {
            dialling.end(DialEnd::Http1);
            let send = self.handshake_h1(io).await?;
            return self.send_h1(authority, send, req, false).await;
        }
        match self.handshake_h2(io, generation).await {
            Ok(conn) => {
                // The dialler's stream opens at once, so it is the connection's first: a
                // backend that sends GOAWAY after a few streams (and refuses those above
                // them) cannot refuse the request this dial was for, which may already be
                // a retry. The waiters are let on once the backend's SETTINGS have told
                // its stream limit; a connection that ended meanwhile is left out by their
                // pick, and the dialler's stream reports how it ended.
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                let opened = self.open_h2(conn.clone(), req).await;
                self.settings_seen(&conn).await;
                dialling.end(DialEnd::Http2(conn));
                opened?.answer().await
            }
            Err(e) => {
                // The dialler and its waiters get the same words.
                let failure = DialFailure {
                    message: format!("HTTP/2 handshake with {authority} failed: {}", e.error)
                        .into(),
                    connect: false,
                    generation,
                    io_kind: None,
                };
                let error = failure.error();
                dialling.end(DialEnd::Failed(failure));
                Err(AttemptError {
                    error,
                    retry: Retry::No,
                })
            }
        }
    }
}
