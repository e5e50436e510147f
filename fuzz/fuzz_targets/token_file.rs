//! A token file: loading never panics, and every token found belongs to a record with a
//! non-empty token.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kube_aggregator::fuzz_logic::fuzz_token_file(data);
});
