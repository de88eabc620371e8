//! The agent's entry points: run, resume and retry, plain or streamed.

use crate::run::agent::{Agent, RunOptions};
use crate::run::event::{Emitter, EventStream};
use crate::run::runner::Runner;
use crate::run::state::{Decisions, RunError, RunResult, RunState};

/// Running an agent: the entry points of the loop below.
impl Agent {
    /// Runs the agent on a user input until the model answers without tool calls or a call pauses
    /// the run for a person.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let add = Tool::new("add", "Add two numbers", json!({"type": "object"}),
    ///     |input, _| Ok(json!(input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0))));
    /// let model = ScriptedModel::new().tool_call("call_1", "add", json!({"a": 2, "b": 3})).text("2 + 3 = 5.");
    /// let agent = Agent::builder("calc").model(model).tool(add).build()?;
    /// let done = agent.run("What is 2 + 3?").await?;
    /// assert_eq!(done.output(), Some("2 + 3 = 5."));
    /// assert_eq!(done.state.tool_result("call_1"), Some("5"));
    /// assert_eq!(done.state.turns(), 2); // the call, then the answer
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run(&self, input: impl Into<String>) -> Result<RunResult, RunError> {
        self.run_with(input, RunOptions::default()).await
    }

    /// [`run`](Self::run) with options (application context, run id, concurrency, earlier
    /// messages, first-turn overrides: see [`RunOptions`]).
    ///
    /// ```
    /// use phaseo_agent::{Agent, Message, RunOptions, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("The lamp ships tomorrow.");
    /// let agent = Agent::builder("support").model(model.clone()).build()?;
    /// // A conversation kept elsewhere, and a run id of your own.
    /// let history = vec![
    ///     Message::User { content: "I ordered a lamp.".into() },
    ///     Message::Assistant { content: Some("Thanks, noted.".into()), tool_calls: vec![] },
    /// ];
    /// let options = RunOptions { history, run_id: Some("chat-9".into()), ..RunOptions::default() };
    /// let done = agent.run_with("When does it ship?", options).await?;
    /// assert_eq!(done.state.run_id(), "chat-9");
    /// assert_eq!(model.requests()[0].messages.len(), 3); // the history, then the new input
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_with(
        &self,
        input: impl Into<String>,
        options: RunOptions,
    ) -> Result<RunResult, RunError> {
        Runner::start(self.clone(), input.into(), options, Emitter::default()).await
    }

