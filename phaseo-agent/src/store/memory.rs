//! [`MemoryStore`]: a run store in this process's memory, for tests and examples.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::error::StoreError;
use crate::store::backend::damage;
use crate::store::backend::{
    AbandonedRun, Append, Bell, ClaimRequest, Claimed, DecisionRow, JournalRow, Lease,
    LeaseRequest, LoadedRun, NewRun, PendingRow, QueueCounts, RunQueue, RunStore, RunSummary,
    SnapshotRow, StoredStatus, Wakeups, check_append, check_new, clock_ms, hands_over, lease_ms,
};
use crate::store::listing::{AuditFilter, Page, PendingFilter, RunFilter, decode, encode};

/// A run store in memory: what the databases do, for tests and examples, lost when the process
/// ends. Every method holds one lock, so each is atomic as a database transaction is.
///
/// ```
/// use phaseo_agent::durable::Runs;
/// use phaseo_agent::store::MemoryStore;
///
/// let runs = Runs::new(MemoryStore::new());
/// # let _ = runs;
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Tables>,
    bell: Bell,
}

#[derive(Debug, Default)]
struct Tables {
    runs: BTreeMap<String, Run>,
    audit: Vec<DecisionRow>,
}

#[derive(Debug)]
struct Run {
    agent_id: String,
    status: StoredStatus,
    version: u64,
    created_ms: i64,
    updated_ms: i64,
    snapshot: Option<SnapshotRow>,
    rows: Vec<JournalRow>,
    pending: Vec<PendingRow>,
    /// Served by workers (enqueued).
    queued: bool,
    /// Since when it is ready, while it is.
    ready_ms: Option<i64>,
    /// The last lease's token (0: never leased), and until when it holds (`None`: it ended).
    lease_token: u64,
    lease_until_ms: Option<i64>,
    /// Who took the last lease.
    lease_owner: Option<String>,
}

impl Run {
    /// Whether a lease holds it at `now`.
    fn held(&self, now: i64) -> bool {
        self.lease_until_ms.is_some_and(|until| until > now)
    }

    /// Whether the lease `token` holds it at `now`.
    fn held_by(&self, token: u64, now: i64) -> bool {
        self.lease_token == token && self.held(now)
    }

    /// Whether a claim may take it at `now`: ready and not held, or running under an expired
    /// lease.
    fn claimable(&self, now: i64) -> bool {
        self.queued
            && !self.held(now)
            && match self.status {
                StoredStatus::Ready => true,
                StoredStatus::Running => self.lease_until_ms.is_some(),
                _ => false,
            }
    }

