//! Hand a call to a person or another system. A manual tool has no executor; an interactive tool
//! runs a hook that answers at once or pauses; the agent's `human_review` hands chosen calls of any
//! tool to a person. Every pause is resumed with decisions bound to call ids. Shown with:
//!
//! - `Tool::external` (`ticket_lookup`): pending kind `external_output`;
//! - `#[tool(external)]` (`fetch_invoice`): its pending call read as its typed input
//!   (`pending.input(fetch_invoice)`), and its output supplied as its output type
//!   (`Decisions::typed_output`), checked when the decision is made;
//! - `.on_tool_called(..)`: small refunds are answered at once, larger ones pause (kind `hitl`);
//! - `.on_response_received(..)`: the person's short answer is turned into the tool's result (or
//!   refused, which refuses the whole resume and changes nothing);
//! - the agent's `.human_review(..)`: a call of a tool that has an executor waits for a person (kind
//!   `hitl`), who approves it to run (or supplies its output, or rejects it);
//! - resuming with `Decisions::new().output(..)`, `.typed_output(..)` and `.approve(..)`.
//!
//! Run it with `cargo run --example manual_interactive`. The model is scripted, so it runs offline.

use phaseo_agent::{
    Agent, AgentError, Decisions, IntoTool, PendingKind, RunState, ScriptedModel, Tool, ToolCall,
    ToolContext, tool,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Which invoice to load.
#[derive(Deserialize, schemars::JsonSchema)]
struct InvoiceQuery {
    /// The invoice number, like `INV-7`.
    invoice_id: String,
}

/// What the billing system must send back for `fetch_invoice`.
#[derive(Clone, Serialize, Deserialize)]
struct Invoice {
    invoice_id: String,
    total_cents: u64,
}

// A typed manual tool: its schema comes from `InvoiceQuery`, and the billing system's answer is
// an `Invoice`, checked before the model sees it.
/// Load one invoice from the billing system.
#[tool(external)]
fn fetch_invoice(query: InvoiceQuery) -> Invoice;

fn tools() -> Vec<Tool> {
    // A manual tool: the result comes from outside the process.
    let ticket_lookup = Tool::external(
        "ticket_lookup",
        "Load one support ticket",
        json!({
            "type": "object",
            "properties": {
                "ticket_id": { "type": "string" }
            },
            "required": ["ticket_id"]
        }),
    );

    // An interactive tool: the hook answers small refunds itself and hands larger ones to a person,
    // whose one-word answer is turned into the tool's result.
    let refund = Tool::external(
        "refund",
        "Refund part of an order",
        json!({
            "type": "object",
            "properties": {
                "order_id": { "type": "string" },
                "amount": { "type": "number" }
            },
            "required": ["order_id", "amount"]
        }),
    )
    .on_tool_called(|input: &Value, _ctx: &ToolContext| {
        let amount = input["amount"].as_f64()?;
        (amount <= 20.0).then(|| json!({ "refunded": input["amount"], "by": "policy" }))
    })
    .on_response_received(|answer: Value| match answer.as_str() {
        Some("approved") => Ok(json!({ "refunded": true, "by": "a person" })),
        Some("denied") => Ok(json!({ "refunded": false, "by": "a person" })),
        _ => Err(format!("answer \"approved\" or \"denied\", not {answer}")),
    });

    // An ordinary tool with an executor; the agent's `human_review` below holds its calls for a person.
    let send_email = Tool::new(
        "send_email",
        "Email a customer",
        json!({
            "type": "object",
            "properties": {
                "to": { "type": "string" },
                "body": { "type": "string" }
            },
            "required": ["to", "body"]
        }),
        |input, _ctx| Ok(json!({ "sent": true, "to": input["to"] })),
    );

    vec![ticket_lookup, fetch_invoice.into_tool(), refund, send_email]
}

fn agent(model: &ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("support")
        .model(model.clone())
        .tools(tools())
        // A person reads every email before it goes out.
        .human_review(|call: &ToolCall, _ctx: &ToolContext| call.name == "send_email")
        .build()
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "ticket_lookup", json!({ "ticket_id": "T-1042" })),
            ToolCall::new(
                "call_2",
                "refund",
                json!({ "order_id": "A-1", "amount": 12 }),
            ),
            ToolCall::new(
                "call_3",
                "refund",
                json!({ "order_id": "A-2", "amount": 250 }),
            ),
            ToolCall::new(
                "call_4",
                "send_email",
                json!({ "to": "dana@example.com", "body": "Your refund is on its way." }),
            ),
            ToolCall::new("call_5", "fetch_invoice", json!({ "invoice_id": "INV-7" })),
        ])
        .text("Both refunds went through and Dana has been told.");
    let agent = agent(&model)?;

    println!("== 1. One turn, five calls: the hook answers one, four wait");
    let paused = agent.run("Sort out Dana's ticket.").await?;
    println!("   status: {:?}", paused.status());
    for pending in paused.pending() {
        println!(
            "   waiting: {} {} {} (kind {})",
            pending.call.id,
            pending.call.name,
            pending.arguments,
            pending.kind.as_str()
        );
    }
    let kinds: Vec<(&str, PendingKind)> = paused
        .pending()
        .iter()
        .map(|p| (p.call.id.as_str(), p.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("call_1", PendingKind::ExternalOutput),
            ("call_3", PendingKind::Hitl),
            ("call_4", PendingKind::Hitl),
            ("call_5", PendingKind::ExternalOutput),
        ]
    );

    // The paused run is data: store it, and load it where the answers arrive.
    let state = RunState::from_json(&paused.state.to_json())?;

    // Whoever answers a typed manual tool reads its typed input from the pending call.
    let query = state
        .pending()
        .iter()
        .find(|p| p.call.name == "fetch_invoice")
        .expect("fetch_invoice is pending")
        .input(fetch_invoice)?;
    println!("   the billing system is asked for {}", query.invoice_id);

    let ticket = json!({ "id": "T-1042", "title": "Refund not received", "customer": "Dana" });
    let invoice = Invoice {
        invoice_id: query.invoice_id,
        total_cents: 26200,
    };

    println!("\n== 2. Answers that do not fit are refused, and change nothing");
    let approve_external = Decisions::new()
        .approve("call_1")
        .output("call_3", json!("approved"))
        .approve("call_4")
        .typed_output("call_5", fetch_invoice, invoice.clone())?;
    let err = agent.resume(&state, approve_external).await.unwrap_err();
    println!("   approve an external call: {err}");
    assert!(matches!(err.error, AgentError::DecisionMismatch { .. }));

    let vague = Decisions::new()
        .output("call_1", ticket.clone())
        .output("call_3", json!("maybe"))
        .approve("call_4")
        .typed_output("call_5", fetch_invoice, invoice.clone())?;
    let err = agent.resume(&state, vague).await.unwrap_err();
    println!("   refund answer \"maybe\":   {err}");
    assert!(matches!(err.error, AgentError::InvalidOutput(_)));

    // An invoice given as JSON, checked against the tool when it is decided, before any resume.
    let err = Decisions::new()
        .typed_output(
            "call_5",
            &fetch_invoice.into_tool(),
            json!({ "invoice_id": "INV-7", "total": "262.00" }),
        )
        .unwrap_err();
    println!("   invoice of another shape: {err}");
    assert!(matches!(err, AgentError::InvalidOutput(_)));

    println!("\n== 3. Supply the outputs, approve the email, and resume");
    let decisions = Decisions::new()
        .output("call_1", ticket)
        .output("call_3", json!("approved"))
        .approve("call_4")
        .typed_output("call_5", fetch_invoice, invoice)?;
    let done = agent.resume(&state, decisions).await?;
    for step in done.state.steps() {
        println!("   {} {}: {}", step.call_id, step.tool, step.content);
    }
    println!("   answer: {}", done.output().unwrap_or_default());

    assert_eq!(
        done.state.tool_result("call_1").unwrap_or_default(),
        r#"{"customer":"Dana","id":"T-1042","title":"Refund not received"}"#
    );
    assert_eq!(
        done.state.tool_result("call_2").unwrap_or_default(),
        r#"{"by":"policy","refunded":12}"#
    );
    assert_eq!(
        done.state.tool_result("call_3").unwrap_or_default(),
        r#"{"by":"a person","refunded":true}"#
    );
    assert_eq!(
        done.state.tool_result("call_4").unwrap_or_default(),
        r#"{"sent":true,"to":"dana@example.com"}"#
    );
    assert_eq!(
        done.state.tool_result("call_5").unwrap_or_default(),
        r#"{"invoice_id":"INV-7","total_cents":26200}"#
    );
    assert_eq!(
        done.output(),
        Some("Both refunds went through and Dana has been told.")
    );

    println!("\nAll checks passed.");
    Ok(())
}
