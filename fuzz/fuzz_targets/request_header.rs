//! A request-header configuration and request headers: reading the user and clearing
//! the headers never panic, `clear` removes exactly the configured headers, and a user
//! always has a name.
//!
//! The input is text so that the seeds can be written from the conformance vectors, one
//! item per line: `=user <name>`, `=uid <name>`, `=group <name>` and `=extra <prefix>`
//! configure the lists (the rest of the line, untrimmed); any other line is a header
//! `<name>:<value>`, one leading space of the value dropped.
#![no_main]

use kube_aggregator::fuzz_logic::{HeaderLists, fuzz_request_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut lists = HeaderLists::default();
    let mut headers = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        if let Some(entry) = line.strip_prefix(b"=") {
            let text = String::from_utf8_lossy(entry);
            let (key, value) = text.split_once(' ').unwrap_or((&text, ""));
            let list = match key {
                "user" => &mut lists.username,
                "uid" => &mut lists.uid,
                "group" => &mut lists.group,
                "extra" => &mut lists.extra_prefixes,
                _ => continue,
            };
            list.push(value.to_owned());
        } else if let Some(colon) = line.iter().position(|b| *b == b':') {
            let (name, value) = line.split_at(colon);
            let value = &value[1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            headers.push((name.to_vec(), value.to_vec()));
        }
    }
    fuzz_request_header(&lists, &headers);
});
