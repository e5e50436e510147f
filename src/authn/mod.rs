//! Authentication: who is calling.
//!
//! [`AuthenticationLayer`] asks an [`Authenticator`] for the caller's [`UserInfo`], puts it
//! into the request extensions, strips the credentials and identity headers a client may
//! have sent, and answers 401 with the upstream `Status` when nobody vouches for the caller
//! (mirrors k8s.io/apiserver `pkg/endpoints/filters/authentication.go`, reference §7.9).
//!
//! The host's TLS accept loop puts a [`ConnectionInfo`] (verified peer chain, remote
//! address) into every request's extensions; certificate-based authenticators read it.
//!
//! ```
//! use kube_aggregator::authn::{AuthenticationLayer, X509Authenticator};
//! # let key = rcgen::KeyPair::generate().unwrap();
//! # let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
//! # params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
//! # let client_ca_pem = params.self_signed(&key).unwrap().pem();
//! // Users are the CN of client certificates signed by the client CA; groups their O.
//! let authn = X509Authenticator::from_pem(client_ca_pem.as_bytes()).expect("client CA");
//! let layer = AuthenticationLayer::new(authn);
//! # let _ = layer;
//! ```

mod layer;
mod x509;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;

pub use layer::{AuthenticationLayer, AuthenticationService};
pub use x509::X509Authenticator;

/// The group every authenticated, non-anonymous user gets (reference §7.8).
pub const SYSTEM_AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const SYSTEM_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user name.
pub const SYSTEM_ANONYMOUS: &str = "system:anonymous";

/// An authenticated user (k8s.io/apiserver `user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserInfo {
    /// User name, e.g. `alice` or `system:kube-aggregator`.
    pub name: String,
    /// Unique id; empty when unknown.
    pub uid: String,
    /// Groups, in the order the authenticator reported them.
    pub groups: Vec<String>,
    /// Extra attributes; keys are expected lower-case.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups.
    pub fn new(
        name: impl Into<String>,
        groups: impl IntoIterator<Item = impl Into<String>>,
    ) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.into_iter().map(Into::into).collect(),
            ..UserInfo::default()
        }
    }

    /// Appends `system:authenticated` unless the user is anonymous or already carries
    /// `system:authenticated` or `system:unauthenticated`
    /// (k8s.io/apiserver `authenticated_group_adder.go`).
    pub fn add_authenticated_group(&mut self) {
        if self.name == SYSTEM_ANONYMOUS {
            return;
        }
        if self
            .groups
            .iter()
            .any(|g| g == SYSTEM_AUTHENTICATED || g == SYSTEM_UNAUTHENTICATED)
        {
            return;
        }
        self.groups.push(SYSTEM_AUTHENTICATED.to_owned());
    }
}

/// What the TLS accept loop learned about the connection a request came on.
///
/// The host inserts one into every request's extensions. `peer_certificates` is the chain
/// the client presented (leaf first), not yet verified: authenticators verify it against
/// their own CA, as kube-apiserver does.
#[derive(Debug, Clone, Default)]
pub struct ConnectionInfo {
    /// The client's address.
    pub remote_addr: Option<SocketAddr>,
    /// The presented certificate chain, leaf first; empty when none.
    pub peer_certificates: Arc<[CertificateDer<'static>]>,
}

/// Why an authenticator refused credentials that were presented.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthenticationError {
    /// The client certificate did not verify against the CA
    /// (`verifying certificate SN=..., SKID=..., AKID=... failed: ...`).
    #[error("verifying certificate SN={serial}, SKID={skid}, AKID={akid} failed: {reason}")]
    CertificateVerification {
        /// Decimal serial number.
        serial: String,
        /// Subject key id, upper-case hex with colons.
        skid: String,
        /// Authority key id, upper-case hex with colons.
        akid: String,
        /// Why verification failed.
        reason: String,
    },
    /// The certificate could not be parsed.
    #[error("unable to parse client certificate: {0}")]
    CertificateParse(String),
    /// Any other failure, named by the authenticator.
    #[error("{0}")]
    Other(String),
}

/// The outcome of one authentication attempt.
pub type AuthenticationResult = Result<Option<UserInfo>, AuthenticationError>;

/// The boxed future an [`Authenticator`] returns.
pub type AuthenticateFuture = Pin<Box<dyn Future<Output = AuthenticationResult> + Send>>;

/// A way of authenticating a request.
///
/// Returns `Ok(Some(user))` when the credentials identify a user, `Ok(None)` when this
/// authenticator has no opinion (no credentials of its kind), and `Err` when credentials
/// of its kind were presented but are invalid: the request then gets 401, never anonymous
/// (the `FailOnError` semantics of reference §7.1).
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates the request described by `parts` (headers, URI, extensions incl.
    /// [`ConnectionInfo`]). The future owns what it needs.
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture;
}

impl<A: Authenticator + ?Sized> Authenticator for Arc<A> {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        (**self).authenticate(parts)
    }
}

/// Request headers that carry identity or credentials and must never travel past the
/// authentication filter (reference §3.4, §7.9): the standard front-proxy headers are
/// matched here; `X-Remote-Extra-*` by prefix.
pub(crate) fn is_identity_header(name: &http::HeaderName) -> bool {
    let n = name.as_str();
    n == "authorization"
        || n == "proxy-authorization"
        || n == "x-remote-user"
        || n == "x-remote-uid"
        || n == "x-remote-group"
        || n.starts_with("x-remote-extra-")
        || n.starts_with("impersonate-")
}

/// Removes every [`is_identity_header`] header in place.
pub(crate) fn strip_identity_headers(headers: &mut http::HeaderMap) {
    let doomed: Vec<http::HeaderName> = headers
        .keys()
        .filter(|n| is_identity_header(n))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_adder_follows_upstream() {
        let mut u = UserInfo::new("alice", ["dev"]);
        u.add_authenticated_group();
        assert_eq!(u.groups, ["dev", SYSTEM_AUTHENTICATED]);
        let mut anon = UserInfo::new(SYSTEM_ANONYMOUS, [SYSTEM_UNAUTHENTICATED]);
        anon.add_authenticated_group();
        assert_eq!(anon.groups, [SYSTEM_UNAUTHENTICATED]);
        let mut already = UserInfo::new("bob", [SYSTEM_AUTHENTICATED]);
        already.add_authenticated_group();
        assert_eq!(already.groups, [SYSTEM_AUTHENTICATED]);
    }

    #[test]
    fn strips_credentials_and_identity_headers() {
        let mut h = http::HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer t"),
            ("x-remote-user", "system:admin"),
            ("x-remote-group", "system:masters"),
            ("x-remote-extra-scopes", "x"),
            ("impersonate-user", "root"),
            ("accept", "application/json"),
        ] {
            h.append(k, v.parse().unwrap());
        }
        strip_identity_headers(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }
}
