use phaseo_agent::tool;

/// Add two numbers.
#[tool(timeout = 5)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
