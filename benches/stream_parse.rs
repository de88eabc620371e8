//! Benchmark: a recorded streamed Chat Completions response of 10,003 chunks (text deltas, then
//! two parallel tool calls streamed in 8-character argument pieces, a `finish_reason` chunk and a
//! usage chunk with `choices: []`), read into deltas and a final response, by the `openai`
//! provider against async-openai's stream parsing of the same bytes from the same in-process
//! server. Target: not slower than async-openai.
//!
//! The body is built once, in memory: 5,000 text chunks of one to four words, then each call's
//! first piece (index, id, type, name) and 2,499 argument pieces; about 3.5 MB of
//! `data: {json}\n\n` events, each chunk in OpenAI's full shape (`id`, `object`, `created`,
//! `model`, `service_tier`, `system_fingerprint`, `choices[].logprobs`, `usage: null`,
//! `obfuscation`), checked to read as async-openai's `CreateChatCompletionStreamResponse`. A
//! hand-written HTTP/1.1 server on 127.0.0.1 (keep-alive, `transfer-encoding: chunked` with one
//! HTTP chunk per event, as a server that flushes each event sends it, gathered into 16 KB
//! writes) answers every `POST /v1/chat/completions` with it. Variants, side by side in one run:
//!
//! - `phaseo`: `OpenAi::respond_streaming` with a sink that counts the deltas and sums the text
//!   length; the final `ModelResponse` is checked (text, both calls, finish reason, usage).
//! - `async_openai`: `client.chat().create_stream(request)` with the same request, the stream
//!   consumed to its end, and the final result assembled by hand (text concatenated, calls
//!   assembled by `index`), which is what a user of async-openai writes; checked the same way.
//! - `phaseo_assembler_only`: `StreamAssembler::push` over the pre-split `data` payloads, no HTTP
//!   and no SSE framing: the provider's parsing floor.
//! - `async_openai_types_only`: `serde_json::from_str::<CreateChatCompletionStreamResponse>` over
//!   the same payloads and the same hand assembly: async-openai's parsing floor.
//!
//! Each response is read in a task spawned on the runtime (as an application's agent runs), which
//! the bench thread waits for with `block_on`. Both HTTP variants run twice: in group
//! `stream_parse` on a multi-thread Tokio runtime (two workers, on which the server, both clients
//! and their connection tasks all run), and in group `stream_parse_current_thread` on a
//! current-thread runtime with its own server and clients, where everything (server, HTTP,
//! parsing) runs on one thread, so the time is the whole CPU cost. async-openai parses the events
//! in a task of its own and hands them over a channel: on the multi-thread runtime that parsing can
//! overlap with the consumer and the server, on the current-thread runtime it cannot.
//!
//! Throughput is in chunks (criterion's `elem/s`). After criterion's report, a summary prints each
//! variant's median time per response over the measured samples and the ratio phaseo ÷
//! async-openai (below 1: phaseo is faster), then the same ratio from an interleaved run
//! (`PAIRS` responses of each client, alternating), which a noisy machine skews less. Run with
//! `cargo bench --bench stream_parse`.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    CreateChatCompletionRequest, CreateChatCompletionStreamResponse,
    FinishReason as OpenAiFinishReason,
};
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput, measurement::WallTime};
use futures::StreamExt;
use phaseo_agent::provider::openai::{OpenAi, StreamAssembler, request_body};
use phaseo_agent::{
    DeltaSink, FinishReason, Message, Model, ModelDelta, ModelRequest, ModelResponse, ToolChoice,
    ToolDefinition,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// Text chunks before the tool calls (after the first chunk, which has the role and no text).
const TEXT_CHUNKS: usize = 5_000;
/// Argument pieces per tool call (after the call's first piece, with its id and name).
const ARGUMENT_PIECES: usize = 2_499;
/// Characters per argument piece.
const PIECE_CHARS: usize = 8;
/// Bytes per write of the server, at least (whole HTTP chunks, one per event, gathered).
const WRITE_SIZE: usize = 16 * 1024;
/// Criterion samples per variant.
const SAMPLES: usize = 10;
/// Responses of each client in the interleaved comparison.
const PAIRS: usize = 20;

const CHUNK_ID: &str = "chatcmpl-BcEzK2mYcQ8pX7n4TqLw0aVd1FhRs";
const CREATED: u32 = 1_748_960_000;
const MODEL: &str = "gpt-4.1-2025-04-14";
const USAGE: (u32, u32) = (412, 10_003);

/// The response every request gets, and what it must be read as.
struct Recorded {
    /// The `data` of each event, `[DONE]` last.
    payloads: Vec<String>,
    /// JSON chunks in the body (the `[DONE]` event not counted).
    chunks: usize,
    /// The text, whole.
    text: String,
    /// Each call's id, name and arguments.
    calls: [(String, String, String); 2],
    /// Deltas a reader hands out: one per non-empty text piece, one per tool-call piece.
    deltas: usize,
}

/// A chunk in OpenAI's shape, `choices` and `usage` as JSON text.
fn chunk(choices: &str, usage: &str, n: usize) -> String {
    // OpenAI pads each chunk with `obfuscation` (random characters, varying length).
    let obfuscation: String = (0..4 + n % 9)
        .map(|i| char::from(b'a' + ((n * 7 + i * 13) % 26) as u8))
        .collect();
    format!(
        r#"{{"id":"{CHUNK_ID}","object":"chat.completion.chunk","created":{CREATED},"model":"{MODEL}","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":{choices},"usage":{usage},"obfuscation":"{obfuscation}"}}"#
    )
}

/// `choices` with one choice of index 0.
fn choice(delta: &str, finish_reason: &str) -> String {
    format!(r#"[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish_reason}}}]"#)
}

/// A JSON string literal.
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Argument text of exactly `ARGUMENT_PIECES * PIECE_CHARS` characters: `head`, a JSON string of
/// words (with a line break now and then), `tail`.
fn long_arguments(head: &str, tail: &str, words: &[&str]) -> String {
    let target = ARGUMENT_PIECES * PIECE_CHARS - head.len() - tail.len();
    let mut content = String::new();
    let mut i = 0;
    while content.chars().count() < target {
        content.push_str(words[i % words.len()]);
        content.push(if i % 17 == 16 { '\n' } else { ' ' });
        i += 1;
    }
    let mut arguments = format!("{head}{}{tail}", quoted(&content));
    // Cut whole: `ARGUMENT_PIECES` pieces exactly (the JSON stays valid: the cut is inside the
    // string, which is closed again).
    let chars: Vec<char> = arguments.chars().collect();
    let keep = ARGUMENT_PIECES * PIECE_CHARS - tail.len() - 1;
    if chars.len() > ARGUMENT_PIECES * PIECE_CHARS {
        let mut kept: String = chars[..keep].iter().collect();
        // Never end on a lone backslash (an escape cut in half).
        while kept.ends_with('\\') {
            kept.pop();
            kept.push(' ');
        }
        arguments = format!("{kept}\"{tail}");
    }
    assert!(serde_json::from_str::<serde_json::Value>(&arguments).is_ok());
    arguments
}

fn recorded() -> Recorded {
    const WORDS: &[&str] = &[
        "the", "deploy", "of", "service", "api", "finished", "in", "42s;", "latency", "p99", "is",
        "\"ok\"", "and", "naïve", "retries", "were", "disabled", "—", "see", "runbook", "§3.",
        "Next:", "db", "schema", "(v17)", "with", "0", "errors",
    ];
    let mut payloads = Vec::new();
    let mut n = 0;
    let mut push = |payloads: &mut Vec<String>, choices: String, usage: &str| {
        payloads.push(chunk(&choices, usage, n));
        n += 1;
    };
    push(
        &mut payloads,
        choice(
            r#"{"role":"assistant","content":"","refusal":null}"#,
            "null",
        ),
        "null",
    );
    let mut text = String::new();
    let mut deltas = 0;
    for i in 0..TEXT_CHUNKS {
        // A few words a chunk, a paragraph break now and then.
        let mut piece = String::new();
        for w in 0..1 + i % 4 {
            piece.push(' ');
            piece.push_str(WORDS[(i * 5 + w * 3) % WORDS.len()]);
        }
        if i % 97 == 96 {
            piece.push_str("\n\n");
        }
        text.push_str(&piece);
        deltas += 1;
        let delta = format!(r#"{{"content":{}}}"#, quoted(&piece));
        push(&mut payloads, choice(&delta, "null"), "null");
    }
    let calls = [
        (
            "call_DdmO9pD3xa9XTPNJ32zg2hcA".to_owned(),
            "write_file".to_owned(),
            long_arguments(r#"{"path":"deploy-summary.txt","content":"#, "}", WORDS),
        ),
        (
            "call_t7Yq2WvKx0LmB1cNr8ZsE4uP".to_owned(),
            "search_docs".to_owned(),
            long_arguments(r#"{"query":"#, r#","limit":20,"tags":["ops","db"]}"#, WORDS),
        ),
    ];
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        let head = format!(
            r#"{{"tool_calls":[{{"index":{index},"id":"{id}","type":"function","function":{{"name":"{name}","arguments":""}}}}]}}"#
        );
        push(&mut payloads, choice(&head, "null"), "null");
        deltas += 1;
        let chars: Vec<char> = arguments.chars().collect();
        assert_eq!(chars.len(), ARGUMENT_PIECES * PIECE_CHARS);
        for piece in chars.chunks(PIECE_CHARS) {
            let piece: String = piece.iter().collect();
            let delta = format!(
                r#"{{"tool_calls":[{{"index":{index},"function":{{"arguments":{}}}}}]}}"#,
                quoted(&piece)
            );
            push(&mut payloads, choice(&delta, "null"), "null");
            deltas += 1;
        }
    }
    push(&mut payloads, choice("{}", r#""tool_calls""#), "null");
    let usage = json!({
        "prompt_tokens": USAGE.0,
        "completion_tokens": USAGE.1,
        "total_tokens": USAGE.0 + USAGE.1,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    });
    push(&mut payloads, "[]".to_owned(), &usage.to_string());
    let chunks = payloads.len();
    payloads.push("[DONE]".to_owned());

    let recorded = Recorded {
        payloads,
        chunks,
        text,
        calls,
        deltas,
    };
    // Valid for both readers before anything is timed.
    for payload in &recorded.payloads[..chunks] {
        if let Err(e) = serde_json::from_str::<CreateChatCompletionStreamResponse>(payload) {
            panic!("async-openai cannot read a chunk ({e}): {payload}");
        }
    }
    assembler_only(&recorded);
    types_only(&recorded);
    recorded
}

// The server.

/// The whole HTTP response, as the server's writes: the head, then the body with each event in an
/// HTTP chunk of its own (chunked transfer coding, as a server that flushes each event sends it),
/// the chunks gathered into writes of about `WRITE_SIZE` bytes, then the last chunk.
fn response_writes(payloads: &[String]) -> Vec<Vec<u8>> {
    let mut writes = vec![
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
          transfer-encoding: chunked\r\n\r\n"
            .to_vec(),
    ];
    let mut write = Vec::with_capacity(WRITE_SIZE + 1024);
    for payload in payloads {
        let event = format!("data: {payload}\n\n");
        write.extend_from_slice(format!("{:x}\r\n", event.len()).as_bytes());
        write.extend_from_slice(event.as_bytes());
        write.extend_from_slice(b"\r\n");
        if write.len() >= WRITE_SIZE {
            writes.push(std::mem::replace(
                &mut write,
                Vec::with_capacity(WRITE_SIZE + 1024),
            ));
        }
    }
    write.extend_from_slice(b"0\r\n\r\n");
    writes.push(write);
    writes
}

/// Starts the server on `runtime`: every `POST /v1/chat/completions` gets `writes`; a connection
/// is kept for the next request until the client closes it.
fn start_server(runtime: &Runtime, writes: Arc<Vec<Vec<u8>>>) -> SocketAddr {
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    runtime.spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(connection(socket, Arc::clone(&writes)));
        }
    });
    addr
}

async fn connection(mut socket: TcpStream, writes: Arc<Vec<Vec<u8>>>) {
    let _ = socket.set_nodelay(true);
    let mut buffer = Vec::with_capacity(8 * 1024);
    let mut read = vec![0; 8 * 1024];
    loop {
        // The head, then the body up to its content-length.
        let head_end = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            match socket.read(&mut read).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&read[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.trim().parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + length {
            match socket.read(&mut read).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&read[..n]),
            }
        }
        buffer.drain(..head_end + length);
        if !head.starts_with("POST /v1/chat/completions ") {
            let _ = socket
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await;
            continue;
        }
        for write in writes.iter() {
            if socket.write_all(write).await.is_err() {
                return;
            }
        }
    }
}

// The readers.

fn phaseo_request() -> ModelRequest<'static> {
    ModelRequest::default()
        .instructions("You are an operations assistant. Be brief.")
        .messages(vec![Message::User {
            content: "Summarise the deploy into deploy-summary.txt and search the docs.".into(),
        }])
        .tools(vec![
            ToolDefinition::new(
                "write_file",
                "Write a text file",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"]
                }),
            ),
            ToolDefinition::new(
                "search_docs",
                "Search the documentation",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string"},
                        "limit": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["query"]
                }),
            ),
        ])
        .tool_choice(ToolChoice::Auto)
        .parallel_tool_calls(true)
        .meta(Default::default())
}

