//! The SQLite store's runs: [`RunStore`] for [`SqliteStore`], each write and the read of a run
//! one statement per row, in a transaction: SQLite is in the process, so a statement costs no
//! round trip, and the write lock already orders the audit ids. Statements stay prepared.

use futures::future::BoxFuture;
use sqlx::Row as _;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Sqlite, Transaction};

use crate::error::StoreError;
use crate::store::backend::{
    AbandonedRun, Append, DecisionRow, JournalRow, Lease, LeaseRequest, LoadedRun, NewRun,
    PendingRow, RunStore, RunSummary, StoredStatus, check_append, check_new, clock_ms, hands_over,
    lease_ms,
};
use crate::store::listing::{AuditFilter, Page, PendingFilter, RunFilter};
use crate::store::sql::checks::{
    self, Part, RawJournal, RawPending, check_sizes, corrupt, database, int, is_unique_violation,
    raw_entry, raw_run,
};
use crate::store::sql::listing::{
    Statement, Value, audit_page, audit_statement, listed_pending, pending_page, pending_statement,
    runs_page, runs_statement,
};
use crate::store::sqlite::connect::SqliteStore;
use crate::store::sqlite::statements::{
    DELETE_PENDING, HELD, INSERT_AUDIT, INSERT_JOURNAL, INSERT_PENDING, INSERT_RUN, Insert,
    LOAD_JOURNAL, LOAD_RUN, PRUNE, append_journal, append_update, load_pending,
};

