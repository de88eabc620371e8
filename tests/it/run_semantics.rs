//! Run semantics that must hold under every combination: fail-run stops the turn, only offered
//! tools run, approval rules compose, and a refused resume is visible on the event stream, told
//! apart from a failure.

use std::time::Duration;

use crate::support::agent::{Counter, deploy_tool, status_tool};
use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, AgentErrorKind, Decisions, Event, OnError, PendingKind, RunState, RunStatus,
    ScriptedModel, Tool, ToolCall, ToolChoice, ToolContext,
};
use serde_json::{Value, json};

/// A tool that fails at once.
fn failing(id: &str) -> Tool {
    Tool::new(id, "Always fails", json!({"type": "object"}), |_, _| {
        Err(AgentError::tool("broken"))
    })
}

/// A tool that works for `ms` milliseconds (counting starts, finishes and cancellations).
fn slow(id: &str, ms: u64, started: &Counter, finished: &Counter, cancelled: &Counter) -> Tool {
    let (started, finished, cancelled) = (started.clone(), finished.clone(), cancelled.clone());
    Tool::new(
        id,
        "Works a while",
        json!({"type": "object"}),
        move |_, ctx| {
            let (finished, cancelled) = (finished.clone(), cancelled.clone());
            started.bump();
            let token = ctx.cancellation_token().clone();
            tokio::spawn(async move {
                token.cancelled().await;
                cancelled.bump();
            });
            async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                finished.bump();
                Ok(json!("finished"))
            }
        },
    )
}

/// The state the stream's last event carries, and the events' names.
async fn stream_end(stream: phaseo_agent::EventStream) -> (Vec<&'static str>, Option<Event>) {
    let events: Vec<Event> = stream.collect().await;
    let names = events.iter().map(Event::name).collect();
    (names, events.into_iter().last())
}

#[tokio::test(start_paused = true)]
async fn fail_run_stops_the_turn_at_concurrency_one() {
    let (started, finished, cancelled) =
        (Counter::default(), Counter::default(), Counter::default());
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "f", json!({})),
        ToolCall::new("c2", "slow", json!({})),
        ToolCall::new("c3", "slow", json!({})),
    ]);
    let agent = Agent::builder("t")
        .model(model)
        .tool(failing("f").on_error(OnError::FailRun))
        .tool(slow("slow", 10, &started, &finished, &cancelled))
        .build()
        .unwrap();
    let (names, last) = stream_end(agent.run("go").stream()).await;
    assert_eq!(started.get(), 0, "no later call of the failed turn starts");
    assert_eq!(names.last(), Some(&"run.failed"));
    let Some(Event::Failed { state, error, .. }) = last else {
        panic!("{names:?}")
    };
    assert_eq!(error, "broken");
    let steps: Vec<(&str, bool)> = state
        .steps()
        .iter()
        .map(|s| (s.call_id.as_str(), s.is_error))
        .collect();
    assert_eq!(
        steps,
        [("c1", true), ("c2", true), ("c3", true)],
        "every call of the turn is recorded"
    );
    assert!(
        state.steps()[1].content.contains("cancelled"),
        "{}",
        state.steps()[1].content
    );
}

#[tokio::test(start_paused = true)]
async fn fail_run_cancels_running_siblings_and_starts_no_queued_call_at_concurrency_four() {
    let (started, finished, cancelled) =
        (Counter::default(), Counter::default(), Counter::default());
    let mut calls = vec![ToolCall::new("c0", "slow", json!({}))];
    calls.push(ToolCall::new("c1", "f", json!({})));
    calls.extend((2..6).map(|i| ToolCall::new(format!("c{i}"), "slow", json!({}))));
    let agent = Agent::builder("t")
        .model(ScriptedModel::new().record_requests().tool_calls(calls))
        .tool(failing("f").on_error(OnError::FailRun))
        .tool(slow("slow", 50, &started, &finished, &cancelled))
        .tool_concurrency(4)
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err.to_string(), "broken");
    // c0, c2 and c3 were running beside c1; c4 and c5 were queued.
    assert_eq!(started.get(), 3, "the queued calls never started");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        finished.get(),
        0,
        "the running calls were dropped, not left to finish"
    );
    assert_eq!(cancelled.get(), 3, "their cancellation tokens fired");
}

#[tokio::test]
async fn a_tool_hidden_by_active_tools_is_treated_as_unknown() {
    let runs = Counter::default();
    // The first call narrows the next turn to `lookup`; the model then calls the hidden get_status.
    let narrow = Tool::new(
        "narrow",
        "Narrow the tools",
        json!({"type": "object"}),
        |_, _| Ok(json!("ok")),
    )
    .next_turn(|_, params| params.clone().active_tools(["narrow"]));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "narrow", json!({}))
        .tool_call("c2", "get_status", json!({"service": "api"}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(narrow)
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err, AgentError::UnknownTool("get_status".into()));
    assert_eq!(runs.get(), 0, "a tool not offered on the turn never runs");
    let offered: Vec<String> = model.requests()[1]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["narrow"]);
}

