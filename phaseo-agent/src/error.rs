//! [`AgentError`]: every way a run, a tool call or a resume can fail.

use std::fmt;
use std::sync::Arc;

use crate::limits::LimitExceeded;

/// An error of the agent runtime.
///
/// Messages say what happened, in lowercase and without advice, as the Rust API guidelines
/// ask (what to do is in each variant's documentation); the text a model reads when a tool call
/// fails is [`model_message`](Self::model_message), made apart from `Display`. Tool executors return
/// `Result<Value, AgentError>`; the usual way to make one from your own message is
/// [`AgentError::tool`]:
///
/// ```
/// use phaseo_agent::AgentError;
///
/// let err = AgentError::tool("ticket 42 does not exist");
/// assert_eq!(err.to_string(), "ticket 42 does not exist");
///
/// let unknown = AgentError::UnknownTool("fly".into());
/// assert_eq!(unknown.to_string(), "unknown tool `fly`");
/// assert_eq!(unknown.model_message(), "Unknown tool: fly"); // what the model reads
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// An error raised by a tool's own code. Its text is what the model sees (as `{"error": text}`)
    /// under the default error policy.
    #[error("{0}")]
    Tool(String),
    /// The model called a tool id that is not in the agent's tool list.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// Tool arguments (from the model, or edited by a person) failed validation: `<path>: <reason>`.
    #[error("invalid tool input: {0}")]
    InvalidInput(String),
    /// A tool's result failed its output validator: `<path>: <reason>`.
    #[error("invalid tool output: {0}")]
    InvalidOutput(String),
    /// A progress value failed the tool's event validator: `<path>: <reason>`.
    #[error("invalid tool event: {0}")]
    InvalidEvent(String),
    /// A tool did not finish within its timeout. The call was abandoned and its cancellation token fired.
    #[error("tool `{tool}` timed out after {ms} ms")]
    Timeout {
        /// The tool id.
        tool: String,
        /// The timeout that expired, in milliseconds.
        ms: u64,
    },
    /// A call was stopped (before it started, or while it ran) because another call of the same
    /// turn failed the run under `fail-run`. Its cancellation token fired.
    #[error("tool `{tool}` was cancelled because call `{by}` failed the run")]
    Cancelled {
        /// The tool id.
        tool: String,
        /// The id of the call that failed the run.
        by: String,
    },
    /// A tool panicked. The run goes on; the panic message is kept for operators.
    #[error("tool `{tool}` panicked: {message}")]
    Panicked {
        /// The tool id.
        tool: String,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// A tool definition is unusable (bad id, a parameter schema that does not compile, ...).
    #[error("invalid tool definition `{tool}`: {reason}")]
    InvalidTool {
        /// The tool id.
        tool: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The agent was built without something it needs.
    #[error("invalid agent: {0}")]
    InvalidAgent(String),
    /// A resume was missing decisions for some pending calls.
    #[error("no decision for pending tool calls {}", id_list(.call_ids))]
    MissingDecision {
        /// The ids of the pending calls that have no decision.
        call_ids: Vec<String>,
    },
    /// A decision named a call that is not pending in this state. The state is unchanged.
    #[error("no pending tool call with id `{call_id}` (pending: [{}])", id_list(.pending))]
    NotPending {
        /// The call id of the decision.
        call_id: String,
        /// The ids that are pending.
        pending: Vec<String>,
    },
    /// A decision does not fit the kind of pending call it names (say, an approval for an external call).
    #[error("decision `{decision}` does not fit pending call `{call_id}` of kind `{kind}`")]
    DecisionMismatch {
        /// The call id.
        call_id: String,
        /// The decision given.
        decision: &'static str,
        /// The pending kind.
        kind: &'static str,
        /// What to send instead.
        hint: &'static str,
    },
    /// Two decisions named the same call.
    #[error("two decisions for tool call `{0}`")]
    DuplicateDecision(String),
    /// Decisions were given to a durable resume without who made them
    /// ([`DurableResumeRequest::by`](crate::durable::DurableResumeRequest::by)): the audit log
    /// records a name with every decision, so the resume is refused before anything is written.
    #[error("decisions for run `{run_id}` name nobody who made them")]
    UnattributedDecisions {
        /// The run id.
        run_id: String,
    },
    /// `resume` was called on a run that is not waiting for a person.
    #[error("run `{run_id}` is not waiting for a person (status: {status})")]
    NotPaused {
        /// The run id.
        run_id: String,
        /// Its status.
        status: String,
    },
    /// `retry` was called on a run that has not failed.
    #[error("run `{run_id}` has not failed (status: {status})")]
    NotFailed {
        /// The run id.
        run_id: String,
        /// Its status.
        status: String,
    },
    /// `continue_run` was called on a run that has not completed.
    #[error("run `{run_id}` has not completed (status: {status})")]
    NotCompleted {
        /// The run id.
        run_id: String,
        /// Its status.
        status: String,
    },
    /// A stored state belongs to another agent.
    #[error("run state belongs to agent `{found}`, not `{expected}`")]
    WrongAgent {
        /// The agent resuming.
        expected: String,
        /// The agent the state was made by.
        found: String,
    },
    /// A stored run state could not be read.
    #[error("invalid run state: {0}")]
    InvalidState(String),
    /// A stored run state was written by a newer (or unknown) version of phaseo-agent.
    #[error("unsupported run state version {found} (this build reads version {supported})")]
    UnsupportedStateVersion {
        /// The version in the state.
        found: u64,
        /// The version this build reads.
        supported: u32,
    },
    /// A stored run state failed its signature check (see `AgentBuilder::state_key`). Nothing ran.
    #[error("run state signature check failed: {0}")]
    StateSignature(String),
    /// The run used its turn limit without the model finishing.
    #[error("max turns exceeded: the model was still calling tools after {0} turns")]
    MaxTurnsExceeded(usize),
    /// The model failed to answer (after the agent's retries, for a retryable error).
    #[error("model error: {0}")]
    Model(ModelError),
    /// Something from outside (an MCP server's result, say) went over one of this crate's
    /// [limits](crate::limits); the error names the setting that raises it.
    #[error("{0}")]
    LimitExceeded(LimitExceeded),
    /// A resume's decisions name another run than the state's (see `Decisions::for_run`): call ids
    /// repeat across runs, so they would answer the wrong calls. Nothing ran, and the state is
    /// unchanged.
    #[error("decisions are for run `{found}`, not for run `{expected}`")]
    WrongRun {
        /// The run being resumed (the state's run id).
        expected: String,
        /// The run the decisions name.
        found: String,
    },
    /// A pending call was read as the input of another tool than the one it calls (see
    /// `PendingCall::input`).
    #[error("pending call `{call_id}` is a call of tool `{found}`, not of `{expected}`")]
    WrongTool {
        /// The call id.
        call_id: String,
        /// The tool named by the reader.
        expected: String,
        /// The tool the call is for.
        found: String,
    },
    /// The model asked for more tool calls in one turn than the agent allows (see
    /// `AgentBuilder::max_calls_per_turn`). None of them ran; the run failed with its state, which
    /// [`Agent::retry`](crate::Agent::retry) can ask the model again from.
    #[error(
        "the model asked for {count} tool calls in one turn, over the agent's limit of {limit}"
    )]
    TooManyToolCalls {
        /// How many calls the turn had.
        count: usize,
        /// The agent's limit.
        limit: usize,
    },
    /// A run store refused or failed an operation (see [`StoreError`]): another process took the
    /// run first, a stored row is damaged, the database is unreachable.
    #[error("{0}")]
    Store(StoreError),
}