/// The same request for async-openai: the body the provider sends, read as its request type.
fn async_openai_request(model: &OpenAi, request: &ModelRequest) -> CreateChatCompletionRequest {
    let body = request_body(request, model, true).expect("a request body");
    serde_json::from_value(body).expect("async-openai reads the provider's request")
}

fn check(recorded: &Recorded, response: &ModelResponse, deltas: usize, text_len: usize) {
    assert_eq!(deltas, recorded.deltas);
    assert_eq!(text_len, recorded.text.len());
    assert_eq!(response.text.as_deref(), Some(recorded.text.as_str()));
    assert_eq!(response.tool_calls.len(), 2);
    for (call, (id, name, arguments)) in response.tool_calls.iter().zip(&recorded.calls) {
        assert_eq!(
            (&call.id, &call.name, &call.arguments),
            (id, name, arguments)
        );
    }
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    let usage = response.usage.expect("usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (u64::from(USAGE.0), u64::from(USAGE.1))
    );
    assert_eq!(response.id.as_deref(), Some(CHUNK_ID));
}

async fn phaseo_once(model: &OpenAi, request: &ModelRequest<'_>, recorded: &Recorded) {
    let deltas = AtomicUsize::new(0);
    let text_len = AtomicUsize::new(0);
    let send = |delta: ModelDelta| {
        deltas.fetch_add(1, Ordering::Relaxed);
        if let ModelDelta::Text { text } = &delta {
            text_len.fetch_add(text.len(), Ordering::Relaxed);
        }
        black_box(delta);
    };
    let sink = DeltaSink::new(&send);
    let response = match model.respond_streaming(request, &sink).await {
        Ok(response) => response,
        Err(e) => panic!("phaseo: {e}"),
    };
    check(
        recorded,
        &response,
        deltas.into_inner(),
        text_len.into_inner(),
    );
}

