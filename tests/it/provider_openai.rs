//! The OpenAI-compatible Chat Completions provider against an in-process HTTP server (wiremock):
//! whole and streamed tool runs through an `Agent` with the exact request JSON it sends, HTTP
//! errors and errors inside successful responses with the agent's retries, and the pure mapping
//! functions on the same recorded bodies.
//!
//! `tests/fixtures/openai/` holds one file per recorded body, named after the server it
//! imitates (`openai_`, `openrouter_`, `ollama_`, `vllm_`, `llama_cpp_python_`, `llama_server_`);
//! its README says where each shape comes from. The `llama_cpp_python_*` files are real
//! recordings of llama-cpp-python 0.3.36's server (SmolLM2-135M-Instruct,
//! `chatml-function-calling`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use phaseo_agent::provider::openai::{
    MaxTokensField, OpenAi, StreamAssembler, parse_response, request_body,
};
use phaseo_agent::{
    Agent, DeltaSink, Event, FinishReason, Message, Model, ModelDelta, ModelError, ModelErrorKind,
    ModelRequest, ModelResponse, RequestMeta, RetryPolicy, Tool, ToolCall, ToolChoice, ToolContext,
    ToolDefinition, Usage,
};
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

use crate::support::wire::{
    error, fast_retries, json_ok, model_error, requests, scripted_server, sse_ok,
};

// Fixtures.

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../fixtures/openai/", $name))
    };
}

const OPENAI_TOOLS_JSON: &str = fixture!("openai_parallel_tool_calls.json");
const OPENAI_TEXT_JSON: &str = fixture!("openai_text.json");
const OPENAI_TOOLS_SSE: &str = fixture!("openai_parallel_tool_calls.sse");
const OPENAI_TEXT_SSE: &str = fixture!("openai_text.sse");
const OPENAI_CUT_SSE: &str = fixture!("openai_cut.sse");
const OPENAI_MIDSTREAM_SSE: &str = fixture!("openai_error_midstream.sse");
const OPENAI_400: &str = fixture!("openai_error_400.json");
const OPENAI_401: &str = fixture!("openai_error_401.json");
const OPENAI_429: &str = fixture!("openai_error_429.json");
const OPENAI_500: &str = fixture!("openai_error_500.json");
const OPENAI_503: &str = fixture!("openai_error_503.json");
const OPENROUTER_TOOL_JSON: &str = fixture!("openrouter_tool_call_reasoning.json");
const OPENROUTER_ERROR_200: &str = fixture!("openrouter_error_200.json");
const OPENROUTER_TOOL_SSE: &str = fixture!("openrouter_tool_call_comments.sse");
const OPENROUTER_MIDSTREAM_SSE: &str = fixture!("openrouter_error_midstream.sse");
const OLLAMA_TOOL_JSON: &str = fixture!("ollama_tool_call.json");
const OLLAMA_TOOLS_SSE: &str = fixture!("ollama_parallel_tool_calls.sse");
const OLLAMA_TEXT_SSE: &str = fixture!("ollama_text.sse");
const VLLM_TOOLS_JSON: &str = fixture!("vllm_parallel_tool_calls.json");
const VLLM_TOOL_SSE: &str = fixture!("vllm_tool_call_reasoning.sse");
const VLLM_400: &str = fixture!("vllm_error_400.json");
const LLAMA_PY_TOOL_JSON: &str = fixture!("llama_cpp_python_tool_call.json");
const LLAMA_PY_TEXT_JSON: &str = fixture!("llama_cpp_python_text.json");
const LLAMA_PY_TOOL_SSE: &str = fixture!("llama_cpp_python_tool_call.sse");
const LLAMA_PY_TEXT_SSE: &str = fixture!("llama_cpp_python_text.sse");
const LLAMA_PY_500: &str = fixture!("llama_cpp_python_error_500.json");
const LLAMA_PY_400: &str = fixture!("llama_cpp_python_error_400_context.json");
const LLAMA_SERVER_SSE: &str = fixture!("llama_server_text_reasoning.sse");

const INSTRUCTIONS: &str = "You check services.";
const QUESTION: &str = "Are api and db up?";
/// The argument text of the llama-cpp-python recording (a 135M model's guess).
const LLAMA_PY_ARGUMENTS: &str =
    r#"{"service": "https://api.example.com/v2:1008345679-BAD_API_VERSION"}"#;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("a fixture is JSON")
}

/// The `data` of each event of an SSE text, as a server-sent-events parser hands them out
/// (comments skipped; an unfinished last event is dropped).
fn sse_data(text: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    events
}

/// A stream's deltas and its response, through the pure assembler.
fn assemble(text: &str) -> (Vec<ModelDelta>, Result<ModelResponse, ModelError>) {
    let mut assembler = StreamAssembler::new();
    let mut deltas = Vec::new();
    for data in sse_data(text) {
        match assembler.push(&data) {
            Ok(more) => deltas.extend(more),
            Err(e) => return (deltas, Err(e)),
        }
    }
    (deltas, assembler.finish())
}

/// The text deltas joined, and each call's (id, name, arguments) as its deltas tell them.
fn from_deltas(deltas: &[ModelDelta]) -> (String, BTreeMap<usize, (String, String, String)>) {
    let mut text = String::new();
    let mut calls: BTreeMap<usize, (String, String, String)> = BTreeMap::new();
    for delta in deltas {
        match delta {
            ModelDelta::Text { text: piece } => text.push_str(piece),
            ModelDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let call = calls.entry(*index).or_default();
                if let Some(id) = id {
                    assert!(call.0.is_empty(), "the id of call {index} came twice");
                    call.0 = id.clone();
                }
                if let Some(name) = name {
                    call.1.push_str(name);
                }
                call.2.push_str(arguments);
            }
            other => panic!("unexpected delta {other:?}"),
        }
    }
    (text, calls)
}

// Server.

