//! The authorization filter: [`AuthorizationLayer`] and its service, as k8s.io/apiserver
//! [`pkg/endpoints/filters/authorization.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/authorization.go)
//! runs it.

use crate::span::{Kind, PathSpan};
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use http::{Request, Response};

use super::forbidden::forbidden_response;
use super::metrics::AuthorizationMetrics;
use super::{Attributes, Authorizer, Decision, RequestInfo};
use crate::authn::UserInfo;
use crate::body::Body;
use crate::filter::{Filter, filter_layer};
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
    metrics: Option<Arc<AuthorizationMetrics>>,
}

impl<Z: Authorizer> AuthorizationLayer<Z> {
    /// A layer using `authorizer`.
    pub fn new(authorizer: Z) -> Self {
        AuthorizationLayer {
            authorizer: Arc::new(authorizer),
            metrics: None,
        }
    }

    /// Records each decision's result and duration in `metrics`.
    pub fn metrics(self, metrics: Arc<AuthorizationMetrics>) -> Self {
        AuthorizationLayer {
            metrics: Some(metrics),
            ..self
        }
    }
}

// The shared parts behind `Arc`s: no `Z: Clone` needed.
clone_fields!(AuthorizationLayer<Z> { authorizer, metrics });

filter_layer! {
    /// Service of [`AuthorizationLayer`].
    pub type AuthorizationService<S, Z> = FilterService<AuthorizationLayer<Z>, S>;
}

/// The inner service's errors pass through.
impl<S, Z, B> Filter<S, B> for AuthorizationLayer<Z>
where
    S: crate::filter::AwaitedService<B>,
    Z: Authorizer,
    B: Send + 'static,
{
    type Future = crate::body::BoxAnswer<S::Error>;

    fn filter(&self, inner: &mut S, mut req: Request<B>) -> Self::Future {
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
        // The user and the RequestInfo's strings move into the attributes, and back into
        // the extensions once allowed: no copy of them per request.
        let user = req
            .extensions_mut()
            .get_mut::<UserInfo>()
            .map(std::mem::take);
        let (Some(user), Some(info)) = (user, req.extensions_mut().get_mut::<RequestInfo>()) else {
            return Box::pin(std::future::ready(Ok(internal_error(
                &uri(&req),
                &"no user found for request",
            ))));
        };
        let attrs = Attributes::lend(user, info);
        let attrs = attrs.in_tenant(req.extensions().get::<crate::tenancy::Tenant>());
        let started = self.metrics.as_ref().map(|m| (m.clone(), Instant::now()));
        // The webhook's calls are polled under this span, and so become its children.
        let span = PathSpan::start(req.extensions(), "authorization", Kind::Internal);
        let mut pending = span.within(self.authorizer.authorize(&attrs));
        // A decision that is there at once (a cached one) lets the ready inner service be
        // called in place, with no clone of it.
        if let Poll::Ready(decision) = crate::rt::poll_now(&mut pending) {
            record(started, &decision, span);
            return match allowed(decision, attrs, req) {
                Allowed::Serve(req) => {
                    let called = inner.call(req);
                    Box::pin(async move { called.await.map(|res| res.map(Body::new)) })
                }
                Allowed::Refuse(res) => Box::pin(std::future::ready(Ok(res))),
            };
        }
        let clone = inner.clone();
        let mut inner = std::mem::replace(inner, clone);
        Box::pin(async move {
            let decision = pending.await;
            record(started, &decision, span);
            match allowed(decision, attrs, req) {
                Allowed::Serve(req) => inner.call(req).await.map(|res| res.map(Body::new)),
                Allowed::Refuse(res) => Ok(res),
            }
        })
    }
}

/// Records `decision` in the metrics, if any, with the time since they were taken, and
/// ends its `span`.
fn record(
    started: Option<(Arc<AuthorizationMetrics>, Instant)>,
    decision: &Result<super::Authorization, super::AuthorizationError>,
    span: PathSpan,
) {
    if let Some((metrics, started)) = started {
        metrics.record(decision, started.elapsed().as_secs_f64());
    }
    match decision {
        Ok(authorization) => {
            let allowed = authorization.decision == super::Decision::Allow;
            span.text("decision", if allowed { "allow" } else { "forbid" });
            if !authorization.reason.is_empty() {
                span.text("reason", &authorization.reason);
            }
        }
        Err(e) => span.error(e),
    }
    span.end();
}

/// The audit annotation with the decision: `allow` or `forbid`.
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The audit annotation with the authorizer's reason (`internal error` when it failed).
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// What an authorizer's decision makes of a request.
enum Allowed<B> {
    /// Serve it, with the user and the RequestInfo's strings back in its extensions.
    Serve(Request<B>),
    /// Answer this instead: 403 for a denial or no opinion, 500 for an authorizer that
    /// could not decide.
    Refuse(Response<Body>),
}