/// What an async-openai user assembles from the chunks: the text, the calls by `index`, the
/// finish reason, the usage and the id, counting the pieces they would hand on.
#[derive(Default)]
struct HandAssembled {
    id: Option<String>,
    text: String,
    calls: Vec<(String, String, String)>,
    finish_reason: Option<OpenAiFinishReason>,
    usage: Option<(u32, u32)>,
    deltas: usize,
    text_len: usize,
}

impl HandAssembled {
    fn push(&mut self, chunk: CreateChatCompletionStreamResponse) {
        if self.id.is_none() {
            self.id = Some(chunk.id);
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some((usage.prompt_tokens, usage.completion_tokens));
        }
        for choice in chunk.choices {
            if choice.index != 0 {
                continue;
            }
            if let Some(text) = choice.delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&text);
                self.deltas += 1;
                self.text_len += text.len();
                black_box(text);
            }
            for piece in choice.delta.tool_calls.into_iter().flatten() {
                let index = piece.index as usize;
                if self.calls.len() <= index {
                    self.calls.resize_with(index + 1, Default::default);
                }
                let call = &mut self.calls[index];
                if let Some(id) = &piece.id {
                    call.0.push_str(id);
                }
                if let Some(function) = &piece.function {
                    if let Some(name) = &function.name {
                        call.1.push_str(name);
                    }
                    if let Some(arguments) = &function.arguments {
                        call.2.push_str(arguments);
                    }
                }
                self.deltas += 1;
                black_box(piece);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
    }