async fn mock_server(responses: Vec<ResponseTemplate>) -> MockServer {
    scripted_server("/v1/chat/completions", responses).await
}

fn model(server: &MockServer) -> OpenAi {
    OpenAi::new("gpt-4.1")
        .api_key("test-key")
        .expect("a key")
        .base_url(format!("{}/v1", server.uri()))
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct StatusInput {
    /// The service to check.
    service: String,
}

/// `get_status`: healthy, except `db` when `db_down`. `api` answers last (it sleeps), so that
/// with concurrent calls the results finish out of call order.
fn status_tool(db_down: bool) -> Tool {
    Tool::typed(
        "get_status",
        "Get the current status of a service",
        move |input: StatusInput, _ctx: ToolContext| async move {
            if input.service == "api" {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            if db_down && input.service == "db" {
                Err(format!("{} is unreachable", input.service))
            } else {
                Ok(json!({"service": input.service, "status": "healthy"}))
            }
        },
    )
}

fn agent_with(model: OpenAi, db_down: bool) -> Agent {
    Agent::builder("ops")
        .instructions(INSTRUCTIONS)
        .model(model)
        .tool(status_tool(db_down))
        .tool_concurrency(2)
        .model_retries(fast_retries())
        .build()
        .expect("agent")
}

fn agent(server: &MockServer) -> Agent {
    agent_with(model(server), false)
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    requests(server)
        .await
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON request"))
        .collect()
}

/// The `get_status` tool as the model sees it.
fn status_tool_json() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "get_status",
            "description": "Get the current status of a service",
            "parameters": {
                "type": "object",
                "properties": {"service": {"type": "string", "description": "The service to check."}},
                "required": ["service"]
            }
        }
    })
}

/// The messages of the second request of a run whose first turn called `get_status` for api and
/// db with these ids and argument texts.
fn second_turn_messages(calls: [(&str, &str); 2], db_result: &str) -> Value {
    let call = |(id, arguments): (&str, &str)| json!({"id": id, "type": "function", "function": {"name": "get_status", "arguments": arguments}});
    json!([
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": "", "tool_calls": [call(calls[0]), call(calls[1])]},
        {"role": "tool", "tool_call_id": calls[0].0, "content": r#"{"service":"api","status":"healthy"}"#},
        {"role": "tool", "tool_call_id": calls[1].0, "content": db_result},
    ])
}

// Whole tool runs through an agent.

#[tokio::test]
async fn a_two_turn_tool_run_sends_the_exact_requests() {
    let server = mock_server(vec![json_ok(OPENAI_TOOLS_JSON), json_ok(OPENAI_TEXT_JSON)]).await;
    let done = agent(&server).run(QUESTION).await.expect("run");
    assert_eq!(done.output(), Some("Both api and db are healthy."));
    assert_eq!(
        done.usage(),
        Usage::new(1245 + 1340, 52 + 11)
            .cached_input_tokens(1024 + 1280)
            .reasoning_output_tokens(0)
    );

    let requests = requests(&server).await;
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.headers["authorization"], "Bearer test-key");
        assert_eq!(request.headers["content-type"], "application/json");
    }
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[0],
        json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": QUESTION}
            ],
            "tools": [status_tool_json()],
            "tool_choice": "auto"
        })
    );
    // The assistant turn has `""` beside its calls, and the results come in call order (api
    // finished last) with their call ids.
    assert_eq!(
        bodies[1],
        json!({
            "model": "gpt-4.1",
            "messages": second_turn_messages(
                [("call_api_Zq8uVbX1", r#"{"service":"api"}"#), ("call_db_Kf3mN7pQ", r#"{"service":"db"}"#)],
                r#"{"service":"db","status":"healthy"}"#
            ),
            "tools": [status_tool_json()],
            "tool_choice": "auto"
        })
    );
}

#[tokio::test]
async fn a_failing_tool_result_reaches_the_model_as_an_error_with_its_call_id() {
    let server = mock_server(vec![json_ok(VLLM_TOOLS_JSON), json_ok(OPENAI_TEXT_JSON)]).await;
    let agent = agent_with(model(&server), true);
    agent.run(QUESTION).await.expect("run");
    let bodies = bodies(&server).await;
    // vLLM's argument text (with a space) is echoed as it came.
    assert_eq!(
        bodies[1]["messages"],
        second_turn_messages(
            [
                ("chatcmpl-tool-3b2a1c0d9e8f4a7b", r#"{"service": "api"}"#),
                ("chatcmpl-tool-7c6b5a4d3e2f1a0b", r#"{"service": "db"}"#)
            ],
            r#"{"error":"db is unreachable"}"#
        )
    );
}

#[tokio::test]
async fn llama_cpp_python_gets_empty_content_beside_tool_calls() {
    // Real recordings: a call with an id like `call__0_get_status_cmpl-…`, `content: null` and a
    // legacy `function_call` beside it; then text.
    let server = mock_server(vec![
        json_ok(LLAMA_PY_TOOL_JSON),
        json_ok(LLAMA_PY_TEXT_JSON),
    ])
    .await;
    let done = agent(&server).run(QUESTION).await.expect("run");
    assert_eq!(done.output(), Some("The API service is currently down."));
    let bodies = bodies(&server).await;
    let assistant = &bodies[1]["messages"][2];
    assert_eq!(
        assistant,
        &json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": "call__0_get_status_cmpl-dffdc81d-9398-4138-a2a4-303a50c1b558",
            "type": "function",
            "function": {"name": "get_status", "arguments": LLAMA_PY_ARGUMENTS}
        }]})
    );
    assert_eq!(
        bodies[1]["messages"][3]["tool_call_id"],
        "call__0_get_status_cmpl-dffdc81d-9398-4138-a2a4-303a50c1b558"
    );
}

