//! A TLS accept loop for hosts on tokio: rustls, HTTP/1.1 and HTTP/2 by ALPN, a
//! [`ConnectionInfo`](crate::authn::ConnectionInfo) (peer chain, remote address) in every request's extensions, and the
//! connection limits of kube-apiserver's secure serving.
//!
//! Client certificates work as kube-apiserver handles them: the server *requests* one and
//! checks that the client holds its key (the handshake signature), but trusts nothing yet;
//! the authenticators verify the chain against their own CAs, so a certificate from an
//! unknown CA gets a 401, not a failed handshake.
//!
//! Connection limits ([`ServeConfig`]) mirror the `http.Server` and `http2.Server` that
//! k8s.io/apiserver builds in
//! [`pkg/server/secure_serving.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/server/secure_serving.go):
//! a header-read timeout (32 s), an idle timeout (90 s) for HTTP/1.1 keep-alive and HTTP/2,
//! 1 MiB of request headers, 250 concurrent HTTP/2 streams and 256 KiB HTTP/2 stream
//! windows. So a client that connects and sends nothing, sends its header one byte
//! at a time, or holds a connection open without requests cannot keep a descriptor for
//! longer than those timeouts; and when descriptors do run out, the accept loop backs off
//! (5 ms doubling to 1 s, as Go's `http.Server.Serve`) and serves again as soon as one is
//! free, without disturbing the connections it holds.
//!
//! ```no_run
//! use std::time::Duration;
//! use kube_aggregator::server::{ServeConfig, serve_tls_with, server_config};
//! # async fn run(service: impl tower::Service<http::Request<hyper::body::Incoming>, Response = http::Response<kube_aggregator::Body>, Error = std::convert::Infallible, Future: Send + 'static> + Clone + Send + Sync + 'static) -> Result<(), Box<dyn std::error::Error>> {
//! let tls = server_config(&std::fs::read("serving.crt")?, &std::fs::read("serving.key")?, &std::fs::read("client-ca.crt")?, true)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:6443").await?;
//! let config = ServeConfig::default().idle_timeout(Duration::from_secs(30));
//! serve_tls_with(listener, tls, service, std::future::pending(), config).await;
//! # Ok(()) }
//! ```
//!
//! Floor 6 of the import order (docs/architecture.md): uses `authn`, `body`, `status`,
//! `transport`; used by no other room.

mod conn;
mod glue;
mod tls;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tower::Service;

pub use tls::{ServerConfigError, server_config};

use crate::body::Body;

/// Limits of the connections [`serve_tls_with`] accepts. The defaults are kube-apiserver's
/// (k8s.io/apiserver `pkg/server/secure_serving.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    read_header_timeout: Duration,
    idle_timeout: Duration,
    max_header_bytes: usize,
    max_headers: usize,
    http2_max_concurrent_streams: u32,
    http2_stream_window: u32,
    shutdown_timeout: Duration,
}

