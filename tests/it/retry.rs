//! A failed run is recoverable without running a tool twice (`Agent::retry`), and what the model is
//! not shown (a panic's text, the failed run's state) reaches operators from a plain `run()`.

use std::sync::{Arc, Mutex};

use crate::support::agent::{Counter, deploy_tool, status_tool};
use futures::StreamExt;
use futures::future::BoxFuture;
use phaseo_agent::{
    Agent, AgentError, Decisions, Event, Model, ModelError, ModelRequest, ModelResponse, OnError,
    RunState, RunStatus, ScriptedModel, Tool, ToolCall,
};
use serde_json::json;

/// A scripted model that fails the requests whose numbers (0-based) are listed.
#[derive(Clone)]
struct Flaky {
    script: ScriptedModel,
    fail_at: Arc<Mutex<Vec<usize>>>,
    asked: Arc<Mutex<usize>>,
}

impl Flaky {
    fn new(script: ScriptedModel, fail_at: &[usize]) -> Self {
        Flaky {
            script,
            fail_at: Arc::new(Mutex::new(fail_at.to_vec())),
            asked: Arc::default(),
        }
    }
}

impl Model for Flaky {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let n = {
            let mut asked = self.asked.lock().unwrap();
            *asked += 1;
            *asked - 1
        };
        if self.fail_at.lock().unwrap().contains(&n) {
            return Box::pin(async { Err(ModelError::other("the model failed")) });
        }
        self.script.respond(request)
    }
}

#[tokio::test]
async fn a_model_failure_after_an_approved_call_is_retried_without_running_the_tool_again() {
    let runs = Counter::default();
    let script = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "deploy", json!({"environment": "prod"}))
        .text("Deployed.");
    // Request 0 asks for the deploy; request 1 (after the approved deploy ran) fails.
    let model = Flaky::new(script.clone(), &[1]);
    let agent = Agent::builder("t")
        .model(model)
        .tool(deploy_tool(&runs))
        .build()
        .unwrap();
    let paused = agent.run("ship").await.unwrap();
    let failed = agent
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap_err();
    assert!(matches!(failed.error, AgentError::Model(_)), "{failed}");
    assert_eq!(runs.get(), 1);
    let state = failed.state.expect("a run that started has a failed state");
    assert_eq!(state.status(), RunStatus::Failed);
    let result: serde_json::Value = serde_json::from_str(state.tool_result("c1").unwrap()).unwrap();
    assert_eq!(result, json!({"environment": "prod", "deployed": true}));

    // Stored and read back, then retried: the model is asked again, the deploy does not run again.
    let state = RunState::from_json(&state.to_json()).unwrap();
    let done = agent.retry(&state).await.unwrap();
    assert_eq!(done.output(), Some("Deployed."));
    assert_eq!(runs.get(), 1, "no tool runs twice");
    let last = script.requests().last().cloned().unwrap();
    assert!(
        crate::support::agent::result_ids(&last).contains(&"c1".to_string()),
        "the model sees the result it missed"
    );
}

