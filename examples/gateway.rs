//! A standalone gateway with kube-apiserver's flag names that embeds the aggregator.
//!
//! ```text
//! cargo run --example gateway -- --secure-port=6443 --tls-cert-file=... \
//!     --tls-private-key-file=... --client-ca-file=... --proxy-client-cert-file=... \
//!     --proxy-client-key-file=... --apiservice-dir=DIR --service-endpoints=FILE
//! ```

#[path = "support/mod.rs"]
mod support;

fn main() -> std::process::ExitCode {
    support::gateway::main_from_args(std::env::args().skip(1))
}
