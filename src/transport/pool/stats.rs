//! What a pool holds at one moment, for the connection-pool gauges
//! ([`PoolMetrics`](crate::transport::PoolMetrics)).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::{Pool, PoolInner, lock};

/// A pool's connections and requests, summed over its backend addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PoolStats {
    /// HTTP/2 connections open (draining ones included).
    pub(crate) http2_connections: usize,
    /// Requests in flight on them.
    pub(crate) http2_streams: usize,
    /// HTTP/1.1 keep-alive connections idle in the pool.
    pub(crate) http1_idle: usize,
    /// Connections being dialled.
    pub(crate) dialing: usize,
    /// Requests waiting for a dial to end.
    pub(crate) waiting: usize,
}

impl std::ops::AddAssign for PoolStats {
    fn add_assign(&mut self, o: PoolStats) {
        self.http2_connections += o.http2_connections;
        self.http2_streams += o.http2_streams;
        self.http1_idle += o.http1_idle;
        self.dialing += o.dialing;
        self.waiting += o.waiting;
    }
}

/// A pool that does not keep it alive: gone once its APIService's client is dropped.
#[derive(Clone)]
pub(crate) struct WeakPool(Weak<PoolInner>);

impl Pool {
    pub(crate) fn downgrade(&self) -> WeakPool {
        WeakPool(Arc::downgrade(&self.inner))
    }
}

impl WeakPool {
    /// The pool's stats, or `None` once it is gone.
    pub(crate) fn stats(&self) -> Option<PoolStats> {
        let pool = self.0.upgrade()?;
        let hosts = lock(&pool.hosts);
        let mut stats = PoolStats::default();
        for host in hosts.values() {
            stats += PoolStats {
                http2_connections: host.http2.len(),
                http2_streams: host
                    .http2
                    .iter()
                    .map(|c| c.in_flight.load(Ordering::Acquire))
                    .sum(),
                http1_idle: host.http1_idle.len(),
                dialing: host.dialing,
                waiting: host.waiting,
            };
        }
        Some(stats)
    }
}
