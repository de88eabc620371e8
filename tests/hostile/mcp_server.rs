//! Our MCP server against hostile clients: slow and oversized requests, foreign origins, too many
//! sessions and connections over Streamable HTTP (real sockets on 127.0.0.1), and misbehaving
//! clients over stdio (a real child process where the claim is about a process, an in-process
//! pipe otherwise).
//!
//! Every case checks its outcome, ends within a generous bound, and keeps the heap's peak under
//! 200 MB. The cases run one at a time (a lock), since the counting allocator sees every thread.

use std::future::Future;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use phaseo_agent::Tool;
use phaseo_agent::limits::McpServerLimits;
use phaseo_agent::mcp::{McpServer, NO_ELICITATION};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

mod calls;
mod http_service;

use crate::ALLOCATOR as PEAK;

use crate::SERIAL;

const MEMORY: usize = 200 * 1024 * 1024;

/// Runs one case on a runtime of its own: within `bound`, with the heap's peak under 200 MB.
fn case<F: Future<Output = ()>>(bound: Duration, make: impl FnOnce() -> F) {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    PEAK.reset_peak_usage();
    runtime.block_on(async {
        tokio::time::timeout(bound, make())
            .await
            .unwrap_or_else(|_| panic!("the case did not end within {bound:?}"));
    });
    runtime.shutdown_timeout(Duration::from_secs(5));
    let peak = PEAK.peak_usage();
    assert!(peak < MEMORY, "the heap's peak was {peak} bytes");
}

type Calls = Arc<Mutex<Vec<Value>>>;

/// A tool that records each call that reaches it.
fn record(calls: &Calls) -> Tool {
    recorder("record", calls)
}

fn recorder(id: &str, calls: &Calls) -> Tool {
    let calls = calls.clone();
    Tool::new(
        id,
        "Record a call",
        json!({"type": "object"}),
        move |input, _| {
            calls.lock().unwrap().push(input.clone());
            Ok(json!("recorded"))
        },
    )
}

/// A gated tool (it needs a person's approval) that records its calls.
fn deploy(calls: &Calls) -> Tool {
    recorder("deploy", calls).require_approval()
}

/// What a held call tells the test.
#[derive(Debug, PartialEq)]
enum Held {
    Started,
    /// Its cancellation token fired.
    Stopped,
    /// It ran to its end; whether its token had fired by then.
    Finished {
        cancelled: bool,
    },
}

/// A tool that runs until `release` says so (or forever), reporting on `events`.
fn hold(events: mpsc::UnboundedSender<Held>, release: Arc<tokio::sync::Notify>) -> Tool {
    Tool::new(
        "hold",
        "Hold until released",
        json!({"type": "object"}),
        move |_, ctx| {
            let (events, release) = (events.clone(), release.clone());
            async move {
                let token = ctx.cancellation_token().clone();
                let watcher = events.clone();
                let watched = token.clone();
                tokio::spawn(async move {
                    watched.cancelled().await;
                    watcher.send(Held::Stopped).ok();
                });
                events.send(Held::Started).ok();
                release.notified().await;
                events
                    .send(Held::Finished {
                        cancelled: token.is_cancelled(),
                    })
                    .ok();
                Ok(json!("released"))
            }
        },
    )
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers

const VERSION: &str = "2025-06-18";

fn initialize_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}})
}

fn call_message(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": {}}})
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client")
}

/// A POST of one JSON-RPC message, as a Streamable HTTP client sends it.
fn post(
    client: &reqwest::Client,
    addr: SocketAddr,
    session: Option<&str>,
    body: String,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", VERSION);
    }
    request
}

/// Initialises a session and returns its id.
async fn open_session(client: &reqwest::Client, addr: SocketAddr) -> String {
    open_session_with(client, addr, initialize_message()).await
}

