//! [`Runs`]: a run store as an application uses it (load a run, list what waits for a person,
//! record decisions, prune), and [`DurableAgent`]: an agent whose runs are journaled in it.

use std::sync::Arc;
use std::time::Duration;

use crate::durable::entry::{Entry, arguments_digest, first_row, now_ms};
use crate::durable::journal::{Extra, Holding, StoreJournal};
use crate::durable::replay::{Replayed, pending_rows, replay, status_of};
use crate::durable::rows::check_pending;
use crate::error::{AgentError, StoreError};
use crate::model::message::Message;
use crate::model::request::TurnParams;
use crate::run::agent::Agent;
use crate::run::entry::RunRequest;
use crate::run::event::Emitter;
use crate::run::journal::{InFlight, Journal};
use crate::run::observe::Decider;
use crate::run::runner::{new_run_id, refuse};
use crate::run::state::{Decision, Decisions, RunError, RunResult, RunState};
use crate::store::backend::{
    DecisionRow, Lease, NewRun, PendingRow, QueueCounts, RunQueue, RunStore, RunSummary,
    StoredStatus,
};
use crate::store::listing::{AuditFilter, Page, PendingFilter, RunFilter};

/// How many journal entries may follow a snapshot before the next one is written: loading a run
/// reads one snapshot and at most this many entries, whatever the run's length.
pub const DEFAULT_SNAPSHOT_EVERY: u32 = 32;

/// A run store, as an application uses it: load a run, list the calls that wait for a person
/// across runs, record decisions with who made them, read the audit log, prune old runs; and
/// [`attach`](Self::attach) an agent so that its runs are journaled here.
///
/// Cloning is cheap (the store is shared).
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # {
/// use phaseo_agent::durable::Runs;
/// use phaseo_agent::store::{PendingFilter, SqliteStore};
/// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
/// use phaseo_agent::serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// # let dir = std::env::temp_dir().join(format!("phaseo-doc-runs-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let runs = Runs::new(SqliteStore::open(dir.join("runs.db")).await?);
/// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
/// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({"env": "staging"})).text("Done.");
/// let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
///
/// let paused = agent.run("Deploy staging").await?;
/// let waiting = runs.pending(&PendingFilter::default()).await?;
/// assert_eq!(waiting.items[0].call_id, "call_1");
///
/// let stored = runs.load(paused.state.run_id()).await?;
/// let done = agent
///     .resume(paused.state.run_id()).decisions(Decisions::new().approve("call_1")).at(stored.version).by("ada")
///     .await?;
/// assert_eq!(done.output(), Some("Done."));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// # }
/// # #[cfg(not(feature = "sqlite"))]
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct Runs {
    pub(crate) store: Arc<dyn RunStore>,
    /// The same store as a queue, if it keeps one ([`Runs::new`]; not with
    /// [`Runs::without_queue`]).
    queue: Option<Arc<dyn RunQueue>>,
    snapshot_every: u32,
    pub(crate) holding: Holding,
    /// The damaged rows already logged (a listing polled every few seconds names them every
    /// time): each is logged at `warn` once, up to [`MAX_DAMAGED_LOGGED`].
    logged: Arc<std::sync::Mutex<std::collections::HashSet<DamagedKey>>>,
}

/// A damaged row, as [`Runs::pending`] remembers having logged it: run, call, version.
type DamagedKey = (String, Option<String>, Option<u64>);

/// How many damaged rows a [`Runs`] remembers having logged; past that, they are logged at
/// `debug`.
const MAX_DAMAGED_LOGGED: usize = 10_000;

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("snapshot_every", &self.snapshot_every)
            .field("lease", &self.holding.length)
            .field("holder", &self.holding.owner)
            .finish_non_exhaustive()
    }
}

