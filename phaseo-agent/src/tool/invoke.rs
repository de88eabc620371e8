//! Running one call of a tool: the deadline raced against it, a panic caught, the output checked
//! and capped. The one per-call path: the agent loop and [`Tool::invoke`] both go through it.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use tokio::task::coop::unconstrained;
use tokio::time::{Instant, Sleep, sleep};

use crate::error::AgentError;
use crate::tool::call::{CallFuture, Parsed, Prepared, Produced, panic_error};
use crate::tool::context::ToolContext;
use crate::tool::definition::Tool;

impl Tool {
    /// Parses, validates and runs one call's argument text, as the agent loop would (the tool's own
    /// timeout, output checks and cap apply; approval does not), returning the result text.
    ///
    /// Two things differ from a call in a run: the context is the one you pass, so progress goes
    /// to it unchecked by the tool's event validators (they run on the contexts an agent makes),
    /// and a resource the tool declares must be on it (`ToolContext::with_resource`), or the call
    /// fails with [`AgentError::InvalidTool`] before parsing.
    ///
    /// The arguments are parsed and validated when `invoke` is called; the tool starts (and its
    /// timeout runs) when the returned future is first polled. For unit tests of a tool and for
    /// benchmarks.
    ///
    /// ```
    /// use phaseo_agent::{Tool, ToolContext};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let double = Tool::new("double", "Double a number",
    ///     json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    ///     |input, _| Ok(json!(input["n"].as_i64().unwrap_or(0) * 2)));
    /// let ctx = ToolContext::detached();
    /// assert_eq!(double.invoke(r#"{"n": 21}"#, &ctx).await.unwrap(), "42");
    /// let err = double.invoke(r#"{"n": "x"}"#, &ctx).await.unwrap_err();
    /// assert_eq!(err.to_string(), r#"invalid tool input: $.n: "x" is not of type "integer""#);
    /// # }
    /// ```
    #[inline]
    pub fn invoke<'a>(
        &'a self,
        arguments: &str,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = Result<String, AgentError>> + Send + 'a {
        // An agent checks its tools' resources when it is built; a context made by hand may lack one.
        let checked = match ctx.resources().missing(&self.needs) {
            Some(need) => Err(AgentError::InvalidTool {
                tool: self.id.clone(),
                reason: ctx.resources().missing_message(need),
            }),
            None => self.parse_call(arguments),
        };
        match checked {
            Ok(parsed) => Either::Left(invoke(self, parsed, ctx, None, self.max_output_chars)),
            Err(error) => Either::Right(futures::future::ready(Err(error))),
        }
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
        deadline: Option<Pin<Box<Sleep>>>,
    },
    Done,
}

impl Invoke<'_> {
    /// Starts a call whose input waited for it: runs the tool's function up to its first `.await`
    /// (a panic there is caught too). A call made as it was parsed (`Parsed::Made`) has nothing to
    /// start.
    fn start(&self, prepared: Box<dyn Prepared>) -> Result<CallFuture, AgentError> {
        let tool = self.tool;
        if !tool.executable {
            return Err(AgentError::tool(format!(
                "tool {} has no executor",
                tool.id
            )));
        }
        let want_value = tool.wants_value();
        let start = AssertUnwindSafe(|| prepared.start(tool.runs.as_deref(), self.ctx, want_value));
        std::panic::catch_unwind(start).map_err(|payload| panicked(tool, payload))
    }

    /// The first poll: starts the call and polls it. Without a deadline, the call's future is
    /// kept on the stack for that poll and stored only if it is pending, so a call that finishes
    /// at once (most do) never goes through the stored state.
    /// (This copy of [`Invoke::poll_running`]'s handling, without the deadline, saves 46 of the
    /// 5,235 instructions of a small typed call, by callgrind.)
    fn first_poll(
        &mut self,
        parsed: Parsed,
        cx: &mut Context<'_>,
    ) -> Poll<Result<String, AgentError>> {
        let mut call = match parsed {
            // Made as it was parsed (by a tool that runs in this process), and making it ran none
            // of the function's code: nothing to start.
            Parsed::Made(call) => call,
            Parsed::Ready(prepared) => match self.start(prepared) {
                Ok(call) => call,
                Err(error) => return Poll::Ready(Err(error)),
            },
        };
        if let Some(limit) = self.limit {
            self.state = State::Running {
                call,
                deadline: Some(Box::pin(sleep(limit))),
            };
            return self.poll_running(cx);
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(Poll::Ready(produced)) => {
                discard(call);
                Poll::Ready(self.finish(produced))
            }
            Ok(Poll::Pending) => {
                self.state = State::Running {
                    call,
                    deadline: None,
                };
                Poll::Pending
            }
            Err(payload) => {
                discard(call);
                Poll::Ready(Err(panicked(self.tool, payload)))
            }
        }
    }

    /// Drops the call's future (a panic in its `Drop` is the tool's problem, not the caller's).
    #[inline]
    fn stop(&mut self) {
        if let State::Running { .. } = self.state {
            self.stop_running();
        }
    }

    fn stop_running(&mut self) {
        if let State::Running { call, .. } = std::mem::replace(&mut self.state, State::Done) {
            discard(call);
        }
    }

    /// The call overran its deadline: its future is dropped first, then the tool is told, so the
    /// timeout is reported at once, never after the tool's own cleanup.
    fn timed_out(&mut self) -> Result<String, AgentError> {
        self.stop();
        self.ctx.cancel();
        let ms = self.limit.unwrap_or_default().as_millis();
        Err(AgentError::Timeout {
            tool: self.tool.id.clone(),
            ms: u64::try_from(ms).unwrap_or(u64::MAX),
        })
    }

    // Not inlined into the polls: that saves 22 instructions per call by callgrind, but per-call
    // dispatch measured 0.03-0.09x slower against the floor in each of four builds.
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
        if let State::Ready(_) = this.state {
            if let State::Ready(parsed) = std::mem::replace(&mut this.state, State::Done) {
                return this.first_poll(parsed, cx);
            }
        }
        this.poll_running(cx)
    }
}

impl Invoke<'_> {
    /// Polls the started call, and its deadline.
    fn poll_running(&mut self, cx: &mut Context<'_>) -> Poll<Result<String, AgentError>> {
        let State::Running { call, deadline } = &mut self.state else {
            return Poll::Ready(Err(AgentError::tool(
                "the call was polled after it finished",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(Poll::Ready(produced)) => {
                // A result that comes after the deadline is late, even when the tool blocked its
                // thread and the deadline could not be polled in time.
                if deadline
                    .as_ref()
                    .is_some_and(|d| Instant::now() >= d.deadline())
                {
                    return Poll::Ready(self.timed_out());
                }
                self.stop();
                return Poll::Ready(self.finish(produced));
            }
            Ok(Poll::Pending) => {}
            Err(payload) => {
                self.stop();
                return Poll::Ready(Err(panicked(self.tool, payload)));
            }
        }
        // The deadline is polled outside the task's cooperative budget (as `tokio::time::timeout`
        // does), so a tool that uses up the budget cannot keep its own timeout from firing.
        if let Some(deadline) = deadline {
            if Pin::new(&mut unconstrained(deadline.as_mut()))
                .poll(cx)
                .is_ready()
            {
                return Poll::Ready(self.timed_out());
            }
        }
        Poll::Pending
    }
}

impl Drop for Invoke<'_> {
    fn drop(&mut self) {
        // Dropped mid-call (the run was dropped, or a sibling failed the run).
        self.stop();
    }
}

/// Drops a call's future: a panic in its `Drop` is the tool's problem, not the caller's.
fn discard(call: CallFuture) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(call)));
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
