//! A `tools/call` round trip over an in-process pipe (`tokio::io::duplex`), driven by rmcp's own
//! client: our `McpServer` serving a `#[tool]` function, against an rmcp `#[tool_router]` server
//! with the same tool, side by side in one run. Ours checks the arguments against the tool's
//! schema before the call; rmcp's only deserialises them.
//!
//! Run with `cargo bench --bench mcp`. Both servers answer `add(a, b)` with the sum as text. The
//! target is ours at most 1.1× rmcp's time.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use phaseo_agent::mcp::McpServer;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, JsonObject, ProtocolVersion};
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
// The same protocol revision as ours (2025-11-25, the last one with server-to-client requests):
// a session of the same kind on both sides.
#[tool_handler(router = self.tool_router)]
impl rmcp::ServerHandler for RmcpCalc {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }
}

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
    for client in [&ours, &theirs] {
        let info = client.peer_info().expect("initialised");
        assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    }
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
    interleaved(&rt, &ours, &theirs);
}

/// The ratio measured a second way, robust to other processes loading the machine: the CPU time
/// this thread spends (everything runs on it: both clients, both servers), from the kernel's
/// per-thread accounting, in rounds of calls to each server in turn; the median of the rounds'
/// ratios.
fn interleaved(rt: &Runtime, ours: &Client, theirs: &Client) {
    // Each side runs for about half a second a round: the kernel counts CPU time in 10 ms ticks.
    const ROUNDS: usize = 11;
    const CALLS: u32 = 12_000;
    let time = |client: &Client| {
        let start = cpu_ns();
        rt.block_on(async {
            for _ in 0..CALLS {
                round_trip(client).await;
            }
        });
        cpu_ns().saturating_sub(start)
    };
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|round| {
            // Alternate which goes first, so that neither always follows the other.
            let (rmcp, phaseo) = if round % 2 == 0 {
                let rmcp = time(theirs);
                (rmcp, time(ours))
            } else {
                let phaseo = time(ours);
                (time(theirs), phaseo)
            };
            phaseo as f64 / rmcp as f64
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "mcp_tools_call CPU time, interleaved: phaseo / rmcp = {:.3} (median of {ROUNDS} rounds of \
         {CALLS} calls each; quartiles {:.3} to {:.3})",
        ratios[ROUNDS / 2],
        ratios[ROUNDS / 4],
        ratios[3 * ROUNDS / 4]
    );
}

/// The CPU time this thread has used, in nanoseconds (user and system time from
/// `/proc/thread-self/stat`, Linux, counted in ticks of 10 ms).
fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The fields after the command name (which ends in the last `)`), from the state: utime and
    // stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let ticks = tick(11).zip(tick(12)).map(|(user, system)| user + system);
    ticks.expect("Linux's per-thread CPU time in /proc/thread-self/stat") * 10_000_000
}

criterion_group!(benches, bench);
criterion_main!(benches);
