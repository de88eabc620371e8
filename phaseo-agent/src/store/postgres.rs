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

use sqlx::Row as _;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions, PgRow};
use sqlx::{PgPool, Postgres, Transaction};

use crate::error::StoreError;
use crate::store::backend::{
    AbandonedRun, Append, ClaimRequest, Claimed, Lease, LeaseRequest, LoadedRun, NewRun,
    PendingRow, QueueCounts, ReadLimits, StoredStatus, Wakeups, hands_over, lease_ms,
};
use crate::store::migrate::{self, Files};
use crate::store::sql::{
    Part, RawJournal, RawPending, check_append, check_new, check_sizes, corrupt, database,
    impl_read_limits, impl_run_store, int, is_unique_violation, journal,
};

/// The schema: `phaseo-agent/migrations/postgres/`, one file per version, applied in order.
const MIGRATIONS: Files = &[
    (
        1,
        "runs",
        include_str!("../../migrations/postgres/0001_runs.sql"),
    ),
    (
        2,
        "row estimates",
        include_str!("../../migrations/postgres/0002_row_estimates.sql"),
    ),
    (
        3,
        "queue",
        include_str!("../../migrations/postgres/0003_queue.sql"),
    ),
];

/// The channel a run that becomes ready is announced on (its agent's id as the payload).
const CHANNEL: &str = "phaseo_ready";

/// The database's clock, in milliseconds since the Unix epoch: leases are measured by it alone.
macro_rules! now_ms {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}

/// Whether a queued run may be taken at `c.now`: ready and not held by a live lease, or running
/// under a lease that expired.
macro_rules! claimable {
    () => {
        "(queued AND (lease_until_ms IS NULL OR lease_until_ms <= c.now)
        AND (status = 'ready' OR (status = 'running' AND lease_until_ms IS NOT NULL)))"
    };
}

/// Since when a claimable run has waited (`c.now` in a `FROM` with `c`).
macro_rules! waiting_since {
    () => {
        "CASE WHEN status = 'ready' THEN COALESCE(ready_ms, c.now) ELSE lease_until_ms END"
    };
}

/// `claim`: locks up to `$2` claimable runs of the agents `$1`, oldest ready first, skipping rows
/// another transaction holds, and gives each a lease (`$3` the worker, `$4` its length); then the
/// time until the earliest live lease of those agents expires, on a row of its own.
const CLAIM: &str = concat!(
    "\
WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), picked AS (
    SELECT r.run_id, ",
    waiting_since!(),
    " AS since
    FROM phaseo_runs r, c
    WHERE r.agent_id = ANY ($1::text[]) AND r.status IN ('ready', 'running') AND ",
    claimable!(),
    "
    ORDER BY since, r.run_id
    LIMIT $2
    FOR UPDATE OF r SKIP LOCKED
), taken AS (
    UPDATE phaseo_runs r SET lease_token = r.lease_token + 1, lease_owner = $3,
        lease_until_ms = c.now + $4
    FROM picked, c WHERE r.run_id = picked.run_id
    RETURNING r.run_id, r.agent_id, r.status, r.version, r.lease_token,
        c.now - picked.since AS waited, picked.since
)
SELECT run_id, agent_id, status, version, lease_token, waited, NULL::bigint AS next
FROM (SELECT * FROM taken ORDER BY since, run_id) t
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, min(r.lease_until_ms) - min(c.now)
FROM phaseo_runs r, c
WHERE r.queued AND r.agent_id = ANY ($1::text[]) AND r.lease_until_ms > c.now"
);

/// After a refused `append`: the run's version, and whether the lease `$2` still holds it.
const HELD: &str = concat!(
    "SELECT version, lease_token = $2::bigint AND lease_until_ms > ",
    now_ms!(),
    " AS held FROM phaseo_runs WHERE run_id = $1"
);