impl Default for ServeConfig {
    /// Header-read timeout 32 s, idle timeout 90 s, 1 MiB of headers (at most 1,024 of
    /// them), 250 HTTP/2 streams per connection, 256 KiB HTTP/2 stream windows, 10 s to
    /// drain at shutdown.
    fn default() -> Self {
        ServeConfig {
            read_header_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 1 << 20,
            max_headers: 1024,
            http2_max_concurrent_streams: 250,
            http2_stream_window: 256 * 1024,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

impl ServeConfig {
    /// Time a connection has for its TLS handshake, and then for the whole header of its
    /// first request (HTTP/1.1) or its first request (HTTP/2); for each later HTTP/1.1
    /// request, the time from its first byte to the end of its header. A connection that
    /// misses it is closed without an answer, as Go's `ReadHeaderTimeout` does. Default
    /// 32 s (upstream: "just shy of requestTimeoutUpperBound").
    pub fn read_header_timeout(mut self, timeout: Duration) -> Self {
        self.read_header_timeout = timeout;
        self
    }

    /// Time a connection may stay open with no request in flight: an HTTP/1.1 keep-alive
    /// connection waiting for its next request, an HTTP/2 connection without open streams
    /// (closed with GOAWAY). Default 90 s, which matches `http.DefaultTransport`'s idle
    /// connection timeout, as upstream.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Bytes of request line and headers an HTTP/1.1 request may have (plus Go's 4 KiB of
    /// slack), and the HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`; more gets 431 (with an
    /// empty body: hyper writes it). Default 1 MiB (`MaxHeaderBytes: 1 << 20`). On
    /// HTTP/1.1 the bound is hyper's read-buffer limit, checked between reads: a head of
    /// up to this size is always accepted, one of more than twice it never. The request
    /// target itself cannot exceed 64 KiB (the `http` crate's URI limit; 414 beyond it).
    pub fn max_header_bytes(mut self, bytes: usize) -> Self {
        self.max_header_bytes = bytes;
        self
    }

    /// How many header fields an HTTP/1.1 request may have; more gets 431. Go counts only
    /// bytes; hyper also needs a count, and reserves room for this many fields per request:
    /// above 100 (hyper's own default) that room is a heap allocation per request, and with
    /// hyper as published each slot is also written (the workspace's hyper patch,
    /// `vendor/README.md`, takes that loop out). Default 1,024.
    pub fn max_headers(mut self, count: usize) -> Self {
        self.max_headers = count;
        self
    }

    /// `SETTINGS_MAX_CONCURRENT_STREAMS` of HTTP/2 connections. Default 250
    /// (`--http2-max-streams-per-connection` unset).
    pub fn http2_max_concurrent_streams(mut self, streams: u32) -> Self {
        self.http2_max_concurrent_streams = streams;
        self
    }

    /// The per-stream receive window of HTTP/2 connections, in bytes: how much of a
    /// request body a client may send ahead. Default 256 KiB (upstream's
    /// `MaxUploadBufferPerStream`). Frames stay at hyper's 16 KiB, not upstream's
    /// 256 KiB `MaxReadFrameSize`: the h2 crate bounds a header block's CONTINUATION
    /// frames by header-list size over frame size, so larger frames would refuse a 1 MiB
    /// header block from a client that splits it into 16 KiB frames (as clients do
    /// before they have read the server's settings).
    pub fn http2_stream_window(mut self, bytes: u32) -> Self {
        self.http2_stream_window = bytes;
        self
    }

    /// How long open connections may take to finish after shutdown begins; then they are
    /// closed. Default 10 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }
}

/// The serving TLS configuration of [`serve_tls`], replaceable while serving: each new
/// handshake uses the configuration stored last, open connections keep theirs. Store a
/// new [`server_config`] when the serving certificate, its key or a client CA (whose
/// names the handshake offers) rotate, as kube-apiserver's dynamic serving certificate
/// does; [`watch_files`](crate::reload::watch_files) notices the files changing.
#[derive(Clone)]
pub struct ServingTls(Arc<arc_swap::ArcSwap<ServerConfig>>);

debug_fields!(ServingTls {});

impl ServingTls {
    /// Serves with `config` until another is stored.
    pub fn new(config: Arc<ServerConfig>) -> ServingTls {
        ServingTls(Arc::new(arc_swap::ArcSwap::new(config)))
    }

    /// New handshakes use `config` from now on.
    pub fn store(&self, config: Arc<ServerConfig>) {
        self.0.store(config);
    }

    fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.0.load_full())
    }
}

/// The serving certificate as kube-apiserver's dynamic serving controller keeps it
/// (k8s.io/apiserver `pkg/server/dynamiccertificates/tlsconfig.go`): the certificate and
/// key from their files, and the acceptable issuers the handshake offers from the
/// [`ClientCas`](crate::authn::ClientCas) now in use, each part replaced on its own. A
/// pair that does not load ([`DynamicServing::set_pair`]) is refused and the previous
/// pair keeps serving, with the CA names as they are; a CA change
/// ([`DynamicServing::refresh_hints`]) keeps the pair. Clones share the configuration.
#[derive(Clone)]
pub struct DynamicServing {
    tls: ServingTls,
    /// The pair in use (certificate chain PEM, key PEM).
    pair: Arc<std::sync::Mutex<(Vec<u8>, Vec<u8>)>>,
    cas: Option<crate::authn::ClientCas>,
    http2: bool,
}

debug_fields!(DynamicServing { http2 });

impl DynamicServing {
    /// Serves `cert_pem` and `key_pem`, offering the issuers of `cas` (none when `None`),
    /// with ALPN `h2` when `http2` and `http/1.1`, as [`server_config`].
    ///
    /// # Errors
    ///
    /// A [`ServerConfigError`] naming the part that does not load.
    pub fn new(
        cert_pem: &[u8],
        key_pem: &[u8],
        cas: Option<crate::authn::ClientCas>,
        http2: bool,
    ) -> Result<DynamicServing, ServerConfigError> {
        let hints = cas
            .as_ref()
            .map(crate::authn::ClientCas::handshake_hints)
            .unwrap_or_default();
        let config = tls::server_config_with_hints(cert_pem, key_pem, &hints, http2)?;
        Ok(DynamicServing {
            tls: ServingTls::new(config),
            pair: Arc::new(std::sync::Mutex::new((cert_pem.to_vec(), key_pem.to_vec()))),
            cas,
            http2,
        })
    }

    /// The configuration to serve with ([`serve_tls`]); it follows every change.
    pub fn tls(&self) -> ServingTls {
        self.tls.clone()
    }

    /// Serves a new certificate and key from the next handshake on.
    ///
    /// # Errors
    ///
    /// A [`ServerConfigError`] (a certificate written before its key, say); the previous
    /// pair keeps serving.
    pub fn set_pair(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), ServerConfigError> {
        let mut pair = self
            .pair
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let config = tls::server_config_with_hints(cert_pem, key_pem, &self.hints(), self.http2)?;
        self.tls.store(config);
        *pair = (cert_pem.to_vec(), key_pem.to_vec());
        Ok(())
    }

