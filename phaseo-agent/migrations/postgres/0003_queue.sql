-- Queued runs (served by workers): since when one is ready, and its lease: the fencing token of
-- the last one given (tokens only grow), who holds it, and until when, all by the database's
-- clock (the machines' clocks may disagree).
ALTER TABLE phaseo_runs ADD COLUMN queued boolean NOT NULL DEFAULT false,
    ADD COLUMN ready_ms bigint,
    ADD COLUMN lease_token bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_owner text,
    ADD COLUMN lease_until_ms bigint;
CREATE INDEX phaseo_runs_queue ON phaseo_runs (agent_id, status) WHERE queued;
