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
use crate::store::backend::{Bell, ReadLimits};
use crate::store::migrate::{self, Files};
use crate::store::sql::checks::database;

/// The schema: `phaseo-agent/migrations/sqlite/`, one file per version, applied in order.
const MIGRATIONS: Files = &[
    (
        1,
        "runs",
        include_str!("../../../migrations/sqlite/0001_runs.sql"),
    ),
    (
        2,
        "queue",
        include_str!("../../../migrations/sqlite/0002_queue.sql"),
    ),
    (
        3,
        "version from journal",
        include_str!("../../../migrations/sqlite/0003_version_from_journal.sql"),
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
    pub(crate) pool: SqlitePool,
    /// Writers of this process queue here, so that they wait without polling the file's lock.
    pub(crate) writer: Mutex<()>,
    /// What a read takes from the file at most.
    pub(crate) limits: ReadLimits,
    /// Rung when a run becomes ready, for this process's workers.
    pub(crate) bell: Bell,
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
            // A connection is a file in this process: nothing can go stale between uses, and
            // the check sqlx makes before lending one would cost a round trip to its thread.
            let connected = SqlitePoolOptions::new()
                .max_connections(self.pool_size)
                .test_before_acquire(false)
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

    /// The most bytes one stored row may hold for the store to read it: a journal entry's or
    /// snapshot's body, a pending call's arguments and decision, an audit row's decision (16 MiB
    /// by default, [`ReadLimits::DEFAULT_MAX_ROW_BYTES`]). A larger row is not sent by the
    /// database; reading it fails with [`StoreError::TooLarge`] for its run only.
    pub fn max_row_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_row_bytes = bytes;
        self
    }

    /// The most bytes one `load` may read: the snapshot, the entries after it and the pending
    /// calls together (64 MiB by default, [`ReadLimits::DEFAULT_MAX_LOAD_BYTES`]). A run over it
    /// fails to load with [`StoreError::TooLarge`]; the other runs still load.
    pub fn max_load_bytes(mut self, bytes: u64) -> Self {
        self.limits.max_load_bytes = bytes;
        self
    }
}

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
    pub(crate) fn persistent(&self) -> bool {
        true
    }

    pub(crate) async fn begin_write(
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

    pub(crate) async fn begin_read(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool.begin().await.map_err(database)
    }
}
