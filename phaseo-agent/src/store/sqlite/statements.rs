//! The SQLite store's SQL.
