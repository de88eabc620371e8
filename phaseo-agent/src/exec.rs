//! Executing tool calls: timeouts, cancellation, panics, the concurrency limit, call order, output
//! checks and caps, and the error policy.

use futures::{FutureExt, StreamExt};
use serde_json::Value;

use crate::event::Event;
use crate::run::ToolStep;
use crate::runner::{Runner, error_content, tool_error_event};
use crate::tool::{Parsed, Produced, panic_error};
use crate::{AgentError, OnError, Tool, ToolContext};

/// One call to run: its slot in the turn, the tool's index, its parsed input and its context.
pub(crate) type Run = (usize, usize, Parsed, ToolContext);

/// What one executed call left behind.
pub(crate) struct Outcome {
    pub(crate) step: ToolStep,
    pub(crate) new_context: Option<Value>,
    /// The tool and the call's input, when the tool changes the next turn.
    pub(crate) next_turn: Option<(usize, Value)>,
    /// Set when the call failed under `fail-run`.
    pub(crate) fail: Option<AgentError>,
}

pub(crate) struct Execution<'a> {
    pub(crate) runner: &'a Runner,
}

impl Execution<'_> {
    /// Runs calls up to the concurrency limit, returning outcomes in call order. An exclusive tool's
    /// call runs alone: the calls before it finish first, and the calls after it wait.
    pub(crate) async fn run_all(&self, runs: Vec<Run>) -> Vec<(usize, Outcome)> {
        let tools = &self.runner.agent.inner.tools;
        let mut out = Vec::with_capacity(runs.len());
        let mut batch = Vec::new();
        for run in runs {
            if tools[run.1].exclusive {
                out.extend(self.run_batch(std::mem::take(&mut batch)).await);
                out.push(self.run_one(run).await);
            } else {
                batch.push(run);
            }
        }
        out.extend(self.run_batch(batch).await);
        out
    }

    async fn run_batch(&self, batch: Vec<Run>) -> Vec<(usize, Outcome)> {
        // `buffer_unordered` starts a call as soon as any place is free (`buffered` would keep a place
        // taken by a call that finished before an earlier one), and only then, so a call's timeout
        // never counts time spent queued. Outcomes are put back in call order.
        let mut outcomes: Vec<(usize, Outcome)> = futures::stream::iter(batch)
            .map(|run| self.run_one(run))
            .buffer_unordered(self.runner.concurrency)
            .collect()
            .await;
        outcomes.sort_unstable_by_key(|(slot, _)| *slot);
        outcomes
    }

    async fn run_one(&self, (slot, index, parsed, ctx): Run) -> (usize, Outcome) {
        let inner = &self.runner.agent.inner;
        let tool = &inner.tools[index];
        let call = ctx.tool_call().clone();
        self.runner.emit(Event::ToolCalled { call: call.clone() });
        // If the run is dropped mid-call, the guard fires the call's cancellation token.
        let guard = ctx.cancellation_token().clone().drop_guard();
        let result = invoke(tool, parsed, &ctx, inner.settings.default_timeout).await;
        guard.disarm();
        let record = ctx.take_record();
        let result = match (result, record.event_error) {
            (Ok(_), Some(event_error)) => Err(event_error),
            (result, _) => result,
        };
        let step_index = ctx.step_index();
        let mut outcome = Outcome {
            step: ToolStep {
                step_index,
                call_id: call.id.clone(),
                tool: call.name.clone(),
                preliminary_results: record.progress,
                content: String::new(),
                is_error: false,
            },
            new_context: None,
            next_turn: None,
            fail: None,
        };
        match result {
            Ok(content) => {
                let content = cap(
                    content,
                    tool.max_output_chars.or(inner.settings.max_output_chars),
                );
                self.runner.emit(Event::ToolResult {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    content: content.clone(),
                });
                outcome.step.content = content;
                outcome.new_context = record.new_context;
                if tool.next_turn.is_some() {
                    outcome.next_turn = Some((index, tool.input_value(&call.arguments)));
                }
            }
            Err(error) => match tool.on_error.unwrap_or(inner.settings.on_error) {
                OnError::ReturnToModel => {
                    let content = error_content(&error);
                    self.runner
                        .emit(tool_error_event(&call, &error, Some(content.clone())));
                    outcome.step.content = content;
                    outcome.step.is_error = true;
                }
                OnError::FailRun => {
                    self.runner.emit(tool_error_event(&call, &error, None));
                    outcome.step.content = error_content(&error);
                    outcome.step.is_error = true;
                    outcome.fail = Some(error);
                }
            },
        }
        (slot, outcome)
    }
}

