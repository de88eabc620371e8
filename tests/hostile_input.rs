//! What a hostile model sends must not make a run unloadable or its errors unbounded: values the
//! state keeps stay within what the JSON parser reads back, and error text quotes only an excerpt.

mod common;

use common::Counter;
use phaseo_agent::{Agent, RunState, ScriptedModel, Tool, ToolContext};
use serde_json::{Value, json};

/// A value nested `depth` arrays deep.
fn nested(depth: usize) -> Value {
    let mut value = json!(0);
    for _ in 0..depth {
        value = Value::Array(vec![value]);
    }
    value
}

/// A gated tool taking any JSON under `payload`.
fn gated(runs: &Counter) -> Tool {
    let runs = runs.clone();
    Tool::new(
        "store",
        "Stores a payload",
        json!({"type": "object"}),
        move |_, _| {
            runs.bump();
            Ok(json!("stored"))
        },
    )
    .require_approval()
}

/// The arguments `{"payload": <nested(depth - 1)>}`: `depth` levels in all.
fn arguments(depth: usize) -> Value {
    json!({ "payload": nested(depth - 1) })
}

#[tokio::test]
async fn a_paused_state_with_the_deepest_accepted_arguments_loads_back() {
    let model = ScriptedModel::new().tool_call("c1", "store", arguments(120));
    let agent = Agent::builder("t")
        .model(model)
        .tool(gated(&Counter::default()))
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert!(paused.is_paused());
    let loaded = RunState::from_json(&paused.state.to_json()).unwrap();
    assert_eq!(loaded, paused.state);
}

#[tokio::test]
async fn arguments_too_deep_to_store_are_refused_before_the_call_pauses() {
    // 126 levels parse (the parser allows 127), but inside the stored state they would not.
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .tool_call("c1", "store", arguments(126))
        .text("done");
    let agent = Agent::builder("t")
        .model(model)
        .tool(gated(&runs))
        .build()
        .unwrap();
    let done = agent.run("go").await.unwrap();
    let content = done.state.tool_result("c1").unwrap();
    assert!(
        content.contains("nested too deeply to keep in the run's state"),
        "{content}"
    );
    RunState::from_json(&done.state.to_json()).unwrap();
    assert_eq!(runs.get(), 0);
}

#[tokio::test]
async fn progress_too_deep_to_store_is_refused_and_the_state_loads_back() {
    let tool = Tool::new(
        "t",
        "Reports deep progress",
        json!({"type": "object"}),
        |_, ctx: &ToolContext| {
            assert!(ctx.emit_progress(nested(126)).is_err(), "too deep to store");
            ctx.emit_progress(nested(120))
                .map_err(|e| phaseo_agent::AgentError::tool(e.to_string()))?;
            Ok(json!("done"))
        },
    );
    let model = ScriptedModel::new()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let done = agent.run("go").await.unwrap();
    // The refused progress failed the call (an event validator's refusal does the same).
    assert!(done.state.steps()[0].is_error);
    RunState::from_json(&done.state.to_json()).unwrap();
}

#[tokio::test]
async fn an_error_about_a_huge_value_quotes_only_an_excerpt() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Level {
        level: u8,
    }
    let tool = Tool::typed(
        "set_level",
        "Sets a level",
        |input: Level, _ctx: ToolContext| async move { Ok::<_, String>(input.level) },
    );
    let huge = "x".repeat(10 * 1024 * 1024);
    let model = ScriptedModel::new()
        .tool_call("c1", "set_level", json!({ "level": huge }))
        .text("done");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let done = agent.run("go").await.unwrap();
    let content = done.state.tool_result("c1").unwrap();
    assert!(content.len() < 1_000, "{} bytes", content.len());
    assert!(
        content.starts_with(r#"{"error":"Invalid tool input: $.level: "#),
        "{content}"
    );
    assert!(content.contains("characters cut"), "{content}");
    // The arguments are kept once, in the conversation; the error adds little.
    let stored = done.state.to_json().len();
    assert!(stored < huge.len() + 20_000, "the state is {stored} bytes");
}
