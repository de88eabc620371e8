//! Durable runs: a run store journals every step of a run as it happens, so a paused run is
//! resumed exactly once, from any process, and a crash in the middle of a tool loses nothing.
//!
//! [`Runs`] is a store as an application uses it; [`Runs::attach`] makes a [`DurableAgent`]
//! whose runs are journaled there. The stores: [`MemoryStore`](crate::store::MemoryStore) (tests), `SqliteStore` (feature
//! `sqlite`: one file, SQLite compiled in, nothing to install) and `PostgresStore` (feature
//! `postgres`: many processes on many machines), or your own [`RunStore`](crate::store::RunStore).
//!
//! ```
//! use phaseo_agent::durable::Runs;
//! use phaseo_agent::store::{MemoryStore, PendingFilter, StoredStatus};
//! use phaseo_agent::{Agent, Decision, ScriptedModel, Tool};
//! use phaseo_agent::serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), phaseo_agent::AgentError> {
//! let runs = Runs::new(MemoryStore::new());
//! let deploy = Tool::new("deploy", "Deploy", json!({"type": "object"}), |v, _| Ok(v)).require_approval();
//! let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({})).text("Deployed.");
//! let agent = runs.attach(Agent::builder("release").model(model).tool(deploy).build()?);
//!
//! let paused = agent.run("Deploy").await?;
//! let run_id = paused.state.run_id();
//! assert_eq!(runs.load(run_id).await?.status, StoredStatus::Paused);
//!
//! // A person, in any process: what waits, and a decision bound to what they were shown.
//! let item = runs.pending(&PendingFilter::default()).await?.items.remove(0);
//! runs.decide(&item, Decision::Approve, "ada").await?;
//!
//! let done = agent.resume(run_id).await?;
//! assert_eq!(done.output(), Some("Deployed."));
//! assert_eq!(runs.load(run_id).await?.state, done.state); // the store has what the loop returned
//! # Ok(())
//! # }
//! ```
//!
//! # What is written, and when
//!
//! Each transition is one entry, written in one transaction with the run's new version before
//! the next thing happens: the run started (its input and settings); a model turn received,
//! written once its calls are planned, in one transaction with the starts of the calls that are
//! to run (before any tool's code runs: a recovery never asks the model again for a turn so
//! written); a call of a resumed or recovered turn started (before the tool's code runs); a
//! call's result; the run paused, completed or failed (before any listener is told); a decision
//! recorded; a resume or a recovery taking the run. A turn of `c` calls that run costs `1 + c`
//! commits. A crash while a turn's calls are planned (before that commit) leaves the turn
//! unrecorded, and recovery asks the model again, as after a crash during the model's answer;
//! a call whose start was written with its turn counts as started even if its process died
//! before its code began (queued behind others, or stopped by a sibling's failure), so after a
//! crash it is in doubt like any other. Entries carry what changed (the messages and results appended, the other fields that
//! changed), chained by SHA-256 checksums, with a snapshot of the whole run every
//! [`DEFAULT_SNAPSHOT_EVERY`] entries ([`Runs::snapshot_every`]): what a step stores does not
//! grow with the run, and loading reads one snapshot and at most that many entries.
//!
//! # Choices
//!
//! - **Exactly once, by compare-and-swap.** A resume names the version it read; a second
//!   resumer of the same version gets [`StoreError::Conflict`](crate::StoreError::Conflict). A
//!   recovery takes the run the same way, so a process that is in fact still running it fails its
//!   next write and stops: the run goes on in one place.
//! - **In doubt is a state.** After a crash, a call whose start is journaled and whose result is
//!   not runs again only if its tool is [`idempotent`](crate::Tool::idempotent), with the same
//!   [`idempotency_key`](crate::ToolContext::idempotency_key); any other such call waits for a
//!   person as [`PendingKind::OutcomeUnknown`](crate::PendingKind::OutcomeUnknown).
//! - **Recovery of your own runs is asked for.** [`DurableAgent::recover`] takes up a run started
//!   in your process whose process died: nothing tells this crate that a plain process is dead.
//!   Runs served by [`Worker`](crate::worker::Worker)s are held under leases instead, and taken up by another worker
//!   when a lease expires.
//! - **Workers share the database, not a broker.** A queued run ([`Runs::enqueue`]) is its own
//!   job: a claim locks its row (`FOR UPDATE SKIP LOCKED`), a lease with a fencing token guards
//!   every write, and the decision that completes its waiting calls makes it ready again in the
//!   same transaction. A queue library (apalis-postgres) was considered and not used: its job
//!   would be a second record of each run, in tables of its own, to keep in step with the
//!   journal at every pause, decision and end; and its locks (who holds a job, since when) carry
//!   no token that the run's own writes could be checked against. The run's row already holds
//!   what a job needs.
//! - **A damaged run is one run's problem**: its load fails with a typed error naming it, and
//!   every other run is served. Checksums catch a damaged or edited row, not a deliberate
//!   rewrite by someone with write access to the database: for that, sign states
//!   ([`AgentBuilder::state_key`](crate::AgentBuilder::state_key)); the key stays with the agent,
//!   and a paused or finished state is stored signed.
//! - **Retention** ([`Runs::prune`]) deletes completed and failed runs only; the audit log of
//!   decisions is kept.
//! - **Leases**: every run being executed is held under a lease its process renews; a recovery
//!   refuses a live run ([`StoreError::LeaseHeld`](crate::StoreError::LeaseHeld)), and
//!   [`Runs::recover_abandoned`] takes up exactly the runs whose process died.
//! - **A failed run** is retried in place with [`DurableAgent::retry`], a compare-and-swap on
//!   the version read; why it failed is [`StoredRun::failure`].

// The room after `store`: what the rows mean and what an application does with them. Its files,
// lowest first:
//
// - `lease`: how a process holds a run while it runs it (renewals), for workers and plain runs;
// - `entry`: a journal entry as stored (deltas of the run's state), its encoding and its checksum
//   chain;
// - `replay`: a run rebuilt from a snapshot and the entries after it, checked on the way; what a
//   state means as rows;
// - `journal`: the loop's journal written to a store, with a snapshot every few entries;
// - `rows`: a run's waiting rows checked against its journal, a decision checked against the
//   call's kind, who made an audited decision;
// - `runs`: `Runs` and `DurableAgent`, the store and an agent as an application uses them;
// - `recover`: runs whose process stopped, taken up; failed runs retried;
// - `verbs`: `DurableAgent`'s verbs (`resume`, `retry`, `recover`) as requests, awaited or
//   streamed;
// - `approvals`: `Approvals`, the one path a person's decision takes (who may decide, what they
//   were shown, what the call takes) before `Runs` records it, for every channel.

pub(crate) mod lease;
pub(crate) mod entry;
pub(crate) mod replay;
pub(crate) mod journal;
pub(crate) mod rows;
pub(crate) mod runs;
pub(crate) mod recover;
pub(crate) mod verbs;
pub(crate) mod approvals;

pub use approvals::{ApprovalError, Approvals, Choice, Decided, Role, Shown, User};
pub use recover::Recovery;
pub use runs::{DEFAULT_SNAPSHOT_EVERY, DurableAgent, EnqueueOptions, Runs, StoredRun};
pub use verbs::{DurableResumeRequest, DurableRetryRequest, RecoverRequest};
