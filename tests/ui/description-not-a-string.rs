use phaseo_agent::tool;

#[tool(description = 42)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
