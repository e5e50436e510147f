//! An `Authorization` header value: bearer parsing never panics, and a token is a
//! non-empty, space-free substring of the value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|authorization: &str| {
    kube_aggregator::fuzz_logic::fuzz_bearer(authorization);
});
