//! A standalone gateway with kube-apiserver's flag names that embeds the aggregator.
//!
//! ```text
//! cargo run --example gateway -- --secure-port=6443 --tls-cert-file=... \
//!     --tls-private-key-file=... --client-ca-file=... --proxy-client-cert-file=... \
//!     --proxy-client-key-file=... --apiservice-dir=DIR --service-endpoints=FILE
//! ```

#[path = "support/mod.rs"]
pub mod support;

// A proxy allocates and frees small buffers for every request (headers, bodies, TLS
// records); mimalloc does that with less CPU than the system allocator. Built with
// `--cfg system_allocator` (benches/load/allocations.sh), the gateway keeps the system
// allocator, whose calls valgrind's DHAT can see.
#[cfg(not(system_allocator))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    support::gateway::main_from_args(std::env::args().skip(1))
}
