//! Executing tool calls: timeouts, cancellation, panics, the concurrency limit, call order, output
//! checks and caps, and the error policy.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::task::coop::{Unconstrained, unconstrained};
use tokio::time::{Sleep, sleep};

use crate::event::Event;
use crate::run::ToolStep;
use crate::runner::{Runner, error_content, tool_error_event};
use crate::tool::{CallFuture, Parsed, Produced, panic_error};
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
        let max_chars = inner.settings.max_output_chars_of(Some(tool));
        let result = invoke(
            tool,
            parsed,
            &ctx,
            inner.settings.default_timeout,
            max_chars,
        )
        .await;
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
/// checked. Resolves to the result text, capped at `cap` characters.
///
/// The call starts, and its deadline is set, when the returned future is first polled: a call
/// queued behind the concurrency limit has not started, and its timeout does not run.
pub(crate) fn invoke<'a>(
    tool: &'a Tool,
    parsed: Parsed,
    ctx: &'a ToolContext,
    default_timeout: Option<Duration>,
    cap: Option<usize>,
) -> Invoke<'a> {
    Invoke {
        tool,
        ctx,
        limit: tool.timeout.or(default_timeout),
        cap,
        state: State::Ready(parsed),
    }
}

/// The future of one call, written out rather than as an `async fn`: it is the runtime's per-call
/// path, and a hand-written state machine keeps it to one poll of the tool's future, with no
/// intermediate results moved between nested futures.
pub(crate) struct Invoke<'a> {
    tool: &'a Tool,
    ctx: &'a ToolContext,
    limit: Option<Duration>,
    cap: Option<usize>,
    state: State,
}

enum State {
    /// Parsed, not started.
    Ready(Parsed),
    Running {
        call: CallFuture,
        /// Boxed, so that a call without a timeout does not carry the timer's state.
        deadline: Option<Pin<Box<Unconstrained<Sleep>>>>,
    },
    Done,
}

impl Invoke<'_> {
    /// Starts the call: runs the tool's function up to its first `.await` (a panic there is caught
    /// too) and sets the deadline.
    fn start(&mut self, parsed: Parsed) -> Result<(), AgentError> {
        let tool = self.tool;
        if !tool.executable {
            return Err(AgentError::tool(format!(
                "tool {} has no executor",
                tool.id
            )));
        }
        let want_value = !tool.output_checks.is_empty();
        let start = AssertUnwindSafe(|| parsed.start(tool.runs.as_deref(), self.ctx, want_value));
        let call = std::panic::catch_unwind(start).map_err(|payload| panicked(tool, payload))?;
        self.state = State::Running {
            call,
            deadline: self
                .limit
                .map(|limit| Box::pin(unconstrained(sleep(limit)))),
        };
        Ok(())
    }

    fn finish(&self, produced: Result<Produced, AgentError>) -> Result<String, AgentError> {
        // A panic on a blocking tool's thread comes back as an error: it is named after the tool.
        let text = match produced.map_err(|e| named(self.tool, e))? {
            Produced::Text(text) => text,
            Produced::Value(value) => self.tool.check_output(value)?.to_string(),
        };
        Ok(cap(text, self.cap))
    }
}

impl Future for Invoke<'_> {
    type Output = Result<String, AgentError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let tool = this.tool;
        if let State::Ready(_) = this.state {
            if let State::Ready(parsed) = std::mem::replace(&mut this.state, State::Done) {
                if let Err(error) = this.start(parsed) {
                    return Poll::Ready(Err(error));
                }
            }
        }
        let State::Running { call, deadline } = &mut this.state else {
            return Poll::Ready(Err(AgentError::tool(
                "the call was polled after it finished",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(Poll::Ready(produced)) => {
                this.state = State::Done;
                return Poll::Ready(this.finish(produced));
            }
            Ok(Poll::Pending) => {}
            Err(payload) => {
                this.state = State::Done;
                return Poll::Ready(Err(panicked(tool, payload)));
            }
        }
        // The deadline is polled outside the task's cooperative budget (as `tokio::time::timeout`
        // does), so a tool that uses up the budget cannot keep its own timeout from firing.
        if let Some(deadline) = deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                // Drop the call's future first, then tell the tool: the timeout is reported at
                // once, never after the tool's own cleanup.
                this.state = State::Done;
                this.ctx.cancellation_token().cancel();
                let ms = this.limit.unwrap_or_default().as_millis();
                let ms = u64::try_from(ms).unwrap_or(u64::MAX);
                return Poll::Ready(Err(AgentError::Timeout {
                    tool: tool.id.clone(),
                    ms,
                }));
            }
        }
        Poll::Pending
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
#[inline]
pub(crate) fn cap(content: String, max: Option<usize>) -> String {
    match max {
        // Cheap early exit: a string of at most `max` bytes has at most `max` characters.
        Some(max) if content.len() > max => cut(content, max),
        _ => content,
    }
}

fn cut(content: String, max: usize) -> String {
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