    fn check(self, recorded: &Recorded) {
        let calls = self
            .calls
            .into_iter()
            .map(|(id, name, arguments)| phaseo_agent::ToolCall::raw(id, name, arguments));
        let mut response = ModelResponse::new(Some(self.text), calls);
        if let Some(OpenAiFinishReason::ToolCalls) = self.finish_reason {
            response = response.finish_reason(FinishReason::ToolCalls);
        }
        if let Some((input, output)) = self.usage {
            response = response.usage(phaseo_agent::Usage::new(input.into(), output.into()));
        }
        if let Some(id) = self.id {
            response = response.id(id);
        }
        check(recorded, &response, self.deltas, self.text_len);
    }
}

async fn async_openai_once(
    client: &async_openai::Client<OpenAIConfig>,
    request: &CreateChatCompletionRequest,
    recorded: &Recorded,
) {
    let mut stream = match client.chat().create_stream(request.clone()).await {
        Ok(stream) => stream,
        Err(e) => panic!("async-openai: {e}"),
    };
    let mut assembled = HandAssembled::default();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => assembled.push(chunk),
            Err(e) => panic!("async-openai: {e}"),
        }
    }
    assembled.check(recorded);
}

fn assembler_only(recorded: &Recorded) {
    let mut assembler = StreamAssembler::new();
    let mut deltas = 0;
    let mut text_len = 0;
    for payload in &recorded.payloads {
        for delta in assembler.push(payload).expect("a chunk") {
            deltas += 1;
            if let ModelDelta::Text { text } = &delta {
                text_len += text.len();
            }
            black_box(delta);
        }
        if assembler.is_complete() {
            break;
        }
    }
    let response = assembler.finish().expect("a response");
    check(recorded, &response, deltas, text_len);
}

