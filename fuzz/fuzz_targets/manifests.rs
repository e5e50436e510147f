//! A manifest file: parsing, validation and a registry resync never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kube_aggregator::fuzz_logic::fuzz_manifests(data);
});
