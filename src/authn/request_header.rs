//! The request-header (front proxy) authenticator: a proxy whose client certificate
//! verifies against the request-header CA names the end user in headers (k8s.io/apiserver
//! [`pkg/authentication/request/headerrequest/requestheader.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/headerrequest/requestheader.go)
//! behind `x509.Verifier`).
//!
//! This is how an extension server trusts the aggregator (its `--requestheader-*`
//! flags), and how kube-apiserver trusts a front proxy: the certificate proves the
//! proxy, the headers name the user. Without a verified proxy certificate the headers are
//! ignored (no opinion), so another authenticator may still vouch for the caller.

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::x509::{ChainVerifier, InvalidClientCa};
use super::{
    AuthenticateFuture, AuthenticationError, Authenticator, ConnectionInfo, CredentialHeaders,
    UserInfo,
};

/// Which headers carry the user, its UID, groups and extra attributes.
///
/// Names are matched case-insensitively (they are trimmed and lower-cased when the
/// authenticator is built). [`Default`] is the delegating defaults of aggregated servers:
/// `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`, no UID header (kube-apiserver
/// itself has no defaults: pass what `--requestheader-*` say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// Username headers, tried in order (`--requestheader-username-headers`).
    pub username_headers: Vec<String>,
    /// UID headers, tried in order (`--requestheader-uid-headers`).
    pub uid_headers: Vec<String>,
    /// Group headers; every value of each is a group (`--requestheader-group-headers`).
    pub group_headers: Vec<String>,
    /// Extra prefixes (`--requestheader-extra-headers-prefix`).
    pub extra_header_prefixes: Vec<String>,
}

impl Default for RequestHeaderConfig {
    fn default() -> Self {
        RequestHeaderConfig {
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: Vec::new(),
            group_headers: vec!["X-Remote-Group".into()],
            extra_header_prefixes: vec!["X-Remote-Extra-".into()],
        }
    }
}

/// A request-header configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRequestHeaderConfig {
    /// The request-header CA bundle.
    #[error("requestheader client CA: {0}")]
    Ca(String),
    /// A configured header name is not a valid HTTP header name.
    #[error("{list}: {name:?} is not a valid header name")]
    HeaderName {
        /// Which list (`username headers`, `uid headers`, ...).
        list: &'static str,
        /// The name as configured.
        name: String,
    },
    /// The client CA and the request-header CA share a certificate while every CN is
    /// allowed, so any user certificate could assert any identity.
    #[error(
        "the client CA and the requestheader client CA share the certificate {subject:?}; \
         set requestheader allowed names so that user certificates cannot act as the front proxy"
    )]
    SharedCa {
        /// Subject of the shared certificate.
        subject: String,
    },
}