/// Initialises a session with `initialize` and returns its id.
async fn open_session_with(
    client: &reqwest::Client,
    addr: SocketAddr,
    initialize: Value,
) -> String {
    let response = post(client, addr, None, initialize.to_string())
        .send()
        .await
        .expect("an answer to initialize");
    assert_eq!(response.status(), 200, "initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    response.text().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post(client, addr, Some(&session), initialized.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202, "notifications/initialized");
    session
}

/// The JSON-RPC messages of a server-sent event stream.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// The answer with id `id` in a response's events.
async fn answer(response: reqwest::Response, id: u64) -> Value {
    let text = response.text().await.expect("the events");
    events(&text)
        .into_iter()
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no answer {id} in {text}"))
}

/// Calls the tool `name` (no arguments) in `session` as JSON-RPC request `id`, and returns the
/// text of the answer's first content item.
async fn call_text(
    client: &reqwest::Client,
    addr: SocketAddr,
    session: &str,
    id: u64,
    name: &str,
) -> Value {
    let response = post(
        client,
        addr,
        Some(session),
        call_message(id, name).to_string(),
    )
    .send()
    .await
    .expect("an answer");
    answer(response, id).await["result"]["content"][0]["text"].take()
}

/// Reads a raw connection until the server closes it (a reset counts as closed).
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading: {e}"),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Slow clients and connections

#[test]
fn slow_headers_are_cut_off_and_a_real_request_is_still_served() {
    case(Duration::from_secs(60), || async {
        let limits = McpServerLimits::default()
            .header_read_timeout(Duration::from_millis(100))
            .max_connections(16);
        let server = McpServer::new(record(&Calls::default())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let mut slow = Vec::new();
        for _ in 0..600 {
            let mut stream = TcpStream::connect(addr).await.expect("a connection");
            // Headers begun, never finished.
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await
                .unwrap();
            slow.push(stream);
        }
        // Queued behind the 600 in the listen backlog, and still answered.
        let client = http();
        let session = open_session(&client, addr).await;
        assert!(!session.is_empty());
        for stream in &mut slow {
            let seen = until_closed(stream).await;
            assert!(
                seen.is_empty() || seen.starts_with("HTTP/1.1 408"),
                "a slow client is closed or told 408: {seen}"
            );
        }
        http_server.shutdown().await;
    });
}

#[test]
fn connections_past_max_connections_wait_until_one_closes() {
    case(Duration::from_secs(30), || async {
        let limits = McpServerLimits::default().max_connections(2);
        let server = McpServer::new(record(&Calls::default())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        // Two connections, idle between requests: they hold both places.
        let mut first = TcpStream::connect(addr).await.unwrap();
        let mut second = TcpStream::connect(addr).await.unwrap();
        for stream in [&mut first, &mut second] {
            stream
                .write_all(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .await
                .unwrap();
            let mut head = [0u8; 12];
            stream.read_exact(&mut head).await.unwrap();
            assert_eq!(&head, b"HTTP/1.1 406", "served (and kept open)");
        }
        let client = http();
        let mut third = Box::pin(open_session(&client, addr));
        let waited = tokio::time::timeout(Duration::from_millis(500), &mut third).await;
        assert!(
            waited.is_err(),
            "a third connection is not served meanwhile"
        );
        drop(first);
        let session = third.await;
        assert!(!session.is_empty(), "served once a place is free");
        drop(second);
        http_server.shutdown().await;
    });
}

#[test]
fn a_slow_body_gets_408_naming_the_setting() {
    case(Duration::from_secs(30), || async {
        let calls = Calls::default();
        let limits = McpServerLimits::default().body_read_timeout(Duration::from_millis(300));
        let server = McpServer::new(record(&calls)).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let mut stream = TcpStream::connect(http_server.local_addr()).await.unwrap();
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\
            Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
            Content-Length: 1000\r\n\r\n{\"jsonrpc\":";
        stream.write_all(head.as_bytes()).await.unwrap();
        let started = Instant::now();
        let seen = until_closed(&mut stream).await;
        assert!(seen.starts_with("HTTP/1.1 408"), "{seen}");
        assert!(
            seen.contains("McpServerLimits::body_read_timeout"),
            "{seen}"
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        http_server.shutdown().await;
    });
}

#[test]
fn an_oversized_body_gets_413_and_the_tool_never_runs() {
    case(Duration::from_secs(30), || async {
        oversized_bodies_are_refused(|server| async move {
            let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
            let addr = http_server.local_addr();
            (addr, async move { http_server.shutdown().await })
        })
        .await;
    });
}

/// For a body over a set `max_body_bytes` and one over the default (4 MiB): a server that `serve`
/// starts (returning its address and what stops it) answers 413 naming the setting, the tool never
/// runs, and a call of a normal size in the same session still runs.
async fn oversized_bodies_are_refused<S, F, Stop>(serve: S)
where
    S: Fn(McpServer) -> F,
    F: Future<Output = (SocketAddr, Stop)>,
    Stop: Future<Output = ()>,
{
    for (limits, size) in [
        (
            McpServerLimits::default().max_body_bytes(64 * 1024),
            1 << 20,
        ),
        (McpServerLimits::default(), 5 << 20),
    ] {
        let calls = Calls::default();
        let (addr, stop) = serve(McpServer::new(record(&calls)).limits(limits)).await;
        let client = http();
        let session = open_session(&client, addr).await;
        let mut message = call_message(2, "record");
        message["params"]["arguments"] = json!({"blob": "x".repeat(size)});
        let response = post(&client, addr, Some(&session), message.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 413);
        let text = response.text().await.unwrap();
        assert!(text.contains("McpServerLimits::max_body_bytes"), "{text}");
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
        assert_eq!(
            call_text(&client, addr, &session, 3, "record").await,
            "recorded"
        );
        stop.await;
    }
}

// ---------------------------------------------------------------------------------------------
// Origin

/// Initialize from `origin`: the status.
async fn initialize_from(client: &reqwest::Client, addr: SocketAddr, origin: Option<&str>) -> u16 {
    let mut request = post(client, addr, None, initialize_message().to_string());
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    response.text().await.unwrap();
    status
}

async fn origins_are_checked(addr: SocketAddr, calls: &Calls) {
    let client = http();
    // A foreign page's call, on a session opened by a local client: refused, the tool never ran.
    let session = open_session(&client, addr).await;
    let response = post(
        &client,
        addr,
        Some(&session),
        call_message(2, "record").to_string(),
    )
    .header("origin", "https://evil.example")
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 403);
    assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
    assert_eq!(
        initialize_from(&client, addr, Some("https://evil.example")).await,
        403
    );
    assert_eq!(
        initialize_from(&client, addr, Some("http://localhost.evil.example")).await,
        403
    );
    assert_eq!(initialize_from(&client, addr, Some("null")).await, 403);
    for foreign in [
        "http://127.0.0.1.evil.example",
        "http://[::2]:3000",
        "ftp://localhost",
        // An allowed origin without a port is the one a browser sends for the scheme's port.
        "https://app.example.com:8443",
    ] {
        assert_eq!(
            initialize_from(&client, addr, Some(foreign)).await,
            403,
            "{foreign}"
        );
    }
    // Every loopback origin: all of 127.0.0.0/8, `localhost`, `[::1]`, any port, http or https.
    for local in [
        "http://localhost:5173",
        "https://localhost",
        "http://LocalHost:80",
        "http://127.0.0.1:8080",
        "http://127.0.0.2:8080",
        "https://127.255.3.4",
        "http://[::1]:3000",
        "https://[::1]",
    ] {
        assert_eq!(
            initialize_from(&client, addr, Some(local)).await,
            200,
            "{local}"
        );
    }
    assert_eq!(initialize_from(&client, addr, None).await, 200, "no Origin");
    for allowed in ["https://app.example.com", "https://app.example.com:443"] {
        assert_eq!(
            initialize_from(&client, addr, Some(allowed)).await,
            200,
            "{allowed}"
        );
    }
    let response = post(
        &client,
        addr,
        Some(&session),
        call_message(3, "record").to_string(),
    )
    .header("origin", "http://localhost:5173")
    .send()
    .await
    .unwrap();
    assert_eq!(
        answer(response, 3).await["result"]["content"][0]["text"],
        "recorded"
    );
}

#[test]
fn a_foreign_origin_gets_403_over_serve_http() {
    case(Duration::from_secs(30), || async {
        let calls = Calls::default();
        let server = McpServer::new(record(&calls)).allowed_origins(["https://app.example.com"]);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        origins_are_checked(http_server.local_addr(), &calls).await;
        http_server.shutdown().await;
    });
}

#[test]
fn a_foreign_origin_gets_403_from_http_service_in_another_server() {
    case(Duration::from_secs(30), || async {
        use hyper_util::rt::TokioIo;
        use hyper_util::service::TowerToHyperService;
        let calls = Calls::default();
        let service = McpServer::new(record(&calls))
            .allowed_origins(["https://app.example.com"])
            .http_service()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let service = TowerToHyperService::new(service.clone());
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        origins_are_checked(addr, &calls).await;
        serving.abort();
    });
}

// ---------------------------------------------------------------------------------------------
// Sessions

#[test]
fn past_max_sessions_a_new_client_gets_503_naming_the_setting() {
    case(Duration::from_secs(30), || async {
        let limits = McpServerLimits::default().max_sessions(3);
        let server = McpServer::new(record(&Calls::default())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let mut sessions = Vec::new();
        for _ in 0..3 {
            sessions.push(open_session(&client, addr).await);
        }
        let refused = post(&client, addr, None, initialize_message().to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 503);
        assert!(
            refused.headers().get("retry-after").is_some(),
            "a Retry-After"
        );
        let text = refused.text().await.unwrap();
        assert!(text.contains("McpServerLimits::max_sessions"), "{text}");
        // The sessions kept still work, and ending one makes room.
        let response = post(
            &client,
            addr,
            Some(&sessions[0]),
            call_message(2, "record").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(
            answer(response, 2).await["result"]["content"][0]["text"],
            "recorded"
        );
        let ended = client
            .delete(format!("http://{addr}/mcp"))
            .header("mcp-session-id", &sessions[0])
            .header("mcp-protocol-version", VERSION)
            .send()
            .await
            .unwrap();
        assert!(ended.status().is_success(), "{}", ended.status());
        // The end of a session is asynchronous: its place is free once the server has closed it.
        let reopened = async {
            loop {
                let status = initialize_from(&client, addr, None).await;
                if status == 200 {
                    break;
                }
                assert_eq!(status, 503);
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), reopened)
            .await
            .expect("a new session once one ended");
        http_server.shutdown().await;
    });
}

#[test]
fn a_session_unused_past_its_idle_timeout_is_gone() {
    case(Duration::from_secs(30), || async {
        let idle = Duration::from_millis(300);
        let limits = McpServerLimits::default().session_idle_timeout(idle);
        let server = McpServer::new(record(&Calls::default())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let session = open_session(&client, addr).await;
        // Not a synchronisation: the subject is the passage of time with nothing sent.
        tokio::time::sleep(idle * 4).await;
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "record").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 404, "the session is gone");
        http_server.shutdown().await;
    });
}

/// A tool that answers after `wait`.
fn slow(wait: Duration) -> Tool {
    Tool::new(
        "slow",
        "Answer after a while",
        json!({"type": "object"}),
        move |_, _| async move {
            tokio::time::sleep(wait).await;
            Ok(json!("done"))
        },
    )
}

#[test]
fn a_session_whose_call_runs_past_its_idle_timeout_is_kept_and_answered() {
    case(Duration::from_secs(30), || async {
        let idle = Duration::from_millis(300);
        let limits = McpServerLimits::default().session_idle_timeout(idle);
        let server = McpServer::new(slow(idle * 3)).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let session = open_session(&client, addr).await;
        // The call is the session's only activity, for three times its idle timeout.
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "slow").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(
            answer(response, 2).await["result"]["content"][0]["text"],
            "done"
        );
        // The idle clock starts when the call ends: the session is there now, and gone once
        // unused for its idle timeout.
        let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let response = post(&client, addr, Some(&session), listed.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer(response, 3).await["result"]["tools"][0]["name"],
            "slow"
        );
        // Not a synchronisation: the subject is the passage of time with nothing sent.
        tokio::time::sleep(idle * 4).await;
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(4, "slow").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(response.status(), 404, "the session is gone");
        http_server.shutdown().await;
    });
}

#[test]
fn a_cancelled_call_does_not_keep_its_session_past_its_idle_timeout() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let idle = Duration::from_millis(300);
        let limits = McpServerLimits::default().session_idle_timeout(idle);
        let server = McpServer::new(hold(events, Arc::default())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let session = open_session(&client, addr).await;
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "hold").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(seen.recv().await, Some(Held::Started));
        // A cancelled request is never answered (MCP): its end is the cancellation.
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2}});
        let accepted = post(&client, addr, Some(&session), cancel.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(accepted.status(), 202);
        assert_eq!(seen.recv().await, Some(Held::Stopped));
        drop(response);
        // Not a synchronisation: the subject is the passage of time with nothing sent.
        tokio::time::sleep(idle * 4).await;
        let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let response = post(&client, addr, Some(&session), listed.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "the session is gone");
        http_server.shutdown().await;
    });
}

