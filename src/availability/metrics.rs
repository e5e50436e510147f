//! The availability metrics of kube-aggregator `pkg/controllers/status/metrics/metrics.go`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// `aggregator_unavailable_apiservice` (gauge, label `name`) and
/// `aggregator_unavailable_apiservice_total` (counter, labels `name`, `reason`).
///
/// A tenant's APIServices (see [`crate::tenant`]) carry one more label, `cluster`, the
/// tenant's name; the stack's own are exposed exactly as upstream's.
#[derive(Debug, Default)]
pub struct AvailabilityMetrics {
    /// By tenant (empty for the stack's own), then APIService.
    gauge: Mutex<BTreeMap<String, BTreeMap<String, bool>>>,
    counter: Mutex<BTreeMap<(String, String, String), u64>>,
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

    /// Forgets the gauge of a deleted APIService.
    pub fn forget(&self, name: &str) {
        self.forget_in("", name);
    }

    /// [`AvailabilityMetrics::set_unavailable`] for tenant `tenant`'s APIService (`""`:
    /// the stack's own).
    pub fn set_unavailable_in(&self, tenant: &str, name: &str, unavailable: bool) {
        let mut gauge = lock(&self.gauge);
        // The steady state (the value is already there) allocates nothing.
        let names = match gauge.get_mut(tenant) {
            Some(names) => names,
            None => gauge.entry(tenant.to_owned()).or_default(),
        };
        match names.get_mut(name) {
            Some(v) => *v = unavailable,
            None => {
                names.insert(name.to_owned(), unavailable);
            }
        }
    }

    /// [`AvailabilityMetrics::unavailable_transition`] for tenant `tenant`'s APIService.
    pub fn unavailable_transition_in(&self, tenant: &str, name: &str, reason: &str) {
        *lock(&self.counter)
            .entry((tenant.to_owned(), name.to_owned(), reason.to_owned()))
            .or_default() += 1;
    }

    /// [`AvailabilityMetrics::forget`] for tenant `tenant`'s APIService.
    pub fn forget_in(&self, tenant: &str, name: &str) {
        let mut gauge = lock(&self.gauge);
        if let Some(names) = gauge.get_mut(tenant) {
            names.remove(name);
            if names.is_empty() {
                gauge.remove(tenant);
            }
        }
    }

    /// The Prometheus text exposition of both metrics.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP aggregator_unavailable_apiservice [ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.\n");
        out.push_str("# TYPE aggregator_unavailable_apiservice gauge\n");
        let gauge = lock(&self.gauge);
        let series = gauge
            .iter()
            .flat_map(|(tenant, names)| names.iter().map(move |(name, v)| (tenant, name, v)));
        for (tenant, name, unavailable) in series {
            let _ = writeln!(
                out,
                "aggregator_unavailable_apiservice{{{}name=\"{}\"}} {}",
                cluster_label(tenant),
                escape(name),
                u8::from(*unavailable)
            );
        }
        out.push_str("# HELP aggregator_unavailable_apiservice_total [ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.\n");
        out.push_str("# TYPE aggregator_unavailable_apiservice_total counter\n");
        for ((tenant, name, reason), n) in lock(&self.counter).iter() {
            let _ = writeln!(
                out,
                "aggregator_unavailable_apiservice_total{{{}name=\"{}\",reason=\"{}\"}} {n}",
                cluster_label(tenant),
                escape(name),
                escape(reason)
            );
        }
        out
    }
}

/// `cluster="<tenant>",` for a tenant's series, nothing for the stack's own.
fn cluster_label(tenant: &str) -> String {
    if tenant.is_empty() {
        String::new()
    } else {
        format!("cluster=\"{}\",", escape(tenant))
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
}
