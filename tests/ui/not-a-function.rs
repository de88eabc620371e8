use phaseo_agent::tool;

/// Add two numbers.
#[tool]
struct Add {
    a: i64,
    b: i64,
}

fn main() {}
