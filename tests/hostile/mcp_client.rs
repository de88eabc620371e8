//! `McpClient` against hostile MCP servers: each case is a server that misbehaves on purpose
//! (written by hand as raw JSON-RPC, over a duplex pipe, a child process's stdio or an HTTP
//! socket), and checks the outcome (a typed error that names the setting), the time (bounded by a
//! generous timeout) and the memory (the peak heap of the whole process stays under 200 MB).
//!
//! A stdio server is this test binary run again with `HOSTILE_MCP_CHILD` set: the test that starts
//! it is also the one the child runs, and in the child it serves instead of testing.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use phaseo_agent::limits::{Limit, McpClientLimits};
use phaseo_agent::mcp::{McpClient, McpClientError};
use phaseo_agent::{Agent, AgentError, ScriptedModel, ToolContext};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use crate::ALLOCATOR;

use crate::SERIAL;

const MB: usize = 1024 * 1024;
/// The most heap any case may use at its peak.
const MEMORY_BOUND: usize = 200 * MB;
/// The environment variable that makes this binary a stdio server: its value names the server.
const CHILD: &str = "HOSTILE_MCP_CHILD";

/// A case running: it holds the serialising lock, and its peak starts at its start.
struct Case {
    _one: MutexGuard<'static, ()>,
}

fn case() -> Case {
    let one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    ALLOCATOR.reset_peak_usage();
    Case { _one: one }
}

impl Case {
    fn assert_memory(&self, what: &str) {
        let peak = ALLOCATOR.peak_usage();
        assert!(
            peak < MEMORY_BOUND,
            "{what}: the heap reached {} MB",
            peak / MB
        );
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Awaits `future` for at most `secs` seconds, or fails the test naming `what`.
async fn within<F: IntoFuture>(secs: u64, what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not end within {secs} s"))
}

// ---------------------------------------------------------------------------------------------
// The hostile servers: raw JSON-RPC, one JSON text a line.

/// How a server misbehaves.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `good` and `chain`, whose schema is a chain of `n` definitions, each referring to the next
    /// (`nested`: as an object property, so the inlined schema is `n` levels deep).
    Chain { n: usize, nested: bool },
    /// `good` and `bomb`, whose `n` definitions each refer to the next one twice.
    Doubling { n: usize },
    /// Every `tools/list` page has a new `nextCursor`.
    EndlessCursor,
    /// Every `tools/list` page has the same `nextCursor`.
    RepeatingCursor,
    /// Never answers `initialize`.
    SilentInitialize,
    /// Answers `tools/list` with a gigabyte.
    HugeList,
    /// `good`, and `huge`, whose result is a gigabyte of text.
    HugeResult,
    /// `chatty`, which sends `count` progress notifications of `bytes` bytes each.
    Progress { count: usize, bytes: usize },
    /// `flood`, which sends `count` `notifications/tools/list_changed` before its result.
    Flood { count: usize },
    /// `silent`, whose calls are never answered.
    SilentCall,
    /// Never answers `tools/list`.
    SilentList,
    /// Lists `n` tools in one page.
    ManyTools { n: usize },
}

impl Kind {
    fn name(self) -> String {
        format!("{self:?}")
    }

    /// The kind a child process was started as (see [`Kind::name`]).
    fn parse(name: &str) -> Kind {
        match name {
            "HugeList" => Kind::HugeList,
            "HugeResult" => Kind::HugeResult,
            other => panic!("no stdio server is called {other}"),
        }
    }
}

fn good() -> Value {
    json!({"name": "good", "description": "Works", "inputSchema": {
        "type": "object", "properties": {"x": {"type": "string"}}
    }})
}

/// `{"$defs": {"d0": .., "d1": .., ...}}`: `d<i>` is `body(i + 1)`, the last one a string.
fn defs(n: usize, body: impl Fn(usize) -> Value) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let def = if i + 1 == n {
            json!({"type": "string"})
        } else {
            body(i + 1)
        };
        defs.insert(format!("d{i}"), def);
    }
    Value::Object(defs)
}

