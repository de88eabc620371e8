//! A run's journal in a store: the entries (deltas of the run's state, and its calls' starts and
//! results), their checksum chain, the snapshots that bound a load, and the rebuilding of a run
//! from them. The same for every backend.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::durable::lease::{Keeper, millis};
use crate::error::{AgentError, StoreError};
use crate::model::message::Message;
use crate::model::request::{TurnParams, Usage};
use crate::run::journal::{FinishedCall, InFlight, Journal, StartedCall, Transition};
use crate::run::state::{
    Decision, Decisions, PausedTurn, PendingCall, PendingKind, RunState, RunStatus, ToolStep,
};
use crate::store::backend::{
    Append, DecisionRow, JournalRow, Lease, LeaseRequest, LoadedRun, NewRun, PendingRow, RunStore,
    SnapshotRow, StoredStatus,
};
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
    keep_messages: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_steps: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    steps: Vec<ToolStep>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    set: Vec<Set>,
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

/// A run as its journal leaves it: the state as last recorded, the turn under way, and the
/// decisions a resume took it with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Replayed {
    pub(crate) state: RunState,
    #[serde(default, skip_serializing_if = "InFlight::is_empty")]
    pub(crate) in_flight: InFlight,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) decisions: Option<Decisions>,
    /// Why the run failed, when its last settling was a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failure: Option<String>,
}

impl Replayed {
    /// Applies one entry.
    fn apply(&mut self, entry: Entry) -> Result<(), String> {
        match entry {
            Entry::Started { state } => {
                *self = Replayed {
                    state: *state,
                    in_flight: InFlight::default(),
                    decisions: None,
                    failure: None,
                }
            }
            Entry::Turn { delta, params } => {
                delta.apply(&mut self.state)?;
                self.in_flight = InFlight {
                    turn: Some(params),
                    ..InFlight::default()
                };
                self.decisions = None;
            }
            Entry::CallStarted {
                call_id,
                tool,
                attempt,
                at_ms,
            } => self.in_flight.started.push(StartedCall {
                call_id,
                tool,
                attempt,
                at_ms,
            }),
            Entry::CallFinished { step, new_context } => self
                .in_flight
                .finished
                .push(FinishedCall { step, new_context }),
            Entry::Settled { delta, failure } => {
                delta.apply(&mut self.state)?;
                self.in_flight = InFlight::default();
                self.decisions = None;
                self.failure = failure;
            }
            Entry::Decided { decisions, .. } => {
                self.in_flight = InFlight::default();
                self.decisions = Some(decisions);
            }
            Entry::Refused { .. } => {
                self.in_flight = InFlight::default();
                self.decisions = None;
            }
            Entry::Retried { .. } => {
                self.in_flight = InFlight::default();
                self.decisions = None;
                self.failure = None;
            }
            Entry::Decision { .. } | Entry::Recovered { .. } => {}
        }
        Ok(())
    }
}

/// The snapshot body: the replayed run and the chain's checksum at its version. Written from
/// borrowed parts (no copy of the run), read back owned.
#[derive(Serialize, Deserialize)]
struct Snapshot<R> {
    chain: String,
    #[serde(flatten)]
    run: R,
}

/// Reads a snapshot body. The run's state is read straight into its fields (as
/// [`RunState::from_json`] does) rather than through serde's buffering of a flattened struct and
/// the state's own reading through a `Value`: three passes over the largest text the store
/// reads, made one. A body that does not read so is read the general way, for its error.
fn decode_snapshot(body: &str) -> Result<Snapshot<Replayed>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Fast<'a> {
        chain: String,
        #[serde(borrow)]
        state: &'a serde_json::value::RawValue,
        #[serde(default)]
        in_flight: InFlight,
        #[serde(default)]
        decisions: Option<Decisions>,
        #[serde(default)]
        failure: Option<String>,
    }
    if let Ok(fast) = serde_json::from_str::<Fast<'_>>(body)
        && let Ok(state) = RunState::from_json(fast.state.get())
    {
        return Ok(Snapshot {
            chain: fast.chain,
            run: Replayed {
                state,
                in_flight: fast.in_flight,
                decisions: fast.decisions,
                failure: fast.failure,
            },
        });
    }
    serde_json::from_str(body)
}