#[test]
fn a_call_waiting_for_the_client_does_not_keep_its_session_past_its_idle_timeout() {
    case(Duration::from_secs(30), || async {
        let calls = Calls::default();
        let idle = Duration::from_millis(300);
        let limits = McpServerLimits::default().session_idle_timeout(idle);
        let server = McpServer::new(deploy(&calls)).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let mut initialize = initialize_message();
        initialize["params"]["capabilities"] = json!({"elicitation": {}});
        let session = open_session_with(&client, addr, initialize).await;
        let mut response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "deploy").to_string(),
        )
        .send()
        .await
        .unwrap();
        // The server asks the person through the client; the client never answers (it went
        // away): the call waits on the client, and the session is unused.
        let mut seen = String::new();
        while !seen.contains("elicitation/create") {
            let chunk = response.chunk().await.unwrap().expect("the server asks");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        // Not a synchronisation: the subject is the passage of time with nothing sent.
        tokio::time::sleep(idle * 4).await;
        let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let again = post(&client, addr, Some(&session), listed.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 404, "the session is gone");
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
        drop(response);
        http_server.shutdown().await;
    });
}

// ---------------------------------------------------------------------------------------------
// Cancellation over HTTP: a disconnect is not a cancellation; `notifications/cancelled` is.

#[test]
fn over_http_a_client_that_disconnects_mid_call_does_not_cancel_it() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let release = Arc::new(tokio::sync::Notify::new());
        // One connection at a time: the next request is served only once the server has seen the
        // first connection close.
        let limits = McpServerLimits::default()
            .max_connections(1)
            .header_read_timeout(Duration::from_millis(200));
        let server = McpServer::new(hold(events, release.clone())).limits(limits);
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let session = open_session(&client, addr).await;
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "hold").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(seen.recv().await, Some(Held::Started));
        drop(response);
        drop(client);
        let client = http();
        let listed = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
        let response = post(&client, addr, Some(&session), listed.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer(response, 3).await["result"]["tools"][0]["name"],
            "hold"
        );
        release.notify_one();
        assert_eq!(seen.recv().await, Some(Held::Finished { cancelled: false }));
        http_server.shutdown().await;
    });
}

