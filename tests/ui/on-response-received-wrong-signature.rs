use phaseo_agent::tool;
use serde_json::Value;

fn trim(answer: String) -> Result<String, String> {
    Ok(answer.trim().to_owned())
}

/// Ask a person a question.
#[tool(external, on_response_received = trim)]
fn ask(question: String) -> Value;

fn main() {}
