//! kube-aggregator's OpenAPI v2 regeneration metrics
//! ([`pkg/controllers/openapi/aggregator/metrics.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/openapi/aggregator/metrics.go)):
//! `aggregator_openapi_v2_regeneration_count{apiservice,reason}` and
//! `aggregator_openapi_v2_regeneration_duration{reason}`.
//!
//! Upstream registers both and records them from the merge (`apiservice="*"`,
//! `reason="startup"` for the first document; `add`, `update`, `delete` for an APIService
//! whose spec came, changed or went), though its counter is created without being
//! incremented; here each regeneration counts one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// Why the merged v2 document was built again (upstream's `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// The first document, at start.
    Startup,
    /// An APIService's first spec.
    Add,
    /// An APIService's spec changed (or went, the APIService staying).
    Update,
    /// An APIService with a spec was removed.
    Delete,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Startup => "startup",
            Reason::Add => "add",
            Reason::Update => "update",
            Reason::Delete => "delete",
        }
    }
}

/// The regeneration counts and last durations of one [`OpenApiManager`](super::OpenApiManager);
/// a `prometheus-client` collector (`registry.register_collector(Box::new(metrics))`).
#[derive(Debug, Clone, Default)]
pub struct OpenApiMetrics(Arc<Mutex<Recorded>>);

#[derive(Debug, Default)]
struct Recorded {
    /// By APIService (`*` at start) and reason.
    counts: BTreeMap<(String, Reason), u64>,
    /// The last regeneration's seconds, by reason.
    seconds: BTreeMap<Reason, f64>,
}

impl OpenApiMetrics {
    /// One regeneration, caused by `causes` (APIService and reason), that took `seconds`.
    pub(crate) fn regenerated(&self, causes: &[(String, Reason)], seconds: f64) {
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (apiservice, reason) in causes {
            *r.counts.entry((apiservice.clone(), *reason)).or_default() += 1;
            r.seconds.insert(*reason, seconds);
        }
    }

    /// Regenerations counted for `apiservice` and `reason` (tests, hosts).
    pub fn count(&self, apiservice: &str, reason: &str) -> u64 {
        let r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        r.counts
            .iter()
            .filter(|((a, why), _)| a == apiservice && why.as_str() == reason)
            .map(|(_, n)| *n)
            .sum()
    }
}

impl Collector for OpenApiMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if r.counts.is_empty() {
            return Ok(());
        }
        // Upstream's counter has no `_total` suffix: written untyped, as
        // `authentication_attempts` is, since a typed counter's samples always get one.
        let mut family = encoder.encode_descriptor(
            "aggregator_openapi_v2_regeneration_count",
            "Counter of OpenAPI v2 spec regeneration count broken down by causing APIService name and reason.",
            None,
            MetricType::Unknown,
        )?;
        for ((apiservice, reason), n) in &r.counts {
            let labels = [
                ("apiservice", apiservice.as_str()),
                ("reason", reason.as_str()),
            ];
            ConstGauge::new(*n as i64).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "aggregator_openapi_v2_regeneration_duration",
            "Gauge of OpenAPI v2 spec regeneration duration in seconds.",
            None,
            MetricType::Gauge,
        )?;
        for (reason, seconds) in &r.seconds {
            ConstGauge::new(*seconds)
                .encode(family.encode_family(&[("reason", reason.as_str())])?)?;
        }
        Ok(())
    }
}
