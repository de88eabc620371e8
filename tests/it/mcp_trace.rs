//! A trace that crosses MCP: our client sends its call's W3C trace context in the request's
//! `_meta`, and our server's `execute_tool` span of that call is its child, in the same trace.
//! A request without one gets a root span of its own; refused and failed calls end their server
//! spans as such, with the same call metrics as a run's.

use opentelemetry::trace::{SpanId, SpanKind, Status};
use phaseo_agent::mcp::{McpClient, McpServer, Serving};
use phaseo_agent::telemetry::semconv;
use phaseo_agent::{Agent, ScriptedModel, ToolContext, tool};
use serde_json::json;

use crate::support::otel::{capture, named, names, one, text};

/// Ship an order.
#[tool]
fn ship(id: String) -> String {
    format!("shipped {id}")
}

/// Always fails.
#[tool]
fn broken() -> Result<String, String> {
    Err("the disk is full".into())
}

/// Delete everything.
#[tool(require_approval)]
fn wipe() -> String {
    "wiped".into()
}

/// Our server on one end of a pipe, our client on the other (one thread: the capture sees both).
async fn connected() -> (McpClient, Serving) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let server = McpServer::new((ship, broken, wipe));
    let (serving, client) = tokio::join!(server.serve(theirs), McpClient::connect(ours));
    (
        client.expect("the client connects"),
        serving.expect("the server serves"),
    )
}

#[tokio::test]
async fn a_call_over_mcp_continues_the_callers_trace() {
    let captured = capture();
    let (client, _serving) = connected().await;
    let agent = Agent::builder("front")
        .model(
            ScriptedModel::new()
                .tool_call("c1", "ship", json!({"id": "A-1"}))
                .text("Shipped."),
        )
        .tools(client.tools())
        .build()
        .unwrap();
    let done = agent.run("Ship A-1").await.unwrap();
    assert_eq!(done.output(), Some("Shipped."));

    let spans = captured.spans();
    let run = one(&spans, "invoke_agent front");
    let calls = named(&spans, "execute_tool ship");
    assert_eq!(
        calls.len(),
        2,
        "the client's and the server's: {:?}",
        names(&spans)
    );
    let client_side = calls
        .iter()
        .find(|s| text(s, semconv::GEN_AI_TOOL_TYPE) == "extension")
        .expect("the client's span: a tool of another process");
    let server_side = calls
        .iter()
        .find(|s| text(s, semconv::GEN_AI_TOOL_TYPE) == "function")
        .expect("the server's span");
    assert_eq!(client_side.parent_span_id, run.span_context.span_id());
    // The server's span is the client's span's child, in the run's trace.
    assert_eq!(
        server_side.span_context.trace_id(),
        run.span_context.trace_id()
    );
    assert_eq!(
        server_side.parent_span_id,
        client_side.span_context.span_id()
    );
    assert_eq!(server_side.span_kind, SpanKind::Internal);
    assert_eq!(text(server_side, semconv::GEN_AI_TOOL_NAME), "ship");
    assert_eq!(text(server_side, semconv::PHASEO_CALL_OUTCOME), "ok");
    assert_eq!(
        text(server_side, semconv::GEN_AI_TOOL_DESCRIPTION),
        "Ship an order."
    );
    for side in [client_side, server_side] {
        assert_eq!(text(side, semconv::PHASEO_CALL_OUTCOME), "ok");
    }
}

#[tokio::test]
async fn a_request_without_trace_context_starts_a_trace_and_failures_end_as_such() {
    let captured = capture();
    let (client, _serving) = connected().await;
    // Called outside any span: the request carries no `_meta` trace context.
    let call = |name: &str| {
        let tool = client.tool(name).expect("listed");
        async move { tool.invoke("{}", &ToolContext::detached()).await }
    };
    assert!(call("broken").await.is_err());
    // Our client cannot ask a person: the gated call is refused before it runs.
    assert!(call("wipe").await.is_err());

    let spans = captured.spans();
    let failed = one(&spans, "execute_tool broken");
    assert_eq!(failed.parent_span_id, SpanId::INVALID, "a root of its own");
    assert_eq!(text(failed, semconv::PHASEO_CALL_OUTCOME), "error");
    assert_eq!(text(failed, semconv::ERROR_TYPE), "tool");
    assert!(matches!(failed.status, Status::Error { .. }));
    let gated = one(&spans, "execute_tool wipe");
    assert_eq!(gated.parent_span_id, SpanId::INVALID);
    assert_eq!(text(gated, semconv::PHASEO_CALL_OUTCOME), "error");
    assert_ne!(
        failed.span_context.trace_id(),
        gated.span_context.trace_id(),
        "each request a trace of its own"
    );

    // The same call metrics as a run's: the failed call ran, the refused one did not.
    let counted = captured.points(semconv::PHASEO_TOOL_CALLS);
    let count = |tool: &str| {
        counted
            .iter()
            .filter(|p| p.attributes[semconv::GEN_AI_TOOL_NAME] == tool)
            .map(|p| p.count)
            .sum::<u64>()
    };
    assert_eq!((count("broken"), count("wipe")), (1, 1));
    let ran = captured.points(semconv::PHASEO_TOOL_CALL_DURATION);
    assert!(
        ran.iter()
            .any(|p| p.attributes[semconv::GEN_AI_TOOL_NAME] == "broken")
    );
    assert!(
        !ran.iter()
            .any(|p| p.attributes[semconv::GEN_AI_TOOL_NAME] == "wipe"),
        "a call refused before it ran has no duration"
    );
}
