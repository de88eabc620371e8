use std::rc::Rc;

use phaseo_agent::{ToolContext, tool};

/// Greet someone.
#[tool]
async fn greet(name: &str, times: u32, ctx: &ToolContext) -> String {
    let counter = Rc::new(times);
    tokio::task::yield_now().await;
    let _ = ctx.step_index();
    format!("{name} x{counter}")
}

fn main() {}
