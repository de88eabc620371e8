//! What `McpClient` adds to a `tools/call` round trip: one call of a server's `add` tool over an
//! in-process `tokio::io::duplex` pipe, from the model's argument text to the result text, through
//! our client (the arguments validated against the server's schema, the request sent with a
//! progress token routed to the call, the result turned into the tool's output), against rmcp's
//! own client calling the same server (`Peer::call_tool` with the arguments already a JSON
//! object, no validation). Each side has its own server, written with rmcp's API.
//!
//! After criterion's report, a summary prints each side's median time per call over every sample
//! criterion took (warm-up included) and the ratio of ours to rmcp's. Run with
//! `cargo bench --bench mcp_client`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use criterion::Criterion;
use phaseo_agent::ToolContext;
use phaseo_agent::mcp::McpClient;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// Per-call durations of each side, one entry per criterion sample (warm-up included).
static RECORD: Mutex<Vec<(&'static str, Duration)>> = Mutex::new(Vec::new());

struct Adder;

impl ServerHandler for Adder {
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
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }) else {
            return Err(ErrorData::internal_error("the schema is an object", None));
        };
        let add = Tool::new("add", "Add two integers", Arc::new(schema));
        Ok(ListToolsResult::with_all_items(vec![add]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let sum = args.get("a").and_then(Value::as_i64).unwrap_or(0)
            + args.get("b").and_then(Value::as_i64).unwrap_or(0);
        Ok(CallToolResponse::Complete(CallToolResult::structured(
            json!({"sum": sum}),
        )))
    }
}

/// A server in this process; the client's end of its pipe.
fn serve(rt: &Runtime) -> tokio::io::DuplexStream {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    rt.spawn(async move {
        if let Ok(server) = Adder.serve(theirs).await {
            let _ = server.waiting().await;
        }
    });
    ours
}

fn timed(iters: u64, mut one: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        one();
    }
    start.elapsed()
}

fn record(name: &'static str, iters: u64, total: Duration) {
    let per_call = total / u32::try_from(iters.max(1)).unwrap_or(u32::MAX);
    RECORD
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((name, per_call));
}

fn bench(c: &mut Criterion, rt: &Runtime) {
    let ours = rt
        .block_on(McpClient::connect(serve(rt)))
        .expect("our client connects");
    let add = ours
        .tools()
        .into_iter()
        .find(|t| t.id() == "add")
        .expect("the server lists add");
    let theirs = rt
        .block_on(().serve(serve(rt)))
        .expect("rmcp's client connects");
    let arguments = r#"{"a": 20, "b": 22}"#;

    let mut group = c.benchmark_group("mcp_client");
    group.bench_function("rmcp Peer::call_tool", |b| {
        b.iter_custom(|iters| {
            let total = timed(iters, || {
                let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
                    panic!("the arguments are an object")
                };
                let params = CallToolRequestParams::new("add").with_arguments(args);
                let result = rt.block_on(theirs.call_tool(params)).expect("a result");
                let text = result.structured_content.map(|v| v.to_string());
                assert_eq!(text.as_deref(), Some(r#"{"sum":42}"#));
            });
            record("rmcp", iters, total);
            total
        });
    });
    group.bench_function("McpClient tool", |b| {
        b.iter_custom(|iters| {
            let total = timed(iters, || {
                let ctx = ToolContext::detached();
                let text = rt.block_on(add.invoke(arguments, &ctx)).expect("a result");
                assert_eq!(text, r#"{"sum":42}"#);
            });
            record("ours", iters, total);
            total
        });
    });
    group.finish();
}

fn median(name: &str) -> Duration {
    let record = RECORD.lock().unwrap_or_else(PoisonError::into_inner);
    let mut runs: Vec<Duration> = record
        .iter()
        .filter(|(n, _)| *n == name)
        .map(|(_, d)| *d)
        .collect();
    runs.sort();
    runs.get(runs.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    bench(&mut c, &rt);
    c.final_summary();
    let (rmcp, ours) = (median("rmcp"), median("ours"));
    println!("\nmcp_client summary (median per call over the samples):");
    println!("  rmcp Peer::call_tool  {rmcp:?}");
    println!("  McpClient tool        {ours:?}");
    if !rmcp.is_zero() {
        println!(
            "  ratio                 {:.3}x",
            ours.as_secs_f64() / rmcp.as_secs_f64()
        );
    }
}