#[test]
fn over_http_notifications_cancelled_cancels_the_call() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let server = McpServer::new(hold(events, Arc::default()));
        let http_server = server.serve_http("127.0.0.1:0").await.unwrap();
        let addr = http_server.local_addr();
        let client = http();
        let session = open_session(&client, addr).await;
        let response = post(
            &client,
            addr,
            Some(&session),
            call_message(2, "hold").to_string(),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(seen.recv().await, Some(Held::Started));
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2, "reason": "changed my mind"}});
        let accepted = post(&client, addr, Some(&session), cancel.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(accepted.status(), 202);
        assert_eq!(seen.recv().await, Some(Held::Stopped));
        drop(response);
        http_server.shutdown().await;
    });
}

// ---------------------------------------------------------------------------------------------
// stdio

/// A raw client of a server over an in-process pipe: JSON-RPC lines both ways.
struct Pipe {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

impl Pipe {
    fn serve(server: McpServer) -> Pipe {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(serving) = server.serve(ours).await {
                serving.wait().await.ok();
            }
        });
        let (read, write) = tokio::io::split(theirs);
        Pipe {
            lines: BufReader::new(read).lines(),
            write,
        }
    }

    async fn send(&mut self, message: Value) {
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = self.lines.next_line().await.unwrap().expect("a message");
        serde_json::from_str(&line).unwrap()
    }

    async fn initialize(&mut self, capabilities: Value) {
        let mut message = initialize_message();
        message["params"]["capabilities"] = capabilities;
        self.send(message).await;
        assert_eq!(self.next().await["id"], 1);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }
}