/// The default name of this process's leases: the host's name and the process's id.
fn default_holder() -> String {
    // `HOSTNAME` is a shell variable that few processes are given; Linux and most Unix systems
    // keep the name in a file.
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && name.len() <= 255)
        .unwrap_or_else(|| "process".to_owned());
    format!("{host}-{}", std::process::id())
}

/// A run as stored: its state as last recorded, its version (what a resume or a decision names),
/// its status, and the calls that wait for a person.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The state, as the loop last recorded it. For a paused, completed or failed run it is the
    /// state the loop returned, byte for byte (signed, if the agent signs).
    pub state: RunState,
    /// The run's version: every write moves it on.
    pub version: u64,
    /// Where it stands.
    pub status: StoredStatus,
    /// The calls waiting for a person, with the digest of the arguments each shows, and any
    /// decision already recorded.
    pub pending: Vec<PendingRow>,
    /// Why the run failed, as people read it (at most 4 KiB of the error's text), when it is
    /// failed; `None` for a run that failed before this was journaled.
    pub failure: Option<String>,
    /// The turn under way when the journal ends, and the decisions a resume took it with.
    pub(crate) in_flight: InFlight,
    pub(crate) decisions: Option<Decisions>,
    pub(crate) digest: String,
}

/// What a queued run starts with besides its input: [`Runs::enqueue`].
///
/// ```
/// use phaseo_agent::durable::EnqueueOptions;
/// use phaseo_agent::serde_json::json;
///
/// let options = EnqueueOptions::new().run_id("ticket-7").context(json!({"tier": "gold"}));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct EnqueueOptions {
    run_id: Option<String>,
    context: serde_json::Value,
    history: Vec<Message>,
    first_turn: Option<TurnParams>,
}

impl EnqueueOptions {
    /// No options: a fresh run id, no context, no history.
    pub fn new() -> Self {
        EnqueueOptions::default()
    }

    /// The run's id, instead of a fresh one: an enqueue retried with the same id queues the run
    /// once.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }

    /// The application context the run's tools see
    /// ([`RunRequest::context`](crate::RunRequest::context)).
    pub fn context(mut self, context: serde_json::Value) -> Self {
        self.context = context;
        self
    }

    /// Earlier messages of the conversation ([`RunRequest::history`](crate::RunRequest::history)).
    pub fn history(mut self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.history = messages.into_iter().collect();
        self
    }

    /// Overrides for the first model request
    /// ([`RunRequest::first_turn`](crate::RunRequest::first_turn)).
    pub fn first_turn(mut self, params: TurnParams) -> Self {
        self.first_turn = Some(params);
        self
    }
}

impl Runs {
    /// A run store: a [`MemoryStore`](crate::store::MemoryStore), a
    /// [`SqliteStore`](crate::store::SqliteStore), a
    /// [`PostgresStore`](crate::store::PostgresStore), or your own [`RunStore`] that is also a
    /// [`RunQueue`] (workers take its queued runs). A store of your own without a queue:
    /// [`Runs::without_queue`].
    pub fn new<S: RunStore + RunQueue>(store: S) -> Self {
        Runs::from_arc(Arc::new(store))
    }

    /// A run store already shared (see [`Runs::new`]).
    pub fn from_arc<S: RunStore + RunQueue>(store: Arc<S>) -> Self {
        Runs::with(store.clone(), Some(store))
    }

    /// A run store that keeps no queue of runs: durable runs of your own process only.
    /// [`Runs::enqueue`], [`Runs::queue_counts`] and a [`Worker`](crate::worker::Worker) of it
    /// fail with [`StoreError::Unsupported`](crate::StoreError::Unsupported).
    pub fn without_queue(store: Arc<dyn RunStore>) -> Self {
        Runs::with(store, None)
    }

    fn with(store: Arc<dyn RunStore>, queue: Option<Arc<dyn RunQueue>>) -> Self {
        Runs {
            store,
            queue,
            logged: Arc::default(),
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            holding: Holding {
                owner: default_holder(),
                length: Duration::from_secs(30),
            },
        }
    }

