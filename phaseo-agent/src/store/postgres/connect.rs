//! A run store in PostgreSQL (feature `postgres`): [`PostgresStore`].
//!
//! Each of `create`, `append` and `load` is one statement, so one round trip once the statement
//! is prepared on the connection: `create` inserts the run's row, its first journal row and its
//! pending calls with data-modifying CTEs (the pending calls as arrays, through `unnest`);
//! `append` updates the run's row only where the version is the one the writer read, and the
//! journal rows, pending calls and audit rows go in from that update's `RETURNING`, so nothing is
//! written when the version moved on; `load` reads the run's row with its journal after the
//! snapshot and its pending calls as arrays (`array_agg`). A single statement is atomic and sees
//! one snapshot by itself, so there is no `BEGIN`/`COMMIT` around it.
//!
//! The version check: the update locks the run's row, so a second writer waits for the first and
//! then finds the new version (0 rows: [`StoreError::Conflict`], after one more query for the
//! version). Audit ids come from a sequence, given when a row is inserted, not when it commits:
//! an append with decisions takes a transaction-scoped advisory lock (after the run's row) before
//! its first audit row, held until it commits, so a reader paging the log by id never skips a row
//! that commits late. Decisions are made by people, so the turns are short and rare.
//!
//! Statements are prepared and planned once per connection and kept (sqlx's statement cache,
//! `plan_cache_mode = force_generic_plan` and `enable_seqscan = off` set on the connection), unless
//! [`PostgresStoreBuilder::statement_cache`] turns that off for a transaction-mode pooler: then
//! every statement is sent unnamed and every operation is one transaction, so a server connection
//! handed to another client holds nothing of ours. The `extra_float_digits` startup parameter,
//! which PgBouncer refuses unless told to ignore it, is not sent (the store reads no floats).
//! Listings run at `REPEATABLE READ, READ ONLY`. Bodies are `text`, not `jsonb`, so they come back
//! byte for byte and their checksums hold.

use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use crate::error::StoreError;
use crate::store::backend::{PendingRow, ReadLimits};
use crate::store::migrate;
use crate::store::postgres::statements::{GENERIC_PLANS, MIGRATION_LOCK, MIGRATIONS};
use crate::store::sql::checks::{database, int};

/// A pooled connection idle for longer than this is pinged before it is used (a connection in
/// steady use is not: that would cost a round trip per operation).
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// A statement with its parameters bound so far.
pub(crate) type Query = sqlx::query::Query<'static, Postgres, PgArguments>;

/// Pending calls as one array per column, for `unnest` (the run's id and agent come from the
/// run's row).
#[derive(Default)]
pub(crate) struct PendingColumns {
    call_id: Vec<String>,
    tool: Vec<String>,
    kind: Vec<String>,
    arguments: Vec<String>,
    digest: Vec<String>,
    since_ms: Vec<i64>,
    version: Vec<i64>,
    decision: Vec<Option<String>>,
    decided_by: Vec<Option<String>>,
}

impl PendingColumns {
    pub(crate) fn new(rows: Vec<PendingRow>) -> Self {
        let mut columns = PendingColumns::default();
        for p in rows {
            columns.call_id.push(p.call_id);
            columns.tool.push(p.tool);
            columns.kind.push(p.kind);
            columns.arguments.push(p.arguments);
            columns.digest.push(p.digest);
            columns.since_ms.push(p.since_ms);
            columns.version.push(int(p.version));
            columns.decision.push(p.decision);
            columns.decided_by.push(p.decided_by);
        }
        columns
    }

    /// Binds the nine arrays, in the order of the statements' `unnest`.
    pub(crate) fn bind(self, query: Query) -> Query {
        query
            .bind(self.call_id)
            .bind(self.tool)
            .bind(self.kind)
            .bind(self.arguments)
            .bind(self.digest)
            .bind(self.since_ms)
            .bind(self.version)
            .bind(self.decision)
            .bind(self.decided_by)
    }
}

/// Where an operation's statements run: straight on a pooled connection (each statement its own
/// transaction), or in one transaction (statement cache off: a transaction-mode pooler keeps one
/// server connection for a transaction, and an unnamed statement is parsed and executed in two
/// round trips that must reach the same one).
pub(crate) enum Session {
    Plain(PoolConnection<Postgres>),
    Transaction(Transaction<'static, Postgres>),
}

impl Session {
    pub(crate) fn conn(&mut self) -> &mut PgConnection {
        match self {
            Session::Plain(conn) => conn,
            Session::Transaction(tx) => tx,
        }
    }

