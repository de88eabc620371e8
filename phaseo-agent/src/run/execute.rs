//! Executing the calls of a turn: the concurrency limit, exclusive tools, call order, and the error
//! policy. Each call runs through the tool stage's one per-call path (`tool::invoke`).

use std::time::Instant;

use futures::StreamExt;
use futures::future::{Either, select};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::{AgentError, AgentErrorKind};
use crate::model::message::ToolCall;
use crate::run::agent::AgentInner;
use crate::run::event::{Emitter, Event};
use crate::run::journal::{Journal, Start, Transition};
use crate::run::observe;
use crate::run::state::ToolStep;
use crate::telemetry::semconv::OUTCOME_ERROR;
use crate::telemetry::{self, span};
use crate::tool::call::Parsed;
use crate::tool::context::ToolContext;
use crate::tool::definition::{OnError, Tool};
use crate::tool::invoke::invoke;

/// One call to run: its slot in the turn, the tool's index, its parsed input and its context.
pub(crate) type Run = (usize, usize, Parsed, ToolContext);

/// What a call that produced a result changes for the rest of the run: the application context it
/// set, and its tool and input when the tool changes the next turn. Applied in call order; a call
/// that fails changes nothing.
#[derive(Default)]
pub(crate) struct Effects {
    pub(crate) new_context: Option<Value>,
    pub(crate) next_turn: Option<(usize, Value)>,
}

/// What one executed call left behind.
pub(crate) struct Outcome {
    pub(crate) step: ToolStep,
    pub(crate) effects: Effects,
    /// Set when the call failed under `fail-run`.
    pub(crate) fail: Option<AgentError>,
}

/// What the calls of a turn run under: the agent's tools and settings, the run's events and its
/// concurrency limit.
pub(crate) struct Execution<'a> {
    pub(crate) inner: &'a AgentInner,
    pub(crate) events: &'a Emitter,
    pub(crate) concurrency: usize,
    /// Where each call's start and result are recorded, if anywhere.
    pub(crate) journal: Option<&'a dyn Journal>,
    /// Whether the calls' starts are recorded already (with their model turn): then only their
    /// results are.
    pub(crate) starts_recorded: bool,
}

