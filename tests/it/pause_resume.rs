//! Pause and resume: gated and external calls, mixed turns, decisions by call id, states stored as
//! JSON and resumed by a freshly built agent.

use crate::support::agent::{
    Counter, deploy_tool, lookup_tool, result_ids, result_of, status_tool,
};
use phaseo_agent::{
    Agent, AgentError, Decision, Decisions, PendingKind, RunState, RunStatus, STATE_VERSION,
    ScriptedModel, Tool, ToolCall,
};
use serde_json::{Value, json};

fn agent(model: &ScriptedModel, status_runs: &Counter, deploy_runs: &Counter) -> Agent {
    Agent::builder("release")
        .instructions("Ship releases carefully.")
        .model(model.clone())
        .tool(status_tool(status_runs))
        .tool(deploy_tool(deploy_runs))
        .tool(lookup_tool())
        .build()
        .unwrap()
}

/// A turn with an automatic call, a gated call and an external call.
fn mixed_turn() -> ScriptedModel {
    ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "api"})),
            ToolCall::new("c2", "deploy", json!({"environment": "production"})),
            ToolCall::new("c3", "ticket_lookup", json!({"ticket_id": "T-7"})),
        ])
        .text("Deployed, and ticket T-7 is about the printer.")
}

#[tokio::test]
async fn a_gated_call_pauses_the_run_for_approval() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .text("done");
    let result = agent(&model, &status, &deploy).run("ship").await.unwrap();
    assert_eq!(result.status(), RunStatus::WaitingForHuman);
    assert_eq!(result.pending().len(), 1);
    assert_eq!(result.pending()[0].kind, PendingKind::ToolApproval);
    assert_eq!(result.pending()[0].call.id, "c1");
    assert_eq!(
        result.pending()[0].arguments,
        json!({"environment": "staging"})
    );
    assert_eq!(deploy.get(), 0, "a gated call does not run before approval");
    let stored: Value = serde_json::from_str(&result.state.to_json()).unwrap();
    assert_eq!(stored["status"], "waiting_for_human");
    assert_eq!(stored["pending"][0]["kind"], "tool_approval");
    assert_eq!(stored["version"], STATE_VERSION);
}

#[tokio::test]
async fn an_external_call_pauses_for_its_output_and_the_output_reaches_the_model() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "ticket_lookup", json!({"ticket_id": "T-7"}))
        .text("It is about the printer.");
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("what is T-7?").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ExternalOutput);
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().output("c1", json!({"title": "Printer on fire"})),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("It is about the printer."));
    assert_eq!(
        result_of(&model.requests()[1], "c1"),
        json!({"title": "Printer on fire"})
    );
}

#[tokio::test]
async fn in_a_mixed_turn_automatic_results_are_kept_across_the_pause() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = mixed_turn();
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship and look up T-7").await.unwrap();

    assert_eq!(status.get(), 1, "the automatic call ran before the pause");
    let kinds: Vec<(String, PendingKind)> = paused
        .pending()
        .iter()
        .map(|p| (p.call.id.clone(), p.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("c2".to_string(), PendingKind::ToolApproval),
            ("c3".to_string(), PendingKind::ExternalOutput)
        ]
    );

    // Store, drop, reload: the automatic result must survive.
    let json = paused.state.to_json();
    drop(paused);
    let state = RunState::from_json(&json).unwrap();
    let done = agent
        .resume(
            &state,
            Decisions::new()
                .approve("c2")
                .output("c3", json!({"title": "Printer"})),
        )
        .await
        .unwrap();

    assert_eq!(done.status(), RunStatus::Completed);
    assert_eq!(
        status.get(),
        1,
        "resuming does not re-run the automatic call"
    );
    assert_eq!(deploy.get(), 1);
    let last = model.requests().pop().unwrap();
    let ids = result_ids(&last);
    assert_eq!(ids, ["c1", "c2", "c3"], "results in call order");
    assert_eq!(
        result_of(&last, "c1"),
        json!({"service": "api", "status": "healthy"})
    );
    assert_eq!(
        result_of(&last, "c2"),
        json!({"environment": "production", "deployed": true})
    );
}

