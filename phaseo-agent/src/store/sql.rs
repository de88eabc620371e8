//! What the two SQL backends share: one SQL text for both databases (SQLite reads `$1` as the first
//! parameter, as PostgreSQL does), the checks of what is written, the checks of what is read back,
//! the paging cursors, [`impl_run_store!`], which writes the [`RunStore`] implementation once
//! for each backend's concrete sqlx types, and [`impl_row_by_row!`], the writes and the read of a
//! run one statement per row (SQLite's; PostgreSQL writes its own, one statement each).
//!
//! A backend type that uses [`impl_run_store!`] provides, as inherent items:
//!
//! - `async fn begin_write(&self) -> Result<(Guard, sqlx::Transaction<'static, DB>), StoreError>`:
//!   a transaction that holds the database's write lock (or takes row locks as it goes), and a
//!   guard kept until it ends;
//! - `async fn begin_read(&self) -> Result<sqlx::Transaction<'static, DB>, StoreError>`: a
//!   transaction whose statements all see one snapshot;
//! - `fn persistent(&self) -> bool`: whether statements may stay prepared on a connection;
//! - `async fn create_run`, `async fn append_run` and `async fn load_run`, the operations of
//!   [`RunStore::create`], [`RunStore::append`] and [`RunStore::load`] (from [`impl_row_by_row!`],
//!   or written by the backend).
//!
//! [`RunStore::create`]: crate::store::backend::RunStore::create
//! [`RunStore::append`]: crate::store::backend::RunStore::append
//! [`RunStore::load`]: crate::store::backend::RunStore::load
//! [`RunStore`]: crate::store::backend::RunStore

use std::fmt::Write as _;

use crate::error::StoreError;
use crate::store::backend::{
    Append, AuditFilter, DamagedRow, DecisionRow, JournalRow, LoadedRun, NewRun, Page,
    PendingFilter, PendingRow, QueueCounts, ReadLimits, RunFilter, RunSummary, SnapshotRow,
    StoredStatus, damage,
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

/// The most items one page of a listing holds, whatever the filter asks.
pub(crate) const MAX_LIMIT: usize = 1_000;

/// A value bound to a statement built at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// An integer.
    Int(i64),
    /// A text.
    Text(String),
}

/// A statement built from fixed fragments and the values bound to its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    /// The SQL text, its parameters numbered `$1`, `$2`, ...
    pub(crate) sql: String,
    /// The values, in parameter order.
    pub(crate) values: Vec<Value>,
}

impl Statement {
    fn new(select: &str) -> Self {
        Statement {
            sql: format!("{select} WHERE 1 = 1"),
            values: Vec::new(),
        }
    }

    /// Adds `AND condition`, each `?` of `condition` becoming the next numbered parameter, bound
    /// to the next of `values`.
    fn and(&mut self, condition: &str, values: Vec<Value>) {
        self.sql.push_str(" AND ");
        for c in condition.chars() {
            if c == '?' {
                self.values.push(Value::Int(0));
                let _ = write!(self.sql, "${}", self.values.len());
            } else {
                self.sql.push(c);
            }
        }
        let first = self.values.len() - values.len();
        for (slot, value) in self.values[first..].iter_mut().zip(values) {
            *slot = value;
        }
    }

    /// Ends the statement with its order and a limit of `limit + 1` rows (one more than a page,
    /// to know whether another page follows).
    fn finish(mut self, order: &str, limit: usize) -> Self {
        self.values.push(Value::Int(int(limit as u64 + 1)));
        let _ = write!(self.sql, " ORDER BY {order} LIMIT ${}", self.values.len());
        self
    }
}

/// A page's size: the filter's limit, capped.
pub(crate) fn cap(limit: usize) -> usize {
    limit.min(MAX_LIMIT)
}

/// A version or count as stored (an `i64`, the integer both databases have); versions never come
/// near `i64::MAX`, and one that would is stored as `i64::MAX` (and refused by the checks below).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The driver's error, as the store's.
pub(crate) fn database(error: sqlx::Error) -> StoreError {
    StoreError::Database(error.to_string())
}

/// Whether the driver's error is a unique-key violation.
pub(crate) fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}

