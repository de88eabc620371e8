//! `McpClient`: an MCP server's tools as tools of an agent, against a server written with rmcp's own
//! API (in this process over `tokio::io::duplex`, as a child process, and over Streamable HTTP).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use phaseo_agent::mcp::{McpClient, McpClientError};
use phaseo_agent::{
    Agent, AgentError, Decisions, Event, OnError, PendingKind, ScriptedModel, Tool, ToolContext,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// What the server saw.
#[derive(Default)]
struct Seen {
    /// Every `tools/call`: the tool and its arguments.
    calls: Mutex<Vec<(String, Value)>>,
    /// Every `notifications/cancelled`, with its reason.
    cancelled: Mutex<Vec<String>>,
    cancel_arrived: Notify,
    /// Set once `grow` has added its tool.
    grown: Mutex<bool>,
}

/// A server of a few tools, each showing one thing a server can answer.
#[derive(Clone, Default)]
struct Fixture {
    seen: Arc<Seen>,
}

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("the fixture's schemas are objects"),
    }
}

fn listed() -> Vec<rmcp::model::Tool> {
    vec![
        rmcp::model::Tool::new(
            "add",
            "Add two integers",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]
            })),
        ),
        rmcp::model::Tool::new(
            "echo",
            "Echo a message",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            })),
        ),
        // Draft-07: `items` as an array is a tuple (draft 2020-12 calls it `prefixItems`), and
        // `definitions` holds what `$ref` points at.
        rmcp::model::Tool::new(
            "pair",
            "Store a named count",
            schema(json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "definitions": {"count": {"type": "integer", "minimum": 0}},
                "properties": {
                    "pair": {"type": "array", "items": [{"type": "string"}, {"$ref": "#/definitions/count"}]}
                },
                "required": ["pair"]
            })),
        ),
        rmcp::model::Tool::new("fail", "Always fails", schema(json!({"type": "object"}))),
        rmcp::model::Tool::new(
            "count",
            "Count to three, reporting progress",
            schema(json!({"type": "object"})),
        ),
        rmcp::model::Tool::new("slow", "Never finishes", schema(json!({"type": "object"}))),
        rmcp::model::Tool::new(
            "grow",
            "Add the tool `late`",
            schema(json!({"type": "object"})),
        ),
        rmcp::model::Tool::new(
            "mixed",
            "Answer with an image",
            schema(json!({"type": "object"})),
        ),
        rmcp::model::Tool::new(
            "fail_silently",
            "Fails with no text",
            schema(json!({"type": "object"})),
        ),
        // A title and no description.
        {
            let mut whoami =
                rmcp::model::Tool::new_with_raw("whoami", None, schema(json!({"type": "object"})));
            whoami.title = Some("Who is calling".into());
            whoami
        },
    ]
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = listed();
        if *self.seen.grown.lock().unwrap() {
            tools.push(rmcp::model::Tool::new(
                "late",
                "Added by grow",
                schema(json!({"type": "object"})),
            ));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        self.seen
            .calls
            .lock()
            .unwrap()
            .push((request.name.to_string(), arguments.clone()));
        let result = match request.name.as_ref() {
            "add" => {
                let sum =
                    arguments["a"].as_i64().unwrap_or(0) + arguments["b"].as_i64().unwrap_or(0);
                let mut result = CallToolResult::structured(json!({"sum": sum}));
                result.content = vec![ContentBlock::text(sum.to_string())];
                result
            }
            "echo" | "late" => CallToolResult::success(vec![
                ContentBlock::text(format!(
                    "Echo: {}",
                    arguments["message"].as_str().unwrap_or("")
                )),
                ContentBlock::text("(done)"),
            ]),
            "pair" => CallToolResult::success(vec![ContentBlock::text("stored")]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("disk full")]),
            "count" => {
                let token = context.meta.get_progress_token().ok_or_else(|| {
                    ErrorData::invalid_params("count needs a progress token", None)
                })?;
                for step in 1..=3 {
                    let mut progress =
                        ProgressNotificationParam::new(token.clone(), f64::from(step));
                    progress.total = Some(3.0);
                    progress.message = Some(format!("step {step}"));
                    context.peer.notify_progress(progress).await.ok();
                }
                CallToolResult::success(vec![ContentBlock::text("counted")])
            }
            "slow" => {
                context.ct.cancelled().await;
                CallToolResult::success(vec![ContentBlock::text("cancelled")])
            }
            "grow" => {
                *self.seen.grown.lock().unwrap() = true;
                context.peer.notify_tool_list_changed().await.ok();
                CallToolResult::success(vec![ContentBlock::text("grown")])
            }
            "fail_silently" => CallToolResult::error(Vec::new()),
            "whoami" => {
                // Over HTTP, rmcp hands the request's head to the handler.
                let authorization = context
                    .extensions
                    .get::<hyper::http::request::Parts>()
                    .and_then(|parts| parts.headers.get("authorization"))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let client = context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone());
                CallToolResult::structured(
                    json!({"authorization": authorization, "client": client}),
                )
            }
            "mixed" => CallToolResult::success(vec![
                ContentBlock::text("a picture:"),
                ContentBlock::image("aGVsbG8=", "image/png"),
            ]),
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let reason = notification.reason.unwrap_or_default();
        self.seen.cancelled.lock().unwrap().push(reason);
        self.seen.cancel_arrived.notify_one();
    }
}

