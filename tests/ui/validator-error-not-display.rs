use phaseo_agent::tool;
use serde_json::Value;

struct Blank;

fn not_blank(input: Value) -> Result<Value, Blank> {
    if input["query"] == "" {
        Err(Blank)
    } else {
        Ok(input)
    }
}

/// Search tickets.
#[tool(output_schema = not_blank)]
fn search(query: String) -> String {
    query
}

fn main() {}