    /// Since when it has waited for a worker.
    fn waiting_since(&self) -> Option<i64> {
        match self.status {
            StoredStatus::Ready => self.ready_ms,
            _ => self.lease_until_ms,
        }
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores a new run; a queued one is stored ready (since now), for workers.
    fn insert(&self, run: NewRun, queued: bool) -> Result<(), StoreError> {
        check_new(&run)?;
        let mut tables = self.tables();
        if tables.runs.contains_key(&run.run_id) {
            return Err(StoreError::AlreadyExists { run_id: run.run_id });
        }
        if let Some(call) = repeated_call(&run.pending) {
            return Err(StoreError::Database(
                format!("two waiting calls with the id `{call}` in one write").into(),
            ));
        }
        let status = if queued {
            StoredStatus::Ready
        } else {
            run.status
        };
        let pending = of_run(run.pending, &run.run_id, &run.agent_id);
        tables.runs.insert(
            run.run_id,
            Run {
                agent_id: run.agent_id,
                status,
                version: run.row.version,
                created_ms: run.at_ms,
                updated_ms: run.at_ms,
                snapshot: None,
                rows: vec![run.row],
                pending,
                queued,
                ready_ms: queued.then(clock_ms),
                lease_token: 0,
                lease_until_ms: None,
                lease_owner: None,
            },
        );
        Ok(())
    }
}

impl MemoryStore {
    /// A lease on a stored run for `lease.owner`, unless a live one holds it.
    fn take(&self, run_id: &str, lease: &LeaseRequest) -> Result<Lease, StoreError> {
        let mut tables = self.tables();
        let now = clock_ms();
        let Some(run) = tables.runs.get_mut(run_id) else {
            return Err(StoreError::NotFound {
                run_id: run_id.to_owned(),
            });
        };
        if let Some(until) = run.lease_until_ms.filter(|until| *until > now) {
            return Err(StoreError::LeaseHeld {
                run_id: run_id.to_owned(),
                owner: run.lease_owner.clone().unwrap_or_default(),
                expires_in_ms: u64::try_from(until - now).unwrap_or(0),
            });
        }
        run.lease_token += 1;
        run.lease_until_ms = Some(now.saturating_add(lease_ms(lease.lease_ms)));
        run.lease_owner = Some(lease.owner.clone());
        Ok(Lease {
            run_id: run_id.to_owned(),
            agent_id: run.agent_id.clone(),
            token: run.lease_token,
            status: run.status,
            version: run.version,
            waited_ms: 0,
        })
    }
}

/// A page of `items` from the cursor `after` (an index this function made), or
/// [`StoreError::InvalidCursor`] for any other text.
/// One page of `items` (in the listing's order), after the cursor `after` (`prefix`'s, made by
/// `cursor` from the last item of the page before): the items whose cursor comes after it in
/// that order (`before(a, b)`: `a` is listed before `b`), at most `limit`. Keys, not places:
/// items added between pages do not shift the pages after a cursor.
fn page<T, K: Ord>(
    items: Vec<T>,
    after: Option<&str>,
    limit: usize,
    key: impl Fn(&T) -> K,
    cursor_key: impl Fn(&str) -> Result<K, StoreError>,
    cursor: impl Fn(&T) -> String,
    descending: bool,
) -> Result<Page<T>, StoreError> {
    let from = after.map(cursor_key).transpose()?;
    let limit = limit.clamp(1, 1000);
    let mut items: Vec<T> = items
        .into_iter()
        .filter(|item| {
            from.as_ref().is_none_or(|from| {
                let k = key(item);
                if descending { k < *from } else { k > *from }
            })
        })
        .collect();
    let next = (items.len() > limit).then(|| cursor(&items[limit - 1]));
    items.truncate(limit);
    Ok(Page::new(items, next))
}

impl RunStore for MemoryStore {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = self.insert(run, false);
        Box::pin(async move { result })
    }

    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = (|| {
            check_append(&append)?;
            let mut tables = self.tables();
            let Some(run) = tables.runs.get_mut(&append.run_id) else {
                return Err(StoreError::NotFound {
                    run_id: append.run_id,
                });
            };
            // A worker whose lease is over is told so first, whatever else moved on.
            let now = clock_ms();
            if let Some(token) = append.fence {
                if !run.held_by(token, now) {
                    return Err(StoreError::LeaseLost {
                        run_id: append.run_id,
                        token,
                    });
                }
            }
            if run.version != append.expected_version {
                return Err(StoreError::Conflict {
                    run_id: append.run_id,
                    expected: append.expected_version,
                    found: run.version,
                });
            }
            // A call waits once: the SQL stores' key on (run, call) refuses the write too.
            if let Some(call) = append.pending.as_deref().and_then(repeated_call) {
                return Err(StoreError::Database(
                    format!("two waiting calls with the id `{call}` in one write").into(),
                ));
            }
            let ready = run.queued && hands_over(&append);
            // Numbered from `expected_version + 1` on: `check_append` saw to it.
            run.version = append.rows.last().map_or(run.version, |row| row.version);
            run.rows.extend(append.rows);
            let status = if ready {
                StoredStatus::Ready
            } else {
                append.status
            };
            // Since when the run is in its status: an append that leaves it writes no time.
            if status != run.status {
                run.updated_ms = append.at_ms;
            }
            run.status = status;
            run.ready_ms = ready.then_some(now);
            // A write outside a lease (a resume in the application's process) ends any lease, so
            // no worker takes the run from under it; so does any status but running.
            if append.fence.is_none() || run.status != StoredStatus::Running {
                run.lease_until_ms = None;
            }
            if let Some(snapshot) = append.snapshot {
                run.snapshot = Some(snapshot);
            }
            if let Some(pending) = append.pending {
                run.pending = of_run(pending, &append.run_id, &run.agent_id);
            }
            tables.audit.extend(append.decisions);
            Ok(ready)
        })();
        if let Ok(true) = result {
            self.bell.ring();
        }
        Box::pin(async move { result.map(drop) })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>> {
        let result = (|| {
            let tables = self.tables();
            let Some(run) = tables.runs.get(run_id) else {
                return Err(StoreError::NotFound {
                    run_id: run_id.to_owned(),
                });
            };
            let after = run.snapshot.as_ref().map_or(0, |s| s.version);
            Ok(LoadedRun {
                run_id: run_id.to_owned(),
                agent_id: run.agent_id.clone(),
                status: run.status,
                version: run.version,
                snapshot: run.snapshot.clone(),
                rows: run
                    .rows
                    .iter()
                    .filter(|r| r.version > after)
                    .cloned()
                    .collect(),
                pending: run.pending.clone(),
                created_ms: run.created_ms,
                updated_ms: run.updated_ms,
            })
        })();
        Box::pin(async move { result })
    }