impl From<StoreError> for AgentError {
    fn from(error: StoreError) -> Self {
        AgentError::Store(error)
    }
}

/// Where a stored run stands.
///
/// ```
/// use phaseo_agent::store::StoredStatus;
///
/// assert_eq!(StoredStatus::InDoubt.as_str(), "in_doubt");
/// assert_eq!(StoredStatus::parse("paused"), Some(StoredStatus::Paused));
/// assert!(StoredStatus::Paused.is_kept());
/// assert!(!StoredStatus::Completed.is_kept());
/// assert!(StoredStatus::Ready.is_kept());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredStatus {
    /// A queued run that waits for a worker to take it: just enqueued, or every call it waited
    /// for is decided (see [`Runs::enqueue`](crate::durable::Runs::enqueue)).
    Ready,
    /// A process is running it, or one was when it stopped (recovery takes it).
    Running,
    /// It waits for people's decisions.
    Paused,
    /// It waits for a person because a call's outcome is unknown after a crash.
    InDoubt,
    /// It finished with an answer.
    Completed,
    /// It failed; its state records why and what ran.
    Failed,
}

impl fmt::Display for StoredStatus {
    /// The status as stored ([`as_str`](Self::as_str)).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StoredStatus {
    /// The status as stored: `ready`, `running`, `paused`, `in_doubt`, `completed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoredStatus::Ready => "ready",
            StoredStatus::Running => "running",
            StoredStatus::Paused => "paused",
            StoredStatus::InDoubt => "in_doubt",
            StoredStatus::Completed => "completed",
            StoredStatus::Failed => "failed",
        }
    }

    /// The status stored as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "ready" => StoredStatus::Ready,
            "running" => StoredStatus::Running,
            "paused" => StoredStatus::Paused,
            "in_doubt" => StoredStatus::InDoubt,
            "completed" => StoredStatus::Completed,
            "failed" => StoredStatus::Failed,
            _ => return None,
        })
    }

    /// Whether retention must keep a run in this status (it is not finished).
    pub fn is_kept(self) -> bool {
        !matches!(self, StoredStatus::Completed | StoredStatus::Failed)
    }
}