/// Runs a tool's executor on parsed input: the timeout raced against it, a panic caught, the output
/// checked. Returns the result text (uncapped).
pub(crate) async fn invoke(
    tool: &Tool,
    parsed: Parsed,
    ctx: &ToolContext,
    default_timeout: Option<std::time::Duration>,
) -> Result<String, AgentError> {
    if !tool.executable {
        return Err(AgentError::tool(format!(
            "tool {} has no executor",
            tool.id
        )));
    };
    let want_value = !tool.output_checks.is_empty();
    // Starting a typed call runs the tool's function up to its first `.await`: catch a panic there too.
    let start = || parsed.start(tool.runs.as_deref(), ctx, want_value);
    let call = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(start)) {
        Ok(call) => std::panic::AssertUnwindSafe(call).catch_unwind(),
        Err(payload) => return Err(panicked(tool, payload)),
    };
    let produced = match tool.timeout.or(default_timeout) {
        // Boxed, so that a call without a timeout does not carry the timer's state in its future.
        Some(limit) => match Box::pin(tokio::time::timeout(limit, call)).await {
            Ok(done) => done,
            Err(_) => {
                // The call's future is already dropped (the timeout owned it); tell the tool too.
                ctx.cancellation_token().cancel();
                return Err(AgentError::Timeout {
                    tool: tool.id.clone(),
                    ms: limit.as_millis(),
                });
            }
        },
        None => call.await,
    };
    // A panic caught here, or on a blocking tool's thread, is named after the tool.
    let produced = produced
        .unwrap_or_else(|payload| Err(panic_error(payload)))
        .map_err(|e| named(tool, e))?;
    match produced {
        Produced::Text(text) => Ok(text),
        Produced::Value(value) => Ok(tool.check_output(value)?.to_string()),
    }
}

fn panicked(tool: &Tool, payload: Box<dyn std::any::Any + Send>) -> AgentError {
    named(tool, panic_error(payload))
}

/// Fills in the tool id of a panic error (`panic_error` does not know it).
fn named(tool: &Tool, error: AgentError) -> AgentError {
    match error {
        AgentError::Panicked { message, .. } => AgentError::Panicked {
            tool: tool.id.clone(),
            message,
        },
        other => other,
    }
}

/// Caps a result at `max` characters: a longer one keeps its first `max - max / 2` and last `max / 2`
/// characters around a notice of how many were cut. Characters are Unicode scalar values, so a cut
/// never splits one.
pub(crate) fn cap(content: String, max: Option<usize>) -> String {
    let Some(max) = max else { return content };
    // Cheap early exit: a string of at most `max` bytes has at most `max` characters.
    if content.len() <= max {
        return content;
    }
    let total = content.chars().count();
    if total <= max {
        return content;
    }
    let tail = max / 2;
    let head = max - tail;
    let cut = total - max;
    let head_end = content
        .char_indices()
        .nth(head)
        .map_or(content.len(), |(i, _)| i);
    let tail_start = content
        .char_indices()
        .nth(total - tail)
        .map_or(content.len(), |(i, _)| i);
    format!(
        "{}\n[... {cut} characters cut ...]\n{}",
        &content[..head_end],
        &content[tail_start..]
    )
}
