use phaseo_agent::{ToolContext, tool};

/// Add two numbers.
#[tool]
fn add(a: i64, ctx: &ToolContext, b: i64, again: &ToolContext) -> i64 {
    let _ = (ctx, again);
    a + b
}

fn main() {}
