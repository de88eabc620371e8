//! The PostgreSQL store's runs: [`RunStore`] for [`PostgresStore`]. Each of `create`, `append`
//! and `load` is one statement ([`statements`](crate::store::postgres::statements)).

use futures::future::BoxFuture;
use sqlx::Postgres;
use sqlx::Row as _;
use sqlx::postgres::{PgArguments, PgRow};

use crate::error::StoreError;
use crate::store::backend::{
    AbandonedRun, Append, DecisionRow, Lease, LeaseRequest, LoadedRun, NewRun, PendingRow,
    RunStore, RunSummary, StoredStatus, check_append, check_new, hands_over, lease_ms,
};
use crate::store::listing::{AuditFilter, Page, PendingFilter, RunFilter};
use crate::store::postgres::connect::{PendingColumns, PostgresStore};
use crate::store::postgres::statements::{
    APPEND, APPEND_JOURNAL, CREATE, HELD, JOURNAL_KEY, LOAD, PRUNE, RUN_KEY,
};
use crate::store::sql::checks::{
    self, Part, RawPending, check_sizes, corrupt, database, int, is_unique_violation, journal,
    raw_entry, raw_run,
};
use crate::store::sql::listing::{
    Statement, Value, audit_page, audit_statement, listed_pending, pending_page, pending_statement,
    runs_page, runs_statement,
};

