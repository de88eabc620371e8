//! The PostgreSQL store's queue: [`RunQueue`] for [`PostgresStore`], and the leases of its runs.

use futures::future::BoxFuture;
use sqlx::Row as _;

use crate::error::StoreError;
use crate::store::backend::{
    AbandonedRun, ClaimRequest, Claimed, Lease, LeaseRequest, NewRun, QueueCounts, RunQueue,
    Wakeups, lease_ms,
};
use crate::store::postgres::connect::PostgresStore;
use crate::store::postgres::statements::{
    ABANDONED, ACQUIRE, CHANNEL, CLAIM, COUNTS, RELEASE, RENEW,
};
use crate::store::sql::checks::{self, abandoned, corrupt, database, int, queue_counts};

/// The queue: claims lock rows with `FOR UPDATE SKIP LOCKED`, leases and their expiry are
/// measured by the database's clock, and a run that becomes ready is announced with `NOTIFY`
/// in the transaction that made it so.
impl PostgresStore {
    pub(super) async fn enqueue_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, true, None).await
    }

    pub(super) async fn claim_runs(&self, request: &ClaimRequest) -> Result<Claimed, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(CLAIM)
            .bind(request.agents.clone())
            .bind(i64::try_from(request.limit.min(1_000)).unwrap_or(1_000))
            .bind(request.worker.clone())
            .bind(lease_ms(request.lease_ms))
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        let mut claimed = Claimed::default();
        for row in rows {
            let run_id: Option<String> = row.try_get("run_id").map_err(database)?;
            let Some(run_id) = run_id else {
                let next: Option<i64> = row.try_get("next").map_err(database)?;
                claimed.next_expiry_ms = next.map(|ms| u64::try_from(ms).unwrap_or(0));
                continue;
            };
            let get = |name: &str| -> Result<i64, StoreError> {
                row.try_get::<Option<i64>, _>(name)
                    .map_err(database)?
                    .ok_or_else(|| corrupt(&run_id, 0, format!("a claim's {name} is NULL")))
            };
            let status: Option<String> = row.try_get("status").map_err(database)?;
            let status = checks::status(&run_id, 0, status.as_deref().unwrap_or(""))?;
            let agent_id: Option<String> = row.try_get("agent_id").map_err(database)?;
            claimed.leases.push(Lease {
                agent_id: agent_id.unwrap_or_default(),
                token: checks::version(&run_id, 0, "the lease's token", get("lease_token")?)?,
                status,
                version: checks::version(&run_id, 0, "the run's version", get("version")?)?,
                waited_ms: u64::try_from(get("waited")?).unwrap_or(0),
                run_id,
            });
        }
        claimed
            .leases
            .sort_by_key(|lease| std::cmp::Reverse(lease.waited_ms));
        Ok(claimed)
    }

    pub(super) async fn renew_lease(
        &self,
        lease: &Lease,
        duration_ms: u64,
    ) -> Result<(), StoreError> {
        let mut session = self.session().await?;
        let done = self
            .query(RENEW)
            .bind(lease.run_id.clone())
            .bind(int(lease.token))
            .bind(lease_ms(duration_ms))
            .execute(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::LeaseLost {
                run_id: lease.run_id.clone(),
                token: lease.token,
            });
        }
        Ok(())
    }

    pub(super) async fn acquire_lease(
        &self,
        run_id: &str,
        lease: &LeaseRequest,
    ) -> Result<Lease, StoreError> {
        let mut session = self.session().await?;
        let row = self
            .query(ACQUIRE)
            .bind(run_id.to_owned())
            .bind(lease.owner.clone())
            .bind(lease_ms(lease.lease_ms))
            .fetch_optional(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                run_id: run_id.to_owned(),
            });
        };
        let token: Option<i64> = row.try_get("lease_token").map_err(database)?;
        let Some(token) = token else {
            let owner: Option<String> = row.try_get("owner").map_err(database)?;
            let left: Option<i64> = row.try_get("left_ms").map_err(database)?;
            return Err(StoreError::LeaseHeld {
                run_id: run_id.to_owned(),
                owner: owner.unwrap_or_default(),
                expires_in_ms: left.and_then(|ms| u64::try_from(ms).ok()).unwrap_or(0),
            });
        };
        let status: Option<String> = row.try_get("status").map_err(database)?;
        let version: Option<i64> = row.try_get("version").map_err(database)?;
        let agent_id: Option<String> = row.try_get("agent_id").map_err(database)?;
        Ok(Lease {
            run_id: run_id.to_owned(),
            agent_id: agent_id.unwrap_or_default(),
            token: checks::version(run_id, 0, "the lease's token", token)?,
            status: checks::status(run_id, 0, status.as_deref().unwrap_or(""))?,
            version: checks::version(run_id, 0, "the run's version", version.unwrap_or(0))?,
            waited_ms: 0,
        })
    }

    pub(super) async fn list_abandoned(
        &self,
        limit: usize,
    ) -> Result<Vec<AbandonedRun>, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(ABANDONED)
            .bind(i64::try_from(limit.min(10_000)).unwrap_or(10_000))
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        rows.iter().map(abandoned).collect()
    }

    pub(super) async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut session = self.session().await?;
        self.query(RELEASE)
            .bind(lease.run_id.clone())
            .bind(int(lease.token))
            .execute(session.conn())
            .await
            .map_err(database)?;
        session.finish().await
    }

    /// `LISTEN` on a connection of its own (not the pool's: a listening connection is held for
    /// as long as the stream lives). Behind a transaction-mode pooler `LISTEN` hears nothing, and
    /// workers find new runs at their idle checks only.
    pub(super) async fn listen(&self) -> Result<Wakeups, StoreError> {
        use futures::StreamExt as _;
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(database)?;
        listener.listen(CHANNEL).await.map_err(database)?;
        Ok(Box::pin(listener.into_stream().map(|notification| {
            notification.map(drop).map_err(database)
        })))
    }

    pub(super) async fn count_queue(&self) -> Result<Vec<QueueCounts>, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(COUNTS)
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        rows.iter().map(queue_counts).collect()
    }
}

impl RunQueue for PostgresStore {
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