    fn pending<'a>(
        &'a self,
        filter: &'a PendingFilter,
    ) -> BoxFuture<'a, Result<Page<PendingRow>, StoreError>> {
        let tables = self.tables();
        let mut rows: Vec<PendingRow> = tables
            .runs
            .values()
            .flat_map(|run| run.pending.iter())
            .filter(|p| filter.agent_id.as_ref().is_none_or(|a| &p.agent_id == a))
            .filter(|p| filter.run_id.as_ref().is_none_or(|r| &p.run_id == r))
            .filter(|p| filter.tool.as_ref().is_none_or(|t| &p.tool == t))
            .filter(|p| filter.kind.as_ref().is_none_or(|k| &p.kind == k))
            .filter(|p| filter.older_than_ms.is_none_or(|t| p.since_ms < t))
            .filter(|p| !filter.undecided_only || p.decision.is_none())
            .cloned()
            .collect();
        rows.sort_by(|a, b| {
            (b.since_ms, &b.run_id, &b.call_id).cmp(&(a.since_ms, &a.run_id, &a.call_id))
        });
        let paged = page(
            rows,
            filter.after.as_deref(),
            filter.limit,
            |p| (p.since_ms, p.run_id.clone(), p.call_id.clone()),
            |c| {
                let (since, mut ids) = decode("p1", 2, c)?;
                let call = ids.pop().unwrap_or_default();
                Ok((since, ids.pop().unwrap_or_default(), call))
            },
            |p| encode("p1", p.since_ms, &[&p.run_id, &p.call_id]),
            true,
        );
        let mut result = match paged {
            Ok(result) => result,
            Err(error) => return Box::pin(async move { Err(error) }),
        };
        // A row written damaged (through this trait, by a bug) is named, not listed.
        let (items, damaged) = std::mem::take(&mut result.items)
            .into_iter()
            .partition::<Vec<_>, _>(|row| damage(row).is_none());
        result.items = items;
        result.damaged = damaged
            .iter()
            .map(|row| row.damaged(damage(row).unwrap_or_default()))
            .collect();
        Box::pin(async move { Ok(result) })
    }

    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Page<RunSummary>, StoreError>> {
        let tables = self.tables();
        let mut runs: Vec<RunSummary> = tables
            .runs
            .iter()
            .filter(|(_, r)| filter.agent_id.as_ref().is_none_or(|a| &r.agent_id == a))
            .filter(|(_, r)| filter.status.is_none_or(|s| r.status == s))
            .map(|(id, r)| RunSummary {
                run_id: id.clone(),
                agent_id: r.agent_id.clone(),
                status: r.status,
                version: r.version,
                created_ms: r.created_ms,
                updated_ms: r.updated_ms,
            })
            .collect();
        runs.sort_by(|a, b| (b.updated_ms, &b.run_id).cmp(&(a.updated_ms, &a.run_id)));
        let result = page(
            runs,
            filter.after.as_deref(),
            filter.limit,
            |r| (r.updated_ms, r.run_id.clone()),
            |c| {
                let (updated, mut ids) = decode("r1", 1, c)?;
                Ok((updated, ids.pop().unwrap_or_default()))
            },
            |r| encode("r1", r.updated_ms, &[&r.run_id]),
            true,
        );
        Box::pin(async move { result })
    }

    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>> {
        let tables = self.tables();
        // The log's place is its id: rows are only ever added at its end.
        let rows: Vec<(i64, DecisionRow)> = (1..)
            .zip(&tables.audit)
            .filter(|(_, d)| filter.run_id.as_ref().is_none_or(|r| &d.run_id == r))
            .map(|(id, d)| (id, d.clone()))
            .collect();
        let result = page(
            rows,
            filter.after.as_deref(),
            filter.limit,
            |(id, _)| *id,
            |c| decode("a1", 0, c).map(|(id, _)| id),
            |(id, _)| encode("a1", *id, &[]),
            false,
        )
        .map(|p| Page::new(p.items.into_iter().map(|(_, d)| d).collect(), p.next));
        Box::pin(async move { result })
    }

    fn prune(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        let mut tables = self.tables();
        let before = tables.runs.len();
        tables
            .runs
            .retain(|_, r| r.status.is_kept() || r.updated_ms >= before_ms);
        let pruned = (before - tables.runs.len()) as u64;
        Box::pin(async move { Ok(pruned) })
    }

    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        duration_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut tables = self.tables();
        let now = clock_ms();
        let result = match tables.runs.get_mut(&lease.run_id) {
            Some(run) if run.held_by(lease.token, now) => {
                run.lease_until_ms = Some(now.saturating_add(lease_ms(duration_ms)));
                Ok(())
            }
            _ => Err(StoreError::LeaseLost {
                run_id: lease.run_id.clone(),
                token: lease.token,
            }),
        };
        Box::pin(async move { result })
    }

    fn create_held<'a>(
        &'a self,
        run: NewRun,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        let run_id = run.run_id.clone();
        let result = self
            .insert(run, false)
            .and_then(|()| self.take(&run_id, lease));
        Box::pin(async move { result })
    }

    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        let result = self.take(run_id, lease);
        Box::pin(async move { result })
    }

    fn abandoned(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AbandonedRun>, StoreError>> {
        let tables = self.tables();
        let now = clock_ms();
        let mut found: Vec<AbandonedRun> = tables
            .runs
            .iter()
            .filter(|(_, run)| !run.queued && run.status == StoredStatus::Running && !run.held(now))
            .map(|(run_id, run)| AbandonedRun {
                run_id: run_id.clone(),
                agent_id: run.agent_id.clone(),
                owner: run.lease_owner.clone(),
                expired_ms: run.lease_until_ms,
                updated_ms: run.updated_ms,
            })
            .collect();
        found.sort_by(|a, b| (a.updated_ms, &a.run_id).cmp(&(b.updated_ms, &b.run_id)));
        found.truncate(limit);
        Box::pin(async move { Ok(found) })
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut tables = self.tables();
        let now = clock_ms();
        let mut rang = false;
        if let Some(run) = tables.runs.get_mut(&lease.run_id) {
            if run.held_by(lease.token, now) {
                run.lease_until_ms = Some(now);
                rang = true;
            }
        }
        drop(tables);
        if rang {
            self.bell.ring();
        }
        Box::pin(async { Ok(()) })
    }
}