#[tokio::test]
async fn a_call_under_tool_choice_none_is_treated_as_unknown_and_its_policy_applies() {
    let runs = Counter::default();
    let none = Tool::new(
        "quiet",
        "Ask for no tools",
        json!({"type": "object"}),
        |_, _| Ok(json!("ok")),
    )
    .next_turn(|_, params| params.clone().tool_choice(ToolChoice::None));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "quiet", json!({}))
        .tool_call("c2", "get_status", json!({"service": "api"}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(none)
        .tool(status_tool(&runs))
        .on_unknown_tool(OnError::ReturnToModel)
        .build()
        .unwrap();
    let done = agent.run("go").await.unwrap();
    assert_eq!(done.output(), Some("done"));
    assert_eq!(runs.get(), 0);
    assert_eq!(
        done.state.tool_result("c2"),
        Some(r#"{"error":"Unknown tool: get_status"}"#)
    );
}

#[tokio::test]
async fn an_agent_level_approval_rule_adds_to_a_tools_own_gate_and_never_removes_it() {
    let (status_runs, deploy_runs) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "get_status", json!({"service": "payments"})),
        ToolCall::new("c2", "deploy", json!({"environment": "staging"})),
    ]);
    // A rule for one tool (get_status on payments) must not open deploy's own gate.
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&status_runs))
        .tool(deploy_tool(&deploy_runs))
        .approval(|call: &ToolCall, _ctx: &ToolContext| call.arguments.contains("payments"))
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let pending: Vec<(&str, PendingKind)> = paused
        .pending()
        .iter()
        .map(|p| (p.call.id.as_str(), p.kind))
        .collect();
    assert_eq!(
        pending,
        [
            ("c1", PendingKind::ToolApproval),
            ("c2", PendingKind::ToolApproval)
        ]
    );
    assert_eq!(
        deploy_runs.get(),
        0,
        "deploy's own require_approval still holds"
    );
}

#[tokio::test]
async fn an_approval_policy_sees_the_tools_own_verdict_and_decides() {
    let (status_runs, deploy_runs) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "payments"})),
            ToolCall::new("c2", "deploy", json!({"environment": "staging"})),
        ])
        .text("ok");
    // An explicit policy: staging deploys need no approval, payments lookups do.
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&status_runs))
        .tool(deploy_tool(&deploy_runs))
        .approval_policy(|call: &ToolCall, _ctx: &ToolContext, tool_says: bool| {
            let staging = call.name == "deploy" && call.arguments.contains("staging");
            (tool_says && !staging) || call.arguments.contains("payments")
        })
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let pending: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(pending, ["c1"]);
    assert_eq!(deploy_runs.get(), 1);
}

#[tokio::test]
async fn a_panicking_approval_policy_fails_closed() {
    let runs = Counter::default();
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "get_status",
        json!({"service": "api"}),
    );
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&runs))
        .approval_policy(|_: &ToolCall, _: &ToolContext, _: bool| -> bool {
            panic!("bug in the policy")
        })
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.status(), RunStatus::WaitingForHuman);
    assert_eq!(runs.get(), 0);
}

/// A paused state of `agent` (one `deploy` call, `c1`, waiting for approval).
async fn paused(agent: &Agent) -> RunState {
    agent.run("ship").await.unwrap().state
}

fn gated_agent(id: &str, key: Option<&[u8]>) -> Agent {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "prod"}))
        .text("done");
    let builder = Agent::builder(id)
        .model(model)
        .tool(deploy_tool(&Counter::default()));
    match key {
        Some(key) => builder.state_key(key).build().unwrap(),
        None => builder.build().unwrap(),
    }
}

/// The stream of a refused resume is one `run.refused`, carrying the refusal and the state as it
/// was given (still paused, so it can be resumed properly).
async fn assert_refused_on_stream(
    agent: &Agent,
    state: &RunState,
    decisions: Decisions,
    expected: &str,
) {
    let (names, last) = stream_end(agent.resume(state, decisions).stream()).await;
    assert_eq!(names, ["run.refused"], "a refused resume starts nothing");
    let Some(Event::Refused {
        error,
        state: carried,
        ..
    }) = last
    else {
        panic!("{names:?}")
    };
    assert!(error.contains(expected), "{error}");
    assert_eq!(
        carried.to_json(),
        state.to_json(),
        "the state is carried unchanged"
    );
}

#[tokio::test]
async fn a_resume_missing_a_decision_is_refused_on_the_stream() {
    let agent = gated_agent("t", None);
    let state = paused(&agent).await;
    assert_refused_on_stream(&agent, &state, Decisions::new(), "no decision for pending").await;
}