#[tokio::test]
async fn settings_reach_the_wire() {
    let server = mock_server(vec![json_ok(OPENAI_TEXT_JSON)]).await;
    let model = model(&server)
        .header("HTTP-Referer", "https://example.com")
        .and_then(|m| m.header("X-Title", "Ops agent"))
        .and_then(|m| m.header("Authorization", "Bearer other-key"))
        .and_then(|m| m.header("Content-Type", "application/json; charset=utf-8"))
        .expect("headers")
        .send_metadata(true);
    let agent = Agent::builder("ops")
        .model(model)
        .model_name("openai/gpt-4.1")
        .build()
        .expect("agent");
    agent.run("Hi").run_id("run-42").await.expect("run");
    let requests = requests(&server).await;
    assert_eq!(requests[0].headers["http-referer"], "https://example.com");
    assert_eq!(requests[0].headers["x-title"], "Ops agent");
    // A configured header replaces a built-in one of the same name.
    let values = |name: &str| requests[0].headers.get_all(name).iter().count();
    assert_eq!((values("authorization"), values("content-type")), (1, 1));
    assert_eq!(requests[0].headers["authorization"], "Bearer other-key");
    assert_eq!(
        requests[0].headers["content-type"],
        "application/json; charset=utf-8"
    );
    let body: Value = serde_json::from_slice(&requests[0].body).expect("JSON");
    // No instructions: no system message. No tools: no tool fields. The agent's model name wins.
    assert_eq!(
        body,
        json!({
            "model": "openai/gpt-4.1",
            "messages": [{"role": "user", "content": "Hi"}],
            "user": "ops/run-42"
        })
    );
}

// Streamed tool runs.

