//! Our MCP server (`phaseo_agent::mcp::server`) driven by rmcp's own client, over an in-process
//! pipe (and once over Streamable HTTP on 127.0.0.1): what `tools/list` shows and what
//! `tools/call` does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use phaseo_agent::mcp::{McpServer, NO_ELICITATION};
use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext, tool};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Add two numbers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Order {
    /// The order's id.
    id: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Shipped {
    id: String,
    boxes: u32,
}

fn ship() -> Tool {
    Tool::typed(
        "ship",
        "Ship an order",
        |order: Order, _ctx: ToolContext| async move {
            Ok::<_, String>(Shipped {
                id: order.id,
                boxes: 2,
            })
        },
    )
    .structured_output::<Shipped>()
    .title("Ship an order")
    .destructive(false)
    .idempotent(true)
    .open_world(false)
}

fn charge() -> Tool {
    Tool::new(
        "charge",
        "Charge a card",
        json!({"type": "object"}),
        |_, _| Err(AgentError::tool("card declined")),
    )
    .read_only(false)
}

fn slow() -> Tool {
    Tool::new(
        "slow",
        "Never in time",
        json!({"type": "object"}),
        |_, _| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(json!("too late"))
        },
    )
    .timeout(Duration::from_millis(50))
}

fn alphabet() -> Tool {
    Tool::new(
        "alphabet",
        "The alphabet",
        json!({"type": "object"}),
        |_, _| Ok(json!("abcdefghijklmnopqrstuvwxyz")),
    )
    .max_output_chars(10)
}

fn index() -> Tool {
    Tool::new(
        "index",
        "Index the docs",
        json!({"type": "object"}),
        |_, ctx| async move {
            ctx.emit_progress("scanning")?;
            ctx.emit_progress(json!({"done": 2, "of": 3}))?;
            Ok(json!({"indexed": 3}))
        },
    )
}

/// A tool that runs until it is cancelled, and says on `stopped` that its token fired.
fn wait(started: mpsc::UnboundedSender<()>, stopped: mpsc::UnboundedSender<()>) -> Tool {
    Tool::new(
        "wait",
        "Wait until cancelled",
        json!({"type": "object"}),
        move |_, ctx| {
            let (started, stopped) = (started.clone(), stopped.clone());
            async move {
                let token = ctx.cancellation_token().clone();
                tokio::spawn(async move {
                    token.cancelled().await;
                    stopped.send(()).ok();
                });
                started.send(()).ok();
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(json!("waited"))
            }
        },
    )
}

fn deploy(ran: Arc<Mutex<Vec<Value>>>) -> Tool {
    Tool::new(
        "deploy",
        "Deploy an environment",
        json!({"type": "object", "properties": {"environment": {"type": "string"}}, "required": ["environment"]}),
        move |input, _| {
            ran.lock().unwrap().push(input.clone());
            Ok(json!({"deployed": input["environment"]}))
        },
    )
    .require_approval()
}

fn lookup() -> Tool {
    Tool::external("lookup", "Look a customer up", json!({"type": "object"}))
}

/// An MCP client with a person behind it: it can ask them (elicitation) when `answer` is set, and
/// records what it was asked and the progress it received.
#[derive(Clone, Default)]
struct Client {
    answer: Option<ElicitationAction>,
    asked: Arc<Mutex<Vec<String>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let capabilities = match self.answer {
            Some(_) => ClientCapabilities::builder().enable_elicitation().build(),
            None => ClientCapabilities::default(),
        };
        ClientConfig::new(capabilities, Implementation::new("test-client", "0.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        Ok(ElicitResult::new(
            self.answer.clone().unwrap_or(ElicitationAction::Decline),
        ))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// `server` served over an in-process pipe to `client`.
async fn connect(server: McpServer, client: Client) -> RunningService<RoleClient, Client> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(serving) = server.serve(ours).await {
            serving.wait().await.ok();
        }
    });
    client.serve(theirs).await.expect("the client initialises")
}

