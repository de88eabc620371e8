//! A `tools/call` round trip over an in-process pipe (`tokio::io::duplex`), driven by rmcp's own
//! client: our `McpServer` serving a `#[tool]` function, against an rmcp `#[tool_router]` server
//! with the same tool, side by side in one run (issue 13). Ours checks the arguments against the
//! tool's schema before the call; rmcp's only deserialises them.
//!
//! Run with `cargo bench --bench mcp`. Both servers answer `add(a, b)` with the sum as text. The
//! target is ours at most 1.1× rmcp's time.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use phaseo_agent::mcp::server::McpServer;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt, tool_handler, tool_router};
use serde_json::json;
use tokio::runtime::Runtime;

/// Add two numbers.
#[phaseo_agent::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct RmcpAddArgs {
    a: i64,
    b: i64,
}

/// The baseline: the same tool as an rmcp server written with its macros.
#[derive(Clone)]
struct RmcpCalc {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl RmcpCalc {
    fn new() -> Self {
        RmcpCalc {
            tool_router: Self::tool_router(),
        }
    }

    #[rmcp::tool(description = "Add two numbers.")]
    async fn add(&self, Parameters(RmcpAddArgs { a, b }): Parameters<RmcpAddArgs>) -> String {
        (a + b).to_string()
    }
}

// The router built once and kept, as rmcp's examples do (the default rebuilds it per call).
#[tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for RmcpCalc {}

type Client = RunningService<RoleClient, ()>;

fn ours(rt: &Runtime) -> Client {
    rt.block_on(async {
        let (server_side, client_side) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let serving = McpServer::new(add)
                .serve(server_side)
                .await
                .expect("serves");
            serving.wait().await.ok();
        });
        ().serve(client_side).await.expect("the client initialises")
    })
}

fn theirs(rt: &Runtime) -> Client {
    rt.block_on(async {
        let (server_side, client_side) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            let running = RmcpCalc::new().serve(server_side).await.expect("serves");
            running.waiting().await.ok();
        });
        ().serve(client_side).await.expect("the client initialises")
    })
}

fn arguments() -> JsonObject {
    json!({"a": 2, "b": 3})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

async fn round_trip(client: &Client) {
    let params = CallToolRequestParams::new("add").with_arguments(arguments());
    let result = client.call_tool(params).await.expect("a result");
    black_box(result);
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (ours, theirs) = (ours(&rt), theirs(&rt));
    // Both answer the same, so the comparison is of the same work.
    rt.block_on(async {
        for client in [&ours, &theirs] {
            let params = CallToolRequestParams::new("add").with_arguments(arguments());
            let result = client.call_tool(params).await.expect("a result");
            let text = serde_json::to_value(&result.content).expect("content");
            assert_eq!(text[0]["text"], "5");
        }
    });
    let mut group = c.benchmark_group("mcp_tools_call");
    group.bench_function("rmcp_tool_router", |b| {
        b.iter(|| rt.block_on(round_trip(&theirs)));
    });
    group.bench_function("phaseo_mcp_server", |b| {
        b.iter(|| rt.block_on(round_trip(&ours)));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