    /// Offers the issuers of the client CAs as they are now, from the next handshake on
    /// (call it after a CA changed).
    ///
    /// # Errors
    ///
    /// A [`ServerConfigError`] when a CA certificate's subject cannot be read; the
    /// previous configuration stays.
    pub fn refresh_hints(&self) -> Result<(), ServerConfigError> {
        let pair = self
            .pair
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let config = tls::server_config_with_hints(&pair.0, &pair.1, &self.hints(), self.http2)?;
        self.tls.store(config);
        Ok(())
    }

    fn hints(&self) -> Vec<rustls::pki_types::CertificateDer<'static>> {
        self.cas
            .as_ref()
            .map(crate::authn::ClientCas::handshake_hints)
            .unwrap_or_default()
    }
}

impl From<Arc<ServerConfig>> for ServingTls {
    fn from(config: Arc<ServerConfig>) -> ServingTls {
        ServingTls::new(config)
    }
}

/// A service the server runs: it answers hyper's requests with `Response<Body>`, never
/// fails (every error is already an answer), and is shared by the connections' tasks. Any
/// service with those bounds is one (a blanket impl); the aggregator's stack over an
/// infallible host is.
pub trait Handler:
    Service<
        Request<Incoming>,
        Response = Response<Body>,
        Error = Infallible,
        Future = <Self as Handler>::Answer,
    > + Clone
    + Send
    + Sync
    + 'static
{
    /// The service's response future.
    type Answer: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static;
}

impl<S> Handler for S
where
    S: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    type Answer = S::Future;
}

/// [`serve_tls_with`] with kube-apiserver's limits ([`ServeConfig::default`]).
pub async fn serve_tls<S>(
    listener: TcpListener,
    tls: impl Into<ServingTls>,
    service: S,
    shutdown: impl Future<Output = ()> + Send,
) where
    S: Handler,
{
    serve_tls_with(listener, tls, service, shutdown, ServeConfig::default()).await;
}

/// Serves `service` on `listener` over TLS until `shutdown` completes, then stops
/// accepting, asks open connections to finish (HTTP/2 GOAWAY, HTTP/1.1 close after the
/// current response) and waits for them at most [`ServeConfig::shutdown_timeout`].
///
/// Each request carries a [`ConnectionInfo`](crate::authn::ConnectionInfo). A response
/// marked with [`CloseConnection`](crate::authn::CloseConnection) (an HTTP/2 401, as
/// upstream) shuts its connection down gracefully once the response is sent. HTTP/1.1 or
/// HTTP/2 is chosen by ALPN (HTTP/1.1 without it). An HTTP/1.1 request without a `Host`
/// header or with two gets a 400 `Status` and its connection is closed (RFC 9112 §3.2, as
/// Go's server). Handshake failures and timeouts are logged at debug level and the
/// connection dropped. Accept errors (descriptor exhaustion, say) are logged and retried
/// with a backoff of 5 ms doubling to 1 s.
pub async fn serve_tls_with<S>(
    listener: TcpListener,
    tls: impl Into<ServingTls>,
    service: S,
    shutdown: impl Future<Output = ()> + Send,
    config: ServeConfig,
) where
    S: Handler,
{
    let tls: ServingTls = tls.into();
    let config = Arc::new(config);
    // The drain is ours rather than hyper-util's `server::graceful::GracefulShutdown`,
    // whose `Watcher::watch` takes a connection by value and is from then on the only
    // thing that can call its `graceful_shutdown` (`GracefulConnection` is sealed, so no
    // wrapper of ours could be watched instead). Each connection here must be asked to
    // finish for three more reasons than the server stopping: its idle timeout (a GOAWAY
    // on HTTP/2, as Go's `IdleTimeout`), a response marked `CloseConnection` (the HTTP/2
    // 401) and the 400 for a missing or repeated `Host`; and it is dropped when it has not
    // finished `read_header_timeout` after an idle close. So the connection's own loop
    // (`conn::serve`) selects on this stop signal beside those, and the `JoinSet` gives
    // `shutdown_timeout` its bound and the abort after it, which
    // `GracefulShutdown::shutdown` (it waits for every watcher without a limit) would not.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff: Option<Duration> = None;
    loop {
        // Reap finished connection tasks so the set stays the size of the open ones.
        while connections.try_join_next().is_some() {}
        let (tcp, remote_addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    if backoff.take().is_some() {
                        tracing::info!("accepting connections again");
                    }
                    a
                }
                Err(e) => {
                    // Go's `Serve`: 5 ms, doubling, at most 1 s; a descriptor freed by a
                    // closing connection is used at the next try.
                    let delay = backoff.map_or(Duration::from_millis(5), |d| {
                        (d * 2).min(Duration::from_secs(1))
                    });
                    if backoff.is_none_or(|d| d < delay) {
                        tracing::warn!(error = %e, retry_in = ?delay, "accept failed");
                    }
                    backoff = Some(delay);
                    tokio::select! {
                        () = tokio::time::sleep(delay) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        connections.spawn(conn::serve(
            tcp,
            remote_addr,
            tls.acceptor(),
            service.clone(),
            config.clone(),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(config.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!(
            timeout = ?config.shutdown_timeout,
            "connections still open after the shutdown timeout; closing them"
        );
        connections.abort_all();
    }
}
