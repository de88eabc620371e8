//! [`Worker`]: a process that takes queued runs from a store and runs them, on as many machines as
//! the load needs.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use tokio::task::JoinSet;

use crate::durable::lease::{self, millis};
use crate::durable::runs::{DurableAgent, Runs};
use crate::error::{AgentError, StoreError};
use crate::run::agent::Agent;
use crate::run::event::Emitter;
use crate::run::state::{RunError, RunResult};
use crate::store::backend::{ClaimRequest, Lease, QueueCounts, StoredStatus, Wakeups};
use crate::telemetry;

/// A worker: takes the queued runs of the agents it serves from a store
/// ([`Runs::enqueue`]), runs each under a lease it renews, and takes the next.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn serve(
/// #     support: phaseo_agent::Agent,
/// #     billing: phaseo_agent::Agent,
/// #     ctrl_c: impl Future<Output = ()>,
/// # ) -> Result<(), phaseo_agent::AgentError> {
/// use std::time::Duration;
///
/// use phaseo_agent::durable::Runs;
/// use phaseo_agent::store::PostgresStore;
/// use phaseo_agent::worker::Worker;
///
/// let runs = Runs::new(PostgresStore::connect("postgres://agent@db/runs").await?);
/// Worker::new(runs)
///     .agent(support)
///     .agent(billing)
///     .concurrency(16)
///     .lease(Duration::from_secs(30))
///     .run_until(ctrl_c) // on Ctrl-C: take nothing more, let the runs held finish
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// # What it guarantees
///
/// - **One worker at a time per run.** A claim locks the run's row and skips rows another
///   worker holds (PostgreSQL's `FOR UPDATE SKIP LOCKED`), and gives a lease whose fencing token
///   is larger than any before it on that run. Every write of the run names the token, and the
///   database applies it only while that lease lives by its own clock: a worker paused by the
///   operating system, cut off from the network or slow past its lease writes nothing more,
///   even if it wakes up in the middle of a tool call, and stops the run at the refusal. (It may
///   have asked the model for a turn that the next worker asks for again: model turns are
///   journaled when they return, and a call's start before its tool runs, so no tool's code runs
///   twice for it.)
/// - **A dead worker's runs go on.** Its leases expire, and other workers take the runs: a
///   recovery from the journal, with the durable runs' rules for a call that was under way (an
///   [`idempotent`](crate::Tool::idempotent) tool runs again with the same idempotency key; any
///   other call waits for a person as
///   [`OutcomeUnknown`](crate::PendingKind::OutcomeUnknown)).
/// - **No busy polling.** An idle worker waits for the store's announcement that a run is ready
///   (PostgreSQL's `LISTEN`/`NOTIFY`, sent in the transaction that made it ready), for the
///   earliest lease of its agents to expire, or for [`idle_check`](Self::idle_check) to pass,
///   whichever comes first.
/// - **Stops at once, or drains.** Dropping the future of [`run`](Self::run) stops every run it
///   holds where it is (their leases expire, and other workers recover them). The future of
///   [`run_until`](Self::run_until) drains instead when its signal fires: it takes nothing more,
///   lets the runs it holds finish or pause for up to [`drain_timeout`](Self::drain_timeout),
///   then stops the rest and ends their leases at once, so that other workers take them up
///   without waiting for the leases to expire.
///
/// With [`SqliteStore`](crate::store::SqliteStore) or [`MemoryStore`](crate::store::MemoryStore)
/// the same API serves one worker process: their announcements reach the workers of the same
/// store value only (share one store, cloned or in an `Arc`, between the code that enqueues and
/// the workers), and runs enqueued by another process are found at the next idle check.
///
/// A database error while claiming or renewing does not end the worker: it is logged (target
/// `phaseo_agent::worker`), and the worker tries again after a pause. A run whose lease cannot be
/// renewed before it expires is stopped.
pub struct Worker {
    runs: Runs,
    agents: BTreeMap<String, DurableAgent>,
    concurrency: usize,
    lease: Duration,
    name: String,
    idle_check: Duration,
    drain_timeout: Duration,
    queue_metrics: Option<Duration>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("agents", &self.agents.keys().collect::<Vec<_>>())
            .field("concurrency", &self.concurrency)
            .field("lease", &self.lease)
            .field("name", &self.name)
            .field("idle_check", &self.idle_check)
            .field("drain_timeout", &self.drain_timeout)
            .field("queue_metrics", &self.queue_metrics)
            .finish_non_exhaustive()
    }
}

