//! Define a tool: `Tool::new` over JSON, with a synchronous closure (`get_status`) or an async one
//! (`search_tickets`), `Tool::typed` (input and output are Rust types; the parameter schema is
//! generated from the input type), and the tool fields around them: the parameter schema,
//! validators (`input_schema`, a function that may transform the arguments; `output_json_schema`;
//! `output_schema`, a function that may transform the result) and `timeout`. Then one run that calls
//! them, including two calls the validators refuse before any tool code runs.
//!
//! Run it with `cargo run --example define`. The model is scripted, so it runs offline.

use std::time::Duration;

use phaseo_agent::{Agent, AgentError, Message, ScriptedModel, Tool, ToolCall, ToolContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// The input of `fetch-ticket`: its parameter schema is generated from this type, and the doc
// comments (on the type and on each field) become the schema's descriptions, which the model reads.
/// Which ticket to load.
#[derive(Deserialize, schemars::JsonSchema)]
struct FetchTicket {
    /// The ticket id, like `T-1042`.
    ticket_id: String,
}

#[derive(Serialize)]
struct Ticket {
    id: String,
    title: String,
    reporter: String,
}

/// The simplest tool, a synchronous closure over JSON, plus an output validator: each result is checked against a
/// JSON Schema (compiled once, when the tool is built).
fn get_status() -> Tool {
    Tool::new(
        "get_status",
        "Get the current service status",
        json!({
            "type": "object",
            "properties": {
                "service": { "type": "string" }
            },
            "required": ["service"]
        }),
        |input, _context| {
            Ok(json!({
                "service": input["service"],
                "status": "healthy"
            }))
        },
    )
    .output_json_schema(json!({
        "type": "object",
        "properties": { "status": { "enum": ["healthy", "degraded", "down"] } },
        "required": ["service", "status"]
    }))
}

/// `search_tickets`: an async executor (the same `Tool::new`: its future is awaited), a 10 s timeout, and a custom input validator
/// (`input_schema`) that runs after the parameter schema check. It may transform the arguments: here
/// it trims the query, and refuses a blank one.
fn search_tickets() -> Tool {
    Tool::new(
        "search_tickets",
        "Search support tickets by keyword",
        json!({
            "type": "object",
            "properties": { "query": { "type": "string" } },
            "required": ["query"]
        }),
        |input, _ctx| async move {
            // The executor sees the validator's output: the query is already trimmed.
            let query = input["query"].as_str().unwrap_or_default().to_owned();
            let hits: Vec<&str> = ["T-1042", "T-1043", "T-2001"]
                .into_iter()
                .filter(|_| query == "checkout")
                .collect();
            Ok(json!({ "query": query, "hits": hits }))
        },
    )
    .timeout(Duration::from_secs(10))
    .input_schema(|mut input: Value| {
        let query = input["query"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if query.is_empty() {
            return Err("query must not be blank");
        }
        input["query"] = json!(query);
        Ok(input)
    })
}

/// A typed tool (what `#[tool]` expands to): the input is decoded into `FetchTicket` after the
/// arguments passed the generated schema; an `Err` reaches the model as `{"error": ...}`. The output
/// validator (`output_schema`) is a plain function that may transform the result: it masks the
/// reporter's address before the model sees it.
fn fetch_ticket() -> Tool {
    Tool::typed(
        "fetch-ticket",
        "Load one internal support ticket.",
        |input: FetchTicket, _ctx: ToolContext| async move {
            match input.ticket_id.as_str() {
                "T-1042" => Ok(Ticket {
                    id: input.ticket_id,
                    title: "Checkout returns 502 since the last release".into(),
                    reporter: "dana@example.com".into(),
                }),
                other => Err(format!("no ticket {other}")),
            }
        },
    )
    .timeout(Duration::from_millis(3_000))
    .output_schema(|mut ticket: Value| {
        let Some(reporter) = ticket["reporter"].as_str() else {
            return Err("a ticket has a reporter".to_owned());
        };
        let domain = reporter.split('@').nth(1).unwrap_or("unknown");
        ticket["reporter"] = json!(format!("***@{domain}"));
        Ok(ticket)
    })
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let tools = vec![get_status(), search_tickets(), fetch_ticket()];

    println!("== 1. Three tools, and the parameter schema each one sends to the model");
    for tool in &tools {
        println!("   {}: {}", tool.id(), tool.description());
        println!("      parameters: {}", tool.parameters());
    }
    // The typed tool's schema was generated from `FetchTicket`, its doc comments included.
    assert_eq!(
        tools[2].parameters(),
        &json!({
            "description": "Which ticket to load.",
            "type": "object",
            "properties": {
                "ticket_id": { "type": "string", "description": "The ticket id, like `T-1042`." }
            },
            "required": ["ticket_id"]
        })
    );

    // What the model will do (a real model decides this itself): one turn of six calls, then an answer.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "get_status", json!({ "service": "checkout" })),
            // `input_schema` trims this query before the executor sees it.
            ToolCall::new(
                "call_2",
                "search_tickets",
                json!({ "query": "  checkout " }),
            ),
            // `input_schema` refuses this one: the executor never runs.
            ToolCall::new("call_3", "search_tickets", json!({ "query": "   " })),
            // The generated schema refuses a number where a string is expected, with its JSON path.
            ToolCall::new("call_4", "fetch-ticket", json!({ "ticket_id": 1042 })),
            ToolCall::new("call_5", "fetch-ticket", json!({ "ticket_id": "T-1042" })),
            // The typed function's own `Err` goes back to the model as `{"error": ...}`.
            ToolCall::new("call_6", "fetch-ticket", json!({ "ticket_id": "T-9999" })),
        ])
        .text("Checkout is healthy; T-1042 is the open ticket about the 502s.");

    let agent = Agent::builder("support")
        .instructions("You help the on-call engineer.")
        .model(model.clone())
        .tools(tools)
        .build()?;

    println!("\n== 2. Run the agent");
    let done = agent.run("What is going on with checkout?").await?;

    let requests = model.requests();
    println!(
        "   the model was sent {} tools in its first request: {:?}",
        requests[0].tools.len(),
        requests[0]
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
    );
    println!("   what each call returned to the model:");
    for step in done.state.steps() {
        let mark = if step.is_error { "error " } else { "result" };
        println!("   {} {mark} {}: {}", step.call_id, step.tool, step.content);
    }
    println!("   answer: {}", done.output().unwrap_or_default());

    // Everything above, checked: this example doubles as a smoke test.
    let content = |id: &str| {
        done.state
            .messages()
            .iter()
            .find_map(|m| match m {
                Message::Tool {
                    call_id, content, ..
                } if call_id == id => serde_json::from_str::<Value>(content).ok(),
                _ => None,
            })
            .unwrap_or_default()
    };
    assert_eq!(
        content("call_1"),
        json!({ "service": "checkout", "status": "healthy" })
    );
    assert_eq!(content("call_2")["query"], "checkout");
    assert_eq!(
        content("call_2")["hits"],
        json!(["T-1042", "T-1043", "T-2001"])
    );
    assert_eq!(
        content("call_3"),
        json!({ "error": "Invalid tool input: $: query must not be blank" })
    );
    assert_eq!(
        content("call_4"),
        json!({ "error": "Invalid tool input: $.ticket_id: 1042 is not of type \"string\"" })
    );
    assert_eq!(content("call_5")["reporter"], "***@example.com");
    assert_eq!(content("call_6"), json!({ "error": "no ticket T-9999" }));
    assert_eq!(
        done.output(),
        Some("Checkout is healthy; T-1042 is the open ticket about the 502s.")
    );
    println!("\nAll checks passed.");
    Ok(())
}
