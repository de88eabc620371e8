//! Names a user may well have in scope must not change what the expansion means.
#![allow(dead_code)]

// `serde` and `schemars` stay out of the tools' scope: the user's own derives name them.
mod serde {}
mod schemars {}

/// Names a user may have in scope, glob-imported by the tools (a glob import shadows the prelude).
#[allow(non_camel_case_types)]
mod names {
    pub mod core {}
    pub mod std {}
    pub mod futures {}
    pub mod serde_json {}
    pub struct Result;
    pub struct Ok;
    pub struct Err;
    pub struct String;
    pub struct Box;
    pub struct Vec;
    pub struct Send;
    pub struct Infallible;
    pub struct Tool;
    pub struct ToolContext;
    pub struct IntoTool;
    pub struct Duration;
    pub struct OnError;
    pub struct Value;
    pub struct TurnParams;
    pub struct FailRun;
    pub trait Deref {}
    pub trait Future {}
    pub trait Context {}
    pub fn into_tool() {}
    pub fn timeout() {}
    pub fn exclusive() {}
    pub fn input_schema() {}
    pub fn on_tool_called() {}
    pub fn next_turn() {}
}

mod tools {
    #[allow(unused_imports)]
    use crate::names::*;
    use phaseo_agent::tool;

    #[derive(::serde::Deserialize, ::schemars::JsonSchema)]
    pub struct Lookup {
        pub id: u64,
    }

    fn is_even(input: &Lookup) -> bool {
        input.id % 2 == 0
    }

    /// Async, a typed input, the context, a fallible output.
    #[tool(require_approval = is_even)]
    pub async fn lookup(
        input: Lookup,
        ctx: &::phaseo_agent::ToolContext,
    ) -> ::core::result::Result<u64, ::std::string::String> {
        let _ = ctx.run_id();
        ::core::result::Result::Ok(input.id)
    }

    /// Sync, plain arguments, an infallible output.
    #[tool(require_approval)]
    pub fn add(a: i64, b: i64, name: &str, note: ::core::option::Option<i64>) -> i64 {
        a + b + name.len() as i64 + note.unwrap_or(0)
    }

    /// Async, no arguments, no output.
    #[tool]
    pub async fn ping() {}

    /// External, plain arguments.
    #[tool(external)]
    pub fn ask(question: ::std::string::String) -> ::std::string::String;

    type Json = ::serde_json::Value;

    fn same(value: Json) -> ::core::result::Result<Json, ::std::string::String> {
        ::core::result::Result::Ok(value)
    }

    fn answer(input: &Json, _ctx: &::phaseo_agent::ToolContext) -> ::core::option::Option<Json> {
        ::core::option::Option::Some(input.clone())
    }

    fn unchanged(
        _input: &Json,
        current: &::phaseo_agent::TurnParams,
    ) -> ::phaseo_agent::TurnParams {
        current.clone()
    }

    fn by_context(args: &CheckArgs, ctx: &::phaseo_agent::ToolContext) -> bool {
        args.text.is_empty() || ctx.step_index() > 3
    }

    /// Async, plain arguments, every field key.
    #[tool(
        require_approval = by_context,
        timeout_ms = 1_000,
        on_error = "fail-run",
        exclusive,
        max_output_chars = 2_000,
        input_schema = same,
        output_schema = same,
        event_schema = same,
        on_tool_called = answer,
        on_response_received = same,
        next_turn = unchanged
    )]
    pub async fn check(text: ::std::string::String) -> usize {
        text.len()
    }
}

fn main() {
    let _ = phaseo_agent::Agent::builder("hygiene")
        .model(phaseo_agent::ScriptedModel::new())
        .tool(tools::lookup)
        .tool(tools::add)
        .tool(tools::ping)
        .tool(tools::ask)
        .tool(tools::check)
        .build()
        .unwrap();
    let _ = tools::add(1, 2, "x", None);
}
