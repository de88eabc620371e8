use phaseo_agent::{Agent, ScriptedModel, tool};

/// Add two numbers.
#[tool(retries = 3)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

// Only the unknown key is reported: the tool and its name still work for the rest of the crate.
fn main() {
    assert_eq!(add(1, 2), 3);
    let _ = Agent::builder("math").model(ScriptedModel::new()).tool(add).build();
    let _ = AddArgs { a: 1, b: 2 };
}
