use phaseo_agent::Tool;
use serde_json::json;

fn main() {
    let _ = Tool::new("echo", "Echo the input", json!({"type": "object"}), |input, _ctx| {
        input.to_string()
    });
}
