use phaseo_agent::tool;
use serde_json::Value;

fn first(input: Value) -> Result<Value, String> {
    Ok(input)
}

fn second(input: Value) -> Result<Value, String> {
    Ok(input)
}

/// Search tickets.
#[tool(input_schema = first, input_schema = second)]
fn search(query: String) -> String {
    query
}

fn main() {}
