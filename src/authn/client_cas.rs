//! `--client-ca-file` and `--requestheader-client-ca-file` as they change at run time:
//! each bundle replaced on its own, and never into a state that start-up refuses.

use std::sync::{Arc, Mutex, PoisonError};

use rustls_pki_types::CertificateDer;

use super::request_header::shared_ca;
use super::x509::ChainVerifier;
use super::{InvalidRequestHeaderConfig, RequestHeaderAuthenticator, X509Authenticator};

/// The trust bundles of client authentication, the x509 client CA and the front proxy's
/// request-header CA, reloaded one file at a time as kube-apiserver's
/// `DynamicFileCAContent` controllers do (k8s.io/apiserver
/// `pkg/server/dynamiccertificates/dynamic_cafile_content.go`): a bundle that does not
/// load is refused and only that bundle keeps its previous content; the other one, and
/// the serving certificate, reload as before.
///
/// Beyond upstream, the rule [`RequestHeaderAuthenticator::check_client_ca_overlap`]
/// applies at start-up applies on every change too: with no
/// `--requestheader-allowed-names`, a new bundle that would make the two share a
/// certificate is refused ([`CaReloadError::SharedCa`]) and the previous one stays, for
/// otherwise any user certificate of that CA could assert any identity through the
/// request-header headers. Changes are applied one at a time, so two files changing
/// together cannot both pass the check against the other's old content.
///
/// Clones share the authenticators they change.
#[derive(Debug, Clone)]
pub struct ClientCas {
    x509: Option<X509Authenticator>,
    front_proxy: Option<RequestHeaderAuthenticator>,
    changing: Arc<Mutex<()>>,
}

/// Why a reloaded CA bundle was refused; the previous bundle stays in use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaReloadError {
    /// The bundle has no usable CA certificate (or a PEM block does not parse).
    #[error("{0}")]
    Invalid(String),
    /// The new bundle shares a certificate with the other one while every CN may act as
    /// the front proxy.
    #[error(
        "the client CA and the requestheader client CA would share the certificate {subject:?} \
         while requestheader allowed names are empty: any user certificate could assert any \
         identity; the previous bundle stays in use"
    )]
    SharedCa {
        /// Subject of the shared certificate.
        subject: String,
    },
    /// There is no authenticator for this bundle (the flag was not set at start-up).
    #[error("no {0} was configured at start-up")]
    NotConfigured(&'static str),
}

impl ClientCas {
    /// The pair as configured at start-up, checked by
    /// [`RequestHeaderAuthenticator::check_client_ca_overlap`].
    ///
    /// # Errors
    ///
    /// [`InvalidRequestHeaderConfig::SharedCa`] when the bundles share a certificate and
    /// every CN may act as the front proxy.
    pub fn new(
        x509: Option<X509Authenticator>,
        front_proxy: Option<RequestHeaderAuthenticator>,
    ) -> Result<ClientCas, InvalidRequestHeaderConfig> {
        if let (Some(x509), Some(front_proxy)) = (&x509, &front_proxy) {
            front_proxy.check_client_ca_overlap(&x509.ca_certificates())?;
        }
        Ok(ClientCas {
            x509,
            front_proxy,
            changing: Arc::default(),
        })
    }

    /// Replaces the x509 client CA with the PEM bundle `pem`.
    ///
    /// # Errors
    ///
    /// A [`CaReloadError`]; the current bundle stays.
    pub fn set_client_ca_pem(&self, pem: &[u8]) -> Result<(), CaReloadError> {
        let _one_at_a_time = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let x509 = self
            .x509
            .as_ref()
            .ok_or(CaReloadError::NotConfigured("client CA"))?;
        let candidate = anchors(pem)?;
        if let Some(front_proxy) = &self.front_proxy {
            if let Some(subject) = front_proxy.shares_ca_with(&candidate) {
                return Err(CaReloadError::SharedCa { subject });
            }
        }
        x509.set_ca_pem(pem)
            .map_err(|e| CaReloadError::Invalid(e.to_string()))
    }

    /// Replaces the request-header CA with the PEM bundle `pem`.
    ///
    /// # Errors
    ///
    /// A [`CaReloadError`]; the current bundle stays.
    pub fn set_requestheader_ca_pem(&self, pem: &[u8]) -> Result<(), CaReloadError> {
        let _one_at_a_time = self.changing.lock().unwrap_or_else(PoisonError::into_inner);
        let front_proxy = self
            .front_proxy
            .as_ref()
            .ok_or(CaReloadError::NotConfigured("requestheader client CA"))?;
        let candidate = anchors(pem)?;
        if let Some(x509) = &self.x509 {
            if front_proxy.allows_any_name() {
                if let Some(subject) = shared_ca(&candidate, &x509.ca_certificates()) {
                    return Err(CaReloadError::SharedCa { subject });
                }
            }
        }
        front_proxy
            .set_ca_pem(pem)
            .map_err(|e| CaReloadError::Invalid(e.to_string()))
    }

    /// The CA certificates whose subjects the serving TLS handshake offers as acceptable
    /// issuers: the client CA's, then the request-header CA's, as now in use.
    pub fn handshake_hints(&self) -> Vec<CertificateDer<'static>> {
        let mut hints: Vec<CertificateDer<'static>> = Vec::new();
        if let Some(x509) = &self.x509 {
            hints.extend(x509.ca_certificates().iter().cloned());
        }
        if let Some(front_proxy) = &self.front_proxy {
            hints.extend(front_proxy.ca_certificates().iter().cloned());
        }
        hints
    }
}

/// The CA certificates of `pem`, checked as the authenticators check a bundle.
fn anchors(pem: &[u8]) -> Result<Arc<[CertificateDer<'static>]>, CaReloadError> {
    ChainVerifier::from_pem(pem)
        .map(|v| v.anchors())
        .map_err(|e| CaReloadError::Invalid(e.to_string()))
}
