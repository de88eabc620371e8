//! Report progress and update context. A tool publishes preliminary results while it works, as
//! `tool.preliminary_result` events on the run's event stream (and kept on the call's step), and can
//! replace the application context that later turns' tools see. Shown with:
//!
//! - `Tool::streaming`: a tool written as a stream of `ToolEvent::Progress` values that ends in its
//!   `ToolEvent::Result` (`index-repository`, written as an async generator would be elsewhere);
//! - `.event_json_schema(..)`: progress values are checked; one that fails is not published and the
//!   call fails with `Invalid tool event: ...`;
//! - `ctx.emit_progress(..)` from an ordinary async tool;
//! - `ctx.set_context(..)`: the next turn's tools see it in `ctx.context()` (calls of the same turn
//!   keep seeing the context the turn started with), and the run's state keeps it;
//! - `agent.run(..).context(..)`: the application context a run starts with;
//! - consuming `agent.run(..).stream()`, a `futures::Stream` of `Event`s, and printing each one.
//!
//! Run it with `cargo run --example progress_context`. The model is scripted, so it runs offline.

use futures::{StreamExt, stream};
use phaseo_agent::{Agent, AgentError, Event, ScriptedModel, Tool, ToolCall, ToolEvent};
use serde_json::{Value, json};

fn tools() -> Vec<Tool> {
    // A tool written as a stream: progress values, then the result. It also records in the
    // application context that the repository is indexed (keeping what was there).
    let index_repository = Tool::streaming(
        "index-repository",
        "Index a repository for search",
        json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"]
        }),
        |input, ctx| {
            let path = input["path"].as_str().unwrap_or_default().to_owned();
            if path == "/broken" {
                // This progress value fails the event schema below: the call fails with it.
                return stream::iter(vec![
                    Ok(ToolEvent::Progress(json!({ "phase": "scan" }))),
                    Ok(ToolEvent::Progress(json!({ "phase": "upload" }))),
                    Ok(ToolEvent::Result(json!({ "indexed": 0 }))),
                ]);
            }
            let mut context = ctx.context().clone();
            if !context.is_object() {
                context = json!({});
            }
            context["indexed"] = json!(path);
            let updated = ctx.set_context(context);
            stream::iter(vec![
                updated.map(|()| ToolEvent::Progress(json!({ "phase": "scan", "files": 248 }))),
                Ok(ToolEvent::Progress(json!({ "phase": "embed" }))),
                Ok(ToolEvent::Result(json!({ "indexed": 248 }))),
            ])
        },
    )
    .event_json_schema(json!({
        "type": "object",
        "properties": { "phase": { "enum": ["scan", "embed"] } },
        "required": ["phase"]
    }));

    // An ordinary async tool that reports progress and reads the application context.
    let search_code = Tool::new(
        "search_code",
        "Search the indexed code",
        json!({
            "type": "object",
            "properties": { "query": { "type": "string" } },
            "required": ["query"]
        }),
        |input, ctx| async move {
            ctx.emit_progress(json!({ "stage": "searching" }))?;
            let indexed = ctx.context().get("indexed").cloned();
            Ok(json!({
                "query": input["query"],
                "tenant": ctx.context()["tenant"],
                "indexed": indexed,
                "hits": if indexed.is_some() { 3 } else { 0 },
            }))
        },
    );

    vec![index_repository, search_code]
}

fn script() -> ScriptedModel {
    ScriptedModel::new()
        // Turn 0: index two paths (the second fails its event schema) and search at once: the search
        // still sees the context the turn started with.
        .tool_calls([
            ToolCall::new("call_1", "index-repository", json!({ "path": "/srv/app" })),
            ToolCall::new("call_2", "index-repository", json!({ "path": "/broken" })),
            ToolCall::new("call_3", "search_code", json!({ "query": "fn main" })),
        ])
        // Turn 1: search again; now the context says the repository is indexed.
        .tool_call("call_4", "search_code", json!({ "query": "fn main" }))
        .text("`fn main` is in three places.")
}

