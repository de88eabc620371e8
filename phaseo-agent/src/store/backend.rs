//! What a database does for a run store: the [`RunStore`] trait and the rows it keeps.
//!
//! A backend stores bytes and enforces one rule, the compare-and-swap on a run's version; it
//! knows nothing of the loop. What the rows mean (deltas, snapshots, checksums, decisions bound to
//! a digest) is decided above it, once for every backend.

use futures::future::BoxFuture;

use crate::error::StoreError;

/// Where a stored run stands.
///
/// ```
/// use phaseo_agent::store::StoredStatus;
///
/// assert_eq!(StoredStatus::InDoubt.as_str(), "in_doubt");
/// assert_eq!(StoredStatus::parse("paused"), Some(StoredStatus::Paused));
/// assert!(StoredStatus::Paused.is_kept());
/// assert!(!StoredStatus::Completed.is_kept());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredStatus {
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

impl StoredStatus {
    /// The status as stored: `running`, `paused`, `in_doubt`, `completed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
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

/// One entry of a run's journal, as stored. Its `version` is the run's version once it is written
/// (the first entry of a run is version 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRow {
    /// The run's version after this entry.
    pub version: u64,
    /// What happened: `started`, `turn`, `call_started`, `call_finished`, `paused`, `decided`,
    /// `completed`, `failed`, ... (for queries and people; the body says it too).
    pub kind: String,
    /// The format of `body`; a reader refuses a format newer than its own.
    pub format: u32,
    /// The entry, as JSON text.
    pub body: String,
    /// The checksum chaining this entry to the one before it (hex).
    pub digest: String,
}

/// A whole state of a run at one version, so that loading reads at most a bounded number of
/// entries after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRow {
    /// The run's version the snapshot is of.
    pub version: u64,
    /// The format of `body`.
    pub format: u32,
    /// The snapshot, as JSON text.
    pub body: String,
    /// The journal's checksum at `version` (hex), which the entries after it chain from.
    pub digest: String,
}

/// A call waiting for a person, as the store lists it across runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRow {
    /// The run.
    pub run_id: String,
    /// The agent the run belongs to.
    pub agent_id: String,
    /// The call id.
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// Why it waits: `tool_approval`, `external_output`, `hitl` or `outcome_unknown`.
    pub kind: String,
    /// The call's arguments, as JSON text (what a person reviews).
    pub arguments: String,
    /// The digest of `arguments` a decision must name (hex).
    pub digest: String,
    /// Since when it waits, in milliseconds since the Unix epoch.
    pub since_ms: i64,
    /// The run's version when it started waiting.
    pub version: u64,
    /// A decision already recorded for it (JSON text of the decision), if any.
    pub decision: Option<String>,
    /// Who recorded `decision`.
    pub decided_by: Option<String>,
}

/// One decision in the audit log: never updated, never deleted with its run's pending calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRow {
    /// The run.
    pub run_id: String,
    /// The call decided.
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// The decision, as JSON text.
    pub decision: String,
    /// Who made it.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The digest of the arguments the person was shown (hex).
    pub digest: String,
    /// The run's version the decision was made on.
    pub version: u64,
}

/// A new run's first write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its status after this write.
    pub status: StoredStatus,
    /// Its first journal entry (version 1).
    pub row: JournalRow,
    /// Its waiting calls (a run stored already paused).
    pub pending: Vec<PendingRow>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// A write to a run: applied only if the run is at `expected_version`, all of it in one
/// transaction, or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The run.
    pub run_id: String,
    /// The version the writer read; the write fails with [`StoreError::Conflict`] otherwise.
    pub expected_version: u64,
    /// The entries, their versions `expected_version + 1, + 2, ...` in order (at least one).
    pub rows: Vec<JournalRow>,
    /// The run's status after the write.
    pub status: StoredStatus,
    /// A new snapshot replacing the stored one.
    pub snapshot: Option<SnapshotRow>,
    /// `Some`: the run's waiting calls are now exactly these (an empty list clears them).
    pub pending: Option<Vec<PendingRow>>,
    /// Decisions to add to the audit log.
    pub decisions: Vec<DecisionRow>,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// A run as stored: what loading it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedRun {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its status.
    pub status: StoredStatus,
    /// Its version (that of its last entry).
    pub version: u64,
    /// The latest snapshot, if one was written.
    pub snapshot: Option<SnapshotRow>,
    /// The entries after the snapshot (all of them without one), in version order.
    pub rows: Vec<JournalRow>,
    /// Its waiting calls.
    pub pending: Vec<PendingRow>,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it was last written.
    pub updated_ms: i64,
}

