//! Heap allocations per proxied request, counted by a counting global allocator
//! (`stats_alloc` over the system allocator) over the
//! requests of `proxy_tls`: a client with a user certificate -> the stack of
//! `Aggregator::builder` behind `server::serve_tls` over loopback mTLS -> an extension
//! server that requires the front-proxy client certificate. Client, gateway and backend
//! share the process, so the gateway's share is the difference between a request through
//! it and the same request sent straight to the backend with the headers the gateway
//! would add. One request at a time on a kept-alive connection, HTTP/1.1 and HTTP/2.
//! The gateway reaches the extension server over HTTP/2 (ALPN) in both rows, so the
//! HTTP/1.1 row's difference also holds the extension server's HTTP/2 over its HTTP/1.1
//! (the direct request's); the HTTP/2 row is the gateway's alone.
//!
//! ```sh
//! cargo bench --bench allocations --features tokio,dns
//! ```
//!
//! Counts, not times: they do not depend on the machine or on what else it runs.
//! `REQUESTS` (2000) requests are counted per row, after 200 that open the connections
//! and fill the caches. Where they come from: valgrind's DHAT on the gateway example
//! under load (`valgrind --tool=dhat target/release/examples/gateway ...`) gives each
//! allocation's call stack.

#[path = "../examples/support/pki.rs"]
pub mod pki;
#[path = "support/rig.rs"]
pub mod rig;
pub mod support;

use std::alloc::System;

use http::StatusCode;
use rig::{DIRECT_HEADERS, Rig};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Allocations and bytes allocated while `n` requests are answered by `send`. The
/// process's background work (the availability worker's checks, every few seconds) is
/// counted with them, a few allocations over a row.
fn count(n: u64, mut send: impl FnMut() -> StatusCode) -> (usize, usize) {
    let before = ALLOCATOR.stats();
    for _ in 0..n {
        assert_eq!(send(), StatusCode::OK, "a counted request failed");
    }
    let after = ALLOCATOR.stats();
    (
        after.allocations - before.allocations,
        after.bytes_allocated - before.bytes_allocated,
    )
}

fn main() {
    // `cargo bench -- --test` (CI) checks that it runs, on a few requests.
    let default = if std::env::args().any(|a| a == "--test") {
        20
    } else {
        2000
    };
    let requests: u64 = std::env::var("REQUESTS")
        .ok()
        .map(|v| v.parse().unwrap_or_else(|e| panic!("REQUESTS={v}: {e}")))
        .unwrap_or(default);
    let rt = support::one_worker_runtime();
    let rig = rt.block_on(Rig::start());
    let (backend_authority, gateway_authority) = (rig.backend.to_string(), rig.gateway.to_string());

    println!("Heap allocations per request ({requests} requests per row, one at a time):\n");
    println!(
        "| protocol | straight to the backend | through the gateway | the gateway's | the gateway's bytes |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (protocol, http2) in [("HTTP/1.1", false), ("HTTP/2", true)] {
        let (mut direct, mut via) = rt.block_on(rig.connections(http2));
        let mut to_backend = || rt.block_on(direct.get(&backend_authority, &DIRECT_HEADERS));
        let mut through = || rt.block_on(via.get(&gateway_authority, &[]));
        count(200, &mut to_backend);
        count(200, &mut through);
        let (direct_blocks, direct_bytes) = count(requests, &mut to_backend);
        let (via_blocks, via_bytes) = count(requests, &mut through);
        let per = |x: usize| x as f64 / requests as f64;
        println!(
            "| {protocol} | {:.1} | {:.1} | {:.1} | {:.0} |",
            per(direct_blocks),
            per(via_blocks),
            per(via_blocks) - per(direct_blocks),
            per(via_bytes) - per(direct_bytes),
        );
    }
}
