//! The proxy's latency per APIService: `aggregator_proxy_request_duration_seconds`, a
//! histogram of this crate's own (kube-aggregator has none per APIService), named in the
//! style of upstream's `aggregator_*` metrics.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::Histogram;

/// Bucket bounds in seconds: 1 ms to 60 s, for answers from a local pod to a slow list.
const BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// How long each APIService's backend took to answer proxied requests: from the request
/// handed to the transport to the response head (the first byte), by APIService name and
/// response code (503 for a backend that could not be reached). Requests the
/// availability gate refused never reach the backend and are not counted. A collector:
/// `registry.register_collector(Box::new(metrics))`; clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct ProxyMetrics(Arc<Mutex<ByApiService>>);

/// Per APIService name, a histogram per response code (a handful: a short list). A
/// tree: a few string comparisons find a name, cheaper than hashing it each request.
type ByApiService = BTreeMap<String, Vec<(u16, Histogram)>>;

impl ProxyMetrics {
    /// One proxied request of `apiservice`, answered `code` after `took`. Looked up by
    /// the name as it is: no allocation once the APIService and code have been seen.
    pub(crate) fn observe(&self, apiservice: &str, code: u16, took: Duration) {
        let mut by_name = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let codes = match by_name.get_mut(apiservice) {
            Some(codes) => codes,
            None => by_name.entry(apiservice.to_owned()).or_default(),
        };
        let histogram = match codes.iter().position(|(c, _)| *c == code) {
            Some(i) => &codes[i].1,
            None => {
                codes.push((code, Histogram::new(BUCKETS)));
                &codes[codes.len() - 1].1
            }
        };
        histogram.observe(took.as_secs_f64());
    }
}

impl Collector for ProxyMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let by_name = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if by_name.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "aggregator_proxy_request_duration_seconds",
            "Latency of requests proxied to an APIService's backend, from the request sent to the response head, in seconds, by APIService and response code.",
            None,
            MetricType::Histogram,
        )?;
        for (name, codes) in by_name.iter() {
            for (code, histogram) in codes {
                let code = code.to_string();
                let labels = [("apiservice", name.as_str()), ("code", code.as_str())];
                histogram.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
