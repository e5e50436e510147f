//! The x509 client-certificate authenticator (k8s.io/apiserver
//! [`pkg/authentication/request/x509/x509.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/x509/x509.go)).
//!
//! The chain comes from [`ConnectionInfo`](super::ConnectionInfo) unverified (the TLS
//! server requests a certificate but trusts nothing yet) and is verified here, against
//! this authenticator's CA with the client-auth usage, as kube-apiserver verifies it in
//! its authenticator rather than in the handshake. So a certificate from an unknown CA
//! gets 401, not a failed handshake.

mod chain;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::{CertificateError, Error as TlsError};
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::X509Certificate;

use super::{AuthenticateFuture, AuthenticationError, Authenticator, ConnectionInfo, UserInfo};

pub(crate) use chain::ChainVerifier;

/// The extra key carrying a fingerprint of the credential that authenticated the user.
pub const CREDENTIAL_ID_EXTRA: &str = "authentication.kubernetes.io/credential-id";
/// The subject attribute holding the user's UID (feature `AllowParsingUserUIDFromCertAuth`).
const UID_OID: &str = "1.3.6.1.4.1.57683.2";

/// Authenticates a request by the client certificate of its TLS connection.
///
/// The chain in [`ConnectionInfo`] is verified against the client CA with the ClientAuth
/// extended key usage required; intermediates come from the presented chain. The user is
/// the subject CommonName (the last one if several), the UID the subject attribute
/// `1.3.6.1.4.1.57683.2`, the groups the subject Organization values in order, and the
/// extra `authentication.kubernetes.io/credential-id` is `X509SHA256=<hex of the leaf>`.
/// No certificate, or an empty CN: no opinion. A certificate that does not verify:
/// [`AuthenticationError::CertificateVerification`], so the request gets 401.
///
/// ```
/// use std::sync::Arc;
/// use kube_aggregator::authn::{Authenticator, ConnectionInfo, X509Authenticator};
/// use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A client CA and a certificate for alice in group dev, as kubeadm issues them.
/// let mut ca = CertificateParams::new(Vec::<String>::new())?;
/// ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
/// let ca_key = KeyPair::generate()?;
/// let ca_pem = ca.self_signed(&ca_key)?.pem();
/// let issuer = Issuer::new(ca, ca_key);
/// let mut leaf = CertificateParams::new(Vec::<String>::new())?;
/// leaf.distinguished_name.push(DnType::CommonName, "alice");
/// leaf.distinguished_name.push(DnType::OrganizationName, "dev");
/// leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
/// let cert = leaf.signed_by(&KeyPair::generate()?, &issuer)?;
///
/// let x509 = X509Authenticator::from_pem(ca_pem.as_bytes())?;
/// let mut req = http::Request::get("/apis/metrics.k8s.io/v1beta1").body(())?;
/// req.extensions_mut().insert(ConnectionInfo {
///     remote_addr: None,
///     peer_certificates: Arc::from(vec![cert.der().clone()]),
/// });
/// let user = x509.authenticate(&req.into_parts().0).await?.unwrap();
/// assert_eq!((user.name.as_str(), user.groups.as_slice()), ("alice", ["dev".to_owned()].as_slice()));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct X509Authenticator {
    verifier: ChainVerifier,
}

/// The client CA could not be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid client CA: {0}")]
pub struct InvalidClientCa(pub(crate) String);

impl X509Authenticator {
    /// An authenticator trusting the given CA certificates (DER).
    ///
    /// Errors when no certificate is given or one is not a usable trust anchor.
    pub fn new(
        ca_certificates: impl IntoIterator<Item = CertificateDer<'static>>,
    ) -> Result<Self, InvalidClientCa> {
        Ok(X509Authenticator {
            verifier: ChainVerifier::new(ca_certificates)?,
        })
    }

    /// An authenticator trusting the CA certificates of a PEM bundle.
    pub fn from_pem(pem: &[u8]) -> Result<Self, InvalidClientCa> {
        Ok(X509Authenticator {
            verifier: ChainVerifier::from_pem(pem)?,
        })
    }

    /// The CA certificates this authenticator trusts now (DER), as given.
    pub fn ca_certificates(&self) -> Arc<[CertificateDer<'static>]> {
        self.verifier.anchors()
    }

    /// Trusts the CA certificates of the PEM bundle `pem` from now on (a rotated
    /// `--client-ca-file`), for this authenticator and every clone of it; remembered
    /// verdicts are forgotten. The current bundle stays when `pem` has no usable CA.
    pub fn set_ca_pem(&self, pem: &[u8]) -> Result<(), InvalidClientCa> {
        self.verifier.set_pem(pem)
    }

