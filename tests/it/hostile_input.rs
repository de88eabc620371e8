//! What a hostile model sends must not make a run unloadable or its errors unbounded: values the
//! state keeps stay within what the JSON parser reads back, and error text quotes only an excerpt.

use crate::support::agent::Counter;
use phaseo_agent::{
    Agent, AgentError, Decisions, RunState, ScriptedModel, Tool, ToolCall, ToolContext,
};
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
    store(runs).require_approval()
}

/// The `store` tool without a gate.
fn store(runs: &Counter) -> Tool {
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
        |_, ctx: ToolContext| {
            assert!(ctx.emit_progress(nested(126)).is_err(), "too deep to store");
            ctx.emit_progress(nested(120))
                .map_err(|e| AgentError::tool(e.to_string()))?;
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

/// A scripted model whose first turn makes `count` calls of the gated `store` tool.
fn many_calls(count: usize) -> ScriptedModel {
    let calls = (0..count).map(|i| ToolCall::new(format!("c{i}"), "store", json!({})));
    ScriptedModel::new().tool_calls(calls).text("done")
}

#[tokio::test]
async fn a_turn_over_the_call_limit_fails_before_any_call_runs() {
    let runs = Counter::default();
    let agent = Agent::builder("limits")
        .model(many_calls(129))
        .tool(store(&runs))
        .build()
        .unwrap();
    let failed = agent.run("go").await.unwrap_err();
    assert_eq!(
        failed.error,
        AgentError::TooManyToolCalls {
            count: 129,
            limit: 128
        }
    );
    assert_eq!(runs.get(), 0, "no call of the turn ran");
    let state = failed.state.expect("the run had started");
    assert!(state.steps().is_empty());

    // At the limit, the turn runs.
    let agent = Agent::builder("limits")
        .model(many_calls(128))
        .tool(store(&runs))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(runs.get(), 128);
}

#[tokio::test]
async fn a_large_turn_under_a_raised_limit_pauses_and_resumes() {
    // 20,000 gated calls: pausing, storing, loading, and resuming with one decision each.
    let count = 20_000;
    let runs = Counter::default();
    let agent = Agent::builder("large")
        .model(many_calls(count))
        .tool(gated(&runs))
        .max_calls_per_turn(count)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let state = RunState::from_json(&paused.state.to_json()).unwrap();
    assert_eq!(state.pending().len(), count);
    let mut decisions = Decisions::for_run(state.run_id());
    for pending in state.pending() {
        decisions = decisions.approve(pending.call.id.clone());
    }
    let done = agent.resume(&state, decisions).await.unwrap();
    assert_eq!(done.output(), Some("done"));
    assert_eq!(runs.get(), count);

    // A decision for a call that is not pending names a bounded list of the pending ones.
    let error = agent
        .resume(&state, Decisions::for_run(state.run_id()).approve("nope"))
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("and 19980 more"), "{}", &message[..200]);
    assert!(message.len() < 400, "{} characters", message.len());
}

#[tokio::test]
async fn a_state_with_a_call_pending_twice_is_refused() {
    let runs = Counter::default();
    let agent = Agent::builder("twice")
        .model(many_calls(2))
        .tool(gated(&runs))
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let mut stored: Value = serde_json::from_str(&paused.state.to_json()).unwrap();
    let pending = stored["pending"].as_array_mut().expect("pending calls");
    assert_eq!(pending.len(), 2);
    pending[1] = pending[0].clone();
    let error = RunState::from_json(&stored.to_string()).unwrap_err();
    assert!(
        matches!(&error, AgentError::InvalidState(m) if m.contains("pending twice")),
        "{error}"
    );
    assert_eq!(runs.get(), 0);
}
