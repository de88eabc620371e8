//! The listings both SQL backends share: the statements built from a filter (one SQL text for
//! both databases: SQLite reads `$1` as the first parameter, as PostgreSQL does), the paging
//! cursors, and the rows of a page read back and checked.

use std::fmt::Write as _;

use crate::error::StoreError;
use crate::store::backend::damage;
use crate::store::backend::{DecisionRow, PendingRow, ReadLimits, RunSummary};
use crate::store::listing::{
    AuditFilter, DamagedRow, Page, PendingFilter, RunFilter, decode, encode,
};
use crate::store::sql::checks::{
    Part, RawPending, check_sizes, database, int, per_row, present, status, version,
};

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

/// The columns of a run's summary (of `phaseo_runs`): its version is its journal's last entry.
pub(crate) const RUN_COLUMNS: &str = "run_id, agent_id, status, (SELECT max(j.version) \
     FROM phaseo_journal j WHERE j.run_id = phaseo_runs.run_id) AS version, created_ms, updated_ms";

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

/// The statement listing runs, the latest to change status first.
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

/// The page of runs from the `limit + 1` rows of [`runs_statement`].
pub(crate) fn runs_page<R>(rows: &[R], limit: usize) -> Result<Page<RunSummary>, StoreError>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
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
        .map(|raw| summary(raw.map_err(database)?))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(page(items, limit, run_cursor))
}

/// The page of the audit log from the `limit + 1` rows of [`audit_statement`].
pub(crate) fn audit_page<R>(
    rows: &[R],
    limit: usize,
    limits: &ReadLimits,
) -> Result<Page<DecisionRow>, StoreError>
where
    R: sqlx::Row,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let items = rows
        .iter()
        .map(|r| {
            Ok::<_, sqlx::Error>(RawDecision {
                id: r.try_get("id")?,
                row: DecisionRow {
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
        .map(|raw| raw.map_err(database)?.check(limits))
        .collect::<Result<Vec<_>, _>>()?;
    let page = page(items, limit, |(id, _)| audit_cursor(*id));
    Ok(Page::new(
        page.items.into_iter().map(|(_, row)| row).collect(),
        page.next,
    ))
}

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