fn agent(model: ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("coder").model(model).tools(tools()).build()
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    println!("== 1. Stream a run's events, starting with the context {{\"tenant\": \"acme\"}}");
    let agent = agent(script())?;
    let mut events = agent
        .run("Where is fn main?")
        .context(json!({ "tenant": "acme" }))
        .stream();
    let mut preliminary = Vec::new();
    let mut results = Vec::new();
    let mut names = Vec::new();
    while let Some(event) = events.next().await {
        names.push(event.name());
        match &event {
            Event::ModelTurn {
                step_index,
                tool_calls,
                text,
                ..
            } => {
                let calls: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
                println!(
                    "   {:<24} step {step_index}: calls {calls:?}, text {text:?}",
                    event.name()
                );
            }
            Event::ToolCalled { call, .. } => {
                println!(
                    "   {:<24} {} {} {}",
                    event.name(),
                    call.id,
                    call.name,
                    call.arguments
                );
            }
            Event::PreliminaryResult { call_id, value, .. } => {
                println!("   {:<24} {call_id} {value}", event.name());
                preliminary.push((call_id.clone(), value.clone()));
            }
            Event::ToolResult {
                call_id, content, ..
            } => {
                println!("   {:<24} {call_id} {content}", event.name());
                results.push((call_id.clone(), content.clone()));
            }
            Event::ToolError {
                call_id, content, ..
            } => {
                let content = content.clone().unwrap_or_default();
                println!("   {:<24} {call_id} {content}", event.name());
                results.push((call_id.clone(), content));
            }
            other => println!("   {}", other.name()),
        }
    }

    assert_eq!(names.first(), Some(&"run.started"));
    assert_eq!(names.last(), Some(&"run.completed"));
    // Progress in the order it was published; the rejected `upload` value was never published.
    assert_eq!(
        preliminary,
        [
            (
                "call_1".to_owned(),
                json!({ "phase": "scan", "files": 248 })
            ),
            ("call_1".to_owned(), json!({ "phase": "embed" })),
            ("call_2".to_owned(), json!({ "phase": "scan" })),
            ("call_3".to_owned(), json!({ "stage": "searching" })),
            ("call_4".to_owned(), json!({ "stage": "searching" })),
        ]
    );
    let content = |id: &str| -> Value {
        results
            .iter()
            .find(|(call_id, _)| call_id == id)
            .and_then(|(_, content)| serde_json::from_str(content).ok())
            .unwrap_or_default()
    };
    assert_eq!(content("call_1"), json!({ "indexed": 248 }));
    let rejected = content("call_2")["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        rejected.starts_with(r#"Invalid tool event: $.phase: "upload""#),
        "{rejected}"
    );
    // Same turn as the indexing: the old context. Next turn: the new one, tenant kept.
    assert_eq!(content("call_3")["indexed"], Value::Null);
    assert_eq!(content("call_3")["tenant"], "acme");
    assert_eq!(content("call_4")["indexed"], "/srv/app");
    assert_eq!(content("call_4")["tenant"], "acme");
    assert_eq!(content("call_4")["hits"], 3);

    println!(
        "\n== 2. The same run without streaming: progress is kept on each step, context in the state"
    );
    let done = self::agent(script())?
        .run("Where is fn main?")
        .context(json!({ "tenant": "acme" }))
        .await?;
    for step in done.state.steps() {
        println!(
            "   step {} {} {}: preliminary [{}]",
            step.step_index,
            step.call_id,
            step.tool,
            step.preliminary_results
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!("   context at the end: {}", done.state.context());
    assert_eq!(
        done.state.steps()[0].preliminary_results,
        [
            json!({ "phase": "scan", "files": 248 }),
            json!({ "phase": "embed" })
        ]
    );
    assert_eq!(
        done.state.context(),
        &json!({ "tenant": "acme", "indexed": "/srv/app" })
    );

    println!("\nAll checks passed.");
    Ok(())
}
