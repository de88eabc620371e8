//! The Anthropic Messages provider against an in-process HTTP server (wiremock): whole and
//! streamed tool runs through an `Agent`, the exact request JSON it sends, HTTP and in-stream
//! errors with the agent's retries; and the pure mapping functions on the same recorded bodies.
//!
//! The fixtures in `tests/fixtures/anthropic/` are written from Anthropic's documented wire
//! format:
//!
//! - Messages API reference, `POST /v1/messages` (request fields `model`, `max_tokens`, `system`,
//!   `messages`, `tools[].input_schema`, `tool_choice` with `disable_parallel_tool_use`,
//!   `metadata.user_id`, `stream`; the response's `content` blocks, `stop_reason`, `usage` with
//!   `cache_read_input_tokens`): https://docs.anthropic.com/en/api/messages
//! - Streaming Messages (the event flow `message_start`, `content_block_start`,
//!   `content_block_delta` with `text_delta` and `input_json_delta.partial_json`,
//!   `content_block_stop`, `message_delta`, `message_stop`; `ping`; `error` events such as
//!   `overloaded_error` mid-stream; "handle unknown event types gracefully"):
//!   https://platform.claude.com/docs/en/build-with-claude/streaming
//! - How to implement tool use (`tool_result` blocks with `tool_use_id`, `content`, `is_error`;
//!   all results of a turn in one user message, before any text; `tool_choice` `auto`/`any`/
//!   `tool`/`none`): https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use
//! - Errors (the `{"type": "error", "error": {"type", "message"}}` body; 400
//!   `invalid_request_error`, 401 `authentication_error`, 429 `rate_limit_error` with
//!   `retry-after`, 529 `overloaded_error`): https://docs.anthropic.com/en/api/errors

use std::sync::Mutex;

use futures::StreamExt;
use phaseo_agent::provider::anthropic::{Anthropic, StreamAssembler, parse_response, request_body};
use phaseo_agent::{
    Agent, DeltaSink, Event, FinishReason, Message, Model, ModelDelta, ModelError, ModelErrorKind,
    ModelRequest, ToolCall, ToolChoice, ToolContext, ToolDefinition, Usage,
};
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

use crate::support::wire::{
    error, fast_retries, json_ok, model_error, requests, scripted_server, sse_ok,
};

// Fixtures and server.

const TOOL_USE_JSON: &str = include_str!("../fixtures/anthropic/tool_use.json");
const END_TURN_JSON: &str = include_str!("../fixtures/anthropic/end_turn.json");
const PARALLEL_JSON: &str = include_str!("../fixtures/anthropic/parallel_tool_use.json");
const MAX_TOKENS_JSON: &str = include_str!("../fixtures/anthropic/max_tokens.json");
const ERROR_429: &str = include_str!("../fixtures/anthropic/error_429.json");
const ERROR_529: &str = include_str!("../fixtures/anthropic/error_529.json");
const ERROR_400: &str = include_str!("../fixtures/anthropic/error_400.json");
const ERROR_401: &str = include_str!("../fixtures/anthropic/error_401.json");
const TOOL_USE_SSE: &str = include_str!("../fixtures/anthropic/tool_use.sse");
const END_TURN_SSE: &str = include_str!("../fixtures/anthropic/end_turn.sse");
const THINKING_SSE: &str = include_str!("../fixtures/anthropic/thinking_no_input.sse");
const OVERLOADED_SSE: &str = include_str!("../fixtures/anthropic/error_overloaded.sse");
const CUT_SSE: &str = include_str!("../fixtures/anthropic/cut.sse");

const INSTRUCTIONS: &str = "You check services.";

async fn server(responses: Vec<ResponseTemplate>) -> MockServer {
    scripted_server("/v1/messages", responses).await
}

fn model(server: &MockServer) -> Anthropic {
    Anthropic::new("claude-sonnet-4-5")
        .api_key("test-key")
        .expect("a key")
        .base_url(server.uri())
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct StatusInput {
    /// The service to check.
    service: String,
}

/// `get_status`: healthy, except for the services in `down`, which fail.
fn status_tool(down: &'static [&'static str]) -> phaseo_agent::Tool {
    phaseo_agent::Tool::typed(
        "get_status",
        "Get the current status of a service",
        move |input: StatusInput, _ctx: ToolContext| async move {
            if down.contains(&input.service.as_str()) {
                Err(format!("{} is unreachable", input.service))
            } else {
                Ok(json!({"service": input.service, "status": "healthy"}))
            }
        },
    )
}

