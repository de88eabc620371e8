//! The agent loop: model turn → tool calls → results → model turn, pausing for people and resuming.
//!
//! One model turn, as data flows:
//!
//! ```text
//! tool_calls ─► look up tool (unknown → policy) ─► parse + validate args (bad → policy)
//!   ─► approval? ─► pending(tool_approval)   human review? ─► pending(hitl)   external? ─► pending(external_output)
//!   ─► otherwise execute (timeout, cancellation, concurrency limit, panic caught)
//!   ─► validate output ─► cap ─► results in call order
//! any pending ─► pause with the automatic results kept ─► decisions by call id ─► resume
//! ```

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::Either;
use tracing::{Instrument, Span};

use crate::decode::text::{MAX_STORED_DEPTH, TOO_DEEP_TO_STORE, deeper_than, drop_deep};

use crate::error::{AgentError, AgentErrorKind, ModelError, ModelErrorKind};
use crate::model::message::{Message, ToolCall};
use crate::model::request::{
    DeltaSink, ModelDelta, ModelRequest, ModelResponse, RequestMeta, ToolChoice, TurnParams,
};
use crate::run::agent::{Agent, AgentInner, needs_approval};
use crate::run::event::{Emitter, Event};
use crate::run::execute::{Effects, Execution, Outcome, Run};
use crate::run::journal::{InFlight, Journal, JournalFor, Start, Transition};
use crate::run::observe::{self, Chat, Decider, Resumption};
use crate::run::signing;
use crate::run::state::{
    Decisions, PausedTurn, PendingCall, PendingKind, RunError, RunResult, RunState, RunStatus,
    ToolStep,
};
use crate::tool::call::{Later, Parsed};
use crate::tool::context::{ScopeParts, ToolContext};
use crate::tool::definition::OnError;
use crate::tool::invoke;

/// How a call was answered without running, as its `execute_tool` span tells it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answered {
    /// With a result: a supplied output, an interactive hook's answer.
    Result,
    /// With an error the model reads (invalid arguments, an unknown tool, a hook's failure).
    Refused(AgentErrorKind),
    /// A person rejected it.
    Rejected,
    /// Its result was recorded before the process stopped: it has had its span.
    Replayed,
}

/// What a resume starts from.
struct Resuming {
    agent: Agent,
    state: RunState,
    decisions: Decisions,
    options: RunOptions,
    events: Emitter,
}

/// A resume taken (the runner, and the plan of each waiting call by its id), or refused (the
/// error, and where to report it).
type Accepted = Result<(Runner, Vec<(String, Plan)>), (AgentError, Emitter)>;

/// What the runtime will do with one call of a turn.
pub(crate) enum Plan {
    /// Answered without running (an error under `return-to-model`, a rejection, a supplied output,
    /// an interactive hook's answer), with the operator's diagnostic when it is an error, and what
    /// the answer changes for the rest of the run.
    Done {
        step: ToolStep,
        /// Boxed, not a `String`: a plan then fits the buffer the turn's calls are collected into
        /// in place, with no reallocation.
        error: Option<Box<str>>,
        effects: Effects,
        /// How it was answered, for its span.
        how: Answered,
    },
    /// Run the tool.
    Run {
        tool: usize,
        parsed: Parsed,
        ctx: ToolContext,
    },
    /// Wait for a person.
    Pending(PendingCall),
}

pub(crate) struct Runner {
    pub(crate) agent: Agent,
    pub(crate) state: RunState,
    pub(crate) events: Emitter,
    pub(crate) concurrency: usize,
    /// The application context as calls see it, shared by the calls of a turn instead of copied into
    /// each; renewed when a turn's calls set a new one.
    /// The application context, taken out of `state` for the run and put back by `finish`.
    pub(crate) context: Arc<serde_json::Value>,
    /// Where the run's transitions are recorded as they happen (a run store), if anywhere.
    pub(crate) journal: Option<Arc<dyn Journal>>,
    /// The run's `invoke_agent` span (see `observe`).
    pub(crate) span: Span,
}

/// The settings of one run, set on its request (see `entry`); the runner reads them once.
#[derive(Debug, Default)]
pub(crate) struct RunOptions {
    /// The application context of a new run.
    pub(crate) context: serde_json::Value,
    /// The id of a new run; a fresh one if unset.
    pub(crate) run_id: Option<String>,
    /// Overrides the agent's tool concurrency for this run.
    pub(crate) concurrency: Option<usize>,
    /// Earlier messages of a new run's conversation.
    pub(crate) history: Vec<Message>,
    /// Overrides for the first model request of a new or continued run.
    pub(crate) first_turn: Option<TurnParams>,
    /// Where the run's transitions are recorded (a run store attaches itself here).
    pub(crate) journal: Option<Arc<dyn Journal>>,
    /// Makes the journal of a new run, once its id is known.
    pub(crate) journal_for: Option<JournalFor>,
    /// Who made the decisions a resume carries, when a store knows (for the run's span).
    pub(crate) deciders: Vec<Decider>,
}

impl std::fmt::Debug for dyn Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Journal")
    }
}

