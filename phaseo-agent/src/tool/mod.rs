//! Tools: what a tool is, and everything the runtime does around one call of it.
//!
//! Stage 4, above `error`, `model`, `schema` and `decode`. Its files, lowest first (each uses only
//! the ones before it):
//!
//! - `resource`: [`Res`](resource::Res) and [`Resources`](resource::Resources), the typed values
//!   an agent lends its tools;
//! - `context`: [`ToolContext`](context::ToolContext), what a running call knows and reports;
//! - `call`: one call's parsed input, the future it becomes and what it produces;
//! - `finish`: the future of a started typed call, its output produced;
//! - `erase`: typed functions as `Start`s (an async one's future type erased, a synchronous one
//!   sent to the blocking pool);
//! - `returns`: what a tool's closures return, an answer or a future of it
//!   ([`ToolReturn`](returns::ToolReturn), [`TypedReturn`](returns::TypedReturn),
//!   [`Answer`](returns::Answer)), and how each form runs;
//! - `definition`: [`Tool`](definition::Tool), its constructors over JSON, approval, timeout and
//!   error policy, and `IntoTool`;
//! - `fields`: a tool's other fields (validators, hooks, next-turn overrides, exclusivity, output
//!   caps);
//! - `invoke`: the one per-call path (deadline, panic, output checks, cap);
//! - `typed`: typed tools, what `#[tool]` expands to;
//! - `macro_support`: what the expansion of `#[tool]` calls (through `__private`);
//! - `plain_args`: the shared parts of the `Deserialize` impl `#[tool]` writes for its arguments
//!   struct.

pub(crate) mod resource;
pub(crate) mod context;
pub(crate) mod call;
pub(crate) mod finish;
pub(crate) mod erase;
pub(crate) mod returns;
pub(crate) mod definition;
pub(crate) mod fields;
pub(crate) mod invoke;
pub(crate) mod typed;
pub(crate) mod macro_support;
pub(crate) mod plain_args;
