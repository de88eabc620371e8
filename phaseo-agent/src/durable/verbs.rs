//! The verbs of a [`DurableAgent`] as requests, in the shape of [`Agent`](crate::Agent)'s:
//! [`resume`](DurableAgent::resume), [`retry`](DurableAgent::retry) and
//! [`recover`](DurableAgent::recover) each return a request whose settings are methods, awaited
//! for the run's result (`IntoFuture`) or turned into the run's events with `.stream()`.

use std::future::IntoFuture;

use futures::future::BoxFuture;

use crate::durable::entry::now_ms;
use crate::durable::rows::{decider, unfit};
use crate::durable::runs::{DurableAgent, Who};
use crate::error::{AgentError, StoreError};
use crate::run::event::{Emitter, EventStream};
use crate::run::runner::refuse;
use crate::run::state::{Decisions, RunError, RunResult};
use crate::store::backend::{DecisionRow, StoredStatus};

/// What awaiting a request gives: the run's result, or why it has none.
type Outcome = Result<RunResult, RunError>;

impl DurableAgent {
    /// Resumes a paused run of the store: with the decisions given
    /// ([`decisions`](DurableResumeRequest::decisions), and who made them,
    /// [`by`](DurableResumeRequest::by)), or, without, with the decisions recorded for it by
    /// [`Runs::decide`](crate::durable::Runs::decide) (one per waiting call;
    /// [`AgentError::MissingDecision`] names the calls still undecided).
    ///
    /// Taking the run and recording the decisions (in the audit log, with who made them) is one
    /// compare-and-swap on the run's version: the version read
    /// ([`at`](DurableResumeRequest::at)), or the current one. If another resumer, a decision or
    /// a recovery moved the run on since, the resume fails with
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) naming the run and the version (or,
    /// while another process runs it, [`StoreError::LeaseHeld`](crate::StoreError::LeaseHeld)
    /// naming that process), and nothing runs. Decisions the run refuses (a missing one,
    /// arguments that fail validation) leave it waiting again, with its decisions refused.
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::{MemoryStore, StoredStatus};
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Done.");
    /// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
    /// let paused = agent.run("Deploy").await?;
    /// let run_id = paused.state.run_id();
    /// let read = runs.load(run_id).await?.version;      // what a person was shown
    ///
    /// let done = agent
    ///     .resume(run_id)
    ///     .decisions(Decisions::new().approve("call_1"))
    ///     .at(read)
    ///     .by("ada")
    ///     .await?;
    /// assert_eq!(done.output(), Some("Done."));
    /// assert_eq!(runs.load(run_id).await?.status, StoredStatus::Completed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn resume(&self, run_id: impl Into<String>) -> DurableResumeRequest {
        DurableResumeRequest {
            agent: self.clone(),
            run_id: run_id.into(),
            decisions: None,
            version: None,
            by: None,
        }
    }

    /// Retries a failed run of the store: the model is asked again from the failed state, and no
    /// call that finished runs again (each call of the failed turn is answered with its recorded
    /// result, or told it did not run), as [`Agent::retry`](crate::Agent::retry) does, under the
    /// same run id, journaled.
    ///
    /// Taking the run is a compare-and-swap on its version, the version read
    /// ([`at`](DurableRetryRequest::at)) or the current one, as a resume's is: a second retry of
    /// the same version, in this process or another, is refused with
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) (or
    /// [`StoreError::LeaseHeld`](crate::StoreError::LeaseHeld) while the first retry runs) and
    /// runs nothing. A run that is not failed is refused with
    /// [`StoreError::WrongStatus`](crate::StoreError::WrongStatus). Who retried
    /// ([`by`](DurableRetryRequest::by)) is journaled.
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::{MemoryStore, StoredStatus};
    /// use phaseo_agent::{Agent, ModelError, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let model = ScriptedModel::new().error(ModelError::other("down")).text("Back.");
    /// let agent = runs.attach(Agent::builder("chat").model(model).build()?);
    ///
    /// let failed = agent.run("Hello").await.unwrap_err();
    /// let run_id = failed.state.as_ref().unwrap().run_id().to_owned();
    /// let stored = runs.load(&run_id).await?;
    /// assert_eq!(stored.status, StoredStatus::Failed);
    ///
    /// let done = agent.retry(&run_id).at(stored.version).by("ada").await?;
    /// assert_eq!(done.output(), Some("Back."));
    /// assert_eq!(runs.load(&run_id).await?.status, StoredStatus::Completed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry(&self, run_id: impl Into<String>) -> DurableRetryRequest {
        DurableRetryRequest {
            agent: self.clone(),
            run_id: run_id.into(),
            version: None,
            by: None,
        }
    }

    /// Takes up a run whose process stopped while it was running (a crash, a kill, a lost
    /// machine), from its journal.
    ///
    /// Taking it is a compare-and-swap like a resume: if the process is in fact still running
    /// it, that process's next write fails and it stops, so the run goes on in exactly one
    /// place; a run whose lease is live is refused with
    /// [`StoreError::LeaseHeld`](crate::StoreError::LeaseHeld). Nothing that completed is lost.
    /// A call whose start was recorded and whose result was not is *in doubt*: a tool marked
    /// [`idempotent`](crate::Tool::idempotent) runs again with the same
    /// [`idempotency key`](crate::ToolContext::idempotency_key); any other call waits for a
    /// person as [`PendingKind::OutcomeUnknown`](crate::PendingKind::OutcomeUnknown), and the
    /// run is stored as [`StoredStatus::InDoubt`]. A run that was not running is refused with
    /// [`StoreError::WrongStatus`](crate::StoreError::WrongStatus).
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    /// use phaseo_agent::{Agent, AgentError, ScriptedModel, StoreError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let agent = runs.attach(Agent::builder("chat").model(ScriptedModel::new().text("Hi.")).build()?);
    /// let done = agent.run("Hello").await?;
    ///
    /// // A completed run is not taken up: only a run that was running is.
    /// let refused = agent.recover(done.state.run_id()).await.unwrap_err();
    /// assert!(matches!(refused.error, AgentError::Store(StoreError::WrongStatus { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn recover(&self, run_id: impl Into<String>) -> RecoverRequest {
        RecoverRequest {
            agent: self.clone(),
            run_id: run_id.into(),
        }
    }
}

