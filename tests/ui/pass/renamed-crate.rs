//! `crate = path` for phaseo-agent reached under another name. (The member crate
//! `tests/renamed` proves it with a real renamed dependency, where `::phaseo_agent` does not exist.)

extern crate phaseo_agent as renamed_agent;

mod reexport {
    pub use ::phaseo_agent as agent;
}

/// Add two numbers.
#[renamed_agent::tool(crate = renamed_agent)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Subtract two numbers.
#[reexport::agent::tool(crate = crate::reexport::agent)]
async fn sub(a: i64, b: i64) -> i64 {
    a - b
}

fn positive(value: serde_json::Value) -> Result<serde_json::Value, String> {
    Ok(value)
}

/// Multiply two numbers; the field keys reach the runtime through the renamed path too.
#[renamed_agent::tool(
    crate = crate::reexport::agent,
    timeout_ms = 10,
    on_error = "fail-run",
    exclusive,
    max_output_chars = 100,
    output_schema = positive
)]
async fn mul(a: i64, b: i64) -> i64 {
    a * b
}

fn main() {
    let agent = renamed_agent::Agent::builder("math")
        .model(renamed_agent::ScriptedModel::new())
        .tool(add)
        .tool(sub)
        .tool(mul)
        .build()
        .unwrap();
    assert_eq!(agent.tools().len(), 3);
    assert_eq!(add(1, 2), 3);
}