#[tokio::test]
async fn a_rejection_never_runs_the_call_and_its_message_reaches_the_model() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "production"}))
        .text("Understood, not deploying.");
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().reject("c1", "Code freeze until Monday"),
        )
        .await
        .unwrap();
    assert_eq!(deploy.get(), 0);
    assert_eq!(done.output(), Some("Understood, not deploying."));
    let error = result_of(&model.requests()[1], "c1")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("Code freeze until Monday"), "{error}");
}

#[tokio::test]
async fn a_decision_for_an_unknown_call_is_an_error_and_leaves_the_state_unchanged() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = mixed_turn();
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let before = paused.state.to_json();

    let err = agent
        .resume(
            &paused.state,
            Decisions::new()
                .approve("c2")
                .output("c3", json!({}))
                .approve("c99"),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::NotPending {
            call_id: "c99".into(),
            pending: vec!["c2".into(), "c3".into()]
        }
    );
    assert_eq!(paused.state.to_json(), before, "byte-for-byte unchanged");
    assert_eq!(deploy.get(), 0, "nothing ran");

    // A decision for a call that already ran (not pending) is refused the same way.
    let err = agent
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::NotPending { ref call_id, .. } if call_id == "c1"));
    assert_eq!(paused.state.to_json(), before);

    // The state still resumes correctly afterwards.
    let done = agent
        .resume(
            &paused.state,
            Decisions::new()
                .approve("c2")
                .output("c3", json!({"title": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), RunStatus::Completed);
    assert_eq!(deploy.get(), 1);
}

#[tokio::test]
async fn resuming_with_a_missing_decision_names_the_calls() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = mixed_turn();
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let before = paused.state.to_json();
    let err = agent
        .resume(&paused.state, Decisions::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::MissingDecision {
            call_ids: vec!["c2".into(), "c3".into()]
        }
    );
    assert!(err.to_string().contains("c2, c3"));
    let err = agent
        .resume(&paused.state, Decisions::new().approve("c2"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::MissingDecision {
            call_ids: vec!["c3".into()]
        }
    );
    assert_eq!(paused.state.to_json(), before);
    assert_eq!(deploy.get(), 0);
}

#[tokio::test]
async fn decisions_that_do_not_fit_the_pending_kind_are_refused() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = mixed_turn();
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let before = paused.state.to_json();

    let err = agent
        .resume(
            &paused.state,
            Decisions::new()
                .output("c2", json!({"deployed": true}))
                .output("c3", json!({})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err.error, AgentError::DecisionMismatch { ref call_id, kind: "tool_approval", .. } if call_id == "c2"),
        "{err}"
    );

    let err = agent
        .resume(&paused.state, Decisions::new().approve("c2").approve("c3"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err.error, AgentError::DecisionMismatch { hint, .. } if hint.contains("supply its output")),
        "{err}"
    );

    let err = agent
        .resume(
            &paused.state,
            Decisions::new()
                .approve("c2")
                .approve("c2")
                .output("c3", json!({})),
        )
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::DuplicateDecision("c2".into()));
    assert_eq!(paused.state.to_json(), before);
    assert_eq!(deploy.get(), 0);
}

