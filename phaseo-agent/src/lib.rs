//! # phaseo-agent
//!
//! Tools for agents, in Rust: plain functions become tools the model can call, the runtime checks the
//! model's arguments before your code runs, and a run that needs a person pauses as plain data that
//! can be stored anywhere and resumed later, in another process.
//!
//! ```
//! use phaseo_agent::{Agent, Decisions, RunState, ScriptedModel, Tool};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), phaseo_agent::AgentError> {
//! let deploy = Tool::new(
//!     "deploy",
//!     "Deploy an application environment",
//!     json!({"type": "object", "properties": {"environment": {"type": "string"}}, "required": ["environment"]}),
//!     |input, _context| Ok(json!({"environment": input["environment"], "deployed": true})),
//! )
//! .require_approval();
//!
//! let model = ScriptedModel::new()
//!     .tool_call("call_1", "deploy", json!({"environment": "staging"}))
//!     .text("Staging is deployed.");
//! let agent = Agent::builder("release").model(model).tool(deploy).build()?;
//!
//! let paused = agent.run("Deploy staging").await?;
//! assert!(paused.is_paused());
//! let stored = paused.state.to_json();               // store it anywhere
//!
//! let state = RunState::from_json(&stored)?;         // later, perhaps elsewhere
//! let done = agent.resume(&state, Decisions::new().approve("call_1")).await?;
//! assert_eq!(done.output(), Some("Staging is deployed."));
//! # Ok(())
//! # }
//! ```
//!
//! ## Tool fields
//!
//! A tool is built with [`Tool::new`] (over JSON), [`Tool::typed`] (over your input type),
//! [`Tool::external`] (its result comes from outside) or `#[tool]` on a function or a method, and
//! each of its fields has one builder method on [`Tool`] (an agent-wide default, where there is
//! one, on [`AgentBuilder`]) and one `#[tool(...)]` key. The table of every field, method, key
//! and default is in the
//! [reference](https://github.com/phaseo/phaseo-agent/blob/main/docs/reference.md#fields).
//!
//! ## Running an agent
//!
//! One method per verb, each returning a request that is awaited for its result or streamed for
//! its events: [`Agent::run`] ([`RunRequest`]), [`Agent::resume`] ([`ResumeRequest`]),
//! [`Agent::retry`] ([`RetryRequest`]) and [`Agent::continue_run`] ([`ContinueRequest`]).
//!
//! ## Choices this crate makes
//!
//! - **Errors go back to the model by default**: an executor's `Err`, a timeout, a panic or
//!   invalid arguments become `{"error": "..."}` as the call's result, and the run goes on. A call
//!   to an unknown tool fails the run with `Unknown tool: <name>`. All of it is configurable
//!   ([`OnError`]). A panic's message is kept for operators (in [`Event::ToolError`] and on the
//!   call's step, [`ToolStep::error`], so a plain `run()` shows it too) and the model only reads
//!   that the tool failed unexpectedly.
//! - **Nothing a tool says is dropped silently.** Progress and a context set inside an interactive
//!   hook are kept as a tool's are. A next-turn override ([`Tool::next_turn`]) runs for every call
//!   that produced a result, whoever answered it: the tool, its hook, or a person supplying the
//!   output; not for a call that failed or was rejected (it produced nothing). A call that fails
//!   changes nothing: the context it set before failing is dropped.
//! - **One method takes a sync or an async closure.** A tool's executor ([`Tool::new`],
//!   [`Tool::typed`]) may be synchronous (it runs on Tokio's blocking pool) or async (its future
//!   is awaited); so may approval functions, agent-level rules and interactive hooks, for checks
//!   that do I/O (a synchronous one is called in place). The form is inferred from what the
//!   closure returns ([`ToolReturn`], [`TypedReturn`], [`Answer`]). A panic inside a check's
//!   future fails closed like a panic before it.
//! - **A failed run is data too.** `run`, `resume` and `retry` fail with a [`RunError`]: the
//!   [`AgentError`] and, when the run had started, its state (status `failed`) with everything
//!   that ran. [`Agent::retry`] asks the model again from that state (stored or not); calls of the
//!   interrupted turn are answered from what was recorded, so no tool runs twice. A `RunError`
//!   compares equal to its `AgentError` and converts into it with `?`.
//! - **Model output is untrusted.** Arguments are parsed and checked against the advertised schema
//!   before any of your code runs; `""` means `{}`; errors name the JSON path
//!   (`Invalid tool input: $.items[1]: "x" is not of type "integer"`), and every error of a call
//!   is listed, one per line (up to [`schema::MAX_LISTED_ERRORS`], the rest counted), so a model
//!   can fix them all in one turn.
//! - **The schema is the contract, where serde is looser.** A tool never runs on a value its schema
//!   rejects, nor on text the JSON parser refuses (a lone surrogate escape, `1e400`, nesting past 127
//!   levels), even in a field the input type skips. An integer-valued number (`1.0`, `1e2`, `-0`,
//!   up to 2^53) is an integer, as JSON Schema says, inside a tagged or untagged enum too; an
//!   `f32` refuses a number it would turn into
//!   an infinity or zero. A key the schema does not list is never read as a field (a
//!   `#[serde(alias)]`): the call is refused with a message naming the key to use. A
//!   `#[serde(untagged)]` enum whose variants read the same kind of JSON value (two structs, say) is
//!   refused when the tool is built, since serde may pick a variant whose schema rejects the value:
//!   tag it (`#[serde(tag = "...")]`), or make each variant a different kind of value. So is an
//!   input whose `#[serde(default)]` value fails the field's own schema (a `""` default under a
//!   `pattern` of `^[a-z]+$`): the model could never send that value, yet the tool would get it.
//! - **Model requests are retried**, three times by default with exponential backoff and jitter
//!   (0.5 s, 1 s, 2 s, each between half and all of it), when the error is one that may pass: rate
//!   limits, overload, transport failures, timeouts, and an empty answer (neither text nor tool
//!   calls), which is an error of its own kind, never a completed run with `""`. A provider's
//!   `retry-after` is honoured up to 60 s; a longer one fails at once. See [`RetryPolicy`].
//! - **Streaming costs nothing unless someone listens**: a model's deltas become
//!   [`Event::ModelDelta`] events only for a streamed run ([`RunRequest::stream`] and its siblings); an awaited run asks the
//!   model for a whole answer.
//! - **Tools run one at a time by default**, in call order; raise [`AgentBuilder::tool_concurrency`]
//!   (or [`RunRequest::tool_concurrency`] for one run) to run the calls of a turn concurrently. Results
//!   always reach the model in call order, one call's failure never drops another's result, and
//!   context updates and next-turn overrides apply in call order.
//! - **Timeouts and cancellation.** At a call's deadline the timeout is reported at once as a tool
//!   error (`Tool <id> timed out after <n>ms`), the call's future is dropped, and its
//!   [`ToolContext::cancellation_token`] fires. Time spent waiting for a concurrency slot does not
//!   count. Dropping a run (or its event stream) fires the tokens of its running calls too. What
//!   cannot be stopped: code that blocks a thread. Synchronous tools (a synchronous closure given to
//!   [`Tool::new`] or [`Tool::typed`], `#[tool]` on a plain `fn`) run on Tokio's blocking pool, so they never
//!   stall the async workers and the run goes on at the deadline, but their thread runs until the
//!   function returns: check [`ToolContext::is_cancelled`] in long loops (Tokio waits for blocking
//!   threads when its runtime shuts down, so such a thread also delays the process's exit). An async tool that blocks
//!   inside its future (a `std::thread::sleep`, a synchronous HTTP client) stalls its worker thread
//!   until it yields; use async I/O or `tokio::task::spawn_blocking` in async tools. Timeouts need a
//!   Tokio runtime with the time driver (`#[tokio::main]` has it).
//! - **Approval rules compose; none opens a gate by accident.** A call pauses for approval when its
//!   tool requires it or an agent-level [`AgentBuilder::approval`] rule says so; only an explicit
//!   [`AgentBuilder::approval_policy`], which sees the tool's own verdict, can waive a tool's gate.
//! - **One call, one question at a time.** A call goes through, in order: approval (the tool's gate
//!   or the agent's rule: pending kind `tool_approval`), else the agent's `human_review` (`hitl`),
//!   then the interactive hook (`on_tool_called`: it answers, or defers to a person, `hitl`), then
//!   an external tool's pause (`external_output`), then running. An approved call is not reviewed
//!   again, and [`Decision::ApproveAlways`] covers the gate and the review of later calls of the
//!   tool. A call asks at most once whether it may run; a gated interactive or external tool
//!   pauses a second time for its output, which is another question.
//! - **Approval fails closed**: an approval function that panics counts as "needs approval".
//!   Decisions are bound to call ids; resuming needs a decision for every pending call; a decision for
//!   a call that is not pending, a decision of the wrong kind, edited arguments or a supplied output
//!   that fail validation are errors, and nothing changes on any of them (`resume` borrows the state).
//!   A rejection's message reaches the model as `{"error": "Rejected by a person: <message>"}`.
//! - **A paused run is data.** [`RunState`] is versioned serde data; a state from an unknown version
//!   is refused, not misread. Results of automatic calls that ran beside a paused one are kept.
//!   Resuming the same stored state twice resumes it twice: deduplicate resumes where you store
//!   states if a call must never run twice.
//! - **`fail-run` stops the turn.** Once a call fails the run, no call of that turn that has not
//!   started starts, and calls still running are dropped with their cancellation tokens fired; all
//!   of them are recorded as cancelled ([`AgentError::Cancelled`]) on the failed state's steps.
//! - **Only offered tools run.** A call to a tool the turn did not offer (hidden by a next-turn
//!   `active_tools`, or any tool under [`ToolChoice::None`]) is treated as a call to an unknown
//!   tool, under [`AgentBuilder::on_unknown_tool`].
//! - **A refused resume is on the stream, told apart from a failure.** A [`ResumeRequest::stream`]
//!   that is refused (a missing decision, a bad signature, another agent's state, a run that is not
//!   paused) yields one `run.refused` event carrying the error's kind ([`AgentErrorKind`]), its text
//!   and the state as given; a run that fails ends with `run.failed`, which carries its kind too.
//! - **A model turn with two calls of the same id is refused** ([`AgentError::Model`]): decisions are
//!   bound to call ids, so the calls could not be told apart. Calls with an empty id get
//!   `call_<turn>_<index>`.
//!
//! ## How the crate is laid out
//!
//! The modules follow the stages of a call, lowest first; each uses only the ones above it in this
//! list (a test checks it, and `ARCHITECTURE.md` in the repository says more):
//!
//! - `error`: [`AgentError`]. Uses nothing.
//! - `model`: the conversation ([`Message`], [`ToolCall`]), the [`Model`] interface and one turn's
//!   request and response, [`ScriptedModel`]. Uses `error`.
//! - [`telemetry`]: the names of the spans and metrics a run emits (OpenTelemetry's GenAI
//!   conventions), content capture, trace context. Uses nothing.
//! - [`schema`]: schemas generated from Rust types and normalised, compiled [`Validator`](schema::Validator)s.
//!   Uses `error`.
//! - [`provider`]: real models over HTTP (features `openai`, `anthropic`). Uses `error`, `model`
//!   and `schema`.
//! - `decode`: argument text to typed input, enforcing the schema ([`ToolInput`]). Uses `schema`.
//! - `tool`: [`Tool`], [`ToolContext`], typed tools, the one per-call path ([`Tool::invoke`]), and
//!   what `#[tool]` expands to. Uses the stages above.
//! - `run`: [`Agent`], the loop, pausing and resuming ([`RunState`], [`Decisions`]), signed states,
//!   [`Event`]s. Uses every stage above.
//! - [`store`]: run stores, the drivers of durable runs ([`store::RunStore`], SQLite and
//!   PostgreSQL behind features). Uses `error`.
//! - [`durable`]: durable runs, journaled as they happen ([`durable::Runs`],
//!   [`durable::DurableAgent`]). Uses `run` and [`store`].
//! - [`worker`]: processes that take queued runs from a store and run them under leases
//!   ([`worker::Worker`]). Uses [`durable`].
//! - [`inbox`] (feature `inbox`): the approval inbox, web pages where people decide what stored
//!   runs wait for ([`inbox::Inbox`]). Uses [`durable`] and `run`.
//! - [`mcp`] (feature `mcp`): serving tools over MCP ([`mcp::McpServer`]) and using MCP
//!   servers' tools ([`mcp::McpClient`]). Uses every stage above.
//! - `otel` (feature `otel`): the spans and metrics of [`telemetry`] exported over OTLP
//!   (`otel::Telemetry`). Uses [`telemetry`].
//!
#![cfg_attr(docsrs, feature(doc_cfg))]