/// The resume of a stored run, made by [`DurableAgent::resume`]: await it for the result, or
/// call [`stream`](Self::stream) for the run's events.
#[derive(Debug)]
#[must_use = "a resume request does nothing until it is awaited or streamed"]
pub struct DurableResumeRequest {
    agent: DurableAgent,
    run_id: String,
    decisions: Option<Decisions>,
    version: Option<u64>,
    by: Option<String>,
}

impl DurableResumeRequest {
    /// The decisions to resume with, one per waiting call; who made them must be named with
    /// [`by`](Self::by), or the resume is refused with [`AgentError::UnattributedDecisions`]
    /// before anything is read or written. Default: the decisions recorded for the run by
    /// [`Runs::decide`](crate::durable::Runs::decide).
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::{MemoryStore, StoredStatus};
    /// use phaseo_agent::{Agent, AgentError, Decisions, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Done.");
    /// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
    /// let paused = agent.run("Deploy").await?;
    /// let run_id = paused.state.run_id();
    ///
    /// // Nobody named: refused, and the run still waits.
    /// let approve = Decisions::new().approve("call_1");
    /// let refused = agent.resume(run_id).decisions(approve.clone()).await.unwrap_err();
    /// assert!(matches!(refused.error, AgentError::UnattributedDecisions { .. }));
    /// assert_eq!(runs.load(run_id).await?.status, StoredStatus::Paused);
    ///
    /// let done = agent.resume(run_id).decisions(approve).by("ada").await?;
    /// assert_eq!(done.output(), Some("Done."));
    /// # Ok(())
    /// # }
    /// ```
    pub fn decisions(mut self, decisions: Decisions) -> Self {
        self.decisions = Some(decisions);
        self
    }

    /// The version of the run the caller read (what a person was shown): the resume is refused
    /// with [`StoreError::Conflict`](crate::StoreError::Conflict) if the run moved on since.
    /// Default: the version current when the resume loads the run; a write that moves the run
    /// on between that load and the resume's own write (another resumer, a decision, a
    /// recovery) still makes the resume fail with a conflict, and nothing runs.
    pub fn at(mut self, version: u64) -> Self {
        self.version = Some(version);
        self
    }