    /// Verifies `chain` (leaf first) now and converts the leaf into a user; `Ok(None)`
    /// when the chain is empty or the leaf has no CommonName.
    pub fn authenticate_chain(
        &self,
        chain: &[CertificateDer<'static>],
    ) -> Result<Option<UserInfo>, AuthenticationError> {
        self.authenticate_chain_at(chain, UnixTime::now())
    }

    /// [`authenticate_chain`](Self::authenticate_chain) with the validity period checked
    /// at `now` instead of the current time.
    pub fn authenticate_chain_at(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
    ) -> Result<Option<UserInfo>, AuthenticationError> {
        match self.verifier.verify(chain, now)? {
            Some(leaf) => match &leaf.user {
                Ok(user) => Ok(user.as_ref().map(UserInfo::clone_with_group_room)),
                Err(e) => Err(e.clone()),
            },
            None => Ok(None),
        }
    }
}

impl Authenticator for X509Authenticator {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let chain = match parts.extensions.get::<ConnectionInfo>() {
            Some(conn) if !conn.peer_certificates.is_empty() => conn.peer_certificates.clone(),
            _ => return Box::pin(std::future::ready(Ok(None))),
        };
        // Signature checks happen when the future runs, so a union that settles earlier
        // never pays for them.
        let this = self.clone();
        Box::pin(async move { this.authenticate_chain(&chain) })
    }
}

/// The user of a verified leaf (`CommonNameUserConversion`): `Ok(None)` for an empty CN;
/// the UID attribute must be a single non-empty string.
pub(crate) fn user_from_certificate(
    cert: &X509Certificate<'_>,
    leaf_der: &[u8],
) -> Result<Option<UserInfo>, AuthenticationError> {
    let subject = cert.subject();
    // Go's parser keeps the last CN of several; a CN that is not a string counts as empty.
    let name = match subject.iter_common_name().last().map(|a| a.as_str()) {
        Some(Ok(name)) if !name.is_empty() => name.to_owned(),
        _ => return Ok(None),
    };
    let mut uids = Vec::new();
    for attr in subject
        .iter_attributes()
        .filter(|a| a.attr_type().to_id_string() == UID_OID)
    {
        let uid = attr.as_str().map_err(|_| {
            AuthenticationError::Other("unable to parse UID into a string".to_owned())
        })?;
        uids.push(uid.to_owned());
    }
    let uid = match uids.as_slice() {
        [] => String::new(),
        [uid] if uid.is_empty() => {
            return Err(AuthenticationError::Other(
                "UID cannot be an empty string".to_owned(),
            ));
        }
        [uid] => uid.clone(),
        many => {
            return Err(AuthenticationError::Other(format!(
                "expected 1 UID, but found multiple: [{}]",
                many.join(" ")
            )));
        }
    };
    let groups = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok())
        .map(str::to_owned)
        .collect();
    let digest = ring::digest::digest(&ring::digest::SHA256, leaf_der);
    let fingerprint: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let extra = BTreeMap::from([(
        CREDENTIAL_ID_EXTRA.to_owned(),
        vec![format!("X509SHA256={fingerprint}")],
    )]);
    Ok(Some(UserInfo {
        name,
        uid,
        groups,
        extra,
    }))
}

/// Go's `crypto/x509` wording for the failures operators search for; anything else keeps
/// the rustls text.
fn go_reason(err: &TlsError, now: UnixTime) -> String {
    let rfc3339 = |t: UnixTime| {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(t.as_secs());
        humantime::format_rfc3339_seconds(at).to_string()
    };
    let TlsError::InvalidCertificate(cert_err) = err else {
        return err.to_string();
    };
    match cert_err {
        CertificateError::UnknownIssuer => "x509: certificate signed by unknown authority".into(),
        CertificateError::ExpiredContext { time, not_after } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is after {}",
            rfc3339(*time),
            rfc3339(*not_after)
        ),
        CertificateError::NotValidYetContext { time, not_before } => format!(
            "x509: certificate has expired or is not yet valid: current time {} is before {}",
            rfc3339(*time),
            rfc3339(*not_before)
        ),
        CertificateError::Expired | CertificateError::NotValidYet => format!(
            "x509: certificate has expired or is not yet valid: current time {}",
            rfc3339(now)
        ),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "x509: certificate specifies an incompatible key usage".into()
        }
        other => format!("x509: {other:?}"),
    }
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

#[cfg(test)]
#[path = "x509_tests.rs"]
mod tests;
