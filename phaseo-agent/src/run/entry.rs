//! The agent's entry points: run, resume and retry, plain or streamed.

use crate::run::agent::{Agent, RunOptions};
use crate::run::event::{Emitter, EventStream};
use crate::run::runner::Runner;
use crate::run::state::{Decisions, RunError, RunResult, RunState};

/// Running an agent: the entry points of the loop below.
impl Agent {
    /// Runs the agent on a user input until the model answers without tool calls or a call pauses
    /// the run for a person.
    pub async fn run(&self, input: impl Into<String>) -> Result<RunResult, RunError> {
        self.run_with(input, RunOptions::default()).await
    }

    /// [`run`](Self::run) with options (application context, run id, concurrency).
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
    pub fn stream_with(&self, input: impl Into<String>, options: RunOptions) -> EventStream {
        let agent = self.clone();
        let input = input.into();
        EventStream::new(move |events| Box::pin(Runner::start(agent, input, options, events)))
    }

    /// Resumes a paused run and streams its events.
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
    /// let model = ScriptedModel::new().text("Hello!").text("Fine, thanks.");
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
    pub fn stream_retry(&self, state: &RunState) -> EventStream {
        let agent = self.clone();
        let state = state.clone();
        EventStream::new(move |events| {
            Box::pin(Runner::retry(agent, state, RunOptions::default(), events))
        })
    }
}
