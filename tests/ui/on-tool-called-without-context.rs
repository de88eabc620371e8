use phaseo_agent::tool;
use serde_json::Value;

fn small_refunds(input: &Value) -> Option<Value> {
    Some(input.clone())
}

/// Refund an order.
#[tool(external, on_tool_called = small_refunds)]
fn refund(amount: f64) -> Value;

fn main() {}
