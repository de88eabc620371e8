//! Durable runs: a run store keeps every run's journal, so that a paused run is resumed exactly
//! once, from any process, and a crash in the middle of a tool loses nothing.
//!
//! Stage 6, after `run`: it stores what the run stage hands it and never reaches into the loop.
//! Its files, lowest first:
//!
//! - `backend`: [`RunStore`], what a database does (rows and a compare-and-swap on a run's
//!   version), and the rows it keeps;
//! - `journal`: what the rows mean: entries that carry deltas, their checksum chain, snapshots
//!   every few entries, and a run rebuilt from them; the loop's journal written to a store;
//! - `memory`: [`MemoryStore`], a store in memory for tests and examples;
//! - `sql`: what the SQL backends share (their statements, the checks of rows read back, paging
//!   cursors, migrations);
//! - `sqlite`: `SqliteStore`, a run store in a SQLite file (feature `sqlite`);
//! - `postgres`: `PostgresStore`, a run store in PostgreSQL (feature `postgres`);
//! - `runs`: [`Runs`] and [`DurableAgent`], the store and an agent as an application uses them.

pub(crate) mod backend;
pub(crate) mod journal;
pub(crate) mod memory;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "postgres")]
mod postgres;
pub(crate) mod runs;

pub use backend::{
    Append, AuditFilter, DecisionRow, JournalRow, LoadedRun, NewRun, Page, PendingFilter,
    PendingRow, RunFilter, RunStore, RunSummary, SnapshotRow, StoredStatus,
};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::{PostgresStore, PostgresStoreBuilder};
pub use runs::{DEFAULT_SNAPSHOT_EVERY, DurableAgent, Runs, StoredRun};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::{SqliteStore, SqliteStoreBuilder};