fn agent(server: &MockServer, down: &'static [&'static str]) -> Agent {
    Agent::builder("ops")
        .instructions(INSTRUCTIONS)
        .model(model(server))
        .tool(status_tool(down))
        .model_retries(fast_retries())
        .build()
        .expect("agent")
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    requests(server)
        .await
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON request body"))
        .collect()
}

fn healthy(service: &str) -> String {
    json!({"service": service, "status": "healthy"}).to_string()
}

fn simple_request(text: &str) -> ModelRequest<'static> {
    ModelRequest::default()
        .instructions(String::new())
        .messages(vec![Message::User {
            content: text.into(),
        }])
        .tools(Vec::new())
        .tool_choice(ToolChoice::Auto)
        .meta(Default::default())
}

/// Streams `request` from `model`, collecting the deltas.
async fn stream_model(
    model: &Anthropic,
    request: &ModelRequest<'_>,
) -> (
    Result<phaseo_agent::ModelResponse, ModelError>,
    Vec<ModelDelta>,
) {
    let seen = Mutex::new(Vec::new());
    let send = |delta: ModelDelta| seen.lock().expect("deltas").push(delta);
    let sink = DeltaSink::new(&send);
    let result = model.respond_streaming(request, &sink).await;
    (result, seen.into_inner().expect("deltas"))
}

// Whole tool runs through an agent.

#[tokio::test]
async fn a_two_turn_tool_run_sends_the_conversation_anthropic_expects() {
    let server = server(vec![json_ok(TOOL_USE_JSON), json_ok(END_TURN_JSON)]).await;
    let result = agent(&server, &[])
        .run("Is the api up?")
        .await
        .expect("run");
    assert_eq!(result.output(), Some("The api service is healthy."));
    assert_eq!(
        result.usage(),
        Usage::new(472 + 120 + 448, 61 + 9)
            .cached_input_tokens(448)
            .cache_creation_input_tokens(0)
    );

    let requests = requests(&server).await;
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("x-api-key"), Some("test-key"));
        assert_eq!(header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(header("content-type"), Some("application/json"));
    }

    let bodies = bodies(&server).await;
    let first = &bodies[0];
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert_eq!(first["max_tokens"], 4096);
    assert_eq!(first["system"], INSTRUCTIONS);
    assert_eq!(first["tool_choice"], json!({"type": "auto"}));
    assert!(first.get("stream").is_none(), "a plain run does not stream");
    let tool = &first["tools"][0];
    assert_eq!(tool["name"], "get_status");
    assert_eq!(tool["description"], "Get the current status of a service");
    assert_eq!(tool["input_schema"]["type"], "object");
    assert_eq!(tool["input_schema"]["required"], json!(["service"]));
    assert_eq!(
        tool["input_schema"]["properties"]["service"]["type"],
        "string"
    );
    assert_eq!(
        first["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Is the api up?"}]}])
    );

    assert_eq!(
        bodies[1]["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Is the api up?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll check the status of the api service."},
                {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_status",
                 "input": {"service": "api"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                 "content": healthy("api")}
            ]}
        ])
    );
}

