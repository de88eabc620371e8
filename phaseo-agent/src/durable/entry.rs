//! A journal entry as stored: what each transition of a run writes (deltas of the run's state,
//! its calls' starts and results, decisions, its end), its encoding, and the checksum chain that
//! ties each entry to the one before it.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::model::message::Message;
use crate::model::request::{TurnParams, Usage};
use crate::run::state::{
    Decision, Decisions, PausedTurn, PendingCall, RunState, RunStatus, ToolStep,
};
use crate::store::backend::JournalRow;
use crate::telemetry::context::TraceContext;

/// The format of the entries and snapshots this build writes and reads.
pub(crate) const FORMAT: u32 = 1;

/// One journal entry, as stored (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Entry {
    /// A new run: its whole first state.
    Started { state: Box<RunState> },
    /// A model turn with calls, before any of them was planned.
    Turn { delta: Delta, params: TurnParams },
    /// A call's tool is about to run.
    CallStarted {
        call_id: String,
        tool: String,
        attempt: u32,
        /// When it started (milliseconds since the Unix epoch); absent in entries written before
        /// it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<u64>,
    },
    /// A call's result.
    CallFinished {
        step: ToolStep,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_context: Option<Value>,
    },
    /// The run paused, completed or failed (and then why, as people read it).
    Settled {
        delta: Delta,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
    /// One call's decision, recorded while the run stays paused.
    Decision {
        call_id: String,
        decision: Decision,
        by: String,
        digest: String,
    },
    /// A resume took the run with these decisions.
    Decided { decisions: Decisions, by: String },
    /// A resume that took the run was refused before anything ran: the run waits again.
    Refused { error: String },
    /// A recovery took the run after its process stopped.
    Recovered { by: String },
    /// A failed run was taken to be retried: the model is asked again from its failed state.
    Retried { by: String },
}

impl Entry {
    fn kind(&self) -> &'static str {
        match self {
            Entry::Started { .. } => "started",
            Entry::Turn { .. } => "turn",
            Entry::CallStarted { .. } => "call_started",
            Entry::CallFinished { .. } => "call_finished",
            Entry::Settled { .. } => "settled",
            Entry::Decision { .. } => "decision",
            Entry::Decided { .. } => "decided",
            Entry::Refused { .. } => "refused",
            Entry::Recovered { .. } => "recovered",
            Entry::Retried { .. } => "retried",
        }
    }
}

/// One changed field of a run's state, with its new value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "field", content = "value", rename_all = "snake_case")]
pub(crate) enum Set {
    Status(RunStatus),
    Turns(usize),
    TurnBase(usize),
    Context(Value),
    Pending(Vec<PendingCall>),
    PausedTurn(Option<PausedTurn>),
    NextTurn(TurnParams),
    ApprovedTools(BTreeSet<String>),
    Output(Option<String>),
    Usage(Usage),
    Trace(Option<Box<TraceContext>>),
    PausedAt(Option<u64>),
    Signature(Option<String>),
}

/// What changed in a run's state since the last entry: the messages and steps appended (after
/// cutting back to `keep_*` when an earlier one changed, as an edited call does), and every other
/// field that changed, whole. Its size is that of the step, not of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Delta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) keep_messages: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) keep_steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) steps: Vec<ToolStep>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) set: Vec<Set>,
}

/// Where a list changed: the length of the common prefix, when shorter than the old list.
fn common_prefix<T: PartialEq>(old: &[T], new: &[T]) -> (Option<usize>, usize) {
    let same = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let keep = (same < old.len()).then_some(same);
    (keep, same)
}

impl Delta {
    /// The change from `old` to `new`, whose application context is `context`.
    pub(crate) fn between(old: &RunState, new: &RunState, context: &Value) -> Delta {
        let (keep_messages, from) = common_prefix(&old.messages, &new.messages);
        let messages = new.messages[from..].to_vec();
        let (keep_steps, from) = common_prefix(&old.steps, &new.steps);
        let steps = new.steps[from..].to_vec();
        let mut set = Vec::new();
        macro_rules! changed {
            ($field:ident, $variant:ident) => {
                if old.$field != new.$field {
                    set.push(Set::$variant(new.$field.clone()));
                }
            };
        }
        changed!(status, Status);
        changed!(turns, Turns);
        changed!(turn_base, TurnBase);
        if &old.context != context {
            set.push(Set::Context(context.clone()));
        }
        changed!(pending, Pending);
        changed!(paused_turn, PausedTurn);
        changed!(next_turn, NextTurn);
        changed!(approved_tools, ApprovedTools);
        changed!(output, Output);
        changed!(usage, Usage);
        changed!(trace, Trace);
        changed!(paused_at_ms, PausedAt);
        changed!(signature, Signature);
        Delta {
            keep_messages,
            messages,
            keep_steps,
            steps,
            set,
        }
    }