fn types_only(recorded: &Recorded) {
    let mut assembled = HandAssembled::default();
    for payload in &recorded.payloads {
        if payload == "[DONE]" {
            break;
        }
        match serde_json::from_str::<CreateChatCompletionStreamResponse>(payload) {
            Ok(chunk) => assembled.push(chunk),
            Err(e) => panic!("async-openai's types: {e}"),
        }
    }
    assembled.check(recorded);
}

// The benchmark.

/// Per-iteration times of each variant, one entry per criterion sample (the last `SAMPLES`
/// entries of a name are the measured ones; earlier ones are warm-up).
static RECORD: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

fn record(name: String, per_iteration: Duration) {
    RECORD
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((name, per_iteration));
}

/// Times `iters` runs of `once`, records the time per run under `group/name`.
fn timed(group: &str, name: &str, iters: u64, mut once: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        once();
    }
    let elapsed = start.elapsed();
    record(
        format!("{group}/{name}"),
        elapsed / u32::try_from(iters.max(1)).unwrap_or(u32::MAX),
    );
    elapsed
}

/// One runtime with its server and both clients.
struct Setup {
    runtime: Runtime,
    recorded: Arc<Recorded>,
    // In `Arc`s, not cloned: a clone of an `OpenAi` made before its first request builds an HTTP
    // client (and a connection pool) of its own.
    phaseo: Arc<OpenAi>,
    async_openai: Arc<async_openai::Client<OpenAIConfig>>,
    phaseo_request: Arc<ModelRequest<'static>>,
    async_openai_request: Arc<CreateChatCompletionRequest>,
}