/// Runs `agent` streamed; returns its events' deltas and the run's output.
async fn stream_run(agent: &Agent) -> (Vec<ModelDelta>, Vec<Event>, String) {
    let events: Vec<Event> = agent.run(QUESTION).stream().collect().await;
    let deltas = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelDelta { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect();
    let output = match events.last() {
        Some(Event::Completed { output, .. }) => output.clone(),
        other => panic!("the run did not complete: {other:?}"),
    };
    (deltas, events, output)
}

#[tokio::test]
async fn a_streamed_two_turn_tool_run_sends_deltas_and_the_exact_requests() {
    let server = mock_server(vec![sse_ok(OPENAI_TOOLS_SSE), sse_ok(OPENAI_TEXT_SSE)]).await;
    let (deltas, events, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "Both api and db are healthy.");
    let (text, calls) = from_deltas(&deltas);
    assert_eq!(text, output, "the text deltas make the final text");
    assert_eq!(
        calls,
        BTreeMap::from([
            (
                0,
                (
                    "call_api_Zq8uVbX1".into(),
                    "get_status".into(),
                    r#"{"service":"api"}"#.into()
                )
            ),
            (
                1,
                (
                    "call_db_Kf3mN7pQ".into(),
                    "get_status".into(),
                    r#"{"service":"db"}"#.into()
                )
            ),
        ])
    );
    // The usage chunk at the end of each stream.
    let usages: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelTurn {
                usage,
                finish_reason,
                ..
            } => Some((*usage, finish_reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(usages[0].0.map(|u| u.cached_input_tokens), Some(Some(1024)));
    assert_eq!(usages[0].1, Some(FinishReason::ToolCalls));
    assert_eq!(usages[1].0.map(|u| u.output_tokens), Some(11));

    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[0],
        json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": QUESTION}
            ],
            "tools": [status_tool_json()],
            "tool_choice": "auto",
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
    assert_eq!(
        bodies[1]["messages"],
        second_turn_messages(
            [
                ("call_api_Zq8uVbX1", r#"{"service":"api"}"#),
                ("call_db_Kf3mN7pQ", r#"{"service":"db"}"#)
            ],
            r#"{"service":"db","status":"healthy"}"#
        )
    );
    assert_eq!(bodies[1]["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn a_streamed_run_on_llama_cpp_python_keeps_one_name_per_call() {
    // Real recordings: the id and name repeated in every delta, a legacy `function_call` beside.
    let server = mock_server(vec![sse_ok(LLAMA_PY_TOOL_SSE), sse_ok(LLAMA_PY_TEXT_SSE)]).await;
    let (deltas, events, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "The API service is currently down.");
    let (text, calls) = from_deltas(&deltas);
    assert_eq!(text, output);
    let id = "call__0_get_status_cmpl-7b75699f-7ef0-497a-83f7-a61f1b12b4c5";
    assert_eq!(
        calls,
        BTreeMap::from([(
            0,
            (id.into(), "get_status".into(), LLAMA_PY_ARGUMENTS.into())
        )])
    );
    let called: Vec<&ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCalled { call, .. } => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(
        called,
        [&ToolCall::raw(id, "get_status", LLAMA_PY_ARGUMENTS)]
    );
    let bodies = bodies(&server).await;
    assert_eq!(bodies[1]["messages"][2]["content"], "");
    assert_eq!(bodies[1]["messages"][3]["tool_call_id"], id);
}

#[tokio::test]
async fn a_streamed_run_on_ollama_reads_whole_calls_and_skips_reasoning() {
    let server = mock_server(vec![sse_ok(OLLAMA_TOOLS_SSE), sse_ok(OLLAMA_TEXT_SSE)]).await;
    let (deltas, _, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "Both api and db are healthy.");
    let (text, calls) = from_deltas(&deltas);
    assert_eq!(text, output, "reasoning is not text");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[&1].0, "call_e5f6g7h8");
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[1]["messages"],
        second_turn_messages(
            [
                ("call_a1b2c3d4", r#"{"service":"api"}"#),
                ("call_e5f6g7h8", r#"{"service":"db"}"#)
            ],
            r#"{"service":"db","status":"healthy"}"#
        )
    );
}

#[tokio::test]
async fn a_streamed_run_on_openrouter_skips_comments() {
    let server = mock_server(vec![sse_ok(OPENROUTER_TOOL_SSE), sse_ok(OPENAI_TEXT_SSE)]).await;
    let (deltas, _, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "Both api and db are healthy.");
    let (_, calls) = from_deltas(&deltas);
    assert_eq!(
        calls[&0],
        (
            "call_Hk2mQ9xLp0aB".into(),
            "get_status".into(),
            r#"{"service":"api"}"#.into()
        )
    );
}

// Errors and retries.

#[tokio::test]
async fn errors_that_fail_the_same_way_again_are_not_retried() {
    for (status, body, kind, message) in [
        (
            400,
            OPENAI_400,
            ModelErrorKind::BadRequest,
            "Invalid schema for function 'get_status'",
        ),
        (
            401,
            OPENAI_401,
            ModelErrorKind::Authentication,
            "Incorrect API key provided",
        ),
        (
            400,
            LLAMA_PY_400,
            ModelErrorKind::ContextTooLong,
            "maximum context length is 4096 tokens",
        ),
        (
            400,
            VLLM_400,
            ModelErrorKind::BadRequest,
            "\"auto\" tool choice requires --enable-auto-tool-choice",
        ),
    ] {
        let server = mock_server(vec![error(status, body), json_ok(OPENAI_TEXT_JSON)]).await;
        let failed = agent(&server).run(QUESTION).await.unwrap_err();
        let error = model_error(&failed.error);
        assert_eq!(error.kind, kind, "{error}");
        assert_eq!(error.status, Some(status));
        assert!(error.message.contains(message), "{error}");
        assert_eq!(requests(&server).await.len(), 1, "{kind} was retried");
    }
}

#[tokio::test]
async fn a_rate_limited_request_is_retried_after_the_wait_the_server_asked_for() {
    let limited = error(429, OPENAI_429).insert_header("retry-after-ms", "25");
    let server = mock_server(vec![limited, sse_ok(OPENAI_TEXT_SSE)]).await;
    let events: Vec<Event> = agent(&server).run(QUESTION).stream().collect().await;
    let retry = events
        .iter()
        .find_map(|e| match e {
            Event::ModelRetry {
                attempt,
                delay_ms,
                error,
                ..
            } => Some((*attempt, *delay_ms, error.clone())),
            _ => None,
        })
        .expect("a model.retry event");
    assert_eq!((retry.0, retry.1), (1, 25));
    assert!(
        retry
            .2
            .starts_with("rate_limited (HTTP 429): Rate limit reached for gpt-4.1"),
        "{}",
        retry.2
    );
    assert!(
        matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Both api and db are healthy.")
    );
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn retry_after_in_seconds_is_read() {
    let limited = error(429, OPENAI_429).insert_header("retry-after", "2");
    let server = mock_server(vec![limited]).await;
    let request = request().messages(vec![Message::User {
        content: "Hi".into(),
    }]);
    let error = model(&server).respond(&request).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::RateLimited);
    assert_eq!(error.retry_after, Some(Duration::from_secs(2)));
}

#[tokio::test]
async fn server_failures_are_retried() {
    let server = mock_server(vec![
        error(500, OPENAI_500),
        error(503, OPENAI_503),
        error(500, LLAMA_PY_500),
        sse_ok(OPENAI_TEXT_SSE),
    ])
    .await;
    let events: Vec<Event> = agent(&server).run(QUESTION).stream().collect().await;
    let retries: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRetry { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 3);
    assert!(
        retries[0].starts_with("overloaded (HTTP 500): The server had an error"),
        "{}",
        retries[0]
    );
    assert!(retries[1].starts_with("overloaded (HTTP 503): The engine is currently overloaded"));
    // llama-cpp-python's validation error (its answer to `content: null`) is read as it is.
    assert!(retries[2].contains("Input should be a valid string"));
    assert!(matches!(events.last(), Some(Event::Completed { .. })));
}

#[tokio::test]
async fn an_error_in_a_successful_response_is_an_error() {
    // OpenRouter: HTTP 200, `{"error": {"code": 502, ...}}`: the code is the status, so retried.
    let server = mock_server(vec![
        json_ok(OPENROUTER_ERROR_200),
        json_ok(OPENAI_TEXT_JSON),
    ])
    .await;
    let events: Vec<Event> = agent(&server).run(QUESTION).stream().collect().await;
    let retry = events.iter().find_map(|e| match e {
        Event::ModelRetry { error, .. } => Some(error.clone()),
        _ => None,
    });
    assert_eq!(
        retry.as_deref(),
        Some("overloaded (HTTP 502): Provider returned error")
    );
    assert!(matches!(events.last(), Some(Event::Completed { .. })));

    // Whole, without retries.
    let server = mock_server(vec![json_ok(OPENROUTER_ERROR_200)]).await;
    let agent = Agent::builder("ops")
        .model(model(&server))
        .model_retries(RetryPolicy::none())
        .build()
        .expect("agent");
    let failed = agent.run(QUESTION).await.unwrap_err();
    assert_eq!(model_error(&failed.error).kind, ModelErrorKind::Overloaded);
}

#[tokio::test]
async fn errors_inside_a_stream_are_errors_and_retried() {
    // OpenAI's `data: {"error": ...}`, OpenRouter's `finish_reason: "error"` chunk, and a stream
    // cut mid-way: all three retried, then the answer.
    let server = mock_server(vec![
        sse_ok(OPENAI_MIDSTREAM_SSE),
        sse_ok(OPENROUTER_MIDSTREAM_SSE),
        sse_ok(OPENAI_CUT_SSE),
        sse_ok(OPENAI_TEXT_SSE),
    ])
    .await;
    let (_, events, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "Both api and db are healthy.");
    let retries: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRetry { error, .. } => Some(error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries[..2],
        [
            "overloaded: server_error: The server had an error while processing your request. \
             Sorry about that!",
            "overloaded: server_error: Provider disconnected unexpectedly",
        ]
    );
    assert!(
        retries[2].starts_with("transport: the response stream ended before it was complete"),
        "{}",
        retries[2]
    );
}

#[tokio::test]
async fn a_malformed_chunk_is_an_invalid_response() {
    let body = "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
                data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"cont\n\n";
    let server = mock_server(vec![sse_ok(body)]).await;
    let failed = agent(&server)
        .run(QUESTION)
        .stream()
        .collect::<Vec<_>>()
        .await;
    let Some(Event::Failed { error, .. }) = failed.last() else {
        panic!("the run did not fail");
    };
    assert!(error.starts_with("model error: invalid_response: chunk 2 of the stream is not JSON"));
}

#[tokio::test]
async fn a_request_that_takes_too_long_times_out() {
    let slow = json_ok(OPENAI_TEXT_JSON).set_delay(Duration::from_secs(5));
    let server = mock_server(vec![slow]).await;
    let model = model(&server).timeout(Duration::from_millis(100));
    let error = model.respond(&user_request()).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Timeout, "{error}");
}

#[tokio::test]
async fn local_failures_are_not_sent_or_retried() {
    // No key for OpenAI's own URL: nothing is sent.
    let error = OpenAi::new("gpt-4.1")
        .respond(&user_request())
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Authentication);
    assert!(error.message.contains("OPENAI_API_KEY"), "{error}");
    // A base URL that is not an HTTP address: a bad request, not a transport failure to retry.
    // (A header HTTP does not allow is refused by `header` itself: see `provider_http`.)
    for url in ["localhost:11434/v1", "not a url", "ftp://localhost/v1"] {
        let error = OpenAi::new("m")
            .base_url(url)
            .respond(&user_request())
            .await
            .unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::BadRequest, "{url}: {error}");
        assert!(error.message.contains("base_url"), "{url}: {error}");
    }
}

// Requests, directly.

fn request() -> ModelRequest<'static> {
    ModelRequest::default()
        .instructions(String::new())
        .messages(Vec::new())
        .tools(Vec::new())
        .tool_choice(ToolChoice::Auto)
        .meta(RequestMeta::default())
}

fn user_request() -> ModelRequest<'static> {
    request().messages(vec![Message::User {
        content: "Hi".into(),
    }])
}

fn tool_definition(name: &str, strict: bool) -> ToolDefinition {
    ToolDefinition::new(
        name,
        String::new(),
        json!({
            "type": "object",
            "properties": {"service": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["service"]
        }),
    )
    .strict(strict)
}

#[test]
fn tool_choice_and_parallel_calls_are_sent_with_tools_only() {
    let local = OpenAi::new("m").base_url("http://localhost:8080/v1");
    let body = |request: &ModelRequest| request_body(request, &local, false).expect("a body");
    let with_tools = request()
        .tools(vec![tool_definition("get_status", false)])
        .parallel_tool_calls(false);
    for (choice, wire) in [
        (ToolChoice::Auto, json!("auto")),
        (ToolChoice::None, json!("none")),
        // One tool offered: "required" is that tool.
        (
            ToolChoice::Required,
            json!({"type": "function", "function": {"name": "get_status"}}),
        ),
        (
            ToolChoice::Tool("get_status".into()),
            json!({"type": "function", "function": {"name": "get_status"}}),
        ),
    ] {
        let sent = body(&with_tools.clone().tool_choice(choice));
        assert_eq!(sent["tool_choice"], wire);
        assert_eq!(sent["parallel_tool_calls"], false);
        // A tool without a description has none on the wire.
        assert_eq!(sent["tools"][0]["function"].get("description"), None);
    }
    let two_tools = request()
        .tools(vec![
            tool_definition("get_status", false),
            tool_definition("deploy", false),
        ])
        .tool_choice(ToolChoice::Required);
    assert_eq!(body(&two_tools)["tool_choice"], "required");
    let without_tools = body(
        &request()
            .parallel_tool_calls(true)
            .tool_choice(ToolChoice::None),
    );
    for key in ["tools", "tool_choice", "parallel_tool_calls"] {
        assert_eq!(without_tools.get(key), None, "{key}");
    }
    // A choice that needs a tool that is not offered is refused before sending.
    for choice in [ToolChoice::Required, ToolChoice::Tool("deploy".into())] {
        let tools = if matches!(choice, ToolChoice::Tool(_)) {
            with_tools.tools.clone()
        } else {
            Vec::new().into()
        };
        let error =
            request_body(&request().tool_choice(choice).tools(tools), &local, false).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::BadRequest, "{error}");
    }
}

#[test]
fn the_max_tokens_field_follows_the_base_url_unless_set() {
    let limited = user_request().max_output_tokens(300).temperature(0.7);
    let openai = request_body(&limited, &OpenAi::new("gpt-4.1"), false).expect("body");
    assert_eq!(openai["max_completion_tokens"], 300);
    assert_eq!(openai.get("max_tokens"), None);
    assert_eq!(openai["temperature"], json!(0.7));
    let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1");
    let body = request_body(&limited, &ollama, false).expect("body");
    assert_eq!(body["max_tokens"], 300);
    assert_eq!(body.get("max_completion_tokens"), None);
    let vllm = ollama.max_tokens_field(MaxTokensField::MaxCompletionTokens);
    assert_eq!(
        request_body(&limited, &vllm, false).expect("body")["max_completion_tokens"],
        300
    );
    let legacy = OpenAi::new("gpt-4o").max_tokens_field(MaxTokensField::MaxTokens);
    assert_eq!(
        request_body(&limited, &legacy, false).expect("body")["max_tokens"],
        300
    );
}

#[test]
fn a_strict_tool_is_sent_in_the_strict_dialect() {
    let request = user_request().tools(vec![
        tool_definition("get_status", true),
        tool_definition("loose", false),
    ]);
    let body = request_body(&request, &OpenAi::new("gpt-4.1"), false).expect("body");
    assert_eq!(
        body["tools"][0]["function"],
        json!({
            "name": "get_status",
            "parameters": {
                "type": "object",
                "properties": {"service": {"type": "string"}, "verbose": {"type": ["boolean", "null"]}},
                "required": ["service", "verbose"],
                "additionalProperties": false
            },
            "strict": true
        })
    );
    assert_eq!(
        body["tools"][1]["function"],
        json!({"name": "loose", "parameters": tool_definition("loose", false).parameters})
    );
    // A strict tool whose schema the dialect cannot express (a map) goes as a plain one.
    let mut map = tool_definition("labels", true);
    map.parameters = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let body = request_body(
        &user_request().tools(vec![map.clone()]),
        &OpenAi::new("gpt-4.1"),
        false,
    )
    .expect("body");
    assert_eq!(
        body["tools"][0]["function"],
        json!({"name": "labels", "parameters": map.parameters})
    );
}

#[test]
fn requests_are_refused_before_sending_when_they_cannot_be_right() {
    let no_model = request_body(&user_request(), &OpenAi::new(""), false).unwrap_err();
    assert_eq!(no_model.kind, ModelErrorKind::BadRequest);
    // A model name in the request wins over the configured one.
    let named = user_request().model("gpt-4.1-mini");
    assert_eq!(
        request_body(&named, &OpenAi::new(""), false).expect("body")["model"],
        "gpt-4.1-mini"
    );
    let nan = user_request().temperature(f32::NAN);
    let error = request_body(&nan, &OpenAi::new("m"), false).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::BadRequest);
}