    /// Applies the change to `state`; a delta that does not fit it is refused.
    pub(crate) fn apply(self, state: &mut RunState) -> Result<(), String> {
        if let Some(keep) = self.keep_messages {
            if keep > state.messages.len() {
                return Err("a delta keeps more messages than the run has".into());
            }
            state.messages.truncate(keep);
        }
        state.messages.extend(self.messages);
        if let Some(keep) = self.keep_steps {
            if keep > state.steps.len() {
                return Err("a delta keeps more steps than the run has".into());
            }
            state.steps.truncate(keep);
        }
        state.steps.extend(self.steps);
        for set in self.set {
            match set {
                Set::Status(v) => state.status = v,
                Set::Turns(v) => state.turns = v,
                Set::TurnBase(v) => state.turn_base = v,
                Set::Context(v) => state.context = v,
                Set::Pending(v) => state.pending = v,
                Set::PausedTurn(v) => state.paused_turn = v,
                Set::NextTurn(v) => state.next_turn = v,
                Set::ApprovedTools(v) => state.approved_tools = v,
                Set::Output(v) => state.output = v,
                Set::Usage(v) => state.usage = v,
                Set::Trace(v) => state.trace = v,
                Set::PausedAt(v) => state.paused_at_ms = v,
                Set::Signature(v) => state.signature = v,
            }
        }
        Ok(())
    }
}

/// Reads an entry. An internally tagged enum is read by buffering the whole entry in serde's
/// generic form and reading that again; the entries that carry states, messages and results are
/// read straight into their fields instead, by the tag this build writes first
/// (`{"type":"turn",...`). Anything else, or anything that does not read so, is read the general
/// way (and fails there with its error).
pub(crate) fn decode_entry(body: &str) -> Result<Entry, serde_json::Error> {
    use serde::de::IgnoredAny;
    use serde_json::value::RawValue;

    #[derive(Deserialize)]
    struct Started<'a> {
        #[serde(rename = "type")]
        _type: IgnoredAny,
        #[serde(borrow)]
        state: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Turn {
        #[serde(rename = "type")]
        _type: IgnoredAny,
        delta: Delta,
        params: TurnParams,
    }
    #[derive(Deserialize)]
    struct CallFinished {
        #[serde(rename = "type")]
        _type: IgnoredAny,
        step: ToolStep,
        #[serde(default)]
        new_context: Option<Value>,
    }
    #[derive(Deserialize)]
    struct Settled {
        #[serde(rename = "type")]
        _type: IgnoredAny,
        delta: Delta,
        #[serde(default)]
        failure: Option<String>,
    }

    let tag = body
        .strip_prefix(r#"{"type":""#)
        .and_then(|rest| rest.split_once('"'))
        .map_or("", |(tag, _)| tag);
    let fast = match tag {
        "started" => serde_json::from_str::<Started<'_>>(body)
            .ok()
            .and_then(|e| RunState::from_json(e.state.get()).ok())
            .map(|state| Entry::Started {
                state: Box::new(state),
            }),
        "turn" => serde_json::from_str::<Turn>(body)
            .ok()
            .map(|e| Entry::Turn {
                delta: e.delta,
                params: e.params,
            }),
        "call_finished" => {
            serde_json::from_str::<CallFinished>(body)
                .ok()
                .map(|e| Entry::CallFinished {
                    step: e.step,
                    new_context: e.new_context,
                })
        }
        "settled" => serde_json::from_str::<Settled>(body)
            .ok()
            .map(|e| Entry::Settled {
                delta: e.delta,
                failure: e.failure,
            }),
        _ => None,
    };
    match fast {
        Some(entry) => Ok(entry),
        None => serde_json::from_str(body),
    }
}

/// Lower-case hex of bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The first entry of a new run (version 1), as stored: what an enqueue writes, the run not yet
/// begun.
pub(crate) fn first_row(state: RunState) -> Result<JournalRow, StoreError> {
    let entry = Entry::Started {
        state: Box::new(state),
    };
    encode(&entry, "", 1)
}

/// `entry` as the row of `version`, chained to the entry before it (`previous`, its digest).
pub(crate) fn encode(
    entry: &Entry,
    previous: &str,
    version: u64,
) -> Result<JournalRow, StoreError> {
    let kind = entry.kind();
    let body = serde_json::to_string(entry)
        .map_err(|e| StoreError::Database(format!("encoding an entry: {e}").into()))?;
    let digest = chain(previous, version, kind, &body);
    Ok(JournalRow {
        version,
        kind: kind.to_owned(),
        format: FORMAT,
        body,
        digest,
    })
}

/// The chain's checksum after an entry: it covers the one before, so an entry edited, dropped or
/// moved is found on load.
pub(crate) fn chain(previous: &str, version: u64, kind: &str, body: &str) -> String {
    let mut hash = Sha256::new();
    for part in [previous.as_bytes(), kind.as_bytes(), body.as_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.update(version.to_le_bytes());
    hex(&hash.finalize())
}

/// The checksum of a snapshot's body.
pub(crate) fn snapshot_digest(body: &str) -> String {
    hex(&Sha256::digest(body.as_bytes()))
}

/// The digest of a pending call's arguments as stored (the text a person is shown): a decision
/// names it, so a decision made on other arguments is refused.
pub(crate) fn arguments_digest(arguments: &str) -> String {
    hex(&Sha256::digest(arguments.as_bytes()))
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
