//! One accepted connection: the TLS handshake, HTTP/1.1 or HTTP/2 by ALPN, and the
//! header-read and idle timeouts of Go's `http.Server` (what `ReadHeaderTimeout` and
//! `IdleTimeout` mean in `net/http/server.go` and `x/net/http2/server.go`).
//!
//! hyper's own HTTP/1 header timer starts as soon as a connection waits for a request, so
//! it would also close idle keep-alive connections after the header timeout. Go keeps the
//! two apart: after a response, the connection may wait [`ServeConfig::idle_timeout`] for
//! the next request's first byte, and from that byte on has the header timeout. The
//! [`Activity`] of a connection tracks what that needs: requests in flight (from the
//! service call to the end of the response body), when the connection last went idle, and
//! the first byte read while idle.

mod activity;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::CertificateDer;
use tokio::net::TcpStream;
use tower::Service;

use super::ServeConfig;
use crate::authn::{CloseConnection, ConnectionInfo};
use crate::body::{Body, Guarded};
use crate::status::Status;
use crate::transport::Gathered;

use activity::{Activity, Expiry, InFlight};

/// Go's slack over `MaxHeaderBytes` (`initialReadLimitSize` in net/http).
const HEADER_SLACK: usize = 4096;
/// hyper refuses a read buffer limit below this.
const MIN_BUF_SIZE: usize = 8192;

/// Serves one TCP connection until it ends, times out, or the server stops.
pub(super) async fn serve<S>(
    tcp: TcpStream,
    remote_addr: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    service: S,
    config: Arc<ServeConfig>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    S: super::Handler,
{
    // Go gives the handshake the header timeout too (`tlsHandshakeTimeout`).
    let stream = match tokio::time::timeout(config.read_header_timeout, acceptor.accept(tcp)).await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%remote_addr, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote_addr, "TLS handshake timed out");
            return;
        }
    };
    let tls = &stream.get_ref().1;
    let http2 = tls.alpn_protocol() == Some(b"h2");
    let peer: Arc<[CertificateDer<'static>]> = tls
        .peer_certificates()
        .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
        .unwrap_or_else(|| Arc::from(Vec::new()));
    let activity = Arc::new(Activity::new(!http2));
    let service = ConnService {
        inner: service,
        info: ConnectionInfo {
            remote_addr: Some(remote_addr),
            peer_certificates: peer,
        },
        activity: activity.clone(),
    };
    // Gathered: hyper and h2 write whole buffers, not a write per DATA frame (its docs).
    // It tells `activity` when bytes arrive.
    let mut io = Gathered::new(stream);
    io.count_reads(activity.clone());
    let io = TokioIo::new(io);

    // ALPN picks the protocol and its settings. (With upgrades enabled, hyper-util still
    // reads the first bytes to confirm it; the header timeout covers that read too.)
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if http2 {
        builder = builder.http2_only();
        let header_list =
            u32::try_from(config.max_header_bytes.saturating_add(HEADER_SLACK)).unwrap_or(u32::MAX);
        builder
            .http2()
            .max_concurrent_streams(config.http2_max_concurrent_streams)
            .initial_stream_window_size(config.http2_stream_window)
            .max_header_list_size(header_list);
    } else {
        builder = builder.http1_only();
        builder
            .http1()
            .max_buf_size(
                config
                    .max_header_bytes
                    .saturating_add(HEADER_SLACK)
                    .max(MIN_BUF_SIZE),
            )
            .max_headers(config.max_headers);
    }
    // HTTP/2 streams are called each with a clone of the stack in a task of its own, so
    // that a runtime with several workers spreads their work over them; with one worker
    // (a current-thread runtime, or one thread) every task runs there anyway, so there
    // they are called in place too.
    let service = if http2 && !on_one_worker() {
        super::glue::ReadyService::per_stream(service)
    } else {
        super::glue::ReadyService::in_place(service)
    };
    let conn = builder.serve_connection_with_upgrades(io, service);
    let mut conn = std::pin::pin!(conn);
    // Set once the connection was asked to finish: by the server stopping, a response
    // marked CloseConnection, or the idle timeout (which also bounds how long it may take).
    let mut closing = false;
    let mut hard_deadline: Option<Instant> = None;
    // One timer, re-armed only when it fires: requests starting and finishing do not
    // wake this loop (that would poll the whole connection again for every request).
    // It is never set later than one `check` from when it was armed, and every deadline
    // the connection can reach lies at least one `check` after the change that set it,
    // so the timer fires at or before each deadline and the deadline is looked up then.
    // At least 10 ms, so that tiny timeouts cannot make it spin (a deadline shorter than
    // that may then be seen up to 10 ms late).
    let check = config
        .read_header_timeout
        .min(config.idle_timeout)
        .max(Duration::from_millis(10));
    // The deadline that holds now: the graceful close's, none while closing otherwise,
    // else the connection's own.
    let current = |closing: bool, hard_deadline: Option<Instant>| match hard_deadline {
        Some(at) => Some((at, Expiry::Grace)),
        None if closing => None,
        None => activity.deadline(&config),
    };
    let next_check = |closing: bool, hard_deadline: Option<Instant>| {
        let limit = Instant::now() + check;
        current(closing, hard_deadline).map_or(limit, |(at, _)| at.min(limit))
    };
    let timer = tokio::time::sleep_until(next_check(false, None).into());
    let mut timer = std::pin::pin!(timer);
    loop {
        tokio::select! {
            biased;
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(%remote_addr, error = %e, "connection ended with an error");
                }
                return;
            }
            () = activity.changed.notified() => {
                if activity.close_requested.load(Ordering::Acquire) && !closing {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = timer.as_mut() => {
                let now = Instant::now();
                let expired = current(closing, hard_deadline)
                    .and_then(|(at, kind)| (at <= now).then_some(kind));
                match expired {
                    None => {}
                    Some(Expiry::Idle) => {
                        tracing::debug!(%remote_addr, timeout = ?config.idle_timeout, "closing an idle connection");
                        closing = true;
                        hard_deadline = Some(now + config.read_header_timeout);
                        conn.as_mut().graceful_shutdown();
                    }
                    Some(Expiry::Header) => {
                        // Go closes without an answer when the header does not arrive in time.
                        tracing::debug!(%remote_addr, timeout = ?config.read_header_timeout, "request header not received in time; closing the connection");
                        return;
                    }
                    Some(Expiry::Grace) => {
                        tracing::debug!(%remote_addr, "connection did not close in time; dropping it");
                        return;
                    }
                }
                timer.as_mut().reset(next_check(closing, hard_deadline).into());
            }
            _ = stop.wait_for(|s| *s), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Whether the caller's tokio runtime runs its tasks on one worker thread.
fn on_one_worker() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|h| h.metrics().num_workers() == 1)
}

/// The service of one connection: the connection's [`ConnectionInfo`] into every request,
/// requests counted in flight, `Host` checked, [`CloseConnection`] honoured.
#[derive(Clone)]
struct ConnService<S> {
    inner: S,
    info: ConnectionInfo,
    activity: Arc<Activity>,
}

impl<S> Service<Request<Incoming>> for ConnService<S>
where
    S: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>,
{
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = ConnFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::new(self.activity.clone());
        if let Some(problem) = host_problem(&req) {
            let mut res =
                Status::failure(StatusCode::BAD_REQUEST, "BadRequest", problem).into_response();
            res.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            self.activity.request_close();
            return ConnFuture {
                inner: None,
                ready: Some(res),
                in_flight: Some(in_flight),
                activity: self.activity.clone(),
            };
        }
        req.extensions_mut().insert(self.info.clone());
        ConnFuture {
            inner: Some(self.inner.call(req)),
            ready: None,
            in_flight: Some(in_flight),
            activity: self.activity.clone(),
        }
    }
}

