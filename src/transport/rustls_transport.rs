//! The tokio transport: TCP, rustls, and the connection pool of `pool/`, one pool per
//! APIService client; upgrade requests get a connection of their own.

use std::time::Duration;

use http::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::pki_types::ServerName;
use tower::Service;

use super::pool::{Connector, Pool, PoolConfig};
use super::pool_metrics::PoolMetrics;
use super::{
    BackendClient, BackendTarget, ClientCertificate, TlsConfigError, Transport, TransportError,
    client_config,
};
use crate::body::{Body, BoxError, boxed};
use crate::rt::{Executor, Timer};

/// Plain TCP connector (hyper-util's `HttpConnector`, accepting `https` URIs, TCP_NODELAY,
/// 30 s connect timeout and 30 s TCP keep-alive as client-go's dialer). The connect
/// timeout is replaced by [`PoolConfig::connect_timeout`] for each APIService's pool.
pub type TcpConnector = HttpConnector;

fn tcp_connector() -> TcpConnector {
    let mut c = HttpConnector::new();
    c.enforce_http(false);
    c.set_nodelay(true);
    c.set_connect_timeout(Some(Duration::from_secs(30)));
    c.set_keepalive(Some(Duration::from_secs(30)));
    c
}

/// The default [`Transport`]: one pooled hyper client per APIService over rustls.
///
/// ALPN offers `h2` and `http/1.1`: a backend that picks h2 gets multiplexed
/// connections (a new one only when the backend's `SETTINGS_MAX_CONCURRENT_STREAMS` is
/// reached, up to [`PoolConfig::max_http2_connections`]), otherwise HTTP/1.1 keep-alive
/// connections are pooled (at most 25 idle, as client-go). The serving certificate is
/// checked against `<svc>.<ns>.svc`. Timeouts and limits are the [`PoolConfig`]'s.
///
/// A dial or handshake that fails is reported as a
/// [`ConnectError`](crate::transport::ConnectError) in the error's source chain, with
/// Go's wording (`dial tcp 10.0.0.5:443: connect: connection refused`,
/// `net/http: TLS handshake timeout`), so the aggregator marks the APIService unavailable
/// at once. A request the backend provably never processed (a `REFUSED_STREAM`, a
/// GOAWAY, a kept-alive HTTP/1.1 connection closed under it) is sent once more when it
/// is idempotent and has no body, as Go's transport retries.
///
/// Cloning shares the certificate handle, the executor and the timer; each
/// [`Transport::client`] call builds a new, empty pool.
#[derive(Debug, Clone)]
pub struct RustlsTransport {
    client_cert: ClientCertificate,
    executor: Executor,
    timer: Timer,
    tcp: TcpConnector,
    pool: PoolConfig,
    pools: PoolMetrics,
}

impl RustlsTransport {
    /// A transport presenting `client_cert` to backends, spawning connection tasks on
    /// `executor` and timing idle connections and HTTP/2 keep-alive PINGs with `timer`.
    /// Dialling and the TLS handshake use tokio's reactor, so clients must be called inside
    /// a tokio runtime.
    pub fn new(
        client_cert: ClientCertificate,
        executor: Executor,
        timer: Timer,
    ) -> RustlsTransport {
        RustlsTransport {
            client_cert,
            executor,
            timer,
            tcp: tcp_connector(),
            pool: PoolConfig::default(),
            pools: PoolMetrics::default(),
        }
    }

    /// A transport on tokio presenting the PEM certificate chain and key (the
    /// `--proxy-client-cert-file` and `--proxy-client-key-file` of kube-apiserver).
    ///
    /// # Errors
    ///
    /// [`TlsConfigError::ClientCertificate`] when the PEM holds no certificate, no usable
    /// key, or a key that does not match the certificate.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<RustlsTransport, TlsConfigError> {
        Ok(RustlsTransport::new(
            ClientCertificate::from_pem(cert_pem, key_pem)?,
            Executor::tokio(),
            Timer::tokio(),
        ))
    }

    /// The proxy client certificate handle; [`ClientCertificate::set_pem`] on it affects
    /// new connections of every client this transport built, and pooled connections made
    /// with the old certificate are no longer used for new requests.
    pub fn client_certificate(&self) -> &ClientCertificate {
        &self.client_cert
    }

    /// The connection-pool gauges of every client this transport built (and its clones
    /// build), read when scraped.
    pub fn pool_metrics(&self) -> &PoolMetrics {
        &self.pools
    }
}

impl RustlsTransport {
    /// How connections to backends are managed (HTTP/2 connections per backend, keep-alive
    /// PINGs, idle HTTP/1.1 connections); the default is [`PoolConfig::default`].
    pub fn pool_config(mut self, config: PoolConfig) -> RustlsTransport {
        self.pool = config;
        self
    }

    fn connector(
        &self,
        target: &BackendTarget,
        alpn: &[&[u8]],
    ) -> Result<Connector, TransportError> {
        let config = client_config(target, &self.client_cert, alpn).map_err(TransportError::new)?;
        let server_name = ServerName::try_from(target.server_name.clone()).map_err(|e| {
            TransportError::new(format!(
                "invalid TLS server name {:?}: {e}",
                target.server_name
            ))
        })?;
        let mut tcp = self.tcp.clone();
        tcp.set_connect_timeout(Some(self.pool.connect_timeout));
        Ok(Connector {
            tcp,
            tls: tokio_rustls::TlsConnector::from(config),
            server_name,
            tls_handshake_timeout: self.pool.tls_handshake_timeout,
        })
    }
}

impl Transport for RustlsTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        let connector = self.connector(target, &[b"h2", b"http/1.1"])?;
        let pool = Pool::new(
            connector,
            self.pool.clone(),
            self.executor.clone(),
            self.timer.clone(),
            self.client_cert.clone(),
        );
        self.pools.track(&target.server_name, pool.downgrade());
        Ok(BackendClient::new(pool))
    }

    // Upgrades take over the connection, which HTTP/2 cannot do: ALPN offers only
    // HTTP/1.1, as upstream's upgrade dialer forces it. Each upgrade gets a connection of
    // its own.
    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        let connector = self.connector(target, &[b"http/1.1"])?;
        Ok(BackendClient::new(UpgradeClient { connector }))
    }

    fn client_certificate(&self) -> Option<super::CertificateSummary> {
        self.client_cert.summary()
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(self.pools.clone()));
    }
}

/// Sends each upgrade request on a new HTTP/1.1 connection that hyper may hand over.
#[derive(Clone)]
struct UpgradeClient {
    connector: Connector,
}

impl Service<Request<Body>> for UpgradeClient {
    crate::body::answers_boxed!(BoxError);

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let connector = self.connector.clone();
        Box::pin(async move {
            let authority = req
                .uri()
                .authority()
                .cloned()
                .ok_or_else(|| format!("backend URI {} has no address", req.uri()))?;
            let (io, _) = connector.connect(&authority).await?;
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(async move {
                if let Err(e) = conn.with_upgrades().await {
                    tracing::debug!(error = %e, "backend upgrade connection ended with an error");
                }
            });
            let res = send
                .send_request(super::pool::origin_form(req, &authority))
                .await?;
            Ok(res.map(boxed))
        })
    }
}
