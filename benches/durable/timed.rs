//! A store around another that times its appends (and, as a step, the load of the run after
//! each append), as a running process pays them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use phaseo_agent::durable::Runs;
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, LoadedRun, NewRun, Page, PendingFilter, PendingRow,
    RunFilter, RunStore, RunSummary,
};
use phaseo_agent::{AgentError, StoreError};

/// What [`Timed`] times after each append.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `RunStore::append` alone.
    Append,
    /// The append, then `Runs::load` of the run (rows read, checksums checked, state rebuilt):
    /// one journaled step written and read, as a checkpointer's `put` then `get`.
    AppendLoad,
}

pub struct Timed {
    inner: Arc<dyn RunStore>,
    runs: Runs,
    step: Step,
    /// Time spent in timed operations, and how many.
    total: Mutex<(Duration, u64)>,
}

impl Timed {
    pub fn new(inner: Arc<dyn RunStore>, step: Step) -> Self {
        Timed {
            runs: Runs::without_queue(inner.clone()),
            inner,
            step,
            total: Mutex::new((Duration::ZERO, 0)),
        }
    }

    /// The time and count so far, reset.
    pub fn take(&self) -> (Duration, u64) {
        std::mem::take(&mut *self.total.lock().unwrap())
    }
}

impl RunStore for Timed {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.create(run)
    }

    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let run_id = append.run_id.clone();
            let started = Instant::now();
            self.inner.append(append).await?;
            if self.step == Step::AppendLoad {
                match self.runs.load(&run_id).await {
                    Ok(_) => {}
                    Err(AgentError::Store(e)) => return Err(e),
                    Err(other) => panic!("load: {other}"),
                }
            }
            let took = started.elapsed();
            let mut total = self.total.lock().unwrap();
            total.0 += took;
            total.1 += 1;
            Ok(())
        })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>> {
        self.inner.load(run_id)
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
}
