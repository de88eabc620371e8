//! The model interface grown for real providers: finish reasons, usage, structured errors and the
//! agent's retries, empty answers, request metadata, streamed deltas, and runs that start from or
//! continue a conversation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::agent::{Counter, deploy_tool, status_tool};
use crate::support::wire::model_error;
use futures::StreamExt;
use futures::future::BoxFuture;
use phaseo_agent::{
    Agent, AgentError, Decisions, DeltaSink, Event, FinishReason, Message, Model, ModelDelta,
    ModelError, ModelErrorKind, ModelRequest, ModelResponse, RetryPolicy, RunState, RunStatus,
    ScriptedModel, ToolCall, Usage,
};
use serde_json::json;

fn usage(input: u64, output: u64) -> Usage {
    Usage::new(input, output)
}

// Retries.

#[tokio::test(start_paused = true)]
async fn a_rate_limited_request_is_retried_after_the_wait_the_provider_asked_for() {
    let model = ScriptedModel::new()
        .record_requests()
        .error(ModelError::from_status(429, "slow down").with_retry_after(Duration::from_secs(7)))
        .text("Hello!");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    let started = tokio::time::Instant::now();
    let events: Vec<Event> = agent.run("Hi").stream().collect().await;
    assert_eq!(started.elapsed(), Duration::from_secs(7));
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
    assert_eq!(retry.0, 1);
    assert_eq!(retry.1, 7_000);
    assert!(retry.2.contains("rate_limited (HTTP 429)"), "{}", retry.2);
    assert!(matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Hello!"));
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_and_give_up_after_the_limit() {
    let overloaded = || ModelError::from_status(529, "overloaded");
    let model = ScriptedModel::new()
        .record_requests()
        .error(overloaded())
        .error(overloaded())
        .error(overloaded())
        .error(overloaded())
        .text("never reached");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    let started = tokio::time::Instant::now();
    let failed = agent.run("Hi").await.unwrap_err();
    let error = model_error(&failed.error);
    assert_eq!(error.kind, ModelErrorKind::Overloaded);
    assert_eq!(error.status, Some(529));
    // One request and three retries; the waits are 0.5 s, 1 s and 2 s, each kept between half
    // and all of it by the jitter.
    assert_eq!(model.requests().len(), 4);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1_750) && waited <= Duration::from_millis(3_500),
        "{waited:?}"
    );
    assert_eq!(failed.state.expect("started").status(), RunStatus::Failed);
}

