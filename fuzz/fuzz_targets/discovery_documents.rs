//! A backend's discovery document or OpenAPI spec: bounded reads, decoding, merging and
//! encoding never panic, and documents over the limit are refused.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, &[u8])| {
    kube_aggregator::fuzz_logic::fuzz_discovery_documents(input.0, input.1);
});
