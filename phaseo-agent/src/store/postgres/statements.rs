//! The PostgreSQL store's SQL, every statement in one place: the schema's migrations, the
//! statements of `create`, `append` and `load` (one each), and the queue's.

use crate::store::migrate::Files;

/// The schema: `phaseo-agent/migrations/postgres/`, one file per version, applied in order.
pub(crate) const MIGRATIONS: Files = &[
    (
        1,
        "runs",
        include_str!("../../../migrations/postgres/0001_runs.sql"),
    ),
    (
        2,
        "row estimates",
        include_str!("../../../migrations/postgres/0002_row_estimates.sql"),
    ),
    (
        3,
        "queue",
        include_str!("../../../migrations/postgres/0003_queue.sql"),
    ),
    (
        4,
        "version from journal",
        include_str!("../../../migrations/postgres/0004_version_from_journal.sql"),
    ),
];

/// The channel a run that becomes ready is announced on (its agent's id as the payload).
pub(crate) const CHANNEL: &str = "phaseo_ready";

/// The database's clock, in milliseconds since the Unix epoch: leases are measured by it alone.
macro_rules! now_ms {
    () => {
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
    };
}

/// The version of run `$run` (an SQL expression): its journal's last entry, found from the end
/// of the journal's primary key. The run's row holds no version: an append that leaves the
/// run's status and lease as they were writes the journal alone.
macro_rules! head {
    ($run:literal) => {
        concat!(
            "(SELECT max(version) FROM phaseo_journal WHERE run_id = ",
            $run,
            ")"
        )
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
pub(crate) const CLAIM: &str = concat!(
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
    RETURNING r.run_id, r.agent_id, r.status, r.lease_token, c.now - picked.since AS waited,
        picked.since
)
SELECT run_id, agent_id, status, ",
    head!("t.run_id"),
    " AS version, lease_token, waited,
    NULL::bigint AS next
FROM (SELECT * FROM taken ORDER BY since, run_id) t
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, min(r.lease_until_ms) - min(c.now)
FROM phaseo_runs r, c
WHERE r.queued AND r.agent_id = ANY ($1::text[]) AND r.lease_until_ms > c.now"
);

/// After a refused `append`: the run's version, and whether the lease `$2` still holds it.
pub(crate) const HELD: &str = concat!(
    "SELECT ",
    head!("$1"),
    " AS version, lease_token = $2::bigint AND lease_until_ms > ",
    now_ms!(),
    " AS held FROM phaseo_runs WHERE run_id = $1"
);

/// `acquire`: a lease on run `$1` for `$2`, lasting `$3` milliseconds, unless a live one holds
/// it; then, whatever happened, the run's holder and when its lease expires, for a refusal.
pub(crate) const ACQUIRE: &str = concat!(
    "\
WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), taken AS (
    UPDATE phaseo_runs r SET lease_token = r.lease_token + 1, lease_owner = $2,
        lease_until_ms = c.now + $3
    FROM c WHERE r.run_id = $1 AND (r.lease_until_ms IS NULL OR r.lease_until_ms <= c.now)
    RETURNING r.agent_id, r.status, r.lease_token
)
SELECT t.agent_id, t.status, ",
    head!("$1"),
    " AS version, t.lease_token, NULL::text AS owner, NULL::bigint AS left_ms
FROM taken t
UNION ALL
SELECT NULL, NULL, NULL, NULL, r.lease_owner, r.lease_until_ms - c.now
FROM phaseo_runs r, c WHERE r.run_id = $1 AND NOT EXISTS (SELECT 1 FROM taken)"
);

/// `abandoned`: runs of the applications' own processes that are running under an expired lease,
/// or none, oldest first, at most `$1`.
pub(crate) const ABANDONED: &str = concat!(
    "SELECT run_id, agent_id, lease_owner, lease_until_ms, updated_ms FROM phaseo_runs \
     WHERE status = 'running' AND NOT queued AND (lease_until_ms IS NULL OR lease_until_ms <= ",
    now_ms!(),
    ") ORDER BY updated_ms, run_id LIMIT $1"
);

/// `renew`: the lease `$2` of run `$1`, while it lives, now lasts `$3` more milliseconds.
pub(crate) const RENEW: &str = concat!(
    "UPDATE phaseo_runs SET lease_until_ms = c.now + $3 FROM (SELECT ",
    now_ms!(),
    " AS now) c WHERE run_id = $1 AND lease_token = $2 AND lease_until_ms > c.now"
);