impl PostgresStore {
    /// A statement with the backend's preparation policy.
    pub(super) fn query(
        &self,
        sql: impl sqlx::SqlSafeStr,
    ) -> sqlx::query::Query<'static, Postgres, PgArguments> {
        sqlx::query(sql).persistent(self.persistent())
    }

    /// A statement built at run time, its values bound.
    fn built(&self, statement: Statement) -> sqlx::query::Query<'static, Postgres, PgArguments> {
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
    async fn read_rows(&self, statement: Statement) -> Result<Vec<PgRow>, StoreError> {
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
        let mut session = self.session().await?;
        let done = self
            .query(PRUNE)
            .bind(before_ms)
            .execute(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        Ok(done.rows_affected())
    }

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, false, None).await
    }

    /// Stores a new run held under a lease (token 1), in one statement.
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

    /// Stores a new run; a queued one is stored ready, and announced; a held one under a lease
    /// with token 1.
    pub(super) async fn insert_run(
        &self,
        run: NewRun,
        queued: bool,
        lease: Option<&LeaseRequest>,
    ) -> Result<(), StoreError> {
        check_new(&run)?;
        let status = if queued {
            StoredStatus::Ready
        } else {
            run.status
        };
        let query = self
            .query(CREATE)
            .bind(run.run_id.clone())
            .bind(run.agent_id)
            .bind(status.as_str())
            .bind(int(run.row.version))
            .bind(run.at_ms)
            .bind(run.row.kind)
            .bind(i64::from(run.row.format))
            .bind(run.row.body)
            .bind(run.row.digest);
        let query = PendingColumns::new(run.pending)
            .bind(query)
            .bind(queued)
            .bind(lease.map(|l| l.owner.clone()))
            .bind(lease.map(|l| lease_ms(l.lease_ms)));
        let mut session = self.session().await?;
        match query.execute(session.conn()).await {
            Err(e)
                if is_unique_violation(&e)
                    && e.as_database_error().and_then(|d| d.constraint()) == Some(RUN_KEY) =>
            {
                return Err(StoreError::AlreadyExists { run_id: run.run_id });
            }
            other => other.map_err(database)?,
        };
        session.finish().await
    }

    async fn append_run(&self, append: Append) -> Result<(), StoreError> {
        let version = check_append(&append)?;
        let hands_over = hands_over(&append);
        // What changes only the journal (most of a run's appends) is one short statement.
        let alone = append.snapshot.is_none()
            && append.pending.is_none()
            && append.decisions.is_empty()
            && !hands_over;
        if alone && self.append_journal_alone(&append).await? {
            return Ok(());
        }
        let Append {
            run_id,
            expected_version,
            rows,
            status,
            snapshot,
            pending,
            decisions,
            at_ms,
            fence,
        } = append;
        let mut query = self
            .query(APPEND)
            .bind(run_id.clone())
            .bind(int(expected_version))
            .bind(int(version))
            .bind(status.as_str())
            .bind(at_ms);
        query = match snapshot {
            Some(s) => query
                .bind(Some(int(s.version)))
                .bind(Some(i64::from(s.format)))
                .bind(Some(s.body))
                .bind(Some(s.digest)),
            None => query
                .bind(None::<i64>)
                .bind(None::<i64>)
                .bind(None::<String>)
                .bind(None::<String>),
        };
        let n = rows.len();
        let (mut versions, mut formats) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut kinds, mut bodies, mut digests) = (Vec::new(), Vec::new(), Vec::new());
        for row in rows {
            versions.push(int(row.version));
            kinds.push(row.kind);
            formats.push(i64::from(row.format));
            bodies.push(row.body);
            digests.push(row.digest);
        }
        let replace = pending.is_some();
        query = PendingColumns::new(pending.unwrap_or_default()).bind(query);
        query = query
            .bind(replace)
            .bind(versions)
            .bind(kinds)
            .bind(formats)
            .bind(bodies)
            .bind(digests);
        let (mut calls, mut tools, mut made, mut by) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut at, mut digests, mut versions) = (Vec::new(), Vec::new(), Vec::new());
        for d in decisions {
            calls.push(d.call_id);
            tools.push(d.tool);
            made.push(d.decision);
            by.push(d.by);
            at.push(d.at_ms);
            digests.push(d.digest);
            versions.push(int(d.version));
        }
        query = query
            .bind(calls)
            .bind(tools)
            .bind(made)
            .bind(by)
            .bind(at)
            .bind(digests)
            .bind(versions)
            .bind(hands_over)
            .bind(fence.map(int));
        let mut session = self.session().await?;
        let updated: i64 = match query.fetch_one(session.conn()).await {
            // Another writer inserted the entry at the version after `expected_version`: the
            // journal's key is the compare-and-swap.
            Err(e)
                if is_unique_violation(&e)
                    && e.as_database_error().and_then(|d| d.constraint()) == Some(JOURNAL_KEY) =>
            {
                // Behind a transaction pooler the failed statement ended its transaction: the
                // refusal is read in a session of its own (dropping this one rolls it back).
                drop(session);
                session = self.session().await?;
                0
            }
            other => other
                .and_then(|row| row.try_get("updated"))
                .map_err(database)?,
        };
        if updated == 0 {
            let found = self
                .query(HELD)
                .bind(run_id.clone())
                .bind(fence.map(int))
                .fetch_optional(session.conn())
                .await
                .map_err(database)?;
            let Some(found) = found else {
                return Err(StoreError::NotFound { run_id });
            };
            let held: Option<bool> = found.try_get("held").map_err(database)?;
            let found: i64 = found.try_get("version").map_err(database)?;
            let found = checks::version(&run_id, 0, "the run's version", found)?;
            // A worker whose lease is over is told so first, whatever else moved on.
            if let (Some(token), false) = (fence, held.unwrap_or(false)) {
                return Err(StoreError::LeaseLost { run_id, token });
            }
            return Err(StoreError::Conflict {
                run_id,
                expected: expected_version,
                found,
            });
        }
        session.finish().await
    }

    /// `append` when it changes only the journal: whether it was written. `false`: the run's
    /// row must change too, or the write is refused (a conflict on the journal's key included);
    /// [`APPEND`] then writes it or says why not.
    async fn append_journal_alone(&self, append: &Append) -> Result<bool, StoreError> {
        let n = append.rows.len();
        let (mut versions, mut formats) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut kinds, mut bodies, mut digests) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for row in &append.rows {
            versions.push(int(row.version));
            kinds.push(row.kind.as_str());
            formats.push(i64::from(row.format));
            bodies.push(row.body.as_str());
            digests.push(row.digest.as_str());
        }
        let mut session = self.session().await?;
        let inserted = self
            .query(APPEND_JOURNAL)
            .bind(append.run_id.as_str())
            .bind(int(append.expected_version))
            .bind(append.status.as_str())
            .bind(append.fence.map(int))
            .bind(versions)
            .bind(kinds)
            .bind(formats)
            .bind(bodies)
            .bind(digests)
            .execute(session.conn())
            .await;
        match inserted {
            Ok(done) if done.rows_affected() > 0 => {
                session.finish().await?;
                Ok(true)
            }
            Ok(_) => {
                session.finish().await?;
                Ok(false)
            }
            Err(e)
                if is_unique_violation(&e)
                    && e.as_database_error().and_then(|d| d.constraint()) == Some(JOURNAL_KEY) =>
            {
                // The refusal is read apart (behind a pooler this transaction has ended).
                Ok(false)
            }
            Err(e) => Err(database(e)),
        }
    }

    async fn load_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(LOAD)
            .bind(run_id.to_owned())
            .bind(int(self.limits.max_row_bytes))
            .bind(int(self.limits.max_load_bytes))
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        let part = |row: &PgRow| row.try_get::<i32, _>("part");
        let run = match rows.first() {
            Some(run) if part(run).ok() == Some(0) => run,
            _ => {
                return Err(StoreError::NotFound {
                    run_id: run_id.to_owned(),
                });
            }
        };
        // What cannot be read names the run's version, read apart from the texts.
        let at = run
            .try_get::<i64, _>("version")
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(0);
        let bad = |e: sqlx::Error| corrupt(run_id, at, e.to_string());
        let (mut entries, mut calls) = (Vec::new(), Vec::new());
        for row in &rows[1..] {
            match part(row).map_err(bad)? {
                1 => entries.push(row),
                _ => calls.push(row),
            }
        }
        // The sizes first: a text past the bounds is NULL in its row.
        let snapshot: Option<i64> = run.try_get("snapshot_bytes").map_err(bad)?;
        let mut sizes = Vec::with_capacity(1 + entries.len() + calls.len());
        sizes.extend(snapshot.map(|b| (Part::Snapshot, b)));
        for row in &entries {
            sizes.push((
                Part::Entry(row.try_get("j_version").map_err(bad)?),
                row.try_get("j_bytes").map_err(bad)?,
            ));
        }
        let call_ids = calls
            .iter()
            .map(|row| row.try_get::<String, _>("p_call_id"))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        for (row, call) in calls.iter().zip(&call_ids) {
            sizes.push((Part::Pending(call), row.try_get("p_bytes").map_err(bad)?));
        }
        check_sizes(run_id, &self.limits, sizes)?;
        let raw = raw_run(run).map_err(bad)?;
        let checked = raw.check(run_id)?;
        let after = checked.snapshot.as_ref().map_or(0, |s| s.version);
        let raw_entries = entries
            .into_iter()
            .map(|row| raw_entry(row, "j_"))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        let rows = journal(run_id, after, checked.version, raw_entries)?;
        let pending = calls
            .into_iter()
            .zip(call_ids)
            .map(|(row, call_id)| Self::raw_pending(run_id, row, call_id).map_err(bad))
            .map(|raw| raw.and_then(RawPending::check))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(raw.loaded(run_id, checked, rows, pending))
    }

    /// A pending call of `load`'s rows, before its checks.
    fn raw_pending(run_id: &str, row: &PgRow, call_id: String) -> Result<RawPending, sqlx::Error> {
        Ok(RawPending {
            run_id: run_id.to_owned(),
            agent_id: row.try_get("p_agent_id")?,
            call_id,
            tool: row.try_get("p_tool")?,
            kind: row.try_get("p_kind")?,
            arguments: row.try_get("p_arguments")?,
            digest: row.try_get("p_digest")?,
            since_ms: row.try_get("p_since_ms")?,
            version: row.try_get("p_version")?,
            decision: row.try_get("p_decision")?,
            decided_by: row.try_get("p_decided_by")?,
            bytes: row.try_get("p_bytes")?,
        })
    }
}

impl RunStore for PostgresStore {
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
