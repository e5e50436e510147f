//! One arbitrary request (method, target, credential, headers, body) through the whole
//! stack over the in-memory transport: a response for every request, no client identity
//! or credential reaches the backend, and only requests the policy allowed do.
#![no_main]

use kube_aggregator::fuzz_logic::{StackHeader, StackInput, fuzz_stack};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Header<'a> {
    name_choice: u8,
    name: &'a str,
    value: &'a [u8],
}

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    method: u8,
    target_prefix: u8,
    target: &'a str,
    credential: u8,
    headers: Vec<Header<'a>>,
    body: &'a [u8],
}

fuzz_target!(|input: Input<'_>| {
    let _status = fuzz_stack(&StackInput {
        method: input.method,
        target_prefix: input.target_prefix,
        target: input.target,
        credential: input.credential,
        headers: input
            .headers
            .iter()
            .map(|h| StackHeader {
                name_choice: h.name_choice,
                name: h.name,
                value: h.value,
            })
            .collect(),
        body: input.body,
    });
});