/// A write the store refuses before it reaches the database: the layer above broke the contract.
fn refused(run_id: &str, why: &str) -> StoreError {
    StoreError::Database(format!("write to run `{run_id}` refused: {why}"))
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
fn per_row(limits: &ReadLimits) -> ReadLimits {
    ReadLimits {
        max_load_bytes: u64::MAX,
        ..*limits
    }
}

/// A text the database withheld although its size was within bounds: damage.
fn present(run_id: &str, at: u64, what: &str, text: Option<String>) -> Result<String, StoreError> {
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

/// A cursor's parts: a prefix naming the listing, then fields separated by `.`, texts in hex (so
/// an id may hold any character).
fn encode(prefix: &str, number: i64, texts: &[&str]) -> String {
    let mut cursor = format!("{prefix}.{number}");
    for text in texts {
        cursor.push('.');
        for byte in text.as_bytes() {
            let _ = write!(cursor, "{byte:02x}");
        }
    }
    cursor
}

/// A cursor's number and texts, if it is one of this listing's with `texts` texts.
fn decode(prefix: &str, texts: usize, cursor: &str) -> Result<(i64, Vec<String>), StoreError> {
    let invalid = || StoreError::InvalidCursor {
        cursor: cursor.to_owned(),
    };
    let mut parts = cursor.split('.');
    if parts.next() != Some(prefix) {
        return Err(invalid());
    }
    let number = parts
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(invalid)?;
    let mut decoded = Vec::with_capacity(texts);
    for part in parts {
        if part.len() % 2 != 0 {
            return Err(invalid());
        }
        let bytes = part
            .as_bytes()
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).ok()?;
                u8::from_str_radix(pair, 16).ok()
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(invalid)?;
        decoded.push(String::from_utf8(bytes).map_err(|_| invalid())?);
    }
    if decoded.len() != texts {
        return Err(invalid());
    }
    Ok((number, decoded))
}

/// The size of a pending row's texts, in bytes, as SQL (for both databases).
pub(crate) const PENDING_BYTES: &str =
    "(CAST(octet_length(arguments) AS BIGINT) + COALESCE(octet_length(decision), 0))";

/// The columns of a pending row, in [`RawPending`]'s order, its texts withheld when the row is
/// larger than `max_row` bytes or when `and_within` (a further SQL condition, or empty) is false.
pub(crate) fn pending_columns(max_row: u64, and_within: &str) -> String {
    let within = format!("{PENDING_BYTES} <= {} {and_within}", int(max_row));
    format!(
        "run_id, agent_id, call_id, tool, kind, CASE WHEN {within} THEN arguments END AS arguments, \
         digest, since_ms, version, CASE WHEN {within} THEN decision END AS decision, decided_by, \
         {PENDING_BYTES} AS bytes"
    )
}

/// The columns of a run's summary.
pub(crate) const RUN_COLUMNS: &str = "run_id, agent_id, status, version, created_ms, updated_ms";

/// The columns of an audit row, its id first, the decision withheld when it is larger than
/// `max_row` bytes.
fn audit_columns(max_row: u64) -> String {
    format!(
        "id, run_id, call_id, tool, CASE WHEN octet_length(decision) <= {} THEN decision END \
         AS decision, CAST(octet_length(decision) AS BIGINT) AS bytes, decided_by, at_ms, digest, \
         version",
        int(max_row)
    )
}

/// The statement listing waiting calls, newest first.
pub(crate) fn pending_statement(
    filter: &PendingFilter,
    limits: &ReadLimits,
) -> Result<Statement, StoreError> {
    let columns = pending_columns(limits.max_row_bytes, "");
    let mut s = Statement::new(&format!("SELECT {columns} FROM phaseo_pending"));
    let text = |t: &String| vec![Value::Text(t.clone())];
    if let Some(agent) = &filter.agent_id {
        s.and("agent_id = ?", text(agent));
    }
    if let Some(run) = &filter.run_id {
        s.and("run_id = ?", text(run));
    }
    if let Some(tool) = &filter.tool {
        s.and("tool = ?", text(tool));
    }
    if let Some(kind) = &filter.kind {
        s.and("kind = ?", text(kind));
    }
    if let Some(before) = filter.older_than_ms {
        s.and("since_ms < ?", vec![Value::Int(before)]);
    }
    if filter.undecided_only {
        s.and("decision IS NULL", Vec::new());
    }
    if let Some(after) = &filter.after {
        let (since, mut ids) = decode("p1", 2, after)?;
        let call = ids.pop().unwrap_or_default();
        let run = ids.pop().unwrap_or_default();
        s.and(
            "(since_ms, run_id, call_id) < (?, ?, ?)",
            vec![Value::Int(since), Value::Text(run), Value::Text(call)],
        );
    }
    Ok(s.finish(
        "since_ms DESC, run_id DESC, call_id DESC",
        cap(filter.limit),
    ))
}

/// A row's columns read one at a time, so that one that cannot be read (text that is not UTF-8,
/// in a SQLite file another program wrote) is named, and the others are still read.
pub(crate) struct Columns<'r, R> {
    row: &'r R,
    /// The columns that could not be read, and why.
    wrong: Vec<String>,
}

