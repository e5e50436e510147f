//! The availability metrics of kube-aggregator, as
//! [`pkg/controllers/status/metrics/metrics.go`](https://github.com/kubernetes/kube-aggregator/blob/master/pkg/controllers/status/metrics/metrics.go)
//! defines them, exposed through [`prometheus_client`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::rt::lock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

const GAUGE: &str = "aggregator_unavailable_apiservice";
const GAUGE_HELP: &str =
    "[ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.";
/// The counter's family name; the encoders add the `_total` suffix of its series.
const COUNTER: &str = "aggregator_unavailable_apiservice";
const COUNTER_HELP: &str = "[ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.";
/// Beyond upstream: the transitions of `COUNTER` with their causes.
const CAUSE: &str = "aggregator_unavailable_apiservice_cause";
const CAUSE_HELP: &str = "Counter of APIServices which are marked as unavailable broken down by APIService name, reason and cause.";
/// Beyond upstream: every failed availability check, those of degraded APIServices too.
const FAILED: &str = "aggregator_apiservice_failed_checks";
const FAILED_HELP: &str =
    "Counter of failed availability checks broken down by APIService name and cause.";

/// `aggregator_unavailable_apiservice` (gauge, label `name`: 1 unavailable, 0 available)
/// and `aggregator_unavailable_apiservice_total` (counter, labels `name` and `reason`),
/// maintained by the [`AvailabilityController`](super::AvailabilityController), as
/// upstream's. Beyond upstream, two counters that appear once they have a series:
/// `aggregator_unavailable_apiservice_cause_total` (labels `name`, `reason`, `cause`:
/// the same transitions with the [`UnavailableCause`](super::UnavailableCause)'s name)
/// and `aggregator_apiservice_failed_checks_total` (labels `name`, `cause`: every failed
/// check, a degraded APIService's too).
///
/// A tenant's APIServices (see [`crate::tenant`]) carry one more label, `cluster`, the
/// tenant's name; the stack's own are exposed exactly as upstream's.
///
/// A host that keeps a [`prometheus_client`] [`Registry`] adds both with
/// [`register`](AvailabilityMetrics::register) (or registers the metrics as a
/// [`Collector`] itself); [`render`](AvailabilityMetrics::render) gives them alone in the
/// Prometheus text format, for a host without a registry.
///
/// Series come out sorted by label values, as the Go client's registry gathers them, which
/// is why the metrics are a [`Collector`] over sorted maps rather than two `Family`s
/// (whose series come out in hash order). Upstream's names make the counter's family name
/// (without `_total`) equal the gauge's, which the Prometheus text format (version 0.0.4,
/// [`prometheus_text`](prometheus_client::encoding::prometheus_text), what kube-apiserver
/// serves) keeps apart and OpenMetrics does not: encode with the former.
///
/// ```
/// use kube_aggregator::availability::AvailabilityMetrics;
/// use prometheus_client::encoding::prometheus_text;
/// use prometheus_client::registry::Registry;
///
/// let metrics = AvailabilityMetrics::default();
/// let mut registry = Registry::default();
/// metrics.register(&mut registry);
///
/// metrics.set_unavailable("v1beta1.metrics.k8s.io", true);
/// let mut text = String::new();
/// prometheus_text::encode(&mut text, &registry)?;
/// assert!(text.contains("aggregator_unavailable_apiservice{name=\"v1beta1.metrics.k8s.io\"} 1\n"));
/// # Ok::<(), std::fmt::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct AvailabilityMetrics {
    series: Arc<Series>,
}

/// The values, shared with every registry the metrics are registered in.
#[derive(Debug, Default)]
struct Series {
    /// By (tenant, APIService); the tenant is empty for the stack's own.
    gauge: Mutex<BTreeMap<(String, String), bool>>,
    /// By (tenant, APIService, reason).
    counter: Mutex<BTreeMap<(String, String, String), u64>>,
    /// By (tenant, APIService, reason, cause).
    causes: Mutex<BTreeMap<(String, String, String, String), u64>>,
    /// By (tenant, APIService, cause).
    failed: Mutex<BTreeMap<(String, String, String), u64>>,
}

