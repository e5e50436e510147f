//! A metrics-server look-alike serving `metrics.k8s.io/v1beta1` behind the aggregator.
//!
//! ```text
//! cargo run --example metrics_server -- --secure-port 4443 \
//!     --tls-cert-file serving.crt --tls-private-key-file serving.key \
//!     --requestheader-client-ca-file front-proxy-ca.crt \
//!     --requestheader-allowed-names front-proxy-client
//! ```

#[path = "support/mod.rs"]
pub mod support;

fn main() -> std::process::ExitCode {
    support::metrics_server::main_from_args(std::env::args().skip(1))
}
