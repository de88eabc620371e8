//! Approval, and manual and interactive tools.

use crate::support::agent::{Counter, deploy_tool, result_of, status_tool};
use phaseo_agent::{
    Agent, Decisions, PendingKind, RunStatus, ScriptedModel, Tool, ToolCall, ToolContext,
};
use serde_json::{Value, json};

#[tokio::test]
async fn an_agent_level_approval_policy_can_waive_a_tools_own_setting_on_purpose() {
    let (status_runs, deploy_runs) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "payments"})),
            ToolCall::new("c2", "deploy", json!({"environment": "staging"})),
        ])
        .text("ok");
    // Gate by service name, whatever the tools say: get_status on payments pauses, and deploy (which
    // requires approval on its own) runs. (`approval` could only add gates: this takes a policy.)
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status_tool(&status_runs))
        .tool(deploy_tool(&deploy_runs))
        .approval_policy(|call: &ToolCall, _ctx: &ToolContext, _tool_says: bool| {
            call.arguments.contains("payments")
        })
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let pending: Vec<(&str, PendingKind)> = paused
        .pending()
        .iter()
        .map(|p| (p.call.id.as_str(), p.kind))
        .collect();
    assert_eq!(pending, [("c1", PendingKind::ToolApproval)]);
    assert_eq!(
        deploy_runs.get(),
        1,
        "the agent's function said no approval needed"
    );
    assert_eq!(status_runs.get(), 0);
    agent
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert_eq!(status_runs.get(), 1);
}

#[tokio::test]
async fn a_per_call_approval_function_of_the_typed_input_pauses_only_the_calls_it_marks() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Deploy {
        environment: String,
    }
    let runs = Counter::default();
    let counter = runs.clone();
    let deploy = Tool::typed(
        "deploy",
        "Deploy",
        move |input: Deploy, _ctx: ToolContext| {
            counter.bump();
            async move { Ok::<_, String>(json!({"deployed": input.environment})) }
        },
    )
    .approval(|input: &Deploy, _ctx| input.environment == "production");
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "deploy", json!({"environment": "staging"})),
            ToolCall::new("c2", "deploy", json!({"environment": "production"})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model)
        .tool(deploy)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.pending().len(), 1);
    assert_eq!(paused.pending()[0].call.id, "c2");
    assert_eq!(runs.get(), 1);
}

fn refund_tool() -> Tool {
    Tool::external(
        "refund",
        "Refund an order",
        json!({"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}),
    )
    .on_tool_called(|input: &Value, _ctx| (input["amount"].as_f64()? <= 20.0).then(|| json!({"refunded": input["amount"]})))
    .on_response_received(|answer: Value| match answer["approved_by"].as_str() {
        Some(person) => Ok(json!({"refunded": answer["amount"], "approved_by": person})),
        None => Err("say who approved the refund"),
    })
    // Checked after on_response_received: a person's raw answer has no `refunded`, the
    // transformed one does.
    .output_json_schema(json!({"type": "object", "required": ["refunded"]}))
}

#[tokio::test]
async fn an_interactive_hook_answers_at_once_or_pauses_with_kind_hitl() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("small", "refund", json!({"amount": 5})),
            ToolCall::new("large", "refund", json!({"amount": 500})),
        ])
        .text("Both refunds are done.");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(refund_tool())
        .build()
        .unwrap();
    let paused = agent.run("refund").await.unwrap();
    let pending: Vec<(&str, PendingKind)> = paused
        .pending()
        .iter()
        .map(|p| (p.call.id.as_str(), p.kind))
        .collect();
    assert_eq!(pending, [("large", PendingKind::Hitl)]);

    // on_response_received refuses an answer it cannot use; nothing changes.
    let before = paused.state.to_json();
    let err = agent
        .resume(
            &paused.state,
            Decisions::new().output("large", json!({"amount": 500})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool output: $: say who approved the refund"
    );
    assert_eq!(paused.state.to_json(), before);

    let done = agent
        .resume(
            &paused.state,
            Decisions::new().output("large", json!({"amount": 500, "approved_by": "ana"})),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), RunStatus::Completed);
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "small"), json!({"refunded": 5}));
    assert_eq!(
        result_of(req, "large"),
        json!({"refunded": 500, "approved_by": "ana"})
    );
}

