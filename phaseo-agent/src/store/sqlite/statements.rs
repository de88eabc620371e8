//! The SQLite store's SQL, every statement in one place (SQLite reads `$1` as the first parameter,
//! as PostgreSQL does). An append that leaves the run's status and lease as they were is one
//! statement, committed on its own; other writes and a run's read are one statement per row, in
//! a transaction.

use crate::store::sql::listing::{PENDING_BYTES, pending_columns};

/// `create`: the run's row (`$1` the run, `$2` its agent, `$3` its status, `$4` when, `$5`
/// whether queued, `$6` ready since, `$7` the lease's token, `$8` its owner, `$9` its end).
pub(crate) const INSERT_RUN: &str = "INSERT INTO phaseo_runs (run_id, agent_id, status, \
     created_ms, updated_ms, queued, ready_ms, lease_token, lease_owner, lease_until_ms) \
     VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9)";

/// The version of run `$1` (an SQL expression): its journal's last entry, found from the end of
/// the journal's primary key. The run's row holds no version: an append that leaves the run's
/// status and lease as they were writes the journal alone.
macro_rules! head {
    () => {
        "(SELECT max(version) FROM phaseo_journal WHERE run_id = $1)"
    };
}

/// A pending call of run `$1` (its agent from the run's row), `$2` the call, `$3` its place.
pub(crate) const INSERT_PENDING: &str = "INSERT INTO phaseo_pending (run_id, call_id, seq, \
     agent_id, tool, kind, arguments, digest, since_ms, version, decision, decided_by) \
     SELECT $1, $2, $3, agent_id, $4, $5, $6, $7, $8, $9, $10, $11 \
     FROM phaseo_runs WHERE run_id = $1";

/// A journal row of run `$1`.
pub(crate) const INSERT_JOURNAL: &str = "INSERT INTO phaseo_journal (run_id, version, kind, \
     format, body, digest) VALUES ($1, $2, $3, $4, $5, $6)";

/// Which of `append`'s journal inserts to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Insert {
    /// Committed on its own: only if the run's row needs no write (its status is `$3`; a worker's
    /// lease `$4` lives at `$5`, or, outside a lease, none is held).
    Alone,
    /// In the append's transaction, the row written after it: only under the worker's live
    /// lease `$4` at `$5`, if any.
    WithRow,
}

