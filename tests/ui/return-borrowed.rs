use phaseo_agent::{ToolContext, tool};

/// The run's id.
#[tool]
fn run_id(ctx: &ToolContext) -> &str {
    ctx.run_id()
}

fn main() {}
