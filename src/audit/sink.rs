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

/// Several sinks as one (upstream's union backend, what kube-apiserver makes of
/// `--audit-log-path` and `--audit-webhook-config-file` together): each event goes to
/// every sink; it is kept only if every sink kept it, and the request waits for every
/// sink that asks for a wait.
#[derive(Clone, Default)]
pub struct UnionSink {
    sinks: Vec<std::sync::Arc<dyn AuditSink>>,
}

debug_fields!(UnionSink { sinks.len() });

impl UnionSink {
    /// No sink yet.
    pub fn new() -> UnionSink {
        UnionSink::default()
    }

    /// Adds `sink`.
    pub fn push(mut self, sink: impl AuditSink) -> UnionSink {
        self.sinks.push(std::sync::Arc::new(sink));
        self
    }

    /// Whether no sink was added.
    pub fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }
}

impl AuditSink for UnionSink {
    fn process_event(&self, event: &Event) -> Processed {
        let mut kept = true;
        let mut waits = Vec::new();
        for sink in &self.sinks {
            match sink.process_event(event) {
                Processed::Kept => {}
                Processed::Lost => kept = false,
                Processed::Waiting(wait) => waits.push(wait),
            }
        }
        if waits.is_empty() {
            return kept.into();
        }
        Processed::Waiting(Box::pin(async move {
            futures_util::future::join_all(waits)
                .await
                .into_iter()
                .fold(kept, |all, one| all && one)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Level;
    use crate::audit::event::RequestMetadata;

    fn event() -> Event {
        Event::new(Level::Metadata, RequestMetadata::get_apis("id".into()))
    }

    #[tokio::test]
    async fn a_union_keeps_an_event_only_if_every_sink_keeps_it() {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = |kept: bool| {
            let seen = seen.clone();
            move |_: &Event| {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                kept
            }
        };
        let union = UnionSink::new().push(counting(true)).push(counting(true));
        assert!(matches!(union.process_event(&event()), Processed::Kept));
        let union = UnionSink::new().push(counting(false)).push(counting(true));
        assert!(matches!(union.process_event(&event()), Processed::Lost));
        // Every sink saw both events, the lost one included.
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 4);

        let waiting =
            |kept: bool| move |_: &Event| Processed::Waiting(Box::pin(async move { kept }));
        for (first, second, kept) in [(true, true, true), (true, false, false)] {
            let union = UnionSink::new()
                .push(counting(true))
                .push(waiting(first))
                .push(waiting(second));
            let Processed::Waiting(wait) = union.process_event(&event()) else {
                panic!("a sink asked for a wait");
            };
            assert_eq!(wait.await, kept);
        }
        let union = UnionSink::new().push(counting(false)).push(waiting(true));
        let Processed::Waiting(wait) = union.process_event(&event()) else {
            panic!("a sink asked for a wait");
        };
        assert!(!wait.await, "lost by the first sink");
        assert!(UnionSink::new().is_empty());
    }
}
