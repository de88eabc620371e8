-- A run's version is its journal's last entry: the primary key (run_id, version) of the journal
-- is the compare-and-swap, and an append that leaves the run's status and lease as they were
-- inserts its entries and writes nothing else. The run's row keeps what changes less often: its
-- status and since when (updated_ms), its lease, its snapshot.
ALTER TABLE phaseo_runs DROP COLUMN version;
