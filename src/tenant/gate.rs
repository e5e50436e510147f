//! The 404 of a tenant that is not mounted, for the layers between authorization and
//! the aggregator (the self reviews), which do not route by tenant themselves.

use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::layer::ResponseFuture;
use super::{Tenant, Tenants};
use crate::body::Body;
use crate::tenancy::not_found;

/// Layer that answers a request in a tenant that is not mounted (a [`Tenant`] in its
/// extensions that `tenants` does not know) with 404 `clusters "<name>" not found`, as
/// the aggregator does; every other request passes. Put it right after authorization,
/// so the self reviews are not answered for a tenant that does not exist and a caller
/// learns of a tenant's absence only once allowed to ask.
///
/// ```
/// # fn f(tenants: kube_aggregator::tenant::Tenants) {
/// use kube_aggregator::tenant::TenantGateLayer;
/// let gate = TenantGateLayer::new(tenants);
/// # let _ = gate;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TenantGateLayer {
    tenants: Option<Tenants>,
}

impl TenantGateLayer {
    /// A gate over `tenants`.
    pub fn new(tenants: Tenants) -> TenantGateLayer {
        TenantGateLayer {
            tenants: Some(tenants),
        }
    }

    /// A gate of a stack without tenants: any request in a tenant is 404.
    pub(crate) fn off() -> TenantGateLayer {
        TenantGateLayer { tenants: None }
    }
}

impl<S> Layer<S> for TenantGateLayer {
    type Service = TenantGate<S>;

    fn layer(&self, inner: S) -> TenantGate<S> {
        TenantGate {
            inner,
            tenants: self.tenants.clone(),
        }
    }
}

/// Service of [`TenantGateLayer`].
#[derive(Debug, Clone)]
pub struct TenantGate<S> {
    inner: S,
    tenants: Option<Tenants>,
}

impl<S> TenantGate<S> {
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

impl<S, B> Service<Request<B>> for TenantGate<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if let Some(tenant) = req.extensions().get::<Tenant>() {
            let mounted = self
                .tenants
                .as_ref()
                .is_some_and(|t| t.get(tenant.name()).is_some());
            if !mounted {
                return ResponseFuture::Ready {
                    response: Some(not_found(tenant)),
                };
            }
        }
        ResponseFuture::Inner {
            inner: self.inner.call(req),
        }
    }
}