#[test]
fn the_conversation_maps_to_messages() {
    let request = request().instructions("Be brief.").messages(vec![
        Message::User {
            content: "Hello".into(),
        },
        Message::Assistant {
            content: Some("Checking.".into()),
            tool_calls: vec![ToolCall::raw("c1", "get_status", "")],
        },
        Message::Tool {
            call_id: "c1".into(),
            name: "get_status".into(),
            content: "{\"error\":\"Invalid tool input: $: missing service\"}".into(),
        },
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall::raw("c2", "get_status", "{not json")],
        },
        Message::Tool {
            call_id: "c2".into(),
            name: "get_status".into(),
            content: "{}".into(),
        },
        Message::Assistant {
            content: Some("Done.".into()),
            tool_calls: vec![],
        },
    ]);
    let body = request_body(&request, &OpenAi::new("m"), false).expect("body");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                // Blank arguments are sent as `{}`.
                {"id": "c1", "type": "function", "function": {"name": "get_status", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"error\":\"Invalid tool input: $: missing service\"}"},
            {"role": "assistant", "content": "", "tool_calls": [
                // Malformed text is echoed as it came.
                {"id": "c2", "type": "function", "function": {"name": "get_status", "arguments": "{not json"}}
            ]},
            {"role": "tool", "tool_call_id": "c2", "content": "{}"},
            {"role": "assistant", "content": "Done."}
        ])
    );
}

