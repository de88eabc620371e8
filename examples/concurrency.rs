//! Run tools concurrently, and change the next model request from a tool. Shown with:
//!
//! - `.tool_concurrency(n)` on the agent: the calls of one turn run at the same time, up to `n`, and
//!   their results reach the model in call order, though a later call finishes first;
//! - `agent.run(..).tool_concurrency(n)`: a different limit for one run;
//! - `.exclusive()`: a tool whose calls run alone (the calls before it finish first, the calls after
//!   it wait);
//! - `.next_turn(..)` (`TurnParams`): tools change the next model request (model, temperature,
//!   instructions, tool choice, active tools, max output tokens); several in one turn apply in call
//!   order; the change is visible in `model.requests()`, and applies to one request only.
//!
//! Elapsed times are printed for each part.
//!
//! Run it with `cargo run --example concurrency` (about one and a half seconds). The model is
//! scripted, so it runs offline.

use std::time::{Duration, Instant};

use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, Event, Message, RunRequest, ScriptedModel, Tool, ToolCall, ToolChoice,
    TurnParams,
};
use serde_json::{Value, json};

fn sleep_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string" },
            "ms": { "type": "integer", "minimum": 0 }
        },
        "required": ["name", "ms"]
    })
}

/// Fetches something that takes `ms` milliseconds.
fn fetch() -> Tool {
    Tool::new(
        "fetch",
        "Fetch a named resource",
        sleep_schema(),
        |input, _ctx| async move {
            let ms = input["ms"].as_u64().unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!({ "fetched": input["name"] }))
        },
    )
}

/// A schema migration: it must not run beside anything else.
fn migrate() -> Tool {
    Tool::new(
        "migrate",
        "Migrate the database schema",
        sleep_schema(),
        |input, _ctx| async move {
            let ms = input["ms"].as_u64().unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(json!({ "migrated": input["name"] }))
        },
    )
    .exclusive()
}

fn call(id: &str, tool: &str, name: &str, ms: u64) -> ToolCall {
    ToolCall::new(id, tool, json!({ "name": name, "ms": ms }))
}

/// When each call started and finished, in milliseconds since the run started.
struct Timing {
    started: Vec<(String, u128)>,
    finished: Vec<(String, u128)>,
    elapsed: u128,
}

impl Timing {
    fn started(&self, id: &str) -> u128 {
        self.started
            .iter()
            .find(|(c, _)| c == id)
            .map_or(u128::MAX, |(_, t)| *t)
    }

    fn finished(&self, id: &str) -> u128 {
        self.finished
            .iter()
            .find(|(c, _)| c == id)
            .map_or(u128::MAX, |(_, t)| *t)
    }

    fn finish_order(&self) -> Vec<&str> {
        self.finished.iter().map(|(c, _)| c.as_str()).collect()
    }
}

/// Streams one run, printing when each call starts and finishes.
async fn timed_run(run: RunRequest) -> Timing {
    let t0 = Instant::now();
    let ms = || t0.elapsed().as_millis();
    let mut timing = Timing {
        started: Vec::new(),
        finished: Vec::new(),
        elapsed: 0,
    };
    let mut events = run.stream();
    while let Some(event) = events.next().await {
        match event {
            Event::ToolCalled { call, .. } => {
                println!("   [{:>4} ms] {} {} started", ms(), call.id, call.arguments);
                timing.started.push((call.id, ms()));
            }
            Event::ToolResult {
                call_id, content, ..
            } => {
                println!("   [{:>4} ms] {call_id} finished: {content}", ms());
                timing.finished.push((call_id, ms()));
            }
            Event::Completed { .. } => timing.elapsed = ms(),
            Event::Failed { error, .. } => panic!("the run failed: {error}"),
            _ => {}
        }
    }
    println!("   [{:>4} ms] run completed", timing.elapsed);
    timing
}

