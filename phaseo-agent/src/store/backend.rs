//! What a database does for a run store: the [`RunStore`] trait and the rows it keeps.
//!
//! A backend stores bytes and enforces one rule, the compare-and-swap on a run's version; it
//! knows nothing of the loop. What the rows mean (deltas, snapshots, checksums, decisions bound to
//! a digest) is decided above it, once for every backend.

use futures::future::BoxFuture;

use crate::error::StoreError;
pub use crate::error::StoredStatus;
use crate::store::listing::{AuditFilter, DamagedRow, Page, PendingFilter, RunFilter};

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
    /// A worker's write: the fencing token of its lease on the run ([`Lease::token`]). The write
    /// is applied only while the run's lease has this token and has not expired by the
    /// database's clock, else [`StoreError::LeaseLost`] and nothing is written. A write that
    /// leaves the run in any status but `running` ends the lease. `None`: a write outside any
    /// lease (a decision, a resume in the application's process), checked by version alone.
    pub fence: Option<u64>,
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
    /// Since when it is in its status: the time (`at_ms`) of the write that set it. A write that
    /// leaves the status as it was changes only the journal, not this.
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
    /// Since when it is in its status: the time (`at_ms`) of the write that set it. A write that
    /// leaves the status as it was changes only the journal, not this.
    pub updated_ms: i64,
}

/// How many bytes a store reads from its database at most, so that a row grown by a bug or by
/// someone with access to the database cannot exhaust the process's memory. A row or load over a
/// bound fails with [`StoreError::TooLarge`] for that run only; the database measures the row
/// and does not send its text.
///
/// A row's size is its text: a journal entry's or snapshot's body, a pending call's arguments and
/// decision together, an audit row's decision. The listings (`pending`, `audit`) bound each row by
/// `max_row_bytes`: a page of waiting calls names a larger row in [`Page::damaged`], with the
/// error's text (it is not left out, which would hide a waiting call from the people who must
/// decide it); a page of the audit log holding one fails with the error naming it.
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

/// What a worker asks of [`RunQueue::claim`]: up to `limit` runs of these agents, each held with a
/// lease of `lease_ms` milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The agents the worker serves (their ids).
    pub agents: Vec<String>,
    /// The worker's name, stored with the lease (for people reading the table).
    pub worker: String,
    /// How long the lease lasts unless renewed, by the database's clock.
    pub lease_ms: u64,
    /// At most this many runs.
    pub limit: usize,
}

/// A run taken by a worker: what it was, and the lease it is held with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// The fencing token: every write under this lease names it ([`Append::fence`]). Tokens of a
    /// run only grow, so a write of an older lease is refused once a newer one was given.
    pub token: u64,
    /// Its status when taken: [`Ready`](StoredStatus::Ready) (enqueued, or its decisions are
    /// complete), or [`Running`](StoredStatus::Running) (its last worker's lease expired).
    pub status: StoredStatus,
    /// Its version when taken.
    pub version: u64,
    /// How long it waited to be taken, in whole milliseconds: since it became ready, or since its
    /// last worker's lease expired, by the database's clock. "Became ready" is the time of the
    /// statement that made it so, so the wait includes that transaction's commit.
    pub waited_ms: u64,
}

/// A lease asked for one run by the process that runs it ([`RunStore::acquire`],
/// [`RunStore::create_held`]): every durable run being executed is held under one, renewed
/// while it runs, so that a recovery can tell a live run from one whose process died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRequest {
    /// Who holds it, stored with the lease (for people, and for the refusal of a recovery).
    pub owner: String,
    /// How long it lasts unless renewed, by the database's clock.
    pub lease_ms: u64,
}

/// A run that was running in an application's own process (not queued for workers) and whose
/// lease expired, or that never had one (written by a version before leases): its process
/// stopped, and [`Runs::recover_abandoned`](crate::durable::Runs::recover_abandoned) takes it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbandonedRun {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Who held its last lease, if it had one.
    pub owner: Option<String>,
    /// When its last lease expired (milliseconds since the Unix epoch, by the database's clock),
    /// if it had one.
    pub expired_ms: Option<i64>,
    /// Since when it is in its status: the time (`at_ms`) of the write that set it. A write that
    /// leaves the status as it was changes only the journal, not this.
    pub updated_ms: i64,
}

