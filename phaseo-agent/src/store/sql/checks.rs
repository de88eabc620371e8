//! The checks both SQL backends share: of what is written (versions, pending calls of the run),
//! and of what is read back (sizes within the bounds, versions, statuses, snapshots, journal rows),
//! and the conversion of the driver's errors.

use crate::error::{DatabaseError, StoreError};
use crate::store::backend::{
    JournalRow, LoadedRun, PendingRow, QueueCounts, ReadLimits, SnapshotRow, StoredStatus,
};

/// One agent's row of a queue count (`agent_id`, the counts `ready` to `completed`, and
/// `oldest`, milliseconds or NULL), as both backends' statements return it.
pub(crate) fn queue_counts<R: sqlx::Row>(row: &R) -> Result<QueueCounts, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let count = |name: &str| -> Result<u64, StoreError> {
        let n: i64 = row.try_get(name).map_err(database)?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let oldest: Option<i64> = row.try_get("oldest").map_err(database)?;
    Ok(QueueCounts {
        agent_id: row.try_get("agent_id").map_err(database)?,
        ready: count("ready")?,
        running: count("running")?,
        paused: count("paused")?,
        in_doubt: count("in_doubt")?,
        failed: count("failed")?,
        completed: count("completed")?,
        oldest_ready_ms: oldest.map(|ms| u64::try_from(ms).unwrap_or(0)),
    })
}

/// A version or count as stored (an `i64`, the integer both databases have); versions never come
/// near `i64::MAX`, and one that would is stored as `i64::MAX` (and refused by the checks below).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The driver's error, as the store's.
pub(crate) fn database(error: sqlx::Error) -> StoreError {
    StoreError::Database(DatabaseError::from_source(error))
}

/// Whether the driver's error is a unique-key violation.
pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

/// A damaged row of `run_id`.
pub(crate) fn corrupt(run_id: &str, version: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_owned(),
        version,
        reason: reason.into(),
    }
}

/// What a size read back belongs to, for the error naming it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part<'a> {
    /// The run's snapshot.
    Snapshot,
    /// The journal entry of this version.
    Entry(i64),
    /// The pending call of this id (its arguments and decision).
    Pending(&'a str),
    /// The decision on the call of this id, in the audit log.
    Decision(&'a str),
}

impl std::fmt::Display for Part<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Snapshot => write!(f, "the snapshot"),
            Part::Entry(v) => write!(f, "journal entry {v}"),
            Part::Pending(call) => write!(f, "pending call `{call}`"),
            Part::Decision(call) => write!(f, "the audit log's decision on call `{call}`"),
        }
    }
}

/// Checks the sizes the database measured for what a read of `run_id` returns: each within
/// `max_row_bytes`, and all together within `max_load_bytes`. Run before the rows are used:
/// the database withholds the text of a row past a bound, and reports only its size.
pub(crate) fn check_sizes<'a>(
    run_id: &str,
    limits: &ReadLimits,
    sizes: impl IntoIterator<Item = (Part<'a>, i64)>,
) -> Result<(), StoreError> {
    let mut total = 0u64;
    for (part, raw) in sizes {
        let size = u64::try_from(raw)
            .map_err(|_| corrupt(run_id, 0, format!("{part} has a negative size ({raw})")))?;
        if size > limits.max_row_bytes {
            return Err(too_large(
                run_id,
                part.to_string(),
                size,
                limits.max_row_bytes,
                ROW,
            ));
        }
        total = total.saturating_add(size);
    }
    if total > limits.max_load_bytes {
        let what = "the load (snapshot, entries after it and pending calls)";
        return Err(too_large(
            run_id,
            what.into(),
            total,
            limits.max_load_bytes,
            LOAD,
        ));
    }
    Ok(())
}

/// The setting bounding one row.
const ROW: &str = "max_row_bytes";
/// The setting bounding one load.
const LOAD: &str = "max_load_bytes";

fn too_large(
    run_id: &str,
    what: String,
    size: u64,
    limit: u64,
    setting: &'static str,
) -> StoreError {
    StoreError::TooLarge {
        run_id: run_id.to_owned(),
        what,
        size,
        limit,
        setting,
    }
}

