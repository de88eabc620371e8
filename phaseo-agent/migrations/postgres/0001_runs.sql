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