impl AvailabilityMetrics {
    /// Sets the gauge of `name`: 1 when unavailable, 0 when available.
    pub fn set_unavailable(&self, name: &str, unavailable: bool) {
        self.set_unavailable_in("", name, unavailable);
    }

    /// Counts a transition of `name` from available to unavailable with `reason`.
    pub fn unavailable_transition(&self, name: &str, reason: &str) {
        self.unavailable_transition_in("", name, reason);
    }

    /// Forgets the gauge of a deleted APIService (its counter series stay, as upstream's).
    pub fn forget(&self, name: &str) {
        self.forget_in("", name);
    }

    /// [`AvailabilityMetrics::set_unavailable`] for tenant `tenant`'s APIService (`""`:
    /// the stack's own).
    pub fn set_unavailable_in(&self, tenant: &str, name: &str, unavailable: bool) {
        lock(&self.series.gauge).insert((tenant.to_owned(), name.to_owned()), unavailable);
    }

    /// [`AvailabilityMetrics::unavailable_transition`] for tenant `tenant`'s APIService.
    pub fn unavailable_transition_in(&self, tenant: &str, name: &str, reason: &str) {
        *lock(&self.series.counter)
            .entry((tenant.to_owned(), name.to_owned(), reason.to_owned()))
            .or_default() += 1;
    }

    /// Counts a transition of tenant `tenant`'s APIService `name` (`""`: the stack's own)
    /// to unavailable with `reason` and the cause's name
    /// ([`UnavailableCause::name`](super::UnavailableCause::name)):
    /// `aggregator_unavailable_apiservice_cause_total{name,reason,cause}`.
    pub fn unavailable_cause_in(&self, tenant: &str, name: &str, reason: &str, cause: &str) {
        *lock(&self.series.causes)
            .entry((
                tenant.to_owned(),
                name.to_owned(),
                reason.to_owned(),
                cause.to_owned(),
            ))
            .or_default() += 1;
    }

    /// Counts a failed check of tenant `tenant`'s APIService `name` with the cause's name,
    /// whether or not it changed the condition (a degraded APIService's failures count
    /// too): `aggregator_apiservice_failed_checks_total{name,cause}`.
    pub fn failed_check_in(&self, tenant: &str, name: &str, cause: &str) {
        *lock(&self.series.failed)
            .entry((tenant.to_owned(), name.to_owned(), cause.to_owned()))
            .or_default() += 1;
    }

    /// [`AvailabilityMetrics::forget`] for tenant `tenant`'s APIService.
    pub fn forget_in(&self, tenant: &str, name: &str) {
        lock(&self.series.gauge).remove(&(tenant.to_owned(), name.to_owned()));
    }

    /// Adds both metrics to `registry`; every encoding of it reads their current values.
    /// Under a [`sub_registry_with_prefix`](Registry::sub_registry_with_prefix) the names
    /// take the prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.series.clone()));
    }

    /// Both metrics, and nothing else, in the Prometheus text format (version 0.0.4,
    /// Content-Type [`prometheus_text::CONTENT_TYPE`](prometheus_client::encoding::prometheus_text::CONTENT_TYPE)).
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        let mut out = String::new();
        // A `String` never refuses a write, and the collector fails only when the writer does.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }
}

impl Collector for AvailabilityMetrics {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.series.encode(encoder)
    }
}