    /// How long the lease of a run this process runs lasts unless renewed (30 seconds by
    /// default, at least 100 ms).
    ///
    /// Every durable run being executed is held under a lease, renewed every third of it while
    /// the run runs: a run started with [`DurableAgent::run`], resumed, retried or recovered here,
    /// as a [`Worker`](crate::worker::Worker)'s runs are. A recovery
    /// ([`DurableAgent::recover`], [`recover_abandoned`](Self::recover_abandoned)) refuses a run
    /// whose lease is live ([`StoreError::LeaseHeld`]), so a second replica never takes over a
    /// run the first is running; and every write names the lease's token, so a process paused
    /// past its lease writes nothing more. Shorter means a dead process's runs are taken up
    /// sooner; longer means fewer renewals and fewer runs lost to a long pause.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.holding.length = lease.max(Duration::from_millis(100));
        self
    }

    /// The name stored with this process's leases, which a refused recovery names (by default
    /// the host's name and the process's id).
    pub fn holder(mut self, name: impl Into<String>) -> Self {
        self.holding.owner = name.into();
        self
    }

    /// Takes a lease on a stored run for this process; `None` when the store keeps no leases.
    pub(crate) async fn hold(&self, run_id: &str) -> Result<Option<Lease>, StoreError> {
        match self.store.acquire(run_id, &self.holding.request()).await {
            Ok(lease) => Ok(Some(lease)),
            Err(StoreError::Unsupported { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Ends a lease taken for a write that was then refused (another process moved the run
    /// on); if that fails, the lease expires by itself.
    pub(crate) async fn let_go(&self, lease: Option<&Lease>) {
        if let Some(lease) = lease {
            if let Err(error) = self.store.release(lease).await {
                tracing::debug!(target: "phaseo_agent::lease", run_id = %lease.run_id, %error, "ending a lease failed; it expires by itself");
            }
        }
    }

    /// How many entries may follow a snapshot (at least 1). Default: [`DEFAULT_SNAPSHOT_EVERY`].
    pub fn snapshot_every(mut self, entries: u32) -> Self {
        self.snapshot_every = entries.max(1);
        self
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.store
    }

    /// The store as a queue, or [`StoreError::Unsupported`](crate::StoreError::Unsupported) if it
    /// was given without one ([`Runs::without_queue`]).
    pub(crate) fn queue(&self) -> Result<&Arc<dyn RunQueue>, AgentError> {
        self.queue
            .as_ref()
            .ok_or(AgentError::Store(StoreError::Unsupported {
                operation: "queued runs",
            }))
    }

    /// An agent whose runs are journaled in this store.
    pub fn attach(&self, agent: Agent) -> DurableAgent {
        DurableAgent {
            runs: self.clone(),
            agent,
        }
    }

    /// Loads a run: its latest snapshot and the entries after it, every checksum checked. A
    /// damaged run gives [`StoreError::Corrupt`] (or `UnsupportedFormat`) for that run only.
    pub async fn load(&self, run_id: &str) -> Result<StoredRun, AgentError> {
        let loaded = self.store.load(run_id).await.map_err(AgentError::Store)?;
        let (replayed, digest) = replay(&loaded).map_err(AgentError::Store)?;
        check_pending(&loaded.pending, &replayed.state).map_err(AgentError::Store)?;
        Ok(StoredRun {
            state: replayed.state,
            version: loaded.version,
            status: loaded.status,
            pending: loaded.pending,
            in_flight: replayed.in_flight,
            decisions: replayed.decisions,
            failure: replayed.failure,
            digest,
        })
    }

    /// Stores a state made elsewhere as a new run: a run paused by a plain
    /// [`Agent::run`](crate::Agent::run), read from a file or another store. From then on it is
    /// a stored run like any other: listed, decided, resumed once by a [`DurableAgent`]. Returns
    /// its version (1). A run with the same id already stored is refused
    /// ([`StoreError::AlreadyExists`]).
    ///
    /// ```
    /// use phaseo_agent::durable::Runs;
    /// use phaseo_agent::store::{MemoryStore, StoredStatus};
    /// use phaseo_agent::{Agent, Decisions, ScriptedModel, Tool};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
    /// let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Done.");
    /// let agent = Agent::builder("release").model(model).tool(deploy).build()?;
    /// let paused = agent.run("Deploy").await?;          // not journaled: a plain run
    ///
    /// let runs = Runs::new(MemoryStore::new());
    /// let version = runs.save(&paused.state).await?;
    /// assert_eq!(runs.load(paused.state.run_id()).await?.status, StoredStatus::Paused);
    /// let done = runs
    ///     .attach(agent)
    ///     .resume(paused.state.run_id()).decisions(Decisions::new().approve("call_1")).at(version).by("ada")
    ///     .await?;
    /// assert_eq!(done.output(), Some("Done."));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn save(&self, state: &RunState) -> Result<u64, AgentError> {
        let journal = StoreJournal::new(
            self.store.clone(),
            state.run_id().to_owned(),
            state.agent_id().to_owned(),
            self.snapshot_every,
        );
        let pending = pending_rows(state, 1, now_ms());
        let entry = Entry::Started {
            state: Box::new(state.clone()),
        };
        let extra = Extra {
            pending: Some(pending),
            decisions: Vec::new(),
            status: Some(status_of(state)),
        };
        journal.write(entry, extra).await.map_err(AgentError::Store)
    }

    /// Queues a new run of the agent `agent_id` for a [`Worker`](crate::worker::Worker), from
    /// any process, and returns its run id at once: the run is stored
    /// [`Ready`](StoredStatus::Ready), and a worker serving that agent takes it. Nothing of the
    /// agent is needed here (a web front end need not build one); the worker's agent of that
    /// id runs it.
    ///
    /// From then on the run is the workers': when it pauses, the decision that completes its
    /// waiting calls ([`decide`](Self::decide)) hands it back to them in the same transaction,
    /// and a run whose worker died is taken by another once its lease expires. A run id given
    /// in `options` that is already stored is refused ([`StoreError::AlreadyExists`]), so an
    /// enqueue retried after a lost answer queues the run once.
    ///
    /// ```
    /// use phaseo_agent::durable::{EnqueueOptions, Runs};
    /// use phaseo_agent::store::{MemoryStore, StoredStatus};
    /// use phaseo_agent::serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let runs = Runs::new(MemoryStore::new());
    /// let options = EnqueueOptions::new().run_id("order-1042").context(json!({"user": "ada"}));
    /// let run_id = runs.enqueue("support", "Where is my order?", options).await?;
    /// assert_eq!(run_id, "order-1042");
    /// assert_eq!(runs.load(&run_id).await?.status, StoredStatus::Ready);
    /// assert_eq!(runs.queue_counts().await?[0].ready, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enqueue(
        &self,
        agent_id: &str,
        input: impl Into<String>,
        options: EnqueueOptions,
    ) -> Result<String, AgentError> {
        let EnqueueOptions {
            run_id,
            context,
            history,
            first_turn,
        } = options;
        let run_id = run_id.unwrap_or_else(new_run_id);
        let state = RunState::starting(
            run_id.clone(),
            agent_id.to_owned(),
            context,
            history,
            first_turn,
            input.into(),
        );
        let row = first_row(state).map_err(AgentError::Store)?;
        self.queue()?
            .enqueue(NewRun {
                run_id: run_id.clone(),
                agent_id: agent_id.to_owned(),
                status: StoredStatus::Ready,
                row,
                pending: Vec::new(),
                at_ms: now_ms(),
            })
            .await
            .map_err(AgentError::Store)?;
        Ok(run_id)
    }

    /// How many runs of each agent are ready, running, paused, in doubt, failed and completed,
    /// and how long the oldest ready one has waited: what an operator watches (see also the
    /// workers' metrics in the README's "Many machines").
    pub async fn queue_counts(&self) -> Result<Vec<QueueCounts>, AgentError> {
        self.queue()?
            .queue_counts()
            .await
            .map_err(AgentError::Store)
    }

    /// The calls waiting for a person, across runs, newest first.
    ///
    /// A row that cannot be read back as written (an unknown kind, arguments that are not JSON,
    /// text that is not UTF-8, a row over the store's [`ReadLimits`](crate::store::ReadLimits)),
    /// or whose arguments do not match their digest (edited in the database), is named in the
    /// page's [`damaged`](Page::damaged), with its run, call and version, and logged at `warn`;
    /// the other rows are listed: a damaged row is its run's problem. Loading the run
    /// ([`load`](Self::load)) checks each row against the run's journal besides, so an edited row
    /// is never decided, whatever its digest says.
    pub async fn pending(&self, filter: &PendingFilter) -> Result<Page<PendingRow>, AgentError> {
        let mut page = self
            .store
            .pending(filter)
            .await
            .map_err(AgentError::Store)?;
        let (whole, edited) = std::mem::take(&mut page.items)
            .into_iter()
            .partition::<Vec<_>, _>(|row| row.digest == arguments_digest(&row.arguments));
        page.items = whole;
        page.damaged.extend(edited.iter().map(|row| {
            row.damaged(
                "its arguments do not match their digest: the row was changed in the database"
                    .into(),
            )
        }));
        for damaged in &page.damaged {
            let key = (
                damaged.run_id.clone(),
                damaged.call_id.clone(),
                damaged.version,
            );
            let first = {
                let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
                logged.len() < MAX_DAMAGED_LOGGED && logged.insert(key)
            };
            let (run, call) = (&damaged.run_id, damaged.call_id.as_deref().unwrap_or("?"));
            if first {
                tracing::warn!(
                    run = %run, call, version = damaged.version, reason = %damaged.reason,
                    "a waiting call's row is damaged: it is not listed, and cannot be decided"
                );
            } else {
                tracing::debug!(
                    run = %run, call, version = damaged.version, reason = %damaged.reason,
                    "a waiting call's row is damaged (logged before)"
                );
            }
        }
        Ok(page)
    }

    /// Runs, newest first.
    pub async fn runs(&self, filter: &RunFilter) -> Result<Page<RunSummary>, AgentError> {
        self.store.runs(filter).await.map_err(AgentError::Store)
    }

    /// The audit log of decisions, oldest first. It is only ever appended to.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Page<DecisionRow>, AgentError> {
        self.store.audit(filter).await.map_err(AgentError::Store)
    }

    /// Deletes completed and failed runs not written for `older_than`. A paused run, one in
    /// doubt, or one running is never deleted; the audit log is kept. Returns how many runs went.
    pub async fn prune(&self, older_than: Duration) -> Result<u64, AgentError> {
        let age = i64::try_from(older_than.as_millis()).unwrap_or(i64::MAX);
        let before = now_ms().saturating_sub(age);
        self.store.prune(before).await.map_err(AgentError::Store)
    }

    /// The journal of a stored run, its writes made under `lease` (renewed while it lives), or
    /// under a worker's `fence`.
    pub(crate) fn journal_held(
        &self,
        stored: &StoredRun,
        lease: Option<Lease>,
        fence: Option<u64>,
    ) -> StoreJournal {
        let journal = self.journal_at(stored);
        match lease {
            Some(lease) => journal.held(lease, &self.holding),
            None => journal.fenced(fence),
        }
    }

    pub(crate) fn journal_at(&self, stored: &StoredRun) -> StoreJournal {
        let replayed = Replayed {
            state: stored.state.clone(),
            in_flight: stored.in_flight.clone(),
            decisions: stored.decisions.clone(),
            failure: stored.failure.clone(),
        };
        StoreJournal::at(
            self.store.clone(),
            replayed,
            stored.version,
            stored.digest.clone(),
            self.snapshot_every,
        )
    }
}

/// Who takes a run with decisions: the name journaled, the audit rows written with the take
/// (none for decisions recorded before), and who made each decision, for the run's span.
pub(crate) struct Who<'a> {
    pub(crate) by: &'a str,
    pub(crate) audit: Vec<DecisionRow>,
    pub(crate) deciders: Vec<Decider>,
}