impl Runner {
    /// A new run. Not an `async fn`: what is set up here is moved into the run's future, which
    /// runs inside the run's span, and an `async fn` would keep a second copy of it (the state
    /// and runner it had borrowed) beside that future for the whole run. The run's body is a
    /// block that uses the runner where it was moved, rather than an `async fn` taking it, which
    /// would copy it once more on its first poll.
    pub(crate) fn start(
        agent: Agent,
        input: String,
        mut options: RunOptions,
        events: Emitter,
    ) -> impl Future<Output = Result<RunResult, RunError>> + Send + 'static {
        let run_id = options.run_id.take().unwrap_or_else(new_run_id);
        if let Some(JournalFor(make)) = options.journal_for.take() {
            options.journal = Some(make(&run_id));
        }
        let state = RunState::starting(
            run_id,
            String::from(&*agent.inner.id),
            std::mem::take(&mut options.context),
            std::mem::take(&mut options.history),
            options.first_turn.take(),
            input,
        );
        let mut runner = Runner::new(agent, state, &options, events);
        runner.span = observe::run_span(runner.inner(), &runner.state, false, None);
        let span = runner.span.clone();
        async move {
            // The new run's trace context is kept from its start, so a recovery after a crash
            // links to the span that was running.
            observe::keep_trace(&runner.span, &mut runner.state);
            if let Some(journal) = &runner.journal {
                let started = Transition::Started {
                    state: &runner.state,
                    context: &runner.context,
                };
                // Not recorded: the run never started, and nothing of it is kept.
                if let Err(error) = journal.record(started).await {
                    return Err(RunError::refused(error));
                }
            }
            runner.emit_started(false);
            let result = runner.drive().await;
            runner.finish(result).await
        }
        .instrument(span)
    }

    /// A run taken up again (a retry, a continuation), in its span: driven from where it is.
    pub(crate) async fn go_on(mut self) -> Result<RunResult, RunError> {
        self.emit_started(true);
        let result = self.drive().await;
        self.finish(result).await
    }

    /// A paused run resumed with `decisions`. Not an `async fn`, for the reason `start` gives.
    pub(crate) fn resume(
        agent: Agent,
        state: RunState,
        decisions: Decisions,
        mut options: RunOptions,
        events: Emitter,
    ) -> impl Future<Output = Result<RunResult, RunError>> + Send + 'static {
        let span = observe::run_span(&agent.inner, &state, true, Some("paused"));
        let resumption = Resumption::of(&span, &state, &decisions);
        let deciders = std::mem::take(&mut options.deciders);
        // A listener is told of a refusal too: the stream is one `run.refused`, carrying the
        // error and the state as it was given (still resumable). Kept only when someone listens,
        // and boxed: the run's future holds it to the end.
        let given = events.is_listening().then(|| Box::new(state.clone()));
        let resuming = Self::resume_in(
            Resuming {
                agent,
                state,
                decisions,
                options,
                events,
            },
            resumption,
            deciders,
            given,
        );
        resuming.instrument(span)
    }

    async fn resume_in(
        resuming: Resuming,
        resumption: Resumption,
        deciders: Vec<Decider>,
        given: Option<Box<RunState>>,
    ) -> Result<RunResult, RunError> {
        let Resuming {
            agent,
            state,
            decisions,
            options,
            events,
        } = resuming;
        let (mut runner, plans) = match Self::accept(agent, state, decisions, options, events).await
        {
            Ok(accepted) => accepted,
            Err((error, events)) => {
                let span = Span::current();
                observe::refused(&span, &error);
                observe::ended(&span);
                return Err(refuse(error, given.map(|state| *state), &events));
            }
        };
        runner.span = Span::current();
        resumption.accepted(runner.inner(), &deciders);
        runner.emit_started(true);
        let result = async {
            let Some(turn) = runner.state.paused_turn.take() else {
                return Err(AgentError::InvalidState("no turn to finish".into()));
            };
            let plans = slotted(&turn, plans)?;
            runner.finish_turn(turn, plans, false).await?;
            if runner.state.status == RunStatus::WaitingForHuman {
                return Ok(());
            }
            runner.drive().await
        }
        .await;
        runner.finish(result).await
    }

    /// Takes up a run its journal says was interrupted: `state` as last recorded, with the calls of
    /// the turn under way (`in_flight`) and the decisions it was resumed with (`decisions`, when
    /// the interruption came after a resume was taken). A call that finished keeps its result; a
    /// call that started and did not finish runs again only if its tool is idempotent (with the
    /// same idempotency key), and otherwise waits for a person as `outcome_unknown`; a call that
    /// never started is planned as it would have been.
    ///
    /// A run that never began (`begun` false: a queued run, its start recorded and nothing
    /// after) starts as a new run does: its span is not a resumption and links to nothing.
    ///
    /// Not an `async fn`, for the reason `start` gives.
    pub(crate) fn recover(
        agent: Agent,
        state: RunState,
        in_flight: InFlight,
        decisions: Option<Decisions>,
        options: RunOptions,
        events: Emitter,
        begun: bool,
    ) -> impl Future<Output = Result<RunResult, RunError>> + Send + 'static {
        if *state.agent_id != *agent.inner.id {
            return Either::Left(std::future::ready(Err(RunError::refused(
                AgentError::WrongAgent {
                    expected: String::from(&*agent.inner.id),
                    found: state.agent_id.clone(),
                },
            ))));
        }
        let mut runner = Runner::new(agent, state, &options, events);
        let link = begun.then_some("interrupted");
        runner.span = observe::run_span(runner.inner(), &runner.state, begun, link);
        let span = runner.span.clone();
        Either::Right(
            runner
                .recovered(in_flight, decisions, begun)
                .instrument(span),
        )
    }

    /// An interrupted run, in its span: its turn recovered, then driven.
    async fn recovered(
        mut self,
        in_flight: InFlight,
        decisions: Option<Decisions>,
        begun: bool,
    ) -> Result<RunResult, RunError> {
        if !begun {
            observe::keep_trace(&self.span, &mut self.state);
        }
        self.emit_started(begun);
        let result = self.recover_turn(in_flight, decisions).await;
        self.finish(result).await
    }

    async fn recover_turn(
        &mut self,
        in_flight: InFlight,
        decisions: Option<Decisions>,
    ) -> Result<(), AgentError> {
        if let Some(decisions) = decisions {
            if self.state.status == RunStatus::WaitingForHuman {
                let key = self.agent.inner.state_key.clone();
                signing::verify(key.as_deref(), &mut self.state)?;
                let (plans, always) = self.plan_resume(decisions).await?;
                self.state.approved_tools.extend(always);
                let Some(turn) = self.state.paused_turn.take() else {
                    return Err(AgentError::InvalidState("no turn to finish".into()));
                };
                let mut plans = slotted(&turn, plans)?;
                for (slot, plan) in &mut plans {
                    // The call as it was to run: with a person's edited arguments, if any.
                    let call = match plan {
                        Plan::Run { ctx, .. } => ctx.tool_call().clone(),
                        _ => turn.calls[*slot].clone(),
                    };
                    if let Some(journaled) = self.journaled(turn.step_index, &call, &in_flight) {
                        *plan = journaled;
                    }
                }
                self.finish_turn(turn, plans, false).await?;
                if self.state.status == RunStatus::WaitingForHuman {
                    return Ok(());
                }
                return self.drive().await;
            }
        }
        let Some(params) = in_flight.turn.as_ref() else {
            // No turn under way: ask the model (it was not answered, or not recorded as answered).
            return self.drive().await;
        };
        let calls = self.turn_calls().to_vec();
        if calls.is_empty() {
            return Err(AgentError::InvalidState(
                "the journal records a model turn, and the conversation does not end with its calls"
                    .into(),
            ));
        }
        let step_index = self.state.turns.saturating_sub(1);
        let offered = self.offered(params);
        let mut plans = Vec::with_capacity(calls.len());
        for (slot, call) in calls.iter().enumerate() {
            // A call the journal knows of is not planned again: that could ask a person or run
            // a hook twice.
            let plan = match self.journaled(step_index, call, &in_flight) {
                Some(plan) => plan,
                None => {
                    self.plan_call(step_index, call.clone(), offered.as_deref())
                        .await?
                }
            };
            plans.push((slot, plan));
        }
        let turn = PausedTurn {
            step_index,
            results: vec![None; calls.len()],
            calls,
        };
        self.finish_turn(turn, plans, false).await?;
        if self.state.status == RunStatus::WaitingForHuman {
            return Ok(());
        }
        self.drive().await
    }

    /// The plan of a call of an interrupted turn (of model turn `step_index`) that the journal
    /// recorded: a finished call keeps its result; a started one runs again only if its tool is
    /// idempotent, under the same attempt, and otherwise waits for a person as
    /// `outcome_unknown`. `None` for a call that never started.
    fn journaled(&self, step_index: usize, call: &ToolCall, in_flight: &InFlight) -> Option<Plan> {
        let index = self.inner().index.get(&call.name).copied();
        if let Some(finished) = in_flight.finished(&call.id) {
            let effects = match (index, finished.step.is_error) {
                (Some(index), false) => Effects::of(
                    index,
                    &self.inner().tools[index],
                    call,
                    finished.new_context.clone(),
                ),
                _ => Effects::default(),
            };
            return Some(Plan::Done {
                step: finished.step.clone(),
                error: finished.step.error.as_deref().map(Box::from),
                effects,
                how: Answered::Replayed,
            });
        }
        let started = in_flight.started(&call.id)?;
        let idempotent =
            index.is_some_and(|i| self.inner().tools[i].hints.idempotent == Some(true));
        if idempotent {
            if let Some(index) = index {
                if let Ok(parsed) = self.inner().tools[index].parse_call(&call.arguments) {
                    let ctx =
                        self.context_at(step_index, call.clone(), Some(index), started.attempt);
                    return Some(Plan::Run {
                        tool: index,
                        parsed,
                        ctx,
                    });
                }
            }
        }
        let arguments = index.map_or(serde_json::Value::Null, |i| {
            self.inner().tools[i].input_value(&call.arguments)
        });
        Some(Plan::Pending(PendingCall {
            call: call.clone(),
            kind: PendingKind::OutcomeUnknown,
            arguments,
            attempt: started.attempt,
            started_at_ms: started.at_ms,
        }))
    }

    /// Checks a resume (status, signature, agent, every decision) before anything runs or changes,
    /// and plans the paused turn's calls. Planning emits nothing; the answered calls are reported
    /// when the turn finishes.
    #[allow(clippy::type_complexity)]
    async fn accept(
        agent: Agent,
        state: RunState,
        decisions: Decisions,
        options: RunOptions,
        events: Emitter,
    ) -> Accepted {
        let not_paused = |state: &RunState| AgentError::NotPaused {
            run_id: state.run_id.clone(),
            status: format!("{:?}", state.status),
        };
        let admitted = Self::admit(agent, state, RunStatus::WaitingForHuman, not_paused);
        let mut runner = match admitted {
            Ok(admitted) => Runner::new(admitted.0, admitted.1, &options, events),
            Err(error) => return Err((error, events)),
        };
        match runner.plan_resume(decisions).await {
            Ok((plans, always)) => {
                runner.state.approved_tools.extend(always);
                Ok((runner, plans))
            }
            Err(error) => Err((error, runner.events)),
        }
    }

    /// A runner for `state`, taking the application context out of it for the run.
    pub(crate) fn new(
        agent: Agent,
        mut state: RunState,
        options: &RunOptions,
        events: Emitter,
    ) -> Self {
        let concurrency = options
            .concurrency
            .unwrap_or(agent.inner.settings.concurrency);
        Runner {
            context: shared_context(std::mem::take(&mut state.context)),
            agent,
            state,
            events,
            concurrency: concurrency.max(1),
            journal: options.journal.clone(),
            span: Span::none(),
        }
    }

    /// Checks a stored state before a resume or a retry takes it: its status (`expected`, else the
    /// error `wrong_status` makes), its signature, and its agent. Nothing runs.
    pub(crate) fn admit(
        agent: Agent,
        mut state: RunState,
        expected: RunStatus,
        wrong_status: impl FnOnce(&RunState) -> AgentError,
    ) -> Result<(Agent, RunState), AgentError> {
        if state.status != expected {
            return Err(wrong_status(&state));
        }
        signing::verify(agent.inner.state_key.as_deref(), &mut state)?;
        if *state.agent_id != *agent.inner.id {
            return Err(AgentError::WrongAgent {
                expected: String::from(&*agent.inner.id),
                found: state.agent_id.clone(),
            });
        }
        Ok((agent, state))
    }

    pub(crate) fn inner(&self) -> &AgentInner {
        &self.agent.inner
    }

    /// Sends the event `make` builds, when someone listens (see [`Emitter::emit`]).
    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        self.events.emit(make);
    }

    pub(crate) fn emit_started(&self, resumed: bool) {
        self.emit(|| Event::RunStarted {
            run_id: self.state.run_id.clone(),
            agent_id: self.state.agent_id.clone(),
            resumed,
        });
    }

    /// Ends the run with `result`: the state gets its context back, is signed, recorded and
    /// reported. Takes the runner by reference, not by value: a runner is hundreds of bytes, and
    /// moving it into this future would copy it (twice, in an `async fn`) for nothing.
    pub(crate) async fn finish(
        &mut self,
        result: Result<(), AgentError>,
    ) -> Result<RunResult, RunError> {
        // An empty state takes the run's place; it allocates nothing.
        let empty = RunState::new(String::new(), String::new(), serde_json::Value::Null);
        let mut state = std::mem::replace(&mut self.state, empty);
        let Runner {
            agent,
            events,
            context,
            journal,
            span,
            ..
        } = self;
        // The application context lives in `context` while the run goes (tools share it); the
        // state gets it back here, before it is signed or reported. The calls that shared it
        // have ended, so it is taken out of its `Arc` unless someone still holds a copy. Not
        // `Arc::make_mut`: a run without a context shares one `Arc` of `null` with every other
        // (see `shared_context`), and `make_mut` would allocate a new one to take it from.
        state.context = match Arc::get_mut(context) {
            Some(only) => std::mem::take(only),
            None => serde_json::Value::clone(context),
        };
        let key = agent.inner.state_key.as_deref();
        if result.is_err() {
            // A failed state records what ran (see `finish_turn`) and waits for nothing: it can
            // be retried, not resumed.
            mark_failed(&mut state);
        }
        observe::settle(span, &agent.inner, &mut state, result.as_ref().err());
        sign(key, &mut state);
        // The end is recorded before anyone is told of it; a run whose end cannot be recorded
        // fails with the store's error (its state is still returned, as failed).
        let result = match (result, &journal) {
            (Ok(()), Some(journal)) => {
                let recorded = journal
                    .record(Transition::Settled {
                        state: &state,
                        failure: None,
                    })
                    .await;
                if recorded.is_err() {
                    mark_failed(&mut state);
                    sign(key, &mut state);
                }
                recorded
            }
            // A run that failed because its journal refused a write is not written again.
            (Err(error), Some(journal)) if !matches!(error, AgentError::Store(_)) => {
                let _ = journal
                    .record(Transition::Settled {
                        state: &state,
                        failure: Some(&error),
                    })
                    .await;
                Err(error)
            }
            (result, _) => result,
        };
        observe::journaled(span, journal.as_deref());
        observe::ended(span);
        match result {
            Ok(()) => {
                // The last event carries a copy of the state: made only when someone listens.
                events.emit(|| {
                    let copy = Box::new(state.clone());
                    match state.status {
                        RunStatus::WaitingForHuman => Event::Paused {
                            pending: state.pending.clone(),
                            state: copy,
                        },
                        _ => Event::Completed {
                            output: state.output.clone().unwrap_or_default(),
                            state: copy,
                        },
                    }
                });
                Ok(RunResult { state })
            }
            Err(error) => {
                events.emit(|| Event::Failed {
                    kind: error.kind(),
                    error: error.to_string(),
                    state: Box::new(state.clone()),
                });
                Err(RunError {
                    error,
                    state: Some(Box::new(state)),
                })
            }
        }
    }

    /// Model turns until the model answers without tool calls, or a call pauses the run.
    pub(crate) async fn drive(&mut self) -> Result<(), AgentError> {
        loop {
            let max_turns = self.inner().max_turns;
            if self.state.turns - self.state.turn_base.min(self.state.turns) >= max_turns {
                return Err(AgentError::MaxTurnsExceeded(max_turns));
            }
            let params = std::mem::take(&mut self.state.next_turn);
            let step_index = self.state.turns;
            let (response, offered) = {
                // The request borrows the conversation, the agent's tool definitions and ids:
                // nothing is copied for it.
                let (request, offered) = self.request(&params);
                (self.ask_model(&request, step_index).await?, offered)
            };
            self.state.turns += 1;
            if let Some(usage) = response.usage {
                self.state.usage += usage;
            }
            let limit = self.inner().settings.max_calls_per_turn;
            if response.tool_calls.len() > limit {
                return Err(AgentError::TooManyToolCalls {
                    count: response.tool_calls.len(),
                    limit,
                });
            }
            let mut calls = response.tool_calls;
            normalise_calls(step_index, &mut calls)?;
            self.emit(|| Event::ModelTurn {
                step_index,
                text: response.text.clone(),
                tool_calls: calls.clone(),
                finish_reason: response.finish_reason.clone(),
                usage: response.usage,
            });
            if calls.is_empty() {
                self.state.status = RunStatus::Completed;
                self.state.output = Some(response.text.clone().unwrap_or_default());
                self.state.messages.push(Message::Assistant {
                    content: response.text,
                    tool_calls: calls,
                });
                return Ok(());
            }
            let count = calls.len();
            // The conversation owns the calls; each plan gets a copy for its call's context, and
            // the turn's own list is filled only if the turn pauses (see `finish_turn`).
            self.state.messages.push(Message::Assistant {
                content: response.text,
                tool_calls: calls,
            });
            let turn = PausedTurn {
                step_index,
                results: vec![None; count],
                calls: Vec::new(),
            };
            let mut plans = Vec::with_capacity(count);
            for slot in 0..count {
                let call = self.turn_calls()[slot].clone();
                let plan = self.plan_call(step_index, call, offered.as_deref()).await?;
                plans.push((slot, plan));
            }
            // The turn is recorded once planned, with the starts of the calls that are to run:
            // one write, before any of them runs. A crash while planning leaves the turn
            // unrecorded, and recovery asks the model again.
            if let Some(journal) = &self.journal {
                let starts: Vec<Start<'_>> = plans
                    .iter()
                    .filter_map(|(_, plan)| match plan {
                        Plan::Run { ctx, .. } => Some(Start {
                            call_id: &ctx.tool_call().id,
                            tool: &ctx.tool_call().name,
                            attempt: ctx.attempt(),
                        }),
                        _ => None,
                    })
                    .collect();
                journal
                    .record(Transition::Turn {
                        state: &self.state,
                        context: &self.context,
                        params: &params,
                        starts: &starts,
                    })
                    .await?;
            }
            self.finish_turn(turn, plans, true).await?;
            if self.state.status == RunStatus::WaitingForHuman {
                return Ok(());
            }
        }
    }

    /// The calls of the turn being planned: those of the conversation's last message.
    fn turn_calls(&self) -> &[ToolCall] {
        match self.state.messages.last() {
            Some(Message::Assistant { tool_calls, .. }) => tool_calls,
            _ => &[],
        }
    }

    /// The next model request, under the turn's next-turn overrides (`params`): instructions,
    /// conversation, active tools; and which tools it offers by index (`None`: all of them; none
    /// under `ToolChoice::None`).
    /// Which tools a turn asked under `params` offers, by index (`None`: all of them).
    fn offered(&self, params: &TurnParams) -> Option<Vec<bool>> {
        let inner = &self.agent.inner;
        match params.tool_choice {
            Some(ToolChoice::None) => Some(vec![false; inner.tools.len()]),
            _ => self.listed(params),
        }
    }

    /// Which tools a turn asked under `params` lists, by index (`None`: all of them).
    fn listed(&self, params: &TurnParams) -> Option<Vec<bool>> {
        let inner = &self.agent.inner;
        params.active_tools.as_ref().map(|active| {
            let listed = |t: &crate::tool::definition::Tool| active.iter().any(|id| id == &t.id);
            inner.tools.iter().map(listed).collect()
        })
    }

    fn request<'a>(&'a self, params: &'a TurnParams) -> (ModelRequest<'a>, Option<Vec<bool>>) {
        let inner = &self.agent.inner;
        let listed = self.listed(params);
        let tools = match &listed {
            None => Cow::Borrowed(inner.definitions.as_slice()),
            Some(listed) => Cow::Owned(
                inner
                    .definitions
                    .iter()
                    .zip(listed)
                    .filter(|(_, listed)| **listed)
                    .map(|(definition, _)| definition.clone())
                    .collect(),
            ),
        };
        // Under `ToolChoice::None` the tools stay listed (the conversation may mention them), but
        // none may be called.
        let offered = match params.tool_choice {
            Some(ToolChoice::None) => Some(vec![false; inner.tools.len()]),
            _ => listed,
        };
        let request = ModelRequest {
            model: params
                .model
                .as_deref()
                .or(inner.model_name.as_deref())
                .map(Cow::Borrowed),
            instructions: Cow::Borrowed(
                params
                    .instructions
                    .as_deref()
                    .unwrap_or(&inner.instructions),
            ),
            messages: Cow::Borrowed(&self.state.messages),
            tools,
            temperature: params.temperature,
            top_p: params.top_p,
            max_output_tokens: params.max_output_tokens,
            stop: params.stop.as_deref().map(Cow::Borrowed),
            seed: params.seed,
            tool_choice: params.tool_choice.clone().unwrap_or_default(),
            parallel_tool_calls: inner.parallel_tool_calls,
            meta: RequestMeta {
                run_id: Cow::Borrowed(&self.state.run_id),
                agent_id: Cow::Borrowed(&*inner.id),
                turn: self.state.turns,
            },
        };
        (request, offered)
    }

    /// One model request, retried under the agent's [`RetryPolicy`](crate::RetryPolicy) while it
    /// fails with a retryable error (an empty answer counts as one). Streams deltas only when
    /// someone listens.
    async fn ask_model(
        &self,
        request: &ModelRequest<'_>,
        step_index: usize,
    ) -> Result<ModelResponse, AgentError> {
        let inner = self.inner();
        let chat = Chat::open(inner, request);
        let mut attempt = 0;
        loop {
            let result = if self.events.is_listening() {
                let events = self.events.clone();
                let send = move |delta: ModelDelta| {
                    events.emit(|| Event::ModelDelta { step_index, delta });
                };
                let sink = DeltaSink::new(&send);
                let answering = inner.model.respond_streaming(request, &sink);
                answering.instrument(chat.span.clone()).await
            } else {
                let answering = inner.model.respond(request);
                answering.instrument(chat.span.clone()).await
            };
            let error = match result {
                Ok(response) if !response.is_empty() => {
                    chat.answered(&response);
                    return Ok(response);
                }
                Ok(response) => empty_response(&response),
                Err(error) => error,
            };
            let Some(delay) = inner.retries.delay(attempt, &error, jitter()) else {
                chat.failed(&error);
                return Err(AgentError::Model(error));
            };
            attempt += 1;
            chat.retry(attempt, delay, &error);
            self.emit(|| Event::ModelRetry {
                step_index,
                attempt,
                error: error.to_string(),
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            });
            tokio::time::sleep(delay).await;
        }
    }

    pub(crate) fn context_for(
        &self,
        step_index: usize,
        call: ToolCall,
        tool: Option<usize>,
    ) -> ToolContext {
        self.context_at(step_index, call, tool, 0)
    }

    /// A call's context for its `attempt` (see `ToolContext::attempt`).
    pub(crate) fn context_at(
        &self,
        step_index: usize,
        call: ToolCall,
        tool: Option<usize>,
        attempt: u32,
    ) -> ToolContext {
        let event_checks =
            tool.map_or_else(Vec::new, |i| self.inner().tools[i].event_checks.clone());
        ToolContext::new(ScopeParts {
            run_id: self.state.run_id.clone(),
            nonce: self.state.nonce,
            // The same as the state's: a run is only ever driven by the agent it names.
            agent_id: self.inner().id.clone(),
            step_index,
            context: self.context.clone(),
            call,
            attempt,
            progress: self.events.progress(),
            event_checks,
            resources: self.inner().resources.clone(),
        })
    }

    /// Decides what to do with one call of a fresh turn. Runs no tool code except approval functions.
    /// A call to a tool the turn did not offer (hidden by `active_tools`, or under
    /// `ToolChoice::None`) is a call to an unknown tool.
    async fn plan_call(
        &self,
        step_index: usize,
        call: ToolCall,
        offered: Option<&[bool]>,
    ) -> Result<Plan, AgentError> {
        let inner = self.inner();
        let found = inner.tool_index(&call.name);
        let Some(index) = found.filter(|&i| offered.is_none_or(|offered| offered[i])) else {
            let error = AgentError::UnknownTool(call.name.clone());
            return self.refuse(step_index, &call, error, inner.settings.on_unknown_tool);
        };
        let tool = &inner.tools[index];
        let parsed = match tool.parse_call(&call.arguments) {
            Ok(parsed) => parsed,
            Err(error) => {
                let policy = self.policy_for(index, &error);
                return self.refuse(step_index, &call, error, policy);
            }
        };
        let ctx = self.context_for(step_index, call, Some(index));
        // A person's standing approval for this run (`Decision::ApproveAlways`) is a decision, not a
        // setting: it holds whatever the functions would say, and it was this tool's review.
        let standing = self.state.approved_tools.contains(&tool.id);
        let rule = inner.approval.as_deref();
        if needs_approval(tool, &parsed, &ctx, rule, standing).await {
            return self.pause(
                step_index,
                index,
                ctx.tool_call(),
                PendingKind::ToolApproval,
            );
        }
        self.after_approval(index, parsed, ctx, standing).await
    }

    /// What an allowed call does next: a person's review (`human_review`, unless a person already
    /// approved the call: `reviewed`), the interactive hook, an external tool's pause, or running.
    pub(crate) async fn after_approval(
        &self,
        index: usize,
        parsed: Parsed,
        ctx: ToolContext,
        reviewed: bool,
    ) -> Result<Plan, AgentError> {
        let inner = self.inner();
        let tool = &inner.tools[index];
        let call = ctx.tool_call();
        if let Some(review) = inner.human_review.as_ref().filter(|_| !reviewed) {
            if guarded(|| review(call, &ctx), true) {
                return self.pause(ctx.step_index(), index, call, PendingKind::Hitl);
            }
        }
        if let Some(hook) = &tool.on_tool_called {
            let input = tool.input_value(&call.arguments);
            // A panicking hook fails closed: the call waits for a person.
            let answer = Later::run(|| hook(&input, &ctx), None);
            return match answer.get(None).await {
                Some(value) => self.answered(index, &ctx, value),
                None => self.pause(ctx.step_index(), index, call, PendingKind::Hitl),
            };
        }
        if !tool.executable {
            return self.pause(ctx.step_index(), index, call, PendingKind::ExternalOutput);
        }
        Ok(Plan::Run {
            tool: index,
            parsed,
            ctx,
        })
    }

    /// A call answered without running (by an interactive hook): a result, or an error under the
    /// tool's policy. What the hook said through the context (progress, a new application context)
    /// is kept as a tool's would be; an answer that fails changes nothing.
    fn answered(
        &self,
        index: usize,
        ctx: &ToolContext,
        value: serde_json::Value,
    ) -> Result<Plan, AgentError> {
        let tool = &self.inner().tools[index];
        let call = ctx.tool_call();
        let record = ctx.take_record();
        let result = match record.event_error {
            Some(error) => Err(error),
            None => tool.check_output(value).map(|v| v.to_string()),
        };
        match result {
            Ok(content) => {
                let mut step = self.done_step(ctx.step_index(), call, content, false, Some(index));
                step.preliminary_results = record.progress;
                Ok(Plan::Done {
                    step,
                    error: None,
                    effects: Effects::of(index, tool, call, record.new_context),
                    how: Answered::Result,
                })
            }
            Err(error) => {
                let policy = tool.on_error.unwrap_or(self.inner().settings.on_error);
                self.refuse(ctx.step_index(), call, error, policy)
            }
        }
    }

    /// A call that waits for a person. Its arguments are kept in the state (what the person
    /// reviews), so arguments nested too deeply for the stored state to read back are refused as
    /// invalid instead.
    fn pause(
        &self,
        step_index: usize,
        index: usize,
        call: &ToolCall,
        kind: PendingKind,
    ) -> Result<Plan, AgentError> {
        let arguments = self.inner().tools[index].input_value(&call.arguments);
        if deeper_than(&arguments, MAX_STORED_DEPTH) {
            drop_deep(arguments);
            let error = AgentError::InvalidInput(TOO_DEEP_TO_STORE.into());
            let policy = self.inner().settings.on_invalid_arguments;
            return self.refuse(step_index, call, error, policy);
        }
        Ok(Plan::Pending(PendingCall {
            arguments,
            call: call.clone(),
            kind,
            attempt: 0,
            started_at_ms: None,
        }))
    }

    /// The policy for a call of tool `index` that failed before it ran: invalid arguments go by
    /// the agent's `on_invalid_arguments`; anything else (a panicking validator) by the tool's
    /// error policy.
    pub(crate) fn policy_for(&self, index: usize, error: &AgentError) -> OnError {
        let settings = &self.inner().settings;
        match error {
            AgentError::InvalidInput(_) => settings.on_invalid_arguments,
            _ => self.inner().tools[index]
                .on_error
                .unwrap_or(settings.on_error),
        }
    }

    /// A call that cannot run: fail the run, or answer the model with the error, per `policy`.
    pub(crate) fn refuse(
        &self,
        step_index: usize,
        call: &ToolCall,
        error: AgentError,
        policy: OnError,
    ) -> Result<Plan, AgentError> {
        match policy {
            // The run fails: `run.failed` reports the error.
            OnError::FailRun => Err(error),
            OnError::ReturnToModel => Ok(Plan::Done {
                step: self.done_step(step_index, call, error.content(), true, None),
                error: Some(error.to_string().into_boxed_str()),
                effects: Effects::default(),
                how: Answered::Refused(error.kind()),
            }),
        }
    }

    /// The step of a call answered without running, capped like a result (`tool`'s own cap first).
    pub(crate) fn done_step(
        &self,
        step_index: usize,
        call: &ToolCall,
        content: String,
        is_error: bool,
        tool: Option<usize>,
    ) -> ToolStep {
        let inner = self.inner();
        let cap = inner
            .settings
            .max_output_chars_of(tool.map(|i| &inner.tools[i]));
        let content = invoke::cap(content, cap);
        ToolStep {
            step_index,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            preliminary_results: Vec::new(),
            content,
            is_error,
            error: None,
        }
    }

    /// Runs the planned calls (each with its slot in `turn`), fills the turn's slots, and either
    /// pauses (some calls still pending) or appends every result in call order.
    ///
    /// A fresh turn comes with no list of calls (`turn.calls` empty): the conversation's last
    /// message holds them, and they are copied into the turn only if it pauses.
    async fn finish_turn(
        &mut self,
        mut turn: PausedTurn,
        plans: Vec<(usize, Plan)>,
        starts_recorded: bool,
    ) -> Result<(), AgentError> {
        let mut pending = Vec::new();
        let mut effects = Vec::new();
        // The calls to run take the plans' place (collected in place: no new list).
        let mut runs: Vec<Run> = plans
            .into_iter()
            .filter_map(|(slot, plan)| match plan {
                Plan::Done {
                    mut step,
                    error,
                    effects: done,
                    how,
                } => {
                    self.answered_span(&step, how);
                    step.error = error.as_deref().map(String::from);
                    if !done.is_empty() {
                        effects.push((slot, done));
                    }
                    self.emit(|| match error {
                        Some(error) => Event::ToolError {
                            call_id: step.call_id.clone(),
                            tool: step.tool.clone(),
                            error: error.into_string(),
                            content: Some(step.content.clone()),
                        },
                        None => Event::ToolResult {
                            call_id: step.call_id.clone(),
                            tool: step.tool.clone(),
                            content: step.content.clone(),
                        },
                    });
                    turn.results[slot] = Some(step);
                    None
                }
                Plan::Pending(p) => {
                    let tool = self.inner().tool_index(&p.call.name);
                    observe::tool_paused(self.inner(), tool, &p.call, p.kind, p.attempt);
                    pending.push(p);
                    None
                }
                Plan::Run { tool, parsed, ctx } => {
                    // Only a resumed turn lists its calls; only a person's decision edits one.
                    let edited = turn
                        .calls
                        .get(slot)
                        .is_some_and(|call| call.arguments != ctx.tool_call().arguments);
                    if edited {
                        self.record_edited_arguments(&mut turn, slot, ctx.tool_call());
                    }
                    Some((slot, tool, parsed, ctx))
                }
            })
            .collect();
        let execution = Execution {
            inner: &self.agent.inner,
            events: &self.events,
            concurrency: self.concurrency,
            journal: self.journal.as_deref(),
            starts_recorded,
        };
        // The usual turn runs one call: no list of outcomes for it.
        let mut lone = None;
        let mut outcomes = Vec::new();
        if runs.len() == 1 {
            if let Some(run) = runs.pop() {
                lone = Some(execution.run_alone(run).await);
            }
        } else {
            outcomes = execution.run_all(runs).await;
        }
        let mut failure = None;
        for (slot, outcome) in lone.into_iter().chain(outcomes) {
            let Outcome {
                step,
                effects: ran,
                fail,
            } = outcome;
            if !ran.is_empty() {
                effects.push((slot, ran));
            }
            if failure.is_none() {
                failure = fail;
            }
            turn.results[slot] = Some(step);
        }
        // Context updates and next-turn overrides apply in call order, whoever answered the call.
        effects.sort_by_key(|(slot, _)| *slot);
        for (slot, effect) in effects {
            if let Err(error) = self.apply(effect) {
                // A panicking next-turn function: the call's result becomes the tool's panic,
                // under its error policy.
                let Some(step) = turn.results[slot].as_mut() else {
                    continue;
                };
                let index = self.inner().index.get(&step.tool).copied();
                let policy = index.map_or(self.inner().settings.on_error, |i| {
                    self.policy_for(i, &error)
                });
                step.content = error.content();
                step.is_error = true;
                step.error = Some(error.to_string());
                self.emit(|| Event::ToolError {
                    call_id: step.call_id.clone(),
                    tool: step.tool.clone(),
                    error: error.to_string(),
                    content: Some(step.content.clone()),
                });
                if policy == OnError::FailRun && failure.is_none() {
                    failure = Some(error);
                }
            }
        }
        if let Some(error) = failure {
            // The failed state shows every call of the turn that has a result: what ran, what
            // failed the run, and what that cancelled.
            self.state.steps.extend(turn.results.into_iter().flatten());
            return Err(error);
        }
        if !pending.is_empty() {
            if turn.calls.is_empty() {
                turn.calls = self.turn_calls().to_vec();
            }
            self.state.pending = pending;
            self.state.paused_turn = Some(turn);
            self.state.status = RunStatus::WaitingForHuman;
            return Ok(());
        }
        self.state.pending.clear();
        self.state.status = RunStatus::Completed;
        for step in turn.results.into_iter().flatten() {
            self.state.messages.push(Message::Tool {
                call_id: step.call_id.clone(),
                name: step.tool.clone(),
                content: step.content.clone(),
            });
            self.state.steps.push(step);
        }
        Ok(())
    }

    /// The span of a call answered without running.
    fn answered_span(&self, step: &ToolStep, how: Answered) {
        use crate::telemetry::semconv::{OUTCOME_ERROR, OUTCOME_OK, OUTCOME_REJECTED};
        if !crate::telemetry::on() {
            return;
        }
        let (outcome, kind) = match how {
            Answered::Replayed => return,
            Answered::Result => (OUTCOME_OK, None),
            Answered::Refused(kind) => (OUTCOME_ERROR, Some(kind)),
            Answered::Rejected => (OUTCOME_REJECTED, None),
        };
        let inner = self.inner();
        let call = ToolCall {
            id: step.call_id.clone(),
            name: step.tool.clone(),
            arguments: self.call_arguments(&step.call_id),
        };
        let span = observe::tool_span(inner, inner.tool_index(&step.tool), &call, 0);
        observe::tool_answered(inner, &span, &call, outcome, kind, &step.content);
    }

    /// The argument text of the call `call_id` of the conversation's last turn (for a span's
    /// content, when it is captured).
    fn call_arguments(&self, call_id: &str) -> String {
        if !self.inner().capture.is_on() {
            return String::new();
        }
        let turn = self.state.paused_turn.as_ref().map(|t| t.calls.as_slice());
        turn.into_iter()
            .flatten()
            .chain(self.turn_calls())
            .find(|c| c.id == call_id)
            .map(|c| c.arguments.clone())
            .unwrap_or_default()
    }

    /// Applies what a call changes for the rest of the run; a panicking next-turn function changes
    /// nothing and is the tool's panic.
    fn apply(&mut self, effects: Effects) -> Result<(), AgentError> {
        if let Some((index, input)) = effects.next_turn {
            let tool = &self.agent.inner.tools[index];
            if let Some(change) = &tool.next_turn {
                let current = &self.state.next_turn;
                self.state.next_turn = tool.guard(|| change(&input, current))?;
            }
        }
        if let Some(context) = effects.new_context {
            self.context = Arc::new(context);
        }
        Ok(())
    }

    /// An approval with edited arguments: the conversation shows the call as it actually ran.
    fn record_edited_arguments(&mut self, turn: &mut PausedTurn, slot: usize, edited: &ToolCall) {
        turn.calls[slot].arguments = edited.arguments.clone();
        for message in self.state.messages.iter_mut().rev() {
            if let Message::Assistant { tool_calls, .. } = message {
                if let Some(call) = tool_calls.iter_mut().find(|c| c.id == edited.id) {
                    call.arguments = edited.arguments.clone();
                    return;
                }
            }
        }
    }
}

