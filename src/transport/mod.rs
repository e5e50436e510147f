//! The pluggable transport to extension servers.
//!
//! A [`Transport`] builds one [`BackendClient`] per APIService from its [`BackendTarget`]
//! (TLS server name, CA bundle, insecure flag). The registry asks for a client when an
//! APIService appears or its TLS settings change, and keeps it (and its connection pool)
//! otherwise. The client is any tower service from a request to a response, so hosts on
//! other runtimes bring their own; with the `tokio` feature, [`RustlsTransport`] is the
//! ready one: rustls with the proxy client certificate, HTTP/2 by ALPN with HTTP/1.1
//! keep-alive as fallback, connections pooled per APIService. [`InMemoryTransport`] serves
//! APIServices from tower services in the same process (tests, benches, fuzzing).
//!
//! The TLS settings follow kube-aggregator's `BuildTransportConfig`
//! ([`pkg/controllers/status/remote/remote_available_controller.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/remote/remote_available_controller.go))
//! and client-go's `TLSConfigFor`
//! ([`transport/transport.go`](https://github.com/kubernetes/client-go/blob/master/transport/transport.go)):
//! the certificate is verified as `<service>.<namespace>.svc` although the address dialled
//! is the resolved endpoint, against the `caBundle` or the platform's roots, and the
//! aggregator's proxy client certificate ([`ClientCertificate`]) is presented to every
//! backend. Building a client fails (a [`TransportError`]) when the `caBundle` is not PEM
//! or is combined with `insecureSkipTLSVerify`; that APIService's availability check then
//! fails with the error's text, and a request that reaches it while it is still marked
//! available is answered 500 with that text, as upstream answers it.
//!
//! ```
//! use http::{Request, Response};
//! use kube_aggregator::Body;
//! use kube_aggregator::transport::{BackendTarget, InMemoryTransport, Transport};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // An extension server in the same process, named as its certificate would be.
//! let transport = InMemoryTransport::new();
//! transport.insert(
//!     "metrics-server.kube-system.svc",
//!     tower::service_fn(|req: Request<Body>| async move {
//!         Ok::<_, std::convert::Infallible>(Response::new(Body::full(req.uri().path().to_owned())))
//!     }),
//! );
//!
//! // What the registry does when an APIService points at that Service.
//! let target = BackendTarget {
//!     server_name: "metrics-server.kube-system.svc".into(),
//!     ca_bundle: Vec::new(),
//!     insecure_skip_tls_verify: false,
//! };
//! let client = transport.client(&target)?;
//! let req = Request::get("https://10.0.0.5:4443/apis/metrics.k8s.io/v1beta1").body(Body::empty())?;
//! let res = client.oneshot(req).await?;
//! assert_eq!(res.status(), 200);
//!
//! // No backend for a name: the transport says so, and its APIService is not available.
//! let other = BackendTarget { server_name: "api.other.svc".into(), ..target };
//! assert!(transport.client(&other).is_err());
//! # Ok(()) }
//! ```
//!
//! Floor 3 of the import order (docs/architecture.md): uses `apiservice`, `body`,
//! `identity`, `resolver`, `rt`, `span`, `status`; used by `aggregator`, `availability`,
//! `builder`, `fuzz_logic`, `proxy`, `registry`, `server`, `testing`, `webhook`.

mod certificate;
mod memory;
#[cfg(feature = "tokio")]
mod pool;
#[cfg(feature = "tokio")]
mod pool_metrics;
#[cfg(feature = "tokio")]
mod rustls_transport;
mod tls;

use std::sync::Arc;

use http::{Request, Response};
use tower::util::BoxCloneSyncService;

