//! The events of a run, in the order they happen; see [`RunRequest::stream`](crate::RunRequest::stream).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::{AgentError, AgentErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{FinishReason, ModelDelta, Usage};
use crate::run::state::{PendingCall, RunError, RunResult, RunState};
use crate::tool::context::ProgressSink;

/// One thing that happened in a run. [`Event::name`] gives the dotted names other SDKs use
/// (`tool.preliminary_result`, ...), which are also the `type` of an event as serde data.
///
/// ```
/// use futures::StreamExt;
/// use phaseo_agent::{Agent, Event, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let ping = Tool::new("ping", "Ping a host", json!({"type": "object"}), |_, _| Ok(json!("pong")));
/// let model = ScriptedModel::new().tool_call("call_1", "ping", json!({})).text("It answers.");
/// let agent = Agent::builder("ops").model(model).tool(ping).build()?;
/// let events: Vec<Event> = agent.run("Ping it").stream().collect().await;
///
/// let names: Vec<&str> = events.iter().map(Event::name).collect();
/// assert_eq!(names, ["run.started", "model.turn", "tool.called", "tool.result", "model.turn", "run.completed"]);
/// assert!(matches!(&events[3], Event::ToolResult { content, .. } if content == r#""pong""#));
/// assert_eq!(serde_json::to_value(&events[2]).unwrap()["type"], "tool.called");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Event {
    /// A run started, or a paused run resumed.
    #[serde(rename = "run.started")]
    #[non_exhaustive]
    RunStarted {
        /// The run id.
        run_id: String,
        /// The agent id.
        agent_id: String,
        /// Whether this continues a paused run.
        resumed: bool,
    },
    /// The model answered a turn.
    #[serde(rename = "model.turn")]
    #[non_exhaustive]
    ModelTurn {
        /// The turn index (0 for the first).
        step_index: usize,
        /// Its text, if any.
        text: Option<String>,
        /// Its tool calls, in order.
        tool_calls: Vec<ToolCall>,
        /// Why the model stopped, when the provider says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finish_reason: Option<FinishReason>,
        /// Tokens the turn used, when the provider says (the run's total is
        /// [`RunState::usage`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A piece of the model's answer as it streams in (only from a model that streams: see
    /// [`Model::respond_streaming`](crate::Model::respond_streaming); a provider that answers a
    /// turn whole, by its `streaming(false)` setting or because the server refused to stream,
    /// sends none). The whole turn follows as `model.turn`.
    #[serde(rename = "model.delta")]
    #[non_exhaustive]
    ModelDelta {
        /// The turn index.
        step_index: usize,
        /// The piece.
        delta: ModelDelta,
    },
    /// A model request failed with a retryable error, and will be retried after `delay_ms`.
    #[serde(rename = "model.retry")]
    #[non_exhaustive]
    ModelRetry {
        /// The turn index.
        step_index: usize,
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// The error.
        error: String,
        /// The wait before the retry, in milliseconds.
        delay_ms: u64,
    },
    /// A tool call is about to run.
    #[serde(rename = "tool.called")]
    #[non_exhaustive]
    ToolCalled {
        /// The call.
        call: ToolCall,
    },
    /// A tool published a progress value.
    #[serde(rename = "tool.preliminary_result")]
    #[non_exhaustive]
    PreliminaryResult {
        /// The call id.
        call_id: String,
        /// The tool id.
        tool: String,
        /// The value.
        value: Value,
    },
    /// A tool call finished; `content` is what the model sees.
    #[serde(rename = "tool.result")]
    #[non_exhaustive]
    ToolResult {
        /// The call id.
        call_id: String,
        /// The tool id.
        tool: String,
        /// The result text.
        content: String,
    },
    /// A tool call failed. `error` is the operator's diagnostic; `content` is what the model sees
    /// (absent when the error fails the run).
    #[serde(rename = "tool.error")]
    #[non_exhaustive]
    ToolError {
        /// The call id.
        call_id: String,
        /// The tool id.
        tool: String,
        /// The full error, for operators.
        error: String,
        /// The model-visible result, when the error is returned to the model.
        content: Option<String>,
    },
    /// The run paused for a person; `state` is what to store and resume.
    #[serde(rename = "run.paused")]
    #[non_exhaustive]
    Paused {
        /// The calls waiting for a decision.
        pending: Vec<PendingCall>,
        /// The state to store.
        state: Box<RunState>,
    },
    /// The run completed.
    #[serde(rename = "run.completed")]
    #[non_exhaustive]
    Completed {
        /// The model's final text.
        output: String,
        /// The final state: every step, the context, the conversation.
        state: Box<RunState>,
    },
    /// The run failed.
    #[serde(rename = "run.failed")]
    #[non_exhaustive]
    Failed {
        /// The error's kind: the kind of the error a plain (awaited) request returns.
        kind: AgentErrorKind,
        /// The error's text.
        error: String,
        /// The state as it was when the run failed (status `failed`), with the conversation and
        /// every step so far (the calls of the failing turn included), for diagnosis; it cannot be
        /// resumed, and [`Agent::retry`](crate::Agent::retry) takes it.
        state: Box<RunState>,
    },
    /// A resume, retry or continuation was refused before anything ran (a missing decision, a bad
    /// signature, another agent's state, a run in another status, ...): the stream's only event.
    /// A plain (awaited) request returns the same error, with no state.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, AgentErrorKind, Decisions, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let agent = Agent::builder("t").model(ScriptedModel::new()).build().unwrap();
    /// let failed = agent.run("hello").await.unwrap_err(); // the model had nothing to say
    /// let state = failed.state.unwrap();
    ///
    /// // A failed run is retried, not resumed: the resume is refused, and nothing runs.
    /// let events: Vec<Event> = agent.resume(&state, Decisions::new()).stream().collect().await;
    /// let [Event::Refused { kind, .. }] = &events[..] else { panic!("{events:?}") };
    /// assert_eq!(*kind, AgentErrorKind::NotPaused);
    /// assert_eq!(serde_json::to_value(&events[0]).unwrap()["kind"], "not_paused");
    /// let plain = agent.resume(&state, Decisions::new()).await.unwrap_err();
    /// assert_eq!(plain.error.kind(), *kind);
    /// # }
    /// ```
    #[serde(rename = "run.refused")]
    #[non_exhaustive]
    Refused {
        /// The error's kind.
        kind: AgentErrorKind,
        /// The error's text.
        error: String,
        /// The state exactly as it was given, unchanged (a paused one can still be resumed).
        state: Box<RunState>,
    },
}