/// A refused resume, retry or continuation: the listener's stream is one `run.refused`, carrying
/// the error and the state as it was `given`.
pub(crate) fn refuse(error: AgentError, given: Option<RunState>, events: &Emitter) -> RunError {
    if let Some(state) = given {
        events.emit(|| Event::Refused {
            kind: error.kind(),
            error: error.to_string(),
            state: Box::new(state),
        });
    }
    RunError::refused(error)
}

/// Runs a user function; a panic counts as `on_panic` (callers fail closed: "needs a person").
fn guarded<T>(f: impl FnOnce() -> T, on_panic: T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// Fills in ids a model left empty, and refuses a turn whose call ids repeat (decisions are bound to
/// call ids, so two calls with one id could not be told apart).
fn normalise_calls(step_index: usize, calls: &mut [ToolCall]) -> Result<(), AgentError> {
    for (i, call) in calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = format!("call_{step_index}_{i}");
        }
    }
    // One call cannot repeat an id: no set to build.
    if calls.len() > 1 {
        let mut seen = std::collections::HashSet::with_capacity(calls.len());
        if let Some(call) = calls.iter().find(|call| !seen.insert(call.id.as_str())) {
            return Err(AgentError::Model(ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!(
                    "the model used tool call id `{}` twice in one turn",
                    call.id
                ),
            )));
        }
    }
    Ok(())
}