/// The call ids of the tool results in the model's last request: the order the model read them in.
fn result_order(model: &ScriptedModel) -> Vec<String> {
    model
        .requests()
        .last()
        .map(|request| {
            request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::Tool { call_id, .. } => Some(call_id.clone()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn four_fetches() -> ScriptedModel {
    ScriptedModel::new()
        .record_requests()
        .tool_calls([
            call("call_1", "fetch", "orders", 300),
            call("call_2", "fetch", "customers", 50),
            call("call_3", "fetch", "invoices", 50),
            call("call_4", "fetch", "refunds", 50),
        ])
        .text("Here is everything.")
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    println!("== 1. `.tool_concurrency(4)`: four calls at once; the first is the slowest");
    let model = four_fetches();
    let agent = Agent::builder("reports")
        .model(model.clone())
        .tool(fetch())
        .tool_concurrency(4)
        .build()?;
    let timing = timed_run(agent.run("Get everything.")).await;
    let order = result_order(&model);
    println!("   the model read the results in call order: {order:?}");
    assert_eq!(
        timing.finish_order(),
        ["call_2", "call_3", "call_4", "call_1"]
    );
    assert_eq!(order, ["call_1", "call_2", "call_3", "call_4"]);
    assert!(
        (300..450).contains(&timing.elapsed),
        "about 300 ms, the slowest call"
    );

    println!("\n== 2. The same agent, with `.tool_concurrency(1)` on one run");
    let model = four_fetches();
    let agent = Agent::builder("reports")
        .model(model.clone())
        .tool(fetch())
        .tool_concurrency(4)
        .build()?;
    let timing = timed_run(agent.run("Get everything.").tool_concurrency(1)).await;
    assert_eq!(
        timing.finish_order(),
        ["call_1", "call_2", "call_3", "call_4"]
    );
    assert_eq!(
        result_order(&model),
        ["call_1", "call_2", "call_3", "call_4"]
    );
    assert!(
        timing.elapsed >= 450,
        "300 + 3 × 50 ms, one after the other"
    );

    println!("\n== 3. `.exclusive()`: the migration runs alone, between the calls around it");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            call("call_1", "fetch", "orders", 100),
            call("call_2", "fetch", "customers", 100),
            call("call_3", "migrate", "v42", 100),
            call("call_4", "fetch", "invoices", 100),
            call("call_5", "fetch", "refunds", 100),
        ])
        .text("Migrated, and fetched everything.");
    let agent = Agent::builder("reports")
        .model(model.clone())
        .tools([fetch(), migrate()])
        .tool_concurrency(4)
        .build()?;
    let timing = timed_run(agent.run("Get everything.")).await;
    assert!(timing.started("call_3") >= timing.finished("call_1").max(timing.finished("call_2")));
    assert!(timing.started("call_4") >= timing.finished("call_3"));
    assert!(timing.started("call_5") >= timing.finished("call_3"));
    assert!(
        timing.started("call_2") < timing.finished("call_1"),
        "the others still run together"
    );
    assert_eq!(
        result_order(&model),
        ["call_1", "call_2", "call_3", "call_4", "call_5"]
    );
    assert!(
        (300..450).contains(&timing.elapsed),
        "three rounds of 100 ms"
    );

    println!("\n== 4. Next-turn overrides: tools change the next model request");
    // `escalate` hands the next turn to a stronger model that must call `lookup`; `budget` caps its
    // output. Both run in one turn, and apply in call order: `budget` sees `escalate`'s change.
    let escalate = Tool::new(
        "escalate",
        "Hand the conversation to the senior model",
        json!({ "type": "object", "properties": { "reason": { "type": "string" } } }),
        |_input, _ctx| Ok(json!("escalated")),
    )
    .next_turn(|input: &Value, current: &TurnParams| {
        current
            .clone()
            .model("senior-model")
            .temperature(0.0)
            .instructions(format!(
                "You are the senior engineer. Escalated because: {}",
                input["reason"].as_str().unwrap_or("unknown")
            ))
            .tool_choice(ToolChoice::Tool("lookup".into()))
            .active_tools(["lookup"])
    });
    let budget = Tool::new(
        "budget",
        "Limit the next answer's length",
        json!({ "type": "object", "properties": { "tokens": { "type": "integer" } } }),
        |_input, _ctx| Ok(json!("budget set")),
    )
    .next_turn(|input: &Value, current: &TurnParams| {
        // The senior model gets a bigger budget; anything else the one asked for.
        let mut next = current.clone();
        next.max_output_tokens = match current.model.as_deref() {
            Some("senior-model") => Some(2_000),
            _ => input["tokens"].as_u64().and_then(|t| u32::try_from(t).ok()),
        };
        next
    });
    let lookup = Tool::new(
        "lookup",
        "Look up a runbook",
        json!({ "type": "object", "properties": { "topic": { "type": "string" } } }),
        |input, _ctx| Ok(json!({ "runbook": format!("How to fix {}", input["topic"]) })),
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "escalate", json!({ "reason": "data loss" })),
            ToolCall::new("call_2", "budget", json!({ "tokens": 200 })),
        ])
        .tool_call("call_3", "lookup", json!({ "topic": "data loss" }))
        .text("Follow the data-loss runbook.");
    let agent = Agent::builder("support")
        .instructions("You are the support assistant.")
        .model(model.clone())
        .model_name("base-model")
        .tools([escalate, budget, lookup])
        .build()?;
    let done = agent.run("We lost some data!").await?;
    for (i, request) in model.requests().iter().enumerate() {
        let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        println!(
            "   request {i}: model {:?}, temperature {:?}, max_output_tokens {:?}, tool_choice {:?}, tools {tools:?}",
            request.model, request.temperature, request.max_output_tokens, request.tool_choice
        );
        println!("              instructions {:?}", request.instructions);
    }
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    assert_eq!(first.model.as_deref(), Some("base-model"));
    assert_eq!(first.tools.len(), 3);
    let second = &requests[1];
    assert_eq!(second.model.as_deref(), Some("senior-model"));
    assert_eq!(second.temperature, Some(0.0));
    assert_eq!(second.max_output_tokens, Some(2_000));
    assert_eq!(second.tool_choice, ToolChoice::Tool("lookup".into()));
    assert_eq!(second.tools.len(), 1);
    assert_eq!(
        second.instructions,
        "You are the senior engineer. Escalated because: data loss"
    );
    // The overrides applied to one request; the next one is back to the agent's settings.
    assert_eq!(requests[2], {
        let mut expected = first.clone();
        expected.messages = requests[2].messages.clone();
        expected.meta.turn = 2;
        expected
    });
    assert_eq!(done.output(), Some("Follow the data-loss runbook."));

    println!("\nAll checks passed.");
    Ok(())
}
