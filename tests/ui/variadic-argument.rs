use phaseo_agent::tool;

/// Sum numbers.
#[tool]
fn sum(count: i32, rest: ...) -> i32 {
    count
}

fn main() {}