/// The plans of a resumed turn, each with its call's slot in `turn` (found by id in one pass: a
/// turn may have many calls).
fn slotted(
    turn: &PausedTurn,
    plans: Vec<(String, Plan)>,
) -> Result<Vec<(usize, Plan)>, AgentError> {
    let by_id: std::collections::HashMap<&str, usize> = turn
        .calls
        .iter()
        .enumerate()
        .map(|(slot, call)| (call.id.as_str(), slot))
        .collect();
    plans
        .into_iter()
        .map(|(call_id, plan)| match by_id.get(call_id.as_str()) {
            Some(&slot) => Ok((slot, plan)),
            None => Err(AgentError::InvalidState(format!(
                "call `{call_id}` is not in the paused turn"
            ))),
        })
        .collect()
}

/// The error of a response with neither text nor tool calls.
fn empty_response(response: &ModelResponse) -> ModelError {
    let why = match &response.finish_reason {
        Some(reason) => format!(" (finish reason: {})", serde_json::json!(reason)),
        None => String::new(),
    };
    ModelError::new(
        ModelErrorKind::EmptyResponse,
        format!("the model answered with neither text nor tool calls{why}"),
    )
}

/// A number in `[0, 1)` for retry jitter, from the standard library's per-process random keys.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

pub(crate) fn rejection_content(message: &str) -> String {
    serde_json::json!({ "error": format!("Rejected by a person: {message}") }).to_string()
}