#[test]
fn the_api_key_is_not_printed() {
    let model = OpenAi::new("gpt-4.1")
        .api_key("sk-secret-123")
        .and_then(|m| m.header("api-key", "azure-secret"))
        .expect("settings");
    let printed = format!("{model:?}");
    assert!(!printed.contains("secret"), "{printed}");
    assert!(printed.contains("gpt-4.1"));
}

// Responses, directly.

#[test]
fn whole_responses_of_each_server_parse() {
    let openai = parse_response(&json(OPENAI_TOOLS_JSON)).expect("openai");
    assert_eq!(openai.model.as_deref(), Some("gpt-4.1-2025-04-14"));
    assert_eq!(openai.text, None);
    assert_eq!(
        openai.tool_calls,
        [
            ToolCall::raw("call_api_Zq8uVbX1", "get_status", r#"{"service":"api"}"#),
            ToolCall::raw("call_db_Kf3mN7pQ", "get_status", r#"{"service":"db"}"#),
        ]
    );
    assert_eq!(openai.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        openai.usage,
        Some(
            Usage::new(1245, 52)
                .cached_input_tokens(1024)
                .reasoning_output_tokens(0)
        )
    );
    assert_eq!(
        openai.id.as_deref(),
        Some("chatcmpl-CLq4ObS6hWc1oE9wdbN1rKpy8Jx5v")
    );

    // OpenRouter: `content: ""` beside the call, reasoning and cost fields skipped.
    let openrouter = parse_response(&json(OPENROUTER_TOOL_JSON)).expect("openrouter");
    assert_eq!(openrouter.text, None);
    assert_eq!(
        openrouter.tool_calls,
        [ToolCall::raw(
            "tool_0_get_status_Rk8s1Jx2",
            "get_status",
            r#"{"service":"api"}"#
        )]
    );
    assert_eq!(
        openrouter.usage.map(|u| u.cached_input_tokens),
        Some(Some(0))
    );

    // Ollama: `content: ""` and `reasoning`.
    let ollama = parse_response(&json(OLLAMA_TOOL_JSON)).expect("ollama");
    assert_eq!(ollama.text, None);
    assert_eq!(ollama.tool_calls[0].id, "call_k2v9q1xz");
    assert_eq!(ollama.usage, Some(Usage::new(164, 58)));

    // vLLM: `reasoning_content: null`, `prompt_tokens_details: null`.
    let vllm = parse_response(&json(VLLM_TOOLS_JSON)).expect("vllm");
    assert_eq!(vllm.tool_calls.len(), 2);
    assert_eq!(vllm.usage.map(|u| u.cached_input_tokens), Some(None));

    // llama-cpp-python: the `tool_calls` win over the legacy `function_call` (whose name it
    // wrote `get_status:` in another recording).
    let llama = parse_response(&json(LLAMA_PY_TOOL_JSON)).expect("llama-cpp-python");
    assert_eq!(llama.tool_calls.len(), 1);
    assert_eq!(llama.tool_calls[0].name, "get_status");
    assert_eq!(llama.tool_calls[0].arguments, LLAMA_PY_ARGUMENTS);
    let text = parse_response(&json(LLAMA_PY_TEXT_JSON)).expect("llama-cpp-python text");
    assert_eq!(
        text.text.as_deref(),
        Some("The API service is currently down.")
    );
    assert_eq!(text.finish_reason, Some(FinishReason::Stop));
}

#[test]
fn responses_tolerate_what_servers_vary_in() {
    let one = |message: Value, finish: Value| {
        parse_response(
            &json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}]}),
        )
    };
    // Arguments as an object (some servers) are serialised; a missing id stays empty.
    let response = one(
        json!({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_status", "arguments": {"service": "api"}}}
        ]}),
        json!("tool_calls"),
    )
    .expect("object arguments");
    assert_eq!(
        response.tool_calls,
        [ToolCall::raw("", "get_status", r#"{"service":"api"}"#)]
    );
    // The legacy `function_call` alone.
    let response = one(
        json!({"role": "assistant", "content": null, "function_call": {"name": "get_status", "arguments": "{}"}}),
        json!("function_call"),
    )
    .expect("function_call");
    assert_eq!(response.tool_calls, [ToolCall::raw("", "get_status", "{}")]);
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    // Content as parts; a refusal as the text.
    let parts = one(
        json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        json!("stop"),
    )
    .expect("parts");
    assert_eq!(parts.text.as_deref(), Some("ab"));
    let refusal = one(
        json!({"role": "assistant", "content": null, "refusal": "I can't help with that."}),
        json!("stop"),
    )
    .expect("refusal");
    assert_eq!(refusal.text.as_deref(), Some("I can't help with that."));
    // Finish reasons.
    for (wire, reason) in [
        (json!("stop"), Some(FinishReason::Stop)),
        (json!("length"), Some(FinishReason::Length)),
        (json!("content_filter"), Some(FinishReason::ContentFilter)),
        (json!("eos"), Some(FinishReason::Other("eos".into()))),
        (json!(null), None),
    ] {
        let response = one(json!({"role": "assistant", "content": "x"}), wire).expect("response");
        assert_eq!(response.finish_reason, reason);
    }
    // Unreadable bodies.
    for body in [
        json!({"object": "chat.completion"}),
        json!({"choices": []}),
        json!({"choices": [{"index": 0, "message": "text"}]}),
        json!({"choices": [{"index": 0, "message": {"content": 5}}]}),
        json!({"choices": [{"index": 0, "message": {"tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}}]}),
        json!({"choices": [{"index": 0, "message": {"tool_calls": {"id": "c"}}}]}),
    ] {
        let error = parse_response(&body).unwrap_err();
        assert_eq!(
            error.kind,
            ModelErrorKind::InvalidResponse,
            "{body}: {error}"
        );
    }
}

#[test]
fn errors_in_bodies_are_errors() {
    let error = parse_response(&json(OPENROUTER_ERROR_200)).unwrap_err();
    assert_eq!(
        (error.kind, error.status),
        (ModelErrorKind::Overloaded, Some(502))
    );
    let error = parse_response(&json(OPENAI_500)).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Overloaded);
    assert_eq!(error.status, None, "the HTTP response itself succeeded");
    let error = parse_response(&json(OPENAI_429)).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::RateLimited);
    let error = parse_response(&json(LLAMA_PY_400)).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::ContextTooLong);
    let error = parse_response(&json(VLLM_400)).unwrap_err();
    assert_eq!(
        (error.kind, error.status),
        (ModelErrorKind::BadRequest, Some(400))
    );
    let error = parse_response(&json!({"error": "model not found"})).unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Other);
}

// Streams, directly.

#[test]
fn streams_of_each_server_assemble() {
    // OpenAI: ids in the first delta of each call only; the usage chunk last.
    let (deltas, response) = assemble(OPENAI_TOOLS_SSE);
    let response = response.expect("openai");
    // The model that answered, from the first chunk that names it.
    assert_eq!(response.model.as_deref(), Some("gpt-4.1-2025-04-14"));
    assert_eq!(
        response,
        parse_response(&json(OPENAI_TOOLS_JSON))
            .map(|r| r.id("chatcmpl-CLq5A1bCdEfGhIjKlMnOpQrStUvWx"))
            .expect("whole")
    );
    assert_eq!(deltas.len(), 12);
    assert_eq!(
        deltas[0],
        ModelDelta::ToolCall {
            index: 0,
            id: Some("call_api_Zq8uVbX1".into()),
            name: Some("get_status".into()),
            arguments: String::new()
        }
    );
    assert_eq!(
        deltas[1],
        ModelDelta::ToolCall {
            index: 0,
            id: None,
            name: None,
            arguments: "{\"".into()
        }
    );

    // llama-cpp-python (recorded): id and name repeated in every delta, `function_call` beside;
    // no usage in the stream.
    let (deltas, response) = assemble(LLAMA_PY_TOOL_SSE);
    let response = response.expect("llama-cpp-python");
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "get_status");
    assert_eq!(response.tool_calls[0].arguments, LLAMA_PY_ARGUMENTS);
    assert_eq!(response.usage, None);
    let names = deltas
        .iter()
        .filter(|d| matches!(d, ModelDelta::ToolCall { name: Some(_), .. }))
        .count();
    assert_eq!(names, 1, "the repeated name is not repeated in the deltas");

    // vLLM: reasoning deltas skipped, id and name without arguments first.
    let (deltas, response) = assemble(VLLM_TOOL_SSE);
    let response = response.expect("vllm");
    assert_eq!(response.text, None);
    assert_eq!(
        response.tool_calls,
        [ToolCall::raw(
            "chatcmpl-tool-9d8c7b6a5f4e3d2c",
            "get_status",
            r#"{"service": "api"}"#
        )]
    );
    assert_eq!(response.usage.map(|u| u.input_tokens), Some(201));
    assert_eq!(deltas.len(), 4);

    // Ollama: each call whole in one chunk.
    let (deltas, response) = assemble(OLLAMA_TOOLS_SSE);
    assert_eq!(deltas.len(), 2);
    assert_eq!(response.expect("ollama").tool_calls.len(), 2);

    // llama.cpp's server: `reasoning_content`, and the usage beside the finish reason.
    let (deltas, response) = assemble(LLAMA_SERVER_SSE);
    let response = response.expect("llama-server");
    let (text, _) = from_deltas(&deltas);
    assert_eq!(response.text.as_deref(), Some(text.as_str()));
    assert_eq!(text, "Both api and db are healthy.");
    assert_eq!(response.usage, Some(Usage::new(312, 21)));
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));

    // OpenRouter: comments skipped; a usage chunk after the finish reason keeps it.
    let (_, response) = assemble(OPENROUTER_TOOL_SSE);
    let response = response.expect("openrouter");
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage.map(|u| u.input_tokens), Some(88));
}

