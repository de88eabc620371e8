//! The agent's entry points: one method per verb (`run`, `resume`, `retry`, `continue_run`), each
//! returning a request. A request is awaited for the run's result (it implements `IntoFuture`) or
//! turned into a stream of the run's events with `.stream()`; the settings of one run are methods
//! on the request, present only where they apply.

use std::future::IntoFuture;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::model::message::Message;
use crate::model::request::TurnParams;
use crate::run::agent::Agent;
use crate::run::event::{Emitter, EventStream};
use crate::run::journal::{Journal, JournalFor};
use crate::run::observe::Decider;
use crate::run::runner::{RunOptions, Runner};
use crate::run::state::{Decisions, RunError, RunResult, RunState};

/// What awaiting a request gives: the run's result, or why it has none.
type Outcome = Result<RunResult, RunError>;

/// Running an agent: one method per verb, each returning a request to await or stream.
impl Agent {
    /// Runs the agent on a user input until the model answers without tool calls or a call pauses
    /// the run for a person.
    ///
    /// The request is lazy: nothing runs until it is awaited, or streamed with
    /// [`RunRequest::stream`]. Its methods set what one run may set: the application context tools
    /// see, the run id, earlier messages, the first model request's overrides, the tool
    /// concurrency.
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
    ///
    /// let done = agent.run("What is 2 + 3?").await?;
    /// assert_eq!(done.output(), Some("2 + 3 = 5."));
    /// assert_eq!(done.state.tool_result("call_1"), Some("5"));
    /// assert_eq!(done.state.turns(), 2); // the call, then the answer
    /// # Ok(())
    /// # }
    /// ```
    pub fn run(&self, input: impl Into<String>) -> RunRequest {
        RunRequest {
            agent: self.clone(),
            input: input.into(),
            options: RunOptions::default(),
        }
    }

    /// Resumes a paused run with a decision for every pending call.
    ///
    /// Nothing is changed on error: `state` is borrowed (the request holds a copy), and decisions
    /// for another run (see [`Decisions::for_run`]), a missing decision, a decision for a call that
    /// is not pending, or edited arguments that fail validation return an error before anything
    /// runs. The state may come from another process (stored as JSON and read back). The run keeps
    /// the state's application context.
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
    pub fn resume(&self, state: &RunState, decisions: Decisions) -> ResumeRequest {
        ResumeRequest {
            agent: self.clone(),
            state: state.clone(),
            decisions,
            options: RunOptions::default(),
        }
    }

    /// Retries a failed run: the model is asked again from the failed state (the error's
    /// [`RunError::state`], stored or not), and no tool runs twice. Calls of the failed turn that
    /// have no result yet are answered from what was recorded: the result of a call that ran, the
    /// error of the call that failed the run, a cancellation, or "did not run". The retry counts
    /// toward the same turn limit, and keeps the state's application context.
    ///
    /// Like `resume`, nothing changes on error: a state that has not failed, a bad signature or
    /// another agent's state is refused before anything runs.
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, RunState, ScriptedModel};
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
    /// let done = agent.retry(&state).await.unwrap();
    /// assert_eq!(done.output(), Some("Hello!"));
    ///
    /// // Only a failed run is retried.
    /// let refused = agent.retry(&done.state).await.unwrap_err();
    /// assert!(matches!(refused.error, AgentError::NotFailed { .. }));
    /// # }
    /// ```
    pub fn retry(&self, state: &RunState) -> RetryRequest {
        RetryRequest {
            agent: self.clone(),
            state: state.clone(),
            options: RunOptions::default(),
        }
    }

    /// Continues a completed run with a new user message: the model sees the whole conversation so
    /// far, and the run goes on under the same run id and application context, with a fresh budget
    /// of `max_turns`. The state may come from another process; it is checked as a resumed one is
    /// (status, signature, agent). A run that has not completed is refused with
    /// [`AgentError::NotCompleted`](crate::AgentError::NotCompleted).
    ///
    /// To start a run from a conversation kept elsewhere, pass it to [`RunRequest::history`].
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
    pub fn continue_run(&self, state: &RunState, input: impl Into<String>) -> ContinueRequest {
        ContinueRequest {
            agent: self.clone(),
            state: state.clone(),
            input: input.into(),
            options: RunOptions::default(),
        }
    }
}

