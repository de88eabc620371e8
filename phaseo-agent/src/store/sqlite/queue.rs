//! The SQLite store's queue: [`RunQueue`] for [`SqliteStore`], and the leases of its runs.

use futures::future::BoxFuture;
use sqlx::Row as _;

use crate::error::{DatabaseError, StoreError};
use crate::store::backend::{
    AbandonedRun, ClaimRequest, Claimed, Lease, LeaseRequest, NewRun, QueueCounts, RunQueue,
    Wakeups, clock_ms, lease_ms,
};
use crate::store::sql::checks::{self, abandoned, database, int, queue_counts};
use crate::store::sqlite::connect::SqliteStore;
use crate::store::sqlite::statements::{
    ABANDONED, LEASE_OF, NEXT_EXPIRY, RELEASE, RENEW, TAKE_LEASE, claim, counts,
};

/// The agents of a claim, as the JSON array `json_each` reads.
fn agents_json(agents: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(agents).map_err(|e| StoreError::Database(DatabaseError::from_source(e)))
}

/// The SQLite store's queue: one worker process (the file's write lock serialises claims, and
/// wake-ups are heard only by workers of this store value, so share one `SqliteStore` in the
/// process; another process's enqueue is seen at the worker's next look, see
/// [`Worker::idle_check`](crate::worker::Worker::idle_check)).
impl SqliteStore {
    pub(super) async fn enqueue_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, true, None).await
    }

    pub(super) async fn claim_runs(&self, request: &ClaimRequest) -> Result<Claimed, StoreError> {
        let agents = agents_json(&request.agents)?;
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let rows = sqlx::query(sqlx::AssertSqlSafe(claim()))
            .bind(now)
            .bind(&agents)
            .bind(i64::try_from(request.limit.min(1_000)).unwrap_or(1_000))
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?;
        let until = now.saturating_add(lease_ms(request.lease_ms));
        let mut leases = Vec::with_capacity(rows.len());
        for row in rows {
            let run_id: String = row.try_get("run_id").map_err(database)?;
            let status: String = row.try_get("status").map_err(database)?;
            let version: i64 = row.try_get("version").map_err(database)?;
            let since: i64 = row.try_get("since").map_err(database)?;
            let token: i64 = sqlx::query(TAKE_LEASE)
                .bind(&request.worker)
                .bind(until)
                .bind(&run_id)
                .fetch_one(&mut *tx)
                .await
                .and_then(|r| r.try_get(0))
                .map_err(database)?;
            leases.push(Lease {
                agent_id: row.try_get("agent_id").map_err(database)?,
                token: checks::version(&run_id, 0, "the lease's token", token)?,
                status: checks::status(&run_id, 0, &status)?,
                version: checks::version(&run_id, 0, "the run's version", version)?,
                waited_ms: u64::try_from(now - since).unwrap_or(0),
                run_id,
            });
        }
        let next: Option<i64> = sqlx::query(NEXT_EXPIRY)
            .bind(&agents)
            .bind(now)
            .fetch_one(&mut *tx)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        Ok(Claimed {
            leases,
            next_expiry_ms: next.map(|until| u64::try_from(until - now).unwrap_or(0)),
        })
    }

    pub(super) async fn renew_lease(
        &self,
        lease: &Lease,
        duration_ms: u64,
    ) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let done = sqlx::query(RENEW)
            .bind(now.saturating_add(lease_ms(duration_ms)))
            .bind(&lease.run_id)
            .bind(int(lease.token))
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost {
                run_id: lease.run_id.clone(),
                token: lease.token,
            });
        }
        Ok(())
    }

    pub(super) async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let done = sqlx::query(RELEASE)
            .bind(now)
            .bind(&lease.run_id)
            .bind(int(lease.token))
            .execute(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        if done.rows_affected() > 0 {
            self.bell.ring();
        }
        Ok(())
    }

    /// A lease on run `run_id` for `lease.owner`, unless a live one holds it.
    pub(super) async fn acquire_lease(
        &self,
        run_id: &str,
        lease: &LeaseRequest,
    ) -> Result<Lease, StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let row = sqlx::query(LEASE_OF)
            .bind(run_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(database)?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                run_id: run_id.to_owned(),
            });
        };
        let until: Option<i64> = row.try_get("lease_until_ms").map_err(database)?;
        if let Some(until) = until.filter(|until| *until > now) {
            let owner: Option<String> = row.try_get("lease_owner").map_err(database)?;
            return Err(StoreError::LeaseHeld {
                run_id: run_id.to_owned(),
                owner: owner.unwrap_or_default(),
                expires_in_ms: u64::try_from(until - now).unwrap_or(0),
            });
        }
        let token: i64 = sqlx::query(TAKE_LEASE)
            .bind(&lease.owner)
            .bind(now.saturating_add(lease_ms(lease.lease_ms)))
            .bind(run_id)
            .fetch_one(&mut *tx)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        let status: String = row.try_get("status").map_err(database)?;
        let version: i64 = row.try_get("version").map_err(database)?;
        Ok(Lease {
            run_id: run_id.to_owned(),
            agent_id: row.try_get("agent_id").map_err(database)?,
            token: checks::version(run_id, 0, "the lease's token", token)?,
            status: checks::status(run_id, 0, &status)?,
            version: checks::version(run_id, 0, "the run's version", version)?,
            waited_ms: 0,
        })
    }

    /// Runs of the application's own processes whose lease expired, or that never had one.
    pub(super) async fn list_abandoned(
        &self,
        limit: usize,
    ) -> Result<Vec<AbandonedRun>, StoreError> {
        let mut tx = self.begin_read().await?;
        let rows = sqlx::query(ABANDONED)
            .bind(clock_ms())
            .bind(i64::try_from(limit.min(10_000)).unwrap_or(10_000))
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        rows.iter().map(abandoned).collect()
    }

    pub(super) async fn listen(&self) -> Result<Wakeups, StoreError> {
        Ok(self.bell.wakeups())
    }

    pub(super) async fn count_queue(&self) -> Result<Vec<QueueCounts>, StoreError> {
        let mut tx = self.begin_read().await?;
        let now = clock_ms();
        let rows = sqlx::query(sqlx::AssertSqlSafe(counts()))
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        rows.iter().map(queue_counts).collect()
    }
}

impl RunQueue for SqliteStore {
    fn enqueue(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.enqueue_run(run))
    }

    fn claim<'a>(
        &'a self,
        request: &'a ClaimRequest,
    ) -> BoxFuture<'a, Result<Claimed, StoreError>> {
        Box::pin(self.claim_runs(request))
    }

    fn wakeups(&self) -> BoxFuture<'_, Result<Wakeups, StoreError>> {
        Box::pin(self.listen())
    }

    fn queue_counts(&self) -> BoxFuture<'_, Result<Vec<QueueCounts>, StoreError>> {
        Box::pin(self.count_queue())
    }
}
