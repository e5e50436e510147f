//! The authorization filter: [`AuthorizationLayer`] and its service, as k8s.io/apiserver
//! [`pkg/endpoints/filters/authorization.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authorization.go)
//! runs it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::forbidden::forbidden_response;
use super::{Attributes, Authorizer, Decision, RequestInfo};
use crate::authn::UserInfo;
use crate::body::Body;
use crate::status::internal_error;

/// Layer that authorizes every request with an [`Authorizer`].
///
/// Needs a [`UserInfo`] in the request extensions (put there by
/// [`AuthenticationLayer`](crate::authn::AuthenticationLayer)). Computes the
/// [`RequestInfo`] unless an earlier layer did, and leaves it in the extensions for
/// everything behind. Answers: Allow, the inner service; Deny or NoOpinion, 403 with the
/// upstream message; authorizer error, 500 `Internal Server Error: "<uri>": <error>`; no
/// user, 500; a path RequestInfo cannot parse, 500 as upstream's RequestInfo filter; a
/// request still asking for impersonation (no
/// [`ImpersonationLayer`](crate::impersonation::ImpersonationLayer) in front), 500, never
/// served as the caller.
#[derive(Debug)]
pub struct AuthorizationLayer<Z> {
    authorizer: Arc<Z>,
}

impl<Z: Authorizer> AuthorizationLayer<Z> {
    /// A layer using `authorizer`.
    pub fn new(authorizer: Z) -> Self {
        AuthorizationLayer {
            authorizer: Arc::new(authorizer),
        }
    }
}

// Clone without requiring `Z: Clone`: the authorizer is shared behind an `Arc`.
impl<Z> Clone for AuthorizationLayer<Z> {
    fn clone(&self) -> Self {
        AuthorizationLayer {
            authorizer: self.authorizer.clone(),
        }
    }
}

impl<S: Clone, Z> Clone for AuthorizationService<S, Z> {
    fn clone(&self) -> Self {
        AuthorizationService {
            inner: self.inner.clone(),
            authorizer: self.authorizer.clone(),
        }
    }
}

impl<S, Z> Layer<S> for AuthorizationLayer<Z> {
    type Service = AuthorizationService<S, Z>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthorizationService {
            inner,
            authorizer: self.authorizer.clone(),
        }
    }
}

/// Service of [`AuthorizationLayer`].
#[derive(Debug)]
pub struct AuthorizationService<S, Z> {
    inner: S,
    authorizer: Arc<Z>,
}

impl<S, Z> AuthorizationService<S, Z> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes the layer, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The inner service answers with any body of [`Bytes`](bytes::Bytes) frames; it is
/// boxed into [`Body`] once (not at all when it already is one). Its errors pass through.
impl<S, Z, B, RB> Service<Request<B>> for AuthorizationService<S, Z>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    RB: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    RB::Error: Into<crate::body::BoxError>,
    Z: Authorizer,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        // The request URI appears only in error answers: format it only for them.
        let uri = |req: &Request<B>| req.uri().to_string();
        if let Err(e) = super::request_info::ensure(&mut req) {
            let res = e.into_response(req.uri());
            return Box::pin(std::future::ready(Ok(res)));
        }
        // Impersonation still requested here means no ImpersonationLayer ran: serving the
        // request as the caller would silently ignore `--as`, so it is refused.
        if crate::identity::has_impersonation_headers(req.headers())
            && crate::identity::requested(req.headers()).map_or(true, |r| !r.is_empty())
        {
            return Box::pin(std::future::ready(Ok(internal_error(
                &uri(&req),
                &"impersonation was requested but no impersonation filter checked it",
            ))));
        }
        // The user moves into the attributes and back into the extensions once allowed:
        // no copy of it per request.
        let user = req.extensions_mut().remove::<UserInfo>();
        let (Some(user), Some(info)) = (user, req.extensions().get::<RequestInfo>()) else {
            return Box::pin(std::future::ready(Ok(internal_error(
                &uri(&req),
                &"no user found for request",
            ))));
        };
        let tenant = req.extensions().get::<crate::tenant::Tenant>();
        let attrs = Attributes::new(user, info).in_tenant(tenant);
        let pending = self.authorizer.authorize(&attrs);
        Box::pin(async move {
            match pending.await {
                Ok(a) if a.decision == Decision::Allow => {
                    req.extensions_mut().insert(attrs.user);
                    inner.call(req).await.map(|res| res.map(Body::new))
                }
                Ok(a) => {
                    tracing::debug!(user = %attrs.user.name, verb = %attrs.verb, path = %attrs.path, reason = %a.reason, "forbidden");
                    Ok(forbidden_response(&attrs, &a.reason))
                }
                // Fail closed: an authorizer that could not decide never allows (§8.2).
                Err(e) => Ok(internal_error(&req.uri().to_string(), &e)),
            }
        })
    }
}