/// The subject of the first certificate of `requestheader_ca` that `client_ca` holds too.
pub(crate) fn shared_ca(
    requestheader_ca: &[CertificateDer<'static>],
    client_ca: &[CertificateDer<'static>],
) -> Option<String> {
    let shared = requestheader_ca.iter().find(|a| client_ca.contains(a))?;
    Some(
        x509_parser::parse_x509_certificate(shared)
            .map(|(_, c)| c.subject().to_string())
            .unwrap_or_default(),
    )
}

/// The parsed header lists: lower-case names and prefixes.
#[derive(Debug, Clone, Default)]
struct Headers {
    user: Vec<HeaderName>,
    uid: Vec<HeaderName>,
    group: Vec<HeaderName>,
    extra: Vec<String>,
}

impl RequestHeaderConfig {
    fn parse(&self) -> Result<Headers, InvalidRequestHeaderConfig> {
        let names = |list: &'static str, raw: &[String]| {
            raw.iter()
                .map(|n| n.trim())
                .filter(|n| !n.is_empty())
                .map(|n| {
                    HeaderName::from_bytes(n.to_ascii_lowercase().as_bytes()).map_err(|_| {
                        InvalidRequestHeaderConfig::HeaderName {
                            list,
                            name: n.to_owned(),
                        }
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let extra = names("extra header prefixes", &self.extra_header_prefixes)?;
        Ok(Headers {
            user: names("username headers", &self.username_headers)?,
            uid: names("uid headers", &self.uid_headers)?,
            group: names("group headers", &self.group_headers)?,
            extra: extra.iter().map(|p| p.as_str().to_owned()).collect(),
        })
    }

    /// The user these headers name, or `None` when no username header has a non-empty
    /// first value. Does not verify anything: the caller must have checked the proxy.
    ///
    /// Errors for a header name that is not valid.
    pub fn user_from_headers(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, InvalidRequestHeaderConfig> {
        Ok(self.parse()?.user(headers))
    }

    /// Deletes every header this configuration reads (names and extra prefixes).
    pub fn clear(&self, headers: &mut HeaderMap) -> Result<(), InvalidRequestHeaderConfig> {
        self.parse()?.credential_headers().strip(headers);
        Ok(())
    }
}

/// A header value as text; values that are not UTF-8 count as empty.
fn text(v: &http::HeaderValue) -> &str {
    std::str::from_utf8(v.as_bytes()).unwrap_or_default()
}

impl Headers {
    fn user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        // Only the first value of each header counts: ["", "x"] is empty.
        let first = |names: &[HeaderName]| {
            names
                .iter()
                .filter_map(|n| headers.get(n).map(text))
                .find(|v| !v.is_empty())
        };
        let name = first(&self.user)?.to_owned();
        let uid = first(&self.uid).unwrap_or_default().to_owned();
        let groups = self
            .group
            .iter()
            .flat_map(|n| headers.get_all(n).iter().map(text))
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect();
        let mut extra = BTreeMap::<String, Vec<String>>::new();
        for prefix in &self.extra {
            for (header, value) in headers {
                if let Some(rest) = header.as_str().strip_prefix(prefix.as_str()) {
                    extra
                        .entry(crate::identity::unescape_extra_key(rest))
                        .or_default()
                        .push(text(value).to_owned());
                }
            }
        }
        Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        })
    }

    fn credential_headers(&self) -> CredentialHeaders {
        let mut names = self.user.clone();
        names.extend(self.uid.iter().cloned());
        names.extend(self.group.iter().cloned());
        CredentialHeaders {
            names,
            prefixes: self.extra.clone(),
        }
    }
}

/// Trusts identity headers from a front proxy whose client certificate verifies against
/// the request-header CA (ClientAuth EKU, intermediates from the peer chain) and whose
/// subject CN is allowed (an empty list allows any CN; SANs are never checked).
///
/// Outcomes: no client certificate, or no username header: no opinion. A certificate that
/// does not verify, or a CN not allowed (`x509: subject with cn=<cn> is not in the allowed
/// list`): an error, which [`Union`](super::Union) reports only if nobody else succeeds, so
/// a user certificate from the client CA still authenticates through x509. The headers
/// it reads are listed by [`Authenticator::credential_headers`] and deleted by
/// [`AuthenticationLayer`](super::AuthenticationLayer) after any success.
#[derive(Debug, Clone)]
pub struct RequestHeaderAuthenticator {
    verifier: ChainVerifier,
    allowed_names: std::sync::Arc<[String]>,
    headers: std::sync::Arc<Headers>,
}

impl RequestHeaderAuthenticator {
    /// An authenticator trusting the PEM CA bundle `ca_pem` with the header names of
    /// `config`; any CN is allowed until [`with_allowed_names`](Self::with_allowed_names).
    ///
    /// Errors: a CA bundle without usable certificates, a header name that is not valid.
    pub fn from_pem(
        ca_pem: &[u8],
        config: RequestHeaderConfig,
    ) -> Result<Self, InvalidRequestHeaderConfig> {
        Self::from_verifier(ChainVerifier::from_pem(ca_pem), config)
    }

    /// As [`from_pem`](Self::from_pem) with DER CA certificates.
    pub fn new(
        ca_certificates: impl IntoIterator<Item = CertificateDer<'static>>,
        config: RequestHeaderConfig,
    ) -> Result<Self, InvalidRequestHeaderConfig> {
        Self::from_verifier(ChainVerifier::new(ca_certificates), config)
    }

    fn from_verifier(
        verifier: Result<ChainVerifier, InvalidClientCa>,
        config: RequestHeaderConfig,
    ) -> Result<Self, InvalidRequestHeaderConfig> {
        let verifier = verifier.map_err(|e| InvalidRequestHeaderConfig::Ca(e.0))?;
        Ok(RequestHeaderAuthenticator {
            verifier,
            allowed_names: Vec::new().into(),
            headers: config.parse()?.into(),
        })
    }

    /// Trusts the CA certificates of the PEM bundle `pem` from now on (a rotated
    /// `--requestheader-client-ca-file`), for this authenticator and every clone of it.
    /// The current bundle stays when `pem` has no usable CA.
    pub fn set_ca_pem(&self, pem: &[u8]) -> Result<(), InvalidRequestHeaderConfig> {
        self.verifier
            .set_pem(pem)
            .map_err(|e| InvalidRequestHeaderConfig::Ca(e.0))
    }

    /// Accepts only proxies whose subject CN is one of `names` (exact, case-sensitive;
    /// `--requestheader-allowed-names`). Empty allows any CN.
    pub fn with_allowed_names(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.allowed_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// Refuses a configuration where `client_ca` (the x509 authenticator's CA) shares a
    /// certificate with the request-header CA while every CN is allowed: any user
    /// certificate could then assert any identity. Call it at start-up with the
    /// `--client-ca-file` bundle and refuse to serve on error.
    pub fn check_client_ca_overlap(
        &self,
        client_ca: &[CertificateDer<'static>],
    ) -> Result<(), InvalidRequestHeaderConfig> {
        match self.shares_ca_with(client_ca) {
            None => Ok(()),
            Some(subject) => Err(InvalidRequestHeaderConfig::SharedCa { subject }),
        }
    }

    /// The subject of a certificate this authenticator's CA bundle shares with
    /// `client_ca` while every CN is allowed (the hole of
    /// [`check_client_ca_overlap`](Self::check_client_ca_overlap)); `None` when there is
    /// no hole.
    pub(crate) fn shares_ca_with(&self, client_ca: &[CertificateDer<'static>]) -> Option<String> {
        if !self.allows_any_name() {
            return None;
        }
        shared_ca(&self.verifier.anchors(), client_ca)
    }

    /// True when every CN may act as the front proxy (no allowed names).
    pub(crate) fn allows_any_name(&self) -> bool {
        self.allowed_names.is_empty()
    }

    /// The CA certificates of the current bundle, as given.
    pub fn ca_certificates(&self) -> std::sync::Arc<[CertificateDer<'static>]> {
        self.verifier.anchors()
    }

    /// Verifies `chain` at `now` and checks the CN; `Ok(false)` for an empty chain.
    pub(crate) fn verify_proxy(
        &self,
        chain: &[CertificateDer<'static>],
        now: UnixTime,
    ) -> Result<bool, AuthenticationError> {
        let Some(leaf) = self.verifier.verify(chain, now)? else {
            return Ok(false);
        };
        if self.allowed_names.is_empty() {
            return Ok(true);
        }
        let cn = leaf.common_name.as_str();
        if self.allowed_names.iter().any(|n| n == cn) {
            Ok(true)
        } else {
            Err(AuthenticationError::Other(format!(
                "x509: subject with cn={cn} is not in the allowed list"
            )))
        }
    }
}

impl Authenticator for RequestHeaderAuthenticator {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let chain = match parts.extensions.get::<ConnectionInfo>() {
            Some(conn) if !conn.peer_certificates.is_empty() => conn.peer_certificates.clone(),
            _ => return Box::pin(std::future::ready(Ok(None))),
        };
        let user = self.headers.user(&parts.headers);
        let this = self.clone();
        Box::pin(async move {
            // The proxy is verified even when no username header is present: a presented
            // certificate that fails is an error the union may report (upstream order).
            this.verify_proxy(&chain, UnixTime::now())?;
            Ok(user)
        })
    }

    fn credential_headers(&self) -> CredentialHeaders {
        self.headers.credential_headers()
    }
}

#[cfg(test)]
#[path = "request_header_tests.rs"]
mod tests;
