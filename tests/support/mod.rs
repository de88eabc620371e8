//! Support shared by the test binaries (`it` and `hostile`), the one copy of each helper:
//!
//! - `agent`: the example tools (`get_status`, `deploy`, `ticket_lookup`), a run counter, and
//!   readers of what a model was sent;
//! - `wire`: the in-process HTTP server that answers a provider with a script of recorded
//!   responses, and what the provider tests check a failed run with;
//! - `golden`: golden files and a walk over every schema position of a JSON Schema;
//! - `sync`: a future polled to completion without a runtime;
//! - `durable`: a model answering by the conversation's position, and a run store with hooks.
//!
//! Each binary includes it with `#[path]`, so not every helper is used by every binary.
#![allow(dead_code)]

pub mod agent;
pub mod durable;
pub mod golden;
#[cfg(feature = "otel")]
pub mod otel;
pub mod sync;
pub mod wire;
