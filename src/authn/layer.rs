//! The authentication filter: [`AuthenticationLayer`] and its service, as k8s.io/apiserver
//! [`pkg/endpoints/filters/authentication.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authentication.go)
//! runs it: authenticate, add `system:authenticated`, delete what carried the credentials,
//! then call the handler with the user, or answer 401.

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use http::{Request, Response};

use super::bearer::strip_websocket_bearer;
use super::metrics::AuthenticationMetrics;
use super::{Authenticator, CredentialHeaders, SYSTEM_ANONYMOUS, SYSTEM_UNAUTHENTICATED, UserInfo};
use crate::body::Body;
use crate::filter::{Filter, filter_layer};
use crate::status::Status;

/// Layer that authenticates every request with an [`Authenticator`].
///
/// On success the [`UserInfo`] (with `system:authenticated` added) is in the request
/// extensions, and gone from the headers are `Authorization`, `Proxy-Authorization`,
/// `X-Remote-*`, every header of the authenticator's
/// [`credential_headers`](Authenticator::credential_headers) (e.g. custom request-header
/// names) and the WebSocket bearer subprotocol. Otherwise the answer is 401 with the
/// upstream Status body and the inner service is not called.
///
/// `Impersonate-*` headers stay for the
/// [`ImpersonationLayer`](crate::impersonation::ImpersonationLayer), which must come next:
/// without it the [`AuthorizationLayer`](crate::authz::AuthorizationLayer) refuses such a
/// request rather than serve it as the caller.
///
/// Over HTTP/2, a 401 and any response to an anonymous user carry the [`CloseConnection`]
/// response extension: upstream limits such connections to that one request
/// (CVE-2023-44487 mitigation), and the host's connection loop acts on the marker.
#[derive(Debug)]
pub struct AuthenticationLayer<A> {
    authenticator: Arc<A>,
    strip: Arc<CredentialHeaders>,
    metrics: Option<Arc<AuthenticationMetrics>>,
}

/// Response extension asking the server to close the connection after this response:
/// for HTTP/2, a graceful shutdown (GOAWAY) once the stream is answered. Set on HTTP/2
/// requests that got 401 or were served anonymously (k8s.io/apiserver sets
/// `Connection: close`, which Go's HTTP/2 server turns into a GOAWAY; hyper drops that
/// header on HTTP/2, hence an extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseConnection;

/// Response extension of the 401 a refused request gets: the request's head, with its
/// credentials removed, so a layer outside can record what was refused (the
/// [`FailedAuthenticationAuditLayer`](crate::audit::FailedAuthenticationAuditLayer) does,
/// as upstream's failed-authentication handler does).
#[derive(Debug, Clone)]
pub struct Unauthenticated(pub Arc<http::request::Parts>);

impl<A: Authenticator> AuthenticationLayer<A> {
    /// A layer using `authenticator`. Its
    /// [`credential_headers`](Authenticator::credential_headers) are read once, here.
    pub fn new(authenticator: A) -> Self {
        let strip = authenticator.credential_headers();
        AuthenticationLayer {
            authenticator: Arc::new(authenticator),
            strip: Arc::new(strip),
            metrics: None,
        }
    }

    /// Records each authentication's result and duration in `metrics`.
    pub fn metrics(self, metrics: Arc<AuthenticationMetrics>) -> Self {
        AuthenticationLayer {
            metrics: Some(metrics),
            ..self
        }
    }
}

// The shared parts behind `Arc`s: no `A: Clone` needed.
clone_fields!(AuthenticationLayer<A> { authenticator, strip, metrics });

filter_layer! {
    /// Service of [`AuthenticationLayer`].
    ///
    /// Ready when the inner service is. Each call clones the inner service and keeps the
    /// one driven to readiness for this request (tower's `poll_ready` contract); the
    /// authenticator's future runs first, the inner service only for an authenticated user.
    pub type AuthenticationService<S, A> = FilterService<AuthenticationLayer<A>, S>;
}