impl RunQueue for MemoryStore {
    fn enqueue(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = self.insert(run, true);
        if result.is_ok() {
            self.bell.ring();
        }
        Box::pin(async move { result })
    }

    fn claim<'a>(
        &'a self,
        request: &'a ClaimRequest,
    ) -> BoxFuture<'a, Result<Claimed, StoreError>> {
        let mut tables = self.tables();
        let now = clock_ms();
        let served = |run: &Run| request.agents.iter().any(|a| a == &run.agent_id);
        let mut ready: Vec<(i64, String)> = tables
            .runs
            .iter()
            .filter(|(_, run)| served(run) && run.claimable(now))
            .map(|(id, run)| (run.waiting_since().unwrap_or(now), id.clone()))
            .collect();
        ready.sort();
        let mut leases = Vec::new();
        for (since, run_id) in ready.into_iter().take(request.limit) {
            let Some(run) = tables.runs.get_mut(&run_id) else {
                continue;
            };
            run.lease_token += 1;
            run.lease_until_ms = Some(now.saturating_add(lease_ms(request.lease_ms)));
            run.lease_owner = Some(request.worker.clone());
            leases.push(Lease {
                agent_id: run.agent_id.clone(),
                token: run.lease_token,
                status: run.status,
                version: run.version,
                waited_ms: u64::try_from(now - since).unwrap_or(0),
                run_id,
            });
        }
        let next_expiry_ms = tables
            .runs
            .values()
            .filter(|run| run.queued && served(run))
            .filter_map(|run| run.lease_until_ms)
            .filter(|until| *until > now)
            .min()
            .map(|until| u64::try_from(until - now).unwrap_or(0));
        Box::pin(async move {
            Ok(Claimed {
                leases,
                next_expiry_ms,
            })
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Result<Wakeups, StoreError>> {
        let wakeups = self.bell.wakeups();
        Box::pin(async move { Ok(wakeups) })
    }

    fn queue_counts(&self) -> BoxFuture<'_, Result<Vec<QueueCounts>, StoreError>> {
        let tables = self.tables();
        let now = clock_ms();
        let mut counts: BTreeMap<&str, QueueCounts> = BTreeMap::new();
        for run in tables.runs.values() {
            let c = counts
                .entry(run.agent_id.as_str())
                .or_insert_with(|| QueueCounts {
                    agent_id: run.agent_id.clone(),
                    ..QueueCounts::default()
                });
            let waiting = run.claimable(now);
            match run.status {
                _ if waiting => c.ready += 1,
                StoredStatus::Ready | StoredStatus::Running => c.running += 1,
                StoredStatus::Paused => c.paused += 1,
                StoredStatus::InDoubt => c.in_doubt += 1,
                StoredStatus::Failed => c.failed += 1,
                StoredStatus::Completed => c.completed += 1,
            }
            if waiting {
                let waited = run
                    .waiting_since()
                    .map(|since| u64::try_from(now - since).unwrap_or(0));
                c.oldest_ready_ms = c.oldest_ready_ms.max(waited);
            }
        }
        let counts = counts.into_values().collect();
        Box::pin(async move { Ok(counts) })
    }
}

/// The first call id `pending` holds twice, if any.
fn repeated_call(pending: &[PendingRow]) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    pending
        .iter()
        .map(|p| p.call_id.as_str())
        .find(|call| !seen.insert(*call))
}

/// `pending` as the run `run_id` of `agent_id` keeps them: each row names its run and agent, as
/// the SQL stores read them from the run's row.
fn of_run(mut pending: Vec<PendingRow>, run_id: &str, agent_id: &str) -> Vec<PendingRow> {
    for row in &mut pending {
        run_id.clone_into(&mut row.run_id);
        agent_id.clone_into(&mut row.agent_id);
    }
    pending
}
