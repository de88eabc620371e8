//! The interop suite: the runtime against real outside software (a wire-format mock, a local
//! model, the reference MCP server, PostgreSQL, headless Chromium, an OTLP receiver). Every test
//! here is ignored in a plain `cargo test`; `interop/run.sh` starts the servers and runs them
//! with `--ignored`.

mod aimock;
mod browser;
// The approval inbox in a browser: built with the tests package's feature `inbox` (which
// `interop/run.sh`'s `--all-features` turns on).
#[cfg(feature = "inbox")]
mod inbox_browser;
mod llama;
mod mcp_client;
// Export over OTLP: built with the tests package's feature `otel` (which `interop/run.sh`'s
// `--all-features` turns on).
#[cfg(feature = "otel")]
mod otlp;
mod postgres;
mod postgres_durable;
mod workers_example;
// Queue workers as processes, killed and stopped, on PostgreSQL.
mod workers;
