use std::rc::Rc;

use phaseo_agent::{ToolContext, tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Count {
    to: u32,
}

/// Count to a number.
#[tool]
async fn count(input: Count, ctx: &ToolContext) -> u32 {
    let counter = Rc::new(input.to);
    tokio::task::yield_now().await;
    let _ = ctx.step_index();
    *counter
}

fn main() {}