/// `release`: the lease `$2` of run `$1` ends now, and the run's agent is announced.
pub(crate) const RELEASE: &str = concat!(
    "WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), r AS (
    UPDATE phaseo_runs SET lease_until_ms = c.now FROM c
    WHERE run_id = $1 AND lease_token = $2 AND lease_until_ms > c.now RETURNING agent_id
)
SELECT pg_notify('phaseo_ready', agent_id) FROM r"
);

/// `queue_counts`: each agent's runs by state, and how long its oldest claimable run waited.
pub(crate) const COUNTS: &str = concat!(
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
pub(crate) const MIGRATION_LOCK: &str = "SELECT pg_advisory_xact_lock(8099831078076743681)";

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
pub(crate) const GENERIC_PLANS: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), \
     set_config('enable_seqscan', 'off', false)";

/// The constraint a second run with the same id violates.
pub(crate) const RUN_KEY: &str = "phaseo_runs_pkey";

/// The constraint an entry written at a version that exists violates: the compare-and-swap of
/// `append`.
pub(crate) const JOURNAL_KEY: &str = "phaseo_journal_pkey";

/// The pending calls' insert of `create` and `append`: the run's id and agent from the CTE named
/// (the run's row as written or read), the calls' columns as the arrays `$10` to `$18`, in order.
macro_rules! insert_pending {
    ($run:literal) => {
        concat!("INSERT INTO phaseo_pending (run_id, call_id, seq, agent_id, tool, kind, arguments, digest,
        since_ms, version, decision, decided_by)
    SELECT run.run_id, p.call_id, p.seq - 1, run.agent_id, p.tool, p.kind, p.arguments, p.digest,
        p.since_ms, p.version, p.decision, p.decided_by
    FROM ", $run, " AS run, unnest($10::text[], $11::text[], $12::text[], $13::text[],
        $14::text[], $15::bigint[], $16::bigint[], $17::text[], $18::text[])
        WITH ORDINALITY AS p (call_id, tool, kind, arguments, digest, since_ms, version, decision,
        decided_by, seq)")
    };
}

/// `create`: the run's row, then its first journal row and its pending calls (`$10` to `$18`)
/// from the inserted row. A queued run (`$19`) is stored ready since now and announced; the
/// notification goes out when the statement commits.
pub(crate) const CREATE: &str = concat!(
    "\
WITH run AS (
    INSERT INTO phaseo_runs (run_id, agent_id, status, created_ms, updated_ms, queued, ready_ms,
        lease_token, lease_owner, lease_until_ms)
    VALUES ($1, $2, $3, $5, $5, $19, CASE WHEN $19 THEN ",
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
    insert_pending!("run"),
    "
)
SELECT count(*) FROM notified"
);

/// `append` of what changes only the journal (a running run's turn, call or result): its rows
/// (`$5` to `$9`, versions `$2 + 1`, ...) of run `$1`, inserted only where the run's version is
/// `$2`, its status `$3` and its lease as it is (a worker's `$4` live by the database's clock, or,
/// outside a lease, none). The journal's primary key is the compare-and-swap. Inserting nothing
/// (the run's row must change too, or the write is refused) sends the writer to [`APPEND`].
pub(crate) const APPEND_JOURNAL: &str = concat!(
    "\
INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest)
SELECT $1, j.version, j.kind, j.format, j.body, j.digest
FROM unnest($5::bigint[], $6::text[], $7::bigint[], $8::text[], $9::text[])
    AS j (version, kind, format, body, digest)
WHERE EXISTS (
    SELECT FROM phaseo_runs r
    WHERE r.run_id = $1 AND r.status = $3
        AND CASE WHEN $4::bigint IS NULL THEN r.lease_until_ms IS NULL
            ELSE r.lease_token = $4 AND r.lease_until_ms > ",
    now_ms!(),
    " END
    FOR SHARE
) AND EXISTS (SELECT FROM phaseo_journal WHERE run_id = $1 AND version = $2)"
);