#[tokio::test]
async fn a_streamed_tool_run_hands_out_deltas_that_add_up_to_each_turn() {
    let server = server(vec![sse_ok(TOOL_USE_SSE), sse_ok(END_TURN_SSE)]).await;
    let events: Vec<Event> = agent(&server, &[])
        .run("Is the api up?")
        .stream()
        .collect()
        .await;

    let mut text = [String::new(), String::new()];
    let mut arguments = String::new();
    let mut call_header = None;
    for event in &events {
        if let Event::ModelDelta {
            step_index, delta, ..
        } = event
        {
            match delta {
                ModelDelta::Text { text: piece } => text[*step_index].push_str(piece),
                ModelDelta::ToolCall {
                    index,
                    id,
                    name,
                    arguments: piece,
                } => {
                    assert_eq!((*step_index, *index), (0, 0));
                    if id.is_some() {
                        call_header = Some((id.clone(), name.clone()));
                    }
                    arguments.push_str(piece);
                }
                other => panic!("unexpected delta {other:?}"),
            }
        }
    }
    let turns: Vec<(Option<String>, Vec<ToolCall>, Option<FinishReason>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelTurn {
                text,
                tool_calls,
                finish_reason,
                ..
            } => Some((text.clone(), tool_calls.clone(), finish_reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(turns.len(), 2);

    assert_eq!(text[0], "Okay, let me check the api service.");
    assert_eq!(turns[0].0.as_deref(), Some(text[0].as_str()));
    assert_eq!(turns[0].2, Some(FinishReason::ToolCalls));
    assert_eq!(
        call_header,
        Some((
            Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_owned()),
            Some("get_status".to_owned())
        ))
    );
    assert_eq!(arguments, r#"{"service": "api"}"#);
    assert_eq!(
        turns[0].1,
        vec![ToolCall::raw(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_status",
            arguments.clone()
        )]
    );

    assert_eq!(text[1], "The api service is healthy.");
    assert!(
        matches!(events.last(), Some(Event::Completed { output, .. }) if *output == text[1]),
        "{:?}",
        events.last()
    );

    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert!(bodies.iter().all(|b| b["stream"] == true));
    assert_eq!(
        bodies[1]["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_status",
               "input": {"service": "api"}})
    );
}

#[tokio::test]
async fn a_whole_answer_to_a_streamed_request_is_read_whole() {
    // A proxy that ignores `stream: true` and answers JSON: one text delta and one delta per
    // call, then the response as a whole answer gives it.
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = server(vec![json_ok(TOOL_USE_JSON), json_ok(overloaded)]).await;
    let (result, deltas) = stream_model(&model(&server), &simple_request("Hi")).await;
    let response = result.expect("a whole answer");
    assert_eq!(
        response,
        parse_response(&fixture(TOOL_USE_JSON)).expect("whole")
    );
    assert_eq!(
        deltas,
        [
            ModelDelta::Text {
                text: "I'll check the status of the api service.".into()
            },
            ModelDelta::ToolCall {
                index: 0,
                id: Some("toolu_01A09q90qw90lq917835lq9".into()),
                name: Some("get_status".into()),
                arguments: r#"{"service":"api"}"#.into(),
            },
        ]
    );
    assert_eq!(bodies(&server).await[0]["stream"], true);
    // A whole error body is the error it describes, not a stream cut short.
    let (result, deltas) = stream_model(&model(&server), &simple_request("Hi")).await;
    assert_eq!(result.unwrap_err().kind, ModelErrorKind::Overloaded);
    assert!(deltas.is_empty());
}

#[tokio::test]
async fn two_parallel_calls_are_answered_by_one_user_message_with_two_results() {
    let server = server(vec![json_ok(PARALLEL_JSON), json_ok(END_TURN_JSON)]).await;
    let result = agent(&server, &[])
        .run("Are api and db up?")
        .await
        .expect("run");
    assert_eq!(result.output(), Some("The api service is healthy."));

    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let mut expected = bodies[0].clone();
    expected["messages"] = json!([
        {"role": "user", "content": [{"type": "text", "text": "Are api and db up?"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01Api4xW9cT1bn2A", "name": "get_status",
             "input": {"service": "api"}},
            {"type": "tool_use", "id": "toolu_01Db7vK3mQ8rZ5pL", "name": "get_status",
             "input": {"service": "db"}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01Api4xW9cT1bn2A",
             "content": healthy("api")},
            {"type": "tool_result", "tool_use_id": "toolu_01Db7vK3mQ8rZ5pL",
             "content": healthy("db")}
        ]}
    ]);
    // The whole second request, exactly: the first one's fields, and the conversation grown by
    // the assistant turn (its thinking block left out) and one user message with both results.
    assert_eq!(bodies[1], expected);
    assert_eq!(
        bodies[1],
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": INSTRUCTIONS,
            "messages": expected["messages"],
            "tools": bodies[0]["tools"],
            "tool_choice": {"type": "auto"}
        })
    );
}

#[tokio::test]
async fn a_failed_call_is_sent_back_as_an_error_result() {
    let server = server(vec![json_ok(PARALLEL_JSON), json_ok(END_TURN_JSON)]).await;
    agent(&server, &["db"])
        .run("Are api and db up?")
        .await
        .expect("run");
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[1]["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01Api4xW9cT1bn2A",
             "content": healthy("api")},
            {"type": "tool_result", "tool_use_id": "toolu_01Db7vK3mQ8rZ5pL",
             "content": json!({"error": "db is unreachable"}).to_string(), "is_error": true}
        ]})
    );
}