/// `acquire`: a lease on run `$1` for `$2`, lasting `$3` milliseconds, unless a live one holds
/// it; then, whatever happened, the run's holder and when its lease expires, for a refusal.
const ACQUIRE: &str = concat!(
    "\
WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), taken AS (
    UPDATE phaseo_runs r SET lease_token = r.lease_token + 1, lease_owner = $2,
        lease_until_ms = c.now + $3
    FROM c WHERE r.run_id = $1 AND (r.lease_until_ms IS NULL OR r.lease_until_ms <= c.now)
    RETURNING r.agent_id, r.status, r.version, r.lease_token
)
SELECT t.agent_id, t.status, t.version, t.lease_token, NULL::text AS owner, NULL::bigint AS left_ms
FROM taken t
UNION ALL
SELECT NULL, NULL, NULL, NULL, r.lease_owner, r.lease_until_ms - c.now
FROM phaseo_runs r, c WHERE r.run_id = $1 AND NOT EXISTS (SELECT 1 FROM taken)"
);

/// `abandoned`: runs of the applications' own processes that are running under an expired lease,
/// or none, oldest first, at most `$1`.
const ABANDONED: &str = concat!(
    "SELECT run_id, agent_id, lease_owner, lease_until_ms, updated_ms FROM phaseo_runs \
     WHERE status = 'running' AND NOT queued AND (lease_until_ms IS NULL OR lease_until_ms <= ",
    now_ms!(),
    ") ORDER BY updated_ms, run_id LIMIT $1"
);

/// `renew`: the lease `$2` of run `$1`, while it lives, now lasts `$3` more milliseconds.
const RENEW: &str = concat!(
    "UPDATE phaseo_runs SET lease_until_ms = c.now + $3 FROM (SELECT ",
    now_ms!(),
    " AS now) c WHERE run_id = $1 AND lease_token = $2 AND lease_until_ms > c.now"
);

/// `release`: the lease `$2` of run `$1` ends now, and the run's agent is announced.
const RELEASE: &str = concat!(
    "WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), r AS (
    UPDATE phaseo_runs SET lease_until_ms = c.now FROM c
    WHERE run_id = $1 AND lease_token = $2 AND lease_until_ms > c.now RETURNING agent_id
)
SELECT pg_notify('phaseo_ready', agent_id) FROM r"
);

/// `queue_counts`: each agent's runs by state, and how long its oldest claimable run waited.
const COUNTS: &str = concat!(
    "WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now)
SELECT agent_id,
    count(*) FILTER (WHERE ",
    claimable!(),
    ") AS ready,
    count(*) FILTER (WHERE status IN ('ready', 'running') AND NOT ",
    claimable!(),
    ") AS running,
    count(*) FILTER (WHERE status = 'paused') AS paused,
    count(*) FILTER (WHERE status = 'in_doubt') AS in_doubt,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    count(*) FILTER (WHERE status = 'completed') AS completed,
    max(c.now - ",
    waiting_since!(),
    ") FILTER (WHERE ",
    claimable!(),
    ") AS oldest
FROM phaseo_runs, c
GROUP BY agent_id
ORDER BY agent_id"
);

/// Taken (for the transaction) by whoever migrates, so two processes opening a fresh database at
/// once apply the schema once. The key is "phaseo" in ASCII, then 1 in the last
/// two bytes (the audit log's lock ends in 2).
const MIGRATION_LOCK: &str = "SELECT pg_advisory_xact_lock(8099831078076743681)";

/// The key of the transaction-scoped advisory lock an append with decisions takes before its
/// first audit row: "phaseo" in ASCII, then 2 in the last two bytes.
macro_rules! audit_lock_key {
    () => {
        "8099831078076743682"
    };
}

/// Sent once on each new connection when statements stay prepared on it: the server then plans
/// each statement once per connection, not at every execution. Its own choice, a plan made for
/// the parameters of each call, spent longer planning `load` and `append` than running them
/// (0.32 ms planning and 0.27 ms running a `load`, in `pg_stat_statements`), and every
/// statement here finds its rows by key, so one generic plan serves every call.
///
/// A plan kept for the connection's life must not be one made for an empty table: planned while
/// `phaseo_runs` held one row, `load` read the whole table to find a run (a sequential scan is
/// cheapest on one page), and went on doing so as the table grew. Every statement of the store
/// has an index to use, so sequential scans are priced out on its connections.
const GENERIC_PLANS: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), \
     set_config('enable_seqscan', 'off', false)";

/// The constraint a second run with the same id violates.
const RUN_KEY: &str = "phaseo_runs_pkey";

/// A pooled connection idle for longer than this is pinged before it is used (a connection in
/// steady use is not: that would cost a round trip per operation).
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pending calls' insert of `create` and `append`: the run's id and agent from the CTE `run`
/// (the run's row as written), the calls' columns as the arrays `$10` to `$18`, in order.
macro_rules! insert_pending {
    () => {
        "INSERT INTO phaseo_pending (run_id, call_id, seq, agent_id, tool, kind, arguments, digest,
        since_ms, version, decision, decided_by)
    SELECT run.run_id, p.call_id, p.seq - 1, run.agent_id, p.tool, p.kind, p.arguments, p.digest,
        p.since_ms, p.version, p.decision, p.decided_by
    FROM run, unnest($10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
        $15::bigint[], $16::bigint[], $17::text[], $18::text[])
        WITH ORDINALITY AS p (call_id, tool, kind, arguments, digest, since_ms, version, decision,
        decided_by, seq)"
    };
}

/// `create`: the run's row, then its first journal row and its pending calls (`$10` to `$18`)
/// from the inserted row. A queued run (`$19`) is stored ready since now and announced; the
/// notification goes out when the statement commits.
const CREATE: &str = concat!(
    "\
WITH run AS (
    INSERT INTO phaseo_runs (run_id, agent_id, status, version, created_ms, updated_ms, queued,
        ready_ms, lease_token, lease_owner, lease_until_ms)
    VALUES ($1, $2, $3, $4, $5, $5, $19, CASE WHEN $19 THEN ",
    now_ms!(),
    " END, CASE WHEN $20::text IS NULL THEN 0 ELSE 1 END, $20, CASE WHEN $20::text IS NOT NULL THEN ",
    now_ms!(),
    " + $21::bigint END) RETURNING run_id, agent_id, queued
), notified AS (
    SELECT pg_notify('phaseo_ready', agent_id) FROM run WHERE queued
), journal AS (
    INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest)
    SELECT run_id, $4, $6, $7, $8, $9 FROM run
), pending AS (
    ",
    insert_pending!(),
    "
)
SELECT count(*) FROM notified"
);