impl<'r, R: sqlx::Row> Columns<'r, R>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'x> i64: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
    for<'x> String: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
    for<'x> Vec<u8>: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
{
    fn new(row: &'r R) -> Self {
        Columns {
            row,
            wrong: Vec::new(),
        }
    }

    /// A text column (`None` for NULL). One that cannot be read is noted, and read as bytes with
    /// what is not UTF-8 replaced, where the database sends it so.
    fn text(&mut self, name: &str) -> Option<String> {
        match self.row.try_get::<Option<String>, _>(name) {
            Ok(text) => text,
            Err(e) => {
                self.wrong.push(e.to_string());
                let bytes = self.row.try_get::<Option<Vec<u8>>, _>(name).ok()??;
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
        }
    }

    /// An integer column (`None` for NULL, or noted if it cannot be read).
    fn int(&mut self, name: &str) -> Option<i64> {
        self.row
            .try_get::<Option<i64>, _>(name)
            .map_err(|e| self.wrong.push(e.to_string()))
            .ok()
            .flatten()
    }
}

/// A row of a listing of waiting calls as read: where it stands (for the cursor), and the row,
/// or what is wrong with it.
pub(crate) struct Listed {
    since_ms: i64,
    run_id: String,
    call_id: String,
    row: Result<PendingRow, DamagedRow>,
}

/// Reads a row of a listing of waiting calls (the columns of [`pending_columns`]). A row that
/// cannot be read back as written is named, with its run, and its call and version where they can
/// be read: a damaged row is its run's problem, never the listing's.
pub(crate) fn listed_pending<R: sqlx::Row>(r: &R, limits: &ReadLimits) -> Listed
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'x> i64: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
    for<'x> String: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
    for<'x> Vec<u8>: sqlx::Decode<'x, R::Database> + sqlx::Type<R::Database>,
{
    let mut c = Columns::new(r);
    let run_id = c.text("run_id").unwrap_or_default();
    let before = c.wrong.len();
    let call_id = c.text("call_id").unwrap_or_default();
    let call_readable = c.wrong.len() == before;
    let since_ms = c.int("since_ms").unwrap_or(0);
    let version = c.int("version");
    let raw = RawPending {
        run_id: run_id.clone(),
        agent_id: c.text("agent_id").unwrap_or_default(),
        call_id: call_id.clone(),
        tool: c.text("tool").unwrap_or_default(),
        kind: c.text("kind").unwrap_or_default(),
        arguments: c.text("arguments"),
        digest: c.text("digest").unwrap_or_default(),
        since_ms,
        version: version.unwrap_or(-1),
        decision: c.text("decision"),
        decided_by: c.text("decided_by"),
        bytes: c.int("bytes").unwrap_or(0),
    };
    let damaged = |reason: String| DamagedRow {
        run_id: run_id.clone(),
        call_id: call_readable.then(|| call_id.clone()),
        version: version.and_then(|v| u64::try_from(v).ok()),
        reason,
    };
    let row = if !c.wrong.is_empty() {
        Err(damaged(format!(
            "it cannot be read: {}",
            c.wrong.join("; ")
        )))
    } else {
        match raw.check_listed(limits) {
            Err(e) => Err(damaged(e.to_string())),
            Ok(row) => match damage(&row) {
                Some(reason) => Err(row.damaged(reason)),
                None => Ok(row),
            },
        }
    };
    Listed {
        since_ms,
        run_id,
        call_id,
        row,
    }
}

/// A page of waiting calls from the `limit + 1` rows read: the cursor moves past the damaged
/// rows too, and they are named apart.
pub(crate) fn pending_page(rows: Vec<Listed>, limit: usize) -> Page<PendingRow> {
    let read = page(rows, limit, |l| {
        encode("p1", l.since_ms, &[&l.run_id, &l.call_id])
    });
    let mut out = Page::new(Vec::with_capacity(read.items.len()), read.next);
    for listed in read.items {
        match listed.row {
            Ok(row) => out.items.push(row),
            Err(damaged) => out.damaged.push(damaged),
        }
    }
    out
}

/// The statement listing runs, last written first.
pub(crate) fn runs_statement(filter: &RunFilter) -> Result<Statement, StoreError> {
    let mut s = Statement::new(&format!("SELECT {RUN_COLUMNS} FROM phaseo_runs"));
    if let Some(agent) = &filter.agent_id {
        s.and("agent_id = ?", vec![Value::Text(agent.clone())]);
    }
    if let Some(status) = filter.status {
        s.and("status = ?", vec![Value::Text(status.as_str().to_owned())]);
    }
    if let Some(after) = &filter.after {
        let (updated, mut ids) = decode("r1", 1, after)?;
        s.and(
            "(updated_ms, run_id) < (?, ?)",
            vec![
                Value::Int(updated),
                Value::Text(ids.pop().unwrap_or_default()),
            ],
        );
    }
    Ok(s.finish("updated_ms DESC, run_id DESC", cap(filter.limit)))
}

/// The cursor after a run.
pub(crate) fn run_cursor(row: &RunSummary) -> String {
    encode("r1", row.updated_ms, &[&row.run_id])
}

/// A run's summary as read, before its checks: run, agent, status, version, created, updated.
pub(crate) type RawSummary = (String, String, String, i64, i64, i64);

/// Checks a run's summary.
pub(crate) fn summary(raw: RawSummary) -> Result<RunSummary, StoreError> {
    let (run_id, agent_id, status_text, v, created_ms, updated_ms) = raw;
    let v = version(&run_id, 0, "the run's version", v)?;
    let status = status(&run_id, v, &status_text)?;
    Ok(RunSummary {
        run_id,
        agent_id,
        status,
        version: v,
        created_ms,
        updated_ms,
    })
}

/// The statement listing the audit log, oldest first.
pub(crate) fn audit_statement(
    filter: &AuditFilter,
    limits: &ReadLimits,
) -> Result<Statement, StoreError> {
    let columns = audit_columns(limits.max_row_bytes);
    let mut s = Statement::new(&format!("SELECT {columns} FROM phaseo_audit"));
    if let Some(run) = &filter.run_id {
        s.and("run_id = ?", vec![Value::Text(run.clone())]);
    }
    if let Some(after) = &filter.after {
        let (id, _) = decode("a1", 0, after)?;
        s.and("id > ?", vec![Value::Int(id)]);
    }
    Ok(s.finish("id", cap(filter.limit)))
}

/// The cursor after the audit row `id`.
pub(crate) fn audit_cursor(id: i64) -> String {
    encode("a1", id, &[])
}

/// An audit row as read, before its checks (its `decision` filled in from `decision`).
pub(crate) struct RawDecision {
    pub(crate) id: i64,
    pub(crate) row: DecisionRow,
    pub(crate) version: i64,
    /// Withheld past `max_row_bytes`.
    pub(crate) decision: Option<String>,
    /// The decision's size in bytes.
    pub(crate) bytes: i64,
}

impl RawDecision {
    /// Checks the row.
    pub(crate) fn check(mut self, limits: &ReadLimits) -> Result<(i64, DecisionRow), StoreError> {
        let run_id = self.row.run_id.as_str();
        let sizes = [(Part::Decision(&self.row.call_id), self.bytes)];
        check_sizes(run_id, &per_row(limits), sizes)?;
        self.row.version = version(run_id, 0, "a decision's version", self.version)?;
        self.row.decision = present(run_id, self.row.version, "a decision", self.decision)?;
        Ok((self.id, self.row))
    }
}

impl RawPending {
    /// Checks a row of a listing: its size, then the row.
    pub(crate) fn check_listed(self, limits: &ReadLimits) -> Result<PendingRow, StoreError> {
        let sizes = [(Part::Pending(&self.call_id), self.bytes)];
        check_sizes(&self.run_id, &per_row(limits), sizes)?;
        self.check()
    }
}

/// A page from `limit + 1` rows read: the first `limit`, and the cursor after the last of them if
/// a row was left over.
pub(crate) fn page<T>(mut items: Vec<T>, limit: usize, cursor: impl Fn(&T) -> String) -> Page<T> {
    let limit = cap(limit);
    let more = items.len() > limit;
    items.truncate(limit);
    let next = if more { items.last().map(cursor) } else { None };
    Page::new(items, next)
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

/// Writes the read-bound settings of a backend's builder (a type with a field
/// `limits: ReadLimits`).
macro_rules! impl_read_limits {
    ($builder:ty) => {
        impl $builder {
            /// The most bytes one stored row may hold for the store to read it: a journal
            /// entry's or snapshot's body, a pending call's arguments and decision, an audit
            /// row's decision (16 MiB by default,
            /// [`ReadLimits::DEFAULT_MAX_ROW_BYTES`](crate::store::backend::ReadLimits::DEFAULT_MAX_ROW_BYTES)).
            /// A larger row is not sent by the database; reading it fails with
            /// [`StoreError::TooLarge`](crate::error::StoreError::TooLarge) for its run only.
            pub fn max_row_bytes(mut self, bytes: u64) -> Self {
                self.limits.max_row_bytes = bytes;
                self
            }

            /// The most bytes one `load` may read: the snapshot, the entries after it and the
            /// pending calls together (64 MiB by default,
            /// [`ReadLimits::DEFAULT_MAX_LOAD_BYTES`](crate::store::backend::ReadLimits::DEFAULT_MAX_LOAD_BYTES)).
            /// A run over it fails to load with
            /// [`StoreError::TooLarge`](crate::error::StoreError::TooLarge); the other runs
            /// still load.
            pub fn max_load_bytes(mut self, bytes: u64) -> Self {
                self.limits.max_load_bytes = bytes;
                self
            }
        }
    };
}

pub(crate) use impl_read_limits;

/// Writes the [`RunStore`](crate::store::backend::RunStore) implementation and the migration
/// runner of a backend type, for its concrete sqlx database type (see the module's doc for what
/// the type provides).
macro_rules! impl_run_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// A statement with the backend's preparation policy.
            fn query(
                &self,
                sql: impl sqlx::SqlSafeStr,
            ) -> sqlx::query::Query<'static, $db, <$db as sqlx::Database>::Arguments> {
                sqlx::query(sql).persistent(self.persistent())
            }

            /// A statement built at run time, its values bound.
            fn built(
                &self,
                statement: $crate::store::sql::Statement,
            ) -> sqlx::query::Query<'static, $db, <$db as sqlx::Database>::Arguments> {
                let mut query = self.query(sqlx::AssertSqlSafe(statement.sql));
                for value in statement.values {
                    query = match value {
                        $crate::store::sql::Value::Int(i) => query.bind(i),
                        $crate::store::sql::Value::Text(t) => query.bind(t),
                    };
                }
                query
            }

            /// The rows of a listing's statement, read in a transaction of one snapshot.
            async fn read_rows(
                &self,
                statement: $crate::store::sql::Statement,
            ) -> Result<Vec<<$db as sqlx::Database>::Row>, $crate::error::StoreError> {
                use $crate::store::sql::database;
                let mut tx = self.begin_read().await?;
                let rows = self
                    .built(statement)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(database)?;
                tx.commit().await.map_err(database)?;
                Ok(rows)
            }

            /// A run's row as read (columns named as in `phaseo_runs`), before its checks.
            fn raw_run(
                row: &<$db as sqlx::Database>::Row,
            ) -> Result<$crate::store::sql::RawRun, sqlx::Error> {
                use sqlx::Row as _;
                Ok($crate::store::sql::RawRun {
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

            /// A pending row as `load` reads it (SQLite's, from `impl_row_by_row!`; PostgreSQL
            /// reads its pending rows from arrays, and the listings column by column).
            #[allow(dead_code)]
            fn raw_pending(
                r: &<$db as sqlx::Database>::Row,
            ) -> Result<$crate::store::sql::RawPending, sqlx::Error> {
                use sqlx::Row as _;
                Ok($crate::store::sql::RawPending {
                    run_id: r.try_get("run_id")?,
                    agent_id: r.try_get("agent_id")?,
                    call_id: r.try_get("call_id")?,
                    tool: r.try_get("tool")?,
                    kind: r.try_get("kind")?,
                    arguments: r.try_get("arguments")?,
                    digest: r.try_get("digest")?,
                    since_ms: r.try_get("since_ms")?,
                    version: r.try_get("version")?,
                    decision: r.try_get("decision")?,
                    decided_by: r.try_get("decided_by")?,
                    bytes: r.try_get("bytes")?,
                })
            }

            async fn list_pending(
                &self,
                filter: &$crate::store::backend::PendingFilter,
            ) -> Result<
                $crate::store::backend::Page<$crate::store::backend::PendingRow>,
                $crate::error::StoreError,
            > {
                let statement = $crate::store::sql::pending_statement(filter, &self.limits)?;
                let rows = self.read_rows(statement).await?;
                let listed = rows
                    .iter()
                    .map(|r| $crate::store::sql::listed_pending(r, &self.limits))
                    .collect();
                Ok($crate::store::sql::pending_page(listed, filter.limit))
            }

            async fn list_runs(
                &self,
                filter: &$crate::store::backend::RunFilter,
            ) -> Result<
                $crate::store::backend::Page<$crate::store::backend::RunSummary>,
                $crate::error::StoreError,
            > {
                use sqlx::Row as _;
                use $crate::store::sql::database;
                let statement = $crate::store::sql::runs_statement(filter)?;
                let rows = self.read_rows(statement).await?;
                let items = rows
                    .iter()
                    .map(|r| {
                        let raw = (
                            r.try_get("run_id")?,
                            r.try_get("agent_id")?,
                            r.try_get("status")?,
                            r.try_get("version")?,
                            r.try_get("created_ms")?,
                            r.try_get("updated_ms")?,
                        );
                        Ok::<_, sqlx::Error>(raw)
                    })
                    .map(|raw| $crate::store::sql::summary(raw.map_err(database)?))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok($crate::store::sql::page(
                    items,
                    filter.limit,
                    $crate::store::sql::run_cursor,
                ))
            }

            async fn list_audit(
                &self,
                filter: &$crate::store::backend::AuditFilter,
            ) -> Result<
                $crate::store::backend::Page<$crate::store::backend::DecisionRow>,
                $crate::error::StoreError,
            > {
                use sqlx::Row as _;
                use $crate::store::sql::database;
                let statement = $crate::store::sql::audit_statement(filter, &self.limits)?;
                let rows = self.read_rows(statement).await?;
                let items = rows
                    .iter()
                    .map(|r| {
                        Ok::<_, sqlx::Error>($crate::store::sql::RawDecision {
                            id: r.try_get("id")?,
                            row: $crate::store::backend::DecisionRow {
                                run_id: r.try_get("run_id")?,
                                call_id: r.try_get("call_id")?,
                                tool: r.try_get("tool")?,
                                decision: String::new(),
                                by: r.try_get("decided_by")?,
                                at_ms: r.try_get("at_ms")?,
                                digest: r.try_get("digest")?,
                                version: 0,
                            },
                            version: r.try_get("version")?,
                            decision: r.try_get("decision")?,
                            bytes: r.try_get("bytes")?,
                        })
                    })
                    .map(|raw| raw.map_err(database)?.check(&self.limits))
                    .collect::<Result<Vec<_>, _>>()?;
                let page = $crate::store::sql::page(items, filter.limit, |(id, _)| {
                    $crate::store::sql::audit_cursor(*id)
                });
                Ok($crate::store::backend::Page::new(
                    page.items.into_iter().map(|(_, row)| row).collect(),
                    page.next,
                ))
            }

            async fn prune_runs(&self, before_ms: i64) -> Result<u64, $crate::error::StoreError> {
                use $crate::store::sql::database;
                let (_guard, mut tx) = self.begin_write().await?;
                // The journal and pending rows go with their run (ON DELETE CASCADE); the audit
                // log has no key to the runs and stays.
                let done = self
                    .query(
                        "DELETE FROM phaseo_runs WHERE status IN ('completed', 'failed') \
                     AND updated_ms < $1",
                    )
                    .bind(before_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(database)?;
                tx.commit().await.map_err(database)?;
                Ok(done.rows_affected())
            }
        }

        impl $crate::store::backend::RunStore for $store {
            fn create(
                &self,
                run: $crate::store::backend::NewRun,
            ) -> futures::future::BoxFuture<'_, Result<(), $crate::error::StoreError>> {
                Box::pin(self.create_run(run))
            }

            fn append(
                &self,
                append: $crate::store::backend::Append,
            ) -> futures::future::BoxFuture<'_, Result<(), $crate::error::StoreError>> {
                Box::pin(self.append_run(append))
            }

            fn load<'a>(
                &'a self,
                run_id: &'a str,
            ) -> futures::future::BoxFuture<
                'a,
                Result<$crate::store::backend::LoadedRun, $crate::error::StoreError>,
            > {
                Box::pin(self.load_run(run_id))
            }

            fn pending<'a>(
                &'a self,
                filter: &'a $crate::store::backend::PendingFilter,
            ) -> futures::future::BoxFuture<
                'a,
                Result<
                    $crate::store::backend::Page<$crate::store::backend::PendingRow>,
                    $crate::error::StoreError,
                >,
            > {
                Box::pin(self.list_pending(filter))
            }

            fn runs<'a>(
                &'a self,
                filter: &'a $crate::store::backend::RunFilter,
            ) -> futures::future::BoxFuture<
                'a,
                Result<
                    $crate::store::backend::Page<$crate::store::backend::RunSummary>,
                    $crate::error::StoreError,
                >,
            > {
                Box::pin(self.list_runs(filter))
            }

            fn audit<'a>(
                &'a self,
                filter: &'a $crate::store::backend::AuditFilter,
            ) -> futures::future::BoxFuture<
                'a,
                Result<
                    $crate::store::backend::Page<$crate::store::backend::DecisionRow>,
                    $crate::error::StoreError,
                >,
            > {
                Box::pin(self.list_audit(filter))
            }

            fn prune(
                &self,
                before_ms: i64,
            ) -> futures::future::BoxFuture<'_, Result<u64, $crate::error::StoreError>> {
                Box::pin(self.prune_runs(before_ms))
            }

            fn renew<'a>(
                &'a self,
                lease: &'a $crate::store::backend::Lease,
                lease_ms: u64,
            ) -> futures::future::BoxFuture<'a, Result<(), $crate::error::StoreError>> {
                Box::pin(self.renew_lease(lease, lease_ms))
            }

            fn release<'a>(
                &'a self,
                lease: &'a $crate::store::backend::Lease,
            ) -> futures::future::BoxFuture<'a, Result<(), $crate::error::StoreError>> {
                Box::pin(self.release_lease(lease))
            }

            fn create_held<'a>(
                &'a self,
                run: $crate::store::backend::NewRun,
                lease: &'a $crate::store::backend::LeaseRequest,
            ) -> futures::future::BoxFuture<
                'a,
                Result<$crate::store::backend::Lease, $crate::error::StoreError>,
            > {
                Box::pin(self.create_held_run(run, lease))
            }

            fn acquire<'a>(
                &'a self,
                run_id: &'a str,
                lease: &'a $crate::store::backend::LeaseRequest,
            ) -> futures::future::BoxFuture<
                'a,
                Result<$crate::store::backend::Lease, $crate::error::StoreError>,
            > {
                Box::pin(self.acquire_lease(run_id, lease))
            }

            fn abandoned(
                &self,
                limit: usize,
            ) -> futures::future::BoxFuture<
                '_,
                Result<Vec<$crate::store::backend::AbandonedRun>, $crate::error::StoreError>,
            > {
                Box::pin(self.list_abandoned(limit))
            }
        }

        impl $crate::store::backend::RunQueue for $store {
            fn enqueue(
                &self,
                run: $crate::store::backend::NewRun,
            ) -> futures::future::BoxFuture<'_, Result<(), $crate::error::StoreError>> {
                Box::pin(self.enqueue_run(run))
            }

            fn claim<'a>(
                &'a self,
                request: &'a $crate::store::backend::ClaimRequest,
            ) -> futures::future::BoxFuture<
                'a,
                Result<$crate::store::backend::Claimed, $crate::error::StoreError>,
            > {
                Box::pin(self.claim_runs(request))
            }

            fn wakeups(
                &self,
            ) -> futures::future::BoxFuture<
                '_,
                Result<$crate::store::backend::Wakeups, $crate::error::StoreError>,
            > {
                Box::pin(self.listen())
            }

            fn queue_counts(
                &self,
            ) -> futures::future::BoxFuture<
                '_,
                Result<Vec<$crate::store::backend::QueueCounts>, $crate::error::StoreError>,
            > {
                Box::pin(self.count_queue())
            }
        }
    };
}

