//! A run store in one SQLite file (feature `sqlite`): [`SqliteStore`](connect::SqliteStore).
//!
//! [`statements`] is its SQL, in one place; [`connect`] opens the file and holds the store;
//! [`runs`] is its `RunStore` and [`queue`] its `RunQueue`.

pub(crate) mod statements;
pub(crate) mod connect;
pub(crate) mod runs;
pub(crate) mod queue;