impl SqliteStore {
    /// A statement with the backend's preparation policy.
    pub(super) fn query(
        &self,
        sql: impl sqlx::SqlSafeStr,
    ) -> sqlx::query::Query<'static, Sqlite, SqliteArguments> {
        sqlx::query(sql).persistent(self.persistent())
    }

    /// A statement built at run time, its values bound.
    fn built(&self, statement: Statement) -> sqlx::query::Query<'static, Sqlite, SqliteArguments> {
        let mut query = self.query(sqlx::AssertSqlSafe(statement.sql));
        for value in statement.values {
            query = match value {
                Value::Int(i) => query.bind(i),
                Value::Text(t) => query.bind(t),
            };
        }
        query
    }

    /// The rows of a listing's statement, read in a transaction of one snapshot.
    async fn read_rows(&self, statement: Statement) -> Result<Vec<SqliteRow>, StoreError> {
        let mut tx = self.begin_read().await?;
        let rows = self
            .built(statement)
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        Ok(rows)
    }

    async fn list_pending(&self, filter: &PendingFilter) -> Result<Page<PendingRow>, StoreError> {
        let statement = pending_statement(filter, &self.limits)?;
        let rows = self.read_rows(statement).await?;
        let listed = rows
            .iter()
            .map(|r| listed_pending(r, &self.limits))
            .collect();
        Ok(pending_page(listed, filter.limit))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Page<RunSummary>, StoreError> {
        let rows = self.read_rows(runs_statement(filter)?).await?;
        runs_page(&rows, filter.limit)
    }

    async fn list_audit(&self, filter: &AuditFilter) -> Result<Page<DecisionRow>, StoreError> {
        let rows = self
            .read_rows(audit_statement(filter, &self.limits)?)
            .await?;
        audit_page(&rows, filter.limit, &self.limits)
    }

    async fn prune_runs(&self, before_ms: i64) -> Result<u64, StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let done = self
            .query(PRUNE)
            .bind(before_ms)
            .execute(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        Ok(done.rows_affected())
    }

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, false, None).await
    }

    /// Stores a new run held under a lease (token 1), in one transaction.
    pub(super) async fn create_held_run(
        &self,
        run: NewRun,
        lease: &LeaseRequest,
    ) -> Result<Lease, StoreError> {
        let held = Lease {
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
    pub(super) async fn insert_run(
        &self,
        run: NewRun,
        queued: bool,
        lease: Option<&LeaseRequest>,
    ) -> Result<(), StoreError> {
        check_new(&run)?;
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let status = if queued {
            StoredStatus::Ready
        } else {
            run.status
        };
        let inserted = sqlx::query(INSERT_RUN)
            .bind(run.run_id.clone())
            .bind(run.agent_id)
            .bind(status.as_str())
            .bind(run.at_ms)
            .bind(queued)
            .bind(queued.then_some(now))
            .bind(i64::from(lease.is_some()))
            .bind(lease.map(|l| l.owner.clone()))
            .bind(lease.map(|l| now.saturating_add(lease_ms(l.lease_ms))))
            .execute(&mut *tx)
            .await;
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::AlreadyExists { run_id: run.run_id });
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
        tx: &mut Transaction<'static, Sqlite>,
        run_id: &str,
        pending: Vec<PendingRow>,
    ) -> Result<(), StoreError> {
        for (seq, p) in pending.into_iter().enumerate() {
            sqlx::query(INSERT_PENDING)
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
        tx: &mut Transaction<'static, Sqlite>,
        run_id: &str,
        row: JournalRow,
    ) -> Result<(), StoreError> {
        sqlx::query(INSERT_JOURNAL)
            .bind(run_id.to_owned())
            .bind(int(row.version))
            .bind(row.kind)
            .bind(i64::from(row.format))
            .bind(row.body)
            .bind(row.digest)
            .execute(&mut **tx)
            .await
            .map_err(database)?;
        Ok(())
    }

    async fn append_run(&self, append: Append) -> Result<(), StoreError> {
        let version = check_append(&append)?;
        let hands_over = hands_over(&append);
        // What changes only the journal (a running run's turn, call or result) is one statement
        // committed on its own: one round trip to the connection's thread, one flush.
        let alone = append.snapshot.is_none()
            && append.pending.is_none()
            && append.decisions.is_empty()
            && !hands_over;
        if alone {
            let _guard = self.writer.lock().await;
            let inserted = self
                .journal_insert(&append, Insert::Alone)
                .execute(&self.pool)
                .await;
            match inserted {
                Ok(done) if done.rows_affected() > 0 => return Ok(()),
                // The row must be written too (the status or the lease changes), or the write
                // is refused: the transaction below tells which.
                Ok(_) => {}
                Err(e) if is_unique_violation(&e) => {
                    let mut tx = self.begin_read().await?;
                    return Err(Self::refusal(&mut tx, &append, clock_ms()).await?);
                }
                Err(e) => return Err(database(e)),
            }
        }
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let inserted = self
            .journal_insert(&append, Insert::WithRow)
            .execute(&mut *tx)
            .await;
        match inserted {
            Ok(done) if done.rows_affected() > 0 => {}
            Ok(_) => return Err(Self::refusal(&mut tx, &append, now).await?),
            Err(e) if is_unique_violation(&e) => {
                return Err(Self::refusal(&mut tx, &append, now).await?);
            }
            Err(e) => return Err(database(e)),
        }
        let run_id = append.run_id;
        let update = append_update(append.snapshot.is_some());
        let mut updated = sqlx::query(sqlx::AssertSqlSafe(update))
            .bind(append.status.as_str())
            .bind(append.at_ms)
            .bind(run_id.clone())
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
        let written = updated.fetch_optional(&mut *tx).await.map_err(database)?;
        let ready = match written {
            Some(row) => {
                sqlx::Row::try_get::<String, _>(&row, "status").map_err(database)? == "ready"
            }
            None => false,
        };
        debug_assert!(version >= append.expected_version);
        if let Some(pending) = append.pending {
            sqlx::query(DELETE_PENDING)
                .bind(run_id.clone())
                .execute(&mut *tx)
                .await
                .map_err(database)?;
            Self::insert_pending(&mut tx, &run_id, pending).await?;
        }
        for d in append.decisions {
            sqlx::query(INSERT_AUDIT)
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

    /// `append`'s journal rows, inserted as `insert` says.
    fn journal_insert(
        &self,
        append: &Append,
        insert: Insert,
    ) -> sqlx::query::Query<'static, Sqlite, SqliteArguments> {
        let mut query = self
            .query(sqlx::AssertSqlSafe(append_journal(
                append.rows.len(),
                insert,
            )))
            .bind(append.run_id.clone())
            .bind(int(append.expected_version))
            .bind(append.status.as_str())
            .bind(append.fence.map(int))
            .bind(clock_ms());
        for row in &append.rows {
            query = query
                .bind(int(row.version))
                .bind(row.kind.clone())
                .bind(i64::from(row.format))
                .bind(row.body.clone())
                .bind(row.digest.clone());
        }
        query
    }

    /// Why `append` wrote nothing, read in `tx` at `now`: the run is gone, the worker's lease is
    /// over, or the run is at another version.
    async fn refusal(
        tx: &mut Transaction<'static, Sqlite>,
        append: &Append,
        now: i64,
    ) -> Result<StoreError, StoreError> {
        let run_id = append.run_id.clone();
        let found = sqlx::query(HELD)
            .bind(run_id.clone())
            .bind(append.fence.map(int))
            .bind(now)
            .fetch_optional(&mut **tx)
            .await
            .map_err(database)?;
        let Some(found) = found else {
            return Ok(StoreError::NotFound { run_id });
        };
        let held: Option<bool> = sqlx::Row::try_get(&found, "held").map_err(database)?;
        let found: i64 = sqlx::Row::try_get(&found, "version").map_err(database)?;
        let found = checks::version(&run_id, 0, "the run's version", found)?;
        // A worker whose lease is over is told so first, whatever else moved on.
        if let (Some(token), false) = (append.fence, held.unwrap_or(false)) {
            return Ok(StoreError::LeaseLost { run_id, token });
        }
        Ok(StoreError::Conflict {
            run_id,
            expected: append.expected_version,
            found,
        })
    }

    async fn load_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        let limits = self.limits;
        let mut tx = self.begin_read().await?;
        // Each text is sent only within the bounds: its own size, and the sizes read so
        // far (the snapshot's, then the entries' in order, then the pending calls').
        let row = sqlx::query(LOAD_RUN)
            .bind(run_id.to_owned())
            .bind(int(limits.max_row_bytes))
            .bind(int(limits.max_load_bytes))
            .fetch_optional(&mut *tx)
            .await
            .map_err(database)?
            .ok_or_else(|| StoreError::NotFound {
                run_id: run_id.to_owned(),
            })?;
        // A row that cannot be read names its own version, read apart from its texts.
        let at = |r: &SqliteRow| {
            r.try_get::<i64, _>("version")
                .ok()
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0)
        };
        let bad = |version: u64| move |e: sqlx::Error| corrupt(run_id, version, e.to_string());
        let raw = raw_run(&row).map_err(bad(at(&row)))?;
        let snapshot = raw.snapshot_bytes.map(|b| (Part::Snapshot, b));
        check_sizes(run_id, &limits, snapshot)?;
        let mut used = raw.snapshot_bytes.unwrap_or(0);
        let checked = raw.check(run_id)?;
        let after = checked.snapshot.as_ref().map_or(0, |s| s.version);
        let journal = sqlx::query(LOAD_JOURNAL)
            .bind(run_id.to_owned())
            .bind(int(after))
            .bind(int(limits.max_row_bytes))
            .bind(int(limits.max_load_bytes).saturating_sub(used))
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?
            .iter()
            .map(|r| raw_entry(r, "").map_err(bad(at(r))))
            .collect::<Result<Vec<RawJournal>, _>>()?;
        let entries = || journal.iter().map(|j| (Part::Entry(j.0), j.5));
        check_sizes(run_id, &limits, snapshot.into_iter().chain(entries()))?;
        used = used.saturating_add(journal.iter().map(|j| j.5).sum::<i64>());
        let pending = sqlx::query(sqlx::AssertSqlSafe(load_pending(limits.max_row_bytes)))
            .bind(run_id.to_owned())
            .bind(int(limits.max_load_bytes).saturating_sub(used))
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?
            .iter()
            .map(|r| raw_pending(r).map_err(bad(at(r))))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.map_err(database)?;
        let calls = pending.iter().map(|p| (Part::Pending(&p.call_id), p.bytes));
        check_sizes(
            run_id,
            &limits,
            snapshot.into_iter().chain(entries()).chain(calls),
        )?;
        let rows = checks::journal(run_id, after, checked.version, journal)?;
        let pending = pending
            .into_iter()
            .map(RawPending::check)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(raw.loaded(run_id, checked, rows, pending))
    }
}

impl RunStore for SqliteStore {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.create_run(run))
    }

    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.append_run(append))
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>> {
        Box::pin(self.load_run(run_id))
    }

    fn pending<'a>(
        &'a self,
        filter: &'a PendingFilter,
    ) -> BoxFuture<'a, Result<Page<PendingRow>, StoreError>> {
        Box::pin(self.list_pending(filter))
    }

    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Page<RunSummary>, StoreError>> {
        Box::pin(self.list_runs(filter))
    }

    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>> {
        Box::pin(self.list_audit(filter))
    }

    fn prune(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.prune_runs(before_ms))
    }

    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.renew_lease(lease, lease_ms))
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.release_lease(lease))
    }

    fn create_held<'a>(
        &'a self,
        run: NewRun,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        Box::pin(self.create_held_run(run, lease))
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        Box::pin(self.acquire_lease(run_id, lease))
    }

    fn abandoned(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AbandonedRun>, StoreError>> {
        Box::pin(self.list_abandoned(limit))
    }
}

/// A pending row as read (the columns of a pending row, with `bytes`), before its checks.
fn raw_pending(r: &SqliteRow) -> Result<RawPending, sqlx::Error> {
    Ok(RawPending {
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