/// Go's checks of `Host` on HTTP/1.1 requests (`net/http/server.go` readRequest): exactly
/// one is required. HTTP/1.0 may omit it; HTTP/2 carries `:authority` instead.
fn host_problem<B>(req: &Request<B>) -> Option<&'static str> {
    if req.version() != Version::HTTP_11 {
        return None;
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => Some("missing required Host header"),
        (Some(_), Some(_)) => Some("too many Host headers"),
        (Some(_), None) => None,
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`ConnService`].
    struct ConnFuture<F> {
        #[pin]
        inner: Option<F>,
        ready: Option<Response<Body>>,
        in_flight: Option<InFlight>,
        activity: Arc<Activity>,
    }
}

impl<F> Future for ConnFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<TrackedBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let res = match this.ready.take() {
            Some(res) => res,
            None => match this.inner.as_mut().as_pin_mut() {
                Some(fut) => match fut.poll(cx) {
                    Poll::Ready(Ok(res)) => res,
                    Poll::Pending => return Poll::Pending,
                },
                None => Status::failure(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    "the response was already taken",
                )
                .into_response(),
            },
        };
        if res.extensions().get::<CloseConnection>().is_some() {
            this.activity.request_close();
        }
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(res.map(|body| Guarded::new(body, in_flight))))
    }
}

/// A response body that keeps its request counted in flight until it ends or is dropped.
type TrackedBody = Guarded<InFlight>;
