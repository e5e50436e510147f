//! A method selector and a request target: `RequestInfo` never panics and stays
//! self-consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, &str)| {
    kube_aggregator::fuzz_logic::fuzz_request_info(input.0, input.1);
});