/// `append`: the run's row where its version is `$2` (and, for a worker's write, where its lease
/// `$33` lives by the database's clock; a queued run waiting on calls all decided, `$32`, is
/// stored ready and announced), then, only if it was, the pending calls
/// (replaced if `$19`: `$10` to `$18`, those no longer listed deleted, the others upserted, as
/// one statement's CTEs cannot delete and insert the same key), the journal rows (`$20` to `$24`)
/// and the audit rows (`$25` to `$31`, after the audit lock). Returns how many runs it updated:
/// 0 or 1.
const APPEND: &str = concat!(
    "\
WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), run AS (
    UPDATE phaseo_runs SET version = $3,
        status = CASE WHEN queued AND $32 THEN 'ready' ELSE $4 END, updated_ms = $5,
        ready_ms = CASE WHEN queued AND $32 THEN c.now END,
        lease_until_ms = CASE WHEN $33::bigint IS NOT NULL AND $4 = 'running'
            AND NOT (queued AND $32) THEN lease_until_ms END,
        snapshot_version = COALESCE($6, snapshot_version),
        snapshot_format = COALESCE($7, snapshot_format),
        snapshot_body = COALESCE($8, snapshot_body),
        snapshot_digest = COALESCE($9, snapshot_digest)
    FROM c
    WHERE run_id = $1 AND version = $2
        AND ($33::bigint IS NULL OR (lease_token = $33 AND lease_until_ms > c.now))
    RETURNING run_id, agent_id, status
), notified AS (
    SELECT pg_notify('phaseo_ready', agent_id) FROM run WHERE status = 'ready'
), gone AS (
    DELETE FROM phaseo_pending
    WHERE $19 AND run_id = $1 AND EXISTS (SELECT FROM run) AND call_id <> ALL ($10::text[])
), pending AS (
    ",
    insert_pending!(),
    "
    ON CONFLICT (run_id, call_id) DO UPDATE SET seq = EXCLUDED.seq, agent_id = EXCLUDED.agent_id,
        tool = EXCLUDED.tool, kind = EXCLUDED.kind, arguments = EXCLUDED.arguments,
        digest = EXCLUDED.digest, since_ms = EXCLUDED.since_ms, version = EXCLUDED.version,
        decision = EXCLUDED.decision, decided_by = EXCLUDED.decided_by
), journal AS (
    INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest)
    SELECT run.run_id, j.version, j.kind, j.format, j.body, j.digest
    FROM run, unnest($20::bigint[], $21::text[], $22::bigint[], $23::text[], $24::text[])
        AS j (version, kind, format, body, digest)
), turn AS (
    SELECT pg_advisory_xact_lock(",
    audit_lock_key!(),
    ") FROM run WHERE cardinality($25::text[]) > 0
), audit AS (
    INSERT INTO phaseo_audit (run_id, call_id, tool, decision, decided_by, at_ms, digest, version)
    SELECT $1, d.call_id, d.tool, d.decision, d.decided_by, d.at_ms, d.digest, d.version
    FROM turn, unnest($25::text[], $26::text[], $27::text[], $28::text[], $29::bigint[],
        $30::text[], $31::bigint[]) AS d (call_id, tool, decision, decided_by, at_ms, digest, version)
)
SELECT (SELECT count(*) FROM run) AS updated, (SELECT count(*) FROM notified) AS notified"
);