// HTTP errors and retries.

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let server = server(vec![
        error(429, ERROR_429).insert_header("retry-after", "0.02"),
        sse_ok(END_TURN_SSE),
    ])
    .await;
    let events: Vec<Event> = agent(&server, &[]).run("Hi").stream().collect().await;
    let retry = events
        .iter()
        .find_map(|e| match e {
            Event::ModelRetry {
                attempt,
                error,
                delay_ms,
                ..
            } => Some((*attempt, error.clone(), *delay_ms)),
            _ => None,
        })
        .expect("a model.retry event");
    assert_eq!(retry.0, 1);
    assert!(
        retry
            .1
            .contains("rate_limited (HTTP 429): Number of request tokens"),
        "{}",
        retry.1
    );
    assert_eq!(retry.2, 20, "the wait is the retry-after header's");
    assert!(matches!(events.last(), Some(Event::Completed { .. })));
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn a_529_overloaded_is_retried() {
    let server = server(vec![error(529, ERROR_529), json_ok(END_TURN_JSON)]).await;
    let result = agent(&server, &[]).run("Hi").await.expect("run");
    assert_eq!(result.output(), Some("The api service is healthy."));
    assert_eq!(requests(&server).await.len(), 2);

    // And it is the overloaded kind, with its status and message.
    let server = self::server(vec![error(529, ERROR_529)]).await;
    let error = model(&server)
        .respond(&simple_request("Hi"))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Overloaded);
    assert_eq!(error.status, Some(529));
    assert_eq!(error.message, "Overloaded");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let server = server(vec![error(400, ERROR_400), json_ok(END_TURN_JSON)]).await;
    let failed = agent(&server, &[]).run("Hi").await.unwrap_err();
    let error = model_error(&failed.error);
    assert_eq!(error.kind, ModelErrorKind::BadRequest);
    assert_eq!(error.status, Some(400));
    assert!(error.message.contains("roles must alternate"), "{error}");
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_401_is_not_retried() {
    let server = server(vec![error(401, ERROR_401), sse_ok(END_TURN_SSE)]).await;
    let events: Vec<Event> = agent(&server, &[]).run("Hi").stream().collect().await;
    assert!(
        !events.iter().any(|e| matches!(e, Event::ModelRetry { .. })),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(Event::Failed { error, .. })
            if error.contains("authentication (HTTP 401): invalid x-api-key")),
        "{:?}",
        events.last()
    );
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn an_error_event_mid_stream_is_overloaded_and_retried() {
    // Directly: the error event's kind, after the deltas that came before it.
    let server = server(vec![sse_ok(OVERLOADED_SSE)]).await;
    let (result, deltas) = stream_model(&model(&server), &simple_request("Hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Overloaded);
    assert_eq!(error.status, None, "the HTTP response itself succeeded");
    assert_eq!(error.message, "overloaded_error: Overloaded");
    assert_eq!(
        deltas,
        vec![ModelDelta::Text {
            text: "The api".into()
        }]
    );

    // Through an agent: retried, and the run completes.
    let server = self::server(vec![sse_ok(OVERLOADED_SSE), sse_ok(END_TURN_SSE)]).await;
    let events: Vec<Event> = agent(&server, &[]).run("Hi").stream().collect().await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ModelRetry { error, .. }
            if error.contains("overloaded_error"))),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(Event::Completed { output, .. })
            if output == "The api service is healthy.")
    );
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_a_transport_error() {
    let server = server(vec![sse_ok(CUT_SSE)]).await;
    let (result, deltas) = stream_model(&model(&server), &simple_request("Hi")).await;
    let error = result.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Transport);
    assert!(error.is_retryable());
    assert_eq!(deltas.len(), 1);
}

#[tokio::test]
async fn a_response_that_is_not_json_is_an_invalid_response() {
    let server = server(vec![
        ResponseTemplate::new(200).set_body_string("<html>proxy</html>"),
    ])
    .await;
    let error = model(&server)
        .respond(&simple_request("Hi"))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::InvalidResponse);
}

