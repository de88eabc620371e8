//! The run's side of a write-ahead journal: the transitions the loop reports, as they happen, to
//! whoever keeps the run (a run store), and what a recovery hands back.
//!
//! The loop waits for each report before it goes on: a model turn is recorded once its calls are
//! planned, together with the starts of the calls that are to run (one report, so a store writes
//! them in one commit), before any tool's code runs; a call started outside a fresh turn (a
//! resumed or recovered one) is recorded on its own before its code runs; a run's end is recorded
//! before anyone is told. A report that fails stops the run (its error is the run's), so a process that lost the
//! run to another (a recovery, a second resumer) writes nothing more and runs nothing more.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::model::request::TurnParams;
use crate::run::state::{RunState, ToolStep};

/// One transition of a run, borrowed from the loop for as long as it is being recorded.
pub(crate) enum Transition<'a> {
    /// A new run, before its first model request: its whole state, with the application context
    /// the runner keeps apart while it runs.
    Started {
        state: &'a RunState,
        context: &'a Value,
    },
    /// A model turn with tool calls, received and added to the conversation, once its calls are
    /// planned and before any of them runs; `params` are the overrides the turn was asked under
    /// (they decide which tools it offered); `starts` are the calls that are to run, in call
    /// order (none when every call pauses or is answered without running). Each counts as
    /// started from here on: recorded with the turn, its start is on disk before its code runs.
    Turn {
        state: &'a RunState,
        context: &'a Value,
        params: &'a TurnParams,
        starts: &'a [Start<'a>],
    },
    /// A call of a resumed or recovered turn is about to run its tool's code.
    CallStarted(Start<'a>),
    /// A call that ran has its result, and what it changed for the rest of the run.
    CallFinished {
        step: &'a ToolStep,
        new_context: Option<&'a Value>,
    },
    /// The run paused, completed or failed: its final state, signed when the agent signs, and
    /// the error it failed with.
    Settled {
        state: &'a RunState,
        failure: Option<&'a AgentError>,
    },
}

/// A call about to run its tool's code: its id, its tool's name and its attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Start<'a> {
    pub(crate) call_id: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) attempt: u32,
}

/// Whoever keeps a run's journal. Each report is written (and, for a store, committed) before
/// the returned future completes.
pub(crate) trait Journal: Send + Sync {
    fn record<'a>(&'a self, transition: Transition<'a>) -> BoxFuture<'a, Result<(), AgentError>>;

    /// The run's version after the last entry recorded, if the journal counts them (a store's).
    fn version(&self) -> Option<u64> {
        None
    }
}

/// A call of the interrupted turn that the journal says had started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StartedCall {
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) attempt: u32,
    /// When it started, if the journal recorded it (milliseconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) at_ms: Option<u64>,
}

/// A call of the interrupted turn that the journal says had finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FinishedCall {
    pub(crate) step: ToolStep,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) new_context: Option<Value>,
}

/// Where an interrupted run stopped, as its journal tells: what recovery needs besides the state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub(crate) struct InFlight {
    /// The overrides the interrupted turn was asked under; `None` when no turn was under way (the
    /// run had started, or had been resumed, and had not yet received a model turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) turn: Option<TurnParams>,
    /// Calls started, in the order they started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) started: Vec<StartedCall>,
    /// Calls finished, in the order they finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) finished: Vec<FinishedCall>,
}

impl InFlight {
    pub(crate) fn is_empty(&self) -> bool {
        self.turn.is_none() && self.started.is_empty() && self.finished.is_empty()
    }

    pub(crate) fn finished(&self, call_id: &str) -> Option<&FinishedCall> {
        self.finished
            .iter()
            .rev()
            .find(|f| f.step.call_id == call_id)
    }

    pub(crate) fn started(&self, call_id: &str) -> Option<&StartedCall> {
        self.started.iter().rev().find(|s| s.call_id == call_id)
    }
}

/// A function that makes a new run's journal from its run id.
pub(crate) type MakeJournal = Box<dyn FnOnce(&str) -> std::sync::Arc<dyn Journal> + Send>;

/// Makes a new run's journal once its run id is known.
pub(crate) struct JournalFor(pub(crate) MakeJournal);

impl std::fmt::Debug for JournalFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalFor")
    }
}