/// `load`: the run's row, its journal after its snapshot and its pending calls, each column of
/// those as an array (NULL when there are none), from one snapshot.
///
/// The subqueries name the run as `$1`, not as `r.run_id`: the planner then sees the id, as it
/// does in `WHERE r.run_id = $1`, and picks the primary key's index even when its statistics
/// still describe a table of a few long runs.
///
/// The texts are measured (`octet_length`, which reads a stored value's size without reading
/// the value) and sent only within the bounds: each row's text within `$2` bytes, all of them
/// within `$3` (`t.total`); the sizes are always sent, so the store can name what is too large.
const LOAD: &str = "\
SELECT r.agent_id, r.status, r.version, r.created_ms, r.updated_ms, r.snapshot_version,
    r.snapshot_format,
    CASE WHEN octet_length(r.snapshot_body) <= $2::bigint AND t.total <= $3::bigint
        THEN r.snapshot_body END AS snapshot_body,
    octet_length(r.snapshot_body)::bigint AS snapshot_bytes, r.snapshot_digest,
    j.j_version, j.j_kind, j.j_format,
    CASE WHEN t.total <= $3::bigint THEN j.j_body END AS j_body, j.j_bytes, j.j_digest,
    p.p_call_id, p.p_agent_id, p.p_tool, p.p_kind,
    CASE WHEN t.total <= $3::bigint THEN p.p_arguments END AS p_arguments, p.p_digest,
    p.p_since_ms, p.p_version,
    CASE WHEN t.total <= $3::bigint THEN p.p_decision END AS p_decision, p.p_decided_by,
    p.p_bytes
FROM phaseo_runs r
CROSS JOIN LATERAL (
    SELECT array_agg(version ORDER BY version) AS j_version,
        array_agg(kind ORDER BY version) AS j_kind,
        array_agg(format ORDER BY version) AS j_format,
        array_agg(CASE WHEN octet_length(body) <= $2::bigint THEN body END ORDER BY version)
            AS j_body,
        array_agg(octet_length(body)::bigint ORDER BY version) AS j_bytes,
        sum(octet_length(body)) AS j_total,
        array_agg(digest ORDER BY version) AS j_digest
    FROM phaseo_journal
    WHERE run_id = $1 AND version > COALESCE(r.snapshot_version, 0)
) j
CROSS JOIN LATERAL (
    SELECT array_agg(call_id ORDER BY seq) AS p_call_id,
        array_agg(agent_id ORDER BY seq) AS p_agent_id,
        array_agg(tool ORDER BY seq) AS p_tool,
        array_agg(kind ORDER BY seq) AS p_kind,
        array_agg(CASE WHEN s.bytes <= $2::bigint THEN arguments END ORDER BY seq)
            AS p_arguments,
        array_agg(digest ORDER BY seq) AS p_digest,
        array_agg(since_ms ORDER BY seq) AS p_since_ms,
        array_agg(version ORDER BY seq) AS p_version,
        array_agg(CASE WHEN s.bytes <= $2::bigint THEN decision END ORDER BY seq) AS p_decision,
        array_agg(decided_by ORDER BY seq) AS p_decided_by,
        array_agg(s.bytes ORDER BY seq) AS p_bytes,
        sum(s.bytes) AS p_total
    FROM phaseo_pending
    CROSS JOIN LATERAL (
        SELECT octet_length(arguments)::bigint + COALESCE(octet_length(decision), 0) AS bytes
    ) s
    WHERE run_id = $1
) p
CROSS JOIN LATERAL (
    SELECT COALESCE(octet_length(r.snapshot_body), 0) + COALESCE(j.j_total, 0)
        + COALESCE(p.p_total, 0) AS total
) t
WHERE r.run_id = $1";