impl Setup {
    fn new(runtime: Runtime, recorded: &Arc<Recorded>, writes: &Arc<Vec<Vec<u8>>>) -> Setup {
        let addr = start_server(&runtime, Arc::clone(writes));
        let base_url = format!("http://{addr}/v1");
        let phaseo = OpenAi::new("m")
            .base_url(&base_url)
            .api_key("k")
            .expect("a key");
        let config = OpenAIConfig::new()
            .with_api_base(&base_url)
            .with_api_key("k");
        let async_openai = async_openai::Client::with_config(config);
        let phaseo_request = phaseo_request();
        let async_openai_request = async_openai_request(&phaseo, &phaseo_request);
        Setup {
            runtime,
            recorded: Arc::clone(recorded),
            phaseo: Arc::new(phaseo),
            async_openai: Arc::new(async_openai),
            phaseo_request: Arc::new(phaseo_request),
            async_openai_request: Arc::new(async_openai_request),
        }
    }

    /// Runs `future` as a task of the runtime (as an application's agent runs), and waits for it.
    fn run(&self, future: impl Future<Output = ()> + Send + 'static) {
        match self.runtime.block_on(self.runtime.spawn(future)) {
            Ok(()) => {}
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("the benchmark task failed: {e}"),
        }
    }

    fn phaseo(&self) {
        let model = Arc::clone(&self.phaseo);
        let request = Arc::clone(&self.phaseo_request);
        let recorded = Arc::clone(&self.recorded);
        self.run(async move { phaseo_once(&model, &request, &recorded).await });
    }

    fn async_openai(&self) {
        let client = Arc::clone(&self.async_openai);
        let request = Arc::clone(&self.async_openai_request);
        let recorded = Arc::clone(&self.recorded);
        self.run(async move { async_openai_once(&client, &request, &recorded).await });
    }

    fn both(&self, group: &mut BenchmarkGroup<'_, WallTime>, name: &str) {
        group.bench_function("phaseo", |b| {
            b.iter_custom(|iters| timed(name, "phaseo", iters, || self.phaseo()));
        });
        group.bench_function("async_openai", |b| {
            b.iter_custom(|iters| timed(name, "async_openai", iters, || self.async_openai()));
        });
    }

    /// `PAIRS` responses of each client, alternating (and alternating which goes first).
    fn interleaved(&self) -> Interleaved {
        let mut phaseo = Vec::with_capacity(PAIRS);
        let mut async_openai = Vec::with_capacity(PAIRS);
        let mut ratios = Vec::with_capacity(PAIRS);
        let time = |f: &dyn Fn()| {
            let start = Instant::now();
            f();
            start.elapsed()
        };
        for pair in 0..PAIRS {
            let (p, a) = if pair % 2 == 0 {
                let p = time(&|| self.phaseo());
                (p, time(&|| self.async_openai()))
            } else {
                let a = time(&|| self.async_openai());
                (time(&|| self.phaseo()), a)
            };
            phaseo.push(p);
            async_openai.push(a);
            ratios.push(p.as_secs_f64() / a.as_secs_f64());
        }
        ratios.sort_by(f64::total_cmp);
        Interleaved {
            phaseo: median(&mut phaseo),
            async_openai: median(&mut async_openai),
            pair_ratio: ratios[ratios.len() / 2],
        }
    }
}

/// The medians of an interleaved comparison, and the median of the per-pair ratios.
struct Interleaved {
    phaseo: Duration,
    async_openai: Duration,
    pair_ratio: f64,
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, recorded: &Recorded) {
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(recorded.chunks as u64));
}

fn median(runs: &mut [Duration]) -> Duration {
    runs.sort();
    let mid = runs.len() / 2;
    if runs.len() % 2 == 0 {
        (runs[mid - 1] + runs[mid]) / 2
    } else {
        runs[mid]
    }
}

