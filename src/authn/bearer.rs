//! Bearer tokens: the `Authorization` header (k8s.io/apiserver
//! [`pkg/authentication/request/bearertoken/bearertoken.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/bearertoken/bearertoken.go))
//! and the WebSocket subprotocol `base64url.bearer.authorization.k8s.io.<token>`
//! ([`pkg/authentication/request/websocket/protocol.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/websocket/protocol.go)),
//! which browsers use because they cannot set headers on a WebSocket.

use std::sync::Arc;

use base64::Engine as _;
use http::header::{AUTHORIZATION, CONNECTION, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use http::{HeaderMap, HeaderValue};

use super::{AuthenticateFuture, AuthenticationError, Authenticator, CredentialHeaders};

/// The WebSocket subprotocol prefix that carries a base64url (unpadded) bearer token.
pub const WEBSOCKET_BEARER_PREFIX: &str = "base64url.bearer.authorization.k8s.io.";

/// The error upstream's bearer authenticator logs for a token its token authenticator did
/// not accept (the client sees 401 either way).
const INVALID_BEARER_TOKEN: &str = "invalid bearer token";

/// Validates a bearer token (k8s.io/apiserver `authenticator.Token`).
///
/// `audiences` are the audiences the server wants the token to be for (empty: none
/// requested). Same contract as [`Authenticator`]: `Ok(Some)` ok, `Ok(None)` not ok,
/// `Err` a failure.
pub trait TokenAuthenticator: Send + Sync + 'static {
    /// Looks `token` up. The future owns what it needs.
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> AuthenticateFuture;
}

impl<T: TokenAuthenticator + ?Sized> TokenAuthenticator for Arc<T> {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> AuthenticateFuture {
        (**self).authenticate_token(token, audiences)
    }
}

/// The token of an `Authorization` header value, as upstream reads it: trimmed, split on
/// single spaces, the first part `bearer` in any case, the token the second part (anything
/// after it ignored). `None` when the header is not a bearer header or the token is empty
/// (`Bearer  token`, with two spaces, is ignored: upstream only warns about it).
///
/// ```
/// use kube_aggregator::authn::bearer_token;
///
/// assert_eq!(bearer_token("Bearer abc.def"), Some("abc.def"));
/// assert_eq!(bearer_token("bearer abc extra"), Some("abc"));
/// assert_eq!(bearer_token("Basic YWxpY2U6cHc="), None);
/// assert_eq!(bearer_token("Bearer  abc"), None);
/// ```
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let value = authorization.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    if token.is_empty() {
        tracing::warn!(
            "the provided Authorization header contains extra space before the bearer token, and is ignored"
        );
        return None;
    }
    Some(token)
}

/// Authenticates `Authorization: Bearer <token>`, or failing that the WebSocket bearer
/// subprotocol of an upgrade request, with a [`TokenAuthenticator`].
///
/// No token: no opinion. A token the token authenticator does not accept:
/// `invalid bearer token` (or its own error), so the request gets 401. After success the
/// layer removes `Authorization` and the bearer subprotocol (the other subprotocols stay).
#[derive(Debug, Clone)]
pub struct BearerToken<T> {
    tokens: Arc<T>,
    audiences: Arc<[String]>,
}

impl<T: TokenAuthenticator> BearerToken<T> {
    /// Bearer authentication with `tokens`, no audiences requested.
    pub fn new(tokens: T) -> Self {
        BearerToken {
            tokens: Arc::new(tokens),
            audiences: Vec::new().into(),
        }
    }

    /// Requests tokens for these audiences (kube-apiserver `--api-audiences`, which the
    /// authentication filter puts in the request context).
    pub fn with_audiences(
        mut self,
        audiences: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.audiences = audiences.into_iter().map(Into::into).collect();
        self
    }

    /// The token authenticator.
    pub fn get_ref(&self) -> &T {
        &self.tokens
    }
}

/// Where the token came from: both sources fail the same way but decode differently.
enum Found {
    Header(String),
    WebSocket(Result<String, &'static str>),
}

/// The token of the request: the `Authorization` header's when it is a bearer header,
/// else the WebSocket subprotocol's of a WebSocket upgrade.
fn find_token(headers: &HeaderMap) -> Option<Found> {
    let header = headers
        .get(AUTHORIZATION)
        .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
        .and_then(bearer_token);
    if let Some(token) = header {
        return Some(Found::Header(token.to_owned()));
    }
    websocket_token(headers).map(Found::WebSocket)
}

/// True for a WebSocket upgrade (`Connection: upgrade` token, `Upgrade: websocket`).
fn is_websocket(headers: &HeaderMap) -> bool {
    let has_upgrade = headers.get_all(CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        })
    });
    has_upgrade
        && headers
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// Subprotocols of every `Sec-WebSocket-Protocol` line, comma-split and trimmed.
fn protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

fn websocket_token(headers: &HeaderMap) -> Option<Result<String, &'static str>> {
    if !is_websocket(headers) {
        return None;
    }
    let mut token = None;
    let mut others = 0;
    for p in protocols(headers) {
        let Some(encoded) = p.strip_prefix(WEBSOCKET_BEARER_PREFIX) else {
            others += 1;
            continue;
        };
        if token.is_some() {
            return Some(Err("multiple base64.bearer.authorization tokens specified"));
        }
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .map_err(|_| "invalid base64.bearer.authorization token encoding");
        let text = decoded.and_then(|d| {
            String::from_utf8(d).map_err(|_| "invalid base64.bearer.authorization token")
        });
        token = Some(text);
    }
    match token {
        Some(Ok(t)) if t.is_empty() => None,
        // The bearer protocol is removed on success, so another one must remain for the
        // server to echo back.
        Some(Ok(_)) if others == 0 => Some(Err("missing additional subprotocol")),
        other => other,
    }
}

/// Removes the bearer subprotocol from `Sec-WebSocket-Protocol`, keeping the others
/// (joined with `,`, as upstream rewrites the header); the header goes when none remain.
pub(crate) fn strip_websocket_bearer(headers: &mut HeaderMap) {
    if !protocols(headers).any(|p| p.starts_with(WEBSOCKET_BEARER_PREFIX)) {
        return;
    }
    let kept: Vec<&str> = protocols(headers)
        .filter(|p| !p.starts_with(WEBSOCKET_BEARER_PREFIX))
        .collect();
    match HeaderValue::from_str(&kept.join(",")) {
        Ok(v) if !kept.is_empty() => {
            headers.insert(SEC_WEBSOCKET_PROTOCOL, v);
        }
        _ => {
            headers.remove(SEC_WEBSOCKET_PROTOCOL);
        }
    }
}

impl<T: TokenAuthenticator> Authenticator for BearerToken<T> {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let token = match find_token(&parts.headers) {
            None => return Box::pin(std::future::ready(Ok(None))),
            Some(Found::WebSocket(Err(e))) => {
                return Box::pin(std::future::ready(Err(AuthenticationError::Other(
                    e.to_owned(),
                ))));
            }
            Some(Found::Header(t) | Found::WebSocket(Ok(t))) => t,
        };
        let lookup = self.tokens.authenticate_token(&token, &self.audiences);
        Box::pin(async move {
            match lookup.await? {
                Some(user) => Ok(Some(user)),
                None => Err(AuthenticationError::Other(INVALID_BEARER_TOKEN.to_owned())),
            }
        })
    }

    fn credential_headers(&self) -> CredentialHeaders {
        CredentialHeaders {
            names: vec![AUTHORIZATION],
            prefixes: Vec::new(),
        }
    }
}

#[cfg(test)]
#[path = "bearer_tests.rs"]
mod tests;