/// An agent whose runs are journaled in a store, as they happen: made by [`Runs::attach`].
///
/// - [`run`](Self::run) starts a run (a [`RunRequest`], with all its settings);
/// - [`resume`](Self::resume) resumes a paused run, with decisions given (and who made them) or
///   with those recorded by [`Runs::decide`]: recording the decisions and taking the run is one
///   compare-and-swap on the version read, so a second resumer of the same version, in this
///   process or another, is refused and runs nothing;
/// - [`retry`](Self::retry) retries a failed run in place;
/// - [`recover`](Self::recover) takes up a run whose process stopped in the middle.
///
/// Each verb returns a request, as [`Agent`]'s do: settings are methods on it, and it is
/// awaited for the result or [`stream`](crate::durable::DurableResumeRequest::stream)ed for the
/// run's events.
#[derive(Clone, Debug)]
pub struct DurableAgent {
    pub(crate) runs: Runs,
    pub(crate) agent: Agent,
}

impl DurableAgent {
    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The store.
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Starts a run, journaled: the run is in the store before its first model request, and
    /// every transition after it is recorded before the next thing happens.
    pub fn run(&self, input: impl Into<String>) -> RunRequest {
        let runs = self.runs.clone();
        let agent_id = self.agent.id().to_owned();
        self.agent.run(input).journal_with(move |run_id| {
            Arc::new(
                StoreJournal::new(
                    runs.store.clone(),
                    run_id.to_owned(),
                    agent_id,
                    runs.snapshot_every,
                )
                .holding(runs.holding.clone()),
            ) as Arc<dyn Journal>
        })
    }

