//! The SQLite store's SQL, every statement in one place (SQLite reads `$1` as the first parameter,
//! as PostgreSQL does). A run's writes and its read are one statement per row, in a transaction:
//! SQLite is in the process, so a statement costs no round trip.

use crate::store::sql::listing::{PENDING_BYTES, pending_columns};

/// `create`: the run's row (`$1` the run, `$2` its agent, `$3` its status, `$4` its version,
/// `$5` when, `$6` whether queued, `$7` ready since, `$8` the lease's token, `$9` its owner,
/// `$10` its end).
pub(crate) const INSERT_RUN: &str = "INSERT INTO phaseo_runs (run_id, agent_id, status, version, \
     created_ms, updated_ms, queued, ready_ms, lease_token, lease_owner, lease_until_ms) \
     VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10)";

/// A pending call of run `$1` (its agent from the run's row), `$2` the call, `$3` its place.
pub(crate) const INSERT_PENDING: &str = "INSERT INTO phaseo_pending (run_id, call_id, seq, \
     agent_id, tool, kind, arguments, digest, since_ms, version, decision, decided_by) \
     SELECT $1, $2, $3, agent_id, $4, $5, $6, $7, $8, $9, $10, $11 \
     FROM phaseo_runs WHERE run_id = $1";

/// A journal row of run `$1`.
pub(crate) const INSERT_JOURNAL: &str = "INSERT INTO phaseo_journal (run_id, version, kind, \
     format, body, digest) VALUES ($1, $2, $3, $4, $5, $6)";

/// `append`'s update of the run's row, where its version is `$5` (`$4` the run): `$1` the new
/// version, `$2` the status, `$3` when; a queued run left waiting on calls that are all decided
/// (`$6`) is handed to a worker (`ready` since `$7`, now); a write outside a lease, or to any
/// status but running, ends the lease; a worker's write (its lease `$8`) applies only under its
/// live lease. With a snapshot, `$9` to `$12` are its version, format, body and digest. Returns
/// the status written.
pub(crate) fn append_update(snapshot: bool) -> String {
    let set = "UPDATE phaseo_runs SET version = $1, \
         status = CASE WHEN queued = 1 AND $6 THEN 'ready' ELSE $2 END, \
         updated_ms = $3, \
         ready_ms = CASE WHEN queued = 1 AND $6 THEN $7 END, \
         lease_until_ms = CASE WHEN $8 IS NOT NULL AND $2 = 'running' \
             AND NOT (queued = 1 AND $6) THEN lease_until_ms END";
    let check = " WHERE run_id = $4 AND version = $5 \
         AND ($8 IS NULL OR (lease_token = $8 AND lease_until_ms > $7)) \
         RETURNING status";
    if snapshot {
        format!(
            "{set}, snapshot_version = $9, snapshot_format = $10, \
             snapshot_body = $11, snapshot_digest = $12{check}"
        )
    } else {
        format!("{set}{check}")
    }
}

/// After a refused `append`: run `$1`'s version, and whether the lease `$2` still holds it at
/// `$3`.
pub(crate) const HELD: &str = "SELECT version, lease_token = $2 AND lease_until_ms > $3 AS held \
     FROM phaseo_runs WHERE run_id = $1";

/// The pending calls of run `$1`, before `append` writes them again.
pub(crate) const DELETE_PENDING: &str = "DELETE FROM phaseo_pending WHERE run_id = $1";

/// A row of the audit log.
pub(crate) const INSERT_AUDIT: &str = "INSERT INTO phaseo_audit (run_id, call_id, tool, decision, \
     decided_by, at_ms, digest, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// `load`, first: run `$1`'s row, its snapshot's body sent only within `$2` (one row) and `$3`
/// (the load), its size always.
pub(crate) const LOAD_RUN: &str = "SELECT agent_id, status, version, created_ms, updated_ms, \
     snapshot_version, snapshot_format, CASE WHEN octet_length(snapshot_body) <= $2 \
     AND octet_length(snapshot_body) <= $3 THEN snapshot_body END AS snapshot_body, \
     octet_length(snapshot_body) AS snapshot_bytes, snapshot_digest \
     FROM phaseo_runs WHERE run_id = $1";

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

/// `prune`: the finished runs last written before `$1` (their journal and pending rows go with
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
        "SELECT run_id, agent_id, status, version, {WAITING_SINCE} AS since FROM phaseo_runs \
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
pub(crate) const LEASE_OF: &str = "SELECT agent_id, status, version, lease_owner, lease_until_ms \
     FROM phaseo_runs WHERE run_id = $1";

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