#[tokio::test]
async fn configuration_reaches_the_wire() {
    let server = server(vec![json_ok(END_TURN_JSON)]).await;
    let model = model(&server)
        .max_output_tokens(1_000)
        .version("2099-01-01")
        .and_then(|m| m.header("anthropic-beta", "some-beta"))
        .expect("headers")
        .send_metadata(true);
    let mut request = simple_request("Hi");
    request.model = Some("claude-haiku-4-5".into());
    request.temperature = Some(0.2);
    request.meta.run_id = "run_abc_0".into();
    model.respond(&request).await.expect("response");
    let requests = requests(&server).await;
    let header = |name: &str| requests[0].headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("anthropic-version"), Some("2099-01-01"));
    assert_eq!(header("anthropic-beta"), Some("some-beta"));
    let body: Value = serde_json::from_slice(&requests[0].body).expect("JSON");
    assert_eq!(
        body,
        json!({
            "model": "claude-haiku-4-5",
            "max_tokens": 1000,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "temperature": 0.2,
            "metadata": {"user_id": "run_abc_0"}
        })
    );
}

#[tokio::test]
async fn no_api_key_for_the_real_api_fails_before_sending() {
    let error = Anthropic::new("claude-sonnet-4-5")
        .respond(&simple_request("Hi"))
        .await
        .unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Authentication);
    assert!(error.message.contains("ANTHROPIC_API_KEY"), "{error}");
}

// The pure functions, on the same bodies.

/// The events of a recorded stream: (event name, data) pairs.
fn sse_events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|chunk| !chunk.trim().is_empty())
        .map(|chunk| {
            let mut event = String::new();
            let mut data = String::new();
            for line in chunk.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = name.to_owned();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = d.to_owned();
                }
            }
            (event, data)
        })
        .collect()
}

fn assemble(
    text: &str,
) -> (
    Result<phaseo_agent::ModelResponse, ModelError>,
    Vec<ModelDelta>,
) {
    let mut assembler = StreamAssembler::new();
    let mut deltas = Vec::new();
    for (event, data) in sse_events(text) {
        match assembler.push(&event, &data) {
            Ok(more) => deltas.extend(more),
            Err(error) => return (Err(error), deltas),
        }
    }
    (assembler.finish(), deltas)
}

fn fixture(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture JSON")
}

#[test]
fn parse_response_reads_text_calls_reason_usage_and_id() {
    let response = parse_response(&fixture(TOOL_USE_JSON)).expect("response");
    assert_eq!(response.id.as_deref(), Some("msg_01Aq9w938a90dw8q"));
    assert_eq!(
        response.model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );
    assert_eq!(
        response.text.as_deref(),
        Some("I'll check the status of the api service.")
    );
    assert_eq!(
        response.tool_calls,
        vec![ToolCall::new(
            "toolu_01A09q90qw90lq917835lq9",
            "get_status",
            json!({"service": "api"})
        )]
    );
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        response.usage,
        Some(
            Usage::new(472, 61)
                .cached_input_tokens(0)
                .cache_creation_input_tokens(0)
        )
    );

    let response = parse_response(&fixture(END_TURN_JSON)).expect("response");
    assert_eq!(response.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        response.usage,
        Some(
            Usage::new(568, 9)
                .cached_input_tokens(448)
                .cache_creation_input_tokens(0)
        )
    );
}

#[test]
fn parse_response_skips_thinking_and_reads_parallel_calls() {
    let response = parse_response(&fixture(PARALLEL_JSON)).expect("response");
    assert_eq!(response.text, None);
    let ids: Vec<&str> = response.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["toolu_01Api4xW9cT1bn2A", "toolu_01Db7vK3mQ8rZ5pL"]);
    assert_eq!(
        response.usage.and_then(|u| u.cached_input_tokens),
        None,
        "no cache field, no cached count"
    );
}

#[test]
fn parse_response_reads_a_cut_answer_and_error_bodies() {
    let response = parse_response(&fixture(MAX_TOKENS_JSON)).expect("response");
    assert_eq!(response.finish_reason, Some(FinishReason::Length));

    for (body, kind) in [
        (ERROR_429, ModelErrorKind::RateLimited),
        (ERROR_529, ModelErrorKind::Overloaded),
        (ERROR_400, ModelErrorKind::BadRequest),
        (ERROR_401, ModelErrorKind::Authentication),
    ] {
        assert_eq!(parse_response(&fixture(body)).unwrap_err().kind, kind);
    }
    assert_eq!(
        parse_response(&json!({"id": "msg_1"})).unwrap_err().kind,
        ModelErrorKind::InvalidResponse
    );
}