fn server(ran: &Arc<Mutex<Vec<Value>>>) -> McpServer {
    let (started, _) = mpsc::unbounded_channel();
    let (stopped, _) = mpsc::unbounded_channel();
    McpServer::new((
        add,
        ship(),
        charge(),
        slow(),
        alphabet(),
        index(),
        wait(started, stopped),
        deploy(ran.clone()),
        lookup(),
    ))
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    name: &'static str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let params = CallToolRequestParams::new(name).with_arguments(arguments);
    client.call_tool(params).await.expect("a tools/call result")
}

fn text(result: &CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap();
    content[0]["text"]
        .as_str()
        .expect("a text block")
        .to_owned()
}

#[tokio::test]
async fn tools_list_shows_schemas_output_schemas_titles_and_hints_but_not_external_tools() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "add", "ship", "charge", "slow", "alphabet", "index", "wait", "deploy"
        ]
    );
    let listed = serde_json::to_value(&tools).unwrap();
    assert_eq!(
        listed[0]["inputSchema"],
        add_schema(),
        "the canonical schema, as the agent loop advertises it"
    );
    assert_eq!(listed[0].get("outputSchema"), None);
    assert_eq!(listed[0].get("annotations"), None);
    assert_eq!(listed[1]["title"], "Ship an order");
    assert_eq!(
        listed[1]["outputSchema"],
        json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "boxes": {"type": "integer", "format": "uint32", "minimum": 0}},
            "required": ["id", "boxes"]
        })
    );
    assert_eq!(
        listed[1]["annotations"],
        json!({"title": "Ship an order", "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    assert_eq!(listed[2]["annotations"], json!({"readOnlyHint": false}));
    client.cancel().await.ok();
}

fn add_schema() -> Value {
    phaseo_agent::IntoTool::into_tool(add).parameters().clone()
}

#[tokio::test]
async fn a_call_answers_with_the_tools_result() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let result = call(&client, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), "5");
    assert_eq!(result.structured_content, None);
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_typed_output_is_also_structured_content() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let result = call(&client, "ship", json!({"id": "A-1"})).await;
    assert_eq!(
        result.structured_content,
        Some(json!({"id": "A-1", "boxes": 2}))
    );
    assert_eq!(text(&result), r#"{"id":"A-1","boxes":2}"#);
    client.cancel().await.ok();
}

#[tokio::test]
async fn bad_arguments_are_an_error_result_with_the_models_text() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let result = call(&client, "add", json!({"a": "x", "b": 3})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        text(&result),
        r#"{"error":"Invalid tool input: $.a: \"x\" is not of type \"integer\""}"#
    );
    let missing = call(&client, "add", json!({"a": 1})).await;
    assert_eq!(
        text(&missing),
        r#"{"error":"Invalid tool input: $: \"b\" is a required property"}"#
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_tool_error_timeout_and_cap_are_as_in_a_run() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let failed = call(&client, "charge", json!({})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), r#"{"error":"card declined"}"#);

    let late = call(&client, "slow", json!({})).await;
    assert_eq!(late.is_error, Some(true));
    assert_eq!(text(&late), r#"{"error":"Tool slow timed out after 50ms"}"#);

    let capped = call(&client, "alphabet", json!({})).await;
    assert_eq!(capped.is_error, Some(false));
    // A string output is its text, capped as the string (not as its JSON text, quotes and all).
    assert_eq!(text(&capped), "abcde\n[... 16 characters cut ...]\nvwxyz");
    client.cancel().await.ok();
}

#[tokio::test]
async fn an_unknown_tool_is_a_protocol_error() {
    let client = connect(server(&Arc::default()), Client::default()).await;
    let params = CallToolRequestParams::new("lookup"); // external: not served
    let error = client.call_tool(params).await.unwrap_err();
    assert!(
        error.to_string().contains("Unknown tool: lookup"),
        "{error}"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn progress_is_sent_as_notifications_in_order() {
    let client_side = Client::default();
    let client = connect(server(&Arc::default()), client_side.clone()).await;
    let result = call(&client, "index", json!({})).await;
    assert_eq!(text(&result), r#"{"indexed":3}"#);
    // Notifications are handled in their own tasks: give them a moment to land.
    for _ in 0..100 {
        if client_side.progress.lock().unwrap().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let progress = client_side.progress.lock().unwrap().clone();
    let seen: Vec<(f64, Option<String>)> = progress
        .iter()
        .map(|p| (p.progress, p.message.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            (1.0, Some("scanning".to_owned())),
            (2.0, Some(r#"{"done":2,"of":3}"#.to_owned()))
        ]
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn notifications_cancelled_fires_the_calls_token() {
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let (stopped, mut stopped_rx) = mpsc::unbounded_channel();
    let client = connect(McpServer::new(wait(started, stopped)), Client::default()).await;
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("wait")));
    let handle = client
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    started_rx.recv().await.expect("the tool started");
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    let fired = tokio::time::timeout(Duration::from_secs(5), stopped_rx.recv()).await;
    assert_eq!(fired, Ok(Some(())), "the tool saw its token fire");
    client.cancel().await.ok();
}

#[tokio::test]
async fn an_approved_call_runs_after_the_person_saw_its_arguments() {
    let ran = Arc::default();
    let person = Client {
        answer: Some(ElicitationAction::Accept),
        ..Client::default()
    };
    let client = connect(server(&ran), person.clone()).await;
    let result = call(&client, "deploy", json!({"environment": "production"})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), r#"{"deployed":"production"}"#);
    assert_eq!(*ran.lock().unwrap(), [json!({"environment": "production"})]);
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("deploy"), "{}", asked[0]);
    assert!(
        asked[0].contains(r#""environment": "production""#),
        "{}",
        asked[0]
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_rejected_call_does_not_run() {
    for answer in [ElicitationAction::Decline, ElicitationAction::Cancel] {
        let ran = Arc::default();
        let person = Client {
            answer: Some(answer),
            ..Client::default()
        };
        let client = connect(server(&ran), person.clone()).await;
        let result = call(&client, "deploy", json!({"environment": "production"})).await;
        assert_eq!(result.is_error, Some(true));
        assert_eq!(text(&result), r#"{"error":"Rejected by a person"}"#);
        assert!(ran.lock().unwrap().is_empty());
        assert_eq!(person.asked.lock().unwrap().len(), 1);
        client.cancel().await.ok();
    }
}

#[tokio::test]
async fn a_client_that_cannot_ask_gets_an_error_and_the_tool_does_not_run() {
    let ran = Arc::default();
    let client = connect(server(&ran), Client::default()).await;
    let result = call(&client, "deploy", json!({"environment": "production"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), json!({"error": NO_ELICITATION}).to_string());
    assert!(ran.lock().unwrap().is_empty());
    client.cancel().await.ok();
}

#[tokio::test]
async fn an_agents_approval_rule_and_timeout_apply() {
    let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| {
        Ok(json!("pong"))
    });
    let nap = Tool::new("nap", "Nap", json!({"type": "object"}), |_, _| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("rested"))
    });
    let agent = Agent::builder("ops")
        .model(ScriptedModel::new())
        .tools((ping, nap))
        .approval(|call: &phaseo_agent::ToolCall, _: &ToolContext| call.name == "ping")
        .default_timeout(Duration::from_millis(30))
        .build()
        .unwrap();
    let client = connect(McpServer::from_agent(&agent), Client::default()).await;
    let gated = call(&client, "ping", json!({})).await;
    assert_eq!(text(&gated), json!({"error": NO_ELICITATION}).to_string());
    let late = call(&client, "nap", json!({})).await;
    assert_eq!(text(&late), r#"{"error":"Tool nap timed out after 30ms"}"#);
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("ops")
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_missing_resource_or_a_duplicate_id_is_refused_before_serving() {
    struct Pool;
    let needs = Tool::new("pool", "Use the pool", json!({"type": "object"}), |_, _| {
        Ok(json!(null))
    })
    .needs_resource::<Pool>();
    let err = McpServer::new(needs.clone()).handler().err().unwrap();
    assert!(
        matches!(err, AgentError::InvalidTool { ref tool, .. } if tool == "pool"),
        "{err}"
    );
    assert!(McpServer::new(needs).resource(Pool).handler().is_ok());
    let twice = McpServer::new((add, add)).handler().err().unwrap();
    assert!(
        twice.to_string().contains("two tools have the id `add`"),
        "{twice}"
    );
}

#[tokio::test]
async fn streamable_http_on_loopback() {
    use rmcp::transport::StreamableHttpClientTransport;
    let http = server(&Arc::default())
        .serve_http("127.0.0.1:0")
        .await
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr());
    let transport = StreamableHttpClientTransport::from_uri(url);
    let client = Client::default().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 8);
    let result = call(&client, "ship", json!({"id": "B-2"})).await;
    assert_eq!(
        result.structured_content,
        Some(json!({"id": "B-2", "boxes": 2}))
    );
    let bad = call(&client, "add", json!({"a": 1})).await;
    assert_eq!(bad.is_error, Some(true));
    client.cancel().await.ok();
    http.shutdown().await;
}

#[tokio::test]
async fn without_a_progress_token_no_progress_is_sent() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(serving) = McpServer::new(index()).serve(ours).await {
            serving.wait().await.ok();
        }
    });
    let (read, mut write) = tokio::io::split(theirs);
    let mut lines = BufReader::new(read).lines();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    // No `_meta.progressToken`: the client did not ask for progress.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "index", "arguments": {}}});
    for message in [initialize, initialized, call] {
        write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        let message: Value = serde_json::from_str(&line).unwrap();
        let done = message["id"] == 2;
        seen.push(message);
        if done {
            break;
        }
    }
    assert_eq!(
        seen.len(),
        2,
        "the two responses and nothing else: {seen:?}"
    );
    assert_eq!(seen[1]["result"]["content"][0]["text"], r#"{"indexed":3}"#);
    assert_eq!(seen[0]["result"]["protocolVersion"], "2025-06-18");
}

/// The agent loop and the MCP server share one approval verdict: for the same tool, agent rule
/// and call, a call that pauses the loop is one the server asks a person about (here: refuses,
/// its client cannot ask), and a call the loop runs at once the server runs too.
#[tokio::test]
async fn the_server_and_the_agent_loop_give_the_same_verdict() {
    let calls = [
        json!({"amount": 50}),
        json!({"amount": 500}),
        json!({"amount": 50, "note": "urgent"}),
    ];
    let mut verdicts = Vec::new();
    for arguments in calls {
        // The tool asks above 100; the agent's rule adds urgent calls.
        let transfer = Tool::new(
            "transfer",
            "Move money",
            json!({"type": "object"}),
            |v, _| Ok(v),
        )
        .approval(|input: &Value, _ctx| input["amount"].as_i64().unwrap_or(0) > 100);
        let model = ScriptedModel::new()
            .tool_call("call_1", "transfer", arguments.clone())
            .text("Done.");
        let agent = Agent::builder("bank")
            .model(model)
            .tool(transfer)
            .approval(|call: &phaseo_agent::ToolCall, _: &ToolContext| {
                call.arguments.contains("urgent")
            })
            .build()
            .unwrap();
        let in_the_loop = agent.run("Transfer").await.unwrap().is_paused();
        let client = connect(McpServer::from_agent(&agent), Client::default()).await;
        let result = call(&client, "transfer", arguments).await;
        let refused = json!({"error": NO_ELICITATION}).to_string();
        let on_the_server = text(&result) == refused;
        client.cancel().await.ok();
        verdicts.push((in_the_loop, on_the_server));
    }
    assert_eq!(verdicts, [(false, false), (true, true), (true, true)]);
}
