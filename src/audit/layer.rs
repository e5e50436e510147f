//! The audit filter: [`AuditLayer`] writes a request's events at each stage, as
//! k8s.io/apiserver
//! [`pkg/endpoints/filters/audit.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/audit.go)
//! does, and [`FailedAuthenticationAuditLayer`] the one event of a request refused by
//! authentication (`authn_audit.go`).

mod failed_authentication;
mod response;

use std::sync::Arc;
use std::time::SystemTime;

use futures_util::future::BoxFuture;
use http::{Request, Response};
use tower::Service;

use super::event::{Event, EventUser, RequestMetadata, ResponseStatus};
use super::{AuditContext, AuditMetrics, AuditSink, Level, Policy, Processed, Stage};
use crate::audit_context::Bodies;
use crate::authn::UserInfo;
use crate::authz::RequestInfo;
use crate::body::Body;
use crate::filter::{BodyService, Filter, filter_layer};
use crate::status::Status;
use crate::timeout::LongRunningCheck;

pub(crate) use failed_authentication::audit_refused;
pub use failed_authentication::{FailedAuthenticationAuditLayer, FailedAuthenticationAuditService};
pub use response::ResponseFuture;
use response::State;

/// Layer that audits every request the [`Policy`] gives a level, placed as upstream
/// places it: after authentication (the event's `user` is the authenticated one), before
/// impersonation and authorization, which record into the request's [`AuditContext`]
/// (`impersonatedUser`, the `authorization.k8s.io/decision` and `/reason` annotations).
///
/// Per request at `Metadata` level or above: a `RequestReceived` event before the request
/// goes on; for a long-running request (a watch, an exec; the [`LongRunningCheck`]) a
/// `ResponseStarted` event when the answer's head is ready; and a `ResponseComplete`
/// event when its body has been sent, or the request was given up (the client went away,
/// the deadline passed: then, as upstream, `responseStatus` is 200 `Connection closed
/// early` unless a code was known). Stages the policy omits are not written. The
/// `responseStatus` carries the code, plus the `Status`'s message, reason and details
/// when the stack itself refused the request. A sink that refuses the `RequestReceived`
/// event fails the request with 500 `failed to store audit event`.
///
/// A sink may make the request wait ([`Processed::Waiting`], a webhook in `blocking`
/// mode): the inner service is called at once but its future is not polled before the
/// `RequestReceived` event is kept (the stack's services do nothing before they are
/// polled), the answer's head waits for `ResponseStarted`, and the body's end for
/// `ResponseComplete`. The layer counts into [`AuditMetrics`] (levels, events, requests
/// refused).
///
/// At `Request` level and above, `requestObject` is what the handler behind recorded with
/// [`AuditContext::log_request_object`], and at `RequestResponse` `responseObject` what it
/// recorded with [`AuditContext::log_response_object`]: the self reviews record theirs;
/// proxied requests have none, as upstream's proxy decodes no body.
///
/// [`AuditLayer::off`] audits nothing and costs nothing.
#[derive(Clone, Default)]
pub struct AuditLayer {
    shared: Option<Arc<Shared>>,
}

/// What the layers of one [`AuditLayer`] share.
pub(crate) struct Shared {
    policy: Policy,
    sink: Arc<dyn AuditSink>,
    long_running: LongRunningCheck,
    metrics: Arc<AuditMetrics>,
}

debug_fields!(Shared {
    policy,
    long_running
});

debug_fields!(Pending { event, done });

impl std::fmt::Debug for AuditLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLayer")
            .field("policy", &self.shared.as_ref().map(|s| &s.policy))
            .finish_non_exhaustive()
    }
}

impl AuditLayer {
    /// Audits by `policy` into `sink`, with kube-apiserver's long-running requests.
    pub fn new(policy: Policy, sink: impl AuditSink) -> AuditLayer {
        AuditLayer::with_sink(policy, Arc::new(sink))
    }

    /// As [`AuditLayer::new`], with a sink already shared.
    pub fn with_sink(policy: Policy, sink: Arc<dyn AuditSink>) -> AuditLayer {
        AuditLayer {
            shared: Some(Arc::new(Shared {
                policy,
                sink,
                long_running: LongRunningCheck::kube_apiserver(),
                metrics: Arc::default(),
            })),
        }
    }