/// A new run of an agent, made by [`Agent::run`]: await it for the result, or call
/// [`stream`](Self::stream) for the run's events.
///
/// ```
/// use phaseo_agent::{Agent, Message, ScriptedModel, Tool, TurnParams};
/// use phaseo_agent::serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let whoami = Tool::new("whoami", "The current tenant", json!({"type": "object"}),
///     |_, ctx| Ok(ctx.context()["tenant"].clone()));
/// let model = ScriptedModel::new()
///     .record_requests()
///     .tool_call("call_1", "whoami", json!({}))
///     .text("You are Acme.");
/// let agent = Agent::builder("support").model(model.clone()).tool(whoami).build()?;
///
/// let done = agent
///     .run("Who am I?")
///     .context(json!({"tenant": "acme"}))                      // what tools see
///     .run_id("ticket-42")                                     // else a fresh one
///     .history(vec![Message::user("Hello.")])                  // a conversation kept elsewhere
///     .first_turn(TurnParams::default().temperature(0.0))      // the first model request only
///     .await?;
/// assert_eq!(done.state.run_id(), "ticket-42");
/// assert_eq!(done.state.tool_result("call_1"), Some(r#""acme""#));
/// assert_eq!(model.requests()[0].messages.len(), 2); // the history, then the new input
/// assert_eq!(model.requests()[0].temperature, Some(0.0));
/// assert_eq!(model.requests()[1].temperature, None);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a run request does nothing until it is awaited or streamed"]
pub struct RunRequest {
    agent: Agent,
    input: String,
    options: RunOptions,
}

impl RunRequest {
    /// Journals the run in the journal `make` makes for its run id (a run store's).
    pub(crate) fn journal_with(
        mut self,
        make: impl FnOnce(&str) -> Arc<dyn Journal> + Send + 'static,
    ) -> Self {
        self.options.journal_for = Some(JournalFor(Box::new(make)));
        self
    }

    /// The application context tools see (`ctx.context()`), kept in the run's state. Default:
    /// `Value::Null`.
    pub fn context(mut self, context: Value) -> Self {
        self.options.context = context;
        self
    }

    /// The run's id. Default: a fresh one.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.options.run_id = Some(run_id.into());
        self
    }

    /// Earlier messages of the conversation: the run starts from them, with the new user input
    /// after them. Default: none. (To go on from a completed run of this agent, use
    /// [`Agent::continue_run`].)
    pub fn history(mut self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.options.history = messages.into_iter().collect();
        self
    }

    /// Overrides for the run's first model request, as a tool's next-turn overrides are for the
    /// request after it: for example `TurnParams::default().tool_choice(ToolChoice::Required)` to
    /// make the model call a tool first. Default: none.
    pub fn first_turn(mut self, params: TurnParams) -> Self {
        self.options.first_turn = Some(params);
        self
    }

    /// How many calls of one turn run at once, for this run. Default: the agent's
    /// ([`AgentBuilder::tool_concurrency`](crate::AgentBuilder::tool_concurrency)).
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.options.concurrency = Some(concurrency);
        self
    }

    /// The run's events as they happen; the last one is `run.completed`, `run.paused` (with the
    /// state to store) or `run.failed`. The run makes progress only while the stream is polled.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("greeter").model(ScriptedModel::new().text("Hello!")).build()?;
    /// let events: Vec<Event> = agent.run("Hi").run_id("run-7").stream().collect().await;
    /// let names: Vec<&str> = events.iter().map(Event::name).collect();
    /// assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
    /// assert!(matches!(&events[0], Event::RunStarted { run_id, resumed: false, .. } if run_id == "run-7"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The run, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(Runner::start(self.agent, self.input, self.options, events))
    }
}

/// The resume of a paused run, made by [`Agent::resume`]: await it for the result, or call
/// [`stream`](Self::stream) for the run's events.
///
/// ```
/// use std::sync::Arc;
/// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool, ToolCall};
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
/// let paused = agent.run("Sync both").context(json!({"team": "infra"})).await?;
///
/// let approved = Decisions::new().approve("c1").approve("c2");
/// let done = agent.resume(&paused.state, approved).tool_concurrency(2).await?;
/// assert_eq!(done.output(), Some("Both synced."));
/// assert_eq!(done.state.context(), &json!({"team": "infra"})); // the state's
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a resume request does nothing until it is awaited or streamed"]
pub struct ResumeRequest {
    agent: Agent,
    state: RunState,
    decisions: Decisions,
    options: RunOptions,
}

impl ResumeRequest {
    /// Journals the resumed run in `journal` (a run store's, which took the run).
    pub(crate) fn journal(mut self, journal: Arc<dyn Journal>) -> Self {
        self.options.journal = Some(journal);
        self
    }

    /// Who made the decisions, and when (a run store's record), for the run's span.
    pub(crate) fn deciders(mut self, deciders: Vec<Decider>) -> Self {
        self.options.deciders = deciders;
        self
    }