/// What [`RunQueue::claim`] took, and when the next run of those agents may become ready.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claimed {
    /// The runs taken, oldest ready first.
    pub leases: Vec<Lease>,
    /// In how many milliseconds the earliest lease of those agents held by anyone expires, if
    /// one is held: a worker with room to spare looks again then (a run whose worker died becomes
    /// ready when its lease expires, and nothing announces that).
    pub next_expiry_ms: Option<u64>,
}

/// How many runs of one agent are in each state, and how long the oldest ready one has waited:
/// [`RunQueue::queue_counts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// The agent.
    pub agent_id: String,
    /// Ready for a worker: enqueued, decided, or held by a lease that expired.
    pub ready: u64,
    /// Running: held by a live lease, or running in an application's own process.
    pub running: u64,
    /// Waiting for people's decisions.
    pub paused: u64,
    /// Waiting for a person after a crash left a call's outcome unknown.
    pub in_doubt: u64,
    /// Failed.
    pub failed: u64,
    /// Completed.
    pub completed: u64,
    /// How long the run that has been ready longest has waited, in milliseconds.
    pub oldest_ready_ms: Option<u64>,
}

/// A stream that yields whenever a run may have become ready ([`RunQueue::wakeups`]): a worker
/// waits on it instead of polling. It may yield when nothing is ready (a claim then takes
/// nothing); it ends, or yields an error, when the store's connection to the database is lost.
pub type Wakeups = futures::stream::BoxStream<'static, Result<(), StoreError>>;

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
    ///
    /// A run's version is its last entry's. The SQL stores make the journal's primary key
    /// `(run_id, version)` the compare-and-swap (an entry at a version that exists is the
    /// conflict), and write the run's own row only when its status, lease or snapshot changes:
    /// most of a run's appends (a turn, a call's start, its result) insert their entries and
    /// nothing else.
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The run's latest snapshot, the entries after it, and its waiting calls.
    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>>;

    /// Calls waiting for a person, across runs, newest first. A row that cannot be read back as
    /// written is named in the page's [`damaged`](Page::damaged), and the others are listed.
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

    /// Deletes runs completed or failed before `before_ms` (their journal, snapshot
    /// and pending rows; the audit log is kept). Never a run in any other status. Returns how many
    /// runs were deleted.
    fn prune(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Extends a live lease to `lease_ms` from now (the database's clock).
    /// [`StoreError::LeaseLost`] if it expired or the run was taken by another lease since.
    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (lease, lease_ms);
        Box::pin(async { Err(unsupported_leases()) })
    }

    /// Ends a lease now, so that another worker may take the run at once (a worker draining on
    /// shutdown). Nothing happens if the lease is already over.
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = lease;
        Box::pin(async { Err(unsupported_leases()) })
    }

    /// Stores a new run as [`create`](Self::create) does, held under a lease for `lease.owner`
    /// in the same transaction (its token is 1): the process that starts a run holds it from
    /// its first write, so no recovery takes it up while it runs.
    ///
    /// The default refuses with [`StoreError::Unsupported`]; a store that keeps no leases runs
    /// its runs unheld, each write checked by version alone, and cannot tell a live run from a
    /// dead one.
    fn create_held<'a>(
        &'a self,
        run: NewRun,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        let _ = (run, lease);
        Box::pin(async { Err(unsupported_leases()) })
    }

    /// Takes a lease on a stored run for `lease.owner`, whatever its status, if no live lease
    /// holds it: its token is larger than any before it on that run. A run held by a live lease
    /// is refused with [`StoreError::LeaseHeld`], naming the holder and when the lease expires.
    /// The default refuses with [`StoreError::Unsupported`].
    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        let _ = (run_id, lease);
        Box::pin(async { Err(unsupported_leases()) })
    }

    /// Runs that were running in an application's own process (not queued) and whose lease
    /// expired, or that never had one, oldest first, at most `limit`.
    /// The default refuses with [`StoreError::Unsupported`].
    fn abandoned(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AbandonedRun>, StoreError>> {
        let _ = limit;
        Box::pin(async { Err(unsupported_leases()) })
    }
}

