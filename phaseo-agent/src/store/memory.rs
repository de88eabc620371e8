//! [`MemoryStore`]: a run store in this process's memory, for tests and examples.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::error::StoreError;
use crate::store::backend::{
    Append, AuditFilter, DecisionRow, JournalRow, LoadedRun, NewRun, Page, PendingFilter,
    PendingRow, RunFilter, RunStore, RunSummary, SnapshotRow, StoredStatus,
};

/// A run store in memory: what the databases do, for tests and examples, lost when the process
/// ends. Every method holds one lock, so each is atomic as a database transaction is.
///
/// ```
/// use phaseo_agent::store::{MemoryStore, Runs};
///
/// let runs = Runs::new(MemoryStore::new());
/// # let _ = runs;
/// ```
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Tables>,
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
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn page<T: Clone>(items: Vec<T>, after: Option<&str>, limit: usize) -> Page<T> {
    let start = after.and_then(|a| a.parse::<usize>().ok()).unwrap_or(0);
    let limit = limit.clamp(1, 1000);
    let end = (start + limit).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Page {
        items: items.get(start..end).map(<[T]>::to_vec).unwrap_or_default(),
        next,
    }
}

impl RunStore for MemoryStore {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = (|| {
            let mut tables = self.tables();
            if tables.runs.contains_key(&run.run_id) {
                return Err(StoreError::AlreadyExists { run_id: run.run_id });
            }
            tables.runs.insert(
                run.run_id,
                Run {
                    agent_id: run.agent_id,
                    status: run.status,
                    version: run.row.version,
                    created_ms: run.at_ms,
                    updated_ms: run.at_ms,
                    snapshot: None,
                    rows: vec![run.row],
                    pending: run.pending,
                },
            );
            Ok(())
        })();
        Box::pin(async move { result })
    }

    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        let result = (|| {
            let mut tables = self.tables();
            let Some(run) = tables.runs.get_mut(&append.run_id) else {
                return Err(StoreError::NotFound {
                    run_id: append.run_id,
                });
            };
            if run.version != append.expected_version {
                return Err(StoreError::Conflict {
                    run_id: append.run_id,
                    expected: append.expected_version,
                    found: run.version,
                });
            }
            let mut version = run.version;
            for row in &append.rows {
                if row.version != version + 1 {
                    return Err(StoreError::Database(format!(
                        "entry version {} does not follow {version}",
                        row.version
                    )));
                }
                version = row.version;
            }
            run.version = version;
            run.rows.extend(append.rows);
            run.status = append.status;
            run.updated_ms = append.at_ms;
            if let Some(snapshot) = append.snapshot {
                run.snapshot = Some(snapshot);
            }
            if let Some(pending) = append.pending {
                run.pending = pending;
            }
            tables.audit.extend(append.decisions);
            Ok(())
        })();
        Box::pin(async move { result })
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
        let result = page(rows, filter.after.as_deref(), filter.limit);
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
        let result = page(runs, filter.after.as_deref(), filter.limit);
        Box::pin(async move { Ok(result) })
    }

    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>> {
        let tables = self.tables();
        let rows: Vec<DecisionRow> = tables
            .audit
            .iter()
            .filter(|d| filter.run_id.as_ref().is_none_or(|r| &d.run_id == r))
            .cloned()
            .collect();
        let result = page(rows, filter.after.as_deref(), filter.limit);
        Box::pin(async move { Ok(result) })
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
}