    /// Counts into `metrics` (shared with the sinks, which count what they lose)
    /// instead of a set of its own.
    pub fn with_metrics(self, metrics: Arc<AuditMetrics>) -> AuditLayer {
        self.map(|s| Shared { metrics, ..s })
    }

    /// The audit metrics this layer counts into; `None` when it is off.
    pub fn metrics(&self) -> Option<&Arc<AuditMetrics>> {
        self.shared.as_ref().map(|s| &s.metrics)
    }

    fn map(self, f: impl FnOnce(Shared) -> Shared) -> AuditLayer {
        AuditLayer {
            shared: self.shared.map(|s| {
                Arc::new(f(Shared {
                    policy: s.policy.clone(),
                    sink: s.sink.clone(),
                    long_running: s.long_running.clone(),
                    metrics: s.metrics.clone(),
                }))
            }),
        }
    }

    /// A layer that audits nothing.
    pub fn off() -> AuditLayer {
        AuditLayer { shared: None }
    }

    /// Which requests are long-running (they get a `ResponseStarted` event); the same
    /// check the [`TimeoutLayer`](crate::timeout::TimeoutLayer) is given.
    pub fn long_running(self, check: LongRunningCheck) -> AuditLayer {
        self.map(|s| Shared {
            long_running: check,
            ..s
        })
    }

    /// Whether this layer audits at all.
    pub fn is_on(&self) -> bool {
        self.shared.is_some()
    }

    /// The layer that goes outside the
    /// [`AuthenticationLayer`](crate::authn::AuthenticationLayer) to audit the requests
    /// it refuses, with the same policy and sink. ([`AuditIdLayer::audit_refused`](super::AuditIdLayer::audit_refused)
    /// does the same without a layer of its own.)
    pub fn failed_authentication(&self) -> FailedAuthenticationAuditLayer {
        FailedAuthenticationAuditLayer {
            shared: self.shared.clone(),
        }
    }

    pub(crate) fn shared(&self) -> Option<&Arc<Shared>> {
        self.shared.as_ref()
    }
}

filter_layer! {
    /// Service of [`AuditLayer`].
    pub type AuditService<S> = FilterService<AuditLayer, S>;
}

// The inner answers with `Body`, as every layer of the stack does: a body type inferred
// through each of a dozen nested layers makes the stack's type checking explode.
impl<S: BodyService<B>, B> Filter<S, B> for AuditLayer {
    type Future = ResponseFuture<S::Future>;

    fn filter(&self, inner: &mut S, req: Request<B>) -> Self::Future {
        self.start(inner, req)
    }
}

impl AuditLayer {
    /// The request's audit begun, and the inner call.
    fn start<S, B>(&self, inner: &mut S, mut req: Request<B>) -> ResponseFuture<S::Future>
    where
        S: Service<Request<B>, Response = Response<Body>>,
    {
        let Some(shared) = &self.shared else {
            return ResponseFuture::passthrough(inner.call(req));
        };
        let received = SystemTime::now();
        // A path without a RequestInfo is refused behind, before any handler: upstream's
        // RequestInfo filter refuses it before auditing.
        if crate::authz::request_info::ensure(&mut req).is_err() {
            return ResponseFuture::passthrough(inner.call(req));
        }
        let (mut parts, body) = req.into_parts();
        let Some(info) = parts.extensions.get::<RequestInfo>() else {
            return ResponseFuture::passthrough(inner.call(Request::from_parts(parts, body)));
        };
        let user = parts.extensions.get::<UserInfo>();
        let config = shared.policy.evaluate(user, info);
        shared.metrics.level(config.level);
        if config.level == Level::None {
            return ResponseFuture::passthrough(inner.call(Request::from_parts(parts, body)));
        }
        let long_running = shared.long_running.is_long_running(&parts, info);
        let metadata = RequestMetadata::of(&parts, info, user, received);
        let context = AuditContext::new(Bodies {
            request: config.level >= Level::Request,
            response: config.level >= Level::RequestResponse,
            omit_managed_fields: config.omit_managed_fields,
        });
        parts.extensions.insert(context.clone());
        let mut pending = Pending {
            event: Event::new(config.level, metadata),
            sink: shared.sink.clone(),
            metrics: shared.metrics.clone(),
            omit: mask(&config.omit_stages),
            context,
            long_running,
            done: false,
        };
        let wait = match pending.emit(Stage::RequestReceived) {
            Processed::Kept => None,
            Processed::Lost => return ResponseFuture::ready(pending.refuse()),
            Processed::Waiting(wait) => Some(wait),
        };
        let mut future = ResponseFuture::new(
            inner.call(Request::from_parts(parts, body)),
            State::Audited(Some(Box::new(pending))),
        );
        future.wait = wait;
        future
    }
}