#[tokio::test(start_paused = true)]
async fn errors_that_fail_the_same_way_again_are_not_retried() {
    for (error, kind) in [
        (
            ModelError::from_status(400, "bad tool schema"),
            ModelErrorKind::BadRequest,
        ),
        (
            ModelError::from_status(401, "invalid api key"),
            ModelErrorKind::Authentication,
        ),
        (
            ModelError::from_status(400, "This model's maximum context length is 8192 tokens"),
            ModelErrorKind::ContextTooLong,
        ),
        (ModelError::other("custom failure"), ModelErrorKind::Other),
    ] {
        let model = ScriptedModel::new()
            .record_requests()
            .error(error)
            .text("unused");
        let agent = Agent::builder("a").model(model.clone()).build().unwrap();
        let failed = agent.run("Hi").await.unwrap_err();
        assert_eq!(model_error(&failed.error).kind, kind);
        assert_eq!(model.requests().len(), 1, "{kind} was retried");
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_longer_than_the_policy_allows_fails_at_once() {
    let model = ScriptedModel::new()
        .record_requests()
        .error(ModelError::from_status(429, "quota").with_retry_after(Duration::from_secs(3_600)))
        .text("unused");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    let started = tokio::time::Instant::now();
    let failed = agent.run("Hi").await.unwrap_err();
    assert_eq!(model_error(&failed.error).kind, ModelErrorKind::RateLimited);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn retries_can_be_turned_off() {
    let model = ScriptedModel::new()
        .record_requests()
        .error(ModelError::from_status(503, "unavailable"))
        .text("unused");
    let agent = Agent::builder("a")
        .model(model.clone())
        .model_retries(RetryPolicy::none())
        .build()
        .unwrap();
    agent.run("Hi").await.unwrap_err();
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn the_retry_delay_follows_the_policy() {
    let policy = RetryPolicy::default();
    let overloaded = ModelError::from_status(503, "x");
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis());
    assert_eq!(ms(policy.delay(0, &overloaded, 0.0)), Some(250));
    assert_eq!(ms(policy.delay(0, &overloaded, 0.999_999)), Some(499));
    assert_eq!(ms(policy.delay(2, &overloaded, 0.0)), Some(1_000));
    assert_eq!(policy.delay(3, &overloaded, 0.0), None, "retries used up");
    let long = policy.max_retries(40);
    assert_eq!(ms(long.delay(30, &overloaded, 0.0)), Some(10_000), "capped");
    assert_eq!(
        policy.delay(0, &ModelError::from_status(400, "x"), 0.5),
        None
    );
    let asked = overloaded.clone().with_retry_after(Duration::from_secs(5));
    assert_eq!(policy.delay(1, &asked, 0.0), Some(Duration::from_secs(5)));
}

#[test]
fn http_statuses_map_to_kinds() {
    for (status, kind) in [
        (429, ModelErrorKind::RateLimited),
        (529, ModelErrorKind::Overloaded),
        (500, ModelErrorKind::Overloaded),
        (502, ModelErrorKind::Overloaded),
        (503, ModelErrorKind::Overloaded),
        (504, ModelErrorKind::Timeout),
        (408, ModelErrorKind::Timeout),
        (401, ModelErrorKind::Authentication),
        (403, ModelErrorKind::Authentication),
        (400, ModelErrorKind::BadRequest),
        (404, ModelErrorKind::BadRequest),
        (413, ModelErrorKind::ContextTooLong),
    ] {
        let error = ModelError::from_status(status, "m");
        assert_eq!(error.kind, kind, "HTTP {status}");
        assert_eq!(error.status, Some(status));
    }
    let context = ModelError::from_status(400, "error code: context_length_exceeded");
    assert_eq!(context.kind, ModelErrorKind::ContextTooLong);
    assert!(!context.is_retryable());
}

// Empty answers.

#[tokio::test(start_paused = true)]
async fn an_empty_answer_is_an_error_of_its_own_kind_and_is_retried() {
    let empty = || ModelResponse::default().finish_reason(FinishReason::Length);
    let model = ScriptedModel::new()
        .record_requests()
        .turn(empty())
        .text("Hello!");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    assert_eq!(agent.run("Hi").await.unwrap().output(), Some("Hello!"));

    let model = ScriptedModel::new()
        .record_requests()
        .turn(empty())
        .turn(ModelResponse::text("  "))
        .turn(empty())
        .turn(empty());
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    let failed = agent.run("Hi").await.unwrap_err();
    let error = model_error(&failed.error);
    assert_eq!(error.kind, ModelErrorKind::EmptyResponse);
    assert!(
        error.message.contains("finish reason: \"length\""),
        "{error}"
    );
    let state = failed.state.expect("started");
    assert_eq!(state.output(), None, "not a completed run with \"\"");
}

// Usage, finish reasons, metadata.

#[tokio::test]
async fn usage_is_on_each_turn_and_summed_over_the_run_across_a_pause() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .turn(
            ModelResponse::tool_calls([ToolCall::new(
                "c1",
                "deploy",
                json!({"environment": "prod"}),
            )])
            .usage(usage(100, 10)),
        )
        .turn(ModelResponse::text("Deployed.").usage(usage(150, 5).cached_input_tokens(80)));
    let agent = Agent::builder("a")
        .model(model)
        .tool(deploy_tool(&runs))
        .build()
        .unwrap();
    let paused = agent.run("ship").await.unwrap();
    assert_eq!(paused.usage(), usage(100, 10));
    let stored = RunState::from_json(&paused.state.to_json()).unwrap();
    assert_eq!(stored.usage(), usage(100, 10));
    let events: Vec<Event> = agent
        .resume(&stored, Decisions::for_run(stored.run_id()).approve("c1"))
        .stream()
        .collect()
        .await;
    let turn = events
        .iter()
        .find_map(|e| match e {
            Event::ModelTurn {
                usage,
                finish_reason,
                ..
            } => Some((*usage, finish_reason.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        turn,
        (
            Some(usage(150, 5).cached_input_tokens(80)),
            Some(FinishReason::Stop)
        )
    );
    let Some(Event::Completed { state, .. }) = events.last() else {
        panic!("completed")
    };
    assert_eq!(state.usage(), Usage::new(250, 15).cached_input_tokens(80));
}

#[tokio::test]
async fn a_state_without_usage_loads_with_zero() {
    let agent = Agent::builder("a")
        .model(ScriptedModel::new().record_requests().text("Hi"))
        .build()
        .unwrap();
    let done = agent.run("Hi").await.unwrap();
    let json = done.state.to_json();
    assert!(!json.contains("usage"), "zero usage is not written: {json}");
    assert_eq!(
        RunState::from_json(&json).unwrap().usage(),
        Usage::default()
    );
}

#[tokio::test]
async fn each_request_names_its_run_agent_and_turn() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "get_status", json!({"service": "api"}))
        .text("Up.");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    agent.run("up?").run_id("run-42").await.unwrap();
    let metas: Vec<_> = model.requests().into_iter().map(|r| r.meta).collect();
    assert_eq!(metas.len(), 2);
    for (turn, meta) in metas.iter().enumerate() {
        assert_eq!(meta.run_id, "run-42");
        assert_eq!(meta.agent_id, "ops");
        assert_eq!(meta.turn, turn);
    }
}

// Streaming.

#[tokio::test]
async fn a_streaming_model_sends_deltas_before_its_turn() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call(
            "c1",
            "get_status",
            json!({"service": "api-gateway-eu-west"}),
        )
        .text("The API gateway is up and healthy.")
        .streaming(true);
    let agent = Agent::builder("ops")
        .model(model)
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("up?").stream().collect().await;
    let mut text = String::new();
    let mut arguments = String::new();
    let mut names = Vec::new();
    for event in &events {
        names.push(event.name());
        if let Event::ModelDelta { delta, .. } = event {
            match delta {
                ModelDelta::Text { text: piece } => text.push_str(piece),
                ModelDelta::ToolCall {
                    index,
                    id,
                    name,
                    arguments: piece,
                } => {
                    assert_eq!(*index, 0);
                    if let Some(id) = id {
                        assert_eq!(id, "c1");
                        assert_eq!(name.as_deref(), Some("get_status"));
                    }
                    arguments.push_str(piece);
                }
                other => panic!("unexpected delta {other:?}"),
            }
        }
    }
    assert_eq!(text, "The API gateway is up and healthy.");
    assert_eq!(arguments, r#"{"service":"api-gateway-eu-west"}"#);
    // Deltas of a turn come before its `model.turn`.
    let first_turn = names.iter().position(|n| *n == "model.turn").unwrap();
    assert_eq!(names[1], "model.delta");
    assert!(names[1..first_turn].iter().all(|n| *n == "model.delta"));
    assert!(
        names[1..first_turn].len() >= 4,
        "the arguments came in pieces"
    );
}

/// A model that counts which of its two methods the agent calls.
#[derive(Default, Clone)]
struct Counting {
    plain: Arc<AtomicUsize>,
    streamed: Arc<AtomicUsize>,
}

impl Model for Counting {
    fn respond<'a>(
        &'a self,
        _request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.plain.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(ModelResponse::text("plain")) })
    }

    fn respond_streaming<'a>(
        &'a self,
        _request: &'a ModelRequest,
        deltas: &'a DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.streamed.fetch_add(1, Ordering::SeqCst);
        deltas.text("stream");
        deltas.text("ed");
        Box::pin(async { Ok(ModelResponse::text("streamed")) })
    }
}

