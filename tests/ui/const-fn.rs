use phaseo_agent::tool;

/// Add two numbers.
#[tool]
const fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