/// A statement with its parameters bound so far.
type Query = sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments>;

/// Pending calls as one array per column, for `unnest` (the run's id and agent come from the
/// run's row).
#[derive(Default)]
struct PendingColumns {
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
    fn new(rows: Vec<PendingRow>) -> Self {
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
    fn bind(self, query: Query) -> Query {
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
enum Session {
    Plain(PoolConnection<Postgres>),
    Transaction(Transaction<'static, Postgres>),
}

impl Session {
    fn conn(&mut self) -> &mut PgConnection {
        match self {
            Session::Plain(conn) => conn,
            Session::Transaction(tx) => tx,
        }
    }

    /// Ends the operation: commits its transaction, if any.
    async fn finish(self) -> Result<(), StoreError> {
        match self {
            Session::Plain(_) => Ok(()),
            Session::Transaction(tx) => tx.commit().await.map_err(database),
        }
    }
}

/// An array column as read: empty when NULL (no rows).
fn column<T>(row: &PgRow, name: &str) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
    Vec<T>: for<'r> sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    Ok(row.try_get::<Option<Vec<T>>, _>(name)?.unwrap_or_default())
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
    pool: PgPool,
    statement_cache: bool,
    /// What a read takes from the database at most.
    limits: ReadLimits,
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
    statement_cache: bool,
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
}

impl_read_limits!(PostgresStoreBuilder);

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
    fn persistent(&self) -> bool {
        self.statement_cache
    }

    async fn begin_write(&self) -> Result<((), Transaction<'static, Postgres>), StoreError> {
        Ok(((), self.pool.begin().await.map_err(database)?))
    }

    async fn begin_read(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(database)
    }

    /// Where the statements of one operation run (see [`Session`]).
    async fn session(&self) -> Result<Session, StoreError> {
        Ok(if self.statement_cache {
            Session::Plain(self.pool.acquire().await.map_err(database)?)
        } else {
            Session::Transaction(self.pool.begin().await.map_err(database)?)
        })
    }

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, false, None).await
    }

