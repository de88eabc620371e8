//! The sampling settings both providers share (`HttpModel::temperature`, `top_p`,
//! `max_output_tokens`, `stop`, `seed`): the model's defaults go with every request, a turn's own
//! (`first_turn`, a tool's `next_turn`) overrides each for that turn, checked on the wire body
//! against in-process servers (wiremock); and the default time limits.

use std::time::Duration;

use phaseo_agent::limits::{Limit, ModelLimits};
use phaseo_agent::provider::anthropic::{self, Anthropic};
use phaseo_agent::provider::openai::{self, OpenAi};
use phaseo_agent::provider::{HttpModel, Wire};
use phaseo_agent::{Agent, Message, Model, ModelRequest, Tool, ToolContext, TurnParams};
use serde_json::{Value, json};
use wiremock::ResponseTemplate;

use crate::support::wire::{bodies, json_ok, scripted_server_any_path};

const OPENAI_TOOL: &str = include_str!("../fixtures/openai/llama_cpp_python_tool_call.json");
const OPENAI_TEXT: &str = include_str!("../fixtures/openai/llama_cpp_python_text.json");
const OPENAI_TEXT_SSE: &str = include_str!("../fixtures/openai/openai_text.sse");
const ANTHROPIC_TOOL: &str = include_str!("../fixtures/anthropic/tool_use.json");
const ANTHROPIC_TEXT: &str = include_str!("../fixtures/anthropic/end_turn.json");

/// The same defaults, whatever the provider.
fn defaults<W: Wire>(model: HttpModel<W>) -> HttpModel<W> {
    model
        .temperature(0.2)
        .top_p(0.8)
        .max_output_tokens(100)
        .stop(["END"])
        .seed(42)
}

/// A two-turn run (a tool call, then the answer) whose first turn overrides every setting.
async fn two_turns(model: impl Model + 'static) {
    let tool = Tool::new(
        "get_status",
        "Get a service's status",
        json!({"type": "object"}),
        |_: Value, _: ToolContext| Ok(json!("up")),
    );
    let agent = Agent::builder("ops")
        .model(model)
        .tool(tool)
        .build()
        .expect("an agent");
    let first = TurnParams::default()
        .temperature(0.9)
        .top_p(0.5)
        .max_output_tokens(10)
        .stop(["STOP", "HALT"])
        .seed(7);
    agent
        .run("Is the api up?")
        .first_turn(first)
        .await
        .expect("the run completes");
}

/// The sampling fields of a body (those present).
fn sampling(body: &Value, fields: &[&str]) -> Value {
    let picked = fields
        .iter()
        .filter_map(|f| body.get(*f).map(|v| ((*f).to_owned(), v.clone())))
        .collect();
    Value::Object(picked)
}

#[tokio::test]
async fn both_send_the_defaults_and_a_turns_own_settings_win_and_anthropic_no_seed() {
    // (fields, whole answers: a tool call then text, the first turn's, the second's)
    let first = json!({"temperature": 0.9, "top_p": 0.5, "max_tokens": 10, "seed": 7});
    let second = json!({"temperature": 0.2, "top_p": 0.8, "max_tokens": 100, "seed": 42});
    for anthropic in [false, true] {
        let (tool, text, stop) = if anthropic {
            (ANTHROPIC_TOOL, ANTHROPIC_TEXT, "stop_sequences")
        } else {
            (OPENAI_TOOL, OPENAI_TEXT, "stop")
        };
        let server = scripted_server_any_path(vec![json_ok(tool), json_ok(text)]).await;
        if anthropic {
            two_turns(defaults(
                Anthropic::new("claude-test").base_url(server.uri()),
            ))
            .await;
        } else {
            let url = format!("{}/v1", server.uri());
            two_turns(defaults(OpenAi::new("local").base_url(url))).await;
        }
        let fields = ["temperature", "top_p", "max_tokens", stop, "seed"];
        let sent = bodies(&server).await;
        for (body, (expected, sequences)) in sent
            .iter()
            .zip([(&first, json!(["STOP", "HALT"])), (&second, json!(["END"]))])
        {
            let mut expected = expected.clone();
            expected[stop] = sequences;
            if anthropic {
                // The Messages API has no seed.
                expected.as_object_mut().expect("an object").remove("seed");
            }
            assert_eq!(sampling(body, &fields), expected, "anthropic: {anthropic}");
        }
    }
}

