-- Queued runs (served by a worker): since when one is ready, and its lease: the fencing token of
-- the last one given (tokens only grow), who holds it, and until when.
ALTER TABLE phaseo_runs ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
ALTER TABLE phaseo_runs ADD COLUMN ready_ms INTEGER;
ALTER TABLE phaseo_runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE phaseo_runs ADD COLUMN lease_owner TEXT;
ALTER TABLE phaseo_runs ADD COLUMN lease_until_ms INTEGER;
CREATE INDEX phaseo_runs_queue ON phaseo_runs (agent_id, status) WHERE queued = 1;
