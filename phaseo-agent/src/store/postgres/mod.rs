//! A run store in PostgreSQL (feature `postgres`): [`PostgresStore`](connect::PostgresStore).
//!
//! [`statements`] is its SQL, in one place; [`connect`] connects and holds the store; [`runs`] is
//! its `RunStore` and [`queue`] its `RunQueue`.

pub(crate) mod statements;
pub(crate) mod connect;
pub(crate) mod runs;
pub(crate) mod queue;