pub(crate) use certificate::bundle_subjects;
pub use certificate::{CertificateParseError, CertificateSummary};
pub use memory::{InMemoryResolver, InMemoryTransport};
#[cfg(feature = "tokio")]
pub use pool::PoolConfig;
#[cfg(feature = "tokio")]
pub(crate) use pool::{Gathered, OnRead};
#[cfg(feature = "tokio")]
pub use pool_metrics::PoolMetrics;
#[cfg(feature = "tokio")]
pub use rustls_transport::{RustlsTransport, TcpConnector};
#[cfg(feature = "tokio")]
pub(crate) use tls::provider as provider_for_server;
pub(crate) use tls::serving_certificate_error;
#[cfg(feature = "tokio")]
pub(crate) use tls::signature_checks;
pub use tls::{
    ClientCertificate, ServingCertificateError, ServingCertificateProblem, TlsConfigError,
    client_config,
};

use crate::body::{Body, BoxError};

/// The header names a `Connection` header lists (comma-separated, case-insensitive;
/// names that are not valid header names skipped): hop-by-hop by RFC 9110 §7.6.1.
pub(crate) fn connection_listed(headers: &http::HeaderMap) -> Vec<http::HeaderName> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| http::HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect()
}

/// How to reach and verify one APIService's backend (kube-aggregator `BuildTransportConfig`).
///
/// The registry builds one from each remote APIService's `spec` and asks the
/// [`Transport`] for a client again only when it changes, so a transport may cache by
/// target (it is `Hash` and `Eq`). The address to dial is not part of it: it comes with
/// each request's URI, from the [`ServiceResolver`](crate::availability::ServiceResolver).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendTarget {
    /// The name the serving certificate must carry: `<service>.<namespace>.svc`.
    pub server_name: String,
    /// PEM CA bundle (`spec.caBundle`, base64-decoded); empty means the platform's trust
    /// roots, as upstream falls back to the system pool.
    pub ca_bundle: Vec<u8>,
    /// Skip verification of the serving certificate (`spec.insecureSkipTLSVerify`).
    /// Together with a non-empty `ca_bundle` it is refused
    /// ([`TlsConfigError::InsecureWithCa`]), as upstream's transport refuses it.
    pub insecure_skip_tls_verify: bool,
}

/// A client for one backend: sends a request whose URI is `https://<resolved host:port>/...`
/// and returns the backend's response with a streaming body. Errors mean the backend could
/// not be reached (dial, TLS, protocol).
///
/// Any `Clone + Send + Sync` tower service of that shape fits (box it with
/// `BoxCloneSyncService::new`). It is cloned per request and must be ready at once, as
/// hyper's client is: the proxy calls it with `oneshot`. A response is any status the
/// backend sent, 5xx included; only a failure to get one is an `Err`. The proxy answers
/// such an `Err` with 503 `error trying to reach service: <error chain>`.
pub type BackendClient = BoxCloneSyncService<Request<Body>, Response<Body>, BoxError>;

/// A backend could not be reached at all: the TCP connection was refused or timed out, or
/// the TLS handshake failed. The request was never sent.
///
/// A [`BackendClient`] that fails with this error somewhere in its error's source chain
/// tells the aggregator that the backend is down: its APIService is marked
/// `Available=False` at once (reason `FailedDiscoveryCheck`), instead of every request
/// paying the connect timeout until the next availability check; a probe soon after
/// brings it back. [`RustlsTransport`] reports its dial and handshake failures this way;
/// other transports may too.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    message: String,
    #[source]
    source: Option<BoxError>,
}

impl ConnectError {
    /// A connect failure described by `message` (Go's wording, e.g. `dial tcp
    /// 10.0.0.5:443: connect: connection refused`), caused by `source`.
    pub fn new(message: impl Into<String>, source: Option<BoxError>) -> ConnectError {
        ConnectError {
            message: message.into(),
            source,
        }
    }

