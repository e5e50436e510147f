//! A TLS accept loop for hosts on tokio: rustls, HTTP/1.1 and HTTP/2 by ALPN, and a
//! [`ConnectionInfo`] (peer chain, remote address) in every request's extensions.
//!
//! Client certificates work as kube-apiserver handles them: the server *requests* one and
//! checks that the client holds its key (the handshake signature), but trusts nothing yet;
//! the authenticators verify the chain against their own CAs, so a certificate from an
//! unknown CA gets a 401, not a failed handshake.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt};

use crate::authn::{CloseConnection, ConnectionInfo};
use crate::body::Body;

/// The serving TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ServerConfigError(String);

/// A rustls server config from a PEM certificate chain and key that requests (but does
/// not require or trust) client certificates, advertising `client_ca_pem`'s subjects as
/// acceptable issuers, with ALPN `h2` (when `http2`) and `http/1.1`.
pub fn server_config(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: &[u8],
    http2: bool,
) -> Result<Arc<ServerConfig>, ServerConfigError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ServerConfigError(format!("serving certificate: {e}")))?;
    if chain.is_empty() {
        return Err(ServerConfigError(
            "serving certificate: no certificate in PEM".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| ServerConfigError(format!("serving key: {e}")))?;
    let mut hints = Vec::new();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem) {
        let ca = ca.map_err(|e| ServerConfigError(format!("client CA: {e}")))?;
        let (_, parsed) = x509_parser::parse_x509_certificate(&ca)
            .map_err(|e| ServerConfigError(format!("client CA: {e}")))?;
        hints.push(DistinguishedName::from(parsed.subject().as_raw().to_vec()));
    }
    let provider = crate::transport::provider_for_server();
    let verifier = Arc::new(RequestClientCert {
        provider: provider.clone(),
        hints,
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| ServerConfigError(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| ServerConfigError(format!("serving certificate and key: {e}")))?;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

#[derive(Debug)]
struct RequestClientCert {
    provider: Arc<CryptoProvider>,
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    // Chain trust is the authenticators' business (x509 and request-header each have
    // their own CA); here only possession of the key is proven, by the signature checks.
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Serves `service` on `listener` over TLS until `shutdown` completes, then stops
/// accepting, asks open connections to finish (HTTP/2 GOAWAY, HTTP/1.1 close after the
/// current response) and waits for them at most 10 s.
///
/// Each request carries a [`ConnectionInfo`]. A response marked with
/// [`CloseConnection`] (an HTTP/2 401, as upstream) shuts its connection down gracefully
/// once the response is sent. Handshake failures are logged and the connection dropped; a
/// handshake has 10 s to finish.
pub async fn serve_tls<S>(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    service: S,
    shutdown: impl Future<Output = ()> + Send,
) where
    S: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Reap finished connection tasks so the set stays the size of the open ones.
        while connections.try_join_next().is_some() {}
        let (tcp, remote_addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = service.clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let stream = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
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
            let peer: Arc<[CertificateDer<'static>]> = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| c.iter().map(|c| c.clone().into_owned()).collect::<Vec<_>>().into())
                .unwrap_or_else(|| Arc::from(Vec::new()));
            let info = ConnectionInfo { remote_addr: Some(remote_addr), peer_certificates: peer };
            let close = Arc::new(tokio::sync::Notify::new());
            let close_on = close.clone();
            let svc = service
                .map_request(move |mut req: Request<Incoming>| {
                    req.extensions_mut().insert(info.clone());
                    req
                })
                .map_response(move |res: Response<Body>| {
                    if res.extensions().get::<CloseConnection>().is_some() {
                        close_on.notify_one();
                    }
                    res
                });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(svc));
            let mut conn = std::pin::pin!(conn);
            let mut closing = false;
            loop {
                tokio::select! {
                    res = conn.as_mut() => {
                        if let Err(e) = res {
                            tracing::debug!(%remote_addr, error = %e, "connection ended with an error");
                        }
                        return;
                    }
                    () = close.notified(), if !closing => {
                        closing = true;
                        conn.as_mut().graceful_shutdown();
                    }
                    _ = stop.wait_for(|s| *s), if !closing => {
                        closing = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::info!("connections still open after 10 s; closing them");
        connections.abort_all();
    }
}