/// Why a run store refused or failed an operation.
///
/// Every variant that concerns one run names it, so one damaged row or one lost race never
/// hides which run it was, and never stops the store from serving the others.
///
/// ```
/// use phaseo_agent::{AgentError, AgentErrorKind, StoreError};
///
/// let lost = StoreError::Conflict { run_id: "run_1".into(), expected: 4, found: 5 };
/// assert_eq!(lost.to_string(), "run `run_1` is at version 5, not 4");
/// assert!(lost.advice().contains("a resumer that lost this race has nothing to do"));
/// assert_eq!(AgentError::Store(lost).kind(), AgentErrorKind::Store);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A write named the version of the run it read, and the run has moved on since: another
    /// resumer, recoverer or decision came first. Nothing was written. A resumer that lost the
    /// race has nothing to do; one who decides loads the run again and decides on its current
    /// version.
    #[error("run `{run_id}` is at version {found}, not {expected}")]
    Conflict {
        /// The run.
        run_id: String,
        /// The version the write was made against.
        expected: u64,
        /// The version the store holds.
        found: u64,
    },
    /// No run with this id is stored.
    #[error("no run `{run_id}` in the store")]
    NotFound {
        /// The run.
        run_id: String,
    },
    /// A run with this id is stored already (an enqueue or a save tried again finds its own
    /// run: nothing to do).
    #[error("run `{run_id}` is already in the store")]
    AlreadyExists {
        /// The run.
        run_id: String,
    },
    /// A stored row of this run could not be read back as written (truncated, edited, or its
    /// checksum does not match). The run is left as it is; other runs are unaffected.
    #[error("run `{run_id}` is damaged at version {version}: {reason}")]
    Corrupt {
        /// The run.
        run_id: String,
        /// The version of the damaged row.
        version: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A row of this run was written by a newer phaseo-agent, in a format this build does not read.
    #[error(
        "run `{run_id}` has a row at version {version} in format {found}, newer than this build's {supported}"
    )]
    UnsupportedFormat {
        /// The run.
        run_id: String,
        /// The version of the row.
        version: u64,
        /// The row's format.
        found: u32,
        /// The format this build reads.
        supported: u32,
    },
    /// The database's schema was migrated by a newer phaseo-agent; this build refuses to touch it.
    #[error("the store's schema is at version {found}, newer than this build's {supported}")]
    SchemaTooNew {
        /// The schema version in the database.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// A decision does not fit the run as stored: its call is not waiting, or the arguments or
    /// version it was made on are not the current ones. Nothing was recorded. The reason says
    /// what to do: nothing (someone else decided the call, and when), or load the run again and
    /// decide on its current version.
    #[error("decision refused for call `{call_id}` of run `{run_id}`: {reason}")]
    StaleDecision {
        /// The run.
        run_id: String,
        /// The call the decision names.
        call_id: String,
        /// Why it was refused.
        reason: String,
    },
    /// A run is not in the state the operation needs (resuming a run that is not paused, say).
    /// [`advice`](Self::advice) says what to do, from the status: nothing for a run that
    /// finished, runs elsewhere or waits for a worker; decide its calls for a run that waits for
    /// people.
    #[error("run `{run_id}` is {status}; {needed}")]
    WrongStatus {
        /// The run.
        run_id: String,
        /// Its stored status.
        status: StoredStatus,
        /// What the operation needs.
        needed: String,
    },
    /// A stored row of this run, or the whole of what loading it reads, is larger than the store
    /// is set to read (see [`ReadLimits`](crate::store::ReadLimits)): the database did not send
    /// it. The run is left as it is; other runs are unaffected.
    ///
    /// ```
    /// use phaseo_agent::StoreError;
    ///
    /// let error = StoreError::TooLarge {
    ///     run_id: "run_1".into(),
    ///     what: "journal entry 7".into(),
    ///     size: 20_000_000,
    ///     limit: 16_777_216,
    ///     setting: "max_row_bytes",
    /// };
    /// assert!(error.to_string().contains("over the store's `max_row_bytes` (16777216)"));
    /// ```
    #[error("run `{run_id}`: {what} is {size} bytes, over the store's `{setting}` ({limit})")]
    TooLarge {
        /// The run.
        run_id: String,
        /// What is too large: `snapshot`, `journal entry 7`, `pending call `c1``, or `load`
        /// (snapshot, entries and pending calls together).
        what: String,
        /// Its size in bytes as stored.
        size: u64,
        /// The bound it exceeds, in bytes.
        limit: u64,
        /// The setting that holds the bound: `max_row_bytes` or `max_load_bytes`.
        setting: &'static str,
    },
    /// A worker's write was refused because its lease on the run is over: it expired (the
    /// worker was paused, cut off or slow past [`Worker::lease`](crate::worker::Worker::lease)) or
    /// another worker took the run. Nothing was written; the worker stops the run at once.
    ///
    /// ```
    /// use phaseo_agent::StoreError;
    ///
    /// let lost = StoreError::LeaseLost { run_id: "run_1".into(), token: 3 };
    /// assert!(lost.to_string().contains("lease 3 on run `run_1` is over"));
    /// ```
    #[error(
        "the lease {token} on run `{run_id}` is over (expired, or another worker took the run)"
    )]
    LeaseLost {
        /// The run.
        run_id: String,
        /// The lease's fencing token.
        token: u64,
    },
    /// The run is held by a live lease: a process is running it (or did, and its lease has not
    /// expired yet). A recovery of a live run is refused, so that a second replica starting up
    /// never takes over a run the first is still running. Nothing was written.
    ///
    /// ```
    /// use phaseo_agent::StoreError;
    ///
    /// let held = StoreError::LeaseHeld {
    ///     run_id: "run_1".into(),
    ///     owner: "web-1-4242".into(),
    ///     expires_in_ms: 12_000,
    /// };
    /// assert!(held.to_string().contains("held by `web-1-4242`"));
    /// assert!(held.to_string().contains("expires in 12.0 s"));
    /// ```
    #[error(
        "run `{run_id}` is held by `{owner}`, whose lease on it expires in {:.1} s",
        *expires_in_ms as f64 / 1000.0
    )]
    LeaseHeld {
        /// The run.
        run_id: String,
        /// Who holds the lease (a process's name: its host and process id by default).
        owner: String,
        /// In how many milliseconds the lease expires unless renewed, by the database's clock.
        expires_in_ms: u64,
    },
    /// The store does not do this (a [`RunStore`](crate::store::RunStore) of your own that
    /// implements no queue, say).
    #[error("the run store does not support {operation}")]
    Unsupported {
        /// What was asked: `queued runs`, say.
        operation: &'static str,
    },
    /// A listing's paging cursor (`after` of a [`PendingFilter`](crate::store::PendingFilter),
    /// [`RunFilter`](crate::store::RunFilter) or [`AuditFilter`](crate::store::AuditFilter)) is
    /// not one this store made for that listing: pass the `next` of a page it returned, or none
    /// for the first page. Nothing was read.
    ///
    /// ```
    /// use phaseo_agent::StoreError;
    ///
    /// let error = StoreError::InvalidCursor { cursor: "x".into() };
    /// assert!(error.to_string().contains("paging cursor `x`"));
    /// ```
    #[error("the paging cursor `{cursor}` is not one this store made for this listing")]
    InvalidCursor {
        /// The cursor as given.
        cursor: String,
    },
    /// The database failed (unreachable, a constraint, an I/O error), or a write broke the
    /// store's contract. It displays as its [`DatabaseError`] (the driver's message) and gives
    /// the driver's own cause as its `source()`; [`DatabaseError::get_ref`] is the driver's error
    /// itself (`sqlx::Error` for the SQL stores), to downcast.
    #[error(transparent)]
    Database(DatabaseError),
}