#[test]
fn without_defaults_only_what_a_provider_requires_is_sent() {
    let request = ModelRequest::new(vec![Message::user("Hi")]);
    let openai = openai::request_body(&request, &OpenAi::new("m"), false).expect("a body");
    let fields = [
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
    ];
    assert_eq!(sampling(&openai, &fields), json!({}));
    let claude = anthropic::request_body(&request, &Anthropic::new("m"), false).expect("a body");
    let fields = [
        "temperature",
        "top_p",
        "max_tokens",
        "stop_sequences",
        "seed",
    ];
    assert_eq!(
        sampling(&claude, &fields),
        json!({"max_tokens": anthropic::DEFAULT_MAX_TOKENS})
    );
    // A turn's empty list of stop sequences sends none, whatever the default.
    let request = request.stop(Vec::<String>::new());
    let model = OpenAi::new("m").stop(["END"]);
    let body = openai::request_body(&request, &model, false).expect("a body");
    assert!(body.get("stop").is_none(), "{body}");
}

#[test]
fn a_setting_that_is_not_a_number_is_a_bad_request_naming_it() {
    let request = ModelRequest::new(vec![Message::user("Hi")]);
    let error = openai::request_body(&request, &OpenAi::new("m").top_p(f32::NAN), false)
        .expect_err("refused");
    assert_eq!(error.message, "the top_p NaN is not a number");
    let model = Anthropic::new("m").temperature(f32::INFINITY);
    let error = anthropic::request_body(&request, &model, false).expect_err("refused");
    assert_eq!(error.message, "the temperature inf is not a number");
}

#[test]
fn the_default_time_limits() {
    let limits = ModelLimits::default();
    assert_eq!(limits.request_time(), Duration::from_secs(180));
    assert_eq!(limits.stream_idle(), Duration::from_secs(60));
    assert_eq!(
        OpenAi::new("m").model_limits().request_time(),
        openai::DEFAULT_TIMEOUT
    );
    assert_eq!(
        Anthropic::new("m").model_limits().request_time(),
        anthropic::DEFAULT_TIMEOUT
    );
    assert_eq!(openai::DEFAULT_TIMEOUT, Duration::from_secs(180));
}

#[tokio::test]
async fn a_whole_answer_may_take_longer_than_the_idle_time_before_its_headers() {
    let limits = ModelLimits::default()
        .stream_idle_timeout(Duration::from_millis(200))
        .request_timeout(Duration::from_secs(10));
    let slow = |body: &str, kind: &str| {
        ResponseTemplate::new(200)
            .set_body_raw(body.as_bytes().to_vec(), kind)
            .set_delay(Duration::from_millis(600))
    };
    let server = scripted_server_any_path(vec![
        slow(OPENAI_TEXT, "application/json"),
        slow(OPENAI_TEXT_SSE, "text/event-stream"),
    ])
    .await;
    let model = OpenAi::new("m")
        .base_url(format!("{}/v1", server.uri()))
        .limits(limits);
    let request = ModelRequest::new(vec![Message::user("Hi")]);
    // Whole: the server writes the answer before its headers.
    model.respond(&request).await.expect("a whole answer");
    // Streamed: silence before the headers is bounded by the idle time.
    let sink = |_| {};
    let error = model
        .respond_streaming(&request, &phaseo_agent::DeltaSink::new(&sink))
        .await
        .expect_err("silent");
    assert_eq!(error.limit.map(|l| l.limit), Some(Limit::StreamIdle));
}
