use phaseo_agent::{TurnParams, tool};
use serde_json::Value;

fn senior(_input: &Value) -> TurnParams {
    TurnParams::default().model("senior-model")
}

/// Hand the conversation to the senior model.
#[tool(next_turn = senior)]
fn escalate(reason: String) -> String {
    reason
}

fn main() {}