    /// Who made the decisions, for the audit log and the run's journal: required with
    /// [`decisions`](Self::decisions) (an empty name counts as none). Without decisions, it
    /// names who resumed the run in its journal (default: `recorded`); who made each recorded
    /// decision is in the audit log already.
    pub fn by(mut self, name: impl Into<String>) -> Self {
        self.by = Some(name.into());
        self
    }

    /// The resumed run's events, as [`ResumeRequest::stream`](crate::ResumeRequest::stream)
    /// gives them; the last one is the same result that awaiting the request returns. A resume
    /// refused once the run is loaded (decisions without [`by`](Self::by), a conflict, a run not
    /// paused, a decision that does not fit, a live lease) is one `run.refused`, with the stored
    /// state; a run that cannot be loaded at all (not found, damaged) has no state to show, and
    /// its stream ends with no event (await the request for the error).
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    /// use phaseo_agent::{Agent, Decisions, Event, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Done.");
    /// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
    /// let paused = agent.run("Deploy").await?;
    ///
    /// let approve = Decisions::new().approve("call_1");
    /// let events: Vec<Event> =
    ///     agent.resume(paused.state.run_id()).decisions(approve).by("ada").stream().collect().await;
    /// let names: Vec<&str> = events.iter().map(Event::name).collect();
    /// assert_eq!(names, ["run.started", "tool.called", "tool.result", "model.turn", "run.completed"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The resume, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(self.resume_run(events))
    }

    async fn resume_run(self, events: Emitter) -> Outcome {
        let DurableResumeRequest {
            agent,
            run_id,
            decisions,
            version,
            by,
        } = self;
        let by = by.filter(|name| !name.trim().is_empty());
        let Some(decisions) = decisions else {
            let stored = agent.load_at(&run_id, version, &events).await?;
            return agent
                .resume_recorded(stored, by.as_deref(), None, &events)
                .await;
        };
        let Some(by) = by else {
            let unnamed = AgentError::UnattributedDecisions {
                run_id: run_id.clone(),
            };
            // Nothing is written; the stored state, when it can be read, is what the stream shows.
            let state = agent.runs.load(&run_id).await.ok().map(|s| s.state);
            return Err(refuse(unnamed, state, &events));
        };
        let stored = agent.load_at(&run_id, version, &events).await?;
        // A decision that does not fit its call's kind (an approval of a call in doubt, above
        // all) is refused before the run is taken, so the audit log never records it.
        if let Some(refused) = decisions
            .iter()
            .find_map(|(call_id, decision)| unfit(&stored.state, call_id, decision))
        {
            return Err(refuse(refused, Some(stored.state), &events));
        }
        let at_ms = now_ms();
        let audit: Vec<DecisionRow> = decisions
            .iter()
            .map(|(call_id, decision)| {
                let row = stored.pending.iter().find(|p| p.call_id == call_id);
                DecisionRow {
                    run_id: run_id.clone(),
                    call_id: call_id.to_owned(),
                    tool: row.map(|r| r.tool.clone()).unwrap_or_default(),
                    decision: serde_json::to_string(decision).unwrap_or_default(),
                    by: by.clone(),
                    at_ms,
                    digest: row.map(|r| r.digest.clone()).unwrap_or_default(),
                    version: stored.version,
                }
            })
            .collect();
        let deciders = audit.iter().map(decider).collect();
        let who = Who {
            by: &by,
            audit,
            deciders,
        };
        agent.take(stored, decisions, who, None, &events).await
    }
}

/// The retry of a stored failed run, made by [`DurableAgent::retry`]: await it for the result,
/// or call [`stream`](Self::stream) for the run's events.
#[derive(Debug)]
#[must_use = "a retry request does nothing until it is awaited or streamed"]
pub struct DurableRetryRequest {
    agent: DurableAgent,
    run_id: String,
    version: Option<u64>,
    by: Option<String>,
}

