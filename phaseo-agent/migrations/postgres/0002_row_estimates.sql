-- A plan estimates a run's rows from the number of distinct ids, which ANALYZE measures from a
-- sample: on a database of a few long runs it finds few ids, and the plan then scans every run's
-- rows to find one run's. These fix the estimates at about 50 journal entries, 2 pending calls
-- and 5 decisions a run. On the store's own connections GENERIC_PLANS also prices out
-- sequential scans; this serves the plans made without it (behind a transaction pooler, where no
-- session setting is made, and the listings' filters).
ALTER TABLE phaseo_journal ALTER COLUMN run_id SET (n_distinct = -0.02);
ALTER TABLE phaseo_pending ALTER COLUMN run_id SET (n_distinct = -0.5);
ALTER TABLE phaseo_audit ALTER COLUMN run_id SET (n_distinct = -0.2);
ANALYZE phaseo_journal, phaseo_pending, phaseo_audit;
