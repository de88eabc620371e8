//! Progress and context: what a tool reports while it runs (as events and on the step), and the
//! context tools set for the turns after theirs.

use crate::support::agent::result_of;
use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, Decisions, Event, Message, RunState, ScriptedModel, Tool, ToolCall,
    ToolContext, ToolEvent,
};
use serde_json::{Value, json};

fn indexer() -> Tool {
    Tool::new(
        "index",
        "Index a repository",
        json!({"type": "object"}),
        |_, ctx: ToolContext| async move {
            ctx.emit_progress(json!({"phase": "scan"}))?;
            ctx.emit_progress(json!({"phase": "embed"}))?;
            Ok(json!({"indexed": 248}))
        },
    )
}

#[tokio::test]
async fn progress_becomes_preliminary_result_events_in_order_and_is_kept_on_the_step() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "index", json!({}))
        .text("Indexed.");
    let agent = Agent::builder("t")
        .model(model)
        .tool(indexer())
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("index it").stream().collect().await;
    let names: Vec<&str> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "run.started",
            "model.turn",
            "tool.called",
            "tool.preliminary_result",
            "tool.preliminary_result",
            "tool.result",
            "model.turn",
            "run.completed"
        ]
    );
    assert!(
        matches!(
            &events[3],
            Event::PreliminaryResult { call_id, tool, value, .. }
                if call_id == "c1" && tool == "index" && *value == json!({"phase": "scan"})
        ),
        "{:?}",
        events[3]
    );
    assert!(
        matches!(
            &events[4],
            Event::PreliminaryResult { call_id, tool, value, .. }
                if call_id == "c1" && tool == "index" && *value == json!({"phase": "embed"})
        ),
        "{:?}",
        events[4]
    );
    let serialised = serde_json::to_value(&events[3]).unwrap();
    assert_eq!(serialised["type"], "tool.preliminary_result");
    let Some(Event::Completed { state, .. }) = events.last() else {
        panic!("the run did not complete")
    };
    assert_eq!(
        state.steps()[0].preliminary_results,
        vec![json!({"phase": "scan"}), json!({"phase": "embed"})]
    );
}

#[tokio::test]
async fn progress_is_kept_on_the_step_without_a_listener() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "index", json!({}))
        .text("Indexed.");
    let agent = Agent::builder("t")
        .model(model)
        .tool(indexer())
        .build()
        .unwrap();
    let result = agent.run("index it").await.unwrap();
    assert_eq!(
        result.state.steps()[0].preliminary_results,
        vec![json!({"phase": "scan"}), json!({"phase": "embed"})]
    );
}

#[tokio::test]
async fn a_streaming_tool_yields_progress_then_its_result() {
    let tool = Tool::streaming("index", "Index", json!({"type": "object"}), |_, _| {
        futures::stream::iter([
            Ok(ToolEvent::Progress(json!({"phase": "scan"}))),
            Ok(ToolEvent::Progress(json!({"phase": "embed"}))),
            Ok(ToolEvent::Result(json!({"indexed": 248}))),
        ])
    });
    let empty = Tool::streaming(
        "empty",
        "Yields nothing",
        json!({"type": "object"}),
        |_, _| futures::stream::empty(),
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "index", json!({})),
            ToolCall::new("c2", "empty", json!({})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .tool(empty)
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("go").stream().collect().await;
    let progress: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::PreliminaryResult { value, .. } => Some(value.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        [json!({"phase": "scan"}), json!({"phase": "embed"})]
    );
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!({"indexed": 248}));
    assert_eq!(
        result_of(req, "c2"),
        json!({"error": "the tool's stream ended without a result"})
    );
}