impl Execution<'_> {
    /// Runs calls up to the concurrency limit, returning outcomes in call order. An exclusive tool's
    /// call runs alone: the calls before it finish first, and the calls after it wait.
    ///
    /// Once a call fails the run (`fail-run`), the turn stops: no call that has not started starts,
    /// and the calls still running are dropped and their cancellation tokens fired. Both are
    /// recorded as cancelled ([`AgentError::Cancelled`]).
    pub(crate) async fn run_all(&self, runs: Vec<Run>) -> Vec<(usize, Outcome)> {
        let tools = &self.inner.tools;
        // A lone call has no sibling to stop: no stop token for it.
        let stop = Stop::new(runs.len() > 1);
        let mut out = Vec::with_capacity(runs.len());
        let mut batch = Vec::new();
        for run in runs {
            if tools[run.1].exclusive {
                self.run_batch(std::mem::take(&mut batch), &stop, &mut out)
                    .await;
                out.push(self.run_one(run, &stop).await);
            } else {
                batch.push(run);
            }
        }
        self.run_batch(batch, &stop, &mut out).await;
        out
    }

    /// Runs a turn's only call: no sibling to stop, no batch to gather.
    pub(crate) async fn run_alone(&self, run: Run) -> (usize, Outcome) {
        self.run_one(run, &Stop::new(false)).await
    }

    /// Runs calls that may run side by side, appending their outcomes to `out` in call order.
    async fn run_batch(&self, mut batch: Vec<Run>, stop: &Stop, out: &mut Vec<(usize, Outcome)>) {
        if batch.len() <= 1 {
            // Nothing to run beside it: no stream to schedule it on.
            if let Some(run) = batch.pop() {
                out.push(self.run_one(run, stop).await);
            }
            return;
        }
        // `buffer_unordered` starts a call as soon as any place is free (`buffered` would keep a place
        // taken by a call that finished before an earlier one), and only then, so a call's timeout
        // never counts time spent queued. Outcomes are put back in call order.
        let start = out.len();
        let mut outcomes = futures::stream::iter(batch)
            .map(|run| self.run_one(run, stop))
            .buffer_unordered(self.concurrency);
        while let Some(outcome) = outcomes.next().await {
            out.push(outcome);
        }
        out[start..].sort_unstable_by_key(|(slot, _)| *slot);
    }

    async fn run_one(&self, (slot, index, parsed, ctx): Run, stop: &Stop) -> (usize, Outcome) {
        let inner = self.inner;
        let tool = &inner.tools[index];
        let call = ctx.tool_call();
        let span = observe::tool_span(inner, Some(index), call, ctx.attempt());
        if let Some(by) = stop.failed_by() {
            // Queued behind the call that failed the run: it never starts.
            let kind = Some(AgentErrorKind::Cancelled);
            observe::tool_answered(inner, &span, call, OUTCOME_ERROR, kind, "");
            return (slot, self.cancelled(&ctx, by));
        }
        if let Some(journal) = self.journal.filter(|_| !self.starts_recorded) {
            // The start is recorded before the tool's code runs, so a crash leaves the call
            // known to be in doubt; a run that cannot record it does not run it.
            let started = Transition::CallStarted(Start {
                call_id: &call.id,
                tool: &call.name,
                attempt: ctx.attempt(),
            });
            if let Err(error) = journal.record(started).await {
                stop.fail(&call.id);
                let mut outcome = self.cancelled(&ctx, call.id.clone());
                outcome.fail = Some(error);
                return (slot, outcome);
            }
        }
        self.events
            .emit(|| Event::ToolCalled { call: call.clone() });
        // If the run is dropped mid-call, the guard fires the call's cancellation token.
        let guard = ctx.cancel_on_drop();
        let max_chars = inner.settings.max_output_chars_of(Some(tool));
        // Read only when a subscriber will get the call's duration.
        let started = telemetry::on().then(Instant::now);
        let finished = {
            let running = invoke(
                tool,
                parsed,
                &ctx,
                inner.settings.default_timeout,
                max_chars,
            );
            let running = std::pin::pin!(running.instrument(span.clone()));
            match &stop.token {
                Some(token) => {
                    let stopped = std::pin::pin!(token.cancelled());
                    match select(running, stopped).await {
                        Either::Left((result, _)) => Some(result),
                        Either::Right(_) => None,
                    }
                }
                None => Some(running.await),
            }
            // The call's future is dropped here, before its token fires below.
        };
        let result = finished.unwrap_or_else(|| {
            // A sibling failed the run.
            ctx.cancel();
            Err(AgentError::Cancelled {
                tool: call.name.clone(),
                by: stop.failed_by().unwrap_or_default(),
            })
        });
        guard.disarm();
        let record = ctx.take_record();
        let result = match (result, record.event_error) {
            (Ok(_), Some(event_error)) => Err(event_error),
            (result, _) => result,
        };
        let (ended, error) = span::ran_outcome(&result);
        let content = result.as_deref().ok();
        observe::tool_done(
            inner,
            &span,
            call,
            ended,
            error,
            content,
            started.map(|s| s.elapsed()),
        );
        let mut effects = Effects::default();
        let mut fail = None;
        let mut error_text = None;
        let content = match result {
            Ok(content) => {
                self.events.emit(|| Event::ToolResult {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    content: content.clone(),
                });
                effects = Effects::of(index, tool, call, record.new_context);
                content
            }
            Err(error) => {
                error_text = Some(error.to_string());
                let content = error.content();
                match tool.on_error.unwrap_or(inner.settings.on_error) {
                    OnError::ReturnToModel => {
                        self.events
                            .emit(|| Event::tool_error(call, &error, Some(content.clone())));
                    }
                    OnError::FailRun => {
                        self.events.emit(|| Event::tool_error(call, &error, None));
                        if !matches!(error, AgentError::Cancelled { .. }) {
                            stop.fail(&call.id);
                            fail = Some(error);
                        }
                    }
                }
                content
            }
        };
        let step_index = ctx.step_index();
        // The call's id and name move out of its context, done with now.
        let ToolCall { id, name, .. } = ctx.into_call();
        let mut outcome = Outcome {
            step: ToolStep {
                step_index,
                call_id: id,
                tool: name,
                preliminary_results: record.progress,
                content,
                is_error: error_text.is_some(),
                error: error_text,
            },
            effects,
            fail,
        };
        if let Some(journal) = self.journal {
            let finished = Transition::CallFinished {
                step: &outcome.step,
                new_context: outcome.effects.new_context.as_ref(),
            };
            if let Err(error) = journal.record(finished).await {
                stop.fail(&outcome.step.call_id);
                if outcome.fail.is_none() {
                    outcome.fail = Some(error);
                }
            }
        }
        (slot, outcome)
    }

    /// The outcome of a call the turn's failure stopped before it started.
    fn cancelled(&self, ctx: &ToolContext, by: String) -> Outcome {
        let call = ctx.tool_call();
        let error = AgentError::Cancelled {
            tool: call.name.clone(),
            by,
        };
        let content = error.content();
        self.events
            .emit(|| Event::tool_error(call, &error, Some(content.clone())));
        Outcome {
            step: ToolStep {
                step_index: ctx.step_index(),
                call_id: call.id.clone(),
                tool: call.name.clone(),
                preliminary_results: Vec::new(),
                error: Some(error.to_string()),
                content,
                is_error: true,
            },
            effects: Effects::default(),
            fail: None,
        }
    }
}

/// The turn's stop signal: fired by the first call that fails the run. Its token stops the calls
/// running beside that one; a turn of one call has none.
struct Stop {
    token: Option<CancellationToken>,
    by: std::sync::OnceLock<String>,
}

impl Stop {
    fn new(with_token: bool) -> Self {
        Stop {
            token: with_token.then(CancellationToken::new),
            by: std::sync::OnceLock::new(),
        }
    }

    fn fail(&self, call_id: &str) {
        let _ = self.by.set(call_id.to_owned());
        if let Some(token) = &self.token {
            token.cancel();
        }
    }

    /// The id of the call that failed the run, once one has.
    fn failed_by(&self) -> Option<String> {
        self.by.get().cloned()
    }
}

impl Effects {
    /// Whether the call changes nothing for the rest of the run.
    pub(crate) fn is_empty(&self) -> bool {
        self.new_context.is_none() && self.next_turn.is_none()
    }

    /// The effects of a call of `tool` (at `index`) that produced a result.
    pub(crate) fn of(
        index: usize,
        tool: &Tool,
        call: &ToolCall,
        new_context: Option<Value>,
    ) -> Self {
        Effects {
            new_context,
            next_turn: tool
                .next_turn
                .is_some()
                .then(|| (index, tool.input_value(&call.arguments))),
        }
    }
}
