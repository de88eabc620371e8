//! A run store in one SQLite file (feature `sqlite`): [`SqliteStore`].
//!
//! The file is in WAL mode (readers never wait for the writer), with `synchronous = FULL`: a
//! committed journal entry is on disk before `append` returns, even across a power cut (with
//! `NORMAL`, WAL mode survives a crash of the process but may lose the last commits on a power
//! cut, and a resumed run would then re-run a tool whose call it had recorded). Foreign keys are
//! on, so a run's journal and pending rows go with it.
//!
//! Every write is a `BEGIN IMMEDIATE` transaction: it takes the file's write lock before it reads
//! the run's version, so two writers, in one process or in many, are serialised by SQLite itself,
//! and the second one sees the first one's version and gets
//! [`StoreError::Conflict`]. Writers of one process also queue on an async lock first, so they wait
//! for each other without polling; writers of other processes wait up to the busy timeout.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::error::StoreError;
use crate::store::backend::{
    AbandonedRun, Bell, ClaimRequest, Claimed, Lease, LeaseRequest, NewRun, QueueCounts,
    ReadLimits, Wakeups, clock_ms, lease_ms,
};
use crate::store::migrate::{self, Files};
use crate::store::sql::{database, impl_read_limits, impl_row_by_row, impl_run_store};

/// The schema: `phaseo-agent/migrations/sqlite/`, one file per version, applied in order.
const MIGRATIONS: Files = &[
    (
        1,
        "runs",
        include_str!("../../migrations/sqlite/0001_runs.sql"),
    ),
    (
        2,
        "queue",
        include_str!("../../migrations/sqlite/0002_queue.sql"),
    ),
];

/// A [`RunStore`](crate::store::backend::RunStore) in a SQLite file, shared by every task of a
/// process and by every process on the machine that opens the same file.
///
/// ```
/// use std::sync::Arc;
///
/// use phaseo_agent::store::{RunFilter, RunStore, SqliteStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::StoreError> {
/// let path = std::env::temp_dir().join(format!("phaseo-doc-{}.db", std::process::id()));
/// let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open(&path).await?);
/// let runs = store.runs(&RunFilter::default()).await?;
/// assert!(runs.items.is_empty());
/// # drop(store);
/// # for suffix in ["", "-wal", "-shm"] {
/// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
/// # }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Writers of this process queue here, so that they wait without polling the file's lock.
    writer: Mutex<()>,
    /// What a read takes from the file at most.
    limits: ReadLimits,
    /// Rung when a run becomes ready, for this process's workers.
    bell: Bell,
}

/// How to open a [`SqliteStore`]: from [`SqliteStore::builder`].
///
/// ```
/// use std::time::{Duration, Instant};
///
/// use phaseo_agent::store::SqliteStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::StoreError> {
/// let path = std::env::temp_dir().join(format!("phaseo-doc-builder-{}.db", std::process::id()));
/// let store = SqliteStore::builder(&path)
///     .pool_size(2)
///     .busy_timeout(Duration::from_secs(10))
///     .power_safe(true)
///     .max_row_bytes(4 * 1024 * 1024)
///     .max_load_bytes(32 * 1024 * 1024)
///     .open()
///     .await?;
/// # store.close().await;
/// # for suffix in ["", "-wal", "-shm"] {
/// #     let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
/// # }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteStoreBuilder {
    path: PathBuf,
    pool_size: u32,
    busy_timeout: Duration,
    power_safe: bool,
    limits: ReadLimits,
}

impl SqliteStoreBuilder {
    /// Whether a committed entry must survive a power cut or an operating-system crash, not
    /// only a crash of the process (`true` by default: SQLite's `synchronous = FULL`, a flush to
    /// disk per entry).
    ///
    /// `false` (`synchronous = NORMAL`) flushes at WAL checkpoints only: each entry costs a write
    /// to the file rather than a flush, and a process killed at any point still loses nothing;
    /// but a power cut may lose the last entries, and a recovery could then run again a call whose
    /// start had been recorded. Choose it only where the machine's loss is not a concern (a
    /// laptop, a test), or where every tool is idempotent.
    pub fn power_safe(mut self, power_safe: bool) -> Self {
        self.power_safe = power_safe;
        self
    }

