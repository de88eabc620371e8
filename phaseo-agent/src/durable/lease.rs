//! Leases: how a process holds a run while it runs it, for workers and plain durable runs alike.
//! A lease is a row's holder, expiry and fencing token, measured by the database's clock; the
//! holder renews it every third of its length, and every write it makes names the token, so a
//! process paused or cut off past its lease writes nothing more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::store::backend::{Lease, RunStore};

/// The log target of lease renewals.
const TARGET: &str = "phaseo_agent::lease";

/// A duration in whole milliseconds, saturated.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Renews `lease` every third of `length`; returns when it is lost (refused, or not renewed
/// before it expired). `holder` names the process in the log.
pub(crate) async fn keep(store: &dyn RunStore, lease: &Lease, length: Duration, holder: &str) {
    let every = length / 3;
    let mut expires = Instant::now() + length;
    loop {
        tokio::time::sleep(every).await;
        let asked = Instant::now();
        match store.renew(lease, millis(length)).await {
            Ok(()) => expires = asked + length,
            Err(StoreError::LeaseLost { .. }) => return,
            Err(error) => {
                tracing::warn!(target: TARGET, holder, run_id = %lease.run_id, %error, "renewing a lease failed");
                if Instant::now() + every >= expires {
                    return;
                }
            }
        }
    }
}

/// A lease renewed in the background for as long as this lives: the renewal stops when it is
/// dropped (with the run's journal, at the run's end), or when the lease is lost.
pub(crate) struct Keeper(tokio::task::JoinHandle<()>);

impl Keeper {
    pub(crate) fn spawn(
        store: Arc<dyn RunStore>,
        lease: Lease,
        length: Duration,
        holder: String,
    ) -> Self {
        Keeper(tokio::spawn(async move {
            keep(&*store, &lease, length, &holder).await;
        }))
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.0.abort();
    }
}
