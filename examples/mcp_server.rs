//! Serve `#[tool]` functions over MCP, so that desktop assistants, IDEs and other agents can call
//! them. Shown with:
//!
//! - `ship_order`: a typed output (`Shipment` derives `JsonSchema`), advertised as the tool's
//!   `outputSchema` and sent as `structuredContent`; a title and hints from `#[tool(...)]`;
//! - `index_docs`: progress with `ctx.emit_progress(..)`, sent as `notifications/progress`, and
//!   long enough to be cancelled: `notifications/cancelled` fires its cancellation token, and it
//!   says so on stderr (`index_docs: cancelled after <n> of <m> steps`);
//! - `deploy`: gated by `require_approval`: the client asks its person (MCP elicitation), or the
//!   call is refused when it cannot ask;
//! - `add`: plain arguments, read-only.
//!
//! `cargo run --example mcp_server -- --stdio` serves them on stdin/stdout, as a desktop client
//! launches it (see the README's "MCP" section for the client's configuration). Without
//! `--stdio` (as `cargo test` runs it), the example checks itself: it serves the tools over an
//! in-process pipe to rmcp's client and asserts what the client sees.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use phaseo_agent::mcp::McpServer;
use phaseo_agent::{ToolContext, tool};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, schemars::JsonSchema)]
struct Order {
    /// The order to ship, as in `A-1042`.
    order_id: String,
    /// How many parcels to split it into.
    #[serde(default = "one")]
    parcels: u32,
}

fn one() -> u32 {
    1
}

#[derive(Serialize, schemars::JsonSchema)]
struct Shipment {
    order_id: String,
    tracking: Vec<String>,
}

/// Ship an order: book a carrier and return the tracking numbers.
#[tool(title = "Ship an order", idempotent, open_world)]
async fn ship_order(order: Order) -> Result<Shipment, String> {
    if order.parcels == 0 || order.parcels > 10 {
        return Err(format!("parcels must be 1 to 10, not {}", order.parcels));
    }
    let tracking = (1..=order.parcels)
        .map(|n| format!("ZX-{}-{n}", order.order_id))
        .collect();
    Ok(Shipment {
        order_id: order.order_id,
        tracking,
    })
}

/// Index the documentation, reporting progress after each step (each takes 100 ms).
#[tool(title = "Index the docs", read_only)]
async fn index_docs(
    /// How many steps to run, 1 to 600.
    steps: u32,
    ctx: &ToolContext,
) -> Result<Value, String> {
    if !(1..=600).contains(&steps) {
        return Err(format!("steps must be 1 to 600, not {steps}"));
    }
    // A cancelled call's future is dropped, then its token fires: work that must notice (close a
    // file, stop a job) watches the token.
    let done = Arc::new(AtomicU32::new(0));
    let (token, seen) = (ctx.cancellation_token().clone(), done.clone());
    let watcher = tokio::spawn(async move {
        token.cancelled().await;
        let done = seen.load(Ordering::SeqCst);
        eprintln!("index_docs: cancelled after {done} of {steps} steps");
        CANCELLED.store(true, Ordering::SeqCst);
    });
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_millis(100)).await;
        done.store(step, Ordering::SeqCst);
        ctx.emit_progress(json!({"step": step, "of": steps}))
            .map_err(|e| e.to_string())?;
    }
    watcher.abort();
    Ok(json!({"indexed_steps": steps}))
}

/// Whether a call of `index_docs` saw its cancellation (for the in-process check).
static CANCELLED: AtomicBool = AtomicBool::new(false);

/// Deploy an application environment. A person approves each call.
#[tool(require_approval, destructive)]
fn deploy(
    /// `staging` or `production`.
    environment: String,
) -> String {
    format!("{environment} deployed")
}

/// Add two numbers.
#[tool(read_only, idempotent)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn server() -> McpServer {
    McpServer::new((ship_order, index_docs, deploy, add))
        .name("phaseo-example", env!("CARGO_PKG_VERSION"))
        .instructions("Tools of a small shop: ship orders, index the docs, deploy, add.")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--stdio") {
        eprintln!("mcp_server: serving 4 tools on stdio");
        server().serve_stdio().await?.wait().await?;
        return Ok(());
    }
    check_in_process().await
}

/// A client with a person who approves every call, recording the progress it receives.
#[derive(Clone, Default)]
struct Person {
    progress: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let can_ask = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(can_ask, Implementation::new("example-client", "0.1.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            println!("asked: {message}");
        }
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let message = params.message.unwrap_or_default();
        self.progress.lock().unwrap().push(message);
    }
}

fn text(result: &CallToolResult) -> String {
    let content = serde_json::to_value(&result.content).unwrap_or_default();
    content[0]["text"].as_str().unwrap_or_default().to_owned()
}

async fn check_in_process() -> Result<(), Box<dyn std::error::Error>> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(async move { server().serve(ours).await?.wait().await });
    let person = Person::default();
    let client = person.clone().serve(theirs).await?;

    let tools = client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ship_order", "index_docs", "deploy", "add"]);
    assert_eq!(tools[0].title.as_deref(), Some("Ship an order"));
    assert!(tools[0].output_schema.is_some());
    println!("listed: {names:?}");

    let call = |name: &'static str, arguments: Value| {
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
    };
    let shipped = call("ship_order", json!({"order_id": "A-7", "parcels": 2})).await?;
    assert_eq!(
        shipped.structured_content,
        Some(json!({"order_id": "A-7", "tracking": ["ZX-A-7-1", "ZX-A-7-2"]}))
    );
    let bad = call("ship_order", json!({"order_id": 7})).await?;
    assert_eq!(bad.is_error, Some(true));
    println!("bad arguments: {}", text(&bad));

    let indexed = call("index_docs", json!({"steps": 3})).await?;
    assert_eq!(text(&indexed), r#"{"indexed_steps":3}"#);
    tokio::time::sleep(Duration::from_millis(50)).await; // notifications land in their own tasks
    assert_eq!(person.progress.lock().unwrap().len(), 3);
    println!("progress: {:?}", person.progress.lock().unwrap());

    let deployed = call("deploy", json!({"environment": "staging"})).await?;
    assert_eq!(text(&deployed), "staging deployed");
    assert_eq!(text(&call("add", json!({"a": 2, "b": 3})).await?), "5");

    // A long call, cancelled by the client: the tool's token fires (it says so on stderr).
    let params = CallToolRequestParams::new("index_docs").with_arguments(
        json!({"steps": 600})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = client
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    tokio::time::sleep(Duration::from_millis(250)).await;
    handle.cancel(Some("the person stopped it".into())).await?;
    for _ in 0..100 {
        if CANCELLED.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        CANCELLED.load(Ordering::SeqCst),
        "the tool saw its token fire"
    );

    client.cancel().await?;
    serving.await??;
    println!("all checks passed");
    Ok(())
}
