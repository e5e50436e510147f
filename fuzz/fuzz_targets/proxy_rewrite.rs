//! A request target, a query and a user-extra key: the proxy's rewriting never panics,
//! and an escaped extra key decodes back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str, &str)| {
    kube_aggregator::fuzz_logic::fuzz_proxy_rewrite(input.0, input.1, input.2);
});