#[tokio::test]
async fn a_state_round_trips_through_json_into_a_freshly_built_agent() {
    // "Process one": run until the pause, keep only the JSON text.
    let json = {
        let (status, deploy) = (Counter::default(), Counter::default());
        let model = ScriptedModel::new().record_requests().tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "api"})),
            ToolCall::new("c2", "deploy", json!({"environment": "production"})),
        ]);
        let paused = agent(&model, &status, &deploy).run("ship").await.unwrap();
        assert_eq!(status.get(), 1);
        paused.state.to_json()
    };

    // "Process two": a new agent, a new model with the rest of the script, the state from JSON.
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .text("Production is deployed.");
    let fresh = agent(&model, &status, &deploy);
    let state: RunState = serde_json::from_str(&json).unwrap();
    let done = fresh
        .resume(&state, Decisions::new().approve("c2"))
        .await
        .unwrap();

    assert_eq!(done.output(), Some("Production is deployed."));
    assert_eq!(status.get(), 0, "the automatic call is not run again");
    assert_eq!(deploy.get(), 1, "the approved call runs exactly once");
    let request = &model.requests()[0];
    assert_eq!(request.instructions, "Ship releases carefully.");
    assert_eq!(
        result_of(request, "c1"),
        json!({"service": "api", "status": "healthy"})
    );
    assert_eq!(
        result_of(request, "c2"),
        json!({"environment": "production", "deployed": true})
    );
    assert_eq!(done.state.run_id(), state.run_id());
}

#[tokio::test]
async fn a_run_can_pause_more_than_once() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .tool_call("c2", "deploy", json!({"environment": "production"}))
        .text("Both deployed.");
    let agent = agent(&model, &status, &deploy);
    let first = agent.run("ship both").await.unwrap();
    let second = agent
        .resume(&first.state, Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert!(second.is_paused());
    assert_eq!(second.pending()[0].call.id, "c2");
    assert_eq!(deploy.get(), 1);
    let done = agent
        .resume(&second.state, Decisions::new().approve("c2"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Both deployed."));
    assert_eq!(deploy.get(), 2);
    // A completed run cannot be resumed.
    let err = agent
        .resume(&done.state, Decisions::new())
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::NotPaused { .. }), "{err}");
}

#[tokio::test]
async fn states_of_unknown_versions_or_shapes_are_clear_errors() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "deploy",
        json!({"environment": "qa"}),
    );
    let paused = agent(&model, &status, &deploy).run("ship").await.unwrap();
    let mut value: Value = serde_json::from_str(&paused.state.to_json()).unwrap();

    value["version"] = json!(STATE_VERSION + 1);
    let err = RunState::from_json(&value.to_string()).unwrap_err();
    assert_eq!(
        err,
        AgentError::UnsupportedStateVersion {
            found: u64::from(STATE_VERSION) + 1,
            supported: STATE_VERSION
        }
    );
    let err = serde_json::from_str::<RunState>(&value.to_string()).unwrap_err();
    assert!(
        err.to_string().contains("unsupported run state version"),
        "{err}"
    );

    let err = RunState::from_json("{\"run_id\": \"x\"}").unwrap_err();
    assert!(err.to_string().contains("no `version` field"), "{err}");
    let err = RunState::from_json("not json").unwrap_err();
    assert!(matches!(err, AgentError::InvalidState(_)));

    // A forged pending call that is not part of the paused turn is refused.
    value["version"] = json!(STATE_VERSION);
    let mut forged = value.clone();
    forged["pending"][0]["call"]["id"] = json!("forged");
    let err = RunState::from_json(&forged.to_string()).unwrap_err();
    assert!(err.to_string().contains("forged"), "{err}");
    // So is one with the right id and other arguments: the pending call is what would run.
    let mut forged = value.clone();
    forged["pending"][0]["call"]["arguments"] = json!(r#"{"environment":"production"}"#);
    let err = RunState::from_json(&forged.to_string()).unwrap_err();
    assert!(matches!(err, AgentError::InvalidState(_)), "{err}");
}