impl StoreError {
    /// What to do about it, for the one who got it (a person, or the code that handles it): the
    /// advice the message itself leaves out.
    ///
    /// ```
    /// use phaseo_agent::StoreError;
    ///
    /// let gone = StoreError::NotFound { run_id: "run_1".into() };
    /// assert!(gone.advice().starts_with("check the run id"));
    /// ```
    pub fn advice(&self) -> String {
        match self {
            StoreError::Conflict { .. } => "another process (a resume, a decision or a recovery) \
                 changed the run first, and nothing was written: a resumer that lost this race \
                 has nothing to do; to decide, load the run again and decide on its current \
                 version"
                .into(),
            StoreError::NotFound { .. } => "check the run id, and that this is the store the run \
                 was saved in (a completed or failed run may have been pruned)"
                .into(),
            StoreError::AlreadyExists { .. } => "it was stored before (an enqueue or a save tried \
                 again), so there is nothing to do; to start another run, give it another id"
                .into(),
            StoreError::Corrupt { .. } => "the run is left as it is and the other runs are \
                 unaffected: repair or remove the run's rows"
                .into(),
            StoreError::UnsupportedFormat { .. } | StoreError::SchemaTooNew { .. } => {
                "upgrade phaseo-agent".into()
            }
            StoreError::StaleDecision { .. } => "the reason says what to do".into(),
            StoreError::WrongStatus { status, .. } => status_advice(status.as_str()).into(),
            StoreError::TooLarge { setting, .. } => {
                format!("it was not read: raise `{setting}` on the store's builder to load it")
            }
            StoreError::LeaseLost { .. } => "nothing was written: this worker stops the run, and \
                 the one that holds it now goes on with it"
                .into(),
            StoreError::LeaseHeld { .. } => "that process is running it; nothing was written: do \
                 nothing (if the process died, the run can be recovered once the lease expires)"
                .into(),
            StoreError::Unsupported { .. } => "use a store that supports it".into(),
            StoreError::InvalidCursor { .. } => {
                "pass a page's `next`, or none for the first page".into()
            }
            StoreError::Database(_) => "check the database, then try again".into(),
        }
    }

    /// What a model reads for this error (through [`AgentError::model_message`]): the texts of
    /// before `Display` lost its advice, kept as they were so that no rewording of a message
    /// changes what a model reads.
    pub(crate) fn model_message(&self) -> String {
        match self {
            StoreError::Conflict {
                run_id,
                expected,
                found,
            } => format!(
                "Run `{run_id}` is at version {found}, not {expected}: another process (a resume, \
                 a decision or a recovery) changed it first, and nothing was written. A resumer \
                 that lost this race has nothing to do; to decide, load the run again and decide \
                 on its current version"
            ),
            StoreError::NotFound { run_id } => format!(
                "No run `{run_id}` in the store: check the run id, and that this is the store the \
                 run was saved in (a completed or failed run may have been pruned)"
            ),
            StoreError::AlreadyExists { run_id } => format!(
                "Run `{run_id}` is already in the store: it was stored before (an enqueue or a \
                 save tried again), so there is nothing to do; to start another run, give it \
                 another id"
            ),
            StoreError::Corrupt {
                run_id,
                version,
                reason,
            } => format!("Run `{run_id}` is damaged at version {version}: {reason}"),
            StoreError::UnsupportedFormat {
                run_id,
                version,
                found,
                supported,
            } => format!(
                "Run `{run_id}` has a row at version {version} in format {found}; this build \
                 reads format {supported}: upgrade phaseo-agent to load it"
            ),
            StoreError::SchemaTooNew { found, supported } => format!(
                "The store's schema is at version {found}; this build knows versions up to \
                 {supported}: upgrade phaseo-agent"
            ),
            StoreError::StaleDecision {
                run_id,
                call_id,
                reason,
            } => format!("Decision refused for call `{call_id}` of run `{run_id}`: {reason}"),
            StoreError::WrongStatus {
                run_id,
                status,
                needed,
            } => format!(
                "Run `{run_id}` is {status}; {needed}: {}",
                status_advice(status.as_str())
            ),
            StoreError::TooLarge {
                run_id,
                what,
                size,
                limit,
                setting,
            } => format!(
                "Run `{run_id}`: {what} is {size} bytes, over the store's `{setting}` ({limit}); \
                 it was not read (raise `{setting}` on the store's builder to load it)"
            ),
            StoreError::LeaseLost { run_id, token } => format!(
                "The lease {token} on run `{run_id}` is over (expired, or another worker took the \
                 run); nothing was written: this worker stops the run, and the one that holds it \
                 now goes on with it"
            ),
            StoreError::LeaseHeld {
                run_id,
                owner,
                expires_in_ms,
            } => format!(
                "Run `{run_id}` is held by `{owner}`, whose lease on it expires in {:.1} s: that \
                 process is running it; nothing was written (do nothing; if the process died, the \
                 run can be recovered once the lease expires)",
                *expires_in_ms as f64 / 1000.0
            ),
            StoreError::Unsupported { operation } => {
                format!("The run store does not support {operation}")
            }
            StoreError::InvalidCursor { cursor } => format!(
                "The paging cursor `{cursor}` is not one this store made for this listing (pass a \
                 page's `next`, or none for the first page)"
            ),
            StoreError::Database(error) => format!("Run store error: {}", error.message()),
        }
    }
}

