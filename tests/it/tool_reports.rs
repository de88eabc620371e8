//! Nothing a tool says is dropped silently: context and progress from an interactive hook, next-turn
//! overrides of calls answered by a hook or a person, and what happens to the context a failing call
//! set. Approval functions and hooks may be async.

use std::time::Duration;

use crate::support::agent::{Counter, status_tool};
use phaseo_agent::{
    Agent, AgentError, Decisions, PendingKind, RunStatus, ScriptedModel, Tool, ToolCall,
    ToolContext,
};
use serde_json::{Value, json};

/// A tool that reports the application context it sees.
fn context_probe() -> Tool {
    Tool::new(
        "probe",
        "Shows the context",
        json!({"type": "object"}),
        |_, ctx| Ok(ctx.context().clone()),
    )
}

#[tokio::test]
async fn context_and_progress_set_inside_on_tool_called_are_kept() {
    let hooked = Tool::new(
        "lookup",
        "Answered by a hook",
        json!({"type": "object"}),
        |_, _| Ok(json!("ran")),
    )
    .on_tool_called(|_input: &Value, ctx: &ToolContext| {
        ctx.emit_progress(json!({"stage": "cache"})).unwrap();
        ctx.set_context(json!({"tenant": "acme"})).unwrap();
        Some(json!("from cache"))
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "lookup", json!({}))
        .tool_call("c2", "probe", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model)
        .tool(hooked)
        .tool(context_probe())
        .build()
        .unwrap();
    let done = agent.run("go").await.unwrap();
    assert_eq!(
        done.state.steps()[0].preliminary_results,
        [json!({"stage": "cache"})]
    );
    assert_eq!(done.state.tool_result("c2"), Some(r#"{"tenant":"acme"}"#));
    assert_eq!(done.state.context(), &json!({"tenant": "acme"}));
}

/// A tool whose calls switch the next turn's model to `fast`.
fn switching(tool: Tool) -> Tool {
    tool.next_turn(|_, params| params.clone().model("fast"))
}

#[tokio::test]
async fn next_turn_runs_for_a_call_answered_by_the_hook() {
    let tool = switching(
        Tool::new(
            "t",
            "Answered by a hook",
            json!({"type": "object"}),
            |_, _| Ok(json!("ran")),
        )
        .on_tool_called(|_, _| Some(json!("hooked"))),
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(model.requests()[1].model.as_deref(), Some("fast"));
}

#[tokio::test]
async fn next_turn_runs_for_a_call_answered_by_a_person() {
    let tool = switching(Tool::external(
        "t",
        "Answered from outside",
        json!({"type": "object"}),
    ));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    agent
        .resume(
            &paused.state,
            Decisions::new().output("c1", json!("supplied")),
        )
        .await
        .unwrap();
    assert_eq!(model.requests()[1].model.as_deref(), Some("fast"));
}

#[tokio::test]
async fn next_turn_does_not_run_for_a_rejected_call() {
    let tool = switching(
        Tool::new("t", "Gated", json!({"type": "object"}), |_, _| {
            Ok(json!("ran"))
        })
        .require_approval(),
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    agent
        .resume(&paused.state, Decisions::new().reject("c1", "no"))
        .await
        .unwrap();
    assert_eq!(
        model.requests()[1].model,
        None,
        "a rejected call produced nothing"
    );
}

#[tokio::test]
async fn the_context_a_failing_call_set_is_dropped() {
    let failing = Tool::new(
        "f",
        "Sets the context, then fails",
        json!({"type": "object"}),
        |_, ctx| {
            ctx.set_context(json!({"half": "written"})).unwrap();
            Err(AgentError::tool("failed after setting the context"))
        },
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "f", json!({}))
        .tool_call("c2", "probe", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model)
        .tool(failing)
        .tool(context_probe())
        .build()
        .unwrap();
    let done = agent
        .run("go")
        .context(json!({"tenant": "acme"}))
        .await
        .unwrap();
    assert_eq!(
        done.state.tool_result("c2"),
        Some(r#"{"tenant":"acme"}"#),
        "a failed call changes nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn an_async_approval_function_decides_after_its_io() {
    let runs = Counter::default();
    let tool = status_tool(&runs).approval(|input: &Value, _ctx: &ToolContext| {
        let service = input["service"].as_str().unwrap_or_default().to_owned();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await; // a policy service
            service == "payments"
        }
    });
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "get_status", json!({"service": "payments"})),
        ToolCall::new("c2", "get_status", json!({"service": "search"})),
    ]);
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let paused = agent.run("go").await.unwrap();
    let pending: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(pending, ["c1"]);
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn a_panicking_async_approval_function_fails_closed() {
    let runs = Counter::default();
    let tool = status_tool(&runs).approval(|_: &Value, _: &ToolContext| async {
        panic!("the policy service client panicked")
    });
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "get_status",
        json!({"service": "api"}),
    );
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.status(), RunStatus::WaitingForHuman);
    assert_eq!(runs.get(), 0);
}

#[tokio::test]
async fn an_async_agent_level_rule_adds_a_gate() {
    let runs = Counter::default();
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "get_status",
        json!({"service": "payments"}),
    );
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&runs))
        .approval(|call: &ToolCall, _ctx: &ToolContext| {
            let sensitive = call.arguments.contains("payments");
            async move { sensitive }
        })
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    assert_eq!(runs.get(), 0);
}

#[tokio::test]
async fn an_async_hook_answers_or_defers_after_its_io() {
    let runs = Counter::default();
    let tool = status_tool(&runs).on_tool_called(|input: &Value, _ctx: &ToolContext| {
        let service = input["service"].as_str().unwrap_or_default().to_owned();
        async move {
            tokio::task::yield_now().await; // a cache lookup
            (service == "api").then(|| json!({"service": "api", "status": "cached"}))
        }
    });
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "get_status", json!({"service": "api"})),
        ToolCall::new("c2", "get_status", json!({"service": "db"})),
    ]);
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let paused = agent.run("go").await.unwrap();
    assert_eq!(
        paused.state.tool_result("c1"),
        Some(r#"{"service":"api","status":"cached"}"#)
    );
    assert_eq!(paused.pending()[0].call.id, "c2");
    assert_eq!(paused.pending()[0].kind, PendingKind::Hitl);
    assert_eq!(runs.get(), 0);
}
