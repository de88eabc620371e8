use phaseo_agent::tool;

/// Add two numbers.
#[tool(id = "add", id = "plus")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
