//! Durable runs on PostgreSQL, with real processes: a process killed with SIGKILL at every journal
//! boundary and recovered by another, and eight processes racing to resume one paused run, 50
//! rounds. The same checks as on SQLite (`durable_processes`), against the private PostgreSQL 15
//! cluster `interop/postgres.sh` starts.
//!
//! Run by `interop/run.sh` (`--ignored`); without the server's URL the tests fail, never pass.

use crate::durable_processes::{
    a_killed_run_is_taken_up_once_its_lease_expires, a_live_run_is_not_taken_over,
    crash_at_every_boundary, eight_resumers_race, scratch,
};

fn url() -> String {
    std::env::var("PHASEO_INTEROP_POSTGRES_URL").expect(
        "PHASEO_INTEROP_POSTGRES_URL is not set: run the interop suite with interop/run.sh, which starts PostgreSQL",
    )
}

#[test]
#[ignore = "needs PostgreSQL: run by interop/run.sh"]
fn postgres_a_process_killed_at_every_journal_boundary_is_recovered() {
    let dir = scratch("pg-crash");
    crash_at_every_boundary(&format!("postgres:{}", url()), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs PostgreSQL: run by interop/run.sh"]
fn postgres_eight_processes_resuming_one_run_run_it_once() {
    let dir = scratch("pg-race");
    eight_resumers_race(&format!("postgres:{}", url()), &dir, 50);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs PostgreSQL: run by interop/run.sh"]
fn postgres_a_replica_starting_while_a_run_is_live_takes_over_nothing() {
    let dir = scratch("pg-live");
    a_live_run_is_not_taken_over(&format!("postgres:{}", url()), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs PostgreSQL: run by interop/run.sh"]
fn postgres_a_killed_run_is_taken_up_by_another_process() {
    let dir = scratch("pg-abandoned");
    a_killed_run_is_taken_up_once_its_lease_expires(&format!("postgres:{}", url()), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}