    /// How many connections the store keeps open (4 by default, at least 1). Reads run on as
    /// many at once; writes take turns whatever the size.
    pub fn pool_size(mut self, connections: u32) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// How long a write waits for another process's write to finish before it fails with
    /// [`StoreError::Database`] (5 seconds by default).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Opens the file (creating it if it is missing) and brings its schema up to date, in one
    /// transaction: [`StoreError::SchemaTooNew`] if a newer phaseo-agent migrated it.
    pub async fn open(self) -> Result<SqliteStore, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(&self.path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(if self.power_safe {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            })
            .foreign_keys(true)
            .busy_timeout(self.busy_timeout);
        // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers "database is
        // locked" at once (without waiting for the busy timeout) when another connection switches
        // it at the same moment: two processes opening a new file together. Try again, as long
        // as the busy timeout.
        let started = Instant::now();
        let pool = loop {
            let connected = SqlitePoolOptions::new()
                .max_connections(self.pool_size)
                .connect_with(options.clone())
                .await;
            match connected {
                Err(e) if is_busy(&e) && started.elapsed() < self.busy_timeout => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => break other.map_err(database)?,
            }
        };
        let store = SqliteStore {
            pool,
            writer: Mutex::new(()),
            limits: self.limits,
            bell: Bell::default(),
        };
        let (_guard, mut tx) = store.begin_write().await?;
        migrate::run::<Sqlite>(&mut tx, &migrate::migrator(MIGRATIONS)).await?;
        tx.commit().await.map_err(database)?;
        drop(_guard);
        Ok(store)
    }
}

impl_read_limits!(SqliteStoreBuilder);

/// Whether SQLite answered `SQLITE_BUSY` (any of its extended codes).
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

impl SqliteStore {
    /// Opens the store in the file at `path` with the default settings (see
    /// [`SqliteStore::builder`]), creating the file if it is missing.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::builder(path).open().await
    }

    /// Settings for opening the store in the file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> SqliteStoreBuilder {
        SqliteStoreBuilder {
            path: path.as_ref().to_path_buf(),
            pool_size: 4,
            busy_timeout: Duration::from_secs(5),
            power_safe: true,
            limits: ReadLimits::default(),
        }
    }

    /// Closes every connection, waiting for the operations under way to finish (the file's WAL is
    /// checkpointed when the last connection closes). Later operations fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Statements stay prepared on their connection (no pooler between).
    fn persistent(&self) -> bool {
        true
    }

    async fn begin_write(
        &self,
    ) -> Result<(MutexGuard<'_, ()>, Transaction<'static, Sqlite>), StoreError> {
        let guard = self.writer.lock().await;
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(database)?;
        Ok((guard, tx))
    }

    async fn begin_read(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool.begin().await.map_err(database)
    }
}

/// Whether a queued run may be taken at `$now`: ready and not held by a live lease, or running
/// under a lease that expired.
const CLAIMABLE: &str = "queued = 1 AND (lease_until_ms IS NULL OR lease_until_ms <= $now) \
     AND (status = 'ready' OR (status = 'running' AND lease_until_ms IS NOT NULL))";

/// Since when a claimable run has waited.
const WAITING_SINCE: &str =
    "CASE WHEN status = 'ready' THEN COALESCE(ready_ms, $now) ELSE lease_until_ms END";

/// The agents of a claim, as the JSON array `json_each` reads.
fn agents_json(agents: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(agents).map_err(|e| StoreError::Database(e.to_string()))
}

