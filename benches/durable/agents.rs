//! The bench's agents: a scripted model (answering by position, at once or after a sleep) and
//! two tools, `lookup` and `send_email` (which waits for approval).

use std::time::Duration;

use futures::future::BoxFuture;
use phaseo_agent::serde_json::json;
use phaseo_agent::{Agent, Model, ModelError, ModelRequest, ModelResponse, Tool, ToolCall};

use crate::support::ByPosition;

/// About 200 bytes of text, as in the checkpointer baseline.
pub fn text(i: usize) -> String {
    format!("Step {i}: ")
        .chars()
        .chain(
            "the quick brown fox jumps over the lazy dog; "
                .chars()
                .cycle(),
        )
        .take(200)
        .collect()
}

/// Turn `i`: `calls` lookup calls.
pub fn lookup_turn(i: usize, calls: usize) -> ModelResponse {
    ModelResponse::tool_calls((0..calls).map(|j| {
        ToolCall::new(
            format!("call_{i}_{j}"),
            "lookup",
            json!({"query": text(i * 100 + j)}),
        )
    }))
}

/// `turns` tool turns of `calls` lookup calls each, then an answer; the model answers after
/// `delay` (none: at once).
pub fn tool_run(turns: usize, calls: usize, delay: Option<Duration>) -> Agent {
    let mut script: Vec<ModelResponse> = (0..turns).map(|i| lookup_turn(i, calls)).collect();
    script.push(ModelResponse::text(text(100)));
    let model = Sleepy {
        inner: ByPosition(script),
        delay,
    };
    let lookup = Tool::new(
        "lookup",
        "Look something up",
        json!({"type": "object"}),
        |input, _| Ok(json!({"found": input["query"]})),
    );
    let send = Tool::new(
        "send_email",
        "Send an email",
        json!({"type": "object"}),
        |v, _| Ok(v),
    )
    .require_approval();
    Agent::builder("bench")
        .model(model)
        .tool(lookup)
        .tool(send)
        .max_turns(10_000)
        .build()
        .expect("the bench's agent")
}

/// A scripted model that answers after a delay, as a model that takes its time. The delay is
/// kept by an OS thread, and the answer wakes the run as a network answer would: tokio's own
/// timer rounds every sleep up to its next whole millisecond, which charged a run one more
/// millisecond a turn whenever its own work between two answers crossed a tick.
struct Sleepy {
    inner: ByPosition,
    delay: Option<Duration>,
}

impl Model for Sleepy {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            if let Some(delay) = self.delay {
                let (answered, answer) = tokio::sync::oneshot::channel();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = answered.send(());
                });
                let _ = answer.await;
            }
            self.inner.respond(request).await
        })
    }
}