#[test]
fn the_assembler_builds_the_streamed_tool_turn() {
    let (response, deltas) = assemble(TOOL_USE_SSE);
    let response = response.expect("response");
    assert_eq!(response.id.as_deref(), Some("msg_014p7gG3wDgGV9EUtLvnow3U"));
    assert_eq!(
        response.text.as_deref(),
        Some("Okay, let me check the api service.")
    );
    assert_eq!(
        response.tool_calls,
        vec![ToolCall::raw(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_status",
            r#"{"service": "api"}"#
        )]
    );
    assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage, Some(Usage::new(472, 89)));
    // Three text pieces, the call's header, then three argument pieces (the empty one skipped).
    assert_eq!(deltas.len(), 7);
    assert_eq!(
        deltas[3],
        ModelDelta::ToolCall {
            index: 0,
            id: Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6".into()),
            name: Some("get_status".into()),
            arguments: String::new()
        }
    );
}

#[test]
fn the_assembler_numbers_calls_by_ordinal_and_gives_empty_input_braces() {
    let (response, deltas) = assemble(THINKING_SSE);
    let response = response.expect("response");
    assert_eq!(response.text, None, "thinking is not text");
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall::raw("toolu_01NoInput8s7d6f", "list_services", "{}"),
            ToolCall::raw("toolu_01Second5g4h3j", "get_status", r#"{"service": "db"}"#),
        ]
    );
    // The blocks are 1 and 2; the calls are 0 and 1. Each call's pieces add up to its arguments.
    for (ordinal, call) in response.tool_calls.iter().enumerate() {
        let arguments: String = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::ToolCall {
                    index, arguments, ..
                } if *index == ordinal => Some(arguments.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(arguments, call.arguments);
    }
}

#[test]
fn the_assembler_fails_on_an_error_event_and_on_a_cut_stream() {
    let (result, _) = assemble(OVERLOADED_SSE);
    assert_eq!(result.unwrap_err().kind, ModelErrorKind::Overloaded);
    let (result, _) = assemble(CUT_SSE);
    assert_eq!(result.unwrap_err().kind, ModelErrorKind::Transport);

    let mut assembler = StreamAssembler::new();
    assert_eq!(
        assembler
            .push(
                "error",
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#
            )
            .unwrap_err()
            .kind,
        ModelErrorKind::RateLimited
    );
    let mut assembler = StreamAssembler::new();
    assert_eq!(
        assembler
            .push("content_block_delta", "{not json")
            .unwrap_err()
            .kind,
        ModelErrorKind::InvalidResponse
    );
    // Unknown events and pings are skipped.
    let mut assembler = StreamAssembler::new();
    assert_eq!(
        assembler
            .push("brand_new_event", r#"{"type":"brand_new_event"}"#)
            .unwrap(),
        vec![]
    );
    assert_eq!(assembler.push("ping", "").unwrap(), vec![]);
}

#[test]
fn request_body_maps_a_conversation_with_malformed_arguments_and_choices() {
    let request = ModelRequest::default()
        .instructions(String::new())
        .messages(vec![
            Message::User {
                content: "Deploy".into(),
            },
            Message::Assistant {
                content: Some("On it.".into()),
                tool_calls: vec![ToolCall::raw("toolu_1", "deploy", "{\"env\": ")],
            },
            Message::Tool {
                call_id: "toolu_1".into(),
                name: "deploy".into(),
                content: json!({"error": "Invalid tool input: EOF while parsing"}).to_string(),
            },
        ])
        .tools(vec![ToolDefinition::new(
            "deploy",
            String::new(),
            json!({"properties": {"env": {"type": "string"}}}),
        )])
        .tool_choice(ToolChoice::Tool("deploy".into()))
        .parallel_tool_calls(false)
        .meta(Default::default());
    let body = request_body(&request, &Anthropic::new("claude-x"), true).expect("body");
    assert_eq!(
        body,
        json!({
            "model": "claude-x",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Deploy"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "deploy",
                     "input": {"_raw_arguments": "{\"env\": "}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": "{\"error\":\"Invalid tool input: EOF while parsing\"}",
                     "is_error": true}
                ]}
            ],
            "tools": [{"name": "deploy",
                       "input_schema": {"type": "object", "properties": {"env": {"type": "string"}}}}],
            "tool_choice": {"type": "tool", "name": "deploy", "disable_parallel_tool_use": true},
            "stream": true
        })
    );
}