/// `decision` applied to `req` (see [`Allowed`]).
fn allowed<B>(
    decision: Result<super::Authorization, super::AuthorizationError>,
    attrs: Attributes,
    mut req: Request<B>,
) -> Allowed<B> {
    // The audit event's annotations, as upstream's filter writes them.
    let annotate = |req: &Request<B>, pairs: &[(&str, &str)]| {
        crate::audit_context::annotate(req.extensions(), pairs);
    };
    match decision {
        Ok(a) if a.decision == Decision::Allow => {
            annotate(
                &req,
                &[
                    (DECISION_ANNOTATION, "allow"),
                    (REASON_ANNOTATION, &a.reason),
                ],
            );
            let extensions = req.extensions_mut();
            let user = match extensions.get_mut::<RequestInfo>() {
                Some(info) => attrs.give_back(info),
                None => attrs.user,
            };
            // Back into the slot it was taken from: no new box for it.
            match extensions.get_mut::<UserInfo>() {
                Some(slot) => *slot = user,
                None => {
                    extensions.insert(user);
                }
            }
            Allowed::Serve(req)
        }
        Ok(a) => {
            tracing::debug!(user = %attrs.user.name, verb = %attrs.verb, path = %attrs.path, reason = %a.reason, "forbidden");
            annotate(
                &req,
                &[
                    (DECISION_ANNOTATION, "forbid"),
                    (REASON_ANNOTATION, &a.reason),
                ],
            );
            Allowed::Refuse(forbidden_response(&attrs, &a.reason))
        }
        // Fail closed: an authorizer that could not decide never allows (§8.2).
        Err(e) => {
            annotate(&req, &[(REASON_ANNOTATION, "internal error")]);
            Allowed::Refuse(internal_error(&req.uri().to_string(), &e))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use tower::{Layer, Service, ServiceExt};

    use super::*;
    use crate::authz::{AuthorizationError, AuthorizeFuture};
    use crate::testing::{MustBeReady, later};

    /// Answers `.0` to everything, at once or (`.1`) after one `Pending`.
    struct Fixed(Result<Decision, &'static str>, bool);

    impl Authorizer for Fixed {
        fn authorize(&self, _: &Attributes) -> AuthorizeFuture {
            let answer = self.0.map(|d| super::super::Authorization {
                decision: d,
                reason: "policy".into(),
            });
            let answer = answer.map_err(AuthorizationError::new);
            if self.1 {
                Box::pin(later(answer))
            } else {
                Box::pin(std::future::ready(answer))
            }
        }
    }

    fn echo_user() -> impl crate::body::Handles<Infallible> {
        tower::service_fn(|req: Request<Body>| async move {
            let name = req.extensions().get::<UserInfo>().map(|u| u.name.clone());
            Ok(Response::new(Body::full(name.unwrap_or_default())))
        })
    }

    /// Allows everything, keeping a copy of the attributes it was asked about.
    #[derive(Default)]
    struct Recording(std::sync::Mutex<Vec<Attributes>>);

    impl Authorizer for Recording {
        fn authorize(&self, attrs: &Attributes) -> AuthorizeFuture {
            self.0.lock().unwrap().push(attrs.clone());
            Box::pin(std::future::ready(Ok(super::super::Authorization {
                decision: Decision::Allow,
                reason: String::new(),
            })))
        }
    }

    /// The authorizer sees every field of the request's RequestInfo, and the service
    /// behind sees that RequestInfo whole again, with the user.
    #[tokio::test]
    async fn attributes_and_request_info_are_whole_on_both_sides() {
        let path = "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/p1/status";
        let expected = RequestInfo::from_parts(&http::Method::GET, &path.parse().unwrap()).unwrap();
        let authorizer = Arc::new(Recording::default());
        let inner = tower::service_fn(|req: Request<Body>| async move {
            let info = req.extensions().get::<RequestInfo>().cloned();
            let user = req.extensions().get::<UserInfo>().map(|u| u.name.clone());
            Ok::<_, Infallible>(Response::new(Body::full(format!("{user:?} {info:?}"))))
        });
        let mut svc = AuthorizationLayer::new(authorizer.clone()).layer(MustBeReady::new(inner));
        let res = svc
            .ready()
            .await
            .unwrap()
            .call(crate::authn::alice_gets(path))
            .await
            .unwrap();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        let user = UserInfo::new("alice", ["dev"]);
        assert_eq!(
            String::from_utf8_lossy(&body),
            format!("{:?} {:?}", Some(&user.name), Some(&expected))
        );
        let seen = authorizer.0.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0], Attributes::new(seen[0].user.clone(), &expected));
        assert_eq!(seen[0].user.name, "alice");
        assert_eq!(
            (
                seen[0].verb.as_str(),
                seen[0].name.as_str(),
                seen[0].subresource.as_str()
            ),
            ("get", "p1", "status")
        );
    }

    fn request() -> Request<Body> {
        crate::authn::alice_gets("/apis/metrics.k8s.io/v1beta1/nodes")
    }

    /// Allow serves the request as the user, a denial or no opinion is 403 with the
    /// reason, an error 500; the same whether the decision is there at once or later, and
    /// the inner service is only ever called once made ready.
    #[tokio::test]
    async fn decisions_answer_alike_at_once_and_later() {
        let cases = [
            (Ok(Decision::Allow), 200, "alice"),
            (Ok(Decision::Deny), 403, "policy"),
            (Ok(Decision::NoOpinion), 403, "policy"),
            (Err("webhook unreachable"), 500, "webhook unreachable"),
        ];
        for (answer, status, says) in cases {
            for later in [false, true] {
                let mut svc = AuthorizationLayer::new(Fixed(answer, later))
                    .layer(MustBeReady::new(echo_user()));
                for _ in 0..2 {
                    let res = svc.ready().await.unwrap().call(request()).await.unwrap();
                    let what = format!("{answer:?}, later: {later}");
                    assert_eq!(res.status(), status, "{what}");
                    let body = res.into_body().collect().await.unwrap().to_bytes();
                    let body = String::from_utf8_lossy(&body);
                    assert!(body.contains(says), "{what}: {body}");
                }
            }
        }
    }
}
