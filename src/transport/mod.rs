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

mod memory;
#[cfg(feature = "tokio")]
mod pool;
#[cfg(feature = "tokio")]
mod rustls_transport;
mod tls;

use std::sync::Arc;

use http::{Request, Response};
use tower::util::BoxCloneSyncService;

pub use memory::{InMemoryResolver, InMemoryTransport};
#[cfg(feature = "tokio")]
pub use pool::PoolConfig;
#[cfg(feature = "tokio")]
pub use rustls_transport::{RustlsTransport, TcpConnector};
#[cfg(feature = "tokio")]
pub(crate) use tls::provider as provider_for_server;
pub use tls::{ClientCertificate, TlsConfigError, client_config};

use crate::body::{Body, BoxError};

/// How to reach and verify one APIService's backend (kube-aggregator `BuildTransportConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BackendTarget {
    /// The name the serving certificate must carry: `<service>.<namespace>.svc`.
    pub server_name: String,
    /// PEM CA bundle; empty means the platform's trust roots.
    pub ca_bundle: Vec<u8>,
    /// Skip verification of the serving certificate.
    pub insecure_skip_tls_verify: bool,
}

/// A client for one backend: sends a request whose URI is `https://<resolved host:port>/...`
/// and returns the backend's response with a streaming body. Errors mean the backend could
/// not be reached (dial, TLS, protocol).
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

/// Builds backend clients.
pub trait Transport: Send + Sync + 'static {
    /// A client for `target`. Called when an APIService is added or its TLS settings
    /// change; the returned client is reused for every request to that APIService.
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
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        (**self).client(target)
    }

    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        (**self).upgrade_client(target)
    }
}
