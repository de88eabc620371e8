//! Loading, recovering and resuming runs from hostile store rows: no input panics
//! (`properties/journal.rs` states the property).
#![no_main]

// `encode` and `Served::new` are for `gen_corpus` and the tests.
#[allow(dead_code)]
#[path = "../properties/journal.rs"]
mod journal;

libfuzzer_sys::fuzz_target!(|data: &[u8]| journal::check(data));
