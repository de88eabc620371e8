//! What an inbox does in the background and remembers of it: taking up the runs of its
//! agents whose process stopped, at start and every `recover_every`; the background resumes and
//! recoveries that failed, for the run's page; and the list's sections of failed and stuck runs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Semaphore;

use crate::durable::entry::now_ms;
use crate::durable::recover::Recovery;
use crate::durable::runs::{DurableAgent, Runs};
use crate::error::{AgentError, StoreError};
use crate::inbox::runs::{self as run_pages, FailedView};
use crate::store::backend::StoredStatus;
use crate::store::listing::RunFilter;

/// How many abandoned runs an inbox takes up at once.
const RECOVERING_AT_ONCE: usize = 8;

/// How many runs' failed background resumes, and failed runs' texts, an inbox remembers.
const REMEMBERED: usize = 1000;

/// The most failed runs, and runs whose process stopped, the list shows.
const MAX_RUNS_LISTED: usize = 20;

/// The inbox's background work and what it remembers of it, shared by the inbox's clones.
pub(crate) struct Background {
    /// Failed background resumes and recoveries, by run: when, and why.
    failures: Mutex<Remembered<(i64, String)>>,
    /// Failed runs' texts as listed, by run: the version they were read at, and the text (a
    /// failed run changes only when retried, so the list reads each once).
    failed_texts: Mutex<Remembered<(u64, Option<String>)>>,
    /// The runs being taken up now, and the bound on how many at once.
    recovering: Arc<Mutex<HashSet<String>>>,
    slots: Arc<Semaphore>,
}

impl Default for Background {
    fn default() -> Self {
        Background {
            failures: Mutex::default(),
            failed_texts: Mutex::default(),
            recovering: Arc::default(),
            slots: Arc::new(Semaphore::new(RECOVERING_AT_ONCE)),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Values by run id, at most [`REMEMBERED`], the oldest forgotten first.
struct Remembered<T> {
    by_run: HashMap<String, T>,
    order: VecDeque<String>,
}

impl<T> Default for Remembered<T> {
    fn default() -> Self {
        Remembered {
            by_run: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<T> Remembered<T> {
    fn put(&mut self, run: &str, value: T) {
        if self.by_run.insert(run.to_owned(), value).is_none() {
            self.order.push_back(run.to_owned());
        }
        while self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.by_run.remove(&old);
            }
        }
    }
}

impl Background {
    /// The inbox's last failed attempt to resume or recover the run: when, and why.
    pub(crate) fn failure_of(&self, run: &str) -> Option<(i64, String)> {
        lock(&self.failures).by_run.get(run).cloned()
    }
}

/// A run being taken up: forgotten when its recovery ends, however it ends.
struct Recovering {
    runs: Arc<Mutex<HashSet<String>>>,
    run_id: String,
}

impl Drop for Recovering {
    fn drop(&mut self) {
        lock(&self.runs).remove(&self.run_id);
    }
}

/// Whether a recovery was refused because another process runs the run (nothing to report).
fn runs_elsewhere(error: &AgentError) -> bool {
    matches!(error, AgentError::Store(StoreError::LeaseHeld { .. }))
}

impl Background {
    /// Takes up the abandoned runs of `agents` with [`Runs::recover_abandoned`], waiting for
    /// each; remembers the failures (which it logged).
    pub(crate) async fn recover_abandoned(
        &self,
        runs: &Runs,
        agents: &HashMap<String, DurableAgent>,
    ) -> Result<Recovery, AgentError> {
        let agents: Vec<_> = agents.values().map(|a| a.agent().clone()).collect();
        let recovery = runs.recover_abandoned(&agents).await?;
        for (run, result) in &recovery.recovered {
            match result {
                Err(error) if !runs_elsewhere(&error.error) => self.remember(run, &error.error),
                _ => {}
            }
        }
        Ok(recovery)
    }

    /// One look of `Inbox::keep_recovering`: starts the recovery of each abandoned run of
    /// `agents` that it is not recovering already, each in a task of its own.
    pub(crate) async fn take_up_abandoned(
        self: &Arc<Self>,
        runs: &Runs,
        agents: &HashMap<String, DurableAgent>,
    ) -> Result<(), AgentError> {
        for run in runs.abandoned(1_000).await? {
            let Some(agent) = agents.get(&run.agent_id).cloned() else {
                continue;
            };
            if !lock(&self.recovering).insert(run.run_id.clone()) {
                continue;
            }
            let taken = Recovering {
                runs: self.recovering.clone(),
                run_id: run.run_id,
            };
            let background = self.clone();
            tokio::spawn(async move {
                let Ok(_slot) = background.slots.clone().acquire_owned().await else {
                    return;
                };
                match agent.recover(&taken.run_id).await {
                    Err(error) if !runs_elsewhere(&error.error) => {
                        background.note_failure(&taken.run_id, &error.error);
                    }
                    _ => {}
                }
            });
        }
        Ok(())
    }

    /// Logs a failed background resume or recovery at `warn`, and remembers it for the run's
    /// page.
    pub(crate) fn note_failure(&self, run: &str, error: &AgentError) {
        tracing::warn!(target: "phaseo_agent::inbox", run_id = %run, %error, "the inbox could not resume a run in the background");
        self.remember(run, error);
    }

    fn remember(&self, run: &str, error: &AgentError) {
        lock(&self.failures).put(run, (now_ms(), error.to_string()));
    }

    /// The list's sections of failed runs and of runs whose process stopped (`agents`: those
    /// the inbox runs); a store that cannot list them leaves them out (logged).
    pub(crate) async fn needing_a_person(
        &self,
        runs: &Runs,
        agents: &HashMap<String, DurableAgent>,
        base: &str,
    ) -> String {
        let filter = RunFilter {
            status: Some(StoredStatus::Failed),
            limit: MAX_RUNS_LISTED,
            ..RunFilter::default()
        };
        let mut failed = Vec::new();
        match runs.runs(&filter).await {
            Ok(page) => {
                for run in page.items {
                    let failure = self.failure_text(runs, &run.run_id, run.version).await;
                    failed.push(FailedView {
                        run_id: run.run_id,
                        agent_id: run.agent_id,
                        updated_ms: run.updated_ms,
                        failure,
                    });
                }
            }
            Err(error) => {
                tracing::warn!(target: "phaseo_agent::inbox", %error, "listing failed runs failed");
            }
        }
        let stuck = match runs.abandoned(MAX_RUNS_LISTED).await {
            Ok(abandoned) => abandoned
                .into_iter()
                .map(|run| {
                    let attached = agents.contains_key(&run.agent_id);
                    (run, attached)
                })
                .collect(),
            // A store of one's own without leases lists none.
            Err(AgentError::Store(StoreError::Unsupported { .. })) => Vec::new(),
            Err(error) => {
                tracing::warn!(target: "phaseo_agent::inbox", %error, "listing abandoned runs failed");
                Vec::new()
            }
        };
        run_pages::needing_a_person(&failed, &stuck, base)
    }

    /// Why a failed run failed, loaded once per version of the run.
    async fn failure_text(&self, runs: &Runs, run_id: &str, version: u64) -> Option<String> {
        if let Some((at, text)) = lock(&self.failed_texts).by_run.get(run_id)
            && *at == version
        {
            return text.clone();
        }
        let text = match runs.load(run_id).await {
            Ok(stored) => stored.failure,
            Err(error) => return Some(format!("(the run could not be loaded: {error})")),
        };
        lock(&self.failed_texts).put(run_id, (version, text.clone()));
        text
    }
}
