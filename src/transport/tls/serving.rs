//! Why a backend's serving certificate was refused, in the words Go's `crypto/x509` and
//! `crypto/tls` use (what kube-aggregator's availability messages carry), found by a
//! verifier that diagnoses what rustls's webpki verifier rejects.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::signature_checks;
use crate::transport::certificate::CertificateSummary;

/// What was wrong with a backend's serving certificate, as [`ServingCertificateError`]
/// tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServingCertificateProblem {
    /// None of the certificate's names is `<service>.<namespace>.svc`.
    NotValidForName,
    /// No CA of the caBundle (or of the platform's roots) issued it.
    UnknownAuthority,
    /// Its `notAfter` has passed.
    Expired,
    /// Its `notBefore` has not come yet.
    NotYetValid,
    /// Another verification failure (bad signature, unsupported algorithm, usage).
    Other,
}

/// The backend's serving certificate failed verification, with what was expected and
/// what the certificate says. Found in the source chain of the
/// [`ConnectError`](crate::transport::ConnectError) of a failed handshake (its text is this
/// error's: Go's `tls: failed to verify certificate: x509: ...` with the values).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.go_text())]
#[non_exhaustive]
pub struct ServingCertificateError {
    /// What failed.
    pub problem: ServingCertificateProblem,
    /// The name the certificate was verified as (`<service>.<namespace>.svc`).
    pub expected_name: String,
    /// The certificate the backend presented; `None` when it did not parse.
    pub certificate: Option<CertificateSummary>,
    /// Subjects of the caBundle's certificates; empty when the platform's roots were used.
    pub ca_bundle_subjects: Vec<String>,
    /// When it was verified.
    pub verified_at: std::time::SystemTime,
    /// rustls' own description of the failure.
    pub detail: String,
}

impl ServingCertificateError {
    /// Go's wording of the same failure, with the values it names.
    fn go_text(&self) -> String {
        let now = humantime::format_rfc3339_seconds(self.verified_at);
        let cert = self.certificate.as_ref();
        let reason = match self.problem {
            ServingCertificateProblem::NotValidForName => {
                let names = cert.map_or_else(|| "unknown names".to_owned(), |c| c.names());
                format!(
                    "certificate is valid for {names}, not {}",
                    self.expected_name
                )
            }
            ServingCertificateProblem::UnknownAuthority => {
                let issuer = cert.map_or("an unknown issuer", |c| c.issuer.as_str());
                format!("certificate signed by unknown authority (issuer {issuer:?})")
            }
            ServingCertificateProblem::Expired => {
                let after = cert.map_or_else(String::new, |c| c.not_after_rfc3339());
                format!(
                    "certificate has expired or is not yet valid: current time {now} is after {after}"
                )
            }
            ServingCertificateProblem::NotYetValid => {
                let before = cert.map_or_else(String::new, |c| c.not_before_rfc3339());
                format!(
                    "certificate has expired or is not yet valid: current time {now} is before {before}"
                )
            }
            ServingCertificateProblem::Other => self.detail.clone(),
        };
        format!("failed to verify certificate: x509: {reason}")
    }
}

/// The webpki verifier of a caBundle, whose failures say what the certificate was: a
/// [`ServingCertificateError`] inside rustls' `CertificateError::Other`.
#[derive(Debug)]
pub(super) struct Diagnosing {
    pub(super) inner: Arc<WebPkiServerVerifier>,
    /// The provider's algorithms, which check the handshake signature (as `inner` would).
    pub(super) algorithms: WebPkiSupportedAlgorithms,
    pub(super) ca_subjects: Vec<String>,
}

impl ServerCertVerifier for Diagnosing {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError as E;
        let err = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(rustls::Error::InvalidCertificate(e)) => e,
            Err(other) => return Err(other),
        };
        let problem = match &err {
            E::NotValidForName | E::NotValidForNameContext { .. } => {
                ServingCertificateProblem::NotValidForName
            }
            E::UnknownIssuer => ServingCertificateProblem::UnknownAuthority,
            E::Expired | E::ExpiredContext { .. } => ServingCertificateProblem::Expired,
            E::NotValidYet | E::NotValidYetContext { .. } => ServingCertificateProblem::NotYetValid,
            _ => ServingCertificateProblem::Other,
        };
        let diagnosis = ServingCertificateError {
            problem,
            expected_name: server_name.to_str().into_owned(),
            certificate: CertificateSummary::from_der(end_entity).ok(),
            ca_bundle_subjects: self.ca_subjects.clone(),
            verified_at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(now.as_secs()),
            detail: err.to_string(),
        };
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Other(rustls::OtherError(Arc::new(diagnosis))),
        ))
    }

    signature_checks!(self => self.algorithms);
}

/// The [`ServingCertificateError`] a failed handshake's error carries, if any.
pub(crate) fn serving_certificate_error(
    err: &(dyn std::error::Error + 'static),
) -> Option<ServingCertificateError> {
    let rustls = crate::transport::find_rustls_error(err)?;
    match rustls {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o)) => {
            o.0.downcast_ref::<ServingCertificateError>().cloned()
        }
        _ => None,
    }
}