/// How a run handed to a worker ended, for its metric and log.
fn outcome(result: &Result<RunResult, RunError>) -> &'static str {
    match result {
        Ok(done) if done.is_paused() => "paused",
        Ok(_) => "completed",
        Err(error) => match (&error.error, &error.state) {
            (AgentError::Store(StoreError::LeaseLost { .. }), _) => "lease_lost",
            (AgentError::Store(StoreError::Conflict { .. }), _) => "conflict",
            (_, None) => "refused",
            (_, Some(_)) => "failed",
        },
    }
}

/// The task a `join_next_with_id` result is of, whether it ended or was stopped.
fn task_id(done: &Result<(tokio::task::Id, ()), tokio::task::JoinError>) -> tokio::task::Id {
    match done {
        Ok((id, ())) => *id,
        Err(error) => error.id(),
    }
}

/// The log target of the worker's messages.
const TARGET: &str = "phaseo_agent::worker";

impl Worker {
    /// A worker taking runs from `runs`' store, serving no agent yet (add them with
    /// [`agent`](Self::agent)). Defaults: 8 runs at once, a 30-second lease, an idle check every
    /// 30 seconds, 30 seconds to drain, and a name made of the host's and the process's ids.
    pub fn new(runs: Runs) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "worker".to_owned());
        Worker {
            runs,
            agents: BTreeMap::new(),
            concurrency: 8,
            lease: Duration::from_secs(30),
            name: format!("{host}-{}", std::process::id()),
            idle_check: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(30),
            queue_metrics: None,
        }
    }

    /// Serves this agent's queued runs (those enqueued under its id). A second agent with the
    /// same id replaces the first.
    pub fn agent(mut self, agent: Agent) -> Self {
        let id = agent.id().to_owned();
        self.agents.insert(id, self.runs.attach(agent));
        self
    }

    /// How many runs it holds at once, at least 1 (8 by default). Each run's tool calls run with
    /// the agent's own tool concurrency.
    pub fn concurrency(mut self, runs: usize) -> Self {
        self.concurrency = runs.max(1);
        self
    }

    /// How long a lease lasts unless renewed (30 seconds by default, at least 100 ms). The worker
    /// renews each lease every third of it. A worker that cannot renew (paused, cut off) loses
    /// its runs after this long, and other workers take them up: shorter means a dead worker's
    /// runs wait less, longer means a slow network or a long pause of the process costs fewer
    /// recoveries.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(100));
        self
    }

    /// The worker's name, stored with its leases (for people reading the database).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The longest an idle worker waits before it looks for ready runs even though nothing told
    /// it to (30 seconds by default, at least 10 ms): what finds runs announced while its
    /// connection to the database was down, and, with an embedded store, runs enqueued by another
    /// process.
    pub fn idle_check(mut self, every: Duration) -> Self {
        self.idle_check = every.max(Duration::from_millis(10));
        self
    }

    /// How long [`run_until`](Self::run_until) lets the runs it holds go on after its signal
    /// (30 seconds by default) before it stops them and ends their leases.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Reports the store's [`queue_counts`](Runs::queue_counts) as gauges every `every` (off by
    /// default): `phaseo.queue.runs` per agent and state, and `phaseo.queue.oldest_ready`. The
    /// counts are the whole store's, the same from every worker: turn it on in one process, or
    /// tell the processes apart by their service instance. It queries the database only while a
    /// subscriber records metrics.
    pub fn queue_metrics(mut self, every: Duration) -> Self {
        self.queue_metrics = Some(every.max(Duration::from_millis(10)));
        self
    }

    /// Serves runs until the future is dropped, which stops every run it holds at once (see
    /// [`Worker`]). Returns only on a failure to start: no agent to serve, or a store that keeps
    /// no queue ([`StoreError::Unsupported`]).
    pub async fn run(self) -> Result<(), AgentError> {
        self.run_until(std::future::pending()).await
    }

    /// Serves runs until `shutdown` completes, then drains: takes nothing more, lets the runs it
    /// holds finish or pause for up to [`drain_timeout`](Self::drain_timeout), then stops the rest
    /// and ends their leases so that other workers take them up at once.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
        if self.agents.is_empty() {
            return Err(AgentError::InvalidState(
                "a worker needs at least one agent: add one with `Worker::agent`".into(),
            ));
        }
        // The store as a queue (which is a store too: `release` ends the leases at the end).
        let store = self.runs.queue()?.clone();
        let mut wakeups: Option<Wakeups> = Some(store.wakeups().await.map_err(AgentError::Store)?);
        let worker = Arc::new(self);
        let request = ClaimRequest {
            agents: worker.agents.keys().cloned().collect(),
            worker: worker.name.clone(),
            lease_ms: millis(worker.lease),
            limit: 0,
        };
        let mut tasks: JoinSet<()> = JoinSet::new();
        // Stopped when the worker stops (dropped with this future, or at the end of a drain).
        let _reporting = worker.queue_metrics.map(|every| {
            let store = store.clone();
            AbortOnDrop(tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if !telemetry::on() {
                        continue;
                    }
                    match store.queue_counts().await {
                        Ok(counts) => counts.iter().for_each(report),
                        Err(error) => {
                            tracing::warn!(target: TARGET, %error, "counting the queue failed");
                        }
                    }
                }
            }))
        });
        let mut held: BTreeMap<tokio::task::Id, Lease> = BTreeMap::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut backoff = Duration::ZERO;
        // Each turn of the loop looks for ready runs while there is room: at the start (runs
        // may have been ready before this worker listened), then after whatever woke it: an
        // announcement, a run of its own done (more may be ready than there was room for), the
        // earliest lease's expiry, or the idle check.
        loop {
            let mut wait = worker.idle_check;
            if tasks.len() < worker.concurrency {
                let request = ClaimRequest {
                    limit: worker.concurrency - tasks.len(),
                    ..request.clone()
                };
                match store.claim(&request).await {
                    Ok(claimed) => {
                        backoff = Duration::ZERO;
                        for lease in claimed.leases {
                            telemetry::metric::claim_wait(&lease.agent_id, lease.waited_ms);
                            let task = tasks.spawn(serve(worker.clone(), lease.clone()));
                            held.insert(task.id(), lease);
                        }
                        if let Some(ms) = claimed.next_expiry_ms {
                            // Just after the lease expires, by the database's clock.
                            wait = wait.min(Duration::from_millis(ms.saturating_add(5)));
                        }
                    }
                    Err(StoreError::Unsupported { operation }) => {
                        return Err(AgentError::Store(StoreError::Unsupported { operation }));
                    }
                    Err(error) => {
                        backoff =
                            (backoff * 2).clamp(Duration::from_millis(100), worker.idle_check);
                        tracing::warn!(target: TARGET, worker = %worker.name, %error, "claiming runs failed; trying again in {backoff:?}");
                        wait = backoff;
                    }
                }
            }
            if wakeups.is_none() {
                match store.wakeups().await {
                    Ok(stream) => wakeups = Some(stream),
                    Err(error) => {
                        tracing::warn!(target: TARGET, worker = %worker.name, %error, "listening for ready runs failed");
                        wait = wait.min(Duration::from_secs(1));
                    }
                }
            }
            let announced = async {
                match wakeups.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                next = announced => {
                    match next {
                        Some(Ok(())) => {}
                        Some(Err(error)) => {
                            tracing::warn!(target: TARGET, worker = %worker.name, %error, "the store's announcements failed; listening again");
                            wakeups = None;
                        }
                        None => wakeups = None,
                    }
                }
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    held.remove(&task_id(&done));
                }
                () = tokio::time::sleep(wait) => {}
                () = &mut shutdown => break,
            }
        }
        // Draining: nothing more is taken; the runs held finish, or stop at the deadline.
        let deadline = tokio::time::Instant::now() + worker.drain_timeout;
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next_with_id()).await {
                Ok(Some(done)) => {
                    held.remove(&task_id(&done));
                }
                Ok(None) => break,
                Err(_) => {
                    tasks.shutdown().await;
                    break;
                }
            }
        }
        for lease in held.values() {
            if let Err(error) = store.release(lease).await {
                tracing::warn!(target: TARGET, worker = %worker.name, run_id = %lease.run_id, %error, "ending a lease failed; it expires by itself");
            }
        }
        Ok(())
    }
}

