//! The serving TLS configuration: a certificate, a key, and client certificates requested
//! but verified later by the authenticators.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DistinguishedName, ServerConfig};
use rustls_pki_types::pem::PemObject;

use crate::transport::signature_checks;

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
    let cas: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(client_ca_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ServerConfigError(format!("client CA: {e}")))?;
    server_config_with_hints(cert_chain_pem, key_pem, &cas, http2)
}

/// [`server_config`] with the acceptable issuers given as DER certificates.
pub(crate) fn server_config_with_hints(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    client_cas: &[CertificateDer<'static>],
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
    for ca in client_cas {
        let (_, parsed) = x509_parser::parse_x509_certificate(ca)
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

/// Asks every client for a certificate and accepts any, or none, once the client has
/// proven it holds the key: kube-apiserver's `tls.RequestClientCert`. Which CA a
/// certificate must chain to depends on who presents it (the x509 authenticator's
/// `--client-ca-file`, the front proxy's `--requestheader-client-ca-file`), so the chain
/// is checked there, per request, not in the handshake; a client with no certificate
/// goes on to token or anonymous authentication.
#[derive(Debug)]
struct RequestClientCert {
    /// Its signature algorithms check the client's proof of possession.
    provider: Arc<CryptoProvider>,
    /// The client CAs' subjects, sent as acceptable issuers so a client with several
    /// certificates (kubectl, a front proxy) picks one of them.
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for RequestClientCert {
    /// Every handshake requests a certificate.
    fn offer_client_auth(&self) -> bool {
        true
    }

    /// A client without one is still served (token and anonymous authentication).
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

    signature_checks!(self => self.provider.signature_verification_algorithms);
}
