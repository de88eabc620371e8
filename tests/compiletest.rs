//! The trybuild suite of `#[tool]`: every misuse is a compile error at the user's token that says
//! what to write (`tests/ui/*.rs`, one mistake per file, with the expected `.stderr`), and the forms
//! that must compile do (`tests/ui/pass/*.rs`).
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test --test compiletest` and read
//! the diff: each caret must stay under the user's own token.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
    t.pass("ui/pass/*.rs");
}
