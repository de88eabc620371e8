//! Quickstart: a typed tool, a closure tool, and a gated tool that pauses the run for a person.
//! The paused run is written out as JSON, read back, approved, and resumed to its answer.
//!
//! Run it with `cargo run --example quickstart`. The model is scripted, so it runs offline.

use phaseo_agent::{
    Agent, AgentError, Decisions, IntoTool, RunState, ScriptedModel, Tool, ToolCall, ToolContext,
    tool,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Load one internal support ticket.
#[derive(Deserialize, schemars::JsonSchema)]
struct FetchTicket {
    /// The ticket id, like `T-1042`.
    ticket_id: String,
}

#[derive(Serialize)]
struct Ticket {
    id: String,
    title: String,
    service: String,
}

/// Load one internal support ticket.
#[tool(id = "fetch-ticket")]
async fn fetch_ticket(input: FetchTicket, _ctx: &ToolContext) -> Result<Ticket, String> {
    match input.ticket_id.as_str() {
        "T-1042" => Ok(Ticket {
            id: input.ticket_id,
            title: "Checkout returns 502 since the last release".into(),
            service: "checkout".into(),
        }),
        other => Err(format!("no ticket {other}")),
    }
}

fn tools() -> Vec<Tool> {
    // A typed tool, from the `#[tool]` function above: its description is the doc comment, and the
    // parameter schema comes from `FetchTicket`, checked before the function runs.
    let fetch = fetch_ticket.into_tool();

    // A closure tool over JSON.
    let status = Tool::new(
        "get_status",
        "Get the current service status",
        json!({
            "type": "object",
            "properties": { "service": { "type": "string" } },
            "required": ["service"]
        }),
        |input, _context| Ok(json!({ "service": input["service"], "status": "degraded" })),
    );

    // A gated tool: every call waits for a person.
    let rollback = Tool::new(
        "rollback",
        "Roll a service back to its previous release",
        json!({
            "type": "object",
            "properties": { "service": { "type": "string" } },
            "required": ["service"]
        }),
        |input, _context| Ok(json!({ "service": input["service"], "rolled_back": true })),
    )
    .require_approval();

    vec![fetch, status, rollback]
}

fn agent(model: &ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("support")
        .instructions("You help the on-call engineer.")
        .model(model.clone())
        .tools(tools())
        .build()
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    // What the model will do, turn by turn (a real model decides this itself).
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "fetch-ticket", json!({ "ticket_id": "T-1042" })),
            ToolCall::new("call_2", "get_status", json!({ "service": "checkout" })),
        ])
        .tool_call("call_3", "rollback", json!({ "service": "checkout" }))
        .text("Checkout was degraded after the release; I rolled it back. T-1042 can be closed.");

    println!("== 1. Run the agent");
    let paused = agent(&model)?.run("Look at T-1042 and fix it.").await?;
    for step in paused.state.steps() {
        println!("   {} ran: {}", step.tool, step.content);
    }
    println!("   status: {:?}", paused.status());
    for pending in paused.pending() {
        println!(
            "   waiting for a person: {} {} (call {}, kind {})",
            pending.call.name,
            pending.arguments,
            pending.call.id,
            pending.kind.as_str()
        );
    }

    println!("\n== 2. Store the paused run as JSON (a file, a database row, a queue message)");
    let stored = paused.state.to_json_pretty();
    println!("{}", indent(&stored));
    drop(paused);

    println!("\n== 3. Later, perhaps in another process: load it and approve the call by its id");
    let state = RunState::from_json(&stored)?;
    // Decisions name their run: call ids repeat across runs, so these approve this run's call_3 only.
    let decisions = Decisions::for_run(state.run_id()).approve("call_3");
    let done = agent(&model)?.resume(&state, decisions).await?;

    println!("\n== 4. The resumed run's answer");
    for step in done.state.steps().iter().skip(2) {
        println!("   {} ran: {}", step.tool, step.content);
    }
    println!("   status: {:?}", done.status());
    println!("   answer: {}", done.output().unwrap_or_default());
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("   {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
