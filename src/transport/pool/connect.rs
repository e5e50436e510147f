//! Dialling one backend: TCP, then TLS with the APIService's server name and ALPN.

use std::time::Duration;

use http::Uri;
use http::uri::Authority;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tower::Service;

use crate::transport::ConnectError;

pub(super) type Io = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

/// Dials a backend: TCP, then TLS with the APIService's server name and ALPN.
///
/// One per APIService client (and one more for its upgrade client, offering HTTP/1.1
/// only); cloning shares the TLS config. The TCP connect timeout is set on `tcp`; the
/// handshake has its own, `tls_handshake_timeout`.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) tcp: HttpConnector,
    pub(crate) tls: tokio_rustls::TlsConnector,
    pub(crate) server_name: ServerName<'static>,
    pub(crate) tls_handshake_timeout: Duration,
}

impl Connector {
    /// TCP then TLS to `authority`; whether ALPN chose h2.
    ///
    /// Every failure is a [`ConnectError`] with Go's wording, so the aggregator can tell
    /// an unreachable backend from one that answered: `dial tcp <addr>: <cause>`,
    /// `tls: <cause>`, `net/http: TLS handshake timeout`.
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
