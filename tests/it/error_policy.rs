//! Error policy: return-to-model by default, fail-run per tool and agent-wide, unknown tools and
//! unreadable arguments, panics isolated.

use crate::support::agent::{Counter, result_ids, result_of, status_tool};
use phaseo_agent::{Agent, AgentError, OnError, RunStatus, ScriptedModel, Tool, ToolCall};
use serde_json::json;

fn failing(id: &str) -> Tool {
    Tool::new(id, "Always fails", json!({"type": "object"}), |_, _| {
        Err(AgentError::tool("database unreachable"))
    })
}

#[tokio::test]
async fn fail_run_on_a_tool_fails_the_run_with_its_error() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "f", json!({}))
        .text("unreachable");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(failing("f").on_error(OnError::FailRun))
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err, AgentError::Tool("database unreachable".into()));
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn the_agent_wide_policy_applies_to_tools_without_their_own() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "own", json!({})),
            ToolCall::new("c2", "inherits", json!({})),
        ])
        .text("unreachable");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(failing("own").on_error(OnError::ReturnToModel))
        .tool(failing("inherits"))
        .on_error(OnError::FailRun)
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err, AgentError::Tool("database unreachable".into()));

    // With only the tool that returns to the model, the run goes on.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "own", json!({}))
        .text("recovered");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(failing("own").on_error(OnError::ReturnToModel))
        .on_error(OnError::FailRun)
        .build()
        .unwrap();
    assert_eq!(agent.run("go").await.unwrap().output(), Some("recovered"));
}

#[tokio::test]
async fn unknown_tools_can_be_answered_to_the_model() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_stats", json!({})),
            ToolCall::new("c2", "get_status", json!({"service": "db"})),
        ])
        .text("I used the right tool.");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status_tool(&runs))
        .on_unknown_tool(OnError::ReturnToModel)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.output(), Some("I used the right tool."));
    let req = &model.requests()[1];
    assert_eq!(
        result_of(req, "c1"),
        json!({"error": "Unknown tool: get_stats"})
    );
    assert_eq!(result_of(req, "c2")["status"], "healthy");
}

#[tokio::test]
async fn unreadable_arguments_can_fail_the_run() {
    let runs = Counter::default();
    let model =
        ScriptedModel::new()
            .record_requests()
            .turn(phaseo_agent::ModelResponse::tool_calls([ToolCall::raw(
                "c1",
                "get_status",
                "{oops",
            )]));
    let agent = Agent::builder("t")
        .model(model)
        .tool(status_tool(&runs))
        .on_invalid_arguments(OnError::FailRun)
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert!(
        matches!(err.error, AgentError::InvalidInput(ref m) if m.contains("not valid JSON")),
        "{err}"
    );
    assert_eq!(runs.get(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_beside_two_healthy_ones_becomes_a_tool_error() {
    let runs = Counter::default();
    let panicking_async = Tool::new(
        "boom_async",
        "Panics",
        json!({"type": "object"}),
        |_, _| async {
            panic!("index out of bounds in the async tool");
        },
    );
    let panicking_sync = Tool::new(
        "boom_sync",
        "Panics",
        json!({"type": "object"}),
        |_, _| -> Result<serde_json::Value, AgentError> { panic!("the sync tool fell over") },
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "a"})),
            ToolCall::new("c2", "boom_async", json!({})),
            ToolCall::new("c3", "boom_sync", json!({})),
            ToolCall::new("c4", "get_status", json!({"service": "b"})),
        ])
        .text("Two services are healthy; two tools failed.");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status_tool(&runs))
        .tool(panicking_async)
        .tool(panicking_sync)
        .tool_concurrency(4)
        .build()
        .unwrap();
    let events: Vec<phaseo_agent::Event> =
        futures::StreamExt::collect(agent.run("go").stream()).await;
    assert!(matches!(
        events.last(),
        Some(phaseo_agent::Event::Completed { .. })
    ));
    assert_eq!(runs.get(), 2);
    let req = &model.requests()[1];
    let ids = result_ids(req);
    assert_eq!(ids, ["c1", "c2", "c3", "c4"]);
    assert_eq!(result_of(req, "c1")["service"], "a");
    assert_eq!(result_of(req, "c4")["service"], "b");
    // The model sees that the tool failed, not the panic's text; operators get the text in the event.
    assert_eq!(
        result_of(req, "c2"),
        json!({"error": "Tool boom_async failed unexpectedly"})
    );
    assert_eq!(
        result_of(req, "c3"),
        json!({"error": "Tool boom_sync failed unexpectedly"})
    );
    let diagnostics: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            phaseo_agent::Event::ToolError { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        diagnostics,
        [
            "tool `boom_async` panicked: index out of bounds in the async tool",
            "tool `boom_sync` panicked: the sync tool fell over"
        ]
    );
}

#[tokio::test]
async fn a_panicking_approval_function_fails_closed() {
    let runs = Counter::default();
    let tool = status_tool(&runs)
        .approval(|_: &serde_json::Value, _| -> bool { panic!("bug in the policy") });
    let model = ScriptedModel::new().record_requests().tool_call(
        "c1",
        "get_status",
        json!({"service": "a"}),
    );
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        result.status(),
        RunStatus::WaitingForHuman,
        "a broken policy asks a person"
    );
    assert_eq!(runs.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fail_run_error_cancels_a_sibling_that_is_still_running() {
    // The sibling is still running (50 ms) when `f` fails at once: the turn stops.
    let finished = Counter::default();
    let done = finished.clone();
    let slow = Tool::new(
        "slow",
        "Works for 50 ms",
        json!({"type": "object"}),
        move |_, _| {
            let done = done.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                done.bump();
                Ok(json!("finished"))
            }
        },
    );
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("c1", "f", json!({})),
        ToolCall::new("c2", "slow", json!({})),
    ]);
    let agent = Agent::builder("t")
        .model(model)
        .tool(failing("f").on_error(OnError::FailRun))
        .tool(slow)
        .tool_concurrency(2)
        .build()
        .unwrap();
    assert!(agent.run("go").await.is_err());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        finished.get(),
        0,
        "the sibling was dropped, not left to finish"
    );
}
