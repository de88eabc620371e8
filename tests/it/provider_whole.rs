//! Answers whole to a streamed run, for both providers (`HttpModel`): the `streaming(false)`
//! setting, and the fall-back when a server refuses to stream (llama-cpp-python's server with
//! an automatic tool choice, a server whose HTTP error says it cannot stream), against
//! in-process servers (wiremock). The run's own events flow either way; only the model's deltas
//! are absent.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as LogEvent, Level, Metadata, Subscriber};

use futures::StreamExt;
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::{Agent, Event, Model, Tool, ToolContext};
use serde_json::{Value, json};
use wiremock::{MockServer, Request, Respond, ResponseTemplate};

use crate::support::wire::{
    answering_server, bodies, fast_retries, json_ok, scripted_server_any_path, sse_ok,
};

const LLAMA_PY_TOOL_JSON: &str = include_str!("../fixtures/openai/llama_cpp_python_tool_call.json");
const LLAMA_PY_TEXT_JSON: &str = include_str!("../fixtures/openai/llama_cpp_python_text.json");
const OPENAI_TEXT_SSE: &str = include_str!("../fixtures/openai/openai_text.sse");
const OPENAI_CUT_SSE: &str = include_str!("../fixtures/openai/openai_cut.sse");
const ANTHROPIC_TOOL_JSON: &str = include_str!("../fixtures/anthropic/tool_use.json");
const ANTHROPIC_TEXT_JSON: &str = include_str!("../fixtures/anthropic/end_turn.json");

/// A server that answers like llama-cpp-python 0.3.36's with `chatml-function-calling`: a
/// streamed request whose tool choice is automatic gets an event stream that ends before its
/// first event (the server raises "Automatic streaming tool choice is not supported" after the
/// headers are sent); a whole request gets a tool call, or the answer once a tool result is in
/// the conversation. `whole` is what it answers whole, in that order, for another format.
struct Refuses {
    /// The whole answers: the tool call, then the text.
    whole: [&'static str; 2],
}

impl Respond for Refuses {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON request");
        if body["stream"] == true {
            return sse_ok("");
        }
        let has_result = body["messages"].to_string().contains("21 degrees");
        json_ok(self.whole[usize::from(has_result)])
    }
}

/// Whether each request asked to stream.
fn streamed(bodies: &[Value]) -> Vec<bool> {
    bodies.iter().map(|b| b["stream"] == true).collect()
}

/// A tool of any name (the recordings call `get_status` and `get_weather`) that answers the
/// same.
fn weather(name: &str) -> Tool {
    Tool::new(
        name,
        "Get a service's or a city's weather",
        json!({"type": "object"}),
        |_: Value, _: ToolContext| Ok(json!("It is 21 degrees and sunny.")),
    )
}

fn agent(model: impl Model + 'static, tool: &str) -> Agent {
    Agent::builder("ops")
        .model(model)
        .tool(weather(tool))
        .model_retries(fast_retries())
        .build()
        .expect("an agent")
}

/// The names of a streamed run's events (`model.delta`, `tool.called`, ...), in order.
async fn event_names(agent: &Agent) -> Vec<String> {
    let events: Vec<Event> = agent.run("What is the weather?").stream().collect().await;
    if let Some(Event::Failed { error, .. }) = events.last() {
        panic!("the run failed: {error}");
    }
    events
        .iter()
        .map(|e| serde_json::to_value(e).expect("an event")["type"].to_string())
        .map(|name| name.trim_matches('"').to_owned())
        .collect()
}

const WHOLE_RUN: [&str; 6] = [
    "run.started",
    "model.turn",
    "tool.called",
    "tool.result",
    "model.turn",
    "run.completed",
];

fn llama_cpp_python() -> Refuses {
    Refuses {
        whole: [LLAMA_PY_TOOL_JSON, LLAMA_PY_TEXT_JSON],
    }
}

#[tokio::test]
async fn a_stream_refused_by_llama_cpp_python_is_asked_again_whole_once_and_then_whole() {
    let server = answering_server("/v1/chat/completions", llama_cpp_python()).await;
    let model = OpenAi::new("smollm2").base_url(format!("{}/v1", server.uri()));
    let agent = agent(model.clone(), "get_status");
    // The run's events flow, with no retry and no delta.
    assert_eq!(event_names(&agent).await, WHOLE_RUN);
    // The refused stream, the same request whole, then the next turn whole at once.
    let sent = bodies(&server).await;
    assert_eq!(streamed(&sent), [true, false, false]);
    let mut first = sent[0].clone();
    first.as_object_mut().expect("an object").remove("stream");
    first
        .as_object_mut()
        .expect("an object")
        .remove("stream_options");
    assert_eq!(first, sent[1], "the same request, whole");
    // Remembered by the model (and its clones): the next run asks whole from the start.
    assert!(!model.streams());
    assert_eq!(event_names(&agent).await, WHOLE_RUN);
    assert_eq!(streamed(&bodies(&server).await[3..]), [false, false]);
}

/// A server that refuses every streamed request with `refusal`, and answers whole requests as
/// [`Refuses`] does.
struct RefusesWith {
    refusal: ResponseTemplate,
    whole: Refuses,
}

impl Respond for RefusesWith {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).expect("a JSON request");
        if body["stream"] == true {
            return self.refusal.clone();
        }
        self.whole.respond(request)
    }
}

/// A server like llama-cpp-python's that refuses every streamed request with `refusal`.
async fn refusing_with(refusal: ResponseTemplate) -> MockServer {
    let whole = llama_cpp_python();
    answering_server("/v1/chat/completions", RefusesWith { refusal, whole }).await
}

