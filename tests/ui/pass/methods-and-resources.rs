//! Every form a `#[tools]` block and a resource parameter take.

use std::sync::Arc;

use phaseo_agent::serde_json::Value;
use phaseo_agent::{Agent, Res, ScriptedModel, ToolContext, tool, tools};

struct Pool;
struct Client;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

pub struct Service {
    name: String,
}

#[tools]
impl Service {
    /// Typed input, context and a resource.
    #[tool(timeout_ms = 1_000, on_error = "fail-run", max_output_chars = 100)]
    pub async fn search(&self, input: Query, ctx: &ToolContext, db: Res<Pool>) -> Result<String, String> {
        let _ = db;
        Ok(format!("{} {} {}", self.name, input.text, ctx.run_id()))
    }

    /// Plain arguments, a borrowed string, a synchronous body.
    #[tool(require_approval = Self::risky, exclusive)]
    fn rename(&self, /** The new name. */ to: &str, #[serde(default)] force: bool) -> String {
        format!("{} -> {to} ({force})", self.name)
    }

    /// An `Arc` receiver and two resources.
    #[tool(strict)]
    async fn background(self: Arc<Self>, client: Res<Client>, db: Res<Pool>) -> u32 {
        let _ = (client, db, self);
        1
    }

    /// No receiver.
    #[tool(input_schema = Self::check, next_turn = Self::same)]
    async fn ping() -> bool {
        true
    }

    /// From outside.
    #[tool(external)]
    async fn outside(&self, id: u32) -> Value;

    #[cfg(any())]
    /// Compiled out.
    #[tool]
    async fn gone(&self) {}

    fn risky(args: &RenameArgs) -> bool {
        args.force
    }

    fn check(input: Value) -> Result<Value, String> {
        Ok(input)
    }

    fn same(_: &Value, current: &phaseo_agent::TurnParams) -> phaseo_agent::TurnParams {
        current.clone()
    }
}

/// A free function with a resource and no arguments.
#[tool]
fn pool_size(db: Res<Pool>) -> usize {
    let _ = db;
    4
}

fn main() {
    let agent = Agent::builder("a")
        .model(ScriptedModel::new())
        .tools((Service { name: "s".into() }, pool_size))
        .resource(Pool)
        .resource(Client)
        .build()
        .unwrap();
    assert_eq!(agent.tools().len(), 6);
}