#[tokio::test]
async fn approving_with_edited_arguments_runs_the_edit_and_records_it() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "production"}))
        .text("Deployed to staging instead.");
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().decide(
                "c1",
                Decision::ApproveWithArguments {
                    arguments: json!({"environment": "staging"}),
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Deployed to staging instead."));
    let request = &model.requests()[1];
    assert_eq!(
        result_of(request, "c1"),
        json!({"environment": "staging", "deployed": true})
    );
    let edited = request.messages.iter().find_map(|m| match m {
        phaseo_agent::Message::Assistant { tool_calls, .. } => tool_calls.first().cloned(),
        _ => None,
    });
    assert_eq!(edited.unwrap().arguments, r#"{"environment":"staging"}"#);
}

#[tokio::test]
async fn edited_arguments_that_fail_validation_are_refused_before_anything_runs() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "production"}))
        .text("ok");
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let before = paused.state.to_json();
    let err = agent
        .resume(
            &paused.state,
            Decisions::new().approve_with_arguments("c1", json!({"environment": 3})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid tool input: $.environment: 3 is not of type "string""#
    );
    assert_eq!(deploy.get(), 0);
    assert_eq!(paused.state.to_json(), before);
}

#[tokio::test]
async fn edited_arguments_go_through_the_tools_custom_input_validator_too() {
    let deploy = Counter::default();
    let ran = deploy.clone();
    let tool = Tool::new(
        "deploy",
        "Deploy a service",
        crate::support::agent::object_schema(
            json!({"environment": {"type": "string"}}),
            &["environment"],
        ),
        move |input, _| {
            ran.bump();
            Ok(input)
        },
    )
    .require_approval()
    .input_schema(|input: Value| match input["environment"].as_str() {
        Some("production") => Err("production is frozen"),
        _ => Ok(input),
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .text("ok");
    let agent = Agent::builder("release")
        .model(model)
        .tool(tool)
        .build()
        .unwrap();
    let paused = agent.run("ship").await.unwrap();
    let before = paused.state.to_json();
    // The edit passes the JSON Schema but not the tool's own validator.
    let err = agent
        .resume(
            &paused.state,
            Decisions::new().approve_with_arguments("c1", json!({"environment": "production"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool input: $: production is frozen"
    );
    assert_eq!(deploy.get(), 0);
    assert_eq!(paused.state.to_json(), before);
}

#[tokio::test]
async fn approve_always_covers_later_calls_of_the_same_tool_in_the_run() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .tool_call("c2", "deploy", json!({"environment": "qa"}))
        .text("done");
    let agent = agent(&model, &status, &deploy);
    let paused = agent.run("ship").await.unwrap();
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().decide("c1", Decision::ApproveAlways),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), RunStatus::Completed, "c2 did not pause");
    assert_eq!(deploy.get(), 2);
    // Another run starts with no standing approval.
    let model2 = ScriptedModel::new().record_requests().tool_call(
        "d1",
        "deploy",
        json!({"environment": "qa"}),
    );
    let again = Agent::builder("release")
        .model(model2)
        .tool(deploy_tool(&deploy))
        .build()
        .unwrap();
    assert!(again.run("ship").await.unwrap().is_paused());
}

#[tokio::test]
async fn a_state_from_another_agent_is_refused() {
    let (status, deploy) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "deploy",
        json!({"environment": "qa"}),
    );
    let paused = agent(&model, &status, &deploy).run("ship").await.unwrap();
    let other = Agent::builder("other")
        .model(ScriptedModel::new().record_requests())
        .tool(deploy_tool(&deploy))
        .build()
        .unwrap();
    let err = other
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap_err();
    assert!(matches!(err.error, AgentError::WrongAgent { .. }), "{err}");
}

fn signed_agent(model: &ScriptedModel, deploy: &Counter, key: &[u8]) -> Agent {
    Agent::builder("release")
        .model(model.clone())
        .tool(deploy_tool(deploy))
        .state_key(key)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_signed_state_resumes_in_a_fresh_agent_with_the_same_key_and_refuses_any_edit() {
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    let deploy = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "staging"}))
        .text("done");
    let paused = signed_agent(&model, &deploy, KEY)
        .run("ship")
        .await
        .unwrap();
    assert!(paused.state.is_signed());
    let json = paused.state.to_json();

    type Edit = (&'static str, fn(&mut Value));
    let edits: [Edit; 4] = [
        ("arguments", |v| {
            let production = json!(r#"{"environment":"production"}"#);
            v["pending"][0]["call"]["arguments"] = production.clone();
            v["paused_turn"]["calls"][0]["arguments"] = production;
        }),
        ("standing approval", |v| {
            v["approved_tools"] = json!(["deploy"])
        }),
        ("context", |v| v["context"] = json!({"role": "admin"})),
        ("signature", |v| v["signature"] = json!("00")),
    ];
    for (what, edit) in edits {
        let mut value: Value = serde_json::from_str(&json).unwrap();
        edit(&mut value);
        let forged = RunState::from_json(&value.to_string()).unwrap();
        let err = signed_agent(&model, &deploy, KEY)
            .resume(&forged, Decisions::new().approve("c1"))
            .await
            .unwrap_err();
        assert!(
            matches!(err.error, AgentError::StateSignature(_)),
            "{what}: {err}"
        );
    }
    let other_key = signed_agent(&model, &deploy, b"another key, also 32 bytes long!")
        .resume(
            &RunState::from_json(&json).unwrap(),
            Decisions::new().approve("c1"),
        )
        .await
        .unwrap_err();
    assert!(matches!(other_key.error, AgentError::StateSignature(_)));
    let unkeyed = agent(&model, &Counter::default(), &deploy)
        .resume(
            &RunState::from_json(&json).unwrap(),
            Decisions::new().approve("c1"),
        )
        .await
        .unwrap_err();
    assert!(
        unkeyed.to_string().contains("has no state key"),
        "{unkeyed}"
    );
    assert_eq!(
        deploy.get(),
        0,
        "no forged or unverifiable state ran anything"
    );

    let done = signed_agent(&model, &deploy, KEY)
        .resume(
            &RunState::from_json(&json).unwrap(),
            Decisions::new().approve("c1"),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("done"));
    assert!(done.state.is_signed());
    assert_eq!(deploy.get(), 1);
}

#[tokio::test]
async fn an_agent_with_a_state_key_refuses_unsigned_states() {
    let deploy = Counter::default();
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "deploy",
        json!({"environment": "qa"}),
    );
    let paused = agent(&model, &Counter::default(), &deploy)
        .run("ship")
        .await
        .unwrap();
    assert!(!paused.state.is_signed());
    let err = signed_agent(&model, &deploy, b"0123456789abcdef0123456789abcdef")
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not signed"), "{err}");
}

