//! What the durable-run tests, the crash child and the durable bench share: a model that answers
//! by where the conversation is, and a run store with hooks on its writes and loads.
//!
//! A standalone file (it uses nothing else of `support/`), so `tests/bin/durable_child.rs` and
//! `benches/durable.rs` include it with `#[path]` too.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use phaseo_agent::store::{
    AbandonedRun, Append, AuditFilter, DecisionRow, Lease, LeaseRequest, LoadedRun, NewRun, Page,
    PendingFilter, PendingRow, RunFilter, RunStore, RunSummary,
};
use phaseo_agent::{Message, Model, ModelError, ModelRequest, ModelResponse, StoreError};

/// Answers by the conversation's count of assistant turns, as a real model asked the same
/// conversation again would: a process that recovers a run and asks again gets the answer the
/// first process would have got, and one model serves every run of a benchmark. Past its script
/// it answers "Done.".
pub struct ByPosition(pub Vec<ModelResponse>);

impl Model for ByPosition {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let answer = self
            .0
            .get(turn)
            .cloned()
            .unwrap_or_else(|| ModelResponse::text("Done."));
        Box::pin(async move { Ok(answer) })
    }
}

type BeforeWrite = Box<dyn Fn(usize) -> Result<(), StoreError> + Send + Sync>;
type AfterWrite = Box<dyn Fn(usize) + Send + Sync>;
type OnLoad = Box<dyn Fn(&mut LoadedRun) + Send + Sync>;

/// A store around another, with hooks: before each write (numbered from 1; an error fails the
/// write, as a process that died there), after each write that succeeded, and on what a load
/// returns (damage, as a disk or a person with database access might leave it).
pub struct Hooked {
    inner: Arc<dyn RunStore>,
    writes: AtomicUsize,
    before_write: BeforeWrite,
    after_write: AfterWrite,
    on_load: OnLoad,
}

impl Hooked {
    pub fn new(inner: Arc<dyn RunStore>) -> Self {
        Hooked {
            inner,
            writes: AtomicUsize::new(0),
            before_write: Box::new(|_| Ok(())),
            after_write: Box::new(|_| ()),
            on_load: Box::new(|_| ()),
        }
    }

    pub fn before_write(
        mut self,
        hook: impl Fn(usize) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.before_write = Box::new(hook);
        self
    }

    pub fn after_write(mut self, hook: impl Fn(usize) + Send + Sync + 'static) -> Self {
        self.after_write = Box::new(hook);
        self
    }

    pub fn on_load(mut self, hook: impl Fn(&mut LoadedRun) + Send + Sync + 'static) -> Self {
        self.on_load = Box::new(hook);
        self
    }

    /// Writes only the first `budget` writes; every later one fails, as after a crash.
    pub fn dies_after(inner: Arc<dyn RunStore>, budget: usize) -> Self {
        Hooked::new(inner).before_write(move |n| {
            if n > budget {
                Err(StoreError::Database("the process died here".into()))
            } else {
                Ok(())
            }
        })
    }

    fn write<'a, T: Send + 'a>(
        &'a self,
        write: impl FnOnce() -> BoxFuture<'a, Result<T, StoreError>> + Send + 'a,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            (self.before_write)(n)?;
            let done = write().await?;
            (self.after_write)(n);
            Ok(done)
        })
    }
}

impl RunStore for Hooked {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move || self.inner.create(run))
    }
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move || self.inner.append(append))
    }
    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>> {
        Box::pin(async move {
            let mut loaded = self.inner.load(run_id).await?;
            (self.on_load)(&mut loaded);
            Ok(loaded)
        })
    }
    fn pending<'a>(
        &'a self,
        filter: &'a PendingFilter,
    ) -> BoxFuture<'a, Result<Page<PendingRow>, StoreError>> {
        self.inner.pending(filter)
    }
    fn runs<'a>(
        &'a self,
        filter: &'a RunFilter,
    ) -> BoxFuture<'a, Result<Page<RunSummary>, StoreError>> {
        self.inner.runs(filter)
    }
    fn audit<'a>(
        &'a self,
        filter: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>> {
        self.inner.audit(filter)
    }
    fn prune(&self, before_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.prune(before_ms)
    }
    // Taking a lease is a write too: a process may die right before or after it.
    fn create_held<'a>(
        &'a self,
        run: NewRun,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        self.write(move || self.inner.create_held(run, lease))
    }
    fn acquire<'a>(
        &'a self,
        run_id: &'a str,
        lease: &'a LeaseRequest,
    ) -> BoxFuture<'a, Result<Lease, StoreError>> {
        self.write(move || self.inner.acquire(run_id, lease))
    }
    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.renew(lease, lease_ms)
    }
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release(lease)
    }
    fn abandoned(&self, limit: usize) -> BoxFuture<'_, Result<Vec<AbandonedRun>, StoreError>> {
        self.inner.abandoned(limit)
    }
}