#[tokio::test]
async fn a_resume_with_a_bad_signature_is_refused_on_the_stream() {
    let key = b"a secret of 32 bytes or more....";
    let agent = gated_agent("t", Some(key));
    let state = paused(&agent).await;
    let mut stored: Value = serde_json::from_str(&state.to_json()).unwrap();
    stored["approved_tools"] = json!(["deploy"]);
    let forged = RunState::from_json(&stored.to_string()).unwrap();
    assert_refused_on_stream(&agent, &forged, Decisions::new().approve("c1"), "signature").await;
}

#[tokio::test]
async fn a_resume_by_another_agent_is_refused_on_the_stream() {
    let state = paused(&gated_agent("first", None)).await;
    let other = gated_agent("second", None);
    assert_refused_on_stream(
        &other,
        &state,
        Decisions::new().approve("c1"),
        "belongs to agent",
    )
    .await;
}

#[tokio::test]
async fn a_resume_of_a_run_that_is_not_paused_is_refused_on_the_stream() {
    let agent = Agent::builder("t")
        .model(ScriptedModel::new().record_requests().text("hi"))
        .build()
        .unwrap();
    let done = agent.run("hello").await.unwrap().state;
    assert_refused_on_stream(&agent, &done, Decisions::new(), "not waiting for a person").await;
}

/// A refused resume of a failed state and the failure itself, on a stream: two kinds of event,
/// each with the error's kind, the refusal's kind the one a plain `resume` returns.
#[tokio::test]
async fn a_refused_resume_of_a_failed_state_is_told_apart_from_the_failure_on_the_stream() {
    // An empty script: the model has nothing to say, and the run fails.
    let agent = Agent::builder("t")
        .model(ScriptedModel::new())
        .build()
        .unwrap();
    let (_, failure) = stream_end(agent.run("hello").stream()).await;
    let failure = serde_json::to_value(failure.unwrap()).unwrap();
    assert_eq!(failure["type"], "run.failed");
    assert_eq!(failure["kind"], "model");
    let failed = RunState::try_from(failure["state"].clone()).unwrap();

    let (names, refusal) = stream_end(agent.resume(&failed, Decisions::new()).stream()).await;
    assert_eq!(names.len(), 1, "a refused resume starts nothing: {names:?}");
    let refusal = serde_json::to_value(refusal.unwrap()).unwrap();
    assert_eq!(refusal["type"], "run.refused");
    assert_eq!(refusal["kind"], "not_paused");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap()
            .contains("not waiting for a person"),
        "{refusal}"
    );
    assert_eq!(
        refusal["state"], failure["state"],
        "the state as it was given"
    );

    // The kind is the one the awaited resume returns.
    let plain = agent.resume(&failed, Decisions::new()).await.unwrap_err();
    assert_eq!(plain.error.kind(), AgentErrorKind::NotPaused);
    assert_eq!(
        refusal["kind"],
        serde_json::to_value(plain.error.kind()).unwrap()
    );
    assert_eq!(refusal["error"], plain.error.to_string());
}

/// Every refusal on a stream is `run.refused` with the kind of the awaited request's error: a
/// resume, a retry and a continuation alike.
#[tokio::test]
async fn refusals_carry_the_kind_the_awaited_request_returns() {
    let agent = gated_agent("t", None);
    let paused_state = paused(&agent).await;
    let only = |events: Vec<Event>| match <[Event; 1]>::try_from(events) {
        Ok([Event::Refused { kind, error, .. }]) => (kind, error),
        Ok(other) => panic!("{other:?}"),
        Err(events) => panic!("{events:?}"),
    };
    let cases = [
        (
            only(
                agent
                    .resume(&paused_state, Decisions::new())
                    .stream()
                    .collect()
                    .await,
            ),
            agent
                .resume(&paused_state, Decisions::new())
                .await
                .unwrap_err(),
        ),
        (
            only(agent.retry(&paused_state).stream().collect().await),
            agent.retry(&paused_state).await.unwrap_err(),
        ),
        (
            only(
                agent
                    .continue_run(&paused_state, "more")
                    .stream()
                    .collect()
                    .await,
            ),
            agent.continue_run(&paused_state, "more").await.unwrap_err(),
        ),
    ];
    let kinds: Vec<AgentErrorKind> = cases.iter().map(|((kind, _), _)| *kind).collect();
    assert_eq!(
        kinds,
        [
            AgentErrorKind::MissingDecision,
            AgentErrorKind::NotFailed,
            AgentErrorKind::NotCompleted
        ]
    );
    for ((kind, error), plain) in cases {
        assert_eq!(kind, plain.error.kind());
        assert_eq!(error, plain.error.to_string());
        assert!(plain.state.is_none(), "a refusal has no state of its own");
    }
}
