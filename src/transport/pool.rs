//! The connections of one APIService's client: HTTP/2 connections held as hyper
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
//! - more than one connection per backend when streams run out;
//! - after the proxy client certificate changes, new requests go to connections that
//!   present the new one, and the old connections drain.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::Authority;
use http::{Method, Request, Response, Uri};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tower::Service;

use super::{ClientCertificate, ConnectError};
use crate::body::{Body, BoxError};
use crate::rt::{Executor, Timer};

type Io = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

/// How the connections to one APIService's backends are managed. Defaults follow
/// client-go's transport where it has a setting (30 s dial, 10 s TLS handshake, 25 idle
/// HTTP/1.1 connections, 90 s idle) and detect a dead HTTP/2 connection within 10 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// TCP connect timeout. Default 30 s.
    pub connect_timeout: Duration,
    /// TLS handshake timeout. Default 10 s.
    pub tls_handshake_timeout: Duration,
    /// HTTP/2 connections per backend address, opened as the backend's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` fills up. Past it, requests share the least
    /// loaded connection (h2 queues them for a stream). Default 8.
    pub max_http2_connections: usize,
    /// A PING is sent on an HTTP/2 connection that has received nothing for this long.
    /// Default 5 s.
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

/// Dials a backend: TCP, then TLS with the APIService's server name and ALPN.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) tcp: HttpConnector,
    pub(crate) tls: tokio_rustls::TlsConnector,
    pub(crate) server_name: ServerName<'static>,
    pub(crate) tls_handshake_timeout: Duration,
}

impl Connector {
    /// TCP then TLS to `authority`; whether ALPN chose h2.
    pub(crate) async fn connect(&self, authority: &Authority) -> Result<(Io, bool), ConnectError> {
        let uri = Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .map_err(|e| {
                ConnectError::new(format!("invalid backend address {authority}: {e}"), None)
            })?;
        let tcp = self
            .tcp
            .clone()
            .call(uri)
            .await
            .map_err(|e| {
                let text = crate::status::error_chain(&e);
                ConnectError::new(format!("dial tcp {authority}: {text}"), Some(Box::new(e)))
            })?
            .into_inner();
        let handshake = self.tls.connect(self.server_name.clone(), tcp);
        let tls = match tokio::time::timeout(self.tls_handshake_timeout, handshake).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                return Err(ConnectError::new(format!("tls: {e}"), Some(Box::new(e))));
            }
            Err(_) => {
                return Err(ConnectError::new("net/http: TLS handshake timeout", None));
            }
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok((TokioIo::new(tls), h2))
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
    hosts: Mutex<HashMap<Authority, Host>>,
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
}