/// The stages `omit` names, as bits.
fn mask(omit: &[Stage]) -> u8 {
    omit.iter().fold(0, |m, s| m | bit(*s))
}

fn bit(stage: Stage) -> u8 {
    1 << stage as u8
}

/// A request's event between its stages. Whatever happens to the request, dropping it
/// writes the `ResponseComplete` event (once).
struct Pending {
    event: Event,
    sink: Arc<dyn AuditSink>,
    metrics: Arc<AuditMetrics>,
    omit: u8,
    context: AuditContext,
    long_running: bool,
    /// The last event was written (or the request was refused before it went on).
    done: bool,
}

impl Pending {
    /// Writes the event at `stage` unless the policy omits it; what the sink made of it.
    fn emit(&mut self, stage: Stage) -> Processed {
        if self.omit & bit(stage) != 0 {
            return Processed::Kept;
        }
        self.event.stage = stage;
        self.event.stage_timestamp = if stage == Stage::RequestReceived {
            self.event.request_received_timestamp
        } else {
            SystemTime::now()
        };
        self.metrics.event();
        self.sink.process_event(&self.event)
    }

    /// Takes in what the layers behind recorded.
    fn gather(&mut self) {
        let recorded = self.context.take();
        for (k, v) in recorded.annotations {
            self.event.annotations.entry(k).or_insert(v);
        }
        if let Some(user) = recorded.impersonated_user {
            self.event.impersonated_user = Some(EventUser::from(&user));
        }
        if recorded.request_object.is_some() {
            self.event.request_object = recorded.request_object;
        }
        if recorded.response_object.is_some() {
            self.event.response_object = recorded.response_object;
        }
    }

    /// The answer's head is ready: the `ResponseStarted` event of a long-running request,
    /// and what the head waits for before it goes out.
    fn started<RB>(&mut self, res: &Response<RB>) -> Option<Wait> {
        self.event.response_status = Some(response_status(res));
        self.gather();
        if !self.long_running {
            return None;
        }
        waiting(self.emit(Stage::ResponseStarted))
    }

    /// The 500 of a request whose `RequestReceived` event the sink lost; no more events.
    fn refuse(&mut self) -> Response<Body> {
        self.done = true;
        self.metrics.rejected();
        crate::status::internal_error(&self.event.request_uri, &"failed to store audit event")
    }

    /// The request is over: the `ResponseComplete` event (once), and what the body's end
    /// waits for.
    fn complete(&mut self) -> Option<Wait> {
        if self.done {
            return None;
        }
        self.done = true;
        if self.event.response_status.is_none() {
            self.event.response_status = Some(ResponseStatus::closed_early());
            if self.long_running {
                // Nobody waits for this one: the sink does its work regardless.
                drop(self.emit(Stage::ResponseStarted));
            }
        }
        self.gather();
        waiting(self.emit(Stage::ResponseComplete))
    }
}

/// A future a request waits on while a sink keeps its event: `true` once kept.
type Wait = BoxFuture<'static, bool>;

/// The future to wait for, if the sink asked for a wait.
fn waiting(processed: Processed) -> Option<Wait> {
    match processed {
        Processed::Waiting(wait) => Some(wait),
        Processed::Kept | Processed::Lost => None,
    }
}

impl Drop for Pending {
    /// A request given up (or whose body was dropped unfinished) still gets its
    /// `ResponseComplete` event; nothing waits for the sink then.
    fn drop(&mut self) {
        drop(self.complete());
    }
}

/// The `responseStatus` of an answer: the `Status` the stack wrote, or just the code.
fn response_status<RB>(res: &Response<RB>) -> ResponseStatus {
    match res.extensions().get::<Status>() {
        Some(status) => ResponseStatus::of_status(status),
        None => ResponseStatus::code(res.status().as_u16()),
    }
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