#[test]
fn a_url_only_elicitation_client_is_not_asked_and_the_tool_does_not_run() {
    case(Duration::from_secs(30), || async {
        let calls = Calls::default();
        let mut pipe = Pipe::serve(McpServer::new(deploy(&calls)));
        pipe.initialize(json!({"elicitation": {"url": {}}})).await;
        pipe.send(call_message(2, "deploy")).await;
        let answer = pipe.next().await;
        assert_eq!(
            answer["id"], 2,
            "an answer, not an elicitation request: {answer}"
        );
        assert_eq!(answer["result"]["isError"], true);
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(NO_ELICITATION), "{text}");
        assert!(calls.lock().unwrap().is_empty(), "the tool never ran");
    });
}

#[test]
fn a_form_elicitation_client_is_asked_in_form_mode() {
    case(Duration::from_secs(30), || async {
        // `{}` is form mode (what clients before URL mode declare); `{"form": {}}` says it.
        for capability in [
            json!({}),
            json!({"form": {}}),
            json!({"form": {}, "url": {}}),
        ] {
            let calls = Calls::default();
            let mut pipe = Pipe::serve(McpServer::new(deploy(&calls)));
            pipe.initialize(json!({"elicitation": capability})).await;
            pipe.send(call_message(2, "deploy")).await;
            let asked = pipe.next().await;
            assert_eq!(asked["method"], "elicitation/create", "{asked}");
            assert_ne!(asked["params"]["mode"], "url", "{asked}");
            assert!(asked["params"]["requestedSchema"].is_object(), "{asked}");
            pipe.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}))
                .await;
            let answer = pipe.next().await;
            assert_eq!(answer["id"], 2);
            assert_eq!(answer["result"]["content"][0]["text"], "recorded");
            assert_eq!(calls.lock().unwrap().len(), 1);
        }
    });
}