pub(crate) use impl_run_store;

/// Writes the writes and the read of a run (`create_run`, `append_run`, `load_run`) with one
/// statement per row, in a transaction: for a database in the process (SQLite), where a statement
/// costs no round trip and the write lock already orders the audit ids. Statements stay prepared.
#[cfg(feature = "sqlite")]
macro_rules! impl_row_by_row {
    ($store:ty, $db:ty) => {
        impl $store {
            async fn create_run(
                &self,
                run: $crate::store::backend::NewRun,
            ) -> Result<(), $crate::error::StoreError> {
                self.insert_run(run, false, None).await
            }

            /// Stores a new run held under a lease (token 1), in one transaction.
            async fn create_held_run(
                &self,
                run: $crate::store::backend::NewRun,
                lease: &$crate::store::backend::LeaseRequest,
            ) -> Result<$crate::store::backend::Lease, $crate::error::StoreError> {
                let held = $crate::store::backend::Lease {
                    run_id: run.run_id.clone(),
                    agent_id: run.agent_id.clone(),
                    token: 1,
                    status: run.status,
                    version: run.row.version,
                    waited_ms: 0,
                };
                self.insert_run(run, false, Some(lease)).await?;
                Ok(held)
            }

            /// Stores a new run; a queued one is stored ready (since now), for workers.
            async fn insert_run(
                &self,
                run: $crate::store::backend::NewRun,
                queued: bool,
                lease: Option<&$crate::store::backend::LeaseRequest>,
            ) -> Result<(), $crate::error::StoreError> {
                use $crate::store::sql::{database, int, is_unique_violation};
                $crate::store::sql::check_new(&run)?;
                let (_guard, mut tx) = self.begin_write().await?;
                let now = $crate::store::backend::clock_ms();
                let status = if queued {
                    $crate::store::backend::StoredStatus::Ready
                } else {
                    run.status
                };
                let inserted = sqlx::query(
                    "INSERT INTO phaseo_runs (run_id, agent_id, status, version, created_ms, \
                     updated_ms, queued, ready_ms, lease_token, lease_owner, lease_until_ms) \
                     VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10)",
                )
                .bind(run.run_id.clone())
                .bind(run.agent_id)
                .bind(status.as_str())
                .bind(int(run.row.version))
                .bind(run.at_ms)
                .bind(queued)
                .bind(queued.then_some(now))
                .bind(i64::from(lease.is_some()))
                .bind(lease.map(|l| l.owner.clone()))
                .bind(lease.map(|l| {
                    now.saturating_add($crate::store::backend::lease_ms(l.lease_ms))
                }))
                .execute(&mut *tx)
                .await;
                match inserted {
                    Err(e) if is_unique_violation(&e) => {
                        return Err($crate::error::StoreError::AlreadyExists {
                            run_id: run.run_id,
                        });
                    }
                    other => other.map_err(database)?,
                };
                Self::insert_journal(&mut tx, &run.run_id, run.row).await?;
                Self::insert_pending(&mut tx, &run.run_id, run.pending).await?;
                tx.commit().await.map_err(database)?;
                if queued {
                    self.bell.ring();
                }
                Ok(())
            }

            async fn insert_pending(
                tx: &mut sqlx::Transaction<'static, $db>,
                run_id: &str,
                pending: Vec<$crate::store::backend::PendingRow>,
            ) -> Result<(), $crate::error::StoreError> {
                use $crate::store::sql::{database, int};
                for (seq, p) in pending.into_iter().enumerate() {
                    sqlx::query(
                        "INSERT INTO phaseo_pending (run_id, call_id, seq, agent_id, tool, \
                         kind, arguments, digest, since_ms, version, decision, decided_by) \
                         SELECT $1, $2, $3, agent_id, $4, $5, $6, $7, $8, $9, $10, $11 \
                         FROM phaseo_runs WHERE run_id = $1",
                    )
                    .bind(run_id.to_owned())
                    .bind(p.call_id)
                    .bind(int(seq as u64))
                    .bind(p.tool)
                    .bind(p.kind)
                    .bind(p.arguments)
                    .bind(p.digest)
                    .bind(p.since_ms)
                    .bind(int(p.version))
                    .bind(p.decision)
                    .bind(p.decided_by)
                    .execute(&mut **tx)
                    .await
                    .map_err(database)?;
                }
                Ok(())
            }

            async fn insert_journal(
                tx: &mut sqlx::Transaction<'static, $db>,
                run_id: &str,
                row: $crate::store::backend::JournalRow,
            ) -> Result<(), $crate::error::StoreError> {
                sqlx::query(
                    "INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(run_id.to_owned())
                .bind($crate::store::sql::int(row.version))
                .bind(row.kind)
                .bind(i64::from(row.format))
                .bind(row.body)
                .bind(row.digest)
                .execute(&mut **tx)
                .await
                .map_err($crate::store::sql::database)?;
                Ok(())
            }

            async fn append_run(
                &self,
                append: $crate::store::backend::Append,
            ) -> Result<(), $crate::error::StoreError> {
                use $crate::store::sql::{database, int};
                let version = $crate::store::sql::check_append(&append)?;
                let hands_over = $crate::store::backend::hands_over(&append);
                let run_id = append.run_id;
                let (_guard, mut tx) = self.begin_write().await?;
                let now = $crate::store::backend::clock_ms();
                // A queued run left waiting on calls that are all decided is handed to a worker
                // (`ready`); a write outside a lease, or to any status but running, ends the lease;
                // a worker's write applies only under its live lease.
                let set = "UPDATE phaseo_runs SET version = $1, \
                     status = CASE WHEN queued = 1 AND $6 THEN 'ready' ELSE $2 END, \
                     updated_ms = $3, \
                     ready_ms = CASE WHEN queued = 1 AND $6 THEN $7 END, \
                     lease_until_ms = CASE WHEN $8 IS NOT NULL AND $2 = 'running' \
                         AND NOT (queued = 1 AND $6) THEN lease_until_ms END";
                let check = " WHERE run_id = $4 AND version = $5 \
                     AND ($8 IS NULL OR (lease_token = $8 AND lease_until_ms > $7)) \
                     RETURNING status";
                let sql = if append.snapshot.is_none() {
                    format!("{set}{check}")
                } else {
                    format!(
                        "{set}, snapshot_version = $9, snapshot_format = $10, \
                         snapshot_body = $11, snapshot_digest = $12{check}"
                    )
                };
                let mut updated = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(int(version))
                    .bind(append.status.as_str())
                    .bind(append.at_ms)
                    .bind(run_id.clone())
                    .bind(int(append.expected_version))
                    .bind(hands_over)
                    .bind(now)
                    .bind(append.fence.map(int));
                if let Some(snapshot) = append.snapshot {
                    updated = updated
                        .bind(int(snapshot.version))
                        .bind(i64::from(snapshot.format))
                        .bind(snapshot.body)
                        .bind(snapshot.digest);
                }
                let done = updated.fetch_optional(&mut *tx).await.map_err(database)?;
                let Some(done) = done else {
                    let found = sqlx::query(
                        "SELECT version, lease_token = $2 AND lease_until_ms > $3 AS held \
                         FROM phaseo_runs WHERE run_id = $1",
                    )
                    .bind(run_id.clone())
                    .bind(append.fence.map(int))
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(database)?;
                    let Some(found) = found else {
                        return Err($crate::error::StoreError::NotFound { run_id });
                    };
                    let held: Option<bool> =
                        sqlx::Row::try_get(&found, "held").map_err(database)?;
                    let found: i64 = sqlx::Row::try_get(&found, "version").map_err(database)?;
                    let found =
                        $crate::store::sql::version(&run_id, 0, "the run's version", found)?;
                    // A worker whose lease is over is told so first, whatever else moved on.
                    if let (Some(token), false) = (append.fence, held.unwrap_or(false)) {
                        return Err($crate::error::StoreError::LeaseLost { run_id, token });
                    }
                    return Err($crate::error::StoreError::Conflict {
                        run_id,
                        expected: append.expected_version,
                        found,
                    });
                };
                let status: String = sqlx::Row::try_get(&done, "status").map_err(database)?;
                let ready = status == "ready";
                for row in append.rows {
                    Self::insert_journal(&mut tx, &run_id, row).await?;
                }
                if let Some(pending) = append.pending {
                    sqlx::query("DELETE FROM phaseo_pending WHERE run_id = $1")
                        .bind(run_id.clone())
                        .execute(&mut *tx)
                        .await
                        .map_err(database)?;
                    Self::insert_pending(&mut tx, &run_id, pending).await?;
                }
                for d in append.decisions {
                    sqlx::query(
                        "INSERT INTO phaseo_audit (run_id, call_id, tool, decision, decided_by, \
                         at_ms, digest, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(d.run_id)
                    .bind(d.call_id)
                    .bind(d.tool)
                    .bind(d.decision)
                    .bind(d.by)
                    .bind(d.at_ms)
                    .bind(d.digest)
                    .bind(int(d.version))
                    .execute(&mut *tx)
                    .await
                    .map_err(database)?;
                }
                tx.commit().await.map_err(database)?;
                if ready {
                    self.bell.ring();
                }
                Ok(())
            }

            async fn load_run(
                &self,
                run_id: &str,
            ) -> Result<$crate::store::backend::LoadedRun, $crate::error::StoreError> {
                use sqlx::Row as _;
                use $crate::store::sql::{Part, check_sizes, corrupt, database, int};
                let limits = self.limits;
                let mut tx = self.begin_read().await?;
                // Each text is sent only within the bounds: its own size, and the sizes read so
                // far (the snapshot's, then the entries' in order, then the pending calls').
                let row = sqlx::query(
                    "SELECT agent_id, status, version, created_ms, updated_ms, snapshot_version, \
                     snapshot_format, CASE WHEN octet_length(snapshot_body) <= $2 \
                     AND octet_length(snapshot_body) <= $3 THEN snapshot_body END AS snapshot_body, \
                     octet_length(snapshot_body) AS snapshot_bytes, snapshot_digest \
                     FROM phaseo_runs WHERE run_id = $1",
                )
                .bind(run_id.to_owned())
                .bind(int(limits.max_row_bytes))
                .bind(int(limits.max_load_bytes))
                .fetch_optional(&mut *tx)
                .await
                .map_err(database)?
                .ok_or_else(|| $crate::error::StoreError::NotFound {
                    run_id: run_id.to_owned(),
                })?;
                // A row that cannot be read names its own version, read apart from its texts.
                let at = |r: &<$db as sqlx::Database>::Row| {
                    r.try_get::<i64, _>("version")
                        .ok()
                        .and_then(|v| u64::try_from(v).ok())
                        .unwrap_or(0)
                };
                let bad = |version: u64| move |e: sqlx::Error| corrupt(run_id, version, e.to_string());
                let raw = Self::raw_run(&row).map_err(bad(at(&row)))?;
                let snapshot = raw.snapshot_bytes.map(|b| (Part::Snapshot, b));
                check_sizes(run_id, &limits, snapshot.clone())?;
                let mut used = raw.snapshot_bytes.unwrap_or(0);
                let checked = raw.check(run_id)?;
                let after = checked.snapshot.as_ref().map_or(0, |s| s.version);
                let journal = sqlx::query(
                    "SELECT version, kind, format, CASE WHEN octet_length(body) <= $3 \
                     AND sum(octet_length(body)) OVER (ORDER BY version) <= $4 THEN body END \
                     AS body, digest, octet_length(body) AS bytes FROM phaseo_journal \
                     WHERE run_id = $1 AND version > $2 ORDER BY version",
                )
                .bind(run_id.to_owned())
                .bind(int(after))
                .bind(int(limits.max_row_bytes))
                .bind(int(limits.max_load_bytes).saturating_sub(used))
                .fetch_all(&mut *tx)
                .await
                .map_err(database)?
                .iter()
                .map(|r| {
                    let read = || {
                        Ok::<_, sqlx::Error>((
                            r.try_get("version")?,
                            r.try_get("kind")?,
                            r.try_get("format")?,
                            r.try_get("body")?,
                            r.try_get("digest")?,
                            r.try_get("bytes")?,
                        ))
                    };
                    read().map_err(bad(at(r)))
                })
                .collect::<Result<Vec<$crate::store::sql::RawJournal>, _>>()?;
                let entries = || journal.iter().map(|j| (Part::Entry(j.0), j.5));
                check_sizes(run_id, &limits, snapshot.clone().into_iter().chain(entries()))?;
                used = used.saturating_add(journal.iter().map(|j| j.5).sum::<i64>());
                let pending = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {} FROM phaseo_pending WHERE run_id = $1 ORDER BY seq",
                    $crate::store::sql::pending_columns(
                        limits.max_row_bytes,
                        &format!(
                            "AND sum({}) OVER (ORDER BY seq) <= $2",
                            $crate::store::sql::PENDING_BYTES
                        ),
                    )
                )))
                .bind(run_id.to_owned())
                .bind(int(limits.max_load_bytes).saturating_sub(used))
                .fetch_all(&mut *tx)
                .await
                .map_err(database)?
                .iter()
                .map(|r| Self::raw_pending(r).map_err(bad(at(r))))
                .collect::<Result<Vec<_>, _>>()?;
                tx.commit().await.map_err(database)?;
                let calls = pending.iter().map(|p| (Part::Pending(&p.call_id), p.bytes));
                check_sizes(run_id, &limits, snapshot.into_iter().chain(entries()).chain(calls))?;
                let rows = $crate::store::sql::journal(run_id, after, checked.version, journal)?;
                let pending = pending
                    .into_iter()
                    .map($crate::store::sql::RawPending::check)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(raw.loaded(run_id, checked, rows, pending))
            }
        }
    };
}