fn reference(i: usize) -> Value {
    json!({"$ref": format!("#/$defs/d{i}")})
}

fn chain_tool(n: usize, nested: bool) -> Value {
    let defs = if nested {
        defs(
            n,
            |next| json!({"type": "object", "properties": {"next": reference(next)}}),
        )
    } else {
        defs(n, reference)
    };
    json!({"name": "chain", "description": "A long chain", "inputSchema": {
        "type": "object", "properties": {"v": reference(0)}, "$defs": defs
    }})
}

fn doubling_tool(n: usize) -> Value {
    let defs = defs(
        n,
        |next| json!({"anyOf": [reference(next), reference(next)]}),
    );
    json!({"name": "bomb", "description": "Doubles", "inputSchema": {
        "type": "object", "properties": {"v": reference(0)}, "$defs": defs
    }})
}

fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn initialized(request: &Value) -> Value {
    let version = request["params"]["protocolVersion"].clone();
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "hostile", "version": "6.6.6"}
    })
}

fn tools(list: Vec<Value>) -> Value {
    json!({"tools": list})
}

async fn send<W: AsyncWrite + Unpin>(write: &mut W, message: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).expect("JSON");
    line.push(b'\n');
    write.write_all(&line).await?;
    write.flush().await
}

/// `prefix`, `bytes` bytes of `a`, then `suffix`, written as they are made (never held whole);
/// stops quietly when the reader goes away.
async fn stream_huge<W: AsyncWrite + Unpin>(
    write: &mut W,
    prefix: &str,
    bytes: usize,
    suffix: &str,
) {
    stream_pieces(write, prefix, b"a", bytes, suffix).await;
}

/// `prefix`, `bytes` bytes of `piece` repeated, then `suffix`, as [`stream_huge`] writes.
async fn stream_pieces<W: AsyncWrite + Unpin>(
    write: &mut W,
    prefix: &str,
    piece: &[u8],
    bytes: usize,
    suffix: &str,
) {
    let chunk = piece.repeat(64 * 1024 / piece.len());
    if write.write_all(prefix.as_bytes()).await.is_err() {
        return;
    }
    let mut sent = 0;
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        if write.write_all(&chunk[..n]).await.is_err() {
            return;
        }
        sent += n;
    }
    let _ = write.write_all(suffix.as_bytes()).await;
    let _ = write.flush().await;
}

const GIGABYTE: usize = 1024 * MB;

/// What the server saw.
#[derive(Default)]
struct Seen {
    listings: AtomicUsize,
}