/// The fixture served in this process, and our client connected to it over a duplex pipe.
async fn connected() -> (McpClient, Arc<Seen>) {
    let fixture = Fixture::default();
    let seen = fixture.seen.clone();
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(server) = fixture.serve(theirs).await {
            let _ = server.waiting().await;
        }
    });
    let client = McpClient::connect(ours).await.expect("the client connects");
    (client, seen)
}

#[tokio::test]
async fn the_server_tools_are_listed_as_tools() {
    let (client, _) = connected().await;
    // One tool by id: the listed one, or none.
    assert_eq!(
        client.tool("echo").map(|t| t.id().to_owned()).as_deref(),
        Some("echo")
    );
    assert!(client.tool("not_listed").is_none());
    let ids: Vec<String> = client.tools().iter().map(|t| t.id().to_owned()).collect();
    assert_eq!(
        ids,
        [
            "add",
            "echo",
            "pair",
            "fail",
            "count",
            "slow",
            "grow",
            "mixed",
            "fail_silently",
            "whoami"
        ]
    );
    // Without a description, the title is what the model reads.
    assert_eq!(
        client
            .tool("whoami")
            .expect("the server lists it")
            .description(),
        "Who is calling"
    );
    let who = client
        .tool("whoami")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(who, r#"{"authorization":null,"client":"phaseo-agent"}"#);
    let add = client.tool("add").expect("the server lists it");
    assert_eq!(add.description(), "Add two integers");
    assert_eq!(
        add.parameters(),
        &json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        })
    );
    // A draft-07 schema is told to the model without `$schema`, its definitions inlined.
    assert_eq!(
        client
            .tool("pair")
            .expect("the server lists it")
            .parameters(),
        &json!({
            "type": "object",
            "properties": {
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
            },
            "required": ["pair"]
        })
    );
}