#[test]
fn over_stdio_closing_stdin_cancels_the_call_promptly() {
    case(Duration::from_secs(30), || async {
        let (events, mut seen) = mpsc::unbounded_channel();
        let mut pipe = Pipe::serve(McpServer::new(hold(events, Arc::default())));
        pipe.initialize(json!({})).await;
        pipe.send(call_message(2, "hold")).await;
        assert_eq!(seen.recv().await, Some(Held::Started));
        drop(pipe);
        // Well under the 5 s rmcp waits for calls to finish on their own.
        let stopped = tokio::time::timeout(Duration::from_millis(2500), seen.recv()).await;
        assert_eq!(stopped.expect("cancelled promptly"), Some(Held::Stopped));
    });
}

#[test]
fn over_stdio_a_request_before_initialize_gets_an_error_and_the_session_goes_on() {
    case(Duration::from_secs(30), || async {
        let mut pipe = Pipe::serve(McpServer::new(record(&Calls::default())));
        pipe.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
            .await;
        let refused = pipe.next().await;
        assert_eq!(refused["id"], 7);
        assert!(refused["error"]["code"].is_i64(), "{refused}");
        pipe.send(json!({"jsonrpc": "2.0", "id": 8, "result": {}}))
            .await;
        pipe.initialize(json!({})).await;
        pipe.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
            .await;
        let listed = pipe.next().await;
        assert_eq!(listed["result"]["tools"][0]["name"], "record", "{listed}");
    });
}

/// The variable that makes this binary, started again, the stdio server of the process cases.
const CHILD: &str = "PHASEO_HOSTILE_MCP_CHILD";

/// Not a case: the body of the child processes the process cases start (this binary again,
/// with `PHASEO_HOSTILE_MCP_CHILD` set): `stdio` serves on its stdin and stdout; `http` serves
/// over HTTP on 127.0.0.1 and prints `PORT <port>`. Ignored, so a plain run does not count it as
/// a passing case; the children run it with `--ignored`.
#[test]
#[ignore = "the body of the child processes that the process cases start"]
fn child_server() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let server = McpServer::new((record(&Calls::default()), chatter()));
        if mode == "http" {
            let limits = McpServerLimits::default()
                .max_connections(10_000)
                .header_read_timeout(Duration::from_secs(60));
            let http_server = server
                .limits(limits)
                .serve_http("127.0.0.1:0")
                .await
                .unwrap();
            println!("\nPORT {}", http_server.local_addr().port());
            std::future::pending::<()>().await;
        } else if let Ok(serving) = server.serve_stdio().await {
            serving.wait().await.ok();
        }
    });
    std::process::exit(0);
}

