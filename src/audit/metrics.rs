//! The audit metrics kube-apiserver exports (k8s.io/apiserver `pkg/audit/metrics.go`),
//! through [`prometheus_client`].

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Level;

/// A label set of one label.
type Label = Vec<(&'static str, &'static str)>;

/// `apiserver_audit_event_total`, `apiserver_audit_error_total{plugin}`,
/// `apiserver_audit_level_total{level}` and `apiserver_audit_requests_rejected_total`,
/// with upstream's names and meanings. The [`AuditLayer`](super::AuditLayer) counts
/// events, levels and rejected requests; the sinks count what they lose, by plugin
/// (`log`, `webhook`, `buffered` for a full batch buffer).
#[derive(Debug, Default)]
pub struct AuditMetrics {
    events: Counter,
    errors: Family<Label, Counter>,
    levels: Family<Label, Counter>,
    rejected: Counter,
}

impl AuditMetrics {
    /// Adds the four metrics to `registry` (`prometheus_client` ends each help text with
    /// the period upstream's have).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "apiserver_audit_event",
            "Counter of audit events generated and sent to the audit backend",
            self.events.clone(),
        );
        registry.register(
            "apiserver_audit_error",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error",
            self.errors.clone(),
        );
        registry.register(
            "apiserver_audit_level",
            "Counter of policy levels for audit events (1 per request)",
            self.levels.clone(),
        );
        registry.register(
            "apiserver_audit_requests_rejected",
            "Counter of apiserver requests rejected due to an error in audit logging backend",
            self.rejected.clone(),
        );
    }

    /// The metrics alone, in the Prometheus text format.
    pub fn render(&self) -> String {
        crate::outcome_metrics::render(|registry| self.register(registry))
    }

    /// One event handed to the sink.
    pub(crate) fn event(&self) {
        self.events.inc();
    }

    /// `events` lost by `plugin`.
    pub fn error(&self, plugin: &'static str, events: u64) {
        self.errors
            .get_or_create(&vec![("plugin", plugin)])
            .inc_by(events);
    }

    /// One request's level, `None` included.
    pub(crate) fn level(&self, level: Level) {
        self.levels
            .get_or_create(&vec![("level", level.as_str())])
            .inc();
    }

    /// One request refused because its first event was lost.
    pub(crate) fn rejected(&self) {
        self.rejected.inc();
    }
}
