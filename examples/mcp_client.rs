//! Use an MCP server's tools from an agent. `McpClient::command` starts a server as a child
//! process and speaks MCP to it over stdio; `client.tools()` gives its tools as ordinary `Tool`s,
//! so an agent takes them like any other, and approval (or a timeout, or an error policy) is set
//! on them the same way. Shown with:
//!
//! - a server written with rmcp's own API: this program itself, started again with `--serve`
//!   (so the example runs offline; any MCP server's command works the same, for example
//!   `McpClient::command("npx", ["-y", "@modelcontextprotocol/server-everything"])`);
//! - the server's progress notifications as `tool.preliminary_result` events of the run;
//! - `structuredContent` as the tool's output, and arguments checked against the server's schema
//!   before a request is sent;
//! - `.require_approval()` on the server's `send_alert`, so the run pauses for a person;
//! - the child process ended when the client is dropped.
//!
//! Run it with `cargo run --example mcp_client`. The model is scripted, so it runs offline.

use futures::StreamExt;
use phaseo_agent::mcp::McpClient;
use phaseo_agent::{Agent, Decisions, Event, PendingKind, ScriptedModel, Tool, ToolCall};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--serve") {
        return server::run().await;
    }

    // Start the server and list its tools.
    let client = McpClient::command(std::env::current_exe()?, ["--serve"]).await?;
    println!("connected to {:?}, tools:", client.server_info());
    for tool in client.tools() {
        println!("  {}: {}", tool.id(), tool.description());
    }

    // They are `Tool`s: gate the one that acts on the world.
    let tools: Vec<Tool> = client
        .tools()
        .into_iter()
        .map(|tool| match tool.id() {
            "send_alert" => tool.require_approval(),
            _ => tool,
        })
        .collect();

    let model = ScriptedModel::new()
        // A bad call first: the server's schema wants `city`, so it never leaves this process.
        .tool_call("call_0", "forecast", json!({"town": "Oslo"}))
        .tool_calls([
            ToolCall::new("call_1", "forecast", json!({"city": "Oslo"})),
            ToolCall::new(
                "call_2",
                "send_alert",
                json!({"city": "Oslo", "text": "Storm at 18:00"}),
            ),
        ])
        .text("Oslo: 4 °C and a storm; the alert is sent.");
    let agent = Agent::builder("weather-desk")
        .model(model)
        .tools(tools)
        .build()?;

    // Stream the run: the server's progress arrives as preliminary results.
    let mut events = agent
        .run("What is the weather in Oslo? Warn people if needed.")
        .stream();
    let mut progress = Vec::new();
    let mut paused = None;
    while let Some(event) = events.next().await {
        println!("{}", event.name());
        match event {
            Event::PreliminaryResult { tool, value, .. } => {
                println!("  {tool}: {value}");
                progress.push(value);
            }
            Event::Paused { state, .. } => paused = Some(state),
            _ => {}
        }
    }
    assert_eq!(
        progress,
        [
            json!({"progress": 1, "total": 2, "message": "reading stations"}),
            json!({"progress": 2, "total": 2, "message": "computing"}),
        ]
    );

    let paused = paused.ok_or("the run pauses for the alert")?;
    let bad = paused
        .tool_result("call_0")
        .ok_or("the bad call has a result")?;
    println!("call_0 (bad arguments): {bad}");
    assert!(bad.contains("Invalid tool input"), "{bad}");
    assert_eq!(
        paused.tool_result("call_1"),
        Some(r#"{"city":"Oslo","storm":true,"temperature_c":4}"#)
    );
    let pending = &paused.pending()[0];
    assert_eq!(
        (pending.call.id.as_str(), pending.kind),
        ("call_2", PendingKind::ToolApproval)
    );

    // A person approves; the server sends the alert.
    let done = agent
        .resume(&paused, Decisions::new().approve("call_2"))
        .await?;
    println!("call_2 (approved): {:?}", done.state.tool_result("call_2"));
    assert_eq!(
        done.state.tool_result("call_2"),
        Some(r#""alert sent: Storm at 18:00""#)
    );
    assert_eq!(
        done.output(),
        Some("Oslo: 4 °C and a storm; the alert is sent.")
    );
    println!("{}", done.output().unwrap_or_default());

    let server = client.process_id();
    drop(client); // ends the server's process
    println!("server process {server:?} ended with its client");
    Ok(())
}

/// The server: two tools, written with rmcp's own API (any MCP server would do).
mod server {
    use std::sync::Arc;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
    use serde_json::{Value, json};

    struct Weather;

    fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            unreachable!("the schemas below are objects")
        };
        Tool::new(name, description, Arc::new(schema))
    }

    impl ServerHandler for Weather {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            Ok(ListToolsResult::with_all_items(vec![
                tool(
                    "forecast",
                    "Today's forecast for a city",
                    json!({
                        "$schema": "http://json-schema.org/draft-07/schema#",
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                        "additionalProperties": false
                    }),
                ),
                tool(
                    "send_alert",
                    "Send a weather alert to a city's residents",
                    json!({
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "text": {"type": "string"}},
                        "required": ["city", "text"]
                    }),
                ),
            ]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let args = Value::Object(request.arguments.unwrap_or_default());
            let result = match request.name.as_ref() {
                "forecast" => {
                    if let Some(token) = context.meta.get_progress_token() {
                        for (step, message) in [(1.0, "reading stations"), (2.0, "computing")] {
                            let mut progress = ProgressNotificationParam::new(token.clone(), step);
                            progress.total = Some(2.0);
                            progress.message = Some(message.into());
                            context.peer.notify_progress(progress).await.ok();
                        }
                    }
                    CallToolResult::structured(
                        json!({"city": args["city"], "temperature_c": 4, "storm": true}),
                    )
                }
                "send_alert" => CallToolResult::success(vec![ContentBlock::text(format!(
                    "alert sent: {}",
                    args["text"].as_str().unwrap_or_default()
                ))]),
                other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
            };
            Ok(CallToolResponse::Complete(result))
        }
    }

    pub async fn run() -> Result<(), Box<dyn std::error::Error>> {
        let server = Weather.serve(rmcp::transport::stdio()).await?;
        server.waiting().await?;
        Ok(())
    }
}
