//! Recover from tool errors. By default a failed call goes back to the model as `{"error": "..."}`
//! and the run goes on; each kind of failure can instead fail the run. Shown with:
//!
//! - the default, return-to-model, for a tool's own `Err`, a panic (the model sees a generic message;
//!   the `tool.error` event keeps the panic text for operators), invalid arguments (answered with the
//!   JSON path and the reason, before any tool code runs), unreadable arguments, and an output that
//!   fails its validator;
//! - `.on_error(OnError::FailRun)` on one tool, and agent-wide with a tool that opts back out;
//! - unknown tools: the run fails by default (``unknown tool `<name>` ``), or
//!   `.on_unknown_tool(OnError::ReturnToModel)` answers the model;
//! - `.on_invalid_arguments(OnError::FailRun)`;
//! - `.max_output_chars(..)`, agent-wide and per tool: a long result keeps its start and its end
//!   around a notice of how much was cut;
//! - the turn limit, `.max_turns(..)`.
//!
//! Run it with `cargo run --example errors`. The model is scripted, so it runs offline.

use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentBuilder, AgentError, Event, Message, OnError, ScriptedModel, Tool, ToolCall,
};
use serde_json::{Value, json};

fn order_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "order_id": { "type": "string" } },
        "required": ["order_id"]
    })
}

fn lookup_order() -> Tool {
    Tool::new(
        "lookup_order",
        "Look up an order",
        order_schema(),
        |input, _ctx| match input["order_id"].as_str() {
            Some("A-1") => Ok(json!({ "order_id": "A-1", "status": "shipped" })),
            Some(other) => Err(AgentError::tool(format!("order {other} does not exist"))),
            None => Err(AgentError::tool("no order id")),
        },
    )
}

fn flaky() -> Tool {
    Tool::new(
        "flaky",
        "A tool with a bug",
        json!({ "type": "object", "properties": {} }),
        |_input, _ctx| {
            let items: Vec<u32> = Vec::new();
            Ok(json!(items[3]))
        },
    )
}

fn get_price() -> Tool {
    Tool::new(
        "get_price",
        "Price of an order in cents",
        order_schema(),
        |_input, _ctx| Ok(json!(-500)),
    )
    .output_json_schema(json!({ "type": "integer", "minimum": 0 }))
}

fn charge_card() -> Tool {
    Tool::new(
        "charge_card",
        "Charge the customer's card",
        order_schema(),
        |_input, _ctx| Err(AgentError::tool("card declined")),
    )
}