/// One agent's queue counts as gauges.
fn report(counts: &QueueCounts) {
    let states = [
        ("ready", counts.ready),
        ("running", counts.running),
        ("paused", counts.paused),
        ("in_doubt", counts.in_doubt),
        ("failed", counts.failed),
        ("completed", counts.completed),
    ];
    telemetry::metric::queue(&counts.agent_id, &states, counts.oldest_ready_ms);
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one claimed run under its lease, renewing the lease every third of its length; stops the
/// run at once when the lease is lost.
async fn serve(worker: Arc<Worker>, lease: Lease) {
    let Some(agent) = worker.agents.get(&lease.agent_id) else {
        return;
    };
    let started = Instant::now();
    let run = handle(agent, &worker.runs, &lease, &worker.name);
    let renewal = renew(&worker, &lease);
    let result = tokio::select! {
        result = run => Some(result),
        () = renewal => None,
    };
    let outcome = match &result {
        Some(result) => outcome(result),
        None => "lease_lost",
    };
    telemetry::metric::worker_run(&lease.agent_id, outcome, started.elapsed().as_secs_f64());
    match result {
        Some(Err(error)) if outcome != "paused" && outcome != "completed" => {
            tracing::info!(target: TARGET, worker = %worker.name, run_id = %lease.run_id, outcome, error = %error.error, "run handed back");
        }
        _ => {
            tracing::debug!(target: TARGET, worker = %worker.name, run_id = %lease.run_id, outcome, "run done");
        }
    }
}

/// Renews `lease` every third of its length; returns when it is lost (refused, or not renewed
/// before it expired).
async fn renew(worker: &Worker, lease: &Lease) {
    lease::keep(&**worker.runs.store(), lease, worker.lease, &worker.name).await;
}

/// What a claimed run needs: its recorded decisions (ready after a pause), its first turn (ready
/// when enqueued), or a recovery (its last worker's lease expired).
async fn handle(
    agent: &DurableAgent,
    runs: &Runs,
    lease: &Lease,
    worker: &str,
) -> Result<RunResult, RunError> {
    let stored = runs.load(&lease.run_id).await.map_err(RunError::refused)?;
    match stored.status {
        StoredStatus::Ready if !stored.pending.is_empty() => {
            agent
                .resume_recorded(stored, None, Some(lease.token), &Emitter::default())
                .await
        }
        StoredStatus::Ready | StoredStatus::Running => {
            let by = format!("worker {worker} (lease {})", lease.token);
            agent
                .take_up(stored, by, Some(lease.token), Emitter::default())
                .await
        }
        // Moved on since the claim (resumed in an application's process, say): nothing to do.
        other => Err(RunError::refused(AgentError::Store(
            StoreError::WrongStatus {
                run_id: lease.run_id.clone(),
                status: other,
                needed: "a worker takes a ready run, or one whose lease expired".into(),
            },
        ))),
    }
}
