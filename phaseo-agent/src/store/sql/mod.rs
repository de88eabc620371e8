//! What the two SQL backends share: [`checks`] of what is written and read back, and the
//! [`listing`]s with their cursors and pages. Each backend writes its own statements and its own
//! `RunStore` (`store/sqlite/`, `store/postgres/`).

pub(crate) mod checks;
pub(crate) mod listing;