// The stages, lowest first. A module uses only the modules declared before it (and its own
// submodules); `tests/architecture.rs` checks this, and ARCHITECTURE.md explains the cut.
pub mod limits;
mod error;
mod model;
pub mod telemetry;
pub mod schema;
pub mod provider;
mod decode;
mod tool;
mod run;
pub mod store;
pub mod durable;
pub mod worker;
#[cfg(feature = "inbox")]
#[cfg_attr(docsrs, doc(cfg(feature = "inbox")))]
pub mod inbox;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub mod otel;

pub use error::{AgentError, AgentErrorKind, DatabaseError, StoreError};
pub use error::{ModelError, ModelErrorKind};
pub use model::message::{Message, ToolCall};
pub use model::request::{
    DeltaSink, FinishReason, Model, ModelDelta, ModelInfo, ModelRequest, ModelResponse,
    RequestMeta, ToolChoice, ToolDefinition, TurnParams, Usage,
};
pub use model::scripted::ScriptedModel;
pub use run::agent::{Agent, AgentBuilder, RetryPolicy};
pub use run::entry::{ContinueRequest, ResumeRequest, RetryRequest, RunRequest};
pub use run::event::{Event, EventStream};
pub use run::state::{
    Decision, Decisions, PendingCall, PendingKind, RunError, RunResult, RunState, RunStatus,
    STATE_VERSION, ToolStep,
};
pub use tokio_util::sync::CancellationToken;

