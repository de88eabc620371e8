//! The one-call agent run, shared by `benches/run_cost.rs` (its time, against the dispatch
//! floor) and the root package's `tests/run_allocations.rs` (its heap allocations): a model that
//! answers at once calls one small typed `#[tool]` on its first turn and answers in text on its
//! second; nobody listens to the run's events.

use futures::future::BoxFuture;
use phaseo_agent::{Agent, Message, Model, ModelError, ModelRequest, ModelResponse, ToolCall};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The input of the small typed tool: a string, an integer, an `Option` and a `Vec` (the same
/// shape as the root package's `benches/dispatch.rs`).
#[derive(Deserialize, JsonSchema)]
pub struct Lookup {
    query: String,
    limit: u32,
    cursor: Option<String>,
    tags: Vec<String>,
}

/// What the tool returns.
#[derive(Serialize)]
pub struct Found {
    query: String,
    count: u32,
    resumed: bool,
}

/// The tool's body, also called directly by the serde floor.
pub fn lookup(input: Lookup) -> Found {
    Found {
        count: input.limit.min(input.tags.len() as u32 + 3),
        resumed: input.cursor.is_some(),
        query: input.query,
    }
}

/// Look up documents.
#[phaseo_agent::tool]
pub async fn lookup_tool(input: Lookup) -> Found {
    lookup(input)
}

/// The arguments the model sends.
pub const ARGS: &str =
    r#"{"query": "refund policy", "limit": 5, "cursor": null, "tags": ["billing", "eu"]}"#;

/// A model that answers at once: a call of `lookup_tool` while the last message is the user's,
/// a text answer once the tool's result is in.
pub struct AtOnce;

impl Model for AtOnce {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let response = match request.messages.last() {
            Some(Message::Tool { .. }) => ModelResponse::text("Found 2 documents."),
            _ => ModelResponse::tool_calls([ToolCall::raw("call_1", "lookup_tool", ARGS)]),
        };
        Box::pin(std::future::ready(Ok(response)))
    }
}

/// The agent of the run: the model above and the one tool.
pub fn agent() -> Agent {
    Agent::builder("bench")
        .instructions("Answer from the documents.")
        .model(AtOnce)
        .tool(lookup_tool)
        .build()
        .expect("the agent builds")
}

/// One run, checked: the tool ran once and the model answered.
pub async fn run_once(agent: &Agent) {
    let done = agent
        .run("What is the refund policy?")
        .await
        .expect("the run completes");
    assert_eq!(done.output(), Some("Found 2 documents."));
}
