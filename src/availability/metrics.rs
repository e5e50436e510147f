//! The availability metrics of kube-aggregator `pkg/controllers/status/metrics/metrics.go`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// `aggregator_unavailable_apiservice` (gauge, label `name`) and
/// `aggregator_unavailable_apiservice_total` (counter, labels `name`, `reason`).
#[derive(Debug, Default)]
pub struct AvailabilityMetrics {
    gauge: Mutex<BTreeMap<String, bool>>,
    counter: Mutex<BTreeMap<(String, String), u64>>,
}

impl AvailabilityMetrics {
    /// Sets the gauge of `name`: 1 when unavailable, 0 when available.
    pub fn set_unavailable(&self, name: &str, unavailable: bool) {
        lock(&self.gauge).insert(name.to_owned(), unavailable);
    }

    /// Counts a transition of `name` from available to unavailable with `reason`.
    pub fn unavailable_transition(&self, name: &str, reason: &str) {
        *lock(&self.counter)
            .entry((name.to_owned(), reason.to_owned()))
            .or_default() += 1;
    }

    /// Forgets the gauge of a deleted APIService.
    pub fn forget(&self, name: &str) {
        lock(&self.gauge).remove(name);
    }

    /// The Prometheus text exposition of both metrics.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.\n");
        out.push_str("# TYPE aggregator_unavailable_apiservice gauge\n");
        for (name, unavailable) in lock(&self.gauge).iter() {
            let _ = writeln!(
                out,
                "aggregator_unavailable_apiservice{{name=\"{}\"}} {}",
                escape(name),
                u8::from(*unavailable)
            );
        }
        out.push_str("# HELP aggregator_unavailable_apiservice_total [ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.\n");
        out.push_str("# TYPE aggregator_unavailable_apiservice_total counter\n");
        for ((name, reason), n) in lock(&self.counter).iter() {
            let _ = writeln!(
                out,
                "aggregator_unavailable_apiservice_total{{name=\"{}\",reason=\"{}\"}} {n}",
                escape(name),
                escape(reason)
            );
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_matches_upstream() {
        let m = AvailabilityMetrics::default();
        m.set_unavailable("available", false);
        m.set_unavailable("unavailable", true);
        let text = m.render();
        assert!(text.contains("# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.\n# TYPE aggregator_unavailable_apiservice gauge\naggregator_unavailable_apiservice{name=\"available\"} 0\naggregator_unavailable_apiservice{name=\"unavailable\"} 1\n"));
        m.forget("available");
        m.forget("unavailable");
        assert!(!m.render().contains("aggregator_unavailable_apiservice{"));
        m.unavailable_transition("v1.x", "FailedDiscoveryCheck");
        assert!(m.render().contains("aggregator_unavailable_apiservice_total{name=\"v1.x\",reason=\"FailedDiscoveryCheck\"} 1\n"));
    }
}
