//! Upstream's delegated authentication and authorization request metrics
//! (k8s.io/apiserver `pkg/authentication/authenticatorfactory/metrics.go` and
//! `pkg/authorization/authorizerfactory/metrics.go`): each attempt of a TokenReview or
//! SubjectAccessReview call counted and timed by its HTTP status code, or `<error>` when
//! no answer came (a transport failure, a timeout).

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upstream's buckets for both histograms, in seconds.
const BUCKETS: [f64; 8] = [0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];

/// The `code` label: an HTTP status, or `<error>`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: Code,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Code(Option<u16>);

impl EncodeLabelValue for Code {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        use std::fmt::Write as _;
        match self.0 {
            Some(code) => write!(encoder, "{code}"),
            None => encoder.write_str("<error>"),
        }
    }
}

/// `apiserver_delegated_authn_request_total` and `..._duration_seconds` (or `authz`) of
/// one webhook: made by [`WebhookMetrics::delegated_authn`] or
/// [`WebhookMetrics::delegated_authz`], recorded by the [`WebhookClient`](super::WebhookClient)
/// it is given to ([`WebhookClient::with_metrics`](super::WebhookClient::with_metrics)),
/// added to a registry by [`WebhookMetrics::register`].
#[derive(Debug)]
pub struct WebhookMetrics {
    prefix: &'static str,
    total: Family<CodeLabel, Counter>,
    latency: Family<CodeLabel, Histogram, fn() -> Histogram>,
}

impl WebhookMetrics {
    fn named(prefix: &'static str) -> WebhookMetrics {
        WebhookMetrics {
            prefix,
            total: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
        }
    }

    /// For a TokenReview webhook: `apiserver_delegated_authn_request_*`.
    pub fn delegated_authn() -> WebhookMetrics {
        WebhookMetrics::named("apiserver_delegated_authn_request")
    }

    /// For a SubjectAccessReview webhook: `apiserver_delegated_authz_request_*`.
    pub fn delegated_authz() -> WebhookMetrics {
        WebhookMetrics::named("apiserver_delegated_authz_request")
    }

    /// One attempt: its status code (`None` when no answer came) and how long it took.
    pub(crate) fn attempt(&self, code: Option<u16>, took: Duration) {
        let label = CodeLabel { code: Code(code) };
        self.total.get_or_create(&label).inc();
        self.latency
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Adds both families to `registry`, with upstream's help texts.
    pub fn register(&self, registry: &mut Registry) {
        // `prometheus_client` ends each help text with the period upstream's have.
        registry.register(
            self.prefix,
            "Number of HTTP requests partitioned by status code",
            self.total.clone(),
        );
        registry.register(
            format!("{}_duration_seconds", self.prefix),
            "Request latency in seconds. Broken down by status code",
            self.latency.clone(),
        );
    }

    /// The metrics alone, in the OpenMetrics text format.
    pub fn render(&self) -> String {
        crate::outcome_metrics::render(|registry| self.register(registry))
    }
}
