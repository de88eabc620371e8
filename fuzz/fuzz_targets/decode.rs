//! Typed decoding of tool arguments: what a tool receives is a value its schema accepts
//! (`properties/decode.rs` states the property).
#![no_main]

#[path = "../properties/decode.rs"]
mod decode;

libfuzzer_sys::fuzz_target!(|data: &[u8]| decode::check(data));
