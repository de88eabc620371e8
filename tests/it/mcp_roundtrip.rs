//! Our MCP client against our MCP server, over an in-process pipe: a `#[tool]` served by
//! `McpServer` is, through `McpClient`, a tool of another process, with its schema, its typed
//! output, its progress, its errors and its approval gate carried across.

use phaseo_agent::mcp::McpClient;
use phaseo_agent::mcp::{McpServer, NO_ELICITATION, Serving};
use phaseo_agent::{AgentError, IntoTool, ToolContext, tool};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Order {
    /// The order's id.
    id: String,
    /// How many boxes, 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    boxes: u32,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Shipped {
    id: String,
    boxes: u32,
}

/// Ship an order.
#[tool(title = "Ship an order", idempotent)]
fn ship(order: Order) -> Shipped {
    Shipped {
        id: order.id,
        boxes: order.boxes,
    }
}

/// Count to three, reporting each step.
#[tool(read_only)]
async fn count(ctx: &ToolContext) -> Result<String, String> {
    for step in 1..=3 {
        ctx.emit_progress(format!("step {step}"))
            .map_err(|e| e.to_string())?;
    }
    Ok("counted".into())
}

/// Always fails.
#[tool]
fn broken() -> Result<String, String> {
    Err("the disk is full".into())
}

/// Delete everything.
#[tool(require_approval, destructive)]
fn wipe() -> String {
    "wiped".into()
}

/// Our server on one end of a pipe, our client on the other.
async fn connected() -> (McpClient, Serving) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let server = McpServer::new((ship, count, broken, wipe));
    let (serving, client) = tokio::join!(server.serve(theirs), McpClient::connect(ours));
    (
        client.expect("the client connects"),
        serving.expect("the server serves"),
    )
}

#[tokio::test]
async fn the_client_sees_the_served_tools_with_their_schemas() {
    let (client, _serving) = connected().await;
    let mut ids: Vec<String> = client.tools().iter().map(|t| t.id().to_owned()).collect();
    ids.sort();
    assert_eq!(ids, ["broken", "count", "ship", "wipe"]);
    // The schema the model reads through the client is the schema the tool advertises here.
    assert_eq!(
        client
            .tool("ship")
            .expect("the server lists it")
            .parameters(),
        ship.into_tool().parameters()
    );
}

#[tokio::test]
async fn a_typed_output_crosses_as_structured_content() {
    let (client, _serving) = connected().await;
    let out = client
        .tool("ship")
        .expect("the server lists it")
        .invoke(r#"{"id": "A-1", "boxes": 2}"#, &ToolContext::detached())
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out, json!({"id": "A-1", "boxes": 2}));
}

#[tokio::test]
async fn arguments_the_schema_refuses_are_refused_on_both_sides() {
    let (client, _serving) = connected().await;
    // Refused by the client, before a request is sent.
    let err = client
        .tool("ship")
        .expect("the server lists it")
        .invoke(r#"{"id": "A-1", "boxes": 11}"#, &ToolContext::detached())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::InvalidInput(m) if m.contains("boxes")),
        "{err}"
    );
}

#[tokio::test]
async fn a_tool_error_is_an_error_on_the_other_side() {
    let (client, _serving) = connected().await;
    let err = client
        .tool("broken")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    // The server answers isError with the text a model reads; the client makes it the tool's error.
    assert!(err.to_string().contains("the disk is full"), "{err}");
}

#[tokio::test]
async fn a_gated_tool_is_refused_to_a_client_that_cannot_ask_a_person() {
    let (client, _serving) = connected().await;
    let err = client
        .tool("wipe")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert!(err.to_string().contains(NO_ELICITATION), "{err}");
}

#[tokio::test]
async fn progress_crosses_in_order_and_before_the_result() {
    // How the client's progress becomes a run's events is tests/mcp_client.rs's; here, what our
    // server sends reaches the calling tool's context whole and in order.
    let (client, _serving) = connected().await;
    let ctx = ToolContext::detached();
    let out = client
        .tool("count")
        .expect("the server lists it")
        .invoke("{}", &ctx)
        .await
        .unwrap();
    // A string output crosses as the string, not as its JSON text quoted again.
    assert_eq!(out, r#""counted""#);
    assert_eq!(
        ctx.progress(),
        [1, 2, 3].map(|step| json!({"progress": step, "message": format!("step {step}")}))
    );
}
