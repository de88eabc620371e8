use phaseo_agent::tool;

/// Add three numbers.
#[tool]
fn add((a, b): (i64, i64), c: i64) -> i64 {
    a + b + c
}

fn main() {}