struct H2Conn {
    send: http2::SendRequest<Body>,
    in_flight: AtomicUsize,
    /// The backend's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the connection task last saw it.
    max_streams: Arc<AtomicUsize>,
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

/// What to send a request on.
enum Pick {
    Http2(Arc<H2Conn>),
    Http1(http1::SendRequest<Body>),
    Dial,
    /// Every allowed connection is still being dialled: wait for one (the host's dial
    /// count when this was decided, and its signal).
    Wait(u64, Arc<tokio::sync::Notify>),
}

/// Why one attempt failed, and whether (and where) it may be sent again.
struct AttemptError {
    error: BoxError,
    retry: Retry,
}

/// Whether a failed attempt proves the backend never processed the request, and so where
/// a replayable request goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// It may have been processed: never sent again.
    No,
    /// Refused for a stream slot (`REFUSED_STREAM`): any connection with room.
    Elsewhere,
    /// Its connection went away under it (GOAWAY, closed): a new connection.
    Fresh,
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

/// The request again, for a second attempt: only for requests that may be replayed.
fn replay_copy(req: &Request<Body>) -> Option<Request<()>> {
    use http_body::Body as _;
    let idempotent = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !(idempotent && req.body().is_end_stream()) {
        return None;
    }
    let mut copy = Request::new(());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    Some(copy)
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
    fn pick(&self, authority: &Authority, fresh: bool) -> Pick {
        let generation = self.client_cert.generation();
        let now = self.timer.now();
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(authority.clone()).or_default();
        // Closed, draining after a GOAWAY, or made with an older client certificate:
        // not for new requests (those in flight finish).
        host.http2.retain(|c| {
            !c.send.is_closed()
                && !c.draining.load(Ordering::Acquire)
                && c.cert_generation == generation
        });
        if fresh {
            host.dialing += usize::from(!host.http1_only);
            return Pick::Dial;
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
            return Pick::Dial;
        }
        let best = host
            .http2
            .iter()
            .min_by_key(|c| c.in_flight.load(Ordering::Acquire))
            .cloned();
        if let Some(conn) = &best {
            if conn.in_flight.load(Ordering::Acquire) < conn.max_streams.load(Ordering::Acquire) {
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                return Pick::Http2(conn.clone());
            }
        }
        if host.http2.len() + host.dialing < self.config.max_http2_connections.max(1) {
            host.dialing += 1;
            return Pick::Dial;
        }
        match best {
            Some(conn) => {
                conn.in_flight.fetch_add(1, Ordering::AcqRel);
                Pick::Http2(conn)
            }
            None => Pick::Wait(host.dials_ended, host.dialed.clone()),
        }
    }

    async fn attempt(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
        fresh: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let pick = loop {
            match self.pick(authority, fresh) {
                Pick::Wait(seen, dialed) => {
                    let notified = dialed.notified();
                    let mut notified = std::pin::pin!(notified);
                    notified.as_mut().enable();
                    // A dial that ended since the pick has already signalled.
                    let ended = lock(&self.hosts)
                        .get(authority)
                        .is_none_or(|h| h.dials_ended != seen);
                    if !ended {
                        // A dial ends within the connect and handshake timeouts.
                        let wait = self.config.connect_timeout + self.config.tls_handshake_timeout;
                        let _ = Box::pin(tokio::time::timeout(wait, notified)).await;
                    }
                }
                pick => break pick,
            }
        };
        match pick {
            Pick::Wait(..) => unreachable!("the loop above never ends with Wait"),
            Pick::Http2(conn) => self.send_h2(conn, req).await,
            Pick::Http1(send) => self.send_h1(authority, send, req, true).await,
            // Boxed: dialling (TCP, TLS, the HTTP/2 handshake) is rare, and its futures are
            // large; inline, every request's future would carry (and copy) their space.
            Pick::Dial => Box::pin(self.dial_and_send(authority, req)).await,
        }
    }

    async fn dial_and_send(
        self: &Arc<Self>,
        authority: &Authority,
        req: Request<Body>,
    ) -> Result<Response<Body>, AttemptError> {
        let generation = self.client_cert.generation();
        let dialed = self.connector.connect(authority).await;
        self.dialed(authority, dialed.as_ref().ok().map(|(_, h2)| *h2));
        let (io, h2) = dialed.map_err(|e| AttemptError {
            error: Box::new(e),
            retry: Retry::No,
        })?;
        if h2 {
            let handshake = self.handshake_h2(io, generation).await;
            let conn = {
                let mut hosts = lock(&self.hosts);
                let host = hosts.entry(authority.clone()).or_default();
                host.dialing = host.dialing.saturating_sub(1);
                host.dials_ended += 1;
                host.dialed.notify_waiters();
                if let Ok(conn) = &handshake {
                    conn.in_flight.fetch_add(1, Ordering::AcqRel);
                    host.http2.push(conn.clone());
                }
                handshake
            }?;
            self.send_h2(conn, req).await
        } else {
            let send = self.handshake_h1(io).await?;
            self.send_h1(authority, send, req, false).await
        }
    }

    /// A dial to `authority` connected (`Some(h2)`, with ALPN's choice) or failed. An h2
    /// connection stays counted as dialling until its HTTP/2 handshake ends.
    fn dialed(&self, authority: &Authority, h2: Option<bool>) {
        if h2 == Some(true) {
            return;
        }
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(authority.clone()).or_default();
        host.dialing = host.dialing.saturating_sub(1);
        host.http1_only |= h2 == Some(false);
        host.dials_ended += 1;
        host.dialed.notify_waiters();
    }

    async fn handshake_h2(&self, io: Io, generation: u64) -> Result<Arc<H2Conn>, AttemptError> {
        let mut builder = http2::Builder::new(self.executor.clone());
        builder
            .timer(self.timer.clone())
            .keep_alive_interval(self.config.keep_alive_interval)
            .keep_alive_timeout(self.config.keep_alive_timeout)
            .keep_alive_while_idle(true);
        let (send, conn) = builder.handshake(io).await.map_err(|e| AttemptError {
            error: Box::new(e),
            retry: Retry::No,
        })?;
        let max_streams = Arc::new(AtomicUsize::new(conn.current_max_send_streams()));
        self.executor.spawn(WatchedH2 {
            conn,
            max_streams: max_streams.clone(),
        });
        Ok(Arc::new(H2Conn {
            send,
            in_flight: AtomicUsize::new(0),
            max_streams,
            cert_generation: generation,
            draining: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    async fn handshake_h1(&self, io: Io) -> Result<http1::SendRequest<Body>, AttemptError> {
        let (send, conn) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(|e| AttemptError {
                error: Box::new(e),
                retry: Retry::No,
            })?;
        self.executor.spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "backend HTTP/1.1 connection ended with an error");
            }
        });
        Ok(send)
    }

    async fn send_h2(
        &self,
        conn: Arc<H2Conn>,
        req: Request<Body>,
    ) -> Result<Response<Body>, AttemptError> {
        let mut send = conn.send.clone();
        let release = Release::Http2 {
            _slot: StreamSlot(conn),
        };
        match send.send_request(req).await {
            Ok(res) => Ok(res.map(|body| {
                Body::new(PooledBody {
                    inner: body,
                    release: Some(release),
                })
            })),
            Err(e) => {
                let retry = h2_retry(&e);
                if retry == Retry::Fresh {
                    if let Release::Http2 { _slot } = &release {
                        _slot.0.draining.store(true, Ordering::Release);
                    }
                }
                drop(release);
                Err(AttemptError {
                    error: Box::new(e),
                    retry,
                })
            }
        }
    }

    async fn send_h1(
        self: &Arc<Self>,
        authority: &Authority,
        mut send: http1::SendRequest<Body>,
        req: Request<Body>,
        reused: bool,
    ) -> Result<Response<Body>, AttemptError> {
        let generation = self.client_cert.generation();
        let req = origin_form(req, authority);
        if let Err(e) = send.ready().await {
            // Closed while idle: nothing was sent.
            return Err(AttemptError {
                error: Box::new(e),
                retry: Retry::Fresh,
            });
        }
        match send.send_request(req).await {
            Ok(res) => {
                use http_body::Body as _;
                if res.body().is_end_stream() {
                    // Nothing left to read (a 204, `Content-Length: 0`): free at once.
                    self.return_http1(authority, send, generation);
                    return Ok(res.map(Body::new));
                }
                let release = Release::Http1 {
                    pool: self.clone(),
                    authority: authority.clone(),
                    send,
                    cert_generation: generation,
                };
                Ok(res.map(|body| {
                    Body::new(PooledBody {
                        inner: body,
                        release: Some(release),
                    })
                }))
            }
            Err(e) => {
                // A kept-alive connection the backend closed as our request arrived: it
                // ended before any response byte (hyper's incomplete message, or the TLS
                // stream's end without close_notify, a reset, a broken pipe). Go's
                // transport retries these on reused connections too.
                let closed = e.is_canceled() || e.is_incomplete_message() || closed_io(&e);
                Err(AttemptError {
                    error: Box::new(e),
                    retry: if reused && closed {
                        Retry::Fresh
                    } else {
                        Retry::No
                    },
                })
            }
        }
    }

    fn return_http1(&self, authority: &Authority, send: http1::SendRequest<Body>, generation: u64) {
        if send.is_closed() || generation != self.client_cert.generation() {
            return;
        }
        let mut hosts = lock(&self.hosts);
        let host = hosts.entry(authority.clone()).or_default();
        if host.http1_idle.len() < self.config.max_idle_http1 {
            host.http1_idle.push(Idle {
                send,
                since: self.timer.now(),
                cert_generation: generation,
            });
        }
    }
}

/// An HTTP/1.1 request line names only the path and query; the backend's address goes
/// into `Host` (as Go's transport writes it, and hyper-util's client did).
pub(crate) fn origin_form(mut req: Request<Body>, authority: &Authority) -> Request<Body> {
    if let Some(pq) = req.uri().path_and_query().cloned() {
        let mut parts = http::uri::Parts::default();
        parts.path_and_query = Some(pq);
        if let Ok(uri) = Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    if !req.headers().contains_key(http::header::HOST) {
        if let Ok(host) = http::HeaderValue::from_str(authority.as_str()) {
            req.headers_mut().insert(http::header::HOST, host);
        }
    }
    req
}

/// Whether an error comes from the connection ending under the request.
fn closed_io(e: &hyper::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        cur = err.source();
    }
    false
}

fn h2_error(e: &hyper::Error) -> Option<&h2::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h2) = err.downcast_ref::<h2::Error>() {
            return Some(h2);
        }
        cur = err.source();
    }
    None
}

