use phaseo_agent::tool;
use serde_json::Value;

fn not_blank(input: &Value) -> Result<Value, String> {
    Ok(input.clone())
}

/// Search tickets.
#[tool(input_schema = not_blank)]
fn search(query: String) -> String {
    query
}

fn main() {}