impl Collector for Series {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = lock(&self.gauge);
        let mut family = encoder.encode_descriptor(GAUGE, GAUGE_HELP, None, MetricType::Gauge)?;
        for ((tenant, name), unavailable) in gauge.iter() {
            let value = ConstGauge::new(i64::from(*unavailable));
            if tenant.is_empty() {
                value.encode(family.encode_family(&[("name", name.as_str())])?)?;
            } else {
                let labels = [("cluster", tenant.as_str()), ("name", name.as_str())];
                value.encode(family.encode_family(&labels)?)?;
            }
        }
        drop(gauge);
        let counter = lock(&self.counter);
        let mut family =
            encoder.encode_descriptor(COUNTER, COUNTER_HELP, None, MetricType::Counter)?;
        for ((tenant, name, reason), n) in counter.iter() {
            let value = ConstCounter::new(*n);
            if tenant.is_empty() {
                let labels = [("name", name.as_str()), ("reason", reason.as_str())];
                value.encode(family.encode_family(&labels)?)?;
            } else {
                let labels = [
                    ("cluster", tenant.as_str()),
                    ("name", name.as_str()),
                    ("reason", reason.as_str()),
                ];
                value.encode(family.encode_family(&labels)?)?;
            }
        }
        drop(counter);
        let causes = lock(&self.causes);
        if !causes.is_empty() {
            let mut family =
                encoder.encode_descriptor(CAUSE, CAUSE_HELP, None, MetricType::Counter)?;
            for ((tenant, name, reason, cause), n) in causes.iter() {
                let mut labels = Vec::with_capacity(4);
                if !tenant.is_empty() {
                    labels.push(("cluster", tenant.as_str()));
                }
                labels.extend([
                    ("name", name.as_str()),
                    ("reason", reason.as_str()),
                    ("cause", cause.as_str()),
                ]);
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        drop(causes);
        let failed = lock(&self.failed);
        if !failed.is_empty() {
            let mut family =
                encoder.encode_descriptor(FAILED, FAILED_HELP, None, MetricType::Counter)?;
            for ((tenant, name, cause), n) in failed.iter() {
                let mut labels = Vec::with_capacity(3);
                if !tenant.is_empty() {
                    labels.push(("cluster", tenant.as_str()));
                }
                labels.extend([("name", name.as_str()), ("cause", cause.as_str())]);
                ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_matches_upstream() {
        let m = AvailabilityMetrics::default();
        m.set_unavailable("unavailable", true);
        m.set_unavailable("available", false);
        let text = m.render();
        assert!(text.starts_with("# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.\n# TYPE aggregator_unavailable_apiservice gauge\naggregator_unavailable_apiservice{name=\"available\"} 0\naggregator_unavailable_apiservice{name=\"unavailable\"} 1\n"), "{text}");
        m.forget("available");
        m.forget("unavailable");
        assert_eq!(
            m.render(),
            "# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.\n\
             # TYPE aggregator_unavailable_apiservice gauge\n\
             # HELP aggregator_unavailable_apiservice_total [ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.\n\
             # TYPE aggregator_unavailable_apiservice_total counter\n"
        );
        m.unavailable_transition("v1.x", "FailedDiscoveryCheck");
        m.unavailable_transition("v1.x", "FailedDiscoveryCheck");
        assert!(m.render().ends_with("# TYPE aggregator_unavailable_apiservice_total counter\naggregator_unavailable_apiservice_total{name=\"v1.x\",reason=\"FailedDiscoveryCheck\"} 2\n"));
    }

    #[test]
    fn a_tenants_series_carry_its_cluster() {
        let m = AvailabilityMetrics::default();
        m.set_unavailable_in("team-a", "v1.x", true);
        m.unavailable_transition_in("team-a", "v1.x", "ServiceNotFound");
        let text = m.render();
        assert!(
            text.contains(
                "aggregator_unavailable_apiservice{cluster=\"team-a\",name=\"v1.x\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains("aggregator_unavailable_apiservice_total{cluster=\"team-a\",name=\"v1.x\",reason=\"ServiceNotFound\"} 1\n"), "{text}");
        m.forget_in("team-a", "v1.x");
        assert!(!m.render().contains("aggregator_unavailable_apiservice{"));
    }

    #[test]
    fn label_values_are_escaped() {
        let m = AvailabilityMetrics::default();
        m.set_unavailable("a\"b\\c\nd", true);
        assert!(
            m.render()
                .contains("aggregator_unavailable_apiservice{name=\"a\\\"b\\\\c\\nd\"} 1\n")
        );
    }

    #[test]
    fn a_host_registry_encodes_them_beside_its_own() {
        let metrics = AvailabilityMetrics::default();
        let mut registry = Registry::default();
        let requests = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register(
            "host_requests",
            "Requests the host served",
            requests.clone(),
        );
        metrics.register(registry.sub_registry_with_prefix("embedded"));
        requests.inc();
        metrics.set_unavailable("v1.x", true);
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("host_requests_total 1\n"), "{text}");
        assert!(
            text.contains("embedded_aggregator_unavailable_apiservice{name=\"v1.x\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE embedded_aggregator_unavailable_apiservice_total counter\n"),
            "{text}"
        );
    }
}