/// Limits for a listing: each row bounded, no bound on the page's total (a page holds at most
/// [`MAX_LIMIT`] rows).
pub(crate) fn per_row(limits: &ReadLimits) -> ReadLimits {
    ReadLimits {
        max_load_bytes: u64::MAX,
        ..*limits
    }
}

/// A text the database withheld although its size was within bounds: damage.
pub(crate) fn present(
    run_id: &str,
    at: u64,
    what: &str,
    text: Option<String>,
) -> Result<String, StoreError> {
    text.ok_or_else(|| corrupt(run_id, at, format!("{what} is missing")))
}

/// A version as read back: never negative.
pub(crate) fn version(run_id: &str, at: u64, what: &str, raw: i64) -> Result<u64, StoreError> {
    u64::try_from(raw).map_err(|_| corrupt(run_id, at, format!("{what} is negative ({raw})")))
}

/// A format as read back: a `u32`.
pub(crate) fn format(run_id: &str, at: u64, raw: i64) -> Result<u32, StoreError> {
    u32::try_from(raw).map_err(|_| corrupt(run_id, at, format!("format {raw} is out of range")))
}

/// A status as read back: one of the five.
pub(crate) fn status(run_id: &str, at: u64, raw: &str) -> Result<StoredStatus, StoreError> {
    StoredStatus::parse(raw).ok_or_else(|| corrupt(run_id, at, format!("unknown status `{raw}`")))
}

/// A run's row as read, before its checks.
pub(crate) struct RawRun {
    pub(crate) agent_id: String,
    pub(crate) status: String,
    pub(crate) version: i64,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) snapshot_version: Option<i64>,
    pub(crate) snapshot_format: Option<i64>,
    pub(crate) snapshot_body: Option<String>,
    /// The snapshot body's size in bytes, as the database measured it (the body is withheld past
    /// the bounds).
    pub(crate) snapshot_bytes: Option<i64>,
    pub(crate) snapshot_digest: Option<String>,
}

/// A run's row, checked: its version, status and snapshot.
pub(crate) struct CheckedRun {
    pub(crate) version: u64,
    pub(crate) status: StoredStatus,
    pub(crate) snapshot: Option<SnapshotRow>,
}

impl RawRun {
    /// Checks the row of `run_id`.
    pub(crate) fn check(&self, run_id: &str) -> Result<CheckedRun, StoreError> {
        let at = version(run_id, 0, "the run's version", self.version)?;
        let status = status(run_id, at, &self.status)?;
        let snapshot = match (
            self.snapshot_version,
            self.snapshot_format,
            self.snapshot_bytes,
            &self.snapshot_digest,
        ) {
            (None, None, None, None) => None,
            (Some(v), Some(f), Some(_), Some(digest)) => {
                let v = version(run_id, at, "the snapshot's version", v)?;
                if v > at {
                    return Err(corrupt(
                        run_id,
                        at,
                        format!("the snapshot is of version {v}, after the run's"),
                    ));
                }
                let body = present(run_id, v, "the snapshot's body", self.snapshot_body.clone())?;
                Some(SnapshotRow {
                    version: v,
                    format: format(run_id, v, f)?,
                    body,
                    digest: digest.clone(),
                })
            }
            _ => return Err(corrupt(run_id, at, "the snapshot is partly missing")),
        };
        Ok(CheckedRun {
            version: at,
            status,
            snapshot,
        })
    }
}

impl RawRun {
    /// The run as loaded: this row, checked as `checked`, with its journal rows and pending calls.
    pub(crate) fn loaded(
        self,
        run_id: &str,
        checked: CheckedRun,
        rows: Vec<JournalRow>,
        pending: Vec<PendingRow>,
    ) -> LoadedRun {
        LoadedRun {
            run_id: run_id.to_owned(),
            agent_id: self.agent_id,
            status: checked.status,
            version: checked.version,
            snapshot: checked.snapshot,
            rows,
            pending,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
        }
    }
}

/// A journal row as read, before its checks: version, kind, format, body (withheld past the
/// bounds), digest, the body's size in bytes.
pub(crate) type RawJournal = (i64, String, i64, Option<String>, String, i64);

