CREATE TABLE phaseo_runs (
    run_id TEXT PRIMARY KEY NOT NULL,
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    snapshot_version INTEGER,
    snapshot_format INTEGER,
    snapshot_body TEXT,
    snapshot_digest TEXT
) STRICT;
CREATE INDEX phaseo_runs_by_agent ON phaseo_runs (agent_id, status, updated_ms, run_id);
CREATE INDEX phaseo_runs_by_status ON phaseo_runs (status, updated_ms, run_id);
CREATE INDEX phaseo_runs_by_updated ON phaseo_runs (updated_ms, run_id);
CREATE TABLE phaseo_journal (
    run_id TEXT NOT NULL REFERENCES phaseo_runs (run_id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    format INTEGER NOT NULL,
    body TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (run_id, version)
) STRICT;
CREATE TABLE phaseo_pending (
    run_id TEXT NOT NULL REFERENCES phaseo_runs (run_id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    arguments TEXT NOT NULL,
    digest TEXT NOT NULL,
    since_ms INTEGER NOT NULL,
    version INTEGER NOT NULL,
    decision TEXT,
    decided_by TEXT,
    PRIMARY KEY (run_id, call_id)
) STRICT;
CREATE INDEX phaseo_pending_newest ON phaseo_pending (since_ms, run_id, call_id);
CREATE INDEX phaseo_pending_by_agent ON phaseo_pending (agent_id, since_ms, run_id, call_id);
CREATE TABLE phaseo_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    digest TEXT NOT NULL,
    version INTEGER NOT NULL
) STRICT;
CREATE INDEX phaseo_audit_by_run ON phaseo_audit (run_id, id);