#[cfg(feature = "sqlite")]
pub(crate) use impl_row_by_row;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_any_id() {
        let cursor = encode("p1", -5, &["run.with:dots", "ünïcode"]);
        let (n, texts) = decode("p1", 2, &cursor).unwrap();
        assert_eq!(n, -5);
        assert_eq!(texts, ["run.with:dots", "ünïcode"]);
        assert!(decode("r1", 2, &cursor).is_err());
        assert!(decode("p1", 1, &cursor).is_err());
        assert!(decode("p1", 2, "p1.x.00").is_err());
        assert!(decode("p1", 2, "p1.1.0g.00").is_err());
    }

    #[test]
    fn built_statements_number_their_parameters() {
        let filter = PendingFilter {
            agent_id: Some("a".into()),
            older_than_ms: Some(9),
            after: Some(encode("p1", 7, &["r", "c"])),
            limit: 5_000,
            ..PendingFilter::default()
        };
        let s = pending_statement(&filter, &ReadLimits::default()).unwrap();
        assert!(s.sql.contains("agent_id = $1"), "{}", s.sql);
        assert!(s.sql.contains("since_ms < $2"), "{}", s.sql);
        assert!(s.sql.contains("< ($3, $4, $5)"), "{}", s.sql);
        assert!(s.sql.ends_with("LIMIT $6"), "{}", s.sql);
        assert_eq!(s.values[5], Value::Int(MAX_LIMIT as i64 + 1));
        assert_eq!(s.values[3], Value::Text("r".into()));
    }
}