/// The SQLite store's queue: one worker process (the file's write lock serialises claims, and
/// wake-ups are heard only by workers of this store value, so share one `SqliteStore` in the
/// process; another process's enqueue is seen at the worker's next look, see
/// [`Worker::idle_check`](crate::worker::Worker::idle_check)).
impl SqliteStore {
    async fn enqueue_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, true, None).await
    }

    async fn claim_runs(&self, request: &ClaimRequest) -> Result<Claimed, StoreError> {
        use sqlx::Row as _;
        let agents = agents_json(&request.agents)?;
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let select = format!(
            "SELECT run_id, agent_id, status, version, {since} AS since FROM phaseo_runs \
             WHERE agent_id IN (SELECT value FROM json_each($agents)) AND {CLAIMABLE} \
             ORDER BY since, run_id LIMIT $limit",
            since = WAITING_SINCE,
        )
        .replace("$now", "$1")
        .replace("$agents", "$2")
        .replace("$limit", "$3");
        let rows = sqlx::query(sqlx::AssertSqlSafe(select))
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
            let token: i64 = sqlx::query(
                "UPDATE phaseo_runs SET lease_token = lease_token + 1, lease_owner = $1, \
                 lease_until_ms = $2 WHERE run_id = $3 RETURNING lease_token",
            )
            .bind(&request.worker)
            .bind(until)
            .bind(&run_id)
            .fetch_one(&mut *tx)
            .await
            .and_then(|r| r.try_get(0))
            .map_err(database)?;
            leases.push(Lease {
                agent_id: row.try_get("agent_id").map_err(database)?,
                token: crate::store::sql::version(&run_id, 0, "the lease's token", token)?,
                status: crate::store::sql::status(&run_id, 0, &status)?,
                version: crate::store::sql::version(&run_id, 0, "the run's version", version)?,
                waited_ms: u64::try_from(now - since).unwrap_or(0),
                run_id,
            });
        }
        let next: Option<i64> = sqlx::query(
            "SELECT min(lease_until_ms) FROM phaseo_runs WHERE queued = 1 \
             AND agent_id IN (SELECT value FROM json_each($1)) AND lease_until_ms > $2",
        )
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

    async fn renew_lease(&self, lease: &Lease, duration_ms: u64) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let done = sqlx::query(
            "UPDATE phaseo_runs SET lease_until_ms = $1 \
             WHERE run_id = $2 AND lease_token = $3 AND lease_until_ms > $4",
        )
        .bind(now.saturating_add(lease_ms(duration_ms)))
        .bind(&lease.run_id)
        .bind(crate::store::sql::int(lease.token))
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

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let done = sqlx::query(
            "UPDATE phaseo_runs SET lease_until_ms = $1 \
             WHERE run_id = $2 AND lease_token = $3 AND lease_until_ms > $1",
        )
        .bind(now)
        .bind(&lease.run_id)
        .bind(crate::store::sql::int(lease.token))
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
    async fn acquire_lease(&self, run_id: &str, lease: &LeaseRequest) -> Result<Lease, StoreError> {
        use sqlx::Row as _;
        let (_guard, mut tx) = self.begin_write().await?;
        let now = clock_ms();
        let row = sqlx::query(
            "SELECT agent_id, status, version, lease_owner, lease_until_ms FROM phaseo_runs \
             WHERE run_id = $1",
        )
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
        let token: i64 = sqlx::query(
            "UPDATE phaseo_runs SET lease_token = lease_token + 1, lease_owner = $1, \
             lease_until_ms = $2 WHERE run_id = $3 RETURNING lease_token",
        )
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
            token: crate::store::sql::version(run_id, 0, "the lease's token", token)?,
            status: crate::store::sql::status(run_id, 0, &status)?,
            version: crate::store::sql::version(run_id, 0, "the run's version", version)?,
            waited_ms: 0,
        })
    }

    /// Runs of the application's own processes whose lease expired, or that never had one.
    async fn list_abandoned(&self, limit: usize) -> Result<Vec<AbandonedRun>, StoreError> {
        let mut tx = self.begin_read().await?;
        let rows = sqlx::query(
            "SELECT run_id, agent_id, lease_owner, lease_until_ms, updated_ms FROM phaseo_runs \
             WHERE status = 'running' AND queued = 0 \
             AND (lease_until_ms IS NULL OR lease_until_ms <= $1) \
             ORDER BY updated_ms, run_id LIMIT $2",
        )
        .bind(clock_ms())
        .bind(i64::try_from(limit.min(10_000)).unwrap_or(10_000))
        .fetch_all(&mut *tx)
        .await
        .map_err(database)?;
        tx.commit().await.map_err(database)?;
        rows.iter().map(crate::store::sql::abandoned).collect()
    }

    async fn listen(&self) -> Result<Wakeups, StoreError> {
        Ok(self.bell.wakeups())
    }

    async fn count_queue(&self) -> Result<Vec<QueueCounts>, StoreError> {
        let mut tx = self.begin_read().await?;
        let now = clock_ms();
        let sql = format!(
            "SELECT agent_id, \
             sum(CASE WHEN {CLAIMABLE} THEN 1 ELSE 0 END) AS ready, \
             sum(CASE WHEN status IN ('ready', 'running') AND NOT ({CLAIMABLE}) THEN 1 ELSE 0 END) \
                 AS running, \
             sum(status = 'paused') AS paused, sum(status = 'in_doubt') AS in_doubt, \
             sum(status = 'failed') AS failed, sum(status = 'completed') AS completed, \
             max(CASE WHEN {CLAIMABLE} THEN $now - {WAITING_SINCE} END) AS oldest \
             FROM phaseo_runs GROUP BY agent_id ORDER BY agent_id"
        )
        .replace("$now", "$1");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(database)?;
        tx.commit().await.map_err(database)?;
        rows.iter().map(crate::store::sql::queue_counts).collect()
    }
}

impl_run_store!(SqliteStore, Sqlite);
impl_row_by_row!(SqliteStore, Sqlite);