    async fn enqueue_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.insert_run(run, true, None).await
    }

    /// Stores a new run held under a lease (token 1), in one statement.
    async fn create_held_run(
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
    async fn insert_run(
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
        let updated: i64 = query
            .fetch_one(session.conn())
            .await
            .and_then(|row| row.try_get("updated"))
            .map_err(database)?;
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
            let found = crate::store::sql::version(&run_id, 0, "the run's version", found)?;
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

    async fn load_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        let mut session = self.session().await?;
        let row = self
            .query(LOAD)
            .bind(run_id.to_owned())
            .bind(int(self.limits.max_row_bytes))
            .bind(int(self.limits.max_load_bytes))
            .fetch_optional(session.conn())
            .await
            .map_err(database)?
            .ok_or_else(|| StoreError::NotFound {
                run_id: run_id.to_owned(),
            })?;
        session.finish().await?;
        // What cannot be read names the run's version, read apart from the texts.
        let at = row
            .try_get::<i64, _>("version")
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(0);
        let bad = |e: sqlx::Error| corrupt(run_id, at, e.to_string());
        Self::check_load_sizes(run_id, &self.limits, &row).map_err(|e| e.either(bad))?;
        let raw = Self::raw_run(&row).map_err(bad)?;
        let checked = raw.check(run_id)?;
        let after = checked.snapshot.as_ref().map_or(0, |s| s.version);
        let rows = journal(
            run_id,
            after,
            checked.version,
            Self::journal_columns(&row).map_err(bad)?,
        )?;
        let pending = Self::pending_columns(run_id, &row)
            .map_err(bad)?
            .into_iter()
            .map(RawPending::check)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(raw.loaded(run_id, checked, rows, pending))
    }

    /// Checks the sizes `load`'s row reports before its texts are read (a text past the bounds
    /// is NULL in the row).
    fn check_load_sizes(run_id: &str, limits: &ReadLimits, row: &PgRow) -> Result<(), Failed> {
        let snapshot: Option<i64> = row.try_get("snapshot_bytes")?;
        let versions = column::<i64>(row, "j_version")?;
        let entries = column::<i64>(row, "j_bytes")?;
        let calls = column::<String>(row, "p_call_id")?;
        let pending = column::<i64>(row, "p_bytes")?;
        let sizes = snapshot
            .map(|b| (Part::Snapshot, b))
            .into_iter()
            .chain(
                versions
                    .into_iter()
                    .zip(entries)
                    .map(|(v, b)| (Part::Entry(v), b)),
            )
            .chain(
                calls
                    .iter()
                    .zip(pending)
                    .map(|(c, b)| (Part::Pending(c), b)),
            );
        check_sizes(run_id, limits, sizes).map_err(Failed::Store)
    }

    /// The journal rows of `load`'s row, from its arrays (all of one length: one aggregate).
    fn journal_columns(row: &PgRow) -> Result<Vec<RawJournal>, sqlx::Error> {
        let versions = column::<i64>(row, "j_version")?;
        let kinds = column::<String>(row, "j_kind")?;
        let formats = column::<i64>(row, "j_format")?;
        let bodies = column::<Option<String>>(row, "j_body")?;
        let bytes = column::<i64>(row, "j_bytes")?;
        let digests = column::<String>(row, "j_digest")?;
        same_length(
            versions.len(),
            &[
                kinds.len(),
                formats.len(),
                bodies.len(),
                digests.len(),
                bytes.len(),
            ],
        )?;
        Ok(versions
            .into_iter()
            .zip(kinds)
            .zip(formats)
            .zip(bodies)
            .zip(digests)
            .zip(bytes)
            .map(|(((((v, kind), f), body), digest), n)| (v, kind, f, body, digest, n))
            .collect())
    }

    /// The pending rows of `load`'s row, from its arrays.
    fn pending_columns(run_id: &str, row: &PgRow) -> Result<Vec<RawPending>, sqlx::Error> {
        let call_ids = column::<String>(row, "p_call_id")?;
        let mut agent_ids = column::<String>(row, "p_agent_id")?.into_iter();
        let mut tools = column::<String>(row, "p_tool")?.into_iter();
        let mut kinds = column::<String>(row, "p_kind")?.into_iter();
        let mut arguments = column::<Option<String>>(row, "p_arguments")?.into_iter();
        let mut digests = column::<String>(row, "p_digest")?.into_iter();
        let mut since = column::<i64>(row, "p_since_ms")?.into_iter();
        let mut versions = column::<i64>(row, "p_version")?.into_iter();
        let mut decisions = column::<Option<String>>(row, "p_decision")?.into_iter();
        let mut decided_by = column::<Option<String>>(row, "p_decided_by")?.into_iter();
        let mut bytes = column::<i64>(row, "p_bytes")?.into_iter();
        same_length(
            call_ids.len(),
            &[
                agent_ids.len(),
                tools.len(),
                kinds.len(),
                arguments.len(),
                digests.len(),
                since.len(),
                versions.len(),
                decisions.len(),
                decided_by.len(),
                bytes.len(),
            ],
        )?;
        let mut rows = Vec::with_capacity(call_ids.len());
        for call_id in call_ids {
            // Every iterator has as many items as `call_ids` (checked above).
            let (
                Some(agent_id),
                Some(tool),
                Some(kind),
                Some(arguments),
                Some(digest),
                Some(since_ms),
                Some(version),
                Some(decision),
                Some(decided_by),
                Some(bytes),
            ) = (
                agent_ids.next(),
                tools.next(),
                kinds.next(),
                arguments.next(),
                digests.next(),
                since.next(),
                versions.next(),
                decisions.next(),
                decided_by.next(),
                bytes.next(),
            )
            else {
                break;
            };
            rows.push(RawPending {
                run_id: run_id.to_owned(),
                agent_id,
                call_id,
                tool,
                kind,
                arguments,
                digest,
                since_ms,
                version,
                decision,
                decided_by,
                bytes,
            });
        }
        Ok(rows)
    }
}