/// `append`'s journal rows: `rows` entries of run `$1`, each as five parameters from `$6` on
/// (version, kind, format, body, digest), inserted only where the run's version is `$2` and
/// `insert`'s condition holds. The journal's primary key is the compare-and-swap: a writer that
/// read an older version inserts a version that exists, and the statement fails on the key.
pub(crate) fn append_journal(rows: usize, insert: Insert) -> String {
    let values = (0..rows)
        .map(|i| {
            let p = 6 + 5 * i;
            format!("(${p}, ${}, ${}, ${}, ${})", p + 1, p + 2, p + 3, p + 4)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let run = match insert {
        Insert::Alone => {
            "status = $3 AND CASE WHEN $4 IS NULL THEN lease_until_ms IS NULL \
             ELSE lease_token = $4 AND lease_until_ms > $5 END"
        }
        Insert::WithRow => "($4 IS NULL OR (lease_token = $4 AND lease_until_ms > $5))",
    };
    format!(
        "INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest) \
         SELECT $1, v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES {values}) v \
         WHERE EXISTS (SELECT 1 FROM phaseo_runs WHERE run_id = $1 AND {run}) \
         AND EXISTS (SELECT 1 FROM phaseo_journal WHERE run_id = $1 AND version = $2)"
    )
}

/// `append`'s update of the run's row (`$3`), made only where something in it changes: `$1` the
/// status; a queued run left waiting on calls that are all decided (`$4`) is handed to a worker
/// (`ready` since `$5`, now); a write outside a lease (`$6` null), or to any status but running,
/// ends the lease. With a snapshot, `$7` to `$10` are its version, format, body and digest, and
/// the row is written. `updated_ms` is since when the run is in its status (`$2` when the status
/// changes). Returns the status written.
pub(crate) fn append_update(snapshot: bool) -> String {
    let status = "CASE WHEN queued = 1 AND $4 THEN 'ready' ELSE $1 END";
    let ready = "CASE WHEN queued = 1 AND $4 THEN $5 END";
    let lease = "CASE WHEN $6 IS NOT NULL AND $1 = 'running' AND NOT (queued = 1 AND $4) \
         THEN lease_until_ms END";
    let (set, changed) = if snapshot {
        (
            ", snapshot_version = $7, snapshot_format = $8, snapshot_body = $9, \
             snapshot_digest = $10",
            "1",
        )
    } else {
        ("", "0")
    };
    format!(
        "UPDATE phaseo_runs SET status = {status}, \
         updated_ms = CASE WHEN status <> {status} THEN $2 ELSE updated_ms END, ready_ms = {ready}, \
         lease_until_ms = {lease}{set} WHERE run_id = $3 AND ({changed} OR status <> {status} \
         OR ready_ms IS NOT {ready} OR lease_until_ms IS NOT {lease}) RETURNING status"
    )
}

/// After a refused `append`: run `$1`'s version, and whether the lease `$2` still holds it at
/// `$3`.
pub(crate) const HELD: &str = concat!(
    "SELECT ",
    head!(),
    " AS version, lease_token = $2 AND lease_until_ms > $3 AS held \
     FROM phaseo_runs WHERE run_id = $1"
);

/// The pending calls of run `$1`, before `append` writes them again.
pub(crate) const DELETE_PENDING: &str = "DELETE FROM phaseo_pending WHERE run_id = $1";

/// A row of the audit log.
pub(crate) const INSERT_AUDIT: &str = "INSERT INTO phaseo_audit (run_id, call_id, tool, decision, \
     decided_by, at_ms, digest, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// `load`, first: run `$1`'s row, its snapshot's body sent only within `$2` (one row) and `$3`
/// (the load), its size always.
pub(crate) const LOAD_RUN: &str = concat!(
    "SELECT agent_id, status, ",
    head!(),
    " AS version, created_ms, updated_ms, snapshot_version, snapshot_format, CASE WHEN octet_length(snapshot_body) <= $2 \
     AND octet_length(snapshot_body) <= $3 THEN snapshot_body END AS snapshot_body, \
     octet_length(snapshot_body) AS snapshot_bytes, snapshot_digest \
     FROM phaseo_runs WHERE run_id = $1"
);

/// `load`, then: run `$1`'s journal after version `$2`, each body sent only within `$3` (one row)
/// and while the bodies so far are within `$4` (what the load has left), its size always.
pub(crate) const LOAD_JOURNAL: &str = "SELECT version, kind, format, \
     CASE WHEN octet_length(body) <= $3 \
     AND sum(octet_length(body)) OVER (ORDER BY version) <= $4 THEN body END AS body, \
     digest, octet_length(body) AS bytes FROM phaseo_journal \
     WHERE run_id = $1 AND version > $2 ORDER BY version";

/// `load`, last: run `$1`'s pending calls, their texts sent only within `max_row` bytes (one
/// row) and while the calls so far are within `$2` (what the load has left).
pub(crate) fn load_pending(max_row: u64) -> String {
    let within = format!("AND sum({PENDING_BYTES}) OVER (ORDER BY seq) <= $2");
    format!(
        "SELECT {} FROM phaseo_pending WHERE run_id = $1 ORDER BY seq",
        pending_columns(max_row, &within)
    )
}

/// `prune`: the runs finished before `$1` (their journal and pending rows go with
/// them, `ON DELETE CASCADE`; the audit log has no key to the runs and stays).
pub(crate) const PRUNE: &str = "DELETE FROM phaseo_runs WHERE status IN ('completed', 'failed') \
     AND updated_ms < $1";

/// Whether a queued run may be taken at `$now`: ready and not held by a live lease, or running
/// under a lease that expired. The one place the rule is written; [`claim`] and [`counts`] use it.
pub(crate) const CLAIMABLE: &str = "queued = 1 AND (lease_until_ms IS NULL OR lease_until_ms <= $now) \
     AND (status = 'ready' OR (status = 'running' AND lease_until_ms IS NOT NULL))";

/// Since when a claimable run has waited.
pub(crate) const WAITING_SINCE: &str =
    "CASE WHEN status = 'ready' THEN COALESCE(ready_ms, $now) ELSE lease_until_ms END";

/// `claim`: up to `$3` claimable runs at `$1` of the agents of the JSON array `$2`, the longest
/// waiting first.
pub(crate) fn claim() -> String {
    format!(
        "SELECT run_id, agent_id, status, (SELECT max(j.version) FROM phaseo_journal j \
         WHERE j.run_id = phaseo_runs.run_id) AS version, {WAITING_SINCE} AS since FROM phaseo_runs \
         WHERE agent_id IN (SELECT value FROM json_each($2)) AND {CLAIMABLE} \
         ORDER BY since, run_id LIMIT $3"
    )
    .replace("$now", "$1")
}

/// A new lease on run `$3` for `$1`, until `$2`: its token.
pub(crate) const TAKE_LEASE: &str = "UPDATE phaseo_runs SET lease_token = lease_token + 1, \
     lease_owner = $1, lease_until_ms = $2 WHERE run_id = $3 RETURNING lease_token";

/// When the earliest live lease (at `$2`) of the agents of the JSON array `$1` expires.
pub(crate) const NEXT_EXPIRY: &str = "SELECT min(lease_until_ms) FROM phaseo_runs \
     WHERE queued = 1 AND agent_id IN (SELECT value FROM json_each($1)) AND lease_until_ms > $2";

/// `renew`: the lease `$3` of run `$2`, while it lives at `$4`, now lasts until `$1`.
pub(crate) const RENEW: &str = "UPDATE phaseo_runs SET lease_until_ms = $1 \
     WHERE run_id = $2 AND lease_token = $3 AND lease_until_ms > $4";

/// `release`: the lease `$3` of run `$2`, while it lives, ends at `$1`.
pub(crate) const RELEASE: &str = "UPDATE phaseo_runs SET lease_until_ms = $1 \
     WHERE run_id = $2 AND lease_token = $3 AND lease_until_ms > $1";

/// `acquire`, first: run `$1`'s row and its lease.
pub(crate) const LEASE_OF: &str = concat!(
    "SELECT agent_id, status, ",
    head!(),
    " AS version, lease_owner, lease_until_ms FROM phaseo_runs WHERE run_id = $1"
);

/// `abandoned`: runs of the application's own processes running under a lease expired at `$1`,
/// or none, oldest first, at most `$2`.
pub(crate) const ABANDONED: &str = "SELECT run_id, agent_id, lease_owner, lease_until_ms, \
     updated_ms FROM phaseo_runs WHERE status = 'running' AND queued = 0 \
     AND (lease_until_ms IS NULL OR lease_until_ms <= $1) \
     ORDER BY updated_ms, run_id LIMIT $2";

/// `queue_counts` at `$1`: each agent's runs by state, and how long its oldest claimable run
/// waited.
pub(crate) fn counts() -> String {
    format!(
        "SELECT agent_id, \
         sum(CASE WHEN {CLAIMABLE} THEN 1 ELSE 0 END) AS ready, \
         sum(CASE WHEN status IN ('ready', 'running') AND NOT ({CLAIMABLE}) THEN 1 ELSE 0 END) \
             AS running, \
         sum(status = 'paused') AS paused, sum(status = 'in_doubt') AS in_doubt, \
         sum(status = 'failed') AS failed, sum(status = 'completed') AS completed, \
         max(CASE WHEN {CLAIMABLE} THEN $now - {WAITING_SINCE} END) AS oldest \
         FROM phaseo_runs GROUP BY agent_id ORDER BY agent_id"
    )
    .replace("$now", "$1")
}
