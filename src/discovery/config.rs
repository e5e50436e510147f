//! The timing and limits of the discovery manager, shared by its fetches.

use std::time::Duration;

/// Largest document read from a backend by default: 16 MiB.
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 16 << 20;

/// Timing and limits of the [`DiscoveryManager`](super::DiscoveryManager). Defaults are
/// upstream's.
#[derive(Debug, Clone)]
pub struct DiscoveryConfig {
    /// How often a Service is fetched again after a success (upstream: 1 min).
    pub refresh_period: Duration,
    /// Deadline of one request to a backend, headers and body (upstream: 5 s).
    pub fetch_timeout: Duration,
    /// First retry delay after a failure, doubled per failure (upstream: 500 ms).
    pub backoff_base: Duration,
    /// Longest retry delay (upstream: 1 min).
    pub backoff_max: Duration,
    /// Fetches running at once once every Service has been tried (upstream: 2 workers);
    /// Services never tried yet do not wait for a worker, as upstream's first pass runs
    /// them all in parallel.
    pub workers: usize,
    /// Largest document accepted from a backend, in bytes; a larger one is refused with
    /// a logged reason and counts as a failed fetch.
    pub max_document_bytes: usize,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            refresh_period: Duration::from_secs(60),
            fetch_timeout: Duration::from_secs(5),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            workers: 2,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}
