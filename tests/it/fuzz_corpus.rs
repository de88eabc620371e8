//! The fuzz targets' properties (`fuzz/properties/`), checked on their seed corpus (`fuzz/corpus/`)
//! on stable Rust, without libFuzzer, so that `cargo test` keeps them true between fuzzing runs.
//! `.ci/fuzz` runs the targets themselves.

#[path = "../../fuzz/properties/decode.rs"]
mod decode;
#[path = "../../fuzz/properties/journal.rs"]
pub(crate) mod journal;
#[path = "../../fuzz/properties/resume.rs"]
mod resume;

use std::path::{Path, PathBuf};

/// The seeds of one target, sorted by name; there must be some.
fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a corpus entry").path();
            let bytes = std::fs::read(&path).expect("a seed reads");
            (path, bytes)
        })
        .collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
    seeds
}

/// Runs `check` on every seed of `target`; a panic names the seed.
fn replay(target: &str, check: fn(&[u8])) {
    for (path, bytes) in seeds(target) {
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        assert!(
            outcome.is_ok(),
            "the {target} property fails on the seed {}",
            path.display()
        );
    }
}

#[test]
fn the_decode_seeds_hold_the_decode_property() {
    replay("decode", decode::check);
}

#[test]
fn the_resume_seeds_hold_the_resume_property() {
    replay("resume", resume::check);
}

#[test]
fn the_journal_seeds_hold_the_journal_property() {
    replay("journal", journal::check);
}
