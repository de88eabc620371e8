//! A run's journal in a store: the loop's `Journal`, writing each transition as one entry in one
//! transaction with the run's new version, a snapshot every few entries, and the lease the run is
//! held under. The same for every backend.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::durable::entry::{Delta, Entry, FORMAT, encode, now_ms, snapshot_digest};
use crate::durable::lease::{Keeper, millis};
use crate::durable::replay::{Replayed, Snapshot, pending_rows, status_of};
use crate::error::{AgentError, StoreError};
use crate::run::journal::{InFlight, Journal, Start, Transition};
use crate::store::backend::{
    Append, DecisionRow, Lease, LeaseRequest, NewRun, PendingRow, RunStore, SnapshotRow,
    StoredStatus,
};

/// What a write adds besides its entry.
#[derive(Default)]
pub(crate) struct Extra {
    pub(crate) pending: Option<Vec<PendingRow>>,
    pub(crate) decisions: Vec<DecisionRow>,
    /// The status after the write; by default, running.
    pub(crate) status: Option<StoredStatus>,
}

/// The journal's view of the run: the store's version and checksum, and the run as replayed.
struct Shadow {
    version: u64,
    digest: String,
    run: Option<Replayed>,
    since_snapshot: u32,
    /// Set once a write failed: the run may have been taken by another process, and nothing more
    /// is written.
    broken: bool,
    /// The fencing token of the lease this process holds the run with, named by every write.
    fence: Option<u64>,
}

/// A run's journal in a store: the loop's [`Journal`], writing each transition as one entry, in
/// one transaction with the run's new version.
pub(crate) struct StoreJournal {
    store: Arc<dyn RunStore>,
    run_id: String,
    agent_id: String,
    snapshot_every: u32,
    shadow: tokio::sync::Mutex<Shadow>,
    /// A new run's lease, taken with its first write (see [`Holding`]).
    holding: Option<Holding>,
    /// The renewal of the lease this journal's process holds the run with, if it renews it
    /// itself (a worker renews its own): stopped when the journal is dropped, at the run's end.
    keeper: std::sync::Mutex<Option<Keeper>>,
}

/// Who holds a run while it runs, and for how long a lease lasts unless renewed.
#[derive(Debug, Clone)]
pub(crate) struct Holding {
    pub(crate) owner: String,
    pub(crate) length: std::time::Duration,
}

impl Holding {
    pub(crate) fn request(&self) -> LeaseRequest {
        LeaseRequest {
            owner: self.owner.clone(),
            lease_ms: millis(self.length),
        }
    }
}

