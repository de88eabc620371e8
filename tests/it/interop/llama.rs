//! A real model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (a tiny
//! model, deterministic at temperature 0), started by `interop/run.sh`. An agent with one
//! `#[tool]` makes a real tool call (the first turn with `tool_choice` required) and the run
//! completes with the tool's result in the conversation, streamed and not; and a streamed run
//! with the tool choice left automatic, which this server refuses to stream, completes with its
//! events, the provider asking for whole answers.
//!
//! Run by `interop/run.sh` (`--ignored`); without the server's URL the tests fail, never pass.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use phaseo_agent::provider::openai::OpenAi;
use phaseo_agent::{Agent, Event, IntoTool, Message, RunResult, ToolChoice, TurnParams, tool};

fn llama() -> String {
    std::env::var("PHASEO_INTEROP_LLAMA_URL").expect(
        "PHASEO_INTEROP_LLAMA_URL is not set: run the interop suite with interop/run.sh, which \
         starts the model server",
    )
}

static CALLS: AtomicUsize = AtomicUsize::new(0);

/// Get the current weather in a city.
#[tool]
fn get_weather(city: String) -> String {
    CALLS.fetch_add(1, Ordering::SeqCst);
    format!("It is 21 degrees and sunny in {city}.")
}

fn agent() -> Agent {
    Agent::builder("weather")
        .instructions("You answer questions about the weather. Use the get_weather tool.")
        .model(
            OpenAi::new("smollm2-135m-instruct")
                .base_url(llama())
                .api_key("unused")
                .expect("a key"),
        )
        // After the result, the model answers in words: a model this small would otherwise call
        // the tool again.
        .tool(IntoTool::into_tool(get_weather).next_turn(|_, current| {
            current
                .clone()
                .tool_choice(ToolChoice::None)
                .temperature(0.0)
                .max_output_tokens(64)
        }))
        .max_turns(3)
        .build()
        .expect("an agent")
}

/// The first turn must call a tool, deterministically and briefly.
fn first_turn() -> TurnParams {
    TurnParams::default()
        .tool_choice(ToolChoice::Required)
        .temperature(0.0)
        .max_output_tokens(64)
}

/// The run called `get_weather` with a city, and its result is in the conversation.
fn check(result: &RunResult) {
    let messages = result.state.messages();
    let call = messages
        .iter()
        .find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.first().cloned(),
            _ => None,
        })
        .expect("the model called a tool");
    assert_eq!(call.name, "get_weather");
    let arguments: serde_json::Value =
        serde_json::from_str(&call.arguments).expect("JSON arguments");
    assert!(arguments["city"].is_string(), "{arguments}");
    let result_text = messages
        .iter()
        .find_map(|m| match m {
            Message::Tool {
                call_id, content, ..
            } if *call_id == call.id => Some(content.clone()),
            _ => None,
        })
        .expect("the tool's result is in the conversation");
    assert!(result_text.contains("21 degrees"), "{result_text}");
    assert!(result.output().is_some(), "the run completed");
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn a_real_model_calls_a_tool() {
    let before = CALLS.load(Ordering::SeqCst);
    let result = agent()
        .run("What is the weather in Oslo?")
        .first_turn(first_turn())
        .await
        .expect("the run completes");
    assert!(CALLS.load(Ordering::SeqCst) > before, "the tool ran");
    check(&result);
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn a_real_model_calls_a_tool_streamed() {
    let before = CALLS.load(Ordering::SeqCst);
    let mut deltas = 0;
    let mut last = None;
    let mut events = agent()
        .run("What is the weather in Oslo?")
        .first_turn(first_turn())
        .stream();
    while let Some(event) = events.next().await {
        if matches!(event, Event::ModelDelta { .. }) {
            deltas += 1;
        }
        last = Some(event);
    }
    assert!(deltas > 0, "the model streamed");
    assert!(CALLS.load(Ordering::SeqCst) > before, "the tool ran");
    match last {
        Some(Event::Completed { state, .. }) => check(&RunResult { state: *state }),
        other => panic!("the run ended with {other:?}"),
    }
}

/// Streamed, with the tool offered under an automatic choice: llama-cpp-python's server ends
/// such a stream before its first event ("Automatic streaming tool choice is not supported"), so
/// the provider asks the turn again whole and every later turn whole. The run's events flow.
/// The sampling settings are the provider's defaults here, not the turns'.
#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn a_real_model_streams_events_with_an_automatic_tool_choice() {
    let before = CALLS.load(Ordering::SeqCst);
    let model = OpenAi::new("smollm2-135m-instruct")
        .base_url(llama())
        .temperature(0.0)
        .max_output_tokens(64);
    let agent = Agent::builder("weather")
        .instructions("You answer questions about the weather. Use the get_weather tool.")
        .model(model.clone())
        .tool(
            IntoTool::into_tool(get_weather)
                .next_turn(|_, current| current.clone().tool_choice(ToolChoice::None)),
        )
        .max_turns(3)
        .build()
        .expect("an agent");
    let mut names = Vec::new();
    let mut last = None;
    let mut events = agent.run("What is the weather in Oslo?").stream();
    while let Some(event) = events.next().await {
        let name = serde_json::to_value(&event).expect("an event")["type"].clone();
        names.push(name.as_str().unwrap_or_default().to_owned());
        if let Event::ModelRetry { error, .. } = &event {
            panic!("a refused stream is not retried: {error}");
        }
        last = Some(event);
    }
    eprintln!("events: {names:?}");
    for name in ["tool.called", "tool.result", "run.completed"] {
        assert!(names.iter().any(|n| n == name), "no {name} in {names:?}");
    }
    assert!(!model.streams(), "the refusal is remembered");
    assert!(CALLS.load(Ordering::SeqCst) > before, "the tool ran");
    match last {
        Some(Event::Completed { state, .. }) => check(&RunResult { state: *state }),
        other => panic!("the run ended with {other:?}"),
    }
}

/// A traced run, exported over OTLP to the suite's receiver (`interop/otlp.sh`): the real
/// model's `chat` spans carry its token counts, as integers.
#[cfg(feature = "otel")]
#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn a_real_models_chat_spans_carry_its_token_counts() {
    use tracing_subscriber::layer::SubscriberExt;

    use super::otlp::{assert_chat_span, otlp_url, run_spans};

    let telemetry = phaseo_agent::otel::Telemetry::new("phaseo-interop-llama")
        .endpoint(otlp_url())
        .build()
        .expect("telemetry");
    let result = {
        let _subscriber = tracing::subscriber::set_default(
            tracing_subscriber::registry().with(telemetry.layer()),
        );
        agent()
            .run("What is the weather in Oslo?")
            .first_turn(first_turn())
            .await
            .expect("the run completes")
    };
    check(&result);
    telemetry.shutdown().expect("the receiver took the spans");

    let spans = run_spans(result.state.run_id());
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s["name"] == "chat smollm2-135m-instruct")
        .collect();
    assert!(!chats.is_empty(), "chat spans of the run: {spans:?}");
    for chat in chats {
        assert_chat_span(chat, "openai");
    }
}
