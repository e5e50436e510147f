//! A custom-metrics adapter shaped like prometheus-adapter, serving
//! `custom.metrics.k8s.io/v1beta2` (and `v1beta1`) and `external.metrics.k8s.io/v1beta1`
//! behind the aggregator from in-memory series that change every scrape.
//!
//! ```text
//! cargo run --example custom_metrics_server -- --secure-port 6443 \
//!     --tls-cert-file serving.crt --tls-private-key-file serving.key \
//!     --requestheader-client-ca-file front-proxy-ca.crt \
//!     --requestheader-allowed-names front-proxy-client [--scrape-interval 15]
//! ```
//!
//! The logic is in `examples/support/custom_metrics/`; `cargo run --example demo` runs it
//! behind the gateway.

#[path = "support/mod.rs"]
pub mod support;

fn main() -> std::process::ExitCode {
    support::custom_metrics::main_from_args(std::env::args().skip(1))
}