impl DurableRetryRequest {
    /// The version of the failed run the caller read: the retry is refused with
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) if the run moved on since. Default:
    /// the version current when the retry loads the run; a write that moves the run on between
    /// that load and the retry's own write (another retry, say) still makes this one fail with a
    /// conflict, and nothing runs.
    pub fn at(mut self, version: u64) -> Self {
        self.version = Some(version);
        self
    }

    /// Who retried, journaled with the retry. Default: this process's lease holder name
    /// ([`Runs::holder`](crate::durable::Runs::holder)), as a recovery names.
    pub fn by(mut self, name: impl Into<String>) -> Self {
        self.by = Some(name.into());
        self
    }

    /// The retried run's events; the last one is the same result that awaiting the request
    /// returns. A retry refused once the run is loaded (a conflict, a run that has not failed, a
    /// live lease) is one `run.refused`, with the stored state; a run that cannot be loaded has
    /// no state to show, and its stream ends with no event.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    /// use phaseo_agent::{Agent, Event, ModelError, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let model = ScriptedModel::new().error(ModelError::other("down")).text("Back.");
    /// let agent = runs.attach(Agent::builder("chat").model(model).build()?);
    /// let failed = agent.run("Hello").await.unwrap_err();
    /// let run_id = failed.state.unwrap().run_id().to_owned();
    ///
    /// let events: Vec<Event> = agent.retry(&run_id).by("ada").stream().collect().await;
    /// assert!(matches!(events.last(), Some(Event::Completed { output, .. }) if output == "Back."));
    ///
    /// // Completed now: a second retry is refused, as one `run.refused`.
    /// let refused: Vec<Event> = agent.retry(&run_id).by("ada").stream().collect().await;
    /// assert!(matches!(&refused[..], [Event::Refused { .. }]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The retry, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(async move {
            let by = self
                .by
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| self.agent.runs.holding.owner.clone());
            let retrying = self
                .agent
                .begin_retry(&self.run_id, self.version, &by, events)
                .await?;
            retrying.await
        })
    }
}

/// The recovery of a stored run whose process stopped, made by [`DurableAgent::recover`]: await
/// it for the result, or call [`stream`](Self::stream) for the run's events.
#[derive(Debug)]
#[must_use = "a recover request does nothing until it is awaited or streamed"]
pub struct RecoverRequest {
    agent: DurableAgent,
    run_id: String,
}

impl RecoverRequest {
    /// The recovered run's events, from the turn it is taken up at; the last one is the same
    /// result that awaiting the request returns. A recovery refused once the run is loaded (a
    /// run that was not running, a live lease) is one `run.refused`, with the stored state; a
    /// run that cannot be loaded has no state to show, and its stream ends with no event.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    /// use phaseo_agent::{Agent, Event, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let agent = runs.attach(Agent::builder("chat").model(ScriptedModel::new().text("Hi.")).build()?);
    /// let done = agent.run("Hello").await?;
    ///
    /// let events: Vec<Event> = agent.recover(done.state.run_id()).stream().collect().await;
    /// assert!(matches!(&events[..], [Event::Refused { .. }])); // it was not running
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> EventStream {
        EventStream::new(move |events| self.start(events))
    }

    /// The recovery, reporting to `events` (nobody, when the request is awaited).
    fn start(self, events: Emitter) -> BoxFuture<'static, Outcome> {
        Box::pin(async move {
            let RecoverRequest { agent, run_id } = self;
            let stored = agent.runs.load(&run_id).await.map_err(RunError::refused)?;
            if stored.status != StoredStatus::Running {
                let wrong = StoreError::WrongStatus {
                    run_id,
                    status: stored.status,
                    needed: "only a run that was running is recovered".into(),
                };
                return Err(refuse(
                    AgentError::Store(wrong),
                    Some(stored.state),
                    &events,
                ));
            }
            let by = agent.runs.holding.owner.clone();
            agent.take_up(stored, by, None, events).await
        })
    }
}

/// Awaiting a request runs it, with no listener for its events.
macro_rules! into_future {
    ($($request:ty),*) => {$(
        impl IntoFuture for $request {
            type Output = Outcome;
            type IntoFuture = BoxFuture<'static, Outcome>;

            fn into_future(self) -> Self::IntoFuture {
                self.start(Emitter::default())
            }
        }
    )*};
}

into_future!(DurableResumeRequest, DurableRetryRequest, RecoverRequest);
