//! [`ImpersonationLayer`] and its service: a request without `Impersonate-*` headers
//! passes untouched; one with them is checked item by item, then served as the
//! impersonated user or refused.

use std::sync::Arc;

use http::{Request, Response, StatusCode};
use tower::Service;

use super::{
    InvalidImpersonation, has_impersonation_headers, impersonated_user,
    remove_impersonation_headers, requested,
};
use crate::authn::UserInfo;
use crate::authz::{Authorizer, Decision, forbidden_response};
use crate::body::Body;
use crate::filter::{Filter, Filtered, filter_layer};
use crate::status::{Status, internal_error};

/// Layer that honours `Impersonate-*` headers after checking each with an [`Authorizer`]
/// (see the [module docs](super)).
///
/// Needs a [`UserInfo`] in the request extensions (the
/// [`AuthenticationLayer`](crate::authn::AuthenticationLayer) puts it there).
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use kube_aggregator::Body;
/// use kube_aggregator::authn::UserInfo;
/// use kube_aggregator::authz::AlwaysDeny;
/// use kube_aggregator::impersonation::ImpersonationLayer;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let service = ImpersonationLayer::new(AlwaysDeny).layer(tower::service_fn(|req: Request<Body>| async move {
///     let user = req.extensions().get::<UserInfo>().unwrap().name.clone();
///     Ok::<_, std::convert::Infallible>(Response::new(Body::full(user)))
/// }));
///
/// // kubectl --as=bob, by alice, whom the policy does not let impersonate.
/// let mut req = Request::get("/api/v1/pods").header("impersonate-user", "bob").body(Body::empty()).unwrap();
/// req.extensions_mut().insert(UserInfo::new("alice", ["system:authenticated"]));
/// let res = service.clone().oneshot(req).await.unwrap();
/// assert_eq!(res.status(), StatusCode::FORBIDDEN);
///
/// // Without impersonation headers the request passes untouched.
/// let mut req = Request::get("/api/v1/pods").body(Body::empty()).unwrap();
/// req.extensions_mut().insert(UserInfo::new("alice", ["system:authenticated"]));
/// assert_eq!(service.oneshot(req).await.unwrap().status(), StatusCode::OK);
/// # }
/// ```
#[derive(Debug)]
pub struct ImpersonationLayer<Z> {
    authorizer: Arc<Z>,
}

impl<Z: Authorizer> ImpersonationLayer<Z> {
    /// A layer asking `authorizer` (normally the one the authorization layer uses), shared
    /// (`Arc`) by every service the layer builds.
    pub fn new(authorizer: Z) -> Self {
        ImpersonationLayer {
            authorizer: Arc::new(authorizer),
        }
    }
}

// The shared parts behind `Arc`s: no `Z: Clone` needed.
clone_fields!(ImpersonationLayer<Z> { authorizer });

filter_layer! {
    /// Service of [`ImpersonationLayer`]. Ready when the inner service is; the checks run in
    /// the response future, one authorizer call per requested item, in upstream's order,
    /// stopping at the first that is not an Allow.
    pub type ImpersonationService<S, Z> = FilterService<ImpersonationLayer<Z>, S>;
}

/// The impersonation checks, then the inner call as the impersonated user.
pub type Checking<E> = crate::body::BoxAnswer<E>;

impl<S, Z, B> Filter<S, B> for ImpersonationLayer<Z>
where
    S: Service<Request<B>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send + 'static,
    Z: Authorizer,
    B: Send + 'static,
{
    type Future = ResponseFuture<S::Future, S::Error>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        // The hot path: no impersonation header, nothing to do.
        if !has_impersonation_headers(req.headers()) {
            return Filtered::inner(inner.call(req));
        }
        let items = match requested(req.headers()) {
            Ok(items) if items.is_empty() => {
                // Only an empty Impersonate-User: not impersonation; upstream leaves the
                // headers as they are.
                return Filtered::inner(inner.call(req));
            }
            Ok(items) => items,
            Err(e @ (InvalidImpersonation::NoUser(_) | InvalidImpersonation::NotUtf8(_))) => {
                tracing::debug!(error = %e, "invalid impersonation request");
                let res = Status::failure(StatusCode::BAD_REQUEST, "BadRequest", e.to_string())
                    .into_response();
                return Filtered::ready(res);
            }
        };
        let Some(requester) = req.extensions().get::<UserInfo>().cloned() else {
            let res = internal_error(&req.uri().to_string(), &"no user found for request");
            return Filtered::ready(res);
        };
        // Take the service that was driven to readiness; leave a fresh clone behind.
        let clone = inner.clone();
        let mut inner = std::mem::replace(inner, clone);
        let authorizer = self.authorizer.clone();
        // Impersonation is asked within the request's tenant, as everything else it does.
        let tenant = req.extensions().get::<crate::tenancy::Tenant>().cloned();
        Filtered::wrapped(Box::pin(async move {
            for item in &items {
                let attrs = item.attributes(&requester).in_tenant(tenant.as_ref());
                let verdict = authorizer.authorize(&attrs).await;
                let reason = match verdict {
                    Ok(a) if a.decision == Decision::Allow => continue,
                    Ok(a) => a.reason,
                    // Fail closed: an error is a denial; upstream logs it and shows
                    // only the (here empty) reason.
                    Err(e) => {
                        tracing::info!(user = %requester.name, error = %e, "impersonation check failed");
                        String::new()
                    }
                };
                tracing::debug!(user = %requester.name, resource = %attrs.resource, name = %attrs.name, "impersonation forbidden");
                return Ok(forbidden_response(&attrs, &reason));
            }
            let user = impersonated_user(&items);
            tracing::debug!(
                requester = %requester.name, requester_groups = ?requester.groups,
                user = %user.name, groups = ?user.groups,
                "impersonating"
            );
            remove_impersonation_headers(req.headers_mut());
            if let Some(audit) = req.extensions().get::<crate::audit_context::AuditContext>() {
                audit.log_impersonated_user(&user);
            }
            req.extensions_mut().insert(Impersonated {
                requester: requester.clone(),
            });
            req.extensions_mut().insert(user);
            inner.call(req).await
        }))
    }
}

/// Request extension recording who asked to impersonate, once every check allowed it:
/// the authenticated user, which upstream keeps only for the audit event and its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonated {
    /// The authenticated user that made the request.
    pub requester: UserInfo,
}

/// Response future of [`ImpersonationService`]: the inner call as it is (no
/// impersonation), the checks and then the inner call as the impersonated user, or the
/// refusal made before any check.
pub type ResponseFuture<F, E> = Filtered<F, Checking<E>>;
