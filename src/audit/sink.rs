//! Where audit events go: the [`AuditSink`] seam.

use futures_util::future::BoxFuture;

use super::Event;

/// Receives every audit event the [`AuditLayer`](super::AuditLayer) writes (upstream's
/// `audit.Sink`), up to three per request: `RequestReceived`, `ResponseStarted` (for
/// long-running requests) and `ResponseComplete`, unless the policy omits them.
///
/// Called on the request path: a sink that ships events elsewhere queues them and
/// returns at once, or hands back a future the request waits for. A lost
/// `RequestReceived` event refuses the request with a 500 (`failed to store audit
/// event`), as upstream refuses it. The event is borrowed: copy what must outlive the
/// call.
///
/// Closures returning `bool` (kept or not) or [`Processed`] are sinks:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kube_aggregator::audit::{AuditLayer, Event, Policy};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let lines = seen.clone();
/// let policy = Policy::from_bytes(b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n").unwrap();
/// let layer = AuditLayer::new(policy, move |event: &Event| {
///     lines.lock().unwrap().push(event.to_json_line());
///     true
/// });
/// # let _ = layer;
/// ```
pub trait AuditSink: Send + Sync + 'static {
    /// Takes one event: [`Processed::Kept`], [`Processed::Lost`], or, for a sink whose
    /// requests wait for it (a webhook in `blocking` mode), [`Processed::Waiting`].
    fn process_event(&self, event: &Event) -> Processed;
}

/// What became of an event handed to an [`AuditSink`].
pub enum Processed {
    /// Written or queued: the request goes on.
    Kept,
    /// Not kept. A `RequestReceived` event that is lost fails the request (500).
    Lost,
    /// Being handled: the request waits for the future (`true` once kept, `false` if
    /// lost), as upstream's blocking modes make it wait. The sink does the work whether
    /// or not the future is polled: a request given up does not cancel its event.
    Waiting(BoxFuture<'static, bool>),
}

impl std::fmt::Debug for Processed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Processed::Kept => "Kept",
            Processed::Lost => "Lost",
            Processed::Waiting(_) => "Waiting",
        })
    }
}

impl From<bool> for Processed {
    /// `true` is [`Processed::Kept`], `false` [`Processed::Lost`].
    fn from(kept: bool) -> Processed {
        if kept {
            Processed::Kept
        } else {
            Processed::Lost
        }
    }
}

impl<F, R> AuditSink for F
where
    F: Fn(&Event) -> R + Send + Sync + 'static,
    R: Into<Processed>,
{
    fn process_event(&self, event: &Event) -> Processed {
        self(event).into()
    }
}