impl StoreJournal {
    /// The journal of a new run (its first entry creates it).
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        run_id: String,
        agent_id: String,
        snapshot_every: u32,
    ) -> Self {
        StoreJournal {
            store,
            run_id,
            agent_id,
            snapshot_every,
            shadow: tokio::sync::Mutex::new(Shadow {
                version: 0,
                digest: String::new(),
                run: None,
                since_snapshot: 0,
                broken: false,
                fence: None,
            }),
            holding: None,
            keeper: std::sync::Mutex::new(None),
        }
    }

    /// The journal of a stored run, at the version it was loaded at.
    pub(crate) fn at(
        store: Arc<dyn RunStore>,
        run: Replayed,
        version: u64,
        digest: String,
        snapshot_every: u32,
    ) -> Self {
        StoreJournal {
            store,
            run_id: run.state.run_id.clone(),
            agent_id: run.state.agent_id.clone(),
            snapshot_every,
            shadow: tokio::sync::Mutex::new(Shadow {
                version,
                digest,
                run: Some(run),
                // A loaded run is snapshotted at its next write only if many entries follow.
                since_snapshot: 0,
                broken: false,
                fence: None,
            }),
            holding: None,
            keeper: std::sync::Mutex::new(None),
        }
    }

    /// The same journal, its writes made under a worker's lease when `fence` names one (see
    /// [`Append::fence`]).
    pub(crate) fn fenced(mut self, fence: Option<u64>) -> Self {
        self.shadow.get_mut().fence = fence;
        self
    }

    /// A new run's journal that holds the run under a lease from its first write, and renews it
    /// while the journal lives (a store that keeps no leases writes the run unheld).
    pub(crate) fn holding(mut self, holding: Holding) -> Self {
        self.holding = Some(holding);
        self
    }

    /// The same journal, its writes made under `lease`, which it renews for `holding.length`
    /// while it lives.
    pub(crate) fn held(mut self, lease: Lease, holding: &Holding) -> Self {
        self.shadow.get_mut().fence = Some(lease.token);
        self.keep(lease, holding);
        self
    }

    fn keep(&self, lease: Lease, holding: &Holding) {
        let keeper = Keeper::spawn(
            self.store.clone(),
            lease,
            holding.length,
            holding.owner.clone(),
        );
        *self.keeper.lock().unwrap_or_else(|e| e.into_inner()) = Some(keeper);
    }

    /// Writes `entry` as the run's next version, with `extra`, and applies it to the journal's
    /// view. Returns the new version.
    pub(crate) async fn write(&self, entry: Entry, extra: Extra) -> Result<u64, StoreError> {
        self.write_all(vec![entry], extra).await
    }

    /// Writes `entries` (at least one) as the run's next versions, in order, in one transaction
    /// with `extra`, and applies them to the journal's view. Returns the last new version.
    async fn write_all(&self, entries: Vec<Entry>, extra: Extra) -> Result<u64, StoreError> {
        let mut shadow = self.shadow.lock().await;
        if shadow.broken {
            return Err(StoreError::Conflict {
                run_id: self.run_id.clone(),
                expected: shadow.version,
                found: shadow.version,
            });
        }
        if entries.is_empty() {
            return Err(StoreError::Database("a write of no entries".into()));
        }
        let first = shadow.version + 1;
        let mut rows = Vec::with_capacity(entries.len());
        let mut digest = shadow.digest.clone();
        for (version, entry) in (first..).zip(&entries) {
            let row = encode(entry, &digest, version)?;
            digest.clone_from(&row.digest);
            rows.push(row);
        }
        let written = u32::try_from(rows.len()).unwrap_or(u32::MAX);
        let version = first + u64::from(written) - 1;
        let at_ms = now_ms();
        let due = shadow.since_snapshot.saturating_add(written) >= self.snapshot_every;
        let mut entries = entries.into_iter();
        let result = match (shadow.run.as_mut(), entries.next()) {
            (_, None) => Err(StoreError::Database("a write of no entries".into())),
            (None, Some(Entry::Started { state })) if rows.len() == 1 => {
                let row = rows.remove(0);
                let status = extra.status.unwrap_or(StoredStatus::Running);
                let new = NewRun {
                    run_id: self.run_id.clone(),
                    agent_id: self.agent_id.clone(),
                    status,
                    row,
                    pending: extra.pending.unwrap_or_default(),
                    at_ms,
                };
                let created = match &self.holding {
                    Some(holding) if status == StoredStatus::Running => {
                        match self
                            .store
                            .create_held(new.clone(), &holding.request())
                            .await
                        {
                            Ok(lease) => {
                                shadow.fence = Some(lease.token);
                                self.keep(lease, holding);
                                Ok(())
                            }
                            // A store of one's own without leases: the run is written unheld.
                            Err(StoreError::Unsupported { .. }) => self.store.create(new).await,
                            Err(error) => Err(error),
                        }
                    }
                    _ => self.store.create(new).await,
                };
                created.map(|()| {
                    shadow.run = Some(Replayed {
                        state: *state,
                        in_flight: InFlight::default(),
                        decisions: None,
                        failure: None,
                    })
                })
            }
            (None, _) => Err(StoreError::NotFound {
                run_id: self.run_id.clone(),
            }),
            (Some(run), Some(entry)) => {
                for entry in std::iter::once(entry).chain(entries) {
                    if let Err(reason) = run.apply(entry) {
                        // The view may be half applied: nothing more is written.
                        shadow.broken = true;
                        return Err(StoreError::Database(
                            format!("applying an entry: {reason}").into(),
                        ));
                    }
                }
                let snapshot = due
                    .then(|| snapshot_row(run, version, &digest))
                    .transpose()?;
                let snapshotted = snapshot.is_some();
                let status = extra.status.unwrap_or(StoredStatus::Running);
                let appended = self
                    .store
                    .append(Append {
                        run_id: self.run_id.clone(),
                        expected_version: first - 1,
                        rows,
                        status,
                        snapshot,
                        pending: extra.pending,
                        decisions: extra.decisions,
                        at_ms,
                        fence: shadow.fence,
                    })
                    .await;
                appended.map(|()| {
                    shadow.since_snapshot = if snapshotted {
                        0
                    } else {
                        shadow.since_snapshot.saturating_add(written)
                    };
                })
            }
        };
        match result {
            Ok(()) => {
                shadow.version = version;
                shadow.digest = digest;
                Ok(version)
            }
            Err(error) => {
                shadow.broken = true;
                Err(error)
            }
        }
    }

    async fn record_transition(&self, transition: Transition<'_>) -> Result<(), StoreError> {
        match transition {
            Transition::Started { state, context } => {
                let mut state = state.clone();
                state.context = context.clone();
                self.write(
                    Entry::Started {
                        state: Box::new(state),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::Turn {
                state,
                context,
                params,
                starts,
            } => {
                let delta = {
                    let shadow = self.shadow.lock().await;
                    let Some(run) = shadow.run.as_ref() else {
                        return Err(StoreError::NotFound {
                            run_id: self.run_id.clone(),
                        });
                    };
                    Delta::between(&run.state, state, context)
                };
                // The turn and its calls' starts: one transaction.
                let mut entries = Vec::with_capacity(1 + starts.len());
                entries.push(Entry::Turn {
                    delta,
                    params: params.clone(),
                });
                entries.extend(starts.iter().map(started));
                self.write_all(entries, Extra::default()).await?;
            }
            Transition::CallStarted(start) => {
                self.write(started(&start), Extra::default()).await?;
            }
            Transition::CallFinished { step, new_context } => {
                self.write(
                    Entry::CallFinished {
                        step: step.clone(),
                        new_context: new_context.cloned(),
                    },
                    Extra::default(),
                )
                .await?;
            }
            Transition::Settled { state, failure } => {
                let (delta, version) = {
                    let shadow = self.shadow.lock().await;
                    let Some(run) = shadow.run.as_ref() else {
                        return Err(StoreError::NotFound {
                            run_id: self.run_id.clone(),
                        });
                    };
                    (
                        Delta::between(&run.state, state, &state.context),
                        shadow.version + 1,
                    )
                };
                let status = status_of(state);
                let pending = pending_rows(state, version, now_ms());
                let failure = failure.map(|error| failure_text(&error.to_string()));
                self.write(
                    Entry::Settled { delta, failure },
                    Extra {
                        pending: Some(pending),
                        decisions: Vec::new(),
                        status: Some(status),
                    },
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// The entry of a call about to run its tool's code.
fn started(start: &Start<'_>) -> Entry {
    Entry::CallStarted {
        call_id: start.call_id.to_owned(),
        tool: start.tool.to_owned(),
        attempt: start.attempt,
        at_ms: u64::try_from(now_ms()).ok(),
    }
}

/// The most of a failure's text a journal keeps: a person reads it, and an error that quotes a
/// whole response is cut.
const MAX_FAILURE_TEXT: usize = 4096;

fn failure_text(text: &str) -> String {
    if text.len() <= MAX_FAILURE_TEXT {
        return text.to_owned();
    }
    let mut end = MAX_FAILURE_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn snapshot_row(run: &Replayed, version: u64, chain: &str) -> Result<SnapshotRow, StoreError> {
    let body = serde_json::to_string(&Snapshot {
        chain: chain.to_owned(),
        run,
    })
    .map_err(|e| StoreError::Database(format!("encoding a snapshot: {e}").into()))?;
    Ok(SnapshotRow {
        version,
        format: FORMAT,
        digest: snapshot_digest(&body),
        body,
    })
}

impl Journal for StoreJournal {
    fn record<'a>(&'a self, transition: Transition<'a>) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(async move {
            self.record_transition(transition)
                .await
                .map_err(AgentError::Store)
        })
    }

    fn version(&self) -> Option<u64> {
        // Asked once a run has settled, when no write is under way.
        self.shadow.try_lock().ok().map(|shadow| shadow.version)
    }
}