/// What a run store's database failed with: a message, and the driver's error it came from, if
/// any (`sqlx::Error` for the SQL stores).
///
/// Like [`std::io::Error`] made from another error, it displays that error's message and gives
/// that error's own cause as its `source()`, so a report that prints every cause prints each
/// once; [`get_ref`](Self::get_ref) gives the driver's error itself. Cloning shares the driver's
/// error; two are equal when their messages are.
///
/// ```
/// use phaseo_agent::{DatabaseError, StoreError};
///
/// let io = std::io::Error::other("disk full");
/// let error = StoreError::Database(DatabaseError::from_source(io));
/// assert_eq!(error.to_string(), "run store: disk full");
/// let StoreError::Database(db) = &error else { unreachable!() };
/// assert!(db.get_ref().is_some_and(|e| e.is::<std::io::Error>()));
/// assert_eq!(StoreError::Database("a refusal".into()).to_string(), "run store: a refusal");
/// ```
#[derive(Clone)]
pub struct DatabaseError {
    message: String,
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl DatabaseError {
    /// An error with this message and no driver's error behind it.
    pub fn new(message: impl Into<String>) -> Self {
        DatabaseError {
            message: message.into(),
            error: None,
        }
    }

    /// The driver's `error`, kept: its message is this one's.
    pub fn from_source(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        DatabaseError {
            message: error.to_string(),
            error: Some(Arc::new(error)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The driver's error this came from, if any: downcast it (to `sqlx::Error`, say) to read
    /// the database's own code.
    pub fn get_ref(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.error.as_deref()
    }
}

impl fmt::Debug for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            Some(error) => f.debug_tuple("DatabaseError").field(error).finish(),
            None => f.debug_tuple("DatabaseError").field(&self.message).finish(),
        }
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run store: {}", self.message)
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_deref().and_then(|e| e.source())
    }
}

impl PartialEq for DatabaseError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for DatabaseError {}

impl From<String> for DatabaseError {
    fn from(message: String) -> Self {
        DatabaseError::new(message)
    }
}

impl From<&str> for DatabaseError {
    fn from(message: &str) -> Self {
        DatabaseError::new(message)
    }
}

/// What kind of failure an [`AgentError`] is: one name per variant, stable and serialisable, for
/// code that reads a failure from an event or a log rather than from the error itself. A run's
/// [`Event::Failed`](crate::Event::Failed) and a refusal's [`Event::Refused`](crate::Event::Refused)
/// carry it.
///
/// ```
/// use phaseo_agent::{AgentError, AgentErrorKind};
///
/// let error = AgentError::MissingDecision { call_ids: vec!["call_1".into()] };
/// assert_eq!(error.kind(), AgentErrorKind::MissingDecision);
/// assert_eq!(error.kind().as_str(), "missing_decision");
/// assert_eq!(serde_json::to_value(error.kind()).unwrap(), "missing_decision");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentErrorKind {
    /// [`AgentError::Tool`].
    Tool,
    /// [`AgentError::UnknownTool`].
    UnknownTool,
    /// [`AgentError::InvalidInput`].
    InvalidInput,
    /// [`AgentError::InvalidOutput`].
    InvalidOutput,
    /// [`AgentError::InvalidEvent`].
    InvalidEvent,
    /// [`AgentError::Timeout`].
    Timeout,
    /// [`AgentError::Cancelled`].
    Cancelled,
    /// [`AgentError::Panicked`].
    Panicked,
    /// [`AgentError::InvalidTool`].
    InvalidTool,
    /// [`AgentError::InvalidAgent`].
    InvalidAgent,
    /// [`AgentError::MissingDecision`].
    MissingDecision,
    /// [`AgentError::NotPending`].
    NotPending,
    /// [`AgentError::DecisionMismatch`].
    DecisionMismatch,
    /// [`AgentError::DuplicateDecision`].
    DuplicateDecision,
    /// [`AgentError::UnattributedDecisions`].
    UnattributedDecisions,
    /// [`AgentError::NotPaused`].
    NotPaused,
    /// [`AgentError::NotFailed`].
    NotFailed,
    /// [`AgentError::NotCompleted`].
    NotCompleted,
    /// [`AgentError::WrongAgent`].
    WrongAgent,
    /// [`AgentError::WrongRun`].
    WrongRun,
    /// [`AgentError::WrongTool`].
    WrongTool,
    /// [`AgentError::InvalidState`].
    InvalidState,
    /// [`AgentError::UnsupportedStateVersion`].
    UnsupportedStateVersion,
    /// [`AgentError::StateSignature`].
    StateSignature,
    /// [`AgentError::MaxTurnsExceeded`].
    MaxTurnsExceeded,
    /// [`AgentError::TooManyToolCalls`].
    TooManyToolCalls,
    /// [`AgentError::Model`] (its own kind is [`ModelError::kind`]).
    Model,
    /// [`AgentError::LimitExceeded`].
    LimitExceeded,
    /// [`AgentError::Store`].
    Store,
}

impl AgentErrorKind {
    /// The kind's name, as in JSON: `tool`, `missing_decision`, `model`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            AgentErrorKind::Tool => "tool",
            AgentErrorKind::UnknownTool => "unknown_tool",
            AgentErrorKind::InvalidInput => "invalid_input",
            AgentErrorKind::InvalidOutput => "invalid_output",
            AgentErrorKind::InvalidEvent => "invalid_event",
            AgentErrorKind::Timeout => "timeout",
            AgentErrorKind::Cancelled => "cancelled",
            AgentErrorKind::Panicked => "panicked",
            AgentErrorKind::InvalidTool => "invalid_tool",
            AgentErrorKind::InvalidAgent => "invalid_agent",
            AgentErrorKind::MissingDecision => "missing_decision",
            AgentErrorKind::NotPending => "not_pending",
            AgentErrorKind::DecisionMismatch => "decision_mismatch",
            AgentErrorKind::DuplicateDecision => "duplicate_decision",
            AgentErrorKind::UnattributedDecisions => "unattributed_decisions",
            AgentErrorKind::NotPaused => "not_paused",
            AgentErrorKind::NotFailed => "not_failed",
            AgentErrorKind::NotCompleted => "not_completed",
            AgentErrorKind::WrongAgent => "wrong_agent",
            AgentErrorKind::WrongRun => "wrong_run",
            AgentErrorKind::WrongTool => "wrong_tool",
            AgentErrorKind::InvalidState => "invalid_state",
            AgentErrorKind::UnsupportedStateVersion => "unsupported_state_version",
            AgentErrorKind::StateSignature => "state_signature",
            AgentErrorKind::MaxTurnsExceeded => "max_turns_exceeded",
            AgentErrorKind::TooManyToolCalls => "too_many_tool_calls",
            AgentErrorKind::Model => "model",
            AgentErrorKind::LimitExceeded => "limit_exceeded",
            AgentErrorKind::Store => "store",
        }
    }
}

