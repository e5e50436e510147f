//! The x509 client-certificate authenticator (k8s.io/apiserver
//! `pkg/authentication/request/x509/x509.go`, reference §7.2).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{AuthenticateFuture, AuthenticationError, Authenticator, ConnectionInfo, UserInfo};

/// Authenticates a request by the client certificate of its TLS connection.
///
/// The chain in [`ConnectionInfo`] is verified against the client CA with the ClientAuth
/// extended key usage required; intermediates come from the presented chain. The user is
/// the subject CommonName (the last one if several), the groups are the subject
/// Organization values in order. No certificate: no opinion. A certificate that does not
/// verify: [`AuthenticationError::CertificateVerification`], so the request gets 401.
#[derive(Clone)]
pub struct X509Authenticator {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for X509Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("X509Authenticator").finish_non_exhaustive()
    }
}

/// The client CA could not be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid client CA: {0}")]
pub struct InvalidClientCa(String);

impl X509Authenticator {
    /// An authenticator trusting the given CA certificates (DER).
    ///
    /// Errors when no certificate is given or one is not a usable trust anchor.
    pub fn new(
        ca_certificates: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Result<Self, InvalidClientCa> {
        let mut roots = RootCertStore::empty();
        for cert in ca_certificates {
            roots
                .add(cert)
                .map_err(|e| InvalidClientCa(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(InvalidClientCa("no CA certificates".into()));
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| InvalidClientCa(e.to_string()))?;
        Ok(X509Authenticator { verifier })
    }

    /// An authenticator trusting the CA certificates of a PEM bundle.
    pub fn from_pem(pem: &[u8]) -> Result<Self, InvalidClientCa> {
        use rustls_pki_types::pem::PemObject;
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| InvalidClientCa(format!("unable to parse bytes as PEM block: {e}")))?;
        Self::new(certs)
    }

    /// Verifies `chain` (leaf first) and converts the leaf into a user; `Ok(None)` when
    /// the chain is empty or the leaf has no CommonName.
    pub fn authenticate_chain(
        &self,
        chain: &[CertificateDer<'static>],
    ) -> Result<Option<UserInfo>, AuthenticationError> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Ok(None);
        };
        let (_, cert) = X509Certificate::from_der(leaf)
            .map_err(|e| AuthenticationError::CertificateParse(e.to_string()))?;
        if let Err(e) = self
            .verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
        {
            return Err(verification_error(&cert, &e.to_string()));
        }
        Ok(user_from_certificate(&cert))
    }
}

impl Authenticator for X509Authenticator {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let result = match parts.extensions.get::<ConnectionInfo>() {
            Some(conn) => self.authenticate_chain(&conn.peer_certificates),
            None => Ok(None),
        };
        Box::pin(std::future::ready(result))
    }
}

/// CN (last) and O values of the subject; `None` for an empty CN.
pub(crate) fn user_from_certificate(cert: &X509Certificate<'_>) -> Option<UserInfo> {
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .last()?
        .to_owned();
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

fn verification_error(cert: &X509Certificate<'_>, reason: &str) -> AuthenticationError {
    use x509_parser::extensions::ParsedExtension;
    let mut skid = String::new();
    let mut akid = String::new();
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            ParsedExtension::SubjectKeyIdentifier(id) => skid = hex_colon(id.0),
            ParsedExtension::AuthorityKeyIdentifier(aki) => {
                if let Some(id) = &aki.key_identifier {
                    akid = hex_colon(id.0);
                }
            }
            _ => {}
        }
    }
    AuthenticationError::CertificateVerification {
        serial: cert.serial.to_str_radix(10),
        skid,
        akid,
        reason: reason.to_owned(),
    }
}

fn hex_colon(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}
