//! Auditing as kube-apiserver does it: the `Audit-Id` every answer carries (its
//! outermost filter, k8s.io/apiserver
//! [`pkg/endpoints/filters/audit_init.go`](https://github.com/kubernetes/apiserver/blob/master/pkg/endpoints/filters/audit_init.go)),
//! the `audit.k8s.io/v1` [`Policy`] of `--audit-policy-file`, which says at which
//! [`Level`] and in which [`Stage`]s a request is audited, the [`AuditLayer`] that writes
//! each request's [`Event`]s to an [`AuditSink`], and the [`AuditContext`] through which
//! the layers behind it add to the event.
//!
//! This module uses the leaf types (the user, the request's `RequestInfo`, `Status`) and
//! the long-running check of [`timeout`](crate::timeout); the
//! [`builder`](crate::builder) uses it.
//!
//! [`AuditIdLayer`] takes the request's own `Audit-ID` header when it is not empty (as it
//! is, unchecked), or makes a new random UUID (lower-case, hyphenated), puts it into the
//! request extensions as [`AuditId`] and into the request's `Audit-ID` header (so the proxy
//! forwards it, and the extension server's audit events share the ID), and sets it on
//! every response: 2xx, 401, 403, 429, 504 alike. A proxied response carries exactly one
//! `Audit-Id`, this one (upstream appends the backend's copy beside it).
//!
//! The `Cache-Control: no-cache, private` upstream sets when the handler set none is
//! tower-http's `SetResponseHeaderLayer::if_not_present` (the gateway example uses it).
//!
//! ```
//! use http::{Request, Response};
//! use kube_aggregator::audit::{AUDIT_ID, AuditId, AuditIdLayer};
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let service = AuditIdLayer::new().layer(tower::service_fn(|req: Request<()>| async move {
//!     // Handlers (and the proxy) see the same ID in the extensions and the header.
//!     let id = req.extensions().get::<AuditId>().unwrap().0.clone();
//!     assert_eq!(req.headers()[AUDIT_ID], id);
//!     Ok::<_, std::convert::Infallible>(Response::new(()))
//! }));
//!
//! // The client's own ID is kept; otherwise a new UUID is made.
//! let req = Request::get("/apis").header("audit-id", "from-the-client").body(()).unwrap();
//! let res = service.clone().oneshot(req).await.unwrap();
//! assert_eq!(res.headers()["audit-id"], "from-the-client");
//! let res = service.oneshot(Request::get("/apis").body(()).unwrap()).await.unwrap();
//! assert_eq!(res.headers()["audit-id"].len(), 36);
//! # }
//! ```
//!
//! Floor 8 of the import order (docs/architecture.md): uses `audit_context`, `authn`,
//! `authz`, `body`, `filter`, `gocompat`, `identity`, `outcome_metrics`, `rt`, `span`,
//! `status`, `timeout`, `webhook`; used by `builder`, `trace`.

mod event;
mod json;
mod layer;
mod log;
mod metrics;
mod policy;
mod sink;
#[cfg(feature = "tokio")]
mod webhook;

pub use event::{Event, EventUser, ObjectReference, ResponseStatus, source_ips};
pub use layer::{
    AuditLayer, AuditService, FailedAuthenticationAuditLayer, FailedAuthenticationAuditService,
    ResponseFuture as AuditResponseFuture,
};
pub use log::{LogConfig, LogError, LogFormat, LogSink, legacy_line};
pub use metrics::AuditMetrics;
pub use policy::{
    GroupResources, Level, Policy, PolicyError, PolicyRule, RequestAuditConfig, Stage,
};
pub use sink::{AuditSink, Processed, UnionSink};
#[cfg(feature = "tokio")]
pub use webhook::{WebhookConfig, WebhookMode, WebhookSink};

pub use crate::audit_context::AuditContext;

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::filter::inner_service_accessors;
use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// `Audit-ID`, the request and response header.
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// A request's audit ID, in its extensions: what audit events and logs of the request
/// should carry (the value is marked sensitive, so HTTP/2 never indexes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditId(pub HeaderValue);

/// Layer that gives every request an audit ID and every response its `Audit-Id`. It sits
/// outermost, as upstream's `WithAuditInit`, so even a 401 or a 504 carries the ID.
#[derive(Debug, Clone, Default)]
pub struct AuditIdLayer {
    audit: Option<Arc<layer::Shared>>,
}

impl AuditIdLayer {
    /// The layer.
    pub fn new() -> AuditIdLayer {
        AuditIdLayer { audit: None }
    }

    /// Also audits the requests an [`AuthenticationLayer`](crate::authn::AuthenticationLayer)
    /// inside refuses, by `audit`'s policy and sink, as the
    /// [`FailedAuthenticationAuditLayer`] does, without a layer of its own (what
    /// [`Aggregator::builder`](crate::Aggregator::builder) uses: each nested layer costs
    /// the compiler dearly).
    pub fn audit_refused(self, audit: &AuditLayer) -> AuditIdLayer {
        AuditIdLayer {
            audit: audit.shared().cloned(),
        }
    }
}

impl<S> Layer<S> for AuditIdLayer {
    type Service = AuditIdService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AuditIdService {
            inner,
            audit: self.audit.clone(),
        }
    }
}

/// Service of [`AuditIdLayer`].
#[derive(Debug, Clone)]
pub struct AuditIdService<S> {
    inner: S,
    audit: Option<Arc<layer::Shared>>,
}

impl<S> AuditIdService<S> {
    inner_service_accessors!();
}

impl<S, B, R> Service<Request<B>> for AuditIdService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let id = match req.headers_mut().get_mut(AUDIT_ID) {
            Some(v) if !v.is_empty() => {
                // Unique per request: HPACK must not spend a table entry on it (which
                // would push out the headers that repeat).
                v.set_sensitive(true);
                v.clone()
            }
            _ => {
                let mut id = new_uuid();
                id.set_sensitive(true);
                req.headers_mut().insert(AUDIT_ID, id.clone());
                id
            }
        };
        req.extensions_mut().insert(AuditId(id.clone()));
        #[cfg(feature = "opentelemetry")]
        req.extensions_mut()
            .insert(crate::span::Received(std::time::SystemTime::now()));
        ResponseFuture {
            inner: self.inner.call(req),
            id: Some(id),
            audit: self
                .audit
                .clone()
                .map(|shared| (shared, std::time::SystemTime::now())),
        }
    }
}