/// One run in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its status.
    pub status: StoredStatus,
    /// Its version.
    pub version: u64,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it was last written.
    pub updated_ms: i64,
}

/// Which waiting calls to list. Every field narrows the list; the default lists everything, newest
/// first, 50 at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFilter {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only this run.
    pub run_id: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only this kind (`tool_approval`, `external_output`, `hitl`, `outcome_unknown`).
    pub kind: Option<String>,
    /// Only calls waiting since before this time (milliseconds since the Unix epoch).
    pub older_than_ms: Option<i64>,
    /// Only calls without a recorded decision.
    pub undecided_only: bool,
    /// The page after this cursor (from [`Page::next`]).
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for PendingFilter {
    fn default() -> Self {
        PendingFilter {
            agent_id: None,
            run_id: None,
            tool: None,
            kind: None,
            older_than_ms: None,
            undecided_only: false,
            after: None,
            limit: 50,
        }
    }
}

/// Which runs to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this agent's runs.
    pub agent_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<StoredStatus>,
    /// The page after this cursor.
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            agent_id: None,
            status: None,
            after: None,
            limit: 50,
        }
    }
}

/// Which decisions of the audit log to list, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this run's decisions.
    pub run_id: Option<String>,
    /// The page after this cursor.
    pub after: Option<String>,
    /// At most this many (capped at 1,000).
    pub limit: usize,
}

impl Default for AuditFilter {
    fn default() -> Self {
        AuditFilter {
            run_id: None,
            after: None,
            limit: 50,
        }
    }
}

/// One page of a listing, and the cursor of the next (`None` on the last page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Pass as `after` for the next page.
    pub next: Option<String>,
}

/// How many bytes a store reads from its database at most, so that a row grown by a bug or by
/// someone with access to the database cannot exhaust the process's memory. A row or load over a
/// bound fails with [`StoreError::TooLarge`] for that run only; the database measures the row
/// and does not send its text.
///
/// A row's size is its text: a journal entry's or snapshot's body, a pending call's arguments and
/// decision together, an audit row's decision. The listings (`pending`, `audit`) bound each row by
/// `max_row_bytes`: a page holding a larger row fails with the error naming it (rather than
/// leaving the row out, which would hide a waiting call from the people who must decide it).
///
/// ```
/// use phaseo_agent::store::ReadLimits;
///
/// let limits = ReadLimits::default();
/// assert_eq!(limits.max_row_bytes, 16 * 1024 * 1024);
/// assert_eq!(limits.max_load_bytes, 64 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// The most bytes of one row (16 MiB by default).
    pub max_row_bytes: u64,
    /// The most bytes one `load` reads: the snapshot, the entries after it and the pending calls
    /// together (64 MiB by default).
    pub max_load_bytes: u64,
}

impl ReadLimits {
    /// The default bound on one row: 16 MiB.
    pub const DEFAULT_MAX_ROW_BYTES: u64 = 16 * 1024 * 1024;
    /// The default bound on one load: 64 MiB.
    pub const DEFAULT_MAX_LOAD_BYTES: u64 = 64 * 1024 * 1024;
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_row_bytes: Self::DEFAULT_MAX_ROW_BYTES,
            max_load_bytes: Self::DEFAULT_MAX_LOAD_BYTES,
        }
    }
}

/// A database that keeps runs: the rows, and the compare-and-swap on a run's version that makes a
/// resume, a recovery or a decision happen once.
///
/// [`SqliteStore`](crate::store::SqliteStore) and
/// [`PostgresStore`](crate::store::PostgresStore) implement it; so may any database with
/// transactions. A backend is shared by many tasks at once (`&self`); each method is one
/// transaction.
pub trait RunStore: Send + Sync + 'static {
    /// Stores a new run. [`StoreError::AlreadyExists`] if the id is taken.
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Writes `append` if the run is at `append.expected_version`, in one transaction:
    /// [`StoreError::Conflict`] (naming the version found) otherwise, and nothing is written.
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The run's latest snapshot, the entries after it, and its waiting calls.
    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>>;

    /// Calls waiting for a person, across runs, newest first.
    fn pending<'a>(
        &'a self,
        filter: &'a PendingFilter,
    ) -> BoxFuture<'a, Result<Page<PendingRow>, StoreError>>;

    /// Runs, newest first.
    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Page<RunSummary>, StoreError>>;

    /// The audit log of decisions, oldest first.
    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>>;

    /// Deletes completed and failed runs last written before `before_ms` (their journal, snapshot
    /// and pending rows; the audit log is kept). Never a run in any other status. Returns how many
    /// runs were deleted.
    fn prune(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}