#[tokio::test]
async fn an_event_validator_rejects_bad_progress_and_fails_the_call() {
    let tool = Tool::new("index", "Index", json!({"type": "object"}), |_, ctx: ToolContext| async move {
        ctx.emit_progress(json!({"phase": "scan"}))?;
        // A tool that ignores the error still fails: the runtime remembers it.
        let _ = ctx.emit_progress(json!({"phase": 3}));
        Ok(json!("done"))
    })
    .event_json_schema(json!({"type": "object", "properties": {"phase": {"type": "string"}}, "required": ["phase"]}));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "index", json!({}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("go").stream().collect().await;
    let published = events
        .iter()
        .filter(|e| e.name() == "tool.preliminary_result")
        .count();
    assert_eq!(published, 1, "the rejected value is not published");
    assert_eq!(
        result_of(&model.requests()[1], "c1"),
        json!({"error": "Invalid tool event: $.phase: 3 is not of type \"string\""})
    );
}

fn context_tools() -> Vec<Tool> {
    let set = Tool::new(
        "set",
        "Sets the context",
        json!({"type": "object"}),
        |input, ctx| {
            ctx.set_context(input.clone())?;
            Ok(json!({"saw": ctx.context()}))
        },
    );
    let read = Tool::new(
        "read",
        "Reads the context",
        json!({"type": "object"}),
        |_, ctx| Ok(ctx.context().clone()),
    );
    let gated = Tool::new(
        "gated",
        "Needs approval",
        json!({"type": "object"}),
        |_, ctx| Ok(ctx.context().clone()),
    )
    .require_approval();
    vec![set, read, gated]
}

#[tokio::test]
async fn set_context_is_seen_by_the_next_turn_and_survives_a_pause_and_a_json_round_trip() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "set", json!({"indexed": true})),
            ToolCall::new("c2", "read", json!({})),
            ToolCall::new("c3", "gated", json!({})),
        ])
        .tool_call("c4", "read", json!({}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tools(context_tools())
        .build()
        .unwrap();
    let paused = agent
        .run("go")
        .context(json!({"indexed": false}))
        .await
        .unwrap();
    assert_eq!(
        paused.state.context(),
        &json!({"indexed": true}),
        "applied before the pause"
    );

    let state = RunState::from_json(&paused.state.to_json()).unwrap();
    let fresh = Agent::builder("t")
        .model(model.clone())
        .tools(context_tools())
        .build()
        .unwrap();
    let done = fresh
        .resume(&state, Decisions::new().approve("c3"))
        .await
        .unwrap();
    assert_eq!(done.state.context(), &json!({"indexed": true}));

    let requests = model.requests();
    // Calls of the same turn see the context the turn started with.
    assert_eq!(
        result_of(&requests[1], "c1"),
        json!({"saw": {"indexed": false}})
    );
    assert_eq!(result_of(&requests[1], "c2"), json!({"indexed": false}));
    // The approved call ran after the pause, with the context as it stood then.
    assert_eq!(result_of(&requests[1], "c3"), json!({"indexed": true}));
    // The next turn's tools see it.
    assert_eq!(result_of(&requests[2], "c4"), json!({"indexed": true}));
}

#[tokio::test(start_paused = true)]
async fn among_concurrent_calls_the_last_in_call_order_wins() {
    let set = Tool::new(
        "set",
        "Sets the context after `ms`",
        json!({"type": "object"}),
        |input: Value, ctx: ToolContext| async move {
            let ms = input["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            ctx.set_context(json!({"by": input["by"]}))?;
            Ok::<_, AgentError>(json!("set"))
        },
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "set", json!({"by": "first", "ms": 1})),
            ToolCall::new("c2", "set", json!({"by": "second", "ms": 50})),
            ToolCall::new("c3", "set", json!({"by": "third", "ms": 10})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model)
        .tool(set)
        .tool_concurrency(3)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        result.state.context(),
        &json!({"by": "third"}),
        "call order, not finishing order"
    );
}

#[tokio::test]
async fn a_detached_context_records_what_a_tool_reports() {
    let ctx = ToolContext::detached().with_context(json!({"tenant": "acme"}));
    #[derive(serde::Deserialize)]
    struct App {
        tenant: String,
    }
    assert_eq!(ctx.context_as::<App>().unwrap().tenant, "acme");
    ctx.set_context(json!({"tenant": "globex"})).unwrap();
    assert_eq!(ctx.context_update(), Some(json!({"tenant": "globex"})));
    assert_eq!(
        ctx.context(),
        &json!({"tenant": "acme"}),
        "the snapshot does not change mid-call"
    );
}

/// A tool may keep a clone of its context past its call (say, in a task it spawned). The run's
/// record of the call and its application context come out whole all the same.
#[tokio::test]
async fn a_tool_that_keeps_its_context_leaves_the_run_whole() {
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::<ToolContext>::new()));
    let keep = kept.clone();
    let keeper = Tool::new(
        "keeper",
        "Keeps its context",
        json!({"type": "object"}),
        move |_, ctx: ToolContext| {
            keep.lock().unwrap().push(ctx.clone());
            Ok(json!({"tenant": ctx.context()["tenant"]}))
        },
    );
    let model = ScriptedModel::new()
        .tool_call("c1", "keeper", json!({}))
        .text("Kept.");
    let agent = Agent::builder("t")
        .model(model)
        .tool(keeper)
        .build()
        .unwrap();
    let done = agent
        .run("go")
        .context(json!({"tenant": "acme"}))
        .await
        .unwrap();
    assert_eq!(
        kept.lock().unwrap().len(),
        1,
        "the tool still holds its context"
    );
    let step = &done.state.steps()[0];
    assert_eq!(
        (step.call_id.as_str(), step.tool.as_str()),
        ("c1", "keeper")
    );
    assert_eq!(done.state.tool_result("c1"), Some(r#"{"tenant":"acme"}"#));
    assert!(done.state.messages().iter().any(|m| matches!(
        m,
        Message::Tool { call_id, name, .. } if call_id == "c1" && name == "keeper"
    )));
    assert_eq!(done.state.context(), &json!({"tenant": "acme"}));
    assert_eq!(done.output(), Some("Kept."));
}