/// A journal row as read, its columns named with `prefix` (`version`, `kind`, `format`, `body`,
/// `digest`, `bytes`), before its checks.
pub(crate) fn raw_entry<R>(row: &R, prefix: &str) -> Result<RawJournal, sqlx::Error>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let column = |name: &str| format!("{prefix}{name}");
    Ok((
        row.try_get(column("version").as_str())?,
        row.try_get(column("kind").as_str())?,
        row.try_get(column("format").as_str())?,
        row.try_get(column("body").as_str())?,
        row.try_get(column("digest").as_str())?,
        row.try_get(column("bytes").as_str())?,
    ))
}

/// Checks the journal rows read after the snapshot: versions `after + 1 ..= last`, each once.
pub(crate) fn journal(
    run_id: &str,
    after: u64,
    last: u64,
    raw: Vec<RawJournal>,
) -> Result<Vec<JournalRow>, StoreError> {
    let mut rows = Vec::with_capacity(raw.len());
    let mut expected = after + 1;
    for (v, kind, f, body, digest, _) in raw {
        let v = version(run_id, expected, "an entry's version", v)?;
        if v != expected {
            return Err(corrupt(
                run_id,
                expected,
                format!("the journal has no entry {expected} (next is {v})"),
            ));
        }
        rows.push(JournalRow {
            version: v,
            kind,
            format: format(run_id, v, f)?,
            body: present(run_id, v, "the entry's body", body)?,
            digest,
        });
        expected += 1;
    }
    if expected != last + 1 {
        return Err(corrupt(
            run_id,
            expected,
            format!("the journal ends before the run's version {last}"),
        ));
    }
    Ok(rows)
}

/// A pending row as read, before its checks.
pub(crate) struct RawPending {
    pub(crate) run_id: String,
    pub(crate) agent_id: String,
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) kind: String,
    /// Withheld, as `decision` is, past the bounds.
    pub(crate) arguments: Option<String>,
    pub(crate) digest: String,
    pub(crate) since_ms: i64,
    pub(crate) version: i64,
    pub(crate) decision: Option<String>,
    pub(crate) decided_by: Option<String>,
    /// The size of `arguments` and `decision` together, in bytes, as the database measured it.
    pub(crate) bytes: i64,
}

impl RawPending {
    /// Checks the row (its size was checked with the rest of its read, by [`check_sizes`]).
    pub(crate) fn check(self) -> Result<PendingRow, StoreError> {
        let version = version(&self.run_id, 0, "a pending call's version", self.version)?;
        let what = format!("the arguments of pending call `{}`", self.call_id);
        let arguments = present(&self.run_id, version, &what, self.arguments)?;
        Ok(PendingRow {
            run_id: self.run_id,
            agent_id: self.agent_id,
            call_id: self.call_id,
            tool: self.tool,
            kind: self.kind,
            arguments,
            digest: self.digest,
            since_ms: self.since_ms,
            version,
            decision: self.decision,
            decided_by: self.decided_by,
        })
    }
}

/// An abandoned run as a row of `list_abandoned` reads it.
pub(crate) fn abandoned<R>(row: &R) -> Result<crate::store::backend::AbandonedRun, StoreError>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(crate::store::backend::AbandonedRun {
        run_id: row.try_get("run_id").map_err(database)?,
        agent_id: row.try_get("agent_id").map_err(database)?,
        owner: row.try_get("lease_owner").map_err(database)?,
        expired_ms: row.try_get("lease_until_ms").map_err(database)?,
        updated_ms: row.try_get("updated_ms").map_err(database)?,
    })
}

/// A run's row as read (columns named as in `phaseo_runs`, with `snapshot_bytes`), before its
/// checks.
pub(crate) fn raw_run<R>(row: &R) -> Result<RawRun, sqlx::Error>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(RawRun {
        agent_id: row.try_get("agent_id")?,
        status: row.try_get("status")?,
        version: row.try_get("version")?,
        created_ms: row.try_get("created_ms")?,
        updated_ms: row.try_get("updated_ms")?,
        snapshot_version: row.try_get("snapshot_version")?,
        snapshot_format: row.try_get("snapshot_format")?,
        snapshot_body: row.try_get("snapshot_body")?,
        snapshot_bytes: row.try_get("snapshot_bytes")?,
        snapshot_digest: row.try_get("snapshot_digest")?,
    })
}
