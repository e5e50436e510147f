//! Attempts and durations by result, the shape of upstream's authentication and
//! authorization metrics (k8s.io/apiserver `pkg/endpoints/filters/metrics.go`), and the
//! text of a set of metrics on its own ([`render`]). A leaf: `authn` and `authz` each
//! keep an [`Outcomes`]; `audit` and `metrics` render with it.
//!
//! Floor 0 of the import order (docs/architecture.md): uses nothing of the crate; used by
//! `audit`, `authn`, `authz`, `metrics`, `webhook`.

use std::sync::Mutex;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The metrics `register` adds to an empty registry, in the OpenMetrics text format (a
/// set's `render`, for tests and hosts that serve one set alone).
pub(crate) fn render(register: impl FnOnce(&mut Registry)) -> String {
    let mut registry = Registry::default();
    register(&mut registry);
    let mut out = String::new();
    // A `String` never refuses a write.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

/// Renders `collector` alone and asserts that the text has each of `lines`; the text.
#[cfg(test)]
pub(crate) fn assert_renders(
    collector: impl prometheus_client::collector::Collector,
    lines: &[&str],
) -> String {
    let text = render(|r| r.register_collector(Box::new(collector)));
    for line in lines {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    text
}

/// Counts and a duration histogram per result (`success`, `allowed`, ...), with
/// upstream's buckets: 1 ms doubling 15 times.
#[derive(Debug, Default)]
pub(crate) struct Outcomes {
    results: Mutex<Vec<(&'static str, u64, Histogram)>>,
}

/// How the attempts are written: upstream's counters named without `_total`
/// (`authentication_attempts`) are written as they are, untyped, since a typed counter's
/// samples always get the suffix here.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CounterName {
    /// A counter whose samples are `<name>_total`.
    Total(&'static str),
    /// Samples named `<name>` exactly.
    Exact(&'static str),
}

impl Outcomes {
    /// One attempt with `result`, lasting `seconds`.
    pub(crate) fn record(&self, result: &'static str, seconds: f64) {
        let mut results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        match results.iter_mut().find(|(r, ..)| *r == result) {
            Some((_, count, histogram)) => {
                *count += 1;
                histogram.observe(seconds);
            }
            None => {
                let histogram = Histogram::new(exponential_buckets(0.001, 2.0, 15));
                histogram.observe(seconds);
                results.push((result, 1, histogram));
            }
        }
    }

    /// Writes the attempts (`counter`, `counter_help`) and the durations (`histogram`,
    /// `histogram_help`) labelled by `result`; nothing before the first attempt.
    pub(crate) fn encode(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        (counter, counter_help): (CounterName, &str),
        (histogram, histogram_help): (&str, &str),
    ) -> std::fmt::Result {
        let results = self.results.lock().unwrap_or_else(|e| e.into_inner());
        if results.is_empty() {
            return Ok(());
        }
        let (name, kind) = match counter {
            CounterName::Total(name) => (name, MetricType::Counter),
            CounterName::Exact(name) => (name, MetricType::Unknown),
        };
        let mut family = encoder.encode_descriptor(name, counter_help, None, kind)?;
        for (result, count, _) in results.iter() {
            let labels = [("result", *result)];
            match counter {
                CounterName::Total(_) => {
                    ConstCounter::new(*count).encode(family.encode_family(&labels)?)?
                }
                CounterName::Exact(_) => {
                    ConstGauge::new(*count as i64).encode(family.encode_family(&labels)?)?
                }
            }
        }
        let mut family =
            encoder.encode_descriptor(histogram, histogram_help, None, MetricType::Histogram)?;
        for (result, _, h) in results.iter() {
            h.encode(family.encode_family(&[("result", *result)])?)?;
        }
        Ok(())
    }
}
