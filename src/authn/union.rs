//! Chaining authenticators (k8s.io/apiserver
//! [`pkg/authentication/request/union/union.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/union/union.go))
//! and the anonymous fallback
//! ([`pkg/authentication/request/anonymous/anonymous.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/authentication/request/anonymous/anonymous.go)).

use std::sync::Arc;
use std::task::Poll;

use super::{
    AuthenticateFuture, AuthenticationError, Authenticator, CredentialHeaders, SYSTEM_ANONYMOUS,
    SYSTEM_UNAUTHENTICATED, UserInfo,
};

/// The anonymous user: `system:anonymous` in `system:unauthenticated`, no UID or extra.
///
/// [`Anonymous::new`] accepts every request; [`Anonymous::for_paths`] only requests whose
/// exact URL path is listed (upstream's structured `anonymous.conditions`), and has no
/// opinion elsewhere. Use it through [`Union::with_anonymous`], so that presented but
/// invalid credentials are never downgraded to anonymous.
#[derive(Debug, Clone, Default)]
pub struct Anonymous {
    paths: Option<Arc<[String]>>,
}

impl Anonymous {
    /// Anonymous for every request (`--anonymous-auth=true`).
    pub fn new() -> Self {
        Anonymous { paths: None }
    }

    /// Anonymous only for these exact paths, e.g. `/healthz`, `/readyz`, `/livez`.
    ///
    /// ```
    /// use kube_aggregator::authn::{Anonymous, Authenticator};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let probes = Anonymous::for_paths(["/healthz", "/readyz"]);
    /// let (healthz, _) = http::Request::get("/healthz").body(()).unwrap().into_parts();
    /// let (pods, _) = http::Request::get("/api/v1/pods").body(()).unwrap().into_parts();
    /// assert_eq!(probes.authenticate(&healthz).await.unwrap(), Some(Anonymous::user()));
    /// assert_eq!(probes.authenticate(&pods).await.unwrap(), None); // no opinion: 401
    /// # }
    /// ```
    pub fn for_paths(paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Anonymous {
            paths: Some(paths.into_iter().map(Into::into).collect()),
        }
    }

    /// The anonymous user.
    pub fn user() -> UserInfo {
        UserInfo::new(SYSTEM_ANONYMOUS, [SYSTEM_UNAUTHENTICATED])
    }
}

impl Authenticator for Anonymous {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        let allowed = self
            .paths
            .as_ref()
            .is_none_or(|paths| paths.iter().any(|p| p == parts.uri.path()));
        Box::pin(std::future::ready(Ok(allowed.then(Anonymous::user))))
    }
}

/// Tries authenticators in order; the first success wins.
///
/// When nobody succeeds: the errors of the members, joined (`[a, b]` as Go's aggregate
/// prints them), or no opinion when none failed. Then, only if no member failed, the
/// anonymous fallback of [`with_anonymous`](Self::with_anonymous) is asked: that is
/// kube-apiserver's `FailOnError(union, anonymous)`, so a bad bearer token or a client
/// certificate that does not verify gets 401, never anonymous.
///
/// ```
/// use kube_aggregator::authn::{Anonymous, Union, X509Authenticator};
/// # fn f(x509: X509Authenticator) {
/// let chain = Union::new().push(x509).with_anonymous(Anonymous::new());
/// # let _ = chain; }
/// ```
#[derive(Clone, Default)]
pub struct Union {
    members: Vec<Arc<dyn Authenticator>>,
    anonymous: Option<Arc<dyn Authenticator>>,
}

debug_fields!(Union { members.len(), anonymous.is_some() });

impl Union {
    /// An empty union (no opinion on anything).
    pub fn new() -> Self {
        Union::default()
    }

    /// Appends `authenticator`; members are tried in the order they were pushed.
    pub fn push(mut self, authenticator: impl Authenticator) -> Self {
        self.members.push(Arc::new(authenticator));
        self
    }

    /// Sets the fallback asked only when no member succeeded and none failed; usually
    /// [`Anonymous`]. Without one, such requests get 401.
    pub fn with_anonymous(mut self, anonymous: impl Authenticator) -> Self {
        self.anonymous = Some(Arc::new(anonymous));
        self
    }

    /// How many members (the fallback not counted).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

impl Authenticator for Union {
    fn authenticate(&self, parts: &http::request::Parts) -> AuthenticateFuture {
        // A first member that knows the user at once (a client certificate, a cached
        // token) settles it: the others would not be polled.
        let mut first = self.members.first().map(|m| m.authenticate(parts));
        let mut errors: Vec<AuthenticationError> = Vec::new();
        if let Some(fut) = &mut first {
            match crate::rt::poll_now(fut) {
                Poll::Ready(Ok(Some(user))) => return Box::pin(std::future::ready(Ok(Some(user)))),
                Poll::Ready(Ok(None)) => first = None,
                Poll::Ready(Err(e)) => {
                    errors.push(e);
                    first = None;
                }
                Poll::Pending => {}
            }
        }
        // Every other member copies what it needs now; the futures do the work and are
        // polled in order, so members after the first success cost only that copy.
        let rest = self.members.iter().skip(1).map(|m| m.authenticate(parts));
        let pending: Vec<AuthenticateFuture> = first.into_iter().chain(rest).collect();
        let anonymous = self.anonymous.as_ref().map(|a| a.authenticate(parts));
        Box::pin(async move {
            for fut in pending {
                match fut.await {
                    Ok(Some(user)) => return Ok(Some(user)),
                    Ok(None) => {}
                    Err(e) => errors.push(e),
                }
            }
            match errors.len() {
                0 => match anonymous {
                    Some(anon) => anon.await,
                    None => Ok(None),
                },
                1 => Err(errors.remove(0)),
                _ => Err(AuthenticationError::Other(format!(
                    "[{}]",
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        })
    }

    fn credential_headers(&self) -> CredentialHeaders {
        let mut all = CredentialHeaders::default();
        for m in self.members.iter().chain(&self.anonymous) {
            all.merge(m.credential_headers());
        }
        all
    }
}

#[cfg(test)]
#[path = "union_tests.rs"]
mod tests;