#[tokio::test]
async fn human_review_hands_selected_calls_to_a_person_who_may_answer_or_let_them_run() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "billing"})),
            ToolCall::new("c2", "get_status", json!({"service": "search"})),
            ToolCall::new("c3", "get_status", json!({"service": "mail"})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status_tool(&runs))
        .human_review(|call, _| !call.arguments.contains("mail"))
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let kinds: Vec<PendingKind> = paused.pending().iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [PendingKind::Hitl, PendingKind::Hitl]);
    assert_eq!(runs.get(), 1);
    agent
        .resume(
            &paused.state,
            Decisions::new()
                .output("c1", json!({"status": "maintenance"}))
                .approve("c2"),
        )
        .await
        .unwrap();
    assert_eq!(
        runs.get(),
        2,
        "the approved hand-off ran; the answered one did not"
    );
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!({"status": "maintenance"}));
    assert_eq!(result_of(req, "c2")["service"], "search");
}

#[tokio::test]
async fn an_approved_interactive_call_goes_on_to_its_hook() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "refund", json!({"amount": 500}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model)
        .tool(refund_tool().require_approval())
        .build()
        .unwrap();
    let first = agent.run("go").await.unwrap();
    assert_eq!(first.pending()[0].kind, PendingKind::ToolApproval);
    let second = agent
        .resume(&first.state, Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert_eq!(
        second.pending()[0].kind,
        PendingKind::Hitl,
        "approved, then handed to a person"
    );
    let done = agent
        .resume(
            &second.state,
            Decisions::new().output("c1", json!({"amount": 500, "approved_by": "bo"})),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), RunStatus::Completed);
}

#[tokio::test]
async fn approve_always_holds_even_under_an_agent_level_approval_function() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "get_status", json!({"service": "a"}))
        .tool_call("c2", "get_status", json!({"service": "b"}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&runs))
        .approval(|call, _| call.name == "get_status")
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().decide("c1", phaseo_agent::Decision::ApproveAlways),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), RunStatus::Completed, "c2 did not ask again");
    assert_eq!(runs.get(), 2);
}

#[tokio::test]
async fn a_paused_state_shows_the_results_that_already_ran_in_its_turn() {
    let (status_runs, deploy_runs) = (Counter::default(), Counter::default());
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "get_status", json!({"service": "api"})),
        ToolCall::new("c2", "deploy", json!({"environment": "production"})),
    ]);
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&status_runs))
        .tool(deploy_tool(&deploy_runs))
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let ran: Vec<(&str, &str)> = paused
        .state
        .paused_results()
        .into_iter()
        .map(|s| (s.call_id.as_str(), s.content.as_str()))
        .collect();
    assert_eq!(ran, [("c1", r#"{"service":"api","status":"healthy"}"#)]);
    assert!(
        paused.state.steps().is_empty(),
        "steps fill when the turn completes"
    );
}

#[tokio::test]
async fn hooks_and_pending_calls_see_the_input_after_the_custom_validators() {
    let lower = |mut input: Value| {
        let name = input["name"].as_str().unwrap_or_default().to_lowercase();
        input["name"] = json!(name);
        Ok::<_, String>(input)
    };
    let greet = Tool::external(
        "greet",
        "Greet someone",
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
    .input_schema(lower)
    .on_tool_called(|input: &Value, _| {
        (input["name"] == "ana").then(|| json!({"hello": input["name"]}))
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "greet", json!({"name": "ANA"})),
            ToolCall::new("c2", "greet", json!({"name": "BO"})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(greet)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(
        paused.pending()[0].arguments,
        json!({"name": "bo"}),
        "a reviewer sees what would run"
    );
    assert_eq!(
        paused.state.paused_results()[0].content,
        r#"{"hello":"ana"}"#
    );
}