/// `append`: the journal rows (`$20` to `$24`, versions `$2 + 1`, ...), where the run's version
/// is `$2` and, for a worker's write, its lease `$33` lives by the database's clock. The
/// journal's primary key is the compare-and-swap: a writer that read an older version inserts a
/// version that exists, and the statement fails on the key (a [`StoreError::Conflict`] to the
/// caller). The run's row is locked (`FOR SHARE`, so that a lease taken meanwhile waits for this
/// write, or this write for it) and written only when something in it changes: the status (`$4`;
/// a queued run waiting on calls all decided, `$32`, is stored ready and announced), the lease
/// (ended by a write outside a lease or to any status but running), or the snapshot (`$6` to
/// `$9`); `updated_ms` is since when the run is in its status (`$5` when the status changes). Only if the checks
/// passed: the pending calls (replaced if `$19`: `$10` to `$18`, those no longer listed deleted,
/// the others upserted, as one statement's CTEs cannot delete and insert the same key) and the
/// audit rows (`$25` to `$31`, after the audit lock). Returns how many runs it wrote to: 0 or 1.
///
/// [`StoreError::Conflict`]: crate::error::StoreError::Conflict
pub(crate) const APPEND: &str = concat!(
    "\
WITH c AS MATERIALIZED (SELECT ",
    now_ms!(),
    " AS now), cur AS (
    SELECT r.run_id, r.agent_id, r.status, r.ready_ms, r.lease_until_ms,
        CASE WHEN r.queued AND $32 THEN 'ready' ELSE $4 END AS to_status,
        CASE WHEN r.queued AND $32 THEN c.now END AS to_ready_ms,
        CASE WHEN $33::bigint IS NOT NULL AND $4 = 'running' AND NOT (r.queued AND $32)
            THEN r.lease_until_ms END AS to_lease_until_ms
    FROM phaseo_runs r, c
    WHERE r.run_id = $1
        AND ($33::bigint IS NULL OR (r.lease_token = $33 AND r.lease_until_ms > c.now))
        AND EXISTS (SELECT FROM phaseo_journal WHERE run_id = $1 AND version = $2)
    FOR SHARE OF r
), run AS (
    UPDATE phaseo_runs r SET status = cur.to_status,
        updated_ms = CASE WHEN cur.status <> cur.to_status THEN $5 ELSE r.updated_ms END,
        ready_ms = cur.to_ready_ms, lease_until_ms = cur.to_lease_until_ms,
        snapshot_version = COALESCE($6, r.snapshot_version),
        snapshot_format = COALESCE($7, r.snapshot_format),
        snapshot_body = COALESCE($8, r.snapshot_body),
        snapshot_digest = COALESCE($9, r.snapshot_digest)
    FROM cur
    WHERE r.run_id = cur.run_id AND (cur.status <> cur.to_status OR $6::bigint IS NOT NULL
        OR cur.ready_ms IS DISTINCT FROM cur.to_ready_ms
        OR cur.lease_until_ms IS DISTINCT FROM cur.to_lease_until_ms)
    RETURNING r.agent_id, r.status
), notified AS (
    SELECT pg_notify('phaseo_ready', agent_id) FROM run WHERE status = 'ready'
), gone AS (
    DELETE FROM phaseo_pending
    WHERE $19 AND run_id = $1 AND EXISTS (SELECT FROM cur) AND call_id <> ALL ($10::text[])
), pending AS (
    ",
    insert_pending!("cur"),
    "
    ON CONFLICT (run_id, call_id) DO UPDATE SET seq = EXCLUDED.seq, agent_id = EXCLUDED.agent_id,
        tool = EXCLUDED.tool, kind = EXCLUDED.kind, arguments = EXCLUDED.arguments,
        digest = EXCLUDED.digest, since_ms = EXCLUDED.since_ms, version = EXCLUDED.version,
        decision = EXCLUDED.decision, decided_by = EXCLUDED.decided_by
), journal AS (
    INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest)
    SELECT cur.run_id, j.version, j.kind, j.format, j.body, j.digest
    FROM cur, unnest($20::bigint[], $21::text[], $22::bigint[], $23::text[], $24::text[])
        AS j (version, kind, format, body, digest)
), turn AS (
    SELECT pg_advisory_xact_lock(",
    audit_lock_key!(),
    ") FROM cur WHERE cardinality($25::text[]) > 0
), audit AS (
    INSERT INTO phaseo_audit (run_id, call_id, tool, decision, decided_by, at_ms, digest, version)
    SELECT $1, d.call_id, d.tool, d.decision, d.decided_by, d.at_ms, d.digest, d.version
    FROM turn, unnest($25::text[], $26::text[], $27::text[], $28::text[], $29::bigint[],
        $30::text[], $31::bigint[]) AS d (call_id, tool, decision, decided_by, at_ms, digest, version)
)
SELECT (SELECT count(*) FROM cur) AS updated, (SELECT count(*) FROM notified) AS notified"
);