/// The application context, shared by the calls of a run. A run without one (`null`, the usual
/// case) shares one `null` for the whole process instead of allocating its own.
fn shared_context(context: serde_json::Value) -> Arc<serde_json::Value> {
    static NULL: std::sync::LazyLock<Arc<serde_json::Value>> =
        std::sync::LazyLock::new(|| Arc::new(serde_json::Value::Null));
    if context.is_null() {
        NULL.clone()
    } else {
        Arc::new(context)
    }
}

/// A failed state waits for nothing: it can be retried, not resumed.
fn mark_failed(state: &mut RunState) {
    state.status = RunStatus::Failed;
    state.pending.clear();
    state.paused_turn = None;
}

/// Signs `state` with `key`, when the agent has one.
fn sign(key: Option<&[u8]>, state: &mut RunState) {
    state.signature = None;
    if let Some(key) = key {
        state.signature = Some(signing::sign(key, state));
    }
}

pub(crate) fn new_run_id() -> String {
    use std::fmt::Write;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Nanoseconds fit a `u64` until the year 2554, and a `u64` formats much faster than a `u128`.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    // Written into one buffer of the right size: `format!` grows its buffer as it goes.
    let mut id = String::with_capacity(64);
    let _ = write!(
        id,
        "run_{nanos:x}_{}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    id
}