pub use decode::ToolInput;
/// The JSON Schema crate phaseo-agent reads input types with (schemars 1.x), re-exported: derive
/// `phaseo_agent::schemars::JsonSchema` (with `#[schemars(crate = "phaseo_agent::schemars")]`)
/// to be sure of the version, or depend on `schemars = "1"` yourself.
pub use schemars;
/// The JSON crate of the public API (`Value`, `json!`), re-exported so a crate that only uses
/// phaseo-agent can build arguments, outputs and decisions without its own dependency.
pub use serde_json;
pub use tool::context::ToolContext;
pub use tool::definition::{IntoTool, IntoTools, OnError, Tool, ToolEvent, ToolHints, ToolTypes};
pub use tool::resource::{Res, Resources};
pub use tool::returns::{Answer, Awaited, Blocking, ToolReturn, TypedReturn};
pub use tool::typed::ToolOutput;

/// The README's examples, compiled and run as doctests so that they cannot drift from the API.
/// They use the providers, MCP, SQLite, PostgreSQL, the inbox and OTLP export, so they run where
/// those features are on (as in `cargo test --workspace --all-features`).
#[cfg(all(
    doctest,
    feature = "openai",
    feature = "anthropic",
    feature = "mcp",
    feature = "sqlite",
    feature = "postgres",
    feature = "inbox",
    feature = "otel"
))]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

