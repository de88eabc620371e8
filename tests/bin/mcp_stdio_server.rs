//! A small MCP server over stdio, written with rmcp's own API: what tests/mcp_client.rs starts as
//! a child process (`McpClient::command`). Its one tool, `echo`, answers with its message and the
//! server's process id.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        }) else {
            return Err(ErrorData::internal_error("the schema is an object", None));
        };
        let echo = Tool::new("echo", "Echo a message", Arc::new(schema));
        Ok(ListToolsResult::with_all_items(vec![echo]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let answer = json!({"message": message, "pid": std::process::id()});
        Ok(CallToolResponse::Complete(CallToolResult::structured(
            answer,
        )))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Echo.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
