//! One server tool as a [`Tool`]: its schema, and a call as a `tools/call` request whose result
//! becomes the tool's output or error.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientRequest, ContentBlock, ProgressToken, RequestId,
    RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Map, Value};

use crate::error::AgentError;
use crate::limits::{Limit, LimitExceeded, McpClientLimits};
use crate::mcp::client::observe::{Router, json_size};
use crate::schema::generate::normalize_within;
use crate::schema::inline::Budget;
use crate::telemetry::context::TraceContext;
use crate::tool::context::ToolContext;
use crate::tool::definition::Tool;

/// What a server's tool needs to call it.
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) peer: Peer<RoleClient>,
    pub(crate) router: Arc<Router>,
}

/// A server's tool as a [`Tool`], or the limit its input schema goes over.
///
/// Its arguments are validated against the server's own input schema, in the draft its `$schema`
/// names (2020-12 without one), before a request is sent. The model is told the schema normalised
/// like any tool's (no `$schema`, definitions inlined), within the limits' schema budget. The
/// schema is measured and normalised before it is compiled, so a hostile one costs nothing more.
pub(crate) fn tool(
    server: &Server,
    listed: rmcp::model::Tool,
    limits: &McpClientLimits,
) -> Result<Tool, LimitExceeded> {
    if json_size(&listed.input_schema) > limits.schema_bytes() {
        return Err(LimitExceeded::count(
            Limit::SchemaBytes,
            limits.schema_bytes(),
        ));
    }
    let budget = Budget {
        nodes: limits.schema_nodes(),
        depth: limits.schema_depth(),
    };
    let schema = Value::Object(Map::clone(&listed.input_schema));
    let normalized = normalize_within(schema.clone(), budget)?;
    let name = listed.name.to_string();
    let description = listed
        .description
        .map(|d| d.into_owned())
        .or(listed.title)
        .unwrap_or_default();
    let server = server.clone();
    let called = name.clone();
    let wait = limits.call_time();
    let mut tool = Tool::new(name, description, schema, move |input, ctx| {
        call(server.clone(), called.clone(), input, ctx, wait)
    });
    // Validation keeps the compiled schema as the server wrote it; only what the model reads is
    // normalised.
    tool.parameters = normalized;
    // Another process runs it.
    tool.tool_type = "extension";
    Ok(tool)
}

async fn call(
    server: Server,
    name: String,
    input: Value,
    ctx: ToolContext,
    wait: std::time::Duration,
) -> Result<Value, AgentError> {
    let Value::Object(arguments) = input else {
        // The schema's root is an object (the tool checks it): other arguments never get here.
        return Err(AgentError::tool("tool arguments must be a JSON object"));
    };
    let mut params = CallToolRequestParams::new(name).with_arguments(arguments);
    // The call's span (the runtime runs a tool inside it) goes with the request, so the server's
    // span of this call joins the same trace.
    if let Some(context) = TraceContext::current() {
        let mut meta = RequestMetaObject::new();
        context.to_meta(&mut meta.0.0);
        params.meta = Some(meta);
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = server
        .peer
        .send_request_with_option(request, PeerRequestOptions::with_timeout(wait))
        .await
        .map_err(|e| match server.router.broken() {
            Some(limit) => AgentError::LimitExceeded(limit),
            None => AgentError::tool(format!("the MCP server could not be reached: {e}")),
        })?;
    let id = handle.id.clone();
    let mut pending = Pending {
        server: server.clone(),
        id: Some(handle.id.clone()),
        token: handle.progress_token.clone(),
    };
    server.router.register(pending.token.clone(), ctx);
    // A server that never answers is bounded here, whatever the tool's own timeout; rmcp then
    // sends the server `notifications/cancelled` itself.
    let response = handle.await_response().await;
    pending.id = None;
    match response {
        Ok(ServerResult::CallToolResult(result)) => output(result),
        Ok(_) => Err(AgentError::tool(
            "the MCP server answered tools/call with something other than a tool result",
        )),
        Err(ServiceError::Timeout { timeout }) => Err(AgentError::LimitExceeded(
            LimitExceeded::time(Limit::McpCallTime, timeout),
        )),
        Err(e) => Err(match server.router.exceeded(&id) {
            Some(limit) => AgentError::LimitExceeded(limit),
            None => AgentError::tool(format!("the MCP server failed the call: {e}")),
        }),
    }
}

/// A request in flight: dropped before its answer (a timeout, a dropped run, a sibling that
/// failed the run), it tells the server with `notifications/cancelled`.
struct Pending {
    server: Server,
    id: Option<RequestId>,
    token: ProgressToken,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.server.router.unregister(&self.token);
        let Some(id) = self.id.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.server.peer.clone();
        let params = CancelledNotificationParam::new(
            Some(id),
            Some("the call was abandoned (timed out, or its run ended)".into()),
        );
        runtime.spawn(async move {
            let notification = CancelledNotification::new(params);
            // The server may be gone already; there is nobody left to tell.
            let _ = peer.send_notification(notification.into()).await;
        });
    }
}

/// A tool result as the tool's output: `isError` is the tool's error (its text content);
/// otherwise `structuredContent` when the server sent it, else the text content.
pub(crate) fn output(result: CallToolResult) -> Result<Value, AgentError> {
    if result.is_error == Some(true) {
        let text = text_of(&result.content)
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "the MCP tool reported an error".into());
        return Err(AgentError::tool(text));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    match text_of(&result.content) {
        Some(text) => Ok(Value::String(text)),
        None => serde_json::to_value(&result.content).map_err(|e| {
            AgentError::tool(format!("the MCP tool's content could not be read: {e}"))
        }),
    }
}

/// The text blocks joined by newlines, when every block is text (none is `""`).
fn text_of(content: &[ContentBlock]) -> Option<String> {
    let texts: Option<Vec<&str>> = content
        .iter()
        .map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    texts.map(|t| t.join("\n"))
}