#[tokio::test]
async fn a_resumed_stream_reports_what_the_resumed_calls_do() {
    use futures::StreamExt;
    use phaseo_agent::{Event, Tool, ToolContext};
    let tool = Tool::new(
        "index",
        "Index",
        json!({"type": "object"}),
        |_, ctx: ToolContext| async move {
            ctx.emit_progress(json!({"phase": "scan"}))?;
            Ok(json!("indexed"))
        },
    )
    .require_approval();
    let lookup = lookup_tool().max_output_chars(4);
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "index", json!({})),
            ToolCall::new("c2", "ticket_lookup", json!({"ticket_id": "T-1"})),
            ToolCall::new("c3", "index", json!({})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .tool(lookup)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let decisions = Decisions::new()
        .approve("c1")
        .output("c2", json!("a long answer"))
        .reject("c3", "not now");
    let events: Vec<Event> = agent
        .resume(&paused.state, decisions)
        .stream()
        .collect()
        .await;
    let names: Vec<&str> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "run.started",
            "tool.result",
            "tool.error",
            "tool.called",
            "tool.preliminary_result",
            "tool.result",
            "model.turn",
            "run.completed"
        ],
        "answered calls first, then the approved call with its progress"
    );
    assert!(
        matches!(&events[2], Event::ToolError { error, .. } if error == "Rejected by a person: not now")
    );
    // A supplied output is capped by its tool's own cap, like any result.
    assert_eq!(
        result_of(&model.requests()[1], "c2"),
        json!("\"a\n[... 11 characters cut ...]\nr\"")
    );
}
