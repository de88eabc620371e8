//! Names a user may well have in scope must not change what the expansion means.
#![allow(dead_code)]

mod core {}
mod std {}
mod serde {}
mod schemars {}
mod futures {}
struct Result;
struct Ok;
struct Err;
struct String;
struct Box;
struct Vec;
struct Send;
struct Infallible;
struct Tool;
struct ToolContext;
struct IntoTool;
trait Deref {}
trait Future {}
trait Context {}
fn into_tool() {}

mod tools {
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
}

fn main() {
    let _ = phaseo_agent::Agent::builder("hygiene")
        .model(phaseo_agent::ScriptedModel::new())
        .tool(tools::lookup)
        .tool(tools::add)
        .tool(tools::ping)
        .tool(tools::ask)
        .build()
        .unwrap();
    let _ = tools::add(1, 2, "x", None);
}