    /// The first `ConnectError` in `err`'s source chain.
    ///
    /// ```
    /// use kube_aggregator::body::BoxError;
    /// use kube_aggregator::transport::ConnectError;
    ///
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// let dial = ConnectError::new("dial tcp 10.0.0.5:443: connect: connection refused", Some(Box::new(refused)));
    /// // Wrapped by a client that adds context: still found.
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("request failed")]
    /// struct Wrapped(#[source] ConnectError);
    /// let err: BoxError = Box::new(Wrapped(dial));
    /// assert!(ConnectError::find(&*err).is_some());
    /// assert!(ConnectError::find(&std::fmt::Error).is_none());
    /// ```
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ConnectError> {
        let mut cur = Some(err);
        while let Some(e) = cur {
            if let Some(c) = e.downcast_ref::<ConnectError>() {
                return Some(c);
            }
            cur = e.source();
        }
        None
    }
}

/// Every error of `err`'s source chain, `err` first, looking into `std::io::Error`s too
/// (whose `source` skips the error they wrap, where rustls puts its own).
pub(crate) fn error_sources<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    let mut next = Some(err);
    std::iter::from_fn(move || {
        let cur = next?;
        next = match cur
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => cur.source(),
        };
        Some(cur)
    })
}

/// The first rustls error in `err`'s source chain (a failed handshake, an alert the
/// backend sent).
pub(crate) fn find_rustls_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    error_sources(err).find_map(|e| e.downcast_ref::<rustls::Error>())
}

/// The transport could not build a client for a target (e.g. a caBundle that is not
/// PEM: a [`TlsConfigError`]). Its `Display` and `source` are those of the cause, which
/// [`TransportError::get_ref`] gives for downcasting; cloning shares it.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct TransportError(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl TransportError {
    /// An error caused by `cause` (an error, or a message as a `String` or `&str`).
    pub fn new(cause: impl Into<BoxError>) -> TransportError {
        TransportError(std::sync::Arc::from(cause.into()))
    }

    /// The cause.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

/// Builds backend clients: the seam between the aggregator and the network.
///
/// The registry calls it when an APIService appears or its TLS settings change, never on
/// the request path; the client it returns serves every request of that APIService until
/// the next change. Implement it to reach backends some other way (a service mesh, a
/// unix socket, another runtime); [`RustlsTransport`] (with the `tokio` feature) and
/// [`InMemoryTransport`] are the ones included.
pub trait Transport: Send + Sync + 'static {
    /// A client for `target`. Called when an APIService is added or its TLS settings
    /// change; the returned client is reused for every request to that APIService.
    ///
    /// # Errors
    ///
    /// A [`TransportError`] when no client can be built for the target (a `caBundle` that
    /// is not PEM, an invalid server name). The APIService stays routed: its availability
    /// check fails with the error's text (`FailedDiscoveryCheck`, so requests get 503),
    /// and a request that passes the gate before that check gets 500 with the text. A
    /// later change of the APIService asks again.
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError>;

    /// A client for upgrade requests (SPDY, WebSocket) to `target`: HTTP/1.1 only (ALPN
    /// `http/1.1`), whose 101 responses carry hyper's `OnUpgrade` so the connection can be
    /// taken over. The default refuses: upgrades are then answered 503.
    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        let _ = target;
        Err(TransportError::new(
            "this transport does not support upgrade requests",
        ))
    }

    /// The client certificate this transport presents to backends now (the proxy client
    /// certificate), for messages that must name it: an availability check refused by a
    /// backend names its subject and issuer. The default: `None` (not known).
    fn client_certificate(&self) -> Option<CertificateSummary> {
        None
    }

    /// Adds the transport's own metrics to `registry` (a
    /// [`RustlsTransport`]'s connection-pool gauges);
    /// [`Aggregator::register_metrics`](crate::Aggregator::register_metrics) calls it.
    /// The default adds nothing.
    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        let _ = registry;
    }
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        (**self).client(target)
    }

    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        (**self).upgrade_client(target)
    }

    fn client_certificate(&self) -> Option<CertificateSummary> {
        (**self).client_certificate()
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        (**self).register_metrics(registry);
    }
}