    /// Resumes a loaded run with its recorded decisions; a worker's writes carry its lease's
    /// `fence`.
    pub(crate) async fn resume_recorded(
        &self,
        stored: StoredRun,
        by: Option<&str>,
        fence: Option<u64>,
        events: &Emitter,
    ) -> Result<RunResult, RunError> {
        let run_id = stored.state.run_id.clone();
        let run_id = run_id.as_str();
        let mut decisions = Decisions::for_run(run_id);
        let mut missing = Vec::new();
        for row in &stored.pending {
            match &row.decision {
                Some(text) => {
                    let decision: Decision = serde_json::from_str(text).map_err(|e| {
                        RunError::refused(AgentError::Store(StoreError::Corrupt {
                            run_id: run_id.to_owned(),
                            version: stored.version,
                            reason: format!("a recorded decision: {e}"),
                        }))
                    })?;
                    decisions = decisions.decide(row.call_id.clone(), decision);
                }
                None => missing.push(row.call_id.clone()),
            }
        }
        if !missing.is_empty() {
            let missing = AgentError::MissingDecision { call_ids: missing };
            return Err(refuse(missing, Some(stored.state), events));
        }
        // The decisions are in the audit log already, with who made each and when: the run's
        // span tells them (the latest row of each call; a log that cannot be read tells only who).
        let filter = AuditFilter {
            run_id: Some(run_id.to_owned()),
            after: None,
            limit: 1_000,
        };
        let logged = self.runs.audit(&filter).await.map(|page| page.items);
        let deciders = stored
            .pending
            .iter()
            .map(|row| {
                let at_ms = logged.as_ref().ok().and_then(|rows| {
                    let last = rows.iter().rev().find(|r| r.call_id == row.call_id)?;
                    u64::try_from(last.at_ms).ok()
                });
                Decider {
                    call_id: row.call_id.clone(),
                    by: row.decided_by.clone().unwrap_or_default(),
                    at_ms,
                }
            })
            .collect();
        let by = by.unwrap_or("recorded");
        let who = Who {
            by,
            audit: Vec::new(),
            deciders,
        };
        self.take(stored, decisions, who, fence, events).await
    }