/// The recipes (`docs/recipes.md`), compiled and run as doctests, with the same features.
#[cfg(all(doctest, feature = "openai", feature = "anthropic", feature = "mcp"))]
#[doc = include_str!("../../docs/recipes.md")]
struct RecipeDoctests;

/// The `#[tool]` attribute macro: see the crate docs of typed tools.
pub use phaseo_agent_macros::tool;

/// The `#[tools]` attribute macro: the `#[tool]` methods of an `impl` block as tools.
pub use phaseo_agent_macros::tools;

/// Not public API: what code generated by `#[tool]` names. Only `phaseo-agent-macros` may use it;
/// it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use crate::decode::ToolInput;
    pub use crate::tool::call::{CallFuture, Produced, Start};
    pub use crate::tool::context::ToolContext;
    pub use crate::tool::definition::{IntoTool, IntoTools, MethodTools, OnError, Tool, ToolTypes};
    pub use crate::tool::macro_support::{
        Approve, Approver, Arg, ByInput, ByInputAndContext, CheckError, Context, ExternalOutput,
        Failure, NextTurn, OnToolCalled, Output, Transform, Validate, approval, approver,
        event_schema, external, finish, finish_ok, input_schema, next_turn, on_response_received,
        on_tool_called, output_schema, produce, produce_ok, typed_blocking,
    };
    pub use crate::tool::macro_support::{OutputType, StructuredOutput, UnstructuredOutput};
    pub use crate::tool::macro_support::{Resource, declare, must_be_send};
    pub use crate::tool::plain_args::{ArgKey, arg_or_missing, arg_value, skip_value};
    pub use crate::tool::resource::Res;
    pub use crate::tool::typed::{Input, ToolOutput, typed_start};
    pub use core;
    pub use futures;
    pub use schemars;
    pub use serde;
    pub use serde_json;
    pub use std::borrow::Cow;
    pub use std::boxed::Box;
    pub use std::string::String;
    pub use std::sync::Arc;
    pub use std::vec::Vec;
}

/// Not public API: hooks into the runtime's stages for this repository's benchmarks and
/// differential tests. They change without notice.
#[doc(hidden)]
pub mod __internals {
    use serde_json::Value;

    /// The typed decoder a `Tool::typed` tool uses.
    pub fn typed_decoder<I: crate::decode::ToolInput>()
    -> Result<impl Fn(&str) -> Result<I, String>, String> {
        crate::decode::typed_decoder::<I>()
    }

    /// Whether the strict decoder accepts `text` for `schema`, reading it as a `serde_json::Value`
    /// and as `serde::de::IgnoredAny` (both must agree); `Err` when the schema has keywords the
    /// strict decoder does not check.
    pub fn strict_accepts(schema: &Value, text: &str) -> Result<bool, String> {
        crate::decode::strict_accepts(schema, text)
    }

    /// The bound on the memory of the `Value` an argument text parses to, from one pass over it.
    pub fn parsed_size(text: &str) -> usize {
        crate::limits::parsed_size(text)
    }

    /// The most memory the parsed form of an argument text of this length may take.
    pub fn parse_budget(text_len: usize) -> usize {
        crate::decode::text::parse_budget(text_len)
    }
}
