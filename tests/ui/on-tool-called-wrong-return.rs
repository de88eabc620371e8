use phaseo_agent::{ToolContext, tool};
use serde_json::Value;

fn small_refunds(input: &Value, _ctx: &ToolContext) -> Value {
    input.clone()
}

/// Refund an order.
#[tool(external, on_tool_called = small_refunds)]
fn refund(amount: f64) -> Value;

fn main() {}