/// A tool that sends progress every millisecond until it is cancelled.
fn chatter() -> Tool {
    Tool::new(
        "chatter",
        "Send progress until cancelled",
        json!({"type": "object"}),
        |_, ctx| async move {
            for sent in 0_u64.. {
                ctx.emit_progress(sent)?;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok(json!("never"))
        },
    )
}

/// This binary again, as a child server (see [`child_server`]).
fn child(mode: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "mcp_server::child_server",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

/// The CPU time a process has used (user and system, all its threads), from `/proc`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // `utime` and `stime`, fields 14 and 15 of the line, in clock ticks (100 a second on Linux).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

#[test]
fn out_of_file_descriptors_the_server_does_not_spin_and_serves_on() {
    case(Duration::from_secs(60), || async {
        // The server process may open 64 files: its connections run out before the clients'.
        let program = std::env::current_exe().unwrap();
        let mut shell = tokio::process::Command::new("sh");
        shell
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
            .arg(program)
            .args([
                "mcp_server::child_server",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "http")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut server = shell.spawn().expect("the server process starts");
        let pid = server.id().unwrap();
        let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
        let port: u16 = loop {
            let line = lines.next_line().await.unwrap().expect("the server's port");
            if let Some(at) = line.find("PORT ") {
                break line[at + 5..].trim().parse().unwrap();
            }
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut held = Vec::new();
        for _ in 0..100 {
            held.push(TcpStream::connect(addr).await.unwrap());
        }
        // Out of descriptors, accepting fails at once each time: a loop that retries at once
        // spins on a core. Not a synchronisation: the subject is what the process does over time.
        let before = cpu_time(pid);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let used = cpu_time(pid) - before;
        assert!(
            used < Duration::from_millis(500),
            "the server used {used:?} of CPU in one second with nothing to do"
        );
        drop(held);
        let client = http();
        let session = open_session(&client, addr).await;
        assert!(!session.is_empty(), "served once descriptors are free");
    });
}

#[test]
fn a_notification_before_initialize_over_stdio_is_ignored_and_the_process_serves_on() {
    case(Duration::from_secs(60), || async {
        let mut child = child("stdio").spawn().expect("the server process starts");
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The test harness prints words of its own on stdout (`test child_server ... `,
        // with no line end): only JSON-RPC counts.
        let mut next = async || loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server is still there");
            let json = line.find('{').map(|start| &line[start..]);
            if let Some(Ok(message)) = json.map(serde_json::from_str::<Value>) {
                break message;
            }
        };
        let stray = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let listed = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        for message in [stray, initialize_message(), initialized, listed] {
            stdin
                .write_all(format!("{message}\n").as_bytes())
                .await
                .unwrap();
        }
        assert_eq!(next().await["id"], 1, "initialize answered");
        let tools = next().await;
        assert_eq!(tools["result"]["tools"][0]["name"], "record", "{tools}");
        drop(stdin);
        let status = child.wait().await.unwrap();
        assert!(
            status.success(),
            "the server ends when its client goes: {status}"
        );
    });
}

/// Starts a child stdio server, runs `chatter` in it until its first progress arrives, closes
/// its stdin, and returns how long the process took to exit after that. Its stdout is read to
/// the end meanwhile (a client that closed its input may still read).
async fn close_stdin_mid_progress() -> Duration {
    let mut child = child("stdio").spawn().expect("the server process starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (progressed, mut first) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("notifications/progress") {
                progressed.send(()).ok();
            }
        }
    });
    let mut call = call_message(2, "chatter");
    call["params"]["_meta"] = json!({"progressToken": "p"});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    for message in [initialize_message(), initialized, call] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    first.recv().await.expect("the call sends progress");
    let closed = Instant::now();
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits")
        .unwrap();
    let took = closed.elapsed();
    assert!(status.success(), "{status}");
    reader.await.unwrap();
    took
}

#[test]
fn over_stdio_the_end_of_input_cancels_a_call_sending_progress_at_once_every_time() {
    case(Duration::from_secs(600), || async {
        // A busy machine: a thread spinning on each core, besides the server processes.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let burners: Vec<_> = (0..std::thread::available_parallelism().map_or(2, usize::from))
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let mut waited = Vec::new();
        let runs = 20;
        for run in 0..runs {
            let took = close_stdin_mid_progress().await;
            // rmcp waits 5 s for running calls at the end of the input; promptly is well under.
            if took >= Duration::from_secs(2) {
                waited.push((run, took));
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for burner in burners {
            burner.join().unwrap();
        }
        assert!(
            waited.is_empty(),
            "{} of {runs} processes waited after the end of their input: {waited:?}",
            waited.len()
        );
    });
}
