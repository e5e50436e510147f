//! The connection-pool gauges of a [`RustlsTransport`](super::RustlsTransport): this
//! crate's own (kube-aggregator's transport is Go's, which exports none), named in the
//! style of upstream's `aggregator_*` metrics, read from the pools when scraped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::pool::{PoolStats, WeakPool};

/// Per backend Service (the serving certificate's name, `<service>.<namespace>.svc`):
/// `aggregator_proxy_http2_connections`, `aggregator_proxy_http2_streams` (requests in
/// flight on them), `aggregator_proxy_http1_idle_connections`,
/// `aggregator_proxy_dials_in_progress` and `aggregator_proxy_requests_waiting_for_dial`,
/// each a gauge labelled `service`, summed over the APIServices' pools of that Service.
/// A collector (`registry.register_collector(Box::new(metrics))`; the transport's
/// [`Transport::register_metrics`](super::Transport::register_metrics) does it); clones
/// share the pools.
#[derive(Clone, Default)]
pub struct PoolMetrics(Arc<Mutex<Vec<(String, WeakPool)>>>);

debug_fields!(PoolMetrics {});

impl PoolMetrics {
    /// Follows `pool`, the pool of a client for the Service `service`.
    pub(crate) fn track(&self, service: &str, pool: WeakPool) {
        let mut pools = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Pools of clients dropped since (an APIService removed or changed) are forgotten.
        pools.retain(|(_, p)| p.stats().is_some());
        pools.push((service.to_owned(), pool));
    }

    /// The live pools' stats, summed by Service.
    fn by_service(&self) -> BTreeMap<String, PoolStats> {
        let pools = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut by_service: BTreeMap<String, PoolStats> = BTreeMap::new();
        for (service, pool) in pools.iter() {
            if let Some(stats) = pool.stats() {
                *by_service.entry(service.clone()).or_default() += stats;
            }
        }
        by_service
    }
}

impl Collector for PoolMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let by_service = self.by_service();
        if by_service.is_empty() {
            return Ok(());
        }
        type Read = fn(&PoolStats) -> usize;
        let gauges: [(&str, &str, Read); 5] = [
            (
                "aggregator_proxy_http2_connections",
                "Number of HTTP/2 connections open to an APIService's backend, by Service.",
                |s| s.http2_connections,
            ),
            (
                "aggregator_proxy_http2_streams",
                "Number of proxied requests in flight on HTTP/2 connections, by Service.",
                |s| s.http2_streams,
            ),
            (
                "aggregator_proxy_http1_idle_connections",
                "Number of idle HTTP/1.1 keep-alive connections pooled, by Service.",
                |s| s.http1_idle,
            ),
            (
                "aggregator_proxy_dials_in_progress",
                "Number of connections being dialled, by Service.",
                |s| s.dialing,
            ),
            (
                "aggregator_proxy_requests_waiting_for_dial",
                "Number of proxied requests waiting for a connection being dialled, by Service.",
                |s| s.waiting,
            ),
        ];
        for (name, help, read) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (service, stats) in &by_service {
                let value = i64::try_from(read(stats)).unwrap_or(i64::MAX);
                ConstGauge::new(value)
                    .encode(family.encode_family(&[("service", service.as_str())])?)?;
            }
        }
        Ok(())
    }
}
