//! Continuing a completed run: the conversation goes on with a new user message, under the same run
//! id, with a fresh turn budget.

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
    pub(crate) fn continue_run(
        agent: Agent,
        state: RunState,
        input: String,
        mut options: RunOptions,
        events: Emitter,
    ) -> impl Future<Output = Result<RunResult, RunError>> + Send + 'static {
        let given = events.is_listening().then(|| state.clone());
        let not_completed = |state: &RunState| AgentError::NotCompleted {
            run_id: state.run_id.clone(),
            status: format!("{:?}", state.status),
        };
        let mut runner = match Self::admit(agent, state, RunStatus::Completed, not_completed) {
            Ok((agent, state)) => Runner::new(agent, state, &options, events),
            Err(error) => return Either::Left(ready(Err(refuse(error, given, &events)))),
        };
        runner.state.output = None;
        runner.state.turn_base = runner.state.turns;
        runner.state.messages.push(Message::User { content: input });
        if let Some(first_turn) = options.first_turn.take() {
            runner.state.next_turn = first_turn;
        }
        runner.span = observe::run_span(runner.inner(), &runner.state, true, Some("completed"));
        let span = runner.span.clone();
        Either::Right(runner.go_on().instrument(span))
    }
}
