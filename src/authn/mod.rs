//! Authentication: who is calling.
//!
//! [`AuthenticationLayer`] asks an [`Authenticator`] for the caller's [`UserInfo`], puts it
//! into the request extensions, strips the credentials and identity headers a client may
//! have sent, and answers 401 with the upstream `Status` when nobody vouches for the caller
//! (mirrors k8s.io/apiserver
//! [`pkg/endpoints/filters/authentication.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authentication.go)).
//!
//! The host's TLS accept loop puts a [`ConnectionInfo`] (verified peer chain, remote
//! address) into every request's extensions; certificate-based authenticators read it.
//!
//! The authenticators, each mirroring its upstream counterpart:
//!
//! | type | upstream | credential |
//! |---|---|---|
//! | [`RequestHeaderAuthenticator`] | `request/headerrequest` + `x509.Verifier` | front-proxy certificate + `X-Remote-*` headers |
//! | [`X509Authenticator`] | `request/x509` | client certificate |
//! | [`BearerToken`] over a [`TokenAuthenticator`] | `request/bearertoken`, `request/websocket` | `Authorization: Bearer`, WebSocket protocol |
//! | [`TokenFileAuthenticator`] | `token/tokenfile` | `--token-auth-file` CSV |
//! | [`TokenReviewAuthenticator`] | `plugin/pkg/authenticator/token/webhook` + `token/cache` | TokenReview webhook |
//! | [`Anonymous`] | `request/anonymous` | none |
//!
//! [`Union`] chains them as kube-apiserver does (k8s.io/apiserver
//! [`pkg/authentication/request/union/union.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/union/union.go)): the first success wins,
//! errors surface only when nobody succeeds, and [`Anonymous`] is consulted only when no
//! authenticator reported an error, so presented-but-invalid credentials get 401.
//!
//! ```
//! use kube_aggregator::authn::{
//!     Anonymous, AuthenticationLayer, BearerToken, RequestHeaderAuthenticator,
//!     RequestHeaderConfig, TokenFileAuthenticator, Union, X509Authenticator,
//! };
//! # let key = rcgen::KeyPair::generate().unwrap();
//! # let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
//! # params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
//! # let ca_pem = params.self_signed(&key).unwrap().pem();
//! # let (client_ca_pem, front_proxy_ca_pem) = (ca_pem.clone(), ca_pem);
//! let front_proxy = RequestHeaderAuthenticator::from_pem(
//!     front_proxy_ca_pem.as_bytes(),
//!     RequestHeaderConfig::default(),
//! )
//! .expect("front-proxy CA")
//! .with_allowed_names(["front-proxy-client"]);
//! let x509 = X509Authenticator::from_pem(client_ca_pem.as_bytes()).expect("client CA");
//! let tokens = TokenFileAuthenticator::from_csv("s3cret,alice,uid-1,\"dev,ops\"\n")
//!     .expect("token file");
//! let chain = Union::new()
//!     .push(front_proxy)
//!     .push(x509)
//!     .push(BearerToken::new(tokens))
//!     .with_anonymous(Anonymous::new());
//! let layer = AuthenticationLayer::new(chain);
//! # let _ = layer;
//! ```
//!
//! Floor 5 of the import order (docs/architecture.md): uses `body`, `filter`, `identity`,
//! `outcome_metrics`, `rt`, `status`, `webhook`; used by `aggregator`, `audit`, `authz`,
//! `builder`, `fuzz_logic`, `impersonation`, `inflight`, `proxy`, `selfreview`, `server`.

mod bearer;
mod client_cas;
mod layer;
mod metrics;
mod request_header;
mod token_cache;
mod token_file;
mod token_review;
mod union;
mod x509;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use bearer::{BearerToken, TokenAuthenticator, WEBSOCKET_BEARER_PREFIX, bearer_token};
pub use client_cas::{CaReloadError, ClientCas};
pub use layer::{AuthenticationLayer, AuthenticationService, CloseConnection, Unauthenticated};
pub use metrics::AuthenticationMetrics;
pub use request_header::{
    InvalidRequestHeaderConfig, RequestHeaderAuthenticator, RequestHeaderConfig,
};
pub use token_cache::CacheTtl;
#[cfg(fuzzing)]
pub(crate) use token_file::parse_csv;
pub use token_file::{TokenFileAuthenticator, TokenFileError};
pub use token_review::TokenReviewAuthenticator;
pub use union::{Anonymous, Union};
pub use x509::{CREDENTIAL_ID_EXTRA, InvalidClientCa, X509Authenticator};

pub use crate::identity::{
    ConnectionInfo, SYSTEM_ANONYMOUS, SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, UserInfo,
};

/// Why an authenticator refused credentials that were presented.
///
/// The client never sees it (every failure is the same 401 `Unauthorized`, as upstream
/// answers); the layer logs it, so the texts are upstream's log texts.
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

