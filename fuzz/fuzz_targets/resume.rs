//! Resuming stored run states: no input panics (`properties/resume.rs` states the property).
#![no_main]

#[path = "../properties/resume.rs"]
mod resume;

libfuzzer_sys::fuzz_target!(|data: &[u8]| resume::check(data));