/// The inner service's errors pass through.
impl<S, A, B> Filter<S, B> for AuthenticationLayer<A>
where
    S: crate::filter::AwaitedService<B>,
    A: Authenticator,
    B: Send + 'static,
{
    type Future = crate::body::BoxAnswer<S::Error>;

    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        let (parts, body) = req.into_parts();
        let started = self.metrics.as_ref().map(|m| (m.clone(), Instant::now()));
        let mut pending = self.authenticator.authenticate(&parts);
        // An authenticator that answers at once (a client certificate, a cached token)
        // lets the ready inner service be called in place, with no clone of it.
        if let Poll::Ready(result) = crate::rt::poll_now(&mut pending) {
            record(started, &result);
            return match admit(result, parts, &self.strip) {
                Admitted::Serve { parts, close } => {
                    let called = inner.call(Request::from_parts(parts, body));
                    Box::pin(async move { Ok(answered(called.await?, close)) })
                }
                Admitted::Refuse(res) => Box::pin(std::future::ready(Ok(res))),
            };
        }
        // Take the service that was driven to readiness and leave a fresh clone behind
        // (tower's poll_ready contract: readiness is not inherited through Clone).
        let clone = inner.clone();
        let mut inner = std::mem::replace(inner, clone);
        let strip = self.strip.clone();
        Box::pin(async move {
            let result = pending.await;
            record(started, &result);
            match admit(result, parts, &strip) {
                Admitted::Serve { parts, close } => {
                    let res = inner.call(Request::from_parts(parts, body)).await?;
                    Ok(answered(res, close))
                }
                Admitted::Refuse(res) => Ok(res),
            }
        })
    }
}

/// Records `result` in the metrics, if any, with the time since they were taken.
fn record(
    started: Option<(Arc<AuthenticationMetrics>, Instant)>,
    result: &super::AuthenticationResult,
) {
    if let Some((metrics, started)) = started {
        metrics.record(result, started.elapsed().as_secs_f64());
    }
}

/// What authentication's result makes of a request.
enum Admitted {
    /// Serve it: its parts with the user in the extensions and the credentials gone, and
    /// whether the answer closes the connection.
    Serve {
        parts: http::request::Parts,
        close: bool,
    },
    /// Answer this 401 instead.
    Refuse(Response<Body>),
}

/// Authentication's `result` applied to a request's `parts` (see [`Admitted`]).
fn admit(
    result: super::AuthenticationResult,
    mut parts: http::request::Parts,
    strip: &CredentialHeaders,
) -> Admitted {
    let http2 = parts.version == http::Version::HTTP_2;
    match result {
        Ok(Some(mut user)) => {
            user.add_authenticated_group();
            // Upstream deletes credentials and front-proxy headers after every successful
            // authentication so nothing behind can be fooled by them: a client's own
            // `X-Remote-User` must never reach a backend that trusts the aggregator's.
            strip_credentials(&mut parts.headers, strip);
            let close = http2 && is_anonymous(&user);
            parts.extensions.insert(user);
            Admitted::Serve { parts, close }
        }
        Ok(None) => {
            tracing::debug!(uri = %parts.uri, "no authenticator recognised the request");
            Admitted::Refuse(refused(parts, strip))
        }
        Err(err) => {
            tracing::info!(uri = %parts.uri, error = %err, "Unable to authenticate the request");
            Admitted::Refuse(refused(parts, strip))
        }
    }
}

/// Removes what authenticated the request, and identity headers a client may have
/// forged: the front-proxy headers, the authenticators' credential headers, and a
/// WebSocket bearer token in `Sec-WebSocket-Protocol`.
fn strip_credentials(headers: &mut http::HeaderMap, strip: &CredentialHeaders) {
    crate::identity::strip(headers);
    strip.strip(headers);
    strip_websocket_bearer(headers);
}

/// The 401 for a request with head `parts`, which it carries as [`Unauthenticated`],
/// without credentials.
fn refused(mut parts: http::request::Parts, strip: &CredentialHeaders) -> Response<Body> {
    let mut res = unauthorized(parts.version == http::Version::HTTP_2);
    strip_credentials(&mut parts.headers, strip);
    parts.headers.remove(http::header::AUTHORIZATION);
    res.extensions_mut()
        .insert(Unauthenticated(Arc::new(parts)));
    res
}

/// The inner service's answer, as a [`Body`], marked to close the connection if `close`.
fn answered<RB>(res: Response<RB>, close: bool) -> Response<Body>
where
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<crate::body::BoxError>,
{
    let mut res = res.map(Body::new);
    if close {
        res.extensions_mut().insert(CloseConnection);
    }
    res
}

/// `isAnonymousUser` of the upstream filter: the anonymous name or the unauthenticated
/// group.
fn is_anonymous(user: &UserInfo) -> bool {
    user.name == SYSTEM_ANONYMOUS || user.groups.iter().any(|g| g == SYSTEM_UNAUTHENTICATED)
}

/// The 401 `Unauthorized` Status, marked to close the connection over HTTP/2.
fn unauthorized(http2: bool) -> Response<Body> {
    let mut res = Status::unauthorized().into_response();
    if http2 {
        res.extensions_mut().insert(CloseConnection);
    }
    res
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