impl fmt::Display for AgentErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to do about a run found in `status` (as stored) when an operation needed another.
fn status_advice(status: &str) -> &'static str {
    match status {
        "completed" | "failed" => "it has finished, so there is nothing to do",
        "running" => {
            "another process runs it, so a resumer that lost the race has nothing to do (a run \
             whose process died is taken up with `recover`)"
        }
        "ready" => "a worker takes it, so there is nothing to do",
        "paused" | "in_doubt" => {
            "it waits for people's decisions; decide its waiting calls, then resume it"
        }
        _ => "load the run again to see where it stands",
    }
}

/// Call ids for an error message: the first 20, and how many more there are (a turn may have
/// thousands).
fn id_list(ids: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut list = ids
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        list.push_str(&format!(" and {} more", ids.len() - SHOWN));
    }
    list
}

impl AgentError {
    /// A tool error with your own message: the text the model sees.
    pub fn tool(message: impl fmt::Display) -> Self {
        AgentError::Tool(message.to_string())
    }

    /// What kind of error this is (see [`AgentErrorKind`]).
    pub fn kind(&self) -> AgentErrorKind {
        match self {
            AgentError::Tool(_) => AgentErrorKind::Tool,
            AgentError::UnknownTool(_) => AgentErrorKind::UnknownTool,
            AgentError::InvalidInput(_) => AgentErrorKind::InvalidInput,
            AgentError::InvalidOutput(_) => AgentErrorKind::InvalidOutput,
            AgentError::InvalidEvent(_) => AgentErrorKind::InvalidEvent,
            AgentError::Timeout { .. } => AgentErrorKind::Timeout,
            AgentError::Cancelled { .. } => AgentErrorKind::Cancelled,
            AgentError::Panicked { .. } => AgentErrorKind::Panicked,
            AgentError::InvalidTool { .. } => AgentErrorKind::InvalidTool,
            AgentError::InvalidAgent(_) => AgentErrorKind::InvalidAgent,
            AgentError::MissingDecision { .. } => AgentErrorKind::MissingDecision,
            AgentError::NotPending { .. } => AgentErrorKind::NotPending,
            AgentError::DecisionMismatch { .. } => AgentErrorKind::DecisionMismatch,
            AgentError::DuplicateDecision(_) => AgentErrorKind::DuplicateDecision,
            AgentError::UnattributedDecisions { .. } => AgentErrorKind::UnattributedDecisions,
            AgentError::NotPaused { .. } => AgentErrorKind::NotPaused,
            AgentError::NotFailed { .. } => AgentErrorKind::NotFailed,
            AgentError::NotCompleted { .. } => AgentErrorKind::NotCompleted,
            AgentError::WrongAgent { .. } => AgentErrorKind::WrongAgent,
            AgentError::WrongRun { .. } => AgentErrorKind::WrongRun,
            AgentError::WrongTool { .. } => AgentErrorKind::WrongTool,
            AgentError::InvalidState(_) => AgentErrorKind::InvalidState,
            AgentError::UnsupportedStateVersion { .. } => AgentErrorKind::UnsupportedStateVersion,
            AgentError::StateSignature(_) => AgentErrorKind::StateSignature,
            AgentError::MaxTurnsExceeded(_) => AgentErrorKind::MaxTurnsExceeded,
            AgentError::TooManyToolCalls { .. } => AgentErrorKind::TooManyToolCalls,
            AgentError::Model(_) => AgentErrorKind::Model,
            AgentError::LimitExceeded(_) => AgentErrorKind::LimitExceeded,
            AgentError::Store(_) => AgentErrorKind::Store,
        }
    }