/// A queue of runs that workers take ([`Worker`](crate::worker::Worker)): what a
/// [`RunStore`] also does to serve workers. A store of its own needs it only for workers and
/// [`Runs::enqueue`](crate::durable::Runs::enqueue); [`MemoryStore`](crate::store::MemoryStore),
/// `SqliteStore` and `PostgresStore` implement it.
///
/// A store that implements it must also honour [`Append::fence`] (a write under a lease
/// that is no longer the run's newest is refused with [`StoreError::LeaseLost`]) and hand a
/// queued run back to the workers when its last waiting call is decided (see
/// [`enqueue`](Self::enqueue)).
///
/// ```
/// use phaseo_agent::durable::Runs;
/// use phaseo_agent::store::{MemoryStore, RunQueue, RunStore};
///
/// fn served_by_workers<S: RunStore + RunQueue>(store: S) -> Runs {
///     Runs::new(store)
/// }
/// let _runs = served_by_workers(MemoryStore::new());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` keeps no queue of runs: it does not implement `RunQueue`",
    label = "a store without a queue",
    note = "workers and `Runs::enqueue` need a store that implements both `RunStore` and `RunQueue` (`MemoryStore`, `SqliteStore` and `PostgresStore` do)",
    note = "for a store of your own: `impl RunQueue for {Self}` (enqueue, claim, wakeups, queue_counts), or open it with `Runs::without_queue` if no worker serves it"
)]
pub trait RunQueue: RunStore {
    /// Stores a new run that workers take: as [`create`](RunStore::create), with `run.status`
    /// [`Ready`](StoredStatus::Ready), and the run marked as queued. Workers waiting on
    /// [`wakeups`](Self::wakeups) are told when it commits.
    ///
    /// A queued run becomes ready again by itself, in the transaction that makes it so: an
    /// [`append`](RunStore::append) that leaves it `paused` or `in_doubt` with a non-empty list
    /// of waiting calls, every one of them decided, stores it as `ready` instead (the last
    /// decision hands it to a worker); and a run whose lease expired is taken by the next
    /// [`claim`](Self::claim).
    fn enqueue(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Takes up to `request.limit` runs of `request.agents` that are ready, or whose lease
    /// expired, oldest first, each with a new lease whose token is larger than any before it
    /// on that run. Runs held by another worker's live lease are skipped without waiting
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`), so workers never take the same run at once.
    fn claim<'a>(&'a self, request: &'a ClaimRequest)
    -> BoxFuture<'a, Result<Claimed, StoreError>>;

    /// A stream that yields when a run may have become ready (enqueued, or decided), for any
    /// agent: PostgreSQL's `LISTEN`, so it hears every process; the embedded stores hear what
    /// goes through the same store value only.
    fn wakeups(&self) -> BoxFuture<'_, Result<Wakeups, StoreError>>;

    /// How many runs of each agent are in each state, and how long ready runs have waited.
    fn queue_counts(&self) -> BoxFuture<'_, Result<Vec<QueueCounts>, StoreError>>;
}

fn unsupported_leases() -> StoreError {
    StoreError::Unsupported {
        operation: "leases",
    }
}

/// Whether an append leaves a queued run ready: it waits for calls, and every one is decided.
pub(crate) fn hands_over(append: &Append) -> bool {
    matches!(append.status, StoredStatus::Paused | StoredStatus::InDoubt)
        && append
            .pending
            .as_ref()
            .is_some_and(|p| !p.is_empty() && p.iter().all(|row| row.decision.is_some()))
}

/// How the embedded stores tell this process's workers that a run may be ready: a counter that
/// moves on at each enqueue or hand-over, which every waiting worker sees (a `watch` channel
/// keeps the latest change, so a worker busy when it rang still sees it).
#[derive(Debug)]
pub(crate) struct Bell(tokio::sync::watch::Sender<u64>);

impl Default for Bell {
    fn default() -> Self {
        Bell(tokio::sync::watch::Sender::new(0))
    }
}

impl Bell {
    pub(crate) fn ring(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn wakeups(&self) -> Wakeups {
        let mut rx = self.0.subscribe();
        rx.mark_unchanged();
        Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some((Ok(()), rx))
        }))
    }
}

/// The time now, in milliseconds since the Unix epoch (the embedded stores' clock for leases).
pub(crate) fn clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A lease's length as stored (milliseconds, bounded so that adding it to a time cannot overflow).
pub(crate) fn lease_ms(ms: u64) -> i64 {
    i64::try_from(ms.min(365 * 24 * 3_600_000)).unwrap_or(i64::MAX)
}

/// A time in milliseconds since the Unix epoch, as `2026-12-05 20:40:01 UTC`.
pub(crate) fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A write a store refuses before it reaches its tables: the layer above broke the contract
/// (every store makes the same checks).
fn refused(run_id: &str, why: &str) -> StoreError {
    StoreError::Database(format!("write to run `{run_id}` refused: {why}").into())
}

/// Checks a new run: its first entry is version 1.
pub(crate) fn check_new(run: &NewRun) -> Result<(), StoreError> {
    if run.row.version != 1 {
        return Err(refused(
            &run.run_id,
            &format!("its first entry is version {}, not 1", run.row.version),
        ));
    }
    if let Some(other) = run
        .pending
        .iter()
        .map(|p| &p.run_id)
        .find(|r| **r != run.run_id)
    {
        return Err(refused(
            &run.run_id,
            &format!("a pending call names run `{other}`"),
        ));
    }
    Ok(())
}

/// Checks an append and returns the run's version after it: at least one entry, numbered from
/// `expected_version + 1` on; a snapshot not after the last entry; pending calls and decisions of
/// this run only.
pub(crate) fn check_append(append: &Append) -> Result<u64, StoreError> {
    let run_id = append.run_id.as_str();
    if append.rows.is_empty() {
        return Err(refused(run_id, "an append writes at least one entry"));
    }
    let mut version = append.expected_version;
    for row in &append.rows {
        version = version
            .checked_add(1)
            .filter(|v| *v < i64::MAX as u64)
            .ok_or_else(|| refused(run_id, "the version is out of range"))?;
        if row.version != version {
            return Err(refused(
                run_id,
                &format!("an entry is version {}, expected {version}", row.version),
            ));
        }
    }
    if let Some(snapshot) = &append.snapshot
        && snapshot.version > version
    {
        return Err(refused(
            run_id,
            &format!(
                "the snapshot is of version {}, after the last entry ({version})",
                snapshot.version
            ),
        ));
    }
    if let Some(other) = append
        .pending
        .iter()
        .flatten()
        .map(|p| &p.run_id)
        .chain(append.decisions.iter().map(|d| &d.run_id))
        .find(|other| *other != run_id)
    {
        return Err(refused(
            run_id,
            &format!("a pending call or decision names run `{other}`"),
        ));
    }
    Ok(version)
}

impl PendingRow {
    /// This row, named as damaged for `reason`.
    pub(crate) fn damaged(&self, reason: String) -> DamagedRow {
        DamagedRow {
            run_id: self.run_id.clone(),
            call_id: Some(self.call_id.clone()),
            version: Some(self.version),
            reason,
        }
    }
}

/// What is wrong with a waiting call's row as read back, if anything: a kind that is none of the
/// four, arguments or a recorded decision that are not JSON (the checks every store makes before
/// listing a row; its size and text are the SQL stores' own).
pub(crate) fn damage(row: &PendingRow) -> Option<String> {
    let json = |text: &str| serde_json::from_str::<serde::de::IgnoredAny>(text).err();
    if !matches!(
        row.kind.as_str(),
        "tool_approval" | "external_output" | "hitl" | "outcome_unknown"
    ) {
        return Some(format!("unknown kind `{}`", row.kind));
    }
    if let Some(e) = json(&row.arguments) {
        return Some(format!("its arguments are not JSON ({e})"));
    }
    if let Some(e) = row.decision.as_deref().and_then(json) {
        return Some(format!("its recorded decision is not JSON ({e})"));
    }
    None
}