/// Serves `kind` over one connection until the client goes away.
async fn serve<R, W>(read: R, mut write: W, kind: Kind, seen: Arc<Seen>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = request["id"].clone();
        let answer = match request["method"].as_str().unwrap_or_default() {
            "initialize" => match kind {
                Kind::SilentInitialize => continue,
                _ => response(&id, initialized(&request)),
            },
            "tools/list" => {
                let page = seen.listings.fetch_add(1, Ordering::SeqCst);
                match kind {
                    Kind::Chain { n, nested } => {
                        response(&id, tools(vec![good(), chain_tool(n, nested)]))
                    }
                    Kind::Doubling { n } => response(&id, tools(vec![good(), doubling_tool(n)])),
                    Kind::EndlessCursor => response(
                        &id,
                        json!({"tools": [], "nextCursor": format!("page-{page}")}),
                    ),
                    Kind::RepeatingCursor => {
                        response(&id, json!({"tools": [], "nextCursor": "again"}))
                    }
                    Kind::HugeList => {
                        let prefix = format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"big","inputSchema":{{"type":"object"}},"description":""#
                        );
                        stream_huge(&mut write, &prefix, GIGABYTE, "\"}]}}\n").await;
                        continue;
                    }
                    Kind::HugeResult => response(
                        &id,
                        tools(vec![
                            good(),
                            json!({
                                "name": "huge", "inputSchema": {"type": "object"}
                            }),
                            json!({
                                "name": "bomb", "inputSchema": {"type": "object"}
                            }),
                        ]),
                    ),
                    Kind::Progress { .. } => response(
                        &id,
                        tools(vec![json!({
                            "name": "chatty", "description": "Talks", "inputSchema": {"type": "object"}
                        })]),
                    ),
                    Kind::Flood { .. } => response(
                        &id,
                        tools(vec![json!({
                            "name": "flood", "description": "Floods", "inputSchema": {"type": "object"}
                        })]),
                    ),
                    Kind::SilentCall => response(
                        &id,
                        tools(vec![json!({
                            "name": "silent", "description": "Never answers", "inputSchema": {"type": "object"}
                        })]),
                    ),
                    Kind::ManyTools { n } => response(
                        &id,
                        tools(
                            (0..n)
                                .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
                                .collect(),
                        ),
                    ),
                    Kind::SilentInitialize | Kind::SilentList => continue,
                }
            }
            "tools/call" => {
                let tool = request["params"]["name"].as_str().unwrap_or_default();
                match (kind, tool) {
                    (_, "good") => {
                        response(&id, json!({"content": [{"type": "text", "text": "fine"}]}))
                    }
                    (Kind::HugeResult, "bomb") => {
                        // Within the line limit, but each `[]` is a value once parsed.
                        let prefix = format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"structuredContent":{{"a":["#
                        );
                        stream_pieces(&mut write, &prefix, b"[],", 15 * MB, "[]]}}}}\n").await;
                        continue;
                    }
                    (Kind::HugeResult, "huge") => {
                        let prefix = format!(
                            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#
                        );
                        stream_huge(&mut write, &prefix, GIGABYTE, "\"}]}}\n").await;
                        continue;
                    }
                    (Kind::Progress { count, bytes }, _) => {
                        let token = request["params"]["_meta"]["progressToken"].clone();
                        // The message is made once: each notification is its number and it.
                        let message =
                            format!(r#","total":{count},"message":"{}"}}}}"#, "p".repeat(bytes));
                        for i in 0..count {
                            let head = format!(
                                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":{}"#,
                                i + 1
                            );
                            let sent = async {
                                write.write_all(head.as_bytes()).await?;
                                write.write_all(message.as_bytes()).await?;
                                write.write_all(b"\n").await
                            };
                            if sent.await.is_err() {
                                return;
                            }
                        }
                        response(&id, json!({"content": [{"type": "text", "text": "done"}]}))
                    }
                    (Kind::Flood { count }, _) => {
                        let note =
                            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                        let mut line = serde_json::to_vec(&note).expect("JSON");
                        line.push(b'\n');
                        let mut burst = Vec::with_capacity(line.len() * 1000);
                        for _ in 0..1000 {
                            burst.extend_from_slice(&line);
                        }
                        for _ in 0..count / 1000 {
                            if write.write_all(&burst).await.is_err() {
                                return;
                            }
                        }
                        response(
                            &id,
                            json!({"content": [{"type": "text", "text": "flooded"}]}),
                        )
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        if send(&mut write, &answer).await.is_err() {
            return;
        }
    }
}

/// A server of `kind` in this process, at the other end of a duplex pipe.
fn in_process(kind: Kind) -> (tokio::io::DuplexStream, Arc<Seen>) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let seen = Arc::new(Seen::default());
    let (read, write) = tokio::io::split(theirs);
    tokio::spawn(serve(read, write, kind, seen.clone()));
    (ours, seen)
}

/// In the child: serve `kind` over stdio and exit. In the parent: nothing (returns `false`).
fn serve_if_child() -> bool {
    let Ok(name) = std::env::var(CHILD) else {
        return false;
    };
    let kind = Kind::parse(&name);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(serve(
            tokio::io::stdin(),
            tokio::io::stdout(),
            kind,
            Arc::new(Seen::default()),
        ));
    std::process::exit(0);
}

/// This binary, run again as the stdio server of `kind` (only the test `test` runs in it).
fn child(test: &str, kind: Kind) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(std::env::current_exe().expect("this binary"));
    command
        .args([
            "--exact",
            &format!("mcp_client::{test}"),
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env(CHILD, kind.name());
    command
}

// ---------------------------------------------------------------------------------------------
// The cases.
/// Runs `body` on a thread with the stack of a program's main thread (8 MiB), on a runtime of
/// that thread alone.
fn on_main_like_thread(body: impl Future<Output = ()> + Send + 'static) {
    std::thread::Builder::new()
        .name("main-like".into())
        .stack_size(8 * MB)
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(body)
        })
        .expect("a thread")
        .join()
        .expect("the case passed");
}

/// The `good` tool still works.
async fn good_works(client: &McpClient) {
    let good = client.tool("good").expect("the good tool is listed");
    let out = within(
        10,
        "the good tool",
        good.invoke("{}", &ToolContext::detached()),
    )
    .await;
    assert_eq!(out.unwrap(), r#""fine""#);
}

/// `client` left out `tool` for `limit`, naming the server, the tool and the setting.
fn assert_refused(client: &McpClient, tool: &str, limit: Limit) {
    assert!(client.tool(tool).is_none(), "{tool} is not among the tools");
    let refused = client.refused();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].tool, tool);
    assert_eq!(refused[0].server, "hostile");
    assert_eq!(refused[0].limit.limit, limit);
    let message = refused[0].to_string();
    for part in ["`hostile`", &format!("`{tool}`"), limit.setting()] {
        assert!(message.contains(part), "{message} names {part}");
    }
}

/// Connects to a chain server, on whatever runtime runs this.
async fn chain(n: usize, nested: bool) -> McpClient {
    let (pipe, _) = in_process(Kind::Chain { n, nested });
    within(20, "connect", McpClient::connect(pipe))
        .await
        .expect("the client connects")
}

#[test]
fn a_2000_deep_chain_of_definitions_is_refused_on_a_tokio_task() {
    let case = case();
    runtime().block_on(async {
        let client = tokio::spawn(chain(2_000, true)).await.expect("no panic");
        assert_refused(&client, "chain", Limit::SchemaDepth);
        good_works(&client).await;
    });
    case.assert_memory("a 2,000-deep chain");
}

#[test]
fn an_8000_deep_chain_of_definitions_is_refused_on_the_main_thread() {
    let case = case();
    on_main_like_thread(async {
        let client = chain(8_000, true).await;
        assert_refused(&client, "chain", Limit::SchemaDepth);
        good_works(&client).await;
    });
    case.assert_memory("an 8,000-deep chain");
}

#[test]
fn a_long_chain_of_references_to_references_is_inlined() {
    let case = case();
    let expected = json!({"type": "object", "properties": {"v": {"type": "string"}}});
    let flat = expected.clone();
    runtime().block_on(async move {
        let client = tokio::spawn(chain(2_000, false)).await.expect("no panic");
        assert!(client.refused().is_empty(), "{:?}", client.refused());
        assert_eq!(client.tool("chain").expect("listed").parameters(), &flat);
    });
    on_main_like_thread(async move {
        let client = chain(8_000, false).await;
        assert_eq!(
            client.tool("chain").expect("listed").parameters(),
            &expected
        );
        good_works(&client).await;
    });
    case.assert_memory("a chain of references");
}

#[test]
fn a_schema_that_doubles_forty_times_is_refused_fast() {
    let case = case();
    runtime().block_on(async {
        let (pipe, _) = in_process(Kind::Doubling { n: 40 });
        let client = within(10, "connect", McpClient::connect(pipe))
            .await
            .expect("connects");
        // 40 doublings nest 120 levels deep: the default depth, 64, stops the first branch.
        assert_refused(&client, "bomb", Limit::SchemaDepth);
        assert_eq!(client.refused()[0].limit.value, 64, "the default");
        good_works(&client).await;

        // With room for the depth, the default count of values stops it.
        let (pipe, _) = in_process(Kind::Doubling { n: 40 });
        let limits = McpClientLimits::default().max_schema_depth(200);
        let client = within(
            10,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .expect("connects");
        assert_refused(&client, "bomb", Limit::SchemaNodes);
        assert_eq!(client.refused()[0].limit.value, 100_000, "the default");
        good_works(&client).await;

        // A smaller budget stops it sooner; the depth budget too.
        let (pipe, _) = in_process(Kind::Doubling { n: 40 });
        let limits = McpClientLimits::default()
            .max_schema_depth(200)
            .max_schema_nodes(1_000);
        let client = McpClient::builder()
            .limits(limits)
            .connect(pipe)
            .await
            .expect("connects");
        assert_refused(&client, "bomb", Limit::SchemaNodes);
        assert_eq!(client.refused()[0].limit.value, 1_000);
        let (pipe, _) = in_process(Kind::Chain {
            n: 10,
            nested: true,
        });
        let limits = McpClientLimits::default().max_schema_depth(8);
        let client = McpClient::builder()
            .limits(limits)
            .connect(pipe)
            .await
            .expect("connects");
        assert_refused(&client, "chain", Limit::SchemaDepth);
        // And the raw size, before anything is inlined.
        let (pipe, _) = in_process(Kind::Doubling { n: 40 });
        let limits = McpClientLimits::default().max_schema_bytes(1_000);
        let client = McpClient::builder()
            .limits(limits)
            .connect(pipe)
            .await
            .expect("connects");
        assert_refused(&client, "bomb", Limit::SchemaBytes);
    });
    case.assert_memory("a doubling schema");
}

/// A message refused for what it would cost once parsed says so, not that it is too large
/// (15 MiB is within the default 16 MiB), and names the setting that raises it.
fn assert_parse_cost(message: &str) {
    assert!(
        message.contains(
            "a message from the MCP server costs more memory to parse than the limit of 67108864 bytes"
        ),
        "{message}"
    );
    assert!(
        message.contains("(raise it with `McpClientLimits::max_message_bytes`)"),
        "{message}"
    );
    assert!(!message.contains("larger than"), "{message}");
}

/// `err` is the listing's limit `limit`, naming the server and the setting.
fn assert_limit(err: &McpClientError, limit: Limit) {
    let McpClientError::Limit { source, .. } = err else {
        panic!("not a limit: {err}")
    };
    assert_eq!(source.limit, limit, "{err}");
    let message = err.to_string();
    assert!(message.contains(limit.setting()), "{message}");
}

#[test]
fn endless_cursors_stop_at_the_page_limit() {
    let case = case();
    runtime().block_on(async {
        let (pipe, seen) = in_process(Kind::EndlessCursor);
        let err = within(20, "connect", McpClient::connect(pipe))
            .await
            .unwrap_err();
        assert_limit(&err, Limit::McpListPages);
        assert!(err.to_string().contains("`hostile`"), "{err}");
        assert_eq!(seen.listings.load(Ordering::SeqCst), 100, "the default");

        let (pipe, seen) = in_process(Kind::EndlessCursor);
        let limits = McpClientLimits::default().max_list_pages(3);
        let err = McpClient::builder()
            .limits(limits)
            .connect(pipe)
            .await
            .unwrap_err();
        assert_limit(&err, Limit::McpListPages);
        assert_eq!(seen.listings.load(Ordering::SeqCst), 3);
    });
    case.assert_memory("endless cursors");
}

#[test]
fn a_repeating_cursor_is_an_error() {
    let case = case();
    runtime().block_on(async {
        let (pipe, seen) = in_process(Kind::RepeatingCursor);
        let err = within(20, "connect", McpClient::connect(pipe)).await.unwrap_err();
        assert!(
            matches!(&err, McpClientError::Request { method: "tools/list", reason } if reason.contains("nextCursor")),
            "{err}"
        );
        assert_eq!(seen.listings.load(Ordering::SeqCst), 2);
    });
    case.assert_memory("a repeating cursor");
}

#[test]
fn a_server_that_never_answers_initialize_times_out() {
    let case = case();
    runtime().block_on(async {
        let (pipe, _) = in_process(Kind::SilentInitialize);
        let limits = McpClientLimits::default().connect_timeout(Duration::from_millis(300));
        let err = within(
            20,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .unwrap_err();
        assert_limit(&err, Limit::McpConnectTime);
    });
    case.assert_memory("a silent initialize");
}

#[test]
fn an_oversized_list_page_over_stdio_is_refused() {
    if serve_if_child() {
        return;
    }
    let case = case();
    runtime().block_on(async {
        let command = child(
            "an_oversized_list_page_over_stdio_is_refused",
            Kind::HugeList,
        );
        let err = within(30, "connect", McpClient::spawn(command))
            .await
            .unwrap_err();
        assert_limit(&err, Limit::McpMessageBytes);
        let McpClientError::Limit { source, .. } = err else {
            unreachable!()
        };
        assert_eq!(source.value, 16 * 1024 * 1024, "the default");
    });
    case.assert_memory("an oversized list page over stdio");
}

#[test]
fn a_gigabyte_tool_result_over_stdio_fails_the_call_at_once() {
    if serve_if_child() {
        return;
    }
    let case = case();
    runtime().block_on(async {
        let command = child(
            "a_gigabyte_tool_result_over_stdio_fails_the_call_at_once",
            Kind::HugeResult,
        );
        let limits = McpClientLimits::default().max_message_bytes(MB);
        let client = within(
            30,
            "connect",
            McpClient::builder().limits(limits).spawn(command),
        )
        .await
        .expect("connects");
        good_works(&client).await;
        let huge = client
            .tool("huge")
            .expect("listed")
            .timeout(Duration::from_secs(600));
        let err = within(30, "the call", huge.invoke("{}", &ToolContext::detached()))
            .await
            .unwrap_err();
        let AgentError::LimitExceeded(limit) = &err else {
            panic!("not a limit: {err}")
        };
        assert_eq!(limit.limit, Limit::McpMessageBytes);
        assert!(
            err.to_string()
                .contains("McpClientLimits::max_message_bytes"),
            "{err}"
        );
    });
    case.assert_memory("a gigabyte tool result");
}

/// A hand-written Streamable HTTP server: `initialize` is answered, `tools/list` with a
/// gigabyte of JSON (chunked, no length), everything else with 202 or 405.
async fn http_huge_list(bomb: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(http_connection(stream, bomb));
        }
    });
    format!("http://{address}/mcp")
}

/// Serves one request; `bomb`: the list page is 15 MiB of `[],` in a schema (within the default
/// message limit, but each `[]` a value once parsed), else a gigabyte of description.
async fn http_connection(stream: tokio::net::TcpStream, bomb: bool) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        head.push_str(&line);
    }
    if !head.starts_with("POST") {
        let _ = write
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return;
    }
    let mut body = vec![0; length];
    if read.read_exact(&mut body).await.is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = request["id"].clone();
    match request["method"].as_str().unwrap_or_default() {
        "initialize" => {
            let answer = response(&id, initialized(&request)).to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = write.write_all(reply.as_bytes()).await;
        }
        "tools/list" => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            if write.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let prefix = if bomb {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"big","inputSchema":{{"type":"object","x":["#
                )
            } else {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[{{"name":"big","description":""#
                )
            };
            let (chunk, total) = if bomb {
                (b"[],".repeat(21_845), 15 * MB)
            } else {
                (vec![b'a'; 64 * 1024], GIGABYTE)
            };
            let mut framed = format!("{:x}\r\n", prefix.len()).into_bytes();
            framed.extend_from_slice(prefix.as_bytes());
            framed.extend_from_slice(b"\r\n");
            if write.write_all(&framed).await.is_err() {
                return;
            }
            let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
            frame.extend_from_slice(&chunk);
            frame.extend_from_slice(b"\r\n");
            for _ in 0..total / chunk.len() {
                if write.write_all(&frame).await.is_err() {
                    return;
                }
            }
            let end = "[]]}}]}}";
            let last = format!("{:x}\r\n{end}\r\n0\r\n\r\n", end.len());
            let _ = write.write_all(last.as_bytes()).await;
        }
        _ => {
            let _ = write
                .write_all(
                    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    }
}

#[test]
fn an_oversized_list_page_over_http_is_refused() {
    let case = case();
    runtime().block_on(async {
        let url = http_huge_list(false).await;
        let limits = McpClientLimits::default().max_message_bytes(MB);
        let err = within(30, "connect", McpClient::builder().limits(limits).url(&url))
            .await
            .unwrap_err();
        assert_limit(&err, Limit::McpMessageBytes);
    });
    case.assert_memory("an oversized list page over HTTP");
}

/// Runs `chatty` in an agent, and returns its step's preliminary results and the stored state's
/// size.
async fn chatty_run(count: usize, bytes: usize) -> (Vec<Value>, usize) {
    let (pipe, _) = in_process(Kind::Progress { count, bytes });
    let client = McpClient::connect(pipe).await.expect("connects");
    let model = ScriptedModel::new()
        .tool_call("call_1", "chatty", json!({}))
        .text("Done.");
    let agent = Agent::builder("a")
        .model(model)
        .tools(client.tools())
        .build()
        .expect("an agent");
    let done = within(60, "the run", agent.run("go"))
        .await
        .expect("the run completes");
    assert_eq!(done.state.tool_result("call_1"), Some(r#""done""#));
    let progress = done.state.steps()[0].preliminary_results.clone();
    (progress, done.state.to_json().len())
}

#[test]
fn progress_is_kept_up_to_the_limits_and_the_rest_is_counted() {
    let case = case();
    runtime().block_on(async {
        // 300 notifications of a megabyte: none fits the 64 KiB kept per call.
        let (progress, size) = chatty_run(300, MB).await;
        assert!(size < 256 * 1024, "the stored state is {size} bytes");
        assert_eq!(progress.len(), 1, "only the count is kept");
        let message = progress[0]["message"].as_str().expect("a message");
        assert!(
            message.starts_with("300 more progress notifications"),
            "{message}"
        );
        assert!(
            message.contains("McpClientLimits::max_progress_bytes"),
            "{message}"
        );
        assert_eq!(progress[0]["progress"], json!(300));

        // 300 small ones: the first 100 are kept, then the count.
        let (progress, _) = chatty_run(300, 10).await;
        assert_eq!(progress.len(), 101);
        assert_eq!(progress[99]["progress"], json!(100));
        let message = progress[100]["message"].as_str().expect("a message");
        assert!(
            message.starts_with("200 more progress notifications"),
            "{message}"
        );
        assert!(
            message.contains("McpClientLimits::max_progress_per_call"),
            "{message}"
        );
    });
    case.assert_memory("300 progress notifications of a megabyte");
}

#[test]
fn a_flood_of_list_changed_is_coalesced() {
    let case = case();
    runtime().block_on(async {
        let (pipe, seen) = in_process(Kind::Flood { count: 100_000 });
        let client = McpClient::connect(pipe).await.expect("connects");
        let flood = client.tool("flood").expect("listed");
        within(
            60,
            "the flood",
            flood.invoke("{}", &ToolContext::detached()),
        )
        .await
        .expect("the call ends");
        // A listing now waits behind at most the one running and the one due.
        within(30, "a refresh", client.refresh())
            .await
            .expect("lists");
        let listings = seen.listings.load(Ordering::SeqCst);
        assert!(
            listings < 1_000,
            "{listings} listings for 100,000 notifications"
        );
    });
    case.assert_memory("a flood of list_changed");
}

#[test]
fn a_call_the_server_never_answers_ends_at_the_call_timeout() {
    let case = case();
    runtime().block_on(async {
        let (pipe, _) = in_process(Kind::SilentCall);
        let limits = McpClientLimits::default().call_timeout(Duration::from_millis(300));
        let client = within(
            10,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .expect("connects");
        // No timeout of the tool's own: the limit alone ends the wait.
        let silent = client.tool("silent").expect("listed");
        let err = within(
            10,
            "the call",
            silent.invoke("{}", &ToolContext::detached()),
        )
        .await
        .unwrap_err();
        let AgentError::LimitExceeded(limit) = &err else {
            panic!("not a limit: {err}")
        };
        assert_eq!(limit.limit, Limit::McpCallTime);
        assert_eq!(limit.value, 300);
        assert!(
            err.to_string().contains("McpClientLimits::call_timeout"),
            "{err}"
        );
    });
    case.assert_memory("a silent call");
}

#[test]
fn a_result_within_its_size_that_would_parse_to_gigabytes_fails_the_call() {
    if serve_if_child() {
        return;
    }
    let case = case();
    runtime().block_on(async {
        let command = child(
            "a_result_within_its_size_that_would_parse_to_gigabytes_fails_the_call",
            Kind::HugeResult,
        );
        // The default limits: 15 MiB of `[],` is within the 16 MiB line limit.
        let client = within(30, "connect", McpClient::spawn(command))
            .await
            .expect("connects");
        let bomb = client.tool("bomb").expect("listed");
        let err = within(30, "the call", bomb.invoke("{}", &ToolContext::detached()))
            .await
            .unwrap_err();
        let AgentError::LimitExceeded(limit) = &err else {
            panic!("not a limit: {err}")
        };
        assert_eq!(limit.limit, Limit::McpMessageParseCost);
        assert_parse_cost(&err.to_string());
    });
    case.assert_memory("a result that parses to gigabytes");
}

#[test]
fn a_list_page_within_its_size_that_would_parse_to_gigabytes_is_refused_over_http() {
    let case = case();
    runtime().block_on(async {
        let url = http_huge_list(true).await;
        let err = within(30, "connect", McpClient::url(&url))
            .await
            .unwrap_err();
        assert_limit(&err, Limit::McpMessageParseCost);
        assert_parse_cost(&err.to_string());
    });
    case.assert_memory("a list page that parses to gigabytes over HTTP");
}

#[test]
fn a_server_that_never_answers_tools_list_hits_the_list_timeout() {
    let case = case();
    runtime().block_on(async {
        let (pipe, _) = in_process(Kind::SilentList);
        let limits = McpClientLimits::default().list_timeout(Duration::from_millis(300));
        let err = within(
            10,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .unwrap_err();
        assert_limit(&err, Limit::McpListTime);
    });
    case.assert_memory("a silent tools/list");
}

#[test]
fn more_tools_than_max_tools_is_an_error() {
    let case = case();
    runtime().block_on(async {
        let (pipe, _) = in_process(Kind::ManyTools { n: 11 });
        let limits = McpClientLimits::default().max_tools(10);
        let err = within(
            10,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .unwrap_err();
        assert_limit(&err, Limit::McpTools);
        // At the limit, every tool is listed.
        let (pipe, _) = in_process(Kind::ManyTools { n: 10 });
        let client = within(
            10,
            "connect",
            McpClient::builder().limits(limits).connect(pipe),
        )
        .await
        .expect("ten tools are within the limit");
        assert_eq!(client.tools().len(), 10);
    });
    case.assert_memory("too many tools");
}