impl Event {
    /// The event's dotted name, e.g. `"tool.preliminary_result"`.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("greeter").model(ScriptedModel::new().text("Hi!")).build()?;
    /// let events: Vec<Event> = agent.run("Hello").stream().collect().await;
    /// assert_eq!(events[0].name(), "run.started");
    /// assert_eq!(events.last().map(Event::name), Some("run.completed"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run.started",
            Event::ModelTurn { .. } => "model.turn",
            Event::ModelDelta { .. } => "model.delta",
            Event::ModelRetry { .. } => "model.retry",
            Event::ToolCalled { .. } => "tool.called",
            Event::PreliminaryResult { .. } => "tool.preliminary_result",
            Event::ToolResult { .. } => "tool.result",
            Event::ToolError { .. } => "tool.error",
            Event::Paused { .. } => "run.paused",
            Event::Completed { .. } => "run.completed",
            Event::Failed { .. } => "run.failed",
            Event::Refused { .. } => "run.refused",
        }
    }

    /// `tool.error` for a call; `content` is what the model reads, when the run goes on.
    pub(crate) fn tool_error(call: &ToolCall, error: &AgentError, content: Option<String>) -> Self {
        Event::ToolError {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            error: error.to_string(),
            content,
        }
    }
}

/// The run's end of its event stream. Without a listener (a plain `run()`) it holds nothing, and
/// no event is built for it: [`Emitter::emit`] takes a function that builds the event, called
/// only when someone listens, so a plain run clones no payload.
#[derive(Clone, Default)]
pub(crate) struct Emitter {
    events: Option<UnboundedSender<Event>>,
    /// Publishes a call's progress as `tool.preliminary_result` (what tools' contexts are given).
    progress: Option<Arc<ProgressSink>>,
}

impl Emitter {
    /// An emitter that sends to a listener.
    fn listening(events: UnboundedSender<Event>) -> Self {
        let sender = events.clone();
        let progress: Arc<ProgressSink> = Arc::new(move |call: &ToolCall, value: &Value| {
            // The receiver is gone only when nobody listens to the run any more; progress is
            // still kept on the call's step.
            let _ = sender.send(Event::PreliminaryResult {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                value: value.clone(),
            });
        });
        Emitter {
            events: Some(events),
            progress: Some(progress),
        }
    }

    pub(crate) fn is_listening(&self) -> bool {
        self.events.is_some()
    }

    /// Sends the event `make` builds, when someone listens; otherwise `make` is not called.
    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(events) = &self.events {
            // The receiver is gone when nobody listens any more; the run itself goes on.
            let _ = events.send(make());
        }
    }

    /// Where the calls of this run publish their progress.
    pub(crate) fn progress(&self) -> Option<Arc<ProgressSink>> {
        self.progress.clone()
    }
}

type RunFuture = futures::future::BoxFuture<'static, Result<RunResult, RunError>>;

/// The events of one run, as a [`futures::Stream`]. The run makes progress only while the stream is
/// polled; dropping the stream drops the run (and fires the cancellation tokens of running calls).
///
/// The last event is [`Event::Completed`], [`Event::Paused`] (carrying the state to store) or
/// [`Event::Failed`]; a refused resume, retry or continuation is one [`Event::Refused`].
///
/// ```
/// use futures::StreamExt;
/// use phaseo_agent::{Agent, Event, PendingKind, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({"environment": "staging"}));
/// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
///
/// let mut events = agent.run("Deploy staging").stream();
/// let mut last = None;
/// while let Some(event) = events.next().await {
///     println!("{}", event.name());
///     last = Some(event);
/// }
/// let Some(Event::Paused { pending, state, .. }) = last else { panic!("the run should pause") };
/// assert_eq!(pending[0].kind, PendingKind::ToolApproval);
/// assert!(state.to_json().contains("call_1")); // store it, resume it later
/// # Ok(())
/// # }
/// ```
pub struct EventStream {
    run: Option<RunFuture>,
    events: tokio::sync::mpsc::UnboundedReceiver<Event>,
}

impl EventStream {
    pub(crate) fn new(start: impl FnOnce(Emitter) -> RunFuture) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        EventStream {
            run: Some(start(Emitter::listening(tx))),
            events: rx,
        }
    }
}

impl futures::Stream for EventStream {
    type Item = Event;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Event>> {
        use std::task::Poll;
        loop {
            if let Poll::Ready(Some(event)) = self.events.poll_recv(cx) {
                return Poll::Ready(Some(event));
            }
            let Some(run) = self.run.as_mut() else {
                // The run is over: deliver what is queued, then end (a tool may still hold a
                // sender clone, so do not wait for the channel to close).
                return Poll::Ready(self.events.try_recv().ok());
            };
            match run.as_mut().poll(cx) {
                // The run's outcome was sent as its last event; go round to deliver it.
                Poll::Ready(_) => self.run = None,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("running", &self.run.is_some())
            .finish()
    }
}
