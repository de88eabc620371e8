//! Retrying a failed run: the model is asked again from the failed state, and no tool runs twice.

use std::future::{Future, ready};

use futures::future::Either;
use tracing::Instrument;

use crate::error::AgentError;
use crate::model::message::Message;
use crate::run::agent::Agent;

use crate::run::event::Emitter;
use crate::run::observe;
use crate::run::runner::{RunOptions, Runner, refuse};
use crate::run::state::{RunError, RunResult, RunState, RunStatus};

impl Runner {
    /// Not an `async fn`, for the reason `Runner::start` gives.
    pub(crate) fn retry(
        agent: Agent,
        state: RunState,
        options: RunOptions,
        events: Emitter,
    ) -> impl Future<Output = Result<RunResult, RunError>> + Send + 'static {
        let given = events.is_listening().then(|| state.clone());
        let not_failed = |state: &RunState| AgentError::NotFailed {
            run_id: state.run_id.clone(),
            status: format!("{:?}", state.status),
        };
        let mut runner = match Self::admit(agent, state, RunStatus::Failed, not_failed) {
            Ok((agent, state)) => Runner::new(agent, state, &options, events),
            Err(error) => return Either::Left(ready(Err(refuse(error, given, &events)))),
        };
        runner.close_failed_turn();
        runner.state.status = RunStatus::Completed;
        runner.span = observe::run_span(runner.inner(), &runner.state, true, Some("failed"));
        let span = runner.span.clone();
        Either::Right(runner.go_on().instrument(span))
    }

    /// Answers every call of the last model turn that has no result in the conversation, so the
    /// model can go on: with the result recorded on its step (it ran, failed the run, or was
    /// cancelled), or with an error saying it did not run. Nothing runs.
    fn close_failed_turn(&mut self) {
        let messages = &self.state.messages;
        let Some(at) = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return;
        };
        let Message::Assistant { tool_calls, .. } = &messages[at] else {
            return;
        };
        let answered = |id: &str| {
            messages[at + 1..]
                .iter()
                .any(|m| matches!(m, Message::Tool { call_id, .. } if call_id == id))
        };
        let step_index = self.state.turns.saturating_sub(1);
        let mut results = Vec::new();
        for call in tool_calls.iter().filter(|c| !answered(&c.id)) {
            let recorded = self
                .state
                .steps
                .iter()
                .rev()
                .find(|s| s.step_index == step_index && s.call_id == call.id);
            let content = match recorded {
                Some(step) => step.content.clone(),
                None => AgentError::tool(format!(
                    "Tool {} did not run: the run failed before it could",
                    call.name
                ))
                .content(),
            };
            results.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
            });
        }
        self.state.messages.extend(results);
    }
}