/// `load`: the run's row (`part` 0), its journal after its snapshot (1, in version order) and its
/// pending calls (2, in their order), one row each, from one snapshot. Each part fills its own
/// columns (`j_` the entries', `p_` the calls') and leaves the others NULL.
///
/// Every part names the run as `$1`: the planner then finds its rows by the primary keys' index
/// even when its statistics still describe a table of a few long runs.
///
/// The texts are measured (`octet_length`, which reads a stored value's size without reading
/// the value) and sent only within the bounds: each row's text within `$2` bytes, all of them
/// within `$3` (`t.total`); the sizes are always sent, so the store can name what is too large.
pub(crate) const LOAD: &str = concat!(
    "\
WITH r AS (
    SELECT agent_id, status, created_ms, updated_ms, snapshot_version, snapshot_format,
        snapshot_body, octet_length(snapshot_body)::bigint AS snapshot_bytes, snapshot_digest
    FROM phaseo_runs WHERE run_id = $1
), j AS (
    SELECT version, kind, format, body, digest, octet_length(body)::bigint AS bytes
    FROM phaseo_journal
    WHERE run_id = $1 AND version > COALESCE((SELECT snapshot_version FROM r), 0)
), p AS (
    SELECT seq, call_id, agent_id, tool, kind, arguments, digest, since_ms, version, decision,
        decided_by, octet_length(arguments)::bigint + COALESCE(octet_length(decision), 0) AS bytes
    FROM phaseo_pending WHERE run_id = $1
), t AS (
    SELECT COALESCE((SELECT snapshot_bytes FROM r), 0) + COALESCE((SELECT sum(bytes) FROM j), 0)
        + COALESCE((SELECT sum(bytes) FROM p), 0) AS total
)
SELECT 0 AS part, 0::bigint AS seq, r.agent_id, r.status, ",
    head!("$1"),
    " AS version,
    r.created_ms, r.updated_ms, r.snapshot_version, r.snapshot_format,
    CASE WHEN r.snapshot_bytes <= $2::bigint AND t.total <= $3::bigint
        THEN r.snapshot_body END AS snapshot_body,
    r.snapshot_bytes, r.snapshot_digest,
    NULL::bigint AS j_version, NULL::text AS j_kind, NULL::bigint AS j_format,
    NULL::text AS j_body, NULL::bigint AS j_bytes, NULL::text AS j_digest,
    NULL::text AS p_call_id, NULL::text AS p_agent_id, NULL::text AS p_tool, NULL::text AS p_kind,
    NULL::text AS p_arguments, NULL::text AS p_digest, NULL::bigint AS p_since_ms,
    NULL::bigint AS p_version, NULL::text AS p_decision, NULL::text AS p_decided_by,
    NULL::bigint AS p_bytes
FROM r, t
UNION ALL
SELECT 1, j.version, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    j.version, j.kind, j.format,
    CASE WHEN j.bytes <= $2::bigint AND t.total <= $3::bigint THEN j.body END, j.bytes, j.digest,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM j, t
UNION ALL
SELECT 2, p.seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL,
    p.call_id, p.agent_id, p.tool, p.kind,
    CASE WHEN p.bytes <= $2::bigint AND t.total <= $3::bigint THEN p.arguments END, p.digest,
    p.since_ms, p.version,
    CASE WHEN p.bytes <= $2::bigint AND t.total <= $3::bigint THEN p.decision END, p.decided_by,
    p.bytes
FROM p, t
ORDER BY part, seq"
);

/// `prune`: the runs finished before `$1` (their journal and pending rows go with
/// them, `ON DELETE CASCADE`; the audit log has no key to the runs and stays).
pub(crate) const PRUNE: &str =
    "DELETE FROM phaseo_runs WHERE status IN ('completed', 'failed') AND updated_ms < $1";
