use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::{Authenticator, strip_identity_headers};
use crate::body::Body;
use crate::status::Status;

/// Layer that authenticates every request with an [`Authenticator`].
///
/// On success the [`UserInfo`](super::UserInfo) (with `system:authenticated` added) is in
/// the request extensions and `Authorization`, `Proxy-Authorization`, `X-Remote-*` and
/// `Impersonate-*` are gone from the headers. Otherwise the answer is 401 with the upstream
/// Status body and the inner service is not called.
#[derive(Debug)]
pub struct AuthenticationLayer<A> {
    authenticator: Arc<A>,
}

impl<A: Authenticator> AuthenticationLayer<A> {
    /// A layer using `authenticator`.
    pub fn new(authenticator: A) -> Self {
        AuthenticationLayer {
            authenticator: Arc::new(authenticator),
        }
    }
}

// Clone without requiring `A: Clone`: the authenticator is shared behind an `Arc`.
impl<A> Clone for AuthenticationLayer<A> {
    fn clone(&self) -> Self {
        AuthenticationLayer {
            authenticator: self.authenticator.clone(),
        }
    }
}

impl<S: Clone, A> Clone for AuthenticationService<S, A> {
    fn clone(&self) -> Self {
        AuthenticationService {
            inner: self.inner.clone(),
            authenticator: self.authenticator.clone(),
        }
    }
}

impl<S, A> Layer<S> for AuthenticationLayer<A> {
    type Service = AuthenticationService<S, A>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthenticationService {
            inner,
            authenticator: self.authenticator.clone(),
        }
    }
}

/// Service of [`AuthenticationLayer`].
#[derive(Debug)]
pub struct AuthenticationService<S, A> {
    inner: S,
    authenticator: Arc<A>,
}

impl<S, A> AuthenticationService<S, A> {
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

impl<S, A, B> Service<Request<B>> for AuthenticationService<S, A>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    A: Authenticator,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // Take the service that was driven to readiness and leave a fresh clone behind
        // (tower's poll_ready contract: readiness is not inherited through Clone).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (mut parts, body) = req.into_parts();
        let pending = self.authenticator.authenticate(&parts);
        Box::pin(async move {
            match pending.await {
                Ok(Some(mut user)) => {
                    user.add_authenticated_group();
                    // Upstream deletes credentials and front-proxy headers after every
                    // successful authentication so nothing behind can be fooled by them
                    // (reference §7.9; known failures B05, B07).
                    strip_identity_headers(&mut parts.headers);
                    parts.extensions.insert(user);
                    inner.call(Request::from_parts(parts, body)).await
                }
                Ok(None) => {
                    tracing::debug!(uri = %parts.uri, "no authenticator recognised the request");
                    Ok(unauthorized(&parts))
                }
                Err(err) => {
                    tracing::info!(uri = %parts.uri, error = %err, "authentication failed");
                    Ok(unauthorized(&parts))
                }
            }
        })
    }
}

fn unauthorized(_parts: &http::request::Parts) -> Response<Body> {
    Status::unauthorized().into_response()
}