    /// Ends the operation: commits its transaction, if any.
    pub(crate) async fn finish(self) -> Result<(), StoreError> {
        match self {
            Session::Plain(_) => Ok(()),
            Session::Transaction(tx) => tx.commit().await.map_err(database),
        }
    }
}

/// A [`RunStore`](crate::store::backend::RunStore) in a PostgreSQL database, shared by every task
/// and every process that connects to it.
///
/// Statements stay prepared on their connection by default. Behind a transaction-mode pooler
/// (PgBouncer before 1.21, or later with `max_prepared_statements = 0`; Supavisor, RDS Proxy in
/// the same mode), build it with [`statement_cache(false)`](PostgresStoreBuilder::statement_cache):
/// a statement prepared on one server connection may otherwise be executed on another.
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
    pub(crate) pool: PgPool,
    pub(crate) statement_cache: bool,
    /// What a read takes from the database at most.
    pub(crate) limits: ReadLimits,
}

/// How to connect a [`PostgresStore`]: from [`PostgresStore::builder`].
///
/// ```no_run
/// use phaseo_agent::store::PostgresStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::StoreError> {
/// // Through PgBouncer in transaction mode: no prepared statement outlives its transaction.
/// let store = PostgresStore::builder("postgres://agent@127.0.0.1:6432/runs")
///     .pool_size(4)
///     .statement_cache(false)
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    url: String,
    pool_size: u32,
    pub(crate) statement_cache: bool,
    limits: ReadLimits,
}

impl PostgresStoreBuilder {
    /// How many connections the store keeps open at most (10 by default, at least 1).
    pub fn pool_size(mut self, connections: u32) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// Whether statements stay prepared on their connection (on by default): each one is then
    /// parsed and planned once per connection (the store sets `plan_cache_mode` to
    /// `force_generic_plan` on its connections, and `enable_seqscan` off, so that a plan made
    /// while the tables were small still finds a run by its key once they are large), and
    /// `create`, `append` and `load` each cost one round trip.
    ///
    /// Turn it off behind a pooler in transaction mode (PgBouncer before 1.21, or with
    /// `max_prepared_statements = 0`), which hands a server connection to another client after
    /// each transaction: every statement is then sent unnamed, inside the operation's own
    /// transaction, as the pooler needs (four round trips an operation instead of one).
    pub fn statement_cache(mut self, on: bool) -> Self {
        self.statement_cache = on;
        self
    }

    /// Connects and brings the schema up to date, in one transaction that holds a
    /// transaction-scoped advisory lock: [`StoreError::SchemaTooNew`] if a newer phaseo-agent
    /// migrated it.
    pub async fn connect(self) -> Result<PostgresStore, StoreError> {
        let statement_cache = self.statement_cache;
        let mut options: PgConnectOptions = self.url.parse().map_err(database)?;
        options = options.extra_float_digits(None);
        if !self.statement_cache {
            options = options.statement_cache_capacity(0);
        }
        let pool = PgPoolOptions::new()
            .max_connections(self.pool_size)
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > PING_AFTER_IDLE {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if statement_cache {
                        sqlx::Executor::execute(&mut *conn, GENERIC_PLANS).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(database)?;
        let store = PostgresStore {
            pool,
            statement_cache: self.statement_cache,

            limits: self.limits,
        };
        let mut tx = store.pool.begin().await.map_err(database)?;
        sqlx::query(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .map_err(database)?;
        migrate::run::<Postgres>(&mut tx, &migrate::migrator(MIGRATIONS)).await?;
        tx.commit().await.map_err(database)?;
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
            statement_cache: true,
            limits: ReadLimits::default(),
        }
    }

    /// Closes every connection, waiting for the operations under way to finish. Later operations
    /// fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Whether statements stay prepared on their connection.
    pub(crate) fn persistent(&self) -> bool {
        self.statement_cache
    }

    pub(crate) async fn begin_read(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(database)
    }

    /// Where the statements of one operation run (see [`Session`]).
    pub(crate) async fn session(&self) -> Result<Session, StoreError> {
        Ok(if self.statement_cache {
            Session::Plain(self.pool.acquire().await.map_err(database)?)
        } else {
            Session::Transaction(self.pool.begin().await.map_err(database)?)
        })
    }
}
