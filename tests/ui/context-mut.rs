use phaseo_agent::{ToolContext, tool};

/// Add two numbers.
#[tool]
fn add(a: i64, b: i64, ctx: &mut ToolContext) -> i64 {
    let _ = ctx;
    a + b
}

fn main() {}
