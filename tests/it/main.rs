//! The integration tests of phaseo-agent, as one binary: the runtime is linked once, and the
//! helpers in `tests/support/` (shared with `hostile`) are written once. Each module is one area
//! of the runtime, tested through its public API only.
//!
//! Kept apart, each in a binary of its own: `hostile` (its cases measure the process's peak heap,
//! so nothing else may run beside them), `run_allocations` (counts an agent run's allocations),
//! `architecture`, `compiletest` (trybuild) and `outside` (a user's crate, built by cargo).

#[path = "../support/mod.rs"]
mod support;
mod shapes;
mod interop;
mod agent_loop;
mod approval_properties;
mod bad_arguments;
mod concurrency;
mod decode_hostile;
mod durable;
mod durable_hostile;
mod durable_processes;
mod durable_verbs;
mod differential;
mod error_policy;
mod error_texts;
mod external_typed;
mod fuzz_corpus;
mod hostile_input;
mod hostile_state;
mod hostile_tools;
#[cfg(feature = "inbox")]
mod inbox;
mod interactive;
// Public, so that clippy and `missing_docs` see its tools as a user's exported API.
pub mod lints;
mod macro_approval;
mod macro_call;
mod macro_fields;
mod macro_hints;
mod macro_plain_args;
mod macro_run;
mod mcp_client;
mod mcp_roundtrip;
mod mcp_server;
#[cfg(feature = "otel")]
mod mcp_trace;
mod model_errors;
mod model_interface;
#[cfg(feature = "otel")]
mod otel_export;
#[cfg(feature = "otel")]
mod otel_processes;
mod pause_matrix;
mod pause_resume;
mod progress_context;
mod refusals;
mod provider_anthropic;
mod provider_http;
mod provider_openai;
mod provider_sampling;
mod provider_whole;
mod resources;
mod retry;
mod run_semantics;
mod schema_dialects;
mod schema_golden;
mod spec_snippets;
mod store_backend;
mod store_upgrade;
mod strict_tools;
#[cfg(feature = "otel")]
mod telemetry;
mod timeouts;
mod tool_reports;
mod validators;
mod workers;