#[tokio::test]
async fn an_http_error_that_says_the_server_cannot_stream_is_a_refusal() {
    // OpenAI's answer to `"stream": true` for a model that cannot stream.
    let refusal = ResponseTemplate::new(400).set_body_raw(
        r#"{"error":{"message":"Unsupported value: 'stream' does not support true with this model. Only the default (false) value is supported.","type":"invalid_request_error","param":"stream","code":"unsupported_value"}}"#,
        "application/json",
    );
    let server = refusing_with(refusal).await;
    let model = OpenAi::new("o1").base_url(format!("{}/v1", server.uri()));
    assert_eq!(event_names(&agent(model, "get_status")).await, WHOLE_RUN);
    assert_eq!(streamed(&bodies(&server).await), [true, false, false]);
}

#[tokio::test]
async fn another_http_error_to_a_streamed_request_is_no_refusal() {
    // A bad request that says nothing of streaming fails the run, as it did, unsent again.
    let refusal = ResponseTemplate::new(400).set_body_raw(
        r#"{"error":{"message":"Invalid 'messages[0].content': string too long.","type":"invalid_request_error"}}"#,
        "application/json",
    );
    let server = refusing_with(refusal).await;
    let model = OpenAi::new("gpt-4.1").base_url(format!("{}/v1", server.uri()));
    let events: Vec<Event> = agent(model.clone(), "get_status")
        .run("What is the weather?")
        .stream()
        .collect()
        .await;
    assert!(
        matches!(events.last(), Some(Event::Failed { .. })),
        "{events:?}"
    );
    assert_eq!(streamed(&bodies(&server).await), [true]);
    assert!(model.streams());
}

#[tokio::test]
async fn an_anthropic_stream_that_ends_before_its_first_event_is_a_refusal() {
    let responder = Refuses {
        whole: [ANTHROPIC_TOOL_JSON, ANTHROPIC_TEXT_JSON],
    };
    let server = answering_server("/v1/messages", responder).await;
    let model = Anthropic::new("claude-test").base_url(server.uri());
    assert_eq!(event_names(&agent(model, "get_status")).await, WHOLE_RUN);
    assert_eq!(streamed(&bodies(&server).await), [true, false, false]);
}

#[tokio::test]
async fn a_stream_cut_after_its_first_event_is_retried_streamed_never_asked_whole() {
    // Deltas went out before the cut: a whole answer would repeat them.
    let server =
        scripted_server_any_path(vec![sse_ok(OPENAI_CUT_SSE), sse_ok(OPENAI_TEXT_SSE)]).await;
    let model = OpenAi::new("gpt-4.1").base_url(format!("{}/v1", server.uri()));
    let names = event_names(&agent(model.clone(), "get_status")).await;
    assert!(names.contains(&"model.retry".to_owned()), "{names:?}");
    assert!(names.contains(&"model.delta".to_owned()), "{names:?}");
    assert_eq!(streamed(&bodies(&server).await), [true, true]);
    assert!(model.streams());
}

#[tokio::test]
async fn streaming_off_asks_whole_and_the_runs_events_still_flow() {
    for (route, whole) in [
        (
            "/v1/chat/completions",
            [LLAMA_PY_TOOL_JSON, LLAMA_PY_TEXT_JSON],
        ),
        ("/v1/messages", [ANTHROPIC_TOOL_JSON, ANTHROPIC_TEXT_JSON]),
    ] {
        let server = answering_server(route, Refuses { whole }).await;
        let model: Box<dyn Model> = if route == "/v1/messages" {
            Box::new(
                Anthropic::new("claude-test")
                    .base_url(server.uri())
                    .streaming(false),
            )
        } else {
            let url = format!("{}/v1", server.uri());
            Box::new(OpenAi::new("local").base_url(url).streaming(false))
        };
        assert_eq!(event_names(&agent(model, "get_status")).await, WHOLE_RUN);
        assert_eq!(streamed(&bodies(&server).await), [false, false], "{route}");
    }
}

#[test]
fn another_base_url_forgets_a_refusal_and_clones_share_it() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let server = answering_server("/v1/chat/completions", llama_cpp_python()).await;
        let model = OpenAi::new("smollm2").base_url(format!("{}/v1", server.uri()));
        let clone = model.clone();
        agent(model.clone(), "get_status")
            .run("Hi")
            .stream()
            .count()
            .await;
        assert!(!model.streams() && !clone.streams());
        assert!(model.base_url(server.uri()).streams());
    });
}

/// The warnings logged while `run` runs, as `message` and fields.
fn warnings(run: impl FnOnce()) -> Vec<String> {
    let logged = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Warnings(logged.clone());
    tracing::subscriber::with_default(subscriber, run);
    logged.lock().map(|lines| lines.clone()).expect("a lock")
}

/// A subscriber that keeps each warning's fields as one line.
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &LogEvent<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        self.0.lock().expect("a lock").push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn the_fall_back_is_logged_once() {
    let logged = warnings(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let server = answering_server("/v1/chat/completions", llama_cpp_python()).await;
            let model = OpenAi::new("smollm2").base_url(format!("{}/v1", server.uri()));
            assert_eq!(event_names(&agent(model, "get_status")).await, WHOLE_RUN);
        });
    });
    assert_eq!(logged.len(), 1, "{logged:?}");
    let line = &logged[0];
    assert!(line.contains("the server refused to stream"), "{line}");
    assert!(line.contains(r#"model_type="OpenAi""#), "{line}");
    assert!(line.contains("after 0 chunks"), "{line}");
}
