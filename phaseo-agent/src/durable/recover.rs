//! Recovery and retry: runs whose process stopped, taken up from their journal (by this
//! process's own agents, or every abandoned run of the agents given), and failed runs retried in
//! place.

use std::future::Future;
use std::sync::Arc;

use crate::durable::entry::Entry;
use crate::durable::journal::Extra;
use crate::durable::runs::{DurableAgent, Runs, StoredRun};
use crate::error::{AgentError, StoreError};
use crate::run::agent::Agent;
use crate::run::event::Emitter;
use crate::run::journal::Journal;
use crate::run::runner::{RunOptions, Runner, refuse};
use crate::run::state::{RunError, RunResult, RunStatus};
use crate::store::backend::{AbandonedRun, StoredStatus};

/// What [`Runs::recover_abandoned`] did: the runs it took up, each with how its recovery ended,
/// and the abandoned runs it could not take up because their agent was not given.
#[derive(Debug)]
#[non_exhaustive]
pub struct Recovery {
    /// Each run taken up, with how it ended here: completed, paused (a call in doubt waits for
    /// a person), failed, or refused (another process took it up first:
    /// [`StoreError::LeaseHeld`]).
    pub recovered: Vec<(String, Result<RunResult, RunError>)>,
    /// Abandoned runs of agents not given: nothing here can take them up, and they stay
    /// `running` until a process with their agent does. Show them to people as stuck.
    pub stuck: Vec<AbandonedRun>,
}

impl Runs {
    /// Runs that were running in an application's own process and whose lease expired (or that
    /// never had one: written by a version before leases), oldest first, at most `limit`: their
    /// process stopped. Runs served by [`Worker`](crate::worker::Worker)s are not listed (the
    /// workers take them up).
    pub async fn abandoned(&self, limit: usize) -> Result<Vec<AbandonedRun>, AgentError> {
        self.store.abandoned(limit).await.map_err(AgentError::Store)
    }

    /// Takes up every abandoned run ([`abandoned`](Self::abandoned)) of the given agents, as
    /// [`DurableAgent::recover`] does, at most 8 at once, and waits for each to end or pause;
    /// the runs of other agents are returned as [`Recovery::stuck`]. A run another process
    /// takes up first is refused here with [`StoreError::LeaseHeld`], and runs there alone.
    ///
    /// Call it when a process starts, and now and then (every lease or so): a run whose
    /// process died is then taken up by the next process of the same application, and a run
    /// whose process is alive is left alone, whoever starts.
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::MemoryStore;
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let agent = Agent::builder("support").model(ScriptedModel::new()).build()?;
    /// // At start-up, before serving: nothing was abandoned in a new store.
    /// let recovery = runs.recover_abandoned(&[agent]).await?;
    /// assert!(recovery.recovered.is_empty() && recovery.stuck.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn recover_abandoned(&self, agents: &[Agent]) -> Result<Recovery, AgentError> {
        use futures::StreamExt as _;
        let abandoned = self.abandoned(1_000).await?;
        let mut stuck = Vec::new();
        let mut taken = Vec::new();
        for run in abandoned {
            match agents.iter().find(|a| a.id() == run.agent_id) {
                Some(agent) => taken.push((run.run_id, self.attach(agent.clone()))),
                None => stuck.push(run),
            }
        }
        let recovered = futures::stream::iter(taken)
            .map(|(run_id, agent)| async move {
                let result = agent.recover(&run_id).await;
                if let Err(error) = &result {
                    if !matches!(error.error, AgentError::Store(StoreError::LeaseHeld { .. })) {
                        tracing::warn!(target: "phaseo_agent::recovery", %run_id, error = %error.error, "recovering an abandoned run failed");
                    }
                }
                (run_id, result)
            })
            .buffer_unordered(8)
            .collect()
            .await;
        Ok(Recovery { recovered, stuck })
    }
}