    pub(crate) async fn take(
        &self,
        stored: StoredRun,
        decisions: Decisions,
        who: Who<'_>,
        fence: Option<u64>,
        events: &Emitter,
    ) -> Result<RunResult, RunError> {
        let Who {
            by,
            audit,
            deciders,
        } = who;
        let run_id = stored.state.run_id.clone();
        if !matches!(
            stored.status,
            StoredStatus::Paused | StoredStatus::InDoubt | StoredStatus::Ready
        ) {
            let wrong = StoreError::WrongStatus {
                run_id,
                status: stored.status,
                needed: "only a paused run (or one in doubt, or ready) is resumed".into(),
            };
            return Err(refuse(AgentError::Store(wrong), Some(stored.state), events));
        }
        // A resume in this process holds the run under a lease of its own (a worker's is given).
        let lease = match fence {
            Some(_) => None,
            None => match self.runs.hold(&run_id).await {
                Ok(lease) => lease,
                Err(e) => return Err(refuse(AgentError::Store(e), Some(stored.state), events)),
            },
        };
        let journal = Arc::new(self.runs.journal_held(&stored, lease.clone(), fence));
        let mut waiting = stored.pending.clone();
        // A queued run's refused decisions are taken back, so that people decide again: kept, they
        // would hand the run to a worker again at once, to be refused again.
        if fence.is_some() {
            for row in &mut waiting {
                row.decision = None;
                row.decided_by = None;
            }
        }
        let status = match stored.status {
            StoredStatus::Ready => StoredStatus::Paused,
            other => other,
        };
        let taken = journal
            .write(
                Entry::Decided {
                    decisions: decisions.clone(),
                    by: by.to_owned(),
                },
                Extra {
                    pending: Some(Vec::new()),
                    decisions: audit,
                    status: Some(StoredStatus::Running),
                },
            )
            .await;
        if let Err(error) = taken {
            self.runs.let_go(lease.as_ref()).await;
            return Err(refuse(AgentError::Store(error), Some(stored.state), events));
        }
        let result = self
            .agent
            .resume(&stored.state, decisions)
            .journal(journal.clone() as Arc<dyn Journal>)
            .deciders(deciders)
            .start(events.clone())
            .await;
        match result {
            // Refused before anything ran: the run waits again, as it was.
            Err(refused) if refused.state.is_none() => {
                let restored = journal
                    .write(
                        Entry::Refused {
                            error: refused.error.to_string(),
                        },
                        Extra {
                            pending: Some(waiting),
                            decisions: Vec::new(),
                            status: Some(status),
                        },
                    )
                    .await;
                match restored {
                    Ok(_) => Err(refused),
                    Err(error) => Err(RunError::refused(AgentError::Store(error))),
                }
            }
            other => other,
        }
    }

    /// Loads a run that a caller read at `version` (none: the current one):
    /// [`StoreError::Conflict`] if it moved on since (the compare-and-swap of the write that
    /// takes it checks again).
    pub(crate) async fn load_at(
        &self,
        run_id: &str,
        version: Option<u64>,
        events: &Emitter,
    ) -> Result<StoredRun, RunError> {
        let stored = self.runs.load(run_id).await.map_err(RunError::refused)?;
        match version {
            Some(version) if version != stored.version => {
                let moved = StoreError::Conflict {
                    run_id: run_id.to_owned(),
                    expected: version,
                    found: stored.version,
                };
                Err(refuse(AgentError::Store(moved), Some(stored.state), events))
            }
            _ => Ok(stored),
        }
    }
}