#[test]
fn stream_errors() {
    let (deltas, response) = assemble(OPENAI_CUT_SSE);
    assert_eq!(deltas.len(), 9);
    let error = response.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Transport);
    assert!(
        error.message.contains("no `finish_reason` and no `[DONE]`"),
        "{error}"
    );

    let (deltas, response) = assemble(OPENAI_MIDSTREAM_SSE);
    assert_eq!(from_deltas(&deltas).0, "The api service");
    assert_eq!(response.unwrap_err().kind, ModelErrorKind::Overloaded);

    let (_, response) = assemble(OPENROUTER_MIDSTREAM_SSE);
    assert_eq!(response.unwrap_err().kind, ModelErrorKind::Overloaded);

    let mut assembler = StreamAssembler::new();
    for (data, what) in [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        (r#"{"choices": {"index": 0}}"#, "`choices`"),
        (r#"{"choices": [{"index": 0, "delta": "x"}]}"#, "`delta`"),
        (
            r#"{"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]}"#,
            "`delta.tool_calls`",
        ),
        (
            r#"{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "first"}]}}]}"#,
            "`index`",
        ),
    ] {
        let error = assembler.push(data).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidResponse, "{data}");
        assert!(error.message.contains(what), "{data}: {error}");
    }
}

#[test]
fn streams_without_ids_or_indexes_still_assemble() {
    let mut assembler = StreamAssembler::new();
    let chunks = [
        r#"{"choices":[{"delta":{"role":"assistant","content":"Checking"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"get_status","arguments":"{\"service\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"\"api\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"get_status","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"another choice, ignored"}}]}"#,
        "",
        "[DONE]",
        r#"{"choices":[{"delta":{"content":"after the end, ignored"}}]}"#,
    ];
    for data in chunks {
        assembler.push(data).expect("a chunk");
    }
    assert!(assembler.is_complete());
    let response = assembler.finish().expect("response");
    assert_eq!(response.text.as_deref(), Some("Checking"));
    assert_eq!(
        response.tool_calls,
        [
            ToolCall::raw("", "get_status", r#"{"service":"api"}"#),
            ToolCall::raw("b", "get_status", "{}"),
        ]
    );
    assert_eq!(
        response.finish_reason, None,
        "[DONE] without a finish reason"
    );

    // A call that never got a name.
    let mut assembler = StreamAssembler::new();
    assembler
        .push(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#)
        .expect("a chunk");
    assert_eq!(
        assembler.finish().unwrap_err().kind,
        ModelErrorKind::InvalidResponse
    );
}

#[tokio::test]
async fn respond_streaming_hands_out_deltas_as_they_come() {
    let server = mock_server(vec![sse_ok(OPENAI_TEXT_SSE)]).await;
    let seen = Mutex::new(Vec::new());
    let send = |delta: ModelDelta| seen.lock().expect("lock").push(delta);
    let sink = DeltaSink::new(&send);
    let response = model(&server)
        .respond_streaming(&user_request(), &sink)
        .await
        .expect("response");
    let seen = seen.into_inner().expect("lock");
    assert_eq!(seen.len(), 7);
    assert_eq!(from_deltas(&seen).0, "Both api and db are healthy.");
    assert_eq!(
        response.text.as_deref(),
        Some("Both api and db are healthy.")
    );
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
}

#[tokio::test]
async fn a_whole_answer_to_a_streamed_request_is_read_whole() {
    // A server that ignores `stream: true` and answers JSON.
    let server = mock_server(vec![json_ok(OPENAI_TOOLS_JSON), json_ok(OPENAI_TEXT_JSON)]).await;
    let (deltas, _, output) = stream_run(&agent(&server)).await;
    assert_eq!(output, "Both api and db are healthy.");
    let (text, calls) = from_deltas(&deltas);
    assert_eq!(text, output);
    assert_eq!(
        calls[&1],
        (
            "call_db_Kf3mN7pQ".into(),
            "get_status".into(),
            r#"{"service":"db"}"#.into()
        )
    );
    assert_eq!(bodies(&server).await[0]["stream"], true);
}

#[tokio::test]
async fn an_event_named_error_is_an_error() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
                event: error\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n";
    let plain = "event: error\ndata: upstream went away\n\n";
    let server = mock_server(vec![sse_ok(body), sse_ok(plain)]).await;
    let sink = DeltaSink::new(&|_| {});
    let model = model(&server);
    let error = model
        .respond_streaming(&user_request(), &sink)
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ModelErrorKind::Overloaded, "server_error: boom")
    );
    let error = model
        .respond_streaming(&user_request(), &sink)
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind, error.message.as_str()),
        (ModelErrorKind::Other, "upstream went away")
    );
}
