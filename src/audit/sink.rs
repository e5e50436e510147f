//! Where audit events go: the [`AuditSink`] seam.

use super::Event;

/// Receives every audit event the [`AuditLayer`](super::AuditLayer) writes (upstream's
/// `audit.Sink`), up to three per request: `RequestReceived`, `ResponseStarted` (for
/// long-running requests) and `ResponseComplete`, unless the policy omits them.
///
/// Called on the request path: a sink that ships events elsewhere queues them and
/// returns at once. `false` means the event was not kept; for a `RequestReceived` event
/// the request is then refused with a 500 (`failed to store audit event`), as upstream
/// refuses it. The event is borrowed: copy what must outlive the call.
///
/// Closures are sinks:
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
    /// Takes one event; `false` when it could not be kept.
    fn process_event(&self, event: &Event) -> bool;
}

impl<F> AuditSink for F
where
    F: Fn(&Event) -> bool + Send + Sync + 'static,
{
    fn process_event(&self, event: &Event) -> bool {
        self(event)
    }
}
