//! `#[tool]` expansions of every form compile cleanly under strict lints: nothing the macro writes
//! may trip a user's `#![deny(...)]` (the clippy lints are checked by `cargo clippy --all-targets`).
#![deny(
    unused,
    unused_qualifications,
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    clippy::all,
    clippy::pedantic
)]

/// Tools of every form, public, so `missing_docs` applies to what the macro generates.
pub mod tools {
    use phaseo_agent::serde_json::Value;
    use phaseo_agent::{ToolContext, TurnParams, tool};
    use serde::{Deserialize, Serialize};

    /// What to fetch.
    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    pub struct Fetch {
        /// The ticket.
        pub id: u64,
    }

    /// A ticket.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct Ticket {
        /// Its title.
        pub title: String,
    }

    /// Whether a fetch needs approval.
    #[must_use]
    pub fn is_secret(input: &Fetch) -> bool {
        input.id == 0
    }

    /// Async, a typed input, the context, fallible, approval by function.
    ///
    /// # Errors
    ///
    /// When the ticket does not exist.
    #[tool(id = "fetch-ticket", require_approval = is_secret)]
    pub async fn fetch(input: Fetch, ctx: &ToolContext) -> Result<Ticket, String> {
        ctx.emit_progress(input.id).map_err(|e| e.to_string())?;
        tokio::task::yield_now().await;
        Ok(Ticket {
            title: format!("#{}", input.id),
        })
    }

    /// Sync, plain arguments with a borrowed string and an option, approval flag.
    #[tool(require_approval)]
    #[must_use]
    pub fn label(
        /// The text.
        text: &str,
        /// How many times.
        times: Option<usize>,
    ) -> String {
        text.repeat(times.unwrap_or(1))
    }

    /// Sync, no arguments, no output.
    #[tool]
    pub fn ping() {}

    /// Async, plain arguments, `std::io::Result`.
    ///
    /// # Errors
    ///
    /// When the file cannot be read.
    #[tool(crate = phaseo_agent)]
    pub async fn size(path: String, _ctx: &ToolContext) -> std::io::Result<u64> {
        tokio::task::yield_now().await;
        std::fs::metadata(path).map(|m| m.len())
    }

    /// Async, plain arguments with a borrowed string and a generic one, and the context.
    #[tool]
    pub async fn greet(
        /// Who.
        name: &str,
        /// How many times.
        times: u32,
        ctx: &ToolContext,
    ) -> String {
        tokio::task::yield_now().await;
        format!("{name} x{times} at step {}", ctx.step_index())
    }

    /// External, plain arguments.
    #[tool(external)]
    pub async fn ask(question: String) -> String;

    /// External, a typed input.
    #[tool(external)]
    pub fn lookup(input: Fetch) -> Ticket;

    /// Whether a fetch needs approval, from the input and the call's context.
    #[must_use]
    pub fn is_secret_here(input: &Fetch, ctx: &ToolContext) -> bool {
        input.id == 0 || ctx.context()["secret"] == true
    }

    /// Keeps a value as it is.
    ///
    /// # Errors
    ///
    /// Never.
    pub fn keep(value: Value) -> Result<Value, String> {
        Ok(value)
    }

    /// Answers a call at once.
    #[must_use]
    pub fn answer(input: &Value, _ctx: &ToolContext) -> Option<Value> {
        Some(input.clone())
    }

    /// Keeps the next turn as it is.
    #[must_use]
    pub fn same_turn(_input: &Value, current: &TurnParams) -> TurnParams {
        current.clone()
    }

    /// Async, a typed input, every field key.
    ///
    /// # Errors
    ///
    /// When the ticket does not exist.
    #[tool(
        id = "fetch-checked",
        require_approval = is_secret_here,
        timeout_ms = 3_000,
        on_error = "return-to-model",
        exclusive,
        max_output_chars = 2_000,
        input_schema = keep,
        output_schema = keep,
        event_schema = keep,
        on_tool_called = answer,
        on_response_received = keep,
        next_turn = same_turn
    )]
    pub async fn fetch_checked(input: Fetch) -> Result<Ticket, String> {
        tokio::task::yield_now().await;
        Ok(Ticket {
            title: format!("#{}", input.id),
        })
    }

    /// External, plain arguments, the keys that apply to a call answered from outside.
    #[tool(external, on_error = "fail-run", on_tool_called = answer, on_response_received = keep)]
    pub fn confirm(question: String) -> bool;
}

#[tokio::test]
async fn the_linted_tools_build_an_agent() {
    let agent = phaseo_agent::Agent::builder("lints")
        .model(phaseo_agent::ScriptedModel::new())
        .tool(tools::fetch)
        .tool(tools::label)
        .tool(tools::ping)
        .tool(tools::size)
        .tool(tools::greet)
        .tool(tools::ask)
        .tool(tools::lookup)
        .tool(tools::fetch_checked)
        .tool(tools::confirm)
        .build()
        .unwrap();
    assert_eq!(agent.tools().len(), 9);
    assert_eq!(tools::label("ab", Some(2)), "abab");
}