/// Whether an HTTP/2 request failed in a way that proves the backend did not process it:
/// a `REFUSED_STREAM` reset (the stream limit; any connection will do), or a GOAWAY from
/// the backend (h2 fails exactly the streams above its last stream id when one arrives)
/// or a connection already closed when the request was to be sent (a new connection).
fn h2_retry(e: &hyper::Error) -> Retry {
    if e.is_canceled() || e.is_closed() {
        return Retry::Fresh;
    }
    match h2_error(e) {
        Some(h2) if h2.is_remote() && h2.is_go_away() => Retry::Fresh,
        Some(h2) if h2.is_remote() && h2.reason() == Some(h2::Reason::REFUSED_STREAM) => {
            Retry::Elsewhere
        }
        _ => Retry::No,
    }
}

/// What a finished response gives back to the pool.
enum Release {
    /// An HTTP/2 stream slot, given back when dropped.
    Http2 { _slot: StreamSlot },
    /// An HTTP/1.1 connection, returned to the idle list when its response was read whole.
    Http1 {
        pool: Arc<PoolInner>,
        authority: Authority,
        send: http1::SendRequest<Body>,
        cert_generation: u64,
    },
}

/// One request counted on an HTTP/2 connection until dropped.
struct StreamSlot(Arc<H2Conn>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    /// A response body that hands its connection back when it ends: an HTTP/2 stream slot,
    /// or an HTTP/1.1 connection that read its response to the end.
    struct PooledBody {
        #[pin]
        inner: Incoming,
        release: Option<Release>,
    }
}

impl http_body::Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        // Readers stop at the last frame when the body says it has ended, so that counts
        // as the end as much as `None` does.
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            _ => false,
        };
        match &polled {
            _ if ended => {
                if let Some(Release::Http1 {
                    pool,
                    authority,
                    send,
                    cert_generation,
                }) = this.release.take()
                {
                    pool.return_http1(&authority, send, cert_generation);
                }
            }
            // A broken body: its HTTP/1.1 connection is not reused.
            Poll::Ready(Some(Err(_))) => {
                this.release.take();
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// An HTTP/2 connection task that publishes the backend's stream limit as it changes.
    struct WatchedH2 {
        #[pin]
        conn: http2::Connection<Io, Body, Executor>,
        max_streams: Arc<AtomicUsize>,
    }
}

impl Future for WatchedH2 {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let polled = this.conn.as_mut().poll(cx);
        this.max_streams
            .store(this.conn.current_max_send_streams(), Ordering::Release);
        match polled {
            Poll::Ready(Ok(())) => Poll::Ready(()),
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "backend HTTP/2 connection ended with an error");
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
