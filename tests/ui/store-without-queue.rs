// A store of one's own that keeps runs but no queue: `Runs::new` (which workers and enqueues
// use) needs a `RunQueue` too, and the error says what to write.
use phaseo_agent::StoreError;
use phaseo_agent::durable::Runs;
use futures::future::BoxFuture;
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, LoadedRun, NewRun, Page, PendingFilter, PendingRow,
    RunFilter, RunStore, RunSummary,
};

struct Journal;

impl RunStore for Journal {
    fn create(&self, _: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        unimplemented!()
    }
    fn append(&self, _: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        unimplemented!()
    }
    fn load<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<LoadedRun, StoreError>> {
        unimplemented!()
    }
    fn pending<'a>(
        &'a self,
        _: &'a PendingFilter,
    ) -> BoxFuture<'a, Result<Page<PendingRow>, StoreError>> {
        unimplemented!()
    }
    fn runs<'a>(&'a self, _: &'a RunFilter) -> BoxFuture<'a, Result<Page<RunSummary>, StoreError>> {
        unimplemented!()
    }
    fn audit<'a>(
        &'a self,
        _: &'a AuditFilter,
    ) -> BoxFuture<'a, Result<Page<DecisionRow>, StoreError>> {
        unimplemented!()
    }
    fn prune(&self, _: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        unimplemented!()
    }
}

fn main() {
    let _runs = Runs::new(Journal);
}