#[tokio::test]
async fn a_run_without_a_listener_does_not_stream() {
    let model = Counting::default();
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    assert_eq!(agent.run("Hi").await.unwrap().output(), Some("plain"));
    assert_eq!(
        (
            model.plain.load(Ordering::SeqCst),
            model.streamed.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    let names: Vec<&str> = agent.run("Hi").stream().map(|e| e.name()).collect().await;
    assert_eq!(
        names,
        [
            "run.started",
            "model.delta",
            "model.delta",
            "model.turn",
            "run.completed"
        ]
    );
    assert_eq!(model.streamed.load(Ordering::SeqCst), 1);
}

// Conversations.

#[tokio::test]
async fn a_run_starts_from_a_conversation() {
    let model = ScriptedModel::new()
        .record_requests()
        .text("You said your name is Ada.");
    let agent = Agent::builder("chat").model(model.clone()).build().unwrap();
    let history = vec![
        Message::User {
            content: "My name is Ada.".into(),
        },
        Message::Assistant {
            content: Some("Nice to meet you, Ada.".into()),
            tool_calls: vec![],
        },
    ];
    let done = agent
        .run("What is my name?")
        .history(history.clone())
        .await
        .unwrap();
    let sent = &model.requests()[0].messages;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[..2], history[..]);
    assert_eq!(done.state.messages().len(), 4);
}

#[tokio::test]
async fn a_completed_run_continues_with_a_fresh_turn_budget() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "get_status", json!({"service": "api"}))
        .text("Up.")
        .tool_call("c2", "get_status", json!({"service": "db"}))
        .text("Also up.");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .max_turns(2)
        .state_key([7u8; 32])
        .build()
        .unwrap();
    let first = agent.run("api?").await.unwrap();
    let stored = RunState::from_json(&first.state.to_json()).unwrap();
    let second = agent.continue_run(&stored, "and the db?").await.unwrap();
    assert_eq!(second.output(), Some("Also up."));
    assert_eq!(second.state.turns(), 4);
    assert_eq!(runs.get(), 2);
    let sent = &model.requests()[2].messages;
    assert!(matches!(&sent[sent.len() - 1], Message::User { content } if content == "and the db?"));
    assert_eq!(sent.len(), 5);

    // Only a completed run continues, and an edited one is refused.
    let paused_agent = Agent::builder("ops")
        .model(ScriptedModel::new().record_requests().tool_call(
            "c1",
            "deploy",
            json!({"environment": "prod"}),
        ))
        .tool(deploy_tool(&runs))
        .build()
        .unwrap();
    let paused = paused_agent.run("ship").await.unwrap();
    let refused = paused_agent
        .continue_run(&paused.state, "hello")
        .await
        .unwrap_err();
    assert!(
        matches!(refused.error, AgentError::NotCompleted { .. }),
        "{refused}"
    );
    let edited = stored.to_json().replace("Up.", "Down.");
    let edited = RunState::from_json(&edited).unwrap();
    let refused = agent.continue_run(&edited, "hello").await.unwrap_err();
    assert!(
        matches!(refused.error, AgentError::StateSignature(_)),
        "{refused}"
    );
}

#[tokio::test]
async fn the_first_request_can_be_changed_like_a_next_turn() {
    let model = ScriptedModel::new()
        .record_requests()
        .text("ok")
        .text("again");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    let done = agent
        .run("go")
        .first_turn(
            phaseo_agent::TurnParams::default()
                .tool_choice(phaseo_agent::ToolChoice::Required)
                .temperature(0.0),
        )
        .await
        .unwrap();
    let first = &model.requests()[0];
    assert_eq!(first.tool_choice, phaseo_agent::ToolChoice::Required);
    assert_eq!(first.temperature, Some(0.0));
    agent.continue_run(&done.state, "more").await.unwrap();
    assert_eq!(
        model.requests()[1].tool_choice,
        phaseo_agent::ToolChoice::Auto
    );
}

#[tokio::test]
async fn requests_carry_the_agents_parallel_tool_calls_setting() {
    let model = ScriptedModel::new().record_requests().text("a").text("b");
    let agent = Agent::builder("a").model(model.clone()).build().unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(model.requests()[0].parallel_tool_calls, None);
    let agent = Agent::builder("a")
        .model(model.clone())
        .parallel_tool_calls(false)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(model.requests()[1].parallel_tool_calls, Some(false));
}