impl DurableAgent {
    /// Takes a failed run to retry it (the compare-and-swap, journaled) and returns the retry
    /// itself, to await here or in the background: a caller learns at once whether the run was
    /// taken.
    pub(crate) async fn begin_retry(
        &self,
        run_id: &str,
        version: Option<u64>,
        by: &str,
        events: Emitter,
    ) -> Result<impl Future<Output = Result<RunResult, RunError>> + Send + 'static, RunError> {
        let stored = self.load_at(run_id, version, &events).await?;
        if stored.status != StoredStatus::Failed {
            let wrong = StoreError::WrongStatus {
                run_id: run_id.to_owned(),
                status: stored.status,
                needed: "only a failed run is retried".into(),
            };
            return Err(refuse(
                AgentError::Store(wrong),
                Some(stored.state),
                &events,
            ));
        }
        let lease = match self.runs.hold(run_id).await {
            Ok(lease) => lease,
            Err(e) => return Err(refuse(AgentError::Store(e), Some(stored.state), &events)),
        };
        let journal = Arc::new(self.runs.journal_held(&stored, lease.clone(), None));
        let taken = journal
            .write(
                Entry::Retried { by: by.to_owned() },
                Extra {
                    pending: Some(Vec::new()),
                    status: Some(StoredStatus::Running),
                    ..Extra::default()
                },
            )
            .await;
        if let Err(error) = taken {
            self.runs.let_go(lease.as_ref()).await;
            return Err(refuse(
                AgentError::Store(error),
                Some(stored.state),
                &events,
            ));
        }
        let options = RunOptions {
            journal: Some(journal as Arc<dyn Journal>),
            ..RunOptions::default()
        };
        Ok(Runner::retry(
            self.agent.clone(),
            stored.state,
            options,
            events,
        ))
    }

    /// Takes up a loaded run from its journal: one whose process stopped, or a queued run not
    /// yet begun (its journal holds its start alone, so it begins). A worker's writes carry its
    /// lease's `fence`.
    pub(crate) async fn take_up(
        &self,
        stored: StoredRun,
        by: String,
        fence: Option<u64>,
        events: Emitter,
    ) -> Result<RunResult, RunError> {
        // A queued run whose journal holds its start alone has not begun: it starts.
        let begun = !(stored.status == StoredStatus::Ready && stored.version == 1);
        // A recovery in this process holds the run under a lease of its own, refused while
        // another process's lease is live: a run is taken up only once its process is gone.
        let lease = match fence {
            Some(_) => None,
            None => match self.runs.hold(&stored.state.run_id).await {
                Ok(lease) => lease,
                Err(e) => return Err(refuse(AgentError::Store(e), Some(stored.state), &events)),
            },
        };
        let journal = Arc::new(self.runs.journal_held(&stored, lease.clone(), fence));
        // A worker beginning a queued run writes nothing first: its lease already fences every
        // later write, and one commit fewer is the time between enqueue and the first model
        // request. Who took a run is then in the lease (the store's `lease_owner`), and a
        // `recovered` entry marks each take-over of a run that had begun.
        if begun || fence.is_none() {
            let taken = journal
                .write(Entry::Recovered { by }, Extra::default())
                .await;
            if let Err(error) = taken {
                self.runs.let_go(lease.as_ref()).await;
                return Err(refuse(
                    AgentError::Store(error),
                    Some(stored.state),
                    &events,
                ));
            }
        }
        let StoredRun {
            state,
            in_flight,
            decisions,
            ..
        } = stored;
        let options = RunOptions {
            journal: Some(journal as Arc<dyn Journal>),
            ..RunOptions::default()
        };
        // Taken to be retried, and stopped before the retry's first turn was recorded: the retry
        // begins again (nothing of it ran that is not journaled).
        if begun && state.status == RunStatus::Failed {
            return Runner::retry(self.agent.clone(), state, options, events).await;
        }
        Runner::recover(
            self.agent.clone(),
            state,
            in_flight,
            decisions,
            options,
            events,
            begun,
        )
        .await
    }
}
