//! The tokio transport: TCP, rustls, and hyper-util's pooled client.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tower::{Service, ServiceExt};

use super::{
    BackendClient, BackendTarget, ClientCertificate, TlsConfigError, Transport, TransportError,
    client_config,
};
use crate::body::{Body, BoxError, boxed};
use crate::rt::{Executor, Timer};

/// Plain TCP connector (hyper-util's `HttpConnector`, accepting `https` URIs, TCP_NODELAY,
/// 30 s connect timeout and keep-alive as client-go's dialer).
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
/// ALPN offers `h2` and `http/1.1`: a backend that picks h2 gets one multiplexed
/// connection, otherwise HTTP/1.1 keep-alive connections are pooled (at most 25 idle,
/// as client-go). The serving certificate is checked against `<svc>.<ns>.svc`.
#[derive(Debug, Clone)]
pub struct RustlsTransport {
    client_cert: ClientCertificate,
    executor: Executor,
    timer: Timer,
    tcp: TcpConnector,
}

impl RustlsTransport {
    /// A transport presenting `client_cert` to backends, spawning connection tasks on
    /// `executor` and timing idle connections with `timer`.
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
        }
    }

    /// A transport on tokio presenting the PEM certificate chain and key (the
    /// `--proxy-client-cert-file` and `--proxy-client-key-file` of kube-apiserver).
    ///
    /// # Errors
    ///
    /// When the PEM holds no certificate, no usable key, or a key that does not match.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<RustlsTransport, TlsConfigError> {
        Ok(RustlsTransport::new(
            ClientCertificate::from_pem(cert_pem, key_pem)?,
            Executor::tokio(),
            Timer::tokio(),
        ))
    }

    /// The proxy client certificate handle; swapping it affects new connections.
    pub fn client_certificate(&self) -> &ClientCertificate {
        &self.client_cert
    }
}

impl RustlsTransport {
    fn build(
        &self,
        target: &BackendTarget,
        alpn: &[&[u8]],
    ) -> Result<BackendClient, TransportError> {
        let config = client_config(target, &self.client_cert, alpn).map_err(TransportError::new)?;
        let connector = TlsConnector {
            tcp: self.tcp.clone(),
            tls: tokio_rustls::TlsConnector::from(config),
            server_name: Arc::from(target.server_name.as_str()),
        };
        let client: Client<TlsConnector, Body> = Client::builder(self.executor.clone())
            .timer(self.timer.clone())
            .pool_timer(self.timer.clone())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(25)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(15))
            .build(connector);
        let svc = client
            .map_response(|res: Response<hyper::body::Incoming>| res.map(boxed))
            .map_err(BoxError::from);
        Ok(BackendClient::new(svc))
    }
}

impl Transport for RustlsTransport {
    fn client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        self.build(target, &[b"h2", b"http/1.1"])
    }

    // Upgrades take over the connection, which HTTP/2 cannot do: ALPN offers only
    // HTTP/1.1, as upstream's upgrade dialer forces it.
    fn upgrade_client(&self, target: &BackendTarget) -> Result<BackendClient, TransportError> {
        self.build(target, &[b"http/1.1"])
    }
}

/// Connects TCP to the URI's authority, then TLS with the APIService's server name.
#[derive(Clone)]
struct TlsConnector {
    tcp: TcpConnector,
    tls: tokio_rustls::TlsConnector,
    server_name: Arc<str>,
}

impl Service<Uri> for TlsConnector {
    type Response = TlsConn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<TlsConn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tcp = self.tcp.call(uri);
        let tls = self.tls.clone();
        let name = self.server_name.clone();
        Box::pin(async move {
            let server_name = ServerName::try_from(name.to_string())
                .map_err(|e| format!("invalid TLS server name {name:?}: {e}"))?;
            let stream: TcpStream = tcp.await?.into_inner();
            let tls = tls.connect(server_name, stream).await?;
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            Ok(TlsConn {
                io: TokioIo::new(tls),
                h2,
            })
        })
    }
}

/// A TLS connection to a backend, telling hyper-util whether ALPN chose h2.
struct TlsConn {
    io: TokioIo<tokio_rustls::client::TlsStream<TcpStream>>,
    h2: bool,
}

impl Connection for TlsConn {
    fn connected(&self) -> Connected {
        let c = Connected::new();
        if self.h2 { c.negotiated_h2() } else { c }
    }
}

impl hyper::rt::Read for TlsConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for TlsConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
}
