//! Run stores: where durable runs are kept. [`RunStore`] is what a database does for them (rows,
//! and a compare-and-swap on a run's version); the stores are [`MemoryStore`] (tests and
//! examples), `SqliteStore` (feature `sqlite`: one file, SQLite compiled in, nothing to install)
//! and `PostgresStore` (feature `postgres`: many processes on many machines), or your own.
//!
//! An application uses a store through [`Runs`](crate::durable::Runs) (the [`durable`](crate::durable)
//! module); the rows here are what a store keeps and what a listing returns.

// The room after `run`, and the lowest of the durable layer: the drivers. They know rows, not
// runs: what the rows mean is `durable`'s. Its files, lowest first:
//
// - `listing`: what a listing asks (filters) and returns (pages, damaged rows), and its
//   cursors;
// - `backend`: `RunStore`, what a database does, the rows it keeps and the checks every store
//   makes of them;
// - `memory`: `MemoryStore`, a store in memory for tests and examples;
// - `sql`: what the SQL backends share (their statements, the checks of rows read back, paging
//   cursors);
// - `migrate`: the schema's numbered files, run by sqlx's `Migrator`, and the adoption of
//   databases whose migrations were recorded before in a table of their own;
// - `sqlite`: `SqliteStore`, a run store in a SQLite file (feature `sqlite`);
// - `postgres`: `PostgresStore`, a run store in PostgreSQL (feature `postgres`).

pub(crate) mod listing;
pub(crate) mod backend;
pub(crate) mod memory;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod migrate;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "postgres")]
mod postgres;

pub use backend::{
    AbandonedRun, Append, ClaimRequest, Claimed, DecisionRow, JournalRow, Lease, LeaseRequest,
    LoadedRun, NewRun, PendingRow, QueueCounts, ReadLimits, RunQueue, RunStore, RunSummary,
    SnapshotRow, StoredStatus, Wakeups,
};
pub use listing::{AuditFilter, DamagedRow, Page, PendingFilter, RunFilter};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::connect::{PostgresStore, PostgresStoreBuilder};
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::connect::{SqliteStore, SqliteStoreBuilder};
