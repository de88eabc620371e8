//! Parameter schemas: generation from Rust types (schemars 1.x), normalisation, and compiled validators.
//!
//! A schema is generated and normalised once, when a tool is built, never per call:
//!
//! - no `$schema` and no root `title` (schemars titles the root with the type's name, noise to a
//!   model; a title that [`schema_for`] knows came from a doc comment is folded into the
//!   description instead);
//! - subschemas inlined, so no `$ref` is left for a provider to reject; a recursive type cannot be
//!   inlined, so it keeps its definition under the root's `$defs` and its `$ref`s point there (or
//!   to `#`, for the root type itself), and no `$ref` dangles;
//! - inlining is bounded: past 100,000 values or 64 levels of nesting once inlined (a schema of
//!   definitions that each refer to the next one twice doubles with each), [`normalize`] keeps
//!   every definition under `$defs` instead, its `$ref`s pointing there, so its output is never
//!   larger than its input. An MCP server's schema is refused instead (see
//!   `McpClientLimits::max_schema_nodes`); no generated schema comes near the bound;
//! - a nested `title` (schemars takes it from the first paragraph of a doc comment) is folded into
//!   `description`, so no text is lost;
//! - the root is always `"type": "object"`; a tool with no parameters advertises
//!   `{"type":"object","properties":{}}`.
//!
//! [`dialect`] rewrites a normalised schema for a provider (OpenAI strict, Anthropic, Gemini).
//!
//! Stage 2, above `error`; uses no other stage of the crate.

pub(crate) mod inline;
pub(crate) mod generate;
pub(crate) mod validate;
pub mod dialect;

pub use generate::{normalize, schema_for};
pub use validate::{MAX_LISTED_ERRORS, Validator};