/// Reads an entry. An internally tagged enum is read by buffering the whole entry in serde's
/// generic form and reading that again; the entries that carry states, messages and results are
/// read straight into their fields instead, by the tag this build writes first
/// (`{"type":"turn",...`). Anything else, or anything that does not read so, is read the general
/// way (and fails there with its error).
fn decode_entry(body: &str) -> Result<Entry, serde_json::Error> {
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

/// The chain's checksum after an entry: it covers the one before, so an entry edited, dropped or
/// moved is found on load.
/// The first entry of a new run (version 1), as stored: what an enqueue writes, the run not yet
/// begun.
pub(crate) fn first_row(state: RunState) -> Result<JournalRow, StoreError> {
    let entry = Entry::Started {
        state: Box::new(state),
    };
    encode(&entry, "", 1)
}

/// `entry` as the row of `version`, chained to the entry before it (`previous`, its digest).
fn encode(entry: &Entry, previous: &str, version: u64) -> Result<JournalRow, StoreError> {
    let kind = entry.kind();
    let body = serde_json::to_string(entry)
        .map_err(|e| StoreError::Database(format!("encoding an entry: {e}")))?;
    let digest = chain(previous, version, kind, &body);
    Ok(JournalRow {
        version,
        kind: kind.to_owned(),
        format: FORMAT,
        body,
        digest,
    })
}

fn chain(previous: &str, version: u64, kind: &str, body: &str) -> String {
    let mut hash = Sha256::new();
    for part in [previous.as_bytes(), kind.as_bytes(), body.as_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.update(version.to_le_bytes());
    hex(&hash.finalize())
}

fn snapshot_digest(body: &str) -> String {
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

fn corrupt(run_id: &str, version: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_owned(),
        version,
        reason: reason.into(),
    }
}

/// Refuses a row in a format newer than this build's.
fn readable(run_id: &str, version: u64, format: u32) -> Result<(), StoreError> {
    if format > FORMAT {
        return Err(StoreError::UnsupportedFormat {
            run_id: run_id.into(),
            version,
            found: format,
            supported: FORMAT,
        });
    }
    Ok(())
}

/// Rebuilds a run from what its store returned, checking every checksum and version on the way.
pub(crate) fn replay(loaded: &LoadedRun) -> Result<(Replayed, String), StoreError> {
    let run_id = loaded.run_id.as_str();
    let (mut run, mut digest, mut version) = match &loaded.snapshot {
        Some(snapshot) => {
            readable(run_id, snapshot.version, snapshot.format)?;
            if snapshot_digest(&snapshot.body) != snapshot.digest {
                return Err(corrupt(
                    run_id,
                    snapshot.version,
                    "the snapshot does not match its checksum",
                ));
            }
            let parsed = decode_snapshot(&snapshot.body)
                .map_err(|e| corrupt(run_id, snapshot.version, format!("snapshot: {e}")))?;
            (Some(parsed.run), parsed.chain, snapshot.version)
        }
        None => (None, String::new(), 0),
    };
    for row in &loaded.rows {
        if row.version != version + 1 {
            return Err(corrupt(
                run_id,
                version + 1,
                format!(
                    "the journal goes from version {version} to {}: an entry is missing or repeated",
                    row.version
                ),
            ));
        }
        readable(run_id, row.version, row.format)?;
        let expected = chain(&digest, row.version, &row.kind, &row.body);
        if expected != row.digest {
            return Err(corrupt(
                run_id,
                row.version,
                "the entry does not match its checksum",
            ));
        }
        let entry = decode_entry(&row.body)
            .map_err(|e| corrupt(run_id, row.version, format!("entry: {e}")))?;
        match (&mut run, entry) {
            (None, Entry::Started { state }) => {
                run = Some(Replayed {
                    state: *state,
                    in_flight: InFlight::default(),
                    decisions: None,
                    failure: None,
                })
            }
            (None, _) => {
                return Err(corrupt(
                    run_id,
                    row.version,
                    "the journal does not begin with the run's start",
                ));
            }
            (Some(run), entry) => run
                .apply(entry)
                .map_err(|reason| corrupt(run_id, row.version, reason))?,
        }
        digest = expected;
        version = row.version;
    }
    if version != loaded.version {
        return Err(corrupt(
            run_id,
            loaded.version,
            format!("the journal ends at version {version}"),
        ));
    }
    let run = run.ok_or_else(|| corrupt(run_id, 0, "no entries and no snapshot"))?;
    // Deltas set fields one by one: the state they leave is checked as a stored state is.
    run.state
        .check_consistent()
        .map_err(|e| corrupt(run_id, version, format!("the replayed state: {e}")))?;
    if run.state.run_id != loaded.run_id {
        return Err(corrupt(
            run_id,
            version,
            format!("the stored state is of run `{}`", run.state.run_id),
        ));
    }
    Ok((run, digest))
}

/// The stored status of a run in state `state`.
pub(crate) fn status_of(state: &RunState) -> StoredStatus {
    match state.status {
        RunStatus::Completed => StoredStatus::Completed,
        RunStatus::Failed => StoredStatus::Failed,
        RunStatus::WaitingForHuman
            if state
                .pending
                .iter()
                .any(|p| p.kind == PendingKind::OutcomeUnknown) =>
        {
            StoredStatus::InDoubt
        }
        RunStatus::WaitingForHuman => StoredStatus::Paused,
    }
}

/// The pending rows of a paused state, waiting since `at_ms`, at `version`.
pub(crate) fn pending_rows(state: &RunState, version: u64, at_ms: i64) -> Vec<PendingRow> {
    state
        .pending
        .iter()
        .map(|p| {
            let arguments = p.arguments.to_string();
            PendingRow {
                run_id: state.run_id.clone(),
                agent_id: state.agent_id.clone(),
                call_id: p.call.id.clone(),
                tool: p.call.name.clone(),
                kind: p.kind.as_str().to_owned(),
                digest: arguments_digest(&arguments),
                arguments,
                since_ms: at_ms,
                version,
                decision: None,
                decided_by: None,
            }
        })
        .collect()
}

/// What a write adds besides its entry.
#[derive(Default)]
pub(crate) struct Extra {
    pub(crate) pending: Option<Vec<PendingRow>>,
    pub(crate) decisions: Vec<DecisionRow>,
    /// The status after the write; by default, running.
    pub(crate) status: Option<StoredStatus>,
}

/// The journal's view of the run: the store's version and checksum, and the run as replayed.
struct Shadow {
    version: u64,
    digest: String,
    run: Option<Replayed>,
    since_snapshot: u32,
    /// Set once a write failed: the run may have been taken by another process, and nothing more
    /// is written.
    broken: bool,
    /// The fencing token of the lease this process holds the run with, named by every write.
    fence: Option<u64>,
}

/// A run's journal in a store: the loop's [`Journal`], writing each transition as one entry, in
/// one transaction with the run's new version.
pub(crate) struct StoreJournal {
    store: Arc<dyn RunStore>,
    run_id: String,
    agent_id: String,
    snapshot_every: u32,
    shadow: tokio::sync::Mutex<Shadow>,
    /// A new run's lease, taken with its first write (see [`Holding`]).
    holding: Option<Holding>,
    /// The renewal of the lease this journal's process holds the run with, if it renews it
    /// itself (a worker renews its own): stopped when the journal is dropped, at the run's end.
    keeper: std::sync::Mutex<Option<Keeper>>,
}

/// Who holds a run while it runs, and for how long a lease lasts unless renewed.
#[derive(Debug, Clone)]
pub(crate) struct Holding {
    pub(crate) owner: String,
    pub(crate) length: std::time::Duration,
}

impl Holding {
    pub(crate) fn request(&self) -> LeaseRequest {
        LeaseRequest {
            owner: self.owner.clone(),
            lease_ms: millis(self.length),
        }
    }
}

impl StoreJournal {
    /// The journal of a new run (its first entry creates it).
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        run_id: String,
        agent_id: String,
        snapshot_every: u32,
    ) -> Self {
        StoreJournal {
            store,
            run_id,
            agent_id,
            snapshot_every,
            shadow: tokio::sync::Mutex::new(Shadow {
                version: 0,
                digest: String::new(),
                run: None,
                since_snapshot: 0,
                broken: false,
                fence: None,
            }),
            holding: None,
            keeper: std::sync::Mutex::new(None),
        }
    }

    /// The journal of a stored run, at the version it was loaded at.
    pub(crate) fn at(
        store: Arc<dyn RunStore>,
        run: Replayed,
        version: u64,
        digest: String,
        snapshot_every: u32,
    ) -> Self {
        StoreJournal {
            store,
            run_id: run.state.run_id.clone(),
            agent_id: run.state.agent_id.clone(),
            snapshot_every,
            shadow: tokio::sync::Mutex::new(Shadow {
                version,
                digest,
                run: Some(run),
                // A loaded run is snapshotted at its next write only if many entries follow.
                since_snapshot: 0,
                broken: false,
                fence: None,
            }),
            holding: None,
            keeper: std::sync::Mutex::new(None),
        }
    }

    /// The same journal, its writes made under a worker's lease when `fence` names one (see
    /// [`Append::fence`]).
    pub(crate) fn fenced(mut self, fence: Option<u64>) -> Self {
        self.shadow.get_mut().fence = fence;
        self
    }

    /// A new run's journal that holds the run under a lease from its first write, and renews it
    /// while the journal lives (a store that keeps no leases writes the run unheld).
    pub(crate) fn holding(mut self, holding: Holding) -> Self {
        self.holding = Some(holding);
        self
    }

    /// The same journal, its writes made under `lease`, which it renews for `holding.length`
    /// while it lives.
    pub(crate) fn held(mut self, lease: Lease, holding: &Holding) -> Self {
        self.shadow.get_mut().fence = Some(lease.token);
        self.keep(lease, holding);
        self
    }

    fn keep(&self, lease: Lease, holding: &Holding) {
        let keeper = Keeper::spawn(
            self.store.clone(),
            lease,
            holding.length,
            holding.owner.clone(),
        );
        *self.keeper.lock().unwrap_or_else(|e| e.into_inner()) = Some(keeper);
    }

    /// Writes `entry` as the run's next version, with `extra`, and applies it to the journal's
    /// view. Returns the new version.
    pub(crate) async fn write(&self, entry: Entry, extra: Extra) -> Result<u64, StoreError> {
        let mut shadow = self.shadow.lock().await;
        if shadow.broken {
            return Err(StoreError::Conflict {
                run_id: self.run_id.clone(),
                expected: shadow.version,
                found: shadow.version,
            });
        }
        let version = shadow.version + 1;
        let row = encode(&entry, &shadow.digest, version)?;
        let digest = row.digest.clone();
        let at_ms = now_ms();
        let due = shadow.since_snapshot + 1 >= self.snapshot_every;
        let result = match (shadow.run.as_mut(), entry) {
            (None, Entry::Started { state }) => {
                let status = extra.status.unwrap_or(StoredStatus::Running);
                let new = NewRun {
                    run_id: self.run_id.clone(),
                    agent_id: self.agent_id.clone(),
                    status,
                    row,
                    pending: extra.pending.unwrap_or_default(),
                    at_ms,
                };
                let created = match &self.holding {
                    Some(holding) if status == StoredStatus::Running => {
                        match self
                            .store
                            .create_held(new.clone(), &holding.request())
                            .await
                        {
                            Ok(lease) => {
                                shadow.fence = Some(lease.token);
                                self.keep(lease, holding);
                                Ok(())
                            }
                            // A store of one's own without leases: the run is written unheld.
                            Err(StoreError::Unsupported { .. }) => self.store.create(new).await,
                            Err(error) => Err(error),
                        }
                    }
                    _ => self.store.create(new).await,
                };
                created.map(|()| {
                    shadow.run = Some(Replayed {
                        state: *state,
                        in_flight: InFlight::default(),
                        decisions: None,
                        failure: None,
                    })
                })
            }
            (None, _) => Err(StoreError::NotFound {
                run_id: self.run_id.clone(),
            }),
            (Some(run), entry) => {
                run.apply(entry).map_err(|reason| {
                    StoreError::Database(format!("applying an entry: {reason}"))
                })?;
                let snapshot = due
                    .then(|| snapshot_row(run, version, &digest))
                    .transpose()?;
                let snapshotted = snapshot.is_some();
                let status = extra.status.unwrap_or(StoredStatus::Running);
                let appended = self
                    .store
                    .append(Append {
                        run_id: self.run_id.clone(),
                        expected_version: version - 1,
                        rows: vec![row],
                        status,
                        snapshot,
                        pending: extra.pending,
                        decisions: extra.decisions,
                        at_ms,
                        fence: shadow.fence,
                    })
                    .await;
                appended.map(|()| {
                    shadow.since_snapshot = if snapshotted {
                        0
                    } else {
                        shadow.since_snapshot + 1
                    };
                })
            }
        };
        match result {
            Ok(()) => {
                shadow.version = version;
                shadow.digest = digest;
                Ok(version)
            }
            Err(error) => {
                shadow.broken = true;
                Err(error)
            }
        }
    }

    async fn record_transition(&self, transition: Transition<'_>) -> Result<(), StoreError> {
        match transition {
            Transition::Started { state, context } => {
                let mut state = state.clone();
                state.context = context.clone();
                self.write(
                    Entry::Started {
                        state: Box::new(state),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::Turn {
                state,
                context,
                params,
            } => {
                let delta = {
                    let shadow = self.shadow.lock().await;
                    let Some(run) = shadow.run.as_ref() else {
                        return Err(StoreError::NotFound {
                            run_id: self.run_id.clone(),
                        });
                    };
                    Delta::between(&run.state, state, context)
                };
                self.write(
                    Entry::Turn {
                        delta,
                        params: params.clone(),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::CallStarted {
                call_id,
                tool,
                attempt,
            } => {
                self.write(
                    Entry::CallStarted {
                        call_id: call_id.to_owned(),
                        tool: tool.to_owned(),
                        attempt,
                        at_ms: u64::try_from(now_ms()).ok(),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::CallFinished { step, new_context } => {
                self.write(
                    Entry::CallFinished {
                        step: step.clone(),
                        new_context: new_context.cloned(),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::Settled { state, failure } => {
                let (delta, version) = {
                    let shadow = self.shadow.lock().await;
                    let Some(run) = shadow.run.as_ref() else {
                        return Err(StoreError::NotFound {
                            run_id: self.run_id.clone(),
                        });
                    };
                    (
                        Delta::between(&run.state, state, &state.context),
                        shadow.version + 1,
                    )
                };
                let status = status_of(state);
                let pending = pending_rows(state, version, now_ms());
                let failure = failure.map(|error| failure_text(&error.to_string()));
                self.write(
                    Entry::Settled { delta, failure },
                    Extra {
                        pending: Some(pending),
                        decisions: Vec::new(),
                        status: Some(status),
                    },
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// The most of a failure's text a journal keeps: a person reads it, and an error that quotes a
/// whole response is cut.
const MAX_FAILURE_TEXT: usize = 4096;

fn failure_text(text: &str) -> String {
    if text.len() <= MAX_FAILURE_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_FAILURE_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn snapshot_row(run: &Replayed, version: u64, chain: &str) -> Result<SnapshotRow, StoreError> {
    let body = serde_json::to_string(&Snapshot {
        chain: chain.to_owned(),
        run,
    })
    .map_err(|e| StoreError::Database(format!("encoding a snapshot: {e}")))?;
    Ok(SnapshotRow {
        version,
        format: FORMAT,
        digest: snapshot_digest(&body),
        body,
    })
}

impl Journal for StoreJournal {
    fn record<'a>(&'a self, transition: Transition<'a>) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(async move {
            self.record_transition(transition)
                .await
                .map_err(AgentError::Store)
        })
    }

    fn version(&self) -> Option<u64> {
        // Asked once a run has settled, when no write is under way.
        self.shadow.try_lock().ok().map(|shadow| shadow.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::message::Message;

    fn state() -> RunState {
        let mut state = RunState::new("run_1".into(), "agent".into(), serde_json::json!({"k": 1}));
        state.messages.push(Message::user("Hello"));
        state
    }

    fn entries() -> Vec<Entry> {
        let delta = Delta {
            messages: vec![Message::user("More")],
            set: vec![Set::Turns(2)],
            ..Delta::default()
        };
        vec![
            Entry::Started {
                state: Box::new(state()),
            },
            Entry::Turn {
                delta: delta.clone(),
                params: TurnParams::default(),
            },
            Entry::CallFinished {
                step: ToolStep {
                    step_index: 0,
                    call_id: "c".into(),
                    tool: "t".into(),
                    preliminary_results: vec![serde_json::json!(1.5)],
                    content: "out".into(),
                    is_error: false,
                    error: None,
                },
                new_context: Some(serde_json::json!({"k": 2})),
            },
            Entry::Settled {
                delta: delta.clone(),
                failure: None,
            },
            Entry::Settled {
                delta,
                failure: Some("the model failed: down".into()),
            },
            Entry::Recovered { by: "p".into() },
        ]
    }

    #[test]
    fn an_entry_reads_back_the_same_by_the_short_path_and_the_general_one() {
        for entry in entries() {
            let body = serde_json::to_string(&entry).unwrap();
            assert!(body.starts_with(r#"{"type":""#), "{body}");
            assert_eq!(decode_entry(&body).unwrap(), entry, "{body}");
            // The tag last (keys sorted): only the general way reads it.
            let sorted =
                serde_json::to_string(&serde_json::from_str::<Value>(&body).unwrap()).unwrap();
            assert!(!sorted.starts_with(r#"{"type""#), "{sorted}");
            assert_eq!(decode_entry(&sorted).unwrap(), entry, "{sorted}");
        }
    }

    #[test]
    fn an_entry_the_short_path_cannot_read_fails_with_the_general_error() {
        for body in [
            r#"{"type":"started","state":{"version":2}}"#,
            r#"{"type":"turn","delta":{},"params":{},"delta":{}}"#,
            r#"{"type":"settled"}"#,
            r#"{"type":"nonsense"}"#,
        ] {
            let general = serde_json::from_str::<Entry>(body)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let ours = decode_entry(body).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(ours, general, "{body}");
        }
    }

    #[test]
    fn a_snapshot_reads_back_the_same_by_the_short_path_and_the_general_one() {
        let run = Replayed {
            state: state(),
            in_flight: InFlight::default(),
            decisions: Some(Decisions::new().approve("c")),
            failure: Some("the model failed".into()),
        };
        let body = serde_json::to_string(&Snapshot {
            chain: "abc".into(),
            run: &run,
        })
        .unwrap();
        let read = decode_snapshot(&body).unwrap();
        assert_eq!((read.chain.as_str(), &read.run), ("abc", &run));
        let bad = body.replace(r#""version":1"#, r#""version":7"#);
        let general = serde_json::from_str::<Snapshot<Replayed>>(&bad)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            decode_snapshot(&bad).map(|_| ()).map_err(|e| e.to_string()),
            general
        );
    }
}