#[tokio::test]
async fn structured_content_is_the_output() {
    let (client, seen) = connected().await;
    let add = client.tool("add").expect("the server lists it");
    let out = add
        .invoke(r#"{"a": 2, "b": 3}"#, &ToolContext::detached())
        .await;
    assert_eq!(out.unwrap(), r#"{"sum":5}"#);
    assert_eq!(
        seen.calls.lock().unwrap().as_slice(),
        [("add".to_owned(), json!({"a": 2, "b": 3}))]
    );
}

#[tokio::test]
async fn text_content_is_the_output_without_structured_content() {
    let (client, _) = connected().await;
    let echo = client.tool("echo").expect("the server lists it");
    let out = echo
        .invoke(r#"{"message": "hi"}"#, &ToolContext::detached())
        .await;
    assert_eq!(out.unwrap(), r#""Echo: hi\n(done)""#);
    // Content that is not all text is the content blocks as JSON.
    let mixed = client
        .tool("mixed")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap();
    let blocks: Value = serde_json::from_str(&mixed).unwrap();
    assert_eq!(blocks[0], json!({"type": "text", "text": "a picture:"}));
    assert_eq!(blocks[1]["type"], "image");
    assert_eq!(blocks[1]["mimeType"], "image/png");
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_server() {
    let (client, seen) = connected().await;
    let ctx = ToolContext::detached();
    let add = client.tool("add").expect("the server lists it");
    let err = add
        .invoke(r#"{"a": "two", "b": 3}"#, &ctx)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidInput(r#"$.a: "two" is not of type "integer""#.into())
    );
    let err = add.invoke(r#"{"a": 2}"#, &ctx).await.unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidInput(r#"$: "b" is a required property"#.into())
    );

    // The draft-07 tuple is read as draft-07: the second item must be a count.
    let pair = client.tool("pair").expect("the server lists it");
    let err = pair
        .invoke(r#"{"pair": ["apples", "three"]}"#, &ctx)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidInput(r#"$.pair[1]: "three" is not of type "integer""#.into())
    );
    let err = pair
        .invoke(r#"{"pair": ["apples", -1]}"#, &ctx)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::InvalidInput(ref m) if m.starts_with("$.pair[1]: -1 is less than the minimum")),
        "{err}"
    );
    assert!(
        seen.calls.lock().unwrap().is_empty(),
        "no call reached the server"
    );

    assert_eq!(
        pair.invoke(r#"{"pair": ["apples", 3]}"#, &ctx)
            .await
            .unwrap(),
        r#""stored""#
    );
    assert_eq!(seen.calls.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn is_error_is_a_tool_error_under_the_tools_policy() {
    let (client, _) = connected().await;
    let err = client
        .tool("fail")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::tool("disk full"));
    let err = client
        .tool("fail_silently")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::tool("the MCP tool reported an error"));

    // The default policy: the model reads the error and the run goes on.
    let model = ScriptedModel::new()
        .tool_call("call_1", "fail", json!({}))
        .text("The disk is full.");
    let agent = Agent::builder("ops")
        .model(model)
        .tools(client.tools())
        .build()
        .unwrap();
    let done = agent.run("Write the file").await.unwrap();
    assert_eq!(
        done.state.tool_result("call_1"),
        Some(r#"{"error":"disk full"}"#)
    );
    assert_eq!(done.output(), Some("The disk is full."));

    // The tool's own policy: the run fails.
    let strict = client
        .tool("fail")
        .expect("the server lists it")
        .on_error(OnError::FailRun);
    let model = ScriptedModel::new()
        .tool_call("call_1", "fail", json!({}))
        .text("unreachable");
    let agent = Agent::builder("ops")
        .model(model)
        .tool(strict)
        .build()
        .unwrap();
    let failed = agent.run("Write the file").await.unwrap_err();
    assert_eq!(failed.error, AgentError::tool("disk full"));
}

#[tokio::test]
async fn progress_becomes_preliminary_results_in_the_event_stream() {
    let (client, _) = connected().await;
    let model = ScriptedModel::new()
        .tool_call("call_1", "count", json!({}))
        .text("Counted.");
    let agent = Agent::builder("counter")
        .model(model)
        .tools(client.tools())
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("Count").stream().collect().await;
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e.name().starts_with("tool."))
        .map(Event::name)
        .collect();
    assert_eq!(
        names,
        [
            "tool.called",
            "tool.preliminary_result",
            "tool.preliminary_result",
            "tool.preliminary_result",
            "tool.result"
        ]
    );
    let progress: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::PreliminaryResult {
                call_id,
                tool,
                value,
                ..
            } if call_id == "call_1" && tool == "count" => Some(value),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        [
            &json!({"progress": 1, "total": 3, "message": "step 1"}),
            &json!({"progress": 2, "total": 3, "message": "step 2"}),
            &json!({"progress": 3, "total": 3, "message": "step 3"}),
        ]
    );
    // Kept on the run's step too.
    let Some(Event::Completed { state, .. }) = events.last() else {
        panic!("the run completed")
    };
    assert_eq!(state.steps()[0].preliminary_results.len(), 3);
}

#[tokio::test]
async fn a_timeout_cancels_the_request_on_the_server() {
    let (client, seen) = connected().await;
    let slow = client
        .tool("slow")
        .expect("the server lists it")
        .timeout(Duration::from_millis(100));
    let err = slow
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::Timeout {
            tool: "slow".into(),
            ms: 100
        }
    );
    tokio::time::timeout(Duration::from_secs(10), seen.cancel_arrived.notified())
        .await
        .expect("the server received notifications/cancelled");
    assert_eq!(
        seen.cancelled.lock().unwrap().as_slice(),
        ["the call was abandoned (timed out, or its run ended)"]
    );
}

#[tokio::test]
async fn the_agents_default_timeout_cancels_too() {
    let (client, seen) = connected().await;
    let model = ScriptedModel::new()
        .tool_call("call_1", "slow", json!({}))
        .text("Too slow.");
    let agent = Agent::builder("ops")
        .model(model)
        .tools(client.tools())
        .default_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let done = agent.run("Wait").await.unwrap();
    assert_eq!(
        done.state.tool_result("call_1"),
        Some(r#"{"error":"Tool slow timed out after 100ms"}"#)
    );
    tokio::time::timeout(Duration::from_secs(10), seen.cancel_arrived.notified())
        .await
        .expect("the server received notifications/cancelled");
}

#[tokio::test]
async fn list_changed_refreshes_the_tools() {
    let (client, _) = connected().await;
    assert!(client.tools().iter().all(|t| t.id() != "late"));
    let changed = client.changed();
    let out = client
        .tool("grow")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(out, r#""grown""#);
    tokio::time::timeout(Duration::from_secs(10), changed)
        .await
        .expect("the client listed the tools again");
    let late = client.tool("late").expect("the server lists it");
    assert_eq!(late.description(), "Added by grow");
    let out = late
        .invoke(r#"{"message": "new"}"#, &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(out, r#""Echo: new\n(done)""#);
    assert_eq!(client.refresh().await.unwrap().len(), 11);
}

#[tokio::test]
async fn an_agent_runs_a_server_tool_end_to_end_with_approval() {
    let (client, seen) = connected().await;
    let tools: Vec<Tool> = client
        .tools()
        .into_iter()
        .map(|t| {
            if t.id() == "add" {
                t.require_approval()
            } else {
                t
            }
        })
        .collect();
    let model = ScriptedModel::new()
        .tool_call("call_1", "add", json!({"a": 20, "b": 22}))
        .text("20 + 22 = 42.");
    let agent = Agent::builder("calc")
        .model(model)
        .tools(tools)
        .build()
        .unwrap();
    let paused = agent.run("Add 20 and 22").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    assert!(
        seen.calls.lock().unwrap().is_empty(),
        "nothing ran before approval"
    );

    let done = agent
        .resume(&paused.state, Decisions::new().approve("call_1"))
        .await
        .unwrap();
    assert_eq!(done.state.tool_result("call_1"), Some(r#"{"sum":42}"#));
    assert_eq!(done.output(), Some("20 + 22 = 42."));
    assert_eq!(
        seen.calls.lock().unwrap().as_slice(),
        [("add".to_owned(), json!({"a": 20, "b": 22}))]
    );
}

#[tokio::test]
async fn a_server_that_never_initialises_is_an_error() {
    let (ours, theirs) = tokio::io::duplex(1024);
    drop(theirs);
    let err = McpClient::connect(ours).await.unwrap_err();
    assert!(matches!(err, McpClientError::Initialize(_)), "{err}");
}

/// Whether a process is gone (or a zombie nobody has reaped yet, which runs no code).
#[cfg(target_os = "linux")]
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (name) S ...`: the state follows the name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_server_started_from_a_command_is_ended_when_the_client_is_dropped() {
    let client = McpClient::command(
        env!("CARGO_BIN_EXE_mcp_stdio_server"),
        std::iter::empty::<&str>(),
    )
    .await
    .expect("the child process serves MCP");
    let pid = client.process_id().expect("a child process has an id");
    let echo = client.tool("echo").expect("the server lists it");
    let out = echo
        .invoke(r#"{"message": "hi"}"#, &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"message": "hi", "pid": pid})
    );
    assert!(!gone(pid), "the server runs while the client lives");

    drop(client);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !gone(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server process {pid} outlived its client"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its tools now fail as tool errors, not panics.
    let err = echo
        .invoke(r#"{"message": "hi"}"#, &ToolContext::detached())
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Tool(ref m) if m.starts_with("the MCP server")),
        "{err}"
    );
}

#[tokio::test]
async fn a_command_that_is_not_an_mcp_server_is_an_error() {
    let err = McpClient::command("true", std::iter::empty::<&str>())
        .await
        .unwrap_err();
    assert!(matches!(err, McpClientError::Initialize(_)), "{err}");
}

/// The fixture served over Streamable HTTP on a loopback port.
async fn http_server() -> (String, Arc<Seen>) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let fixture = Fixture::default();
    let seen = fixture.seen.clone();
    let service = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (format!("http://{address}/mcp"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_at_a_url_over_streamable_http() {
    let (url, seen) = http_server().await;
    let client = McpClient::url(&url)
        .await
        .expect("the client connects over HTTP");
    assert_eq!(client.tools().len(), 10);

    let ctx = ToolContext::detached();
    let out = client
        .tool("add")
        .expect("the server lists it")
        .invoke(r#"{"a": 40, "b": 2}"#, &ctx)
        .await
        .unwrap();
    assert_eq!(out, r#"{"sum":42}"#);
    let err = client
        .tool("add")
        .expect("the server lists it")
        .invoke(r#"{"a": 40}"#, &ctx)
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    assert_eq!(
        seen.calls.lock().unwrap().len(),
        1,
        "the invalid call was not sent"
    );

    // Progress arrives on the call's event stream, before its result.
    let out = client
        .tool("count")
        .expect("the server lists it")
        .invoke("{}", &ctx)
        .await
        .unwrap();
    assert_eq!(out, r#""counted""#);
    assert_eq!(ctx.progress().len(), 3);
    assert_eq!(
        ctx.progress()[2],
        json!({"progress": 3, "total": 3, "message": "step 3"})
    );

    let slow = client
        .tool("slow")
        .expect("the server lists it")
        .timeout(Duration::from_millis(200));
    let err = slow.invoke("{}", &ctx).await.unwrap_err();
    assert!(matches!(err, AgentError::Timeout { .. }), "{err}");
    tokio::time::timeout(Duration::from_secs(10), seen.cancel_arrived.notified())
        .await
        .expect("the server received notifications/cancelled over HTTP");

    let err = client
        .tool("fail")
        .expect("the server lists it")
        .invoke("{}", &ctx)
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::tool("disk full"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_goes_with_every_request() {
    let (url, _) = http_server().await;
    let client = McpClient::url_with_bearer(&url, "s3cret")
        .await
        .expect("the client connects");
    let who = client
        .tool("whoami")
        .expect("the server lists it")
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(
        who,
        r#"{"authorization":"Bearer s3cret","client":"phaseo-agent"}"#
    );
}

#[tokio::test]
async fn a_url_with_nothing_behind_it_is_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let err = McpClient::url(&format!("http://{address}/mcp"))
        .await
        .unwrap_err();
    assert!(matches!(err, McpClientError::Initialize(_)), "{err}");
}