/// The outcome of one authentication attempt: a user, no opinion (`Ok(None)`), or
/// presented credentials that are invalid (`Err`).
pub type AuthenticationResult = Result<Option<UserInfo>, AuthenticationError>;

/// The boxed future an [`Authenticator`] returns.
pub type AuthenticateFuture = Pin<Box<dyn Future<Output = AuthenticationResult> + Send>>;

/// A way of authenticating a request.
///
/// Returns `Ok(Some(user))` when the credentials identify a user, `Ok(None)` when this
/// authenticator has no opinion (no credentials of its kind), and `Err` when credentials
/// of its kind were presented but are invalid: the request then gets 401, never anonymous
/// (the `FailOnError` semantics of kube-apiserver's authenticator chain,
/// [`pkg/kubeapiserver/authenticator/config.go`](https://github.com/kubernetes/kubernetes/blob/master/pkg/kubeapiserver/authenticator/config.go)).
///
/// Implemented for `Arc<A>` and `Box<A>`, so one authenticator may sit in several
/// chains, and a chain may hold boxed ones of different types.
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates the request described by `parts` (headers, URI, extensions incl.
    /// [`ConnectionInfo`]). The future owns what it needs.
    ///
    /// Copy what is needed here and do the costly work (signature checks, webhook calls)
    /// inside the future: a [`Union`] asks every member up front and then awaits them in
    /// order, stopping at the first success, so work left in a future that is never polled
    /// costs nothing.
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture;

    /// Headers this authenticator reads identity or credentials from, which
    /// [`AuthenticationLayer`] deletes after every successful authentication, whoever
    /// succeeded (upstream's filter clears the configured request-header names). The
    /// default is none.
    fn credential_headers(&self) -> CredentialHeaders {
        CredentialHeaders::default()
    }
}

impl<A: Authenticator + ?Sized> Authenticator for Arc<A> {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        (**self).authenticate(parts)
    }

    fn credential_headers(&self) -> CredentialHeaders {
        (**self).credential_headers()
    }
}

impl<A: Authenticator + ?Sized> Authenticator for Box<A> {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        (**self).authenticate(parts)
    }

    fn credential_headers(&self) -> CredentialHeaders {
        (**self).credential_headers()
    }
}

/// Header names and name prefixes that carry identity or credentials: what an
/// authenticator reads and the [`AuthenticationLayer`] removes after authentication, so
/// nothing behind it (the proxy least of all) can mistake a client's header for a
/// verified one.
///
/// ```
/// use http::{HeaderMap, HeaderName};
/// use kube_aggregator::authn::CredentialHeaders;
///
/// let custom = CredentialHeaders {
///     names: vec![HeaderName::from_static("x-user")],
///     prefixes: vec!["x-user-extra-".into()],
/// };
/// let mut headers = HeaderMap::new();
/// headers.insert("x-user", "mallory".parse().unwrap());
/// headers.insert("x-user-extra-scopes", "admin".parse().unwrap());
/// headers.insert("accept", "application/json".parse().unwrap());
/// custom.strip(&mut headers);
/// assert_eq!(headers.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CredentialHeaders {
    /// Exact names.
    pub names: Vec<http::HeaderName>,
    /// Lower-case name prefixes, e.g. `x-remote-extra-`.
    pub prefixes: Vec<String>,
}

impl CredentialHeaders {
    /// Adds `other`'s names and prefixes, skipping ones already present.
    pub fn merge(&mut self, other: CredentialHeaders) {
        for n in other.names {
            if !self.names.contains(&n) {
                self.names.push(n);
            }
        }
        for p in other.prefixes {
            if !self.prefixes.contains(&p) {
                self.prefixes.push(p);
            }
        }
    }

    /// True when `name` is one of the names or starts with one of the prefixes.
    pub fn matches(&self, name: &http::HeaderName) -> bool {
        self.names.contains(name) || self.prefixes.iter().any(|p| name.as_str().starts_with(p))
    }

    /// Deletes every matching header from `headers`.
    pub fn strip(&self, headers: &mut http::HeaderMap) {
        if self.names.is_empty() && self.prefixes.is_empty() {
            return;
        }
        let doomed: Vec<http::HeaderName> = headers
            .keys()
            .filter(|n| self.matches(n))
            .cloned()
            .collect();
        for name in doomed {
            headers.remove(&name);
        }
    }
}

/// A GET of `uri` from user `alice` of group `dev`, as the authentication layer would
/// have left it.
#[cfg(test)]
pub(crate) fn alice_gets(uri: &str) -> http::Request<crate::body::Body> {
    let mut req = http::Request::get(uri)
        .body(crate::body::Body::empty())
        .unwrap();
    req.extensions_mut().insert(UserInfo::new("alice", ["dev"]));
    req
}