    /// How many calls of one turn run at once, for the rest of this run. Default: the agent's.
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.options.concurrency = Some(concurrency);
        self
    }

    /// The resumed run's events. A refused resume (a missing decision, a bad signature, another
    /// agent's state, a run that is not paused) is one `run.refused` event, with the error's kind:
    /// the kind of the error the awaited request returns.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, AgentErrorKind, Decisions, Event, ScriptedModel, Tool};
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
    /// let names: Vec<&str> = agent.resume(&paused.state, approved).stream().map(|e| e.name()).collect().await;
    /// assert_eq!(names, ["run.started", "tool.called", "tool.result", "model.turn", "run.completed"]);
    ///
    /// let refused: Vec<Event> = agent.resume(&paused.state, Decisions::new()).stream().collect().await;
    /// let [Event::Refused { kind, error, .. }] = &refused[..] else { panic!("{refused:?}") };
    /// assert_eq!(*kind, AgentErrorKind::MissingDecision);
    /// assert!(error.starts_with("no decision for pending tool calls call_1"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The run, reporting to `events` (nobody, when the request is awaited).
    pub(crate) fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(Runner::resume(
            self.agent,
            self.state,
            self.decisions,
            self.options,
            events,
        ))
    }
}

/// The retry of a failed run, made by [`Agent::retry`]: await it for the result, or call
/// [`stream`](Self::stream) for the run's events.
#[derive(Debug)]
#[must_use = "a retry request does nothing until it is awaited or streamed"]
pub struct RetryRequest {
    agent: Agent,
    state: RunState,
    options: RunOptions,
}

impl RetryRequest {
    /// How many calls of one turn run at once, for the rest of this run. Default: the agent's.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new();
    /// let agent = Agent::builder("t").model(model.clone()).build()?;
    /// let failed = agent.run("hello").context(json!({"lang": "en"})).await.unwrap_err();
    /// let state = failed.state.unwrap();
    ///
    /// let _ = model.clone().text("Hello!"); // the model is back
    /// let done = agent.retry(&state).tool_concurrency(4).await?;
    /// assert_eq!(done.output(), Some("Hello!"));
    /// assert_eq!(done.state.context(), &json!({"lang": "en"})); // the state's
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.options.concurrency = Some(concurrency);
        self
    }

    /// The retried run's events (a refused retry is one `run.refused`, as a refused resume is).
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
    /// let events: Vec<Event> = agent.retry(&state).stream().collect().await;
    /// let names: Vec<&str> = events.iter().map(Event::name).collect();
    /// assert_eq!(names, ["run.started", "model.turn", "run.completed"]);
    ///
    /// // A completed run is not retried: the stream is one `run.refused`.
    /// let Some(Event::Completed { state: done, .. }) = events.last() else { panic!("{events:?}") };
    /// let refused: Vec<Event> = agent.retry(done).stream().collect().await;
    /// assert!(matches!(&refused[..], [Event::Refused { error, .. }] if error.contains("has not failed")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The run, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(Runner::retry(self.agent, self.state, self.options, events))
    }
}

/// A completed run continued with a new user message, made by [`Agent::continue_run`]: await it
/// for the result, or call [`stream`](Self::stream) for the run's events.
#[derive(Debug)]
#[must_use = "a continue request does nothing until it is awaited or streamed"]
pub struct ContinueRequest {
    agent: Agent,
    state: RunState,
    input: String,
    options: RunOptions,
}

impl ContinueRequest {
    /// Overrides for the continued run's first model request. Default: none.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, TurnParams};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().record_requests().text("Hello!").text("Fine.");
    /// let agent = Agent::builder("chat").model(model.clone()).build()?;
    /// let first = agent.run("Hi").await?;
    /// let second = agent
    ///     .continue_run(&first.state, "How are you?")
    ///     .first_turn(TurnParams::default().max_output_tokens(16))
    ///     .await?;
    /// assert_eq!(second.output(), Some("Fine."));
    /// assert_eq!(model.requests()[1].max_output_tokens, Some(16));
    /// # Ok(())
    /// # }
    /// ```
    pub fn first_turn(mut self, params: TurnParams) -> Self {
        self.options.first_turn = Some(params);
        self
    }

    /// How many calls of one turn run at once, for the rest of this run. Default: the agent's.
    pub fn tool_concurrency(mut self, concurrency: usize) -> Self {
        self.options.concurrency = Some(concurrency);
        self
    }

    /// The continued run's events (a refused continuation is one `run.refused`).
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
    /// let events: Vec<Event> = agent.continue_run(&first.state, "How are you?").stream().collect().await;
    /// let run_id = first.state.run_id();
    /// assert!(matches!(&events[0], Event::RunStarted { run_id: id, resumed: true, .. } if id == run_id));
    /// assert!(matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Fine, thanks."));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The run, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(Runner::continue_run(
            self.agent,
            self.state,
            self.input,
            self.options,
            events,
        ))
    }
}

/// Awaiting a request runs it, with no listener for its events.
macro_rules! into_future {
    ($($request:ty),*) => {$(
        impl IntoFuture for $request {
            type Output = Outcome;
            type IntoFuture = BoxFuture<'static, Outcome>;

            fn into_future(self) -> Self::IntoFuture {
                self.start(Emitter::default())
            }
        }
    )*};
}

into_future!(RunRequest, ResumeRequest, RetryRequest, ContinueRequest);