    /// The text the model sees when this error is returned to it as a tool result.
    ///
    /// It is made here and only here, apart from `Display` (the text for people and logs): the
    /// model's behaviour depends on it, so rewording a message for operators never changes what
    /// a model reads, and a change here is a visible change (a golden file in the tests pins
    /// every variant's text). A panic's payload is operator detail, not model text, so it is not
    /// shown to the model.
    ///
    /// ```
    /// use phaseo_agent::AgentError;
    ///
    /// assert_eq!(AgentError::tool("no such ticket").model_message(), "no such ticket");
    /// let panic = AgentError::Panicked { tool: "deploy".into(), message: "index out of bounds".into() };
    /// assert_eq!(panic.model_message(), "Tool deploy failed unexpectedly");
    /// assert_eq!(panic.to_string(), "tool `deploy` panicked: index out of bounds"); // for operators
    /// ```
    pub fn model_message(&self) -> String {
        match self {
            AgentError::Tool(message) => message.clone(),
            AgentError::UnknownTool(tool) => format!("Unknown tool: {tool}"),
            AgentError::InvalidInput(why) => format!("Invalid tool input: {why}"),
            AgentError::InvalidOutput(why) => format!("Invalid tool output: {why}"),
            AgentError::InvalidEvent(why) => format!("Invalid tool event: {why}"),
            AgentError::Timeout { tool, ms } => format!("Tool {tool} timed out after {ms}ms"),
            AgentError::Cancelled { tool, by } => {
                format!("Tool {tool} was cancelled: call {by} failed the run")
            }
            AgentError::Panicked { tool, .. } => format!("Tool {tool} failed unexpectedly"),
            AgentError::InvalidTool { tool, reason } => {
                format!("Invalid tool definition `{tool}`: {reason}")
            }
            AgentError::InvalidAgent(why) => format!("Invalid agent: {why}"),
            AgentError::Model(error) => format!("Model error: {error}"),
            AgentError::LimitExceeded(limit) => limit.to_string(),
            AgentError::Store(error) => error.model_message(),
            // What a resume, a state or the loop refuses: not a tool's failure, but a tool that
            // runs an agent of its own may return one, and the model reads it the same way.
            AgentError::MissingDecision { call_ids } => format!(
                "Missing decision for pending tool call(s): {}; decide every pending call before \
                 resuming",
                id_list(call_ids)
            ),
            AgentError::NotPending { call_id, pending } => format!(
                "No pending tool call with id `{call_id}`; pending: [{}]",
                id_list(pending)
            ),
            AgentError::DecisionMismatch {
                call_id,
                decision,
                kind,
                hint,
            } => format!(
                "Decision `{decision}` does not fit pending call `{call_id}` of kind `{kind}`; {hint}"
            ),
            AgentError::DuplicateDecision(call_id) => {
                format!("Two decisions for tool call `{call_id}`; give one decision per call")
            }
            AgentError::UnattributedDecisions { run_id } => format!(
                "Decisions for run {run_id} name nobody who made them; name who decided with `by`"
            ),
            AgentError::NotPaused { run_id, status } => format!(
                "Run {run_id} is not waiting for a person (status: {status}); only a paused run \
                 can be resumed"
            ),
            AgentError::NotFailed { run_id, status } => format!(
                "Run {run_id} has not failed (status: {status}); only a failed run can be retried \
                 (a paused run is resumed)"
            ),
            AgentError::NotCompleted { run_id, status } => format!(
                "Run {run_id} has not completed (status: {status}); only a completed run can be \
                 continued (resume a paused one, retry a failed one)"
            ),
            AgentError::WrongAgent { expected, found } => {
                format!("Run state belongs to agent `{found}`, not `{expected}`")
            }
            AgentError::InvalidState(why) => format!("Invalid run state: {why}"),
            AgentError::UnsupportedStateVersion { found, supported } => format!(
                "Unsupported run state version {found}: this build reads version {supported}; \
                 upgrade phaseo-agent to resume it"
            ),
            AgentError::StateSignature(why) => format!("Run state signature check failed: {why}"),
            AgentError::MaxTurnsExceeded(turns) => format!(
                "Max turns exceeded: the model was still calling tools after {turns} turns; raise \
                 `max_turns` or check the tools' results"
            ),
            AgentError::WrongRun { expected, found } => format!(
                "These decisions are for run `{found}`, not for run `{expected}`; decide this \
                 run's pending calls with `Decisions::for_run(state.run_id())`"
            ),
            AgentError::WrongTool {
                call_id,
                expected,
                found,
            } => {
                format!("Pending call `{call_id}` is a call of tool `{found}`, not of `{expected}`")
            }
            AgentError::TooManyToolCalls { count, limit } => format!(
                "The model asked for {count} tool calls in one turn; this agent allows at most \
                 {limit} (raise it with `AgentBuilder::max_calls_per_turn`)"
            ),
        }
    }

    /// `{"error": "..."}`, the shape the model sees for every error.
    pub(crate) fn content(&self) -> String {
        serde_json::json!({ "error": self.model_message() }).to_string()
    }
}

/// What kind of failure a [`ModelError`] is: what a caller (or the agent's retry loop) can do
/// about it.
///
/// ```
/// use phaseo_agent::{ModelError, ModelErrorKind};
///
/// assert_eq!(ModelError::from_status(503, "busy").kind, ModelErrorKind::Overloaded);
/// let long = ModelError::from_status(400, "This model's maximum context length is 8192 tokens");
/// assert_eq!(long.kind, ModelErrorKind::ContextTooLong);
/// assert_eq!(ModelErrorKind::RateLimited.as_str(), "rate_limited");
/// assert_eq!(serde_json::to_value(ModelErrorKind::EmptyResponse).unwrap(), "empty_response");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// Too many requests (HTTP 429): retry after a while.
    RateLimited,
    /// The provider is overloaded or failing (HTTP 5xx, Anthropic's 529): retry after a while.
    Overloaded,
    /// The conversation is longer than the model's context window: retrying does not help.
    ContextTooLong,
    /// The key is missing, wrong, or not allowed this model (HTTP 401, 403).
    Authentication,
    /// The provider refused the request as malformed (HTTP 400, 404, 422).
    BadRequest,
    /// The connection failed, or broke during the response (a stream cut mid-way).
    Transport,
    /// The provider did not answer in time.
    Timeout,
    /// The model answered with neither text nor tool calls.
    EmptyResponse,
    /// The provider answered with something this crate cannot read.
    InvalidResponse,
    /// The response went over one of the [`ModelLimits`](crate::limits::ModelLimits) on size
    /// ([`ModelError::limit`] says which): asking again gets the same, so it is not retried.
    LimitExceeded,
    /// Anything else (a custom model's own failure, a script that ran out).
    Other,
}