fn builder(id: &str, model: &ScriptedModel) -> AgentBuilder {
    Agent::builder(id).model(model.clone())
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    // A panic in tool code still prints through the panic hook; keep it to one line here.
    std::panic::set_hook(Box::new(|info| {
        println!("   [panic hook] {}", info.to_string().replace('\n', " "));
    }));

    println!("== 1. By default every failure goes back to the model, and the run goes on");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "lookup_order", json!({ "order_id": "A-1" })),
            ToolCall::new("call_2", "lookup_order", json!({ "order_id": "A-9" })),
            ToolCall::new("call_3", "flaky", json!({})),
            ToolCall::new("call_4", "lookup_order", json!({ "order_id": 9 })),
            ToolCall::raw("call_5", "lookup_order", r#"{"order_id": "A-1""#),
            ToolCall::new("call_6", "get_price", json!({ "order_id": "A-1" })),
        ])
        .text("A-1 has shipped; the rest needs a closer look.");
    let agent = builder("support", &model)
        .tools([lookup_order(), flaky(), get_price()])
        .build()?;
    // Arguments are checked when the turn is planned, before any tool runs, so the two refused
    // calls are reported first; the model still gets every result in call order.
    let mut events = agent.run("Check the orders.").stream();
    let mut operator_errors = Vec::new();
    let mut output = None;
    while let Some(event) = events.next().await {
        match event {
            Event::ToolResult {
                call_id, content, ..
            } => println!("   {call_id} result: {content}"),
            Event::ToolError {
                call_id,
                error,
                content,
                ..
            } => {
                let content = content.unwrap_or_default();
                println!("   {call_id} error:  {content}");
                let plain = json!({ "error": error });
                if serde_json::from_str::<Value>(&content).ok().as_ref() != Some(&plain) {
                    println!("          (the tool.error event, for operators: {error})");
                }
                operator_errors.push((call_id, error));
            }
            Event::Completed { output: text, .. } => output = Some(text),
            _ => {}
        }
    }
    println!("   answer: {}", output.clone().unwrap_or_default());
    assert_eq!(
        output.as_deref(),
        Some("A-1 has shipped; the rest needs a closer look.")
    );
    let request = model.requests().pop().expect("the model was asked again");
    let seen = |id: &str| {
        request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::Tool {
                    call_id, content, ..
                } if call_id == id => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default()
    };
    assert_eq!(seen("call_1"), r#"{"order_id":"A-1","status":"shipped"}"#);
    assert_eq!(seen("call_2"), r#"{"error":"order A-9 does not exist"}"#);
    assert_eq!(
        seen("call_3"),
        r#"{"error":"Tool flaky failed unexpectedly"}"#
    );
    assert_eq!(
        seen("call_4"),
        r#"{"error":"Invalid tool input: $.order_id: 9 is not of type \"string\""}"#
    );
    assert!(
        seen("call_5")
            .starts_with(r#"{"error":"Invalid tool input: $: arguments are not valid JSON"#)
    );
    assert!(seen("call_6").starts_with(r#"{"error":"Invalid tool output: $: -500 "#));
    assert!(operator_errors.iter().any(
        |(id, e)| id == "call_3" && e.starts_with("tool `flaky` panicked: index out of bounds")
    ));

    println!("\n== 2. `.on_error(OnError::FailRun)` on one tool: its failure fails the run");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "lookup_order", json!({ "order_id": "A-9" })),
            ToolCall::new("call_2", "charge_card", json!({ "order_id": "A-1" })),
        ])
        .text("unreachable");
    let agent = builder("billing", &model)
        .tools([lookup_order(), charge_card().on_error(OnError::FailRun)])
        .build()?;
    let err = agent.run("Charge A-1.").await.unwrap_err();
    println!("   run failed: {err}");
    assert_eq!(err, AgentError::Tool("card declined".into()));

    println!("\n== 3. Agent-wide `.on_error(OnError::FailRun)`; one tool opts back out");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "lookup_order", json!({ "order_id": "A-9" }))
        .tool_call("call_2", "charge_card", json!({ "order_id": "A-1" }))
        .text("unreachable");
    let agent = builder("billing", &model)
        .tools([
            lookup_order().on_error(OnError::ReturnToModel),
            charge_card(),
        ])
        .on_error(OnError::FailRun)
        .build()?;
    let err = agent
        .run("Look up A-9, then charge A-1.")
        .await
        .unwrap_err();
    let second = model.requests().pop().expect("a second request");
    println!(
        "   lookup_order's error went to the model: {}",
        second
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .unwrap_or_default()
    );
    println!("   charge_card's error failed the run:    {err}");
    assert_eq!(model.requests().len(), 2);
    assert_eq!(err, AgentError::Tool("card declined".into()));

    println!("\n== 4. Unknown tools fail the run by default, or go back to the model");
    let script = || {
        ScriptedModel::new()
            .record_requests()
            .tool_call("call_1", "fly", json!({ "to": "the moon" }))
            .text("I cannot fly; here is what I can do instead.")
    };
    let model = script();
    let err = builder("support", &model)
        .tool(lookup_order())
        .build()?
        .run("Fly me to the moon.")
        .await
        .unwrap_err();
    println!("   default:        run failed: {err}");
    assert_eq!(err.to_string(), "unknown tool `fly`");
    let model = script();
    let done = builder("support", &model)
        .tool(lookup_order())
        .on_unknown_tool(OnError::ReturnToModel)
        .build()?
        .run("Fly me to the moon.")
        .await?;
    println!(
        "   ReturnToModel:  the model saw {}, and answered: {}",
        done.state.tool_result("call_1").unwrap_or_default(),
        done.output().unwrap_or_default()
    );
    assert_eq!(
        done.state.tool_result("call_1").unwrap_or_default(),
        r#"{"error":"Unknown tool: fly"}"#
    );

    println!("\n== 5. `.on_invalid_arguments(OnError::FailRun)`: bad arguments fail the run");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "lookup_order", json!({ "order": "A-1" }))
        .text("unreachable");
    let err = builder("support", &model)
        .tool(lookup_order())
        .on_invalid_arguments(OnError::FailRun)
        .build()?
        .run("Look up A-1.")
        .await
        .unwrap_err();
    println!("   run failed: {err}");
    assert!(matches!(err.error, AgentError::InvalidInput(_)));
    assert!(err.to_string().contains(r#""order_id""#), "{err}");

    println!("\n== 6. Output caps: agent-wide 60 characters, and 24 for one tool");
    let log = "0123456789".repeat(20);
    let read_log = {
        let log = log.clone();
        Tool::new(
            "read_log",
            "Read the service log",
            json!({ "type": "object", "properties": {} }),
            move |_input, _ctx| Ok(json!(log)),
        )
    };
    let read_trace = {
        let log = log.clone();
        Tool::new(
            "read_trace",
            "Read a stack trace",
            json!({ "type": "object", "properties": {} }),
            move |_input, _ctx| Ok(json!(log)),
        )
        .max_output_chars(24)
    };
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "read_log", json!({})),
            ToolCall::new("call_2", "read_trace", json!({})),
        ])
        .text("The log is long and repetitive.");
    let done = builder("ops", &model)
        .tools([read_log, read_trace])
        .max_output_chars(60)
        .build()?
        .run("What does the log say?")
        .await?;
    for step in done.state.steps() {
        println!(
            "   {} ({} characters):",
            step.tool,
            step.content.chars().count()
        );
        for line in step.content.lines() {
            println!("      {line}");
        }
    }
    // The result text is the JSON string: 200 digits and two quotes, 202 characters.
    let full = json!(log).to_string();
    let capped = |max: usize| {
        let (head, tail) = (max - max / 2, max / 2);
        format!(
            "{}\n[... {} characters cut ...]\n{}",
            &full[..head],
            full.len() - max,
            &full[full.len() - tail..]
        )
    };
    assert_eq!(
        done.state.tool_result("call_1").unwrap_or_default(),
        capped(60)
    );
    assert_eq!(
        done.state.tool_result("call_2").unwrap_or_default(),
        capped(24)
    );

    println!("\n== 7. The turn limit: a model that keeps calling tools");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "lookup_order", json!({ "order_id": "A-1" }))
        .tool_call("call_2", "lookup_order", json!({ "order_id": "A-1" }))
        .tool_call("call_3", "lookup_order", json!({ "order_id": "A-1" }))
        .tool_call("call_4", "lookup_order", json!({ "order_id": "A-1" }))
        .text("unreachable");
    let err = builder("support", &model)
        .tool(lookup_order())
        .max_turns(3)
        .build()?
        .run("Look up A-1, thoroughly.")
        .await
        .unwrap_err();
    println!("   run failed: {err}");
    assert_eq!(err, AgentError::MaxTurnsExceeded(3));
    assert_eq!(model.requests().len(), 3);

    println!("\nAll checks passed.");
    Ok(())
}