/// The queue: claims lock rows with `FOR UPDATE SKIP LOCKED`, leases and their expiry are
/// measured by the database's clock, and a run that becomes ready is announced with `NOTIFY`
/// in the transaction that made it so.
impl PostgresStore {
    async fn claim_runs(&self, request: &ClaimRequest) -> Result<Claimed, StoreError> {
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
            let status = crate::store::sql::status(&run_id, 0, status.as_deref().unwrap_or(""))?;
            let agent_id: Option<String> = row.try_get("agent_id").map_err(database)?;
            claimed.leases.push(Lease {
                agent_id: agent_id.unwrap_or_default(),
                token: crate::store::sql::version(
                    &run_id,
                    0,
                    "the lease's token",
                    get("lease_token")?,
                )?,
                status,
                version: crate::store::sql::version(
                    &run_id,
                    0,
                    "the run's version",
                    get("version")?,
                )?,
                waited_ms: u64::try_from(get("waited")?).unwrap_or(0),
                run_id,
            });
        }
        claimed
            .leases
            .sort_by_key(|lease| std::cmp::Reverse(lease.waited_ms));
        Ok(claimed)
    }

    async fn renew_lease(&self, lease: &Lease, duration_ms: u64) -> Result<(), StoreError> {
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

    async fn acquire_lease(&self, run_id: &str, lease: &LeaseRequest) -> Result<Lease, StoreError> {
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
            token: crate::store::sql::version(run_id, 0, "the lease's token", token)?,
            status: crate::store::sql::status(run_id, 0, status.as_deref().unwrap_or(""))?,
            version: crate::store::sql::version(
                run_id,
                0,
                "the run's version",
                version.unwrap_or(0),
            )?,
            waited_ms: 0,
        })
    }

    async fn list_abandoned(&self, limit: usize) -> Result<Vec<AbandonedRun>, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(ABANDONED)
            .bind(i64::try_from(limit.min(10_000)).unwrap_or(10_000))
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        rows.iter().map(crate::store::sql::abandoned).collect()
    }

    async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
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
    async fn listen(&self) -> Result<Wakeups, StoreError> {
        use futures::StreamExt as _;
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(database)?;
        listener.listen(CHANNEL).await.map_err(database)?;
        Ok(Box::pin(listener.into_stream().map(|notification| {
            notification.map(drop).map_err(database)
        })))
    }

    async fn count_queue(&self) -> Result<Vec<QueueCounts>, StoreError> {
        let mut session = self.session().await?;
        let rows = self
            .query(COUNTS)
            .fetch_all(session.conn())
            .await
            .map_err(database)?;
        session.finish().await?;
        rows.iter().map(crate::store::sql::queue_counts).collect()
    }
}

/// A check of `load`'s row that failed: the row could not be read, or the store refuses it.
enum Failed {
    Read(sqlx::Error),
    Store(StoreError),
}

impl From<sqlx::Error> for Failed {
    fn from(error: sqlx::Error) -> Self {
        Failed::Read(error)
    }
}

impl Failed {
    /// The store's error, a read's made by `read`.
    fn either(self, read: impl FnOnce(sqlx::Error) -> StoreError) -> StoreError {
        match self {
            Failed::Read(e) => read(e),
            Failed::Store(e) => e,
        }
    }
}

/// Checks that the arrays of one aggregate have one length.
fn same_length(first: usize, others: &[usize]) -> Result<(), sqlx::Error> {
    if others.iter().all(|n| *n == first) {
        Ok(())
    } else {
        Err(sqlx::Error::Decode(
            format!("arrays of different lengths ({first} and {others:?})").into(),
        ))
    }
}

impl_run_store!(PostgresStore, Postgres);
