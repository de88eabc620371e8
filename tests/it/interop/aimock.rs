//! The providers against aimock, a deterministic server of the OpenAI and Anthropic wire formats
//! (npm `@copilotkit/aimock`), started by `interop/run.sh` with the fixtures in
//! `interop/fixtures/aimock/`: two-turn tool runs, streamed and not, for both providers, and the
//! requests aimock received (its journal) checked.
//!
//! Run by `interop/run.sh` (`--ignored`); without the server's URL the tests fail, never pass.

use std::io::{Read, Write};
use std::net::TcpStream;

use futures::StreamExt;
use phaseo_agent::provider::anthropic::Anthropic;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::{Agent, Event, Model, ModelDelta, RunResult, Tool, tool};
use serde_json::{Value, json};

/// aimock's base URL, with `/v1`.
fn aimock() -> String {
    std::env::var("PHASEO_INTEROP_AIMOCK_URL").expect(
        "PHASEO_INTEROP_AIMOCK_URL is not set: run the interop suite with interop/run.sh, which \
         starts aimock",
    )
}

/// aimock's root, without `/v1`.
fn root() -> String {
    aimock()
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_owned()
}

/// The requests aimock received with the `X-Test-Id` header `test`.
fn journal(test: &str) -> Vec<Value> {
    let root = root();
    let host = root.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).expect("aimock answers");
    write!(
        stream,
        "GET /__aimock/journal?testId={test} HTTP/1.0\r\nHost: {host}\r\n\r\n"
    )
    .expect("a request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("a response");
    let body = response.split("\r\n\r\n").nth(1).expect("a body");
    serde_json::from_str(body).expect("the journal is JSON")
}

/// Add two numbers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn get_status() -> Tool {
    Tool::new(
        "get_status",
        "Get the current status of a service",
        json!({"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}),
        |input, _ctx| Ok(json!({"service": input["service"], "status": "ok"})),
    )
}

fn agent(model: impl Model + 'static) -> Agent {
    Agent::builder("interop")
        .instructions("You check services and add numbers.")
        .model(model)
        .tool(get_status())
        .tool(add)
        .tool_concurrency(2)
        .build()
        .expect("an agent")
}

/// Runs `input`, streamed or not; for a streamed run, the text deltas must add up to the output.
async fn run(agent: &Agent, input: &str, streamed: bool) -> RunResult {
    if !streamed {
        return agent.run(input).await.expect("the run completes");
    }
    let mut text = String::new();
    let mut argument_pieces = 0;
    let mut last = None;
    let mut events = agent.run(input).stream();
    while let Some(event) = events.next().await {
        match &event {
            Event::ModelDelta {
                delta: ModelDelta::Text { text: piece },
                ..
            } => text.push_str(piece),
            Event::ModelDelta {
                delta: ModelDelta::ToolCall { .. },
                ..
            } => argument_pieces += 1,
            _ => {}
        }
        last = Some(event);
    }
    let Some(Event::Completed { output, state, .. }) = last else {
        panic!("the streamed run did not complete: {last:?}")
    };
    assert_eq!(text, output, "the text deltas add up to the output");
    assert!(argument_pieces >= 2, "tool calls arrived in pieces");
    RunResult { state: *state }
}

/// The conversation's tool results, as `(call id, content)`.
fn tool_results(result: &RunResult) -> Vec<(String, Value)> {
    result
        .state
        .messages()
        .iter()
        .filter_map(|m| match m {
            phaseo_agent::Message::Tool {
                call_id, content, ..
            } => Some((
                call_id.clone(),
                serde_json::from_str(content).expect("JSON content"),
            )),
            _ => None,
        })
        .collect()
}

async fn status_run(model: impl Model + 'static, streamed: bool, id_prefix: &str) {
    let result = run(&agent(model), "Is the api service up?", streamed).await;
    assert_eq!(result.output(), Some("The api service is up: status ok."));
    let results = tool_results(&result);
    assert_eq!(results.len(), 1);
    assert!(results[0].0.starts_with(id_prefix), "{:?}", results[0]);
    assert_eq!(results[0].1, json!({"service": "api", "status": "ok"}));
}

async fn add_run(model: impl Model + 'static, streamed: bool, test: &str) {
    let result = run(&agent(model), "Please add 2+3 and 4+5", streamed).await;
    assert_eq!(result.output(), Some("2 + 3 = 5 and 4 + 5 = 9."));
    let results: Vec<Value> = tool_results(&result).into_iter().map(|r| r.1).collect();
    assert_eq!(results, [json!(5), json!(9)], "results in call order");
    // What aimock received: the second request carries both results, in call order, after
    // the assistant turn that asked for them.
    let requests = journal(test);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let messages = requests[1]["body"]["messages"]
        .as_array()
        .expect("messages");
    let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2, "{messages:#?}");
    assert_eq!(tools[0]["content"], "5");
    assert_eq!(tools[1]["content"], "9");
    let offered = requests[0]["body"]["tools"].as_array().expect("tools");
    let add_tool = offered
        .iter()
        .find(|t| t["function"]["name"] == "add" || t["name"] == "add")
        .expect("add offered");
    let schema = add_tool["function"]["parameters"]
        .as_object()
        .or_else(|| add_tool["parameters"].as_object())
        .or_else(|| add_tool["input_schema"].as_object())
        .expect("a schema");
    assert_eq!(schema["required"], json!(["a", "b"]));
}

fn openai(test: &str) -> OpenAi {
    OpenAi::new("gpt-interop")
        .base_url(aimock())
        .api_key("unused")
        .and_then(|m| m.header("X-Test-Id", test))
        .expect("settings")
}

fn anthropic(test: &str) -> Anthropic {
    Anthropic::new("claude-interop")
        .base_url(root())
        .api_key("unused")
        .and_then(|m| m.header("X-Test-Id", test))
        .expect("settings")
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn openai_tool_run() {
    status_run(openai("openai-status"), false, "call_").await;
    add_run(openai("openai-add"), false, "openai-add").await;
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn openai_tool_run_streamed() {
    status_run(openai("openai-status-s"), true, "call_").await;
    add_run(openai("openai-add-s"), true, "openai-add-s").await;
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn anthropic_tool_run() {
    status_run(anthropic("anthropic-status"), false, "toolu_").await;
    add_run(anthropic("anthropic-add"), false, "anthropic-add").await;
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn anthropic_tool_run_streamed() {
    status_run(anthropic("anthropic-status-s"), true, "toolu_").await;
    add_run(anthropic("anthropic-add-s"), true, "anthropic-add-s").await;
}
