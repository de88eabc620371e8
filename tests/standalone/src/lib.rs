//! A crate whose only dependency is `phaseo-agent`, with no serde, serde_json, schemars or tokio of
//! its own, defining tools with `#[tool]` and plain arguments. Its tests run them through an agent
//! on a minimal executor made of `std` (sync tools run inline outside a Tokio runtime).

use phaseo_agent::{ToolContext, tool};

/// Add two numbers.
#[tool]
pub fn add(
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
) -> i64 {
    a + b
}

/// Greet someone; a loud greeting needs approval.
#[tool(require_approval = is_loud)]
pub async fn greet(name: &str, loud: Option<bool>, ctx: &ToolContext) -> Result<String, String> {
    if name.is_empty() {
        return Err(format!("no name given in run {}", ctx.run_id()));
    }
    let mark = if loud == Some(true) { "!" } else { "." };
    Ok(format!("Hello, {name}{mark}"))
}

fn is_loud(args: &GreetArgs) -> bool {
    args.loud == Some(true)
}

/// Ask a person a question; the answer comes from outside the process.
#[tool(external)]
pub fn ask(question: String) -> String;

#[cfg(test)]
mod tests {
    use std::future::IntoFuture;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake};

    use phaseo_agent::{
        Agent, Decisions, Message, ModelResponse, PendingKind, ScriptedModel, ToolCall, ToolContext,
    };

    use super::*;

    /// Runs a future to completion on this thread.
    fn block_on<F: IntoFuture>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Arc::new(Unpark(std::thread::current())).into();
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future.into_future());
        loop {
            match future.as_mut().poll(&mut cx) {
                Poll::Ready(output) => return output,
                Poll::Pending => std::thread::park(),
            }
        }
    }

    fn call(id: &str, tool: &str, arguments: &str) -> ModelResponse {
        ModelResponse::tool_calls([ToolCall::raw(id, tool, arguments)])
    }

    fn results(model: &ScriptedModel) -> Vec<String> {
        let requests = model.requests();
        let messages = &requests.last().expect("the model was called").messages;
        messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, .. } => Some(content.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn plain_argument_tools_run_through_an_agent() {
        let model = ScriptedModel::new()
            .record_requests()
            .turn(call("call_1", "add", r#"{"a": 2, "b": 40}"#))
            .turn(call("call_2", "greet", r#"{"name": "Ada"}"#))
            .text("Done.");
        let agent = Agent::builder("standalone")
            .model(model.clone())
            .tool(add)
            .tool(greet)
            .tool(ask)
            .build()
            .unwrap();
        let result = block_on(agent.run("Add, then greet")).unwrap();
        assert_eq!(result.output(), Some("Done."));
        assert_eq!(results(&model), ["42", r#""Hello, Ada.""#]);

        let schema = model.requests()[0].tools[0].parameters.to_string();
        assert!(
            schema.contains(r#""description":"The first number.""#),
            "{schema}"
        );
    }

    #[test]
    fn approval_and_external_calls_pause() {
        let model = ScriptedModel::new()
            .record_requests()
            .turn(ModelResponse::tool_calls([
                ToolCall::raw("call_1", "greet", r#"{"name": "Bo", "loud": true}"#),
                ToolCall::raw("call_2", "ask", r#"{"question": "Why?"}"#),
            ]))
            .text("Done.");
        let agent = Agent::builder("standalone")
            .model(model)
            .tool(greet)
            .tool(ask)
            .build()
            .unwrap();
        let paused = block_on(agent.run("Greet loudly, ask why")).unwrap();
        let kinds: Vec<PendingKind> = paused.pending().iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [PendingKind::ToolApproval, PendingKind::ExternalOutput]
        );
        // Without serde_json of its own, this crate answers with a `Value` it was handed: the
        // question itself, which decodes as the tool's `String` output.
        let answer = paused.pending()[1].arguments["question"].clone();
        let decisions = Decisions::new().approve("call_1").output("call_2", answer);
        let done = block_on(agent.resume(&paused.state, decisions)).unwrap();
        assert_eq!(done.output(), Some("Done."));
    }

    #[test]
    fn the_functions_stay_callable() {
        assert_eq!(add(1, 2), 3);
        let ctx = ToolContext::detached();
        assert_eq!(
            block_on(greet("Cy", None, &ctx)),
            Ok("Hello, Cy.".to_owned())
        );
        assert_eq!(
            block_on(greet("", None, &ctx)),
            Err("no name given in run detached".to_owned())
        );
    }
}