fn summary(interleaved: &[(&str, Option<Interleaved>)]) {
    let record = RECORD.lock().unwrap_or_else(PoisonError::into_inner);
    let medians: Vec<(String, Duration)> = {
        // Variants that were measured: a test run (`cargo bench -- --test`) times each once.
        let mut names: Vec<&String> = record.iter().map(|(name, _)| name).collect();
        names.dedup();
        names.retain(|name| record.iter().filter(|(n, _)| n == *name).count() >= SAMPLES);
        names
            .into_iter()
            .map(|name| {
                let runs: Vec<Duration> = record
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, d)| *d)
                    .collect();
                let mut measured = runs[runs.len().saturating_sub(SAMPLES)..].to_vec();
                (name.clone(), median(&mut measured))
            })
            .collect()
    };
    if medians.is_empty() {
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("\nSummary: median time per response over the measured samples");
    println!("{:<52} {:>10}", "benchmark", "median ms");
    for (name, median) in &medians {
        println!("{name:<52} {:>10.3}", ms(*median));
    }
    let find = |name: String| medians.iter().find(|(n, _)| *n == name).map(|(_, d)| *d);
    for (group, pairs) in interleaved {
        if let (Some(p), Some(a)) = (
            find(format!("{group}/phaseo")),
            find(format!("{group}/async_openai")),
        ) {
            println!(
                "{group}: phaseo ÷ async_openai = {:.3} (criterion samples)",
                ms(p) / ms(a)
            );
        }
        if let Some(pairs) = pairs {
            println!(
                "{group}: interleaved, {PAIRS} each: phaseo {:.3} ms, async_openai {:.3} ms, \
                 ratio of medians {:.3}, median of pair ratios {:.3}",
                ms(pairs.phaseo),
                ms(pairs.async_openai),
                ms(pairs.phaseo) / ms(pairs.async_openai),
                pairs.pair_ratio
            );
        }
    }
    if let (Some(p), Some(a)) = (
        find("floor/phaseo_assembler_only".into()),
        find("floor/async_openai_types_only".into()),
    ) {
        println!(
            "floor: phaseo_assembler_only ÷ async_openai_types_only = {:.3}",
            ms(p) / ms(a)
        );
    }
}

fn main() {
    let recorded = Arc::new(recorded());
    let writes = Arc::new(response_writes(&recorded.payloads));
    let multi_thread = Setup::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a multi-thread runtime"),
        &recorded,
        &writes,
    );
    let current_thread = Setup::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime"),
        &recorded,
        &writes,
    );
    println!(
        "stream_parse: {} chunks ({} text, 2 tool calls of {} argument pieces), {} deltas, \
         {} bytes of SSE body, {} bytes with the HTTP framing",
        recorded.chunks,
        TEXT_CHUNKS,
        ARGUMENT_PIECES,
        recorded.deltas,
        recorded
            .payloads
            .iter()
            .map(|p| "data: \n\n".len() + p.len())
            .sum::<usize>(),
        writes.iter().map(Vec::len).sum::<usize>()
    );

    let mut criterion = Criterion::default().configure_from_args();
    {
        let mut group = criterion.benchmark_group("stream_parse");
        configure(&mut group, &recorded);
        multi_thread.both(&mut group, "stream_parse");
        group.bench_function("phaseo_assembler_only", |b| {
            b.iter_custom(|iters| {
                timed("floor", "phaseo_assembler_only", iters, || {
                    assembler_only(&recorded)
                })
            });
        });
        group.bench_function("async_openai_types_only", |b| {
            b.iter_custom(|iters| {
                timed("floor", "async_openai_types_only", iters, || {
                    types_only(&recorded)
                })
            });
        });
        group.finish();
    }
    {
        let mut group = criterion.benchmark_group("stream_parse_current_thread");
        configure(&mut group, &recorded);
        current_thread.both(&mut group, "stream_parse_current_thread");
        group.finish();
    }
    criterion.final_summary();

    // Interleaved only in a real run (not `cargo bench -- --test`, not a filtered run that left
    // out the HTTP variants).
    let measured = |group: &str| {
        let record = RECORD.lock().unwrap_or_else(PoisonError::into_inner);
        ["phaseo", "async_openai"].iter().all(|variant| {
            let name = format!("{group}/{variant}");
            record.iter().filter(|(n, _)| *n == name).count() >= SAMPLES
        })
    };
    let interleaved = [
        (
            "stream_parse",
            measured("stream_parse").then(|| multi_thread.interleaved()),
        ),
        (
            "stream_parse_current_thread",
            measured("stream_parse_current_thread").then(|| current_thread.interleaved()),
        ),
    ];
    summary(&interleaved);
}
