//! The 404 of a tenant that is not mounted, for the layers between authorization and
//! the aggregator (the self reviews), which do not route by tenant themselves.

use http::Request;

use super::layer::ResponseFuture;
use super::{Tenant, Tenants};
use crate::filter::{BodyService, Filter, Filtered, filter_layer};
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

filter_layer! {
    /// Service of [`TenantGateLayer`].
    pub type TenantGate<S> = FilterService<TenantGateLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for TenantGateLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        if let Some(tenant) = req.extensions().get::<Tenant>() {
            let mounted = self
                .tenants
                .as_ref()
                .is_some_and(|t| t.get(tenant.name()).is_some());
            if !mounted {
                return Filtered::ready(not_found(tenant));
            }
        }
        Filtered::inner(inner.call(req))
    }
}
