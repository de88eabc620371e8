//! The events of a run, in the order they happen; see [`Agent::stream`](crate::Agent::stream).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolCall;
use crate::run::{PendingCall, RunState};

/// One thing that happened in a run. [`Event::name`] gives the dotted names other SDKs use
/// (`tool.preliminary_result`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Event {
    /// A run started, or a paused run resumed.
    #[serde(rename = "run.started")]
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
    ModelTurn {
        /// The turn index (0 for the first).
        step_index: usize,
        /// Its text, if any.
        text: Option<String>,
        /// Its tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool call is about to run.
    #[serde(rename = "tool.called")]
    ToolCalled {
        /// The call.
        call: ToolCall,
    },
    /// A tool published a progress value.
    #[serde(rename = "tool.preliminary_result")]
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
    Paused {
        /// The calls waiting for a decision.
        pending: Vec<PendingCall>,
        /// The state to store.
        state: Box<RunState>,
    },
    /// The run completed.
    #[serde(rename = "run.completed")]
    Completed {
        /// The model's final text.
        output: String,
        /// The final state: every step, the context, the conversation.
        state: Box<RunState>,
    },
    /// The run failed.
    #[serde(rename = "run.failed")]
    Failed {
        /// The error.
        error: String,
        /// The state as it was when the run failed (status `failed`): the conversation and steps so
        /// far, for diagnosis. It cannot be resumed.
        state: Box<RunState>,
    },
}

impl Event {
    /// The event's dotted name, e.g. `"tool.preliminary_result"`.
    ///
    /// ```
    /// use phaseo_agent::Event;
    /// let e = Event::ToolCalled { call: phaseo_agent::ToolCall::raw("call_1", "fly", "{}") };
    /// assert_eq!(e.name(), "tool.called");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run.started",
            Event::ModelTurn { .. } => "model.turn",
            Event::ToolCalled { .. } => "tool.called",
            Event::PreliminaryResult { .. } => "tool.preliminary_result",
            Event::ToolResult { .. } => "tool.result",
            Event::ToolError { .. } => "tool.error",
            Event::Paused { .. } => "run.paused",
            Event::Completed { .. } => "run.completed",
            Event::Failed { .. } => "run.failed",
        }
    }
}

type RunFuture = futures::future::BoxFuture<'static, Result<crate::RunResult, crate::AgentError>>;

/// The events of one run, as a [`futures::Stream`]. The run makes progress only while the stream is
/// polled; dropping the stream drops the run (and fires the cancellation tokens of running calls).
///
/// The last event is [`Event::Completed`], [`Event::Paused`] (carrying the state to store) or
/// [`Event::Failed`].
pub struct EventStream {
    run: Option<RunFuture>,
    events: tokio::sync::mpsc::UnboundedReceiver<Event>,
}

impl EventStream {
    pub(crate) fn new(
        start: impl FnOnce(tokio::sync::mpsc::UnboundedSender<Event>) -> RunFuture,
    ) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        EventStream {
            run: Some(start(tx)),
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
