use phaseo_agent::tool;

/// Add up numbers.
#[tool]
fn total(numbers: &[i64]) -> i64 {
    numbers.iter().sum()
}

fn main() {}