#[tokio::test]
async fn a_fail_run_turn_is_retried_with_its_results_and_no_call_runs_twice() {
    let (runs, failing_runs) = (Counter::default(), Counter::default());
    let counter = failing_runs.clone();
    let fails = Tool::new("f", "Fails", json!({"type": "object"}), move |_, _| {
        counter.bump();
        Err(AgentError::tool("disk full"))
    })
    .on_error(OnError::FailRun);
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "api"})),
            ToolCall::new("c2", "f", json!({})),
            ToolCall::new("c3", "get_status", json!({"service": "db"})),
        ])
        .text("Recovered.");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status_tool(&runs))
        .tool(fails)
        .build()
        .unwrap();
    let failed = agent.run("go").await.unwrap_err();
    assert_eq!(failed.error, AgentError::tool("disk full"));
    assert_eq!((runs.get(), failing_runs.get()), (1, 1), "c3 never started");
    let done = agent.retry(failed.state.as_deref().unwrap()).await.unwrap();
    assert_eq!(done.output(), Some("Recovered."));
    assert_eq!(
        (runs.get(), failing_runs.get()),
        (1, 1),
        "no call of the failed turn ran again"
    );
    let last = model.requests().last().cloned().unwrap();
    assert_eq!(
        crate::support::agent::result_ids(&last),
        ["c1", "c2", "c3"],
        "every call of the turn has a result"
    );
    assert!(
        crate::support::agent::result_of(&last, "c3")["error"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
}

#[tokio::test]
async fn only_a_failed_run_can_be_retried() {
    let agent = Agent::builder("t")
        .model(ScriptedModel::new().record_requests().text("hi"))
        .build()
        .unwrap();
    let done = agent.run("hello").await.unwrap();
    let err = agent.retry(&done.state).await.unwrap_err();
    assert!(matches!(err.error, AgentError::NotFailed { .. }), "{err}");
    assert!(err.state.is_none(), "a refused retry starts no run");
}

#[tokio::test]
async fn a_failed_state_from_a_signing_agent_is_signed_and_checked_on_retry() {
    let key = b"a secret of 32 bytes or more....";
    let model = Flaky::new(ScriptedModel::new().record_requests().text("late"), &[0]);
    let agent = Agent::builder("t")
        .model(model)
        .state_key(key)
        .build()
        .unwrap();
    let state = *agent.run("go").await.unwrap_err().state.unwrap();
    assert!(state.is_signed());
    let mut stored: serde_json::Value = serde_json::from_str(&state.to_json()).unwrap();
    stored["context"] = json!({"role": "admin"});
    let forged = RunState::from_json(&stored.to_string()).unwrap();
    let err = agent.retry(&forged).await.unwrap_err();
    assert!(matches!(err.error, AgentError::StateSignature(_)), "{err}");
    assert_eq!(agent.retry(&state).await.unwrap().output(), Some("late"));
}

#[tokio::test]
async fn a_retry_streams_its_events() {
    let model = Flaky::new(ScriptedModel::new().record_requests().text("late"), &[0]);
    let agent = Agent::builder("t").model(model).build().unwrap();
    let state = agent.run("go").await.unwrap_err().state.unwrap();
    let names: Vec<&str> = agent
        .retry(&state)
        .stream()
        .map(|e| e.name())
        .collect()
        .await;
    assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
}

#[tokio::test]
async fn a_plain_run_shows_operators_a_panics_text_on_the_step() {
    let flaky = Tool::new(
        "flaky",
        "Panics",
        json!({"type": "object"}),
        |_, _| -> Result<serde_json::Value, AgentError> {
            panic!("index out of bounds: the len is 0 but the index is 3")
        },
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "flaky", json!({}))
        .text("sorry");
    let agent = Agent::builder("t")
        .model(model)
        .tool(flaky)
        .build()
        .unwrap();
    let done = agent.run("go").await.unwrap();
    let step = &done.state.steps()[0];
    assert_eq!(
        step.content, r#"{"error":"Tool flaky failed unexpectedly"}"#,
        "the model reads no panic text"
    );
    assert_eq!(
        step.error.as_deref(),
        Some("tool `flaky` panicked: index out of bounds: the len is 0 but the index is 3"),
        "operators do"
    );
}

#[tokio::test]
async fn a_plain_run_that_fails_returns_its_state_with_the_error() {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "nope", json!({}));
    let agent = Agent::builder("t").model(model).build().unwrap();
    let failed = agent.run("go").await.unwrap_err();
    assert_eq!(failed, AgentError::UnknownTool("nope".into()));
    assert_eq!(failed.to_string(), "unknown tool `nope`");
    let state = failed.state.unwrap();
    assert_eq!(state.status(), RunStatus::Failed);
    assert_eq!(
        state.messages().len(),
        2,
        "the user's input and the model's turn"
    );
    // The same state as the stream's run.failed carries.
    let last = agent.run("go").stream().collect::<Vec<_>>().await.pop();
    assert!(matches!(last, Some(Event::Failed { .. })));
}

#[tokio::test]
async fn a_run_error_converts_into_an_agent_error_with_the_question_mark() {
    async fn ship(agent: &Agent) -> Result<String, AgentError> {
        Ok(agent
            .run("go")
            .await?
            .output()
            .unwrap_or_default()
            .to_string())
    }
    let agent = Agent::builder("t")
        .model(ScriptedModel::new().record_requests())
        .build()
        .unwrap();
    assert!(matches!(ship(&agent).await, Err(AgentError::Model(_))));
}
