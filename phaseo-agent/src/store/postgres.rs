//! A run store in PostgreSQL (feature `postgres`): [`PostgresStore`].
//!
//! It works behind a transaction-mode pooler (PgBouncer, Supavisor, RDS Proxy) as well as on a
//! server directly: every operation, reads included, is one transaction; nothing is kept in the
//! session (no `SET`, no session advisory lock, no temporary table); and no statement stays
//! prepared on a connection: each is sent as the unnamed statement of its transaction
//! (sqlx's `persistent(false)`, with the connection's statement cache off), so a server connection
//! handed to another client holds nothing of ours. The `extra_float_digits` startup parameter,
//! which PgBouncer refuses unless told to ignore it, is not sent (the store reads no floats).
//!
//! A write runs at `READ COMMITTED`: its first statement updates the run's row only where the
//! version is the one the writer read, which locks the row, so a second writer waits for the
//! first and then finds the new version (0 rows: [`StoreError::Conflict`]). A read runs at
//! `REPEATABLE READ, READ ONLY`: the run's row, journal and pending calls from one snapshot.
//! Bodies are `text`, not `jsonb`, so they come back byte for byte and their checksums hold.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use crate::error::StoreError;
use crate::store::sql::{Migrations, database, impl_run_store};

/// The schema, one migration per version, applied in order.
const MIGRATIONS: Migrations = &[(
    1,
    r#"
CREATE TABLE phaseo_runs (
    run_id text COLLATE "C" PRIMARY KEY,
    agent_id text COLLATE "C" NOT NULL,
    status text NOT NULL,
    version bigint NOT NULL,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    snapshot_version bigint,
    snapshot_format bigint,
    snapshot_body text,
    snapshot_digest text
);
CREATE INDEX phaseo_runs_by_agent ON phaseo_runs (agent_id, status, updated_ms, run_id);
CREATE INDEX phaseo_runs_by_status ON phaseo_runs (status, updated_ms, run_id);
CREATE INDEX phaseo_runs_by_updated ON phaseo_runs (updated_ms, run_id);
CREATE TABLE phaseo_journal (
    run_id text COLLATE "C" NOT NULL REFERENCES phaseo_runs (run_id) ON DELETE CASCADE,
    version bigint NOT NULL,
    kind text NOT NULL,
    format bigint NOT NULL,
    body text NOT NULL,
    digest text NOT NULL,
    PRIMARY KEY (run_id, version)
);
CREATE TABLE phaseo_pending (
    run_id text COLLATE "C" NOT NULL REFERENCES phaseo_runs (run_id) ON DELETE CASCADE,
    call_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    agent_id text COLLATE "C" NOT NULL,
    tool text NOT NULL,
    kind text NOT NULL,
    arguments text NOT NULL,
    digest text NOT NULL,
    since_ms bigint NOT NULL,
    version bigint NOT NULL,
    decision text,
    decided_by text,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX phaseo_pending_newest ON phaseo_pending (since_ms, run_id, call_id);
CREATE INDEX phaseo_pending_by_agent ON phaseo_pending (agent_id, since_ms, run_id, call_id);
CREATE TABLE phaseo_audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id text COLLATE "C" NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    decision text NOT NULL,
    decided_by text NOT NULL,
    at_ms bigint NOT NULL,
    digest text NOT NULL,
    version bigint NOT NULL
);
CREATE INDEX phaseo_audit_by_run ON phaseo_audit (run_id, id);
"#,
)];

/// Taken (for the transaction) by whoever migrates, so two processes opening a fresh database at
/// once apply the schema once. The key is "phaseo" in ASCII, then 1 in the last
/// two bytes (the audit log's lock ends in 2).
const MIGRATION_LOCK: &str = "SELECT pg_advisory_xact_lock(8099831078076743681)";

/// A [`RunStore`](crate::store::backend::RunStore) in a PostgreSQL database, shared by every task
/// and every process that connects to it.
///
/// ```no_run
/// use std::sync::Arc;
///
/// use phaseo_agent::store::{PostgresStore, RunStore};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::StoreError> {
/// let store: Arc<dyn RunStore> =
///     Arc::new(PostgresStore::connect("postgres://agent@127.0.0.1:5432/runs").await?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

/// How to connect a [`PostgresStore`]: from [`PostgresStore::builder`].
///
/// ```no_run
/// use phaseo_agent::store::PostgresStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::StoreError> {
/// let store = PostgresStore::builder("postgres://agent@127.0.0.1:6432/runs")
///     .pool_size(4)
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    url: String,
    pool_size: u32,
}

impl PostgresStoreBuilder {
    /// How many connections the store keeps open at most (10 by default, at least 1).
    pub fn pool_size(mut self, connections: u32) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// Connects and brings the schema up to date, in one transaction that holds a
    /// transaction-scoped advisory lock: [`StoreError::SchemaTooNew`] if a newer phaseo-agent
    /// migrated it.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let options: PgConnectOptions = self.url.parse().map_err(database)?;
        let options = options.statement_cache_capacity(0).extra_float_digits(None);
        let pool = PgPoolOptions::new()
            .max_connections(self.pool_size)
            .connect_with(options)
            .await
            .map_err(database)?;
        let store = PostgresStore { pool };
        store.migrate(MIGRATIONS, Some(MIGRATION_LOCK)).await?;
        Ok(store)
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`) with
    /// the default settings (see [`PostgresStore::builder`]).
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::builder(url).connect().await
    }

    /// Settings for connecting to the database at `url`.
    pub fn builder(url: &str) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            url: url.to_owned(),
            pool_size: 10,
        }
    }

    /// Closes every connection, waiting for the operations under way to finish. Later operations
    /// fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// No statement stays prepared on a connection (a pooler may hand it to another client).
    const PERSISTENT: bool = false;

    /// Audit ids come from a sequence, given when a row is inserted, not when it commits: writers
    /// of decisions take turns (until they commit), so a reader paging the log by id never skips
    /// a row that commits late. Decisions are made by people, so the turns are short and rare.
    const AUDIT_LOCK: Option<&'static str> =
        Some("SELECT pg_advisory_xact_lock(8099831078076743682)");

    async fn begin_write(&self) -> Result<((), Transaction<'static, Postgres>), StoreError> {
        Ok(((), self.pool.begin().await.map_err(database)?))
    }

    async fn begin_read(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(database)
    }
}

impl_run_store!(PostgresStore, Postgres);
