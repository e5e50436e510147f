#[path = "support/mod.rs"]
mod support;
fn main() {}
