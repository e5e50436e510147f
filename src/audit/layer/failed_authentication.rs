//! [`FailedAuthenticationAuditLayer`]: the one audit event of a request that authentication
//! refuses (k8s.io/apiserver `pkg/endpoints/filters/authn_audit.go`).

use std::sync::Arc;
use std::time::SystemTime;

use http::{Request, Response};

use super::{Pending, ResponseFuture, Shared, State, Wait, mask, response_status, waiting};
use crate::audit::event::{Event, RequestMetadata};
use crate::audit::{AuditContext, Level, Stage};
use crate::authn::Unauthenticated;
use crate::authz::RequestInfo;
use crate::filter::{BodyService, Filter, filter_layer};

/// Layer that audits the requests the
/// [`AuthenticationLayer`](crate::authn::AuthenticationLayer) inside it refuses, as
/// upstream's `WithFailedAuthenticationAudit`: one `ResponseStarted` event with an empty
/// `user` and the 401 `Unauthorized` Status, if the policy audits the request when no
/// user is known. Made by [`AuditLayer::failed_authentication`](super::AuditLayer::failed_authentication).
#[derive(Clone, Default)]
pub struct FailedAuthenticationAuditLayer {
    pub(super) shared: Option<Arc<Shared>>,
}

impl std::fmt::Debug for FailedAuthenticationAuditLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FailedAuthenticationAuditLayer")
            .field("on", &self.shared.is_some())
            .finish()
    }
}

filter_layer! {
    /// Service of [`FailedAuthenticationAuditLayer`].
    pub type FailedAuthenticationAuditService<S> = FilterService<FailedAuthenticationAuditLayer, S>;
}

impl<S: BodyService<B>, B> Filter<S, B> for FailedAuthenticationAuditLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
        let Some(shared) = &self.shared else {
            return ResponseFuture::passthrough(inner.call(req));
        };
        // The refused request's head comes back with the 401; its RequestInfo is parsed
        // now, once, for every layer behind.
        let _ = crate::authz::request_info::ensure(&mut req);
        let audit = Some((shared.clone(), SystemTime::now()));
        ResponseFuture::new(inner.call(req), State::Authentication(audit))
    }
}

/// If `res` is the 401 of a request authentication refused (it carries
/// [`Unauthenticated`]), writes its event; the marker is removed either way. What the
/// 401 waits for, if the sink asks for a wait.
pub(crate) fn audit_refused<R>(
    shared: &Arc<Shared>,
    received: SystemTime,
    res: &mut Response<R>,
) -> Option<Wait> {
    let refused = res.extensions_mut().remove::<Unauthenticated>()?;
    audit_failed_authentication(shared, &refused, received, res)
}

/// Writes the event of a request authentication refused with `res`.
pub(super) fn audit_failed_authentication<RB>(
    shared: &Arc<Shared>,
    refused: &Unauthenticated,
    received: SystemTime,
    res: &Response<RB>,
) -> Option<Wait> {
    let parts = &refused.0;
    let info = parts.extensions.get::<RequestInfo>()?;
    let config = shared.policy.evaluate(None, info);
    shared.metrics.level(config.level);
    if config.level == Level::None {
        return None;
    }
    let mut pending = Pending {
        event: Event::new(
            config.level,
            RequestMetadata::of(parts, info, None, received),
        ),
        sink: shared.sink.clone(),
        metrics: shared.metrics.clone(),
        omit: mask(&config.omit_stages),
        context: AuditContext::default(),
        long_running: false,
        done: true,
    };
    pending.event.response_status = Some(response_status(res));
    waiting(pending.emit(Stage::ResponseStarted))
}
