//! A status selector and a webhook answer: SubjectAccessReview and TokenReview decoding
//! never panic, and the decision follows `allowed`/`denied`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, &[u8])| {
    kube_aggregator::fuzz_logic::fuzz_webhook_responses(input.0, input.1);
});