    /// Resumes a paused run with a decision for every pending call.
    ///
    /// Nothing is changed on error: `state` is borrowed, and decisions for another run (see
    /// [`Decisions::for_run`]), a missing decision, a decision for a call that is not pending, or
    /// edited arguments that fail validation return an error before anything runs. The state may
    /// come from another process (stored as JSON and read back).
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, Decisions, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}),
    ///     |input, _| Ok(json!({"deployed": input["environment"]})))
    ///     .require_approval();
    /// let model = ScriptedModel::new()
    ///     .tool_call("call_1", "deploy", json!({"environment": "staging"}))
    ///     .text("Staging is deployed.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy staging").await?;
    ///
    /// // Refused before anything runs: no decision for call_1.
    /// let refused = agent.resume(&paused.state, Decisions::new()).await.unwrap_err();
    /// assert!(matches!(refused.error, AgentError::MissingDecision { .. }));
    ///
    /// let done = agent.resume(&paused.state, Decisions::new().approve("call_1")).await?;
    /// assert_eq!(done.output(), Some("Staging is deployed."));
    /// assert_eq!(done.state.tool_result("call_1"), Some(r#"{"deployed":"staging"}"#));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume(
        &self,
        state: &RunState,
        decisions: Decisions,
    ) -> Result<RunResult, RunError> {
        Runner::resume(
            self.clone(),
            state.clone(),
            decisions,
            RunOptions::default(),
            Emitter::default(),
        )
        .await
    }

    /// [`resume`](Self::resume) with options (only `concurrency` applies; the context is the state's).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use phaseo_agent::{Agent, Decisions, RunOptions, ScriptedModel, Tool, ToolCall};
    /// use phaseo_agent::serde_json::json;
    /// use tokio::sync::Barrier;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // Each call waits for the other, so they only finish if they run at once.
    /// let barrier = Arc::new(Barrier::new(2));
    /// let sync = Tool::new("sync", "Sync a region", json!({"type": "object"}), move |_, _| {
    ///     let barrier = barrier.clone();
    ///     async move { barrier.wait().await; Ok(json!("synced")) }
    /// })
    /// .require_approval();
    /// let model = ScriptedModel::new()
    ///     .tool_calls([ToolCall::new("c1", "sync", json!({})), ToolCall::new("c2", "sync", json!({}))])
    ///     .text("Both synced.");
    /// let agent = Agent::builder("ops").model(model).tool(sync).build()?; // one call at a time
    /// let paused = agent.run_with("Sync both", RunOptions::with_context(json!({"team": "infra"}))).await?;
    ///
    /// let options = RunOptions { concurrency: Some(2), ..RunOptions::with_context(json!("ignored")) };
    /// let approved = Decisions::new().approve("c1").approve("c2");
    /// let done = agent.resume_with(&paused.state, approved, options).await?;
    /// assert_eq!(done.output(), Some("Both synced."));
    /// assert_eq!(done.state.context(), &json!({"team": "infra"})); // the state's, not the options'
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume_with(
        &self,
        state: &RunState,
        decisions: Decisions,
        options: RunOptions,
    ) -> Result<RunResult, RunError> {
        Runner::resume(
            self.clone(),
            state.clone(),
            decisions,
            options,
            Emitter::default(),
        )
        .await
    }

    /// Runs the agent and streams its events; the last event is `Completed`, `Paused` (with the state
    /// to store) or `Failed`.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("greeter").model(ScriptedModel::new().text("Hello!")).build()?;
    /// let names: Vec<&str> = agent.stream("Hi").map(|e| e.name()).collect().await;
    /// assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(&self, input: impl Into<String>) -> EventStream {
        self.stream_with(input, RunOptions::default())
    }

    /// [`stream`](Self::stream) with options.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, RunOptions, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("greeter").model(ScriptedModel::new().text("Hello!")).build()?;
    /// let options = RunOptions { run_id: Some("run-7".into()), ..RunOptions::default() };
    /// let events: Vec<Event> = agent.stream_with("Hi", options).collect().await;
    /// assert!(matches!(&events[0], Event::RunStarted { run_id, resumed: false, .. } if run_id == "run-7"));
    /// assert!(matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Hello!"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_with(&self, input: impl Into<String>, options: RunOptions) -> EventStream {
        let agent = self.clone();
        let input = input.into();
        EventStream::new(move |events| Box::pin(Runner::start(agent, input, options, events)))
    }

    /// Resumes a paused run and streams its events. A refused resume (a missing decision, a bad
    /// signature, another agent's state, a run that is not paused) is one `run.failed` event.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Decisions, Event, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |_, _| Ok(json!("ok")))
    ///     .require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
    /// let agent = Agent::builder("ops").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Ship it").await?;
    ///
    /// let approved = Decisions::new().approve("call_1");
    /// let names: Vec<&str> = agent.stream_resume(&paused.state, approved).map(|e| e.name()).collect().await;
    /// assert_eq!(names, ["run.started", "tool.called", "tool.result", "model.turn", "run.completed"]);
    ///
    /// let refused: Vec<Event> = agent.stream_resume(&paused.state, Decisions::new()).collect().await;
    /// assert!(matches!(&refused[..], [Event::Failed { error, .. }] if error.contains("Missing decision")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_resume(&self, state: &RunState, decisions: Decisions) -> EventStream {
        self.stream_resume_with(state, decisions, RunOptions::default())
    }

    /// [`stream_resume`](Self::stream_resume) with options (as for
    /// [`resume_with`](Self::resume_with), only `concurrency` applies; the context is the state's).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Decisions, Event, RunOptions, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |_, _| Ok(json!("ok")))
    ///     .require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
    /// let agent = Agent::builder("ops").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Ship it").await?;
    ///
    /// let options = RunOptions { concurrency: Some(4), ..RunOptions::default() };
    /// let events: Vec<Event> = agent
    ///     .stream_resume_with(&paused.state, Decisions::new().approve("call_1"), options)
    ///     .collect()
    ///     .await;
    /// assert_eq!(events.last().map(Event::name), Some("run.completed"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_resume_with(
        &self,
        state: &RunState,
        decisions: Decisions,
        options: RunOptions,
    ) -> EventStream {
        let agent = self.clone();
        let state = state.clone();
        EventStream::new(move |events| {
            Box::pin(Runner::resume(agent, state, decisions, options, events))
        })
    }

    /// Retries a failed run: the model is asked again from the failed state (the error's
    /// [`RunError::state`], stored or not), and no tool runs twice. Calls of the failed turn that
    /// have no result yet are answered from what was recorded: the result of a call that ran, the
    /// error of the call that failed the run, a cancellation, or "did not run". The retry counts
    /// toward the same turn limit.
    ///
    /// Like `resume`, nothing changes on error: a state that has not failed, a bad signature or
    /// another agent's state is refused before anything runs.
    ///
    /// ```
    /// use phaseo_agent::{Agent, RunState, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ScriptedModel::new();
    /// let agent = Agent::builder("t").model(model.clone()).build().unwrap();
    /// let failed = agent.run("hello").await.unwrap_err();      // the model had nothing to say
    /// let stored = failed.state.unwrap().to_json();             // keep it anywhere
    ///
    /// let _ = model.clone().text("Hello!");                     // the model is back
    /// let state = RunState::from_json(&stored).unwrap();
    /// assert_eq!(agent.retry(&state).await.unwrap().output(), Some("Hello!"));
    /// # }
    /// ```
    pub async fn retry(&self, state: &RunState) -> Result<RunResult, RunError> {
        self.retry_with(state, RunOptions::default()).await
    }

    /// [`retry`](Self::retry) with options (only `concurrency` applies; the context is the state's).
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, RunOptions, ScriptedModel};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let model = ScriptedModel::new();
    /// let agent = Agent::builder("t").model(model.clone()).build()?;
    /// let options = RunOptions::with_context(json!({"lang": "en"}));
    /// let failed = agent.run_with("hello", options).await.unwrap_err(); // the model had nothing to say
    /// let state = failed.state.unwrap();
    ///
    /// let _ = model.clone().text("Hello!"); // the model is back
    /// let options = RunOptions { concurrency: Some(4), ..RunOptions::with_context(json!("ignored")) };
    /// let done = agent.retry_with(&state, options).await?;
    /// assert_eq!(done.output(), Some("Hello!"));
    /// assert_eq!(done.state.context(), &json!({"lang": "en"})); // the state's, not the options'
    ///
    /// // Only a failed run is retried.
    /// let refused = agent.retry_with(&done.state, RunOptions::default()).await.unwrap_err();
    /// assert!(matches!(refused.error, AgentError::NotFailed { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry_with(
        &self,
        state: &RunState,
        options: RunOptions,
    ) -> Result<RunResult, RunError> {
        Runner::retry(self.clone(), state.clone(), options, Emitter::default()).await
    }

    /// Continues a completed run with a new user message: the model sees the whole conversation so
    /// far, and the run goes on under the same run id, with a fresh budget of `max_turns`. The
    /// state may come from another process; it is checked as a resumed one is (status, signature,
    /// agent). A run that has not completed is refused with [`AgentError::NotCompleted`](crate::AgentError::NotCompleted).
    ///
    /// To start a run from a conversation kept elsewhere, pass it as [`RunOptions::history`].
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ScriptedModel::new().record_requests().text("Hello!").text("Fine, thanks.");
    /// let agent = Agent::builder("chat").model(model.clone()).build().unwrap();
    /// let first = agent.run("Hi").await.unwrap();
    /// let second = agent.continue_run(&first.state, "How are you?").await.unwrap();
    /// assert_eq!(second.output(), Some("Fine, thanks."));
    /// assert_eq!(second.state.run_id(), first.state.run_id());
    /// // The model saw the whole conversation.
    /// assert_eq!(model.requests()[1].messages.len(), 3);
    /// # }
    /// ```
    pub async fn continue_run(
        &self,
        state: &RunState,
        input: impl Into<String>,
    ) -> Result<RunResult, RunError> {
        Runner::continue_run(
            self.clone(),
            state.clone(),
            input.into(),
            RunOptions::default(),
            Emitter::default(),
        )
        .await
    }

    /// Continues a completed run and streams its events (see [`continue_run`](Self::continue_run)).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().text("Hello!").text("Fine, thanks.");
    /// let agent = Agent::builder("chat").model(model).build()?;
    /// let first = agent.run("Hi").await?;
    ///
    /// let events: Vec<Event> = agent.stream_continue(&first.state, "How are you?").collect().await;
    /// let run_id = first.state.run_id();
    /// assert!(matches!(&events[0], Event::RunStarted { run_id: id, resumed: true, .. } if id == run_id));
    /// assert!(matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Fine, thanks."));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_continue(&self, state: &RunState, input: impl Into<String>) -> EventStream {
        let agent = self.clone();
        let state = state.clone();
        let input = input.into();
        EventStream::new(move |events| {
            Box::pin(Runner::continue_run(
                agent,
                state,
                input,
                RunOptions::default(),
                events,
            ))
        })
    }

    /// Retries a failed run and streams its events (a refused retry ends the stream with one
    /// `run.failed`, as a refused resume does).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new();
    /// let agent = Agent::builder("t").model(model.clone()).build()?;
    /// let failed = agent.run("hello").await.unwrap_err(); // the model had nothing to say
    /// let state = failed.state.unwrap();
    ///
    /// let _ = model.clone().text("Hello!"); // the model is back
    /// let events: Vec<Event> = agent.stream_retry(&state).collect().await;
    /// let names: Vec<&str> = events.iter().map(Event::name).collect();
    /// assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
    ///
    /// // A completed run is not retried: the stream is one `run.failed`.
    /// let Some(Event::Completed { state: done, .. }) = events.last() else { panic!("{events:?}") };
    /// let refused: Vec<Event> = agent.stream_retry(done).collect().await;
    /// assert!(matches!(&refused[..], [Event::Failed { error, .. }] if error.contains("has not failed")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_retry(&self, state: &RunState) -> EventStream {
        let agent = self.clone();
        let state = state.clone();
        EventStream::new(move |events| {
            Box::pin(Runner::retry(agent, state, RunOptions::default(), events))
        })
    }
}