pin_project! {
    /// Response future of [`AuditIdService`].
    #[derive(Debug)]
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
        audit: Option<(Arc<layer::Shared>, std::time::SystemTime)>,
    }
}

impl<F, R, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut res = std::task::ready!(this.inner.poll(cx))?;
        if let Some(id) = this.id.take() {
            res.headers_mut().insert(AUDIT_ID, id);
        }
        if let Some((shared, received)) = this.audit.take() {
            // The 401 does not wait for a blocking sink here (the sink sends the event
            // regardless): a wait would need a state of its own in every request's future.
            drop(layer::audit_refused(&shared, received, &mut res));
        }
        Poll::Ready(Ok(res))
    }
}

/// A random (version 4) UUID. The randomness comes from the operating system, 256 IDs'
/// worth per call, so a request does not pay for a system call.
pub(crate) fn new_uuid() -> HeaderValue {
    const BATCH: usize = 16 * 256;
    thread_local! {
        static POOL: RefCell<(Box<[u8; BATCH]>, usize)> = RefCell::new((Box::new([0; BATCH]), BATCH));
    }
    let bytes = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let (buf, used) = &mut *pool;
        if *used == BATCH {
            use ring::rand::SecureRandom as _;
            // The system source does not fail on supported platforms; should it, each ID
            // of this batch still differs from every other of the process: its first
            // eight bytes are a process-wide counter, the rest the clock's nanoseconds.
            if ring::rand::SystemRandom::new().fill(&mut buf[..]).is_err() {
                tracing::warn!("the system random source failed; audit IDs are less random");
                fill_unique(&mut buf[..]);
            }
            *used = 0;
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&buf[*used..*used + 16]);
        *used += 16;
        out
    });
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid.hyphenated().encode_lower(&mut text);
    // The text owned by the value itself (one allocation), so that its copies (the
    // request's header, the extension, the response's header) share it by count; a copied
    // slice would be moved to a shared buffer, a second allocation, at the first copy.
    HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(text)).unwrap_or(
        HeaderValue::from_static("00000000-0000-4000-8000-000000000000"),
    )
}

/// Fills `buf`, 16 bytes per ID, with IDs unique in the process without randomness: a
/// process-wide counter, then the wall clock's nanoseconds.
fn fill_unique(buf: &mut [u8]) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for id in buf.chunks_exact_mut(16) {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        id[..8].copy_from_slice(&n.to_le_bytes());
        id[8..12].copy_from_slice(&nanos.to_le_bytes());
        id[12..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn every_answer_carries_the_requests_id_or_a_new_uuid() {
        let echo = tower::service_fn(|req: Request<()>| async move {
            let seen = req.extensions().get::<AuditId>().cloned();
            let mut res = Response::new(());
            // A backend's own copy is replaced by this one.
            res.headers_mut()
                .insert(AUDIT_ID, HeaderValue::from_static("from-backend"));
            assert_eq!(seen.map(|a| a.0), req.headers().get(AUDIT_ID).cloned());
            Ok::<_, Infallible>(res)
        });
        let svc = AuditIdLayer::new().layer(echo);
        let given = Request::get("/")
            .header("Audit-ID", "my id, as is")
            .body(())
            .unwrap();
        let res = svc.clone().oneshot(given).await.unwrap();
        assert_eq!(res.headers().get_all(AUDIT_ID).iter().count(), 1);
        assert_eq!(res.headers()[AUDIT_ID], "my id, as is");
        let mut ids = std::collections::HashSet::new();
        for _ in 0..600 {
            let req = Request::get("/").header("Audit-ID", "").body(()).unwrap();
            let res = svc.clone().oneshot(req).await.unwrap();
            let id = res.headers()[AUDIT_ID].to_str().unwrap().to_owned();
            let parsed = uuid::Uuid::parse_str(&id).unwrap();
            assert_eq!(parsed.get_version_num(), 4);
            assert_eq!(id, id.to_ascii_lowercase());
            assert!(ids.insert(id), "IDs are unique");
        }
    }

    #[test]
    fn ids_without_randomness_are_still_unique() {
        let mut first = [0u8; 64];
        let mut second = [0u8; 64];
        fill_unique(&mut first);
        fill_unique(&mut second);
        let ids: std::collections::HashSet<&[u8]> =
            first.chunks(16).chain(second.chunks(16)).collect();
        assert_eq!(ids.len(), 8, "a batch repeated an ID");
    }
}
