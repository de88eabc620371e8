use phaseo_agent::tool;
use serde_json::Value;

fn not_blank(input: Value) -> bool {
    input["query"] != ""
}

/// Search tickets.
#[tool(input_schema = not_blank)]
fn search(query: String) -> String {
    query
}

fn main() {}