impl ModelErrorKind {
    /// The kind's name, as in JSON: `rate_limited`, `overloaded`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ModelErrorKind::RateLimited => "rate_limited",
            ModelErrorKind::Overloaded => "overloaded",
            ModelErrorKind::ContextTooLong => "context_too_long",
            ModelErrorKind::Authentication => "authentication",
            ModelErrorKind::BadRequest => "bad_request",
            ModelErrorKind::Transport => "transport",
            ModelErrorKind::Timeout => "timeout",
            ModelErrorKind::EmptyResponse => "empty_response",
            ModelErrorKind::InvalidResponse => "invalid_response",
            ModelErrorKind::LimitExceeded => "limit_exceeded",
            ModelErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for ModelErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A model's failure to answer, structured: its kind, the HTTP status and the provider's message
/// when there was a response, and how long the provider asked to wait before retrying.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::{ModelError, ModelErrorKind};
///
/// let error = ModelError::from_status(429, "slow down").with_retry_after(Duration::from_secs(2));
/// assert_eq!(error.kind, ModelErrorKind::RateLimited);
/// assert!(error.is_retryable());
/// assert_eq!(error.to_string(), "rate_limited (HTTP 429): slow down");
///
/// let error = ModelError::new(ModelErrorKind::ContextTooLong, "too many tokens");
/// assert!(!error.is_retryable());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelError {
    /// What kind of failure.
    pub kind: ModelErrorKind,
    /// The HTTP status, when the provider answered.
    pub status: Option<u16>,
    /// The provider's message (or this crate's, when there was no response).
    pub message: String,
    /// How long the provider asked to wait (its `retry-after` header), if it said.
    pub retry_after: Option<std::time::Duration>,
    /// The [limit](crate::limits) the response went over, when that is why it failed: a size
    /// limit (kind [`ModelErrorKind::LimitExceeded`]) or a time limit (kind
    /// [`ModelErrorKind::Timeout`]).
    pub limit: Option<LimitExceeded>,
}

impl ModelError {
    /// An error of `kind` with a message.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            status: None,
            message: message.into(),
            retry_after: None,
            limit: None,
        }
    }

    /// The error of a [limit](crate::limits) that was hit: kind [`ModelErrorKind::Timeout`] for a
    /// time limit, [`ModelErrorKind::LimitExceeded`] for the others; the message names the
    /// setting.
    ///
    /// ```
    /// use phaseo_agent::{ModelError, ModelErrorKind};
    /// use phaseo_agent::limits::{Limit, LimitExceeded};
    ///
    /// let error = ModelError::limit_exceeded(LimitExceeded::new(Limit::EventBytes, 1024));
    /// assert_eq!(error.kind, ModelErrorKind::LimitExceeded);
    /// assert!(!error.is_retryable());
    /// assert!(error.to_string().contains("ModelLimits::max_event_bytes"));
    /// ```
    pub fn limit_exceeded(limit: LimitExceeded) -> Self {
        let kind = if limit.limit.unit() == "milliseconds" {
            ModelErrorKind::Timeout
        } else {
            ModelErrorKind::LimitExceeded
        };
        ModelError {
            limit: Some(limit.clone()),
            ..ModelError::new(kind, limit.to_string())
        }
    }

    /// A failure of a kind not listed (a custom model's own).
    pub fn other(message: impl Into<String>) -> Self {
        ModelError::new(ModelErrorKind::Other, message)
    }

    /// The error of an HTTP status, with the provider's message: 429 is rate limited; 529 and
    /// 5xx overloaded; 401 and 403 authentication; 408 and 504 timeout; 413 context too long; other
    /// 4xx a bad request, or context too long when the message says the context or the tokens
    /// exceed a limit.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let message = message.into();
        let kind = match status {
            429 => ModelErrorKind::RateLimited,
            401 | 403 => ModelErrorKind::Authentication,
            408 | 504 => ModelErrorKind::Timeout,
            413 => ModelErrorKind::ContextTooLong,
            400..=499 if mentions_context_limit(&message) => ModelErrorKind::ContextTooLong,
            400..=499 => ModelErrorKind::BadRequest,
            500..=599 => ModelErrorKind::Overloaded,
            _ => ModelErrorKind::InvalidResponse,
        };
        ModelError {
            status: Some(status),
            ..ModelError::new(kind, message)
        }
    }

    /// The same error, saying how long the provider asked to wait.
    ///
    /// The agent waits that long before it retries, up to 60 s; a longer wait fails the run at once:
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, AgentError, ModelError, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let busy = ModelError::from_status(429, "slow down").with_retry_after(Duration::from_secs(300));
    /// let model = ScriptedModel::new().error(busy).text("Hello!");
    /// let agent = Agent::builder("a").model(model).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.retry_after, Some(Duration::from_secs(300)));
    /// # }
    /// ```
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Self {
        self.retry_after = Some(wait);
        self
    }

    /// The same error, with an HTTP status. Unlike [`from_status`](Self::from_status), the kind
    /// stays as it was.
    ///
    /// ```
    /// use phaseo_agent::{ModelError, ModelErrorKind};
    ///
    /// let error = ModelError::new(ModelErrorKind::Transport, "connection reset").with_status(502);
    /// assert_eq!(error.kind, ModelErrorKind::Transport);
    /// assert_eq!(error.to_string(), "transport (HTTP 502): connection reset");
    /// ```
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Whether asking again may succeed: rate limits, overload, transport failures, timeouts and
    /// empty responses. A bad request, a too-long context or a wrong key fails the same way again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ModelErrorKind::RateLimited
                | ModelErrorKind::Overloaded
                | ModelErrorKind::Transport
                | ModelErrorKind::Timeout
                | ModelErrorKind::EmptyResponse
        )
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "{} (HTTP {status}): {}", self.kind, self.message),
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

impl std::error::Error for ModelError {}

impl From<ModelError> for AgentError {
    fn from(error: ModelError) -> Self {
        AgentError::Model(error)
    }
}

/// Whether a provider's 4xx message says the input is over the model's context window.
fn mentions_context_limit(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("context_length_exceeded")
        || message.contains("context length")
        || message.contains("context window")
        || message.contains("maximum context")
        || (message.contains("too long") && message.contains("token"))
}

/// `text`, then each cause of `error` after a colon: reqwest's (and hyper's) `Display` names only
/// the outermost cause ("error sending request"), and the one that explains it is further down.
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic", feature = "otel")),
    allow(dead_code)
)]
pub(crate) fn with_causes(mut text: String, error: &dyn std::error::Error) -> String {
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
