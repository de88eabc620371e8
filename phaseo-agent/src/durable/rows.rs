//! Checks of a run's stored rows against its journal, and what a decision row says: shared by
//! the run service and the approvals service.

use crate::durable::entry::arguments_digest;
use crate::error::{AgentError, StoreError};
use crate::run::observe::Decider;
use crate::run::resume::refused_for;
use crate::run::state::{Decision, RunState};
use crate::store::backend::{DecisionRow, PendingRow};

/// The refusal of `decision` for the waiting call `call_id` of `state`, if it does not fit the
/// call's kind ([`refused_for`]); `None` for a call that does not wait (the resume names it).
pub(crate) fn unfit(state: &RunState, call_id: &str, decision: &Decision) -> Option<AgentError> {
    let kind = state.pending().iter().find(|p| p.call.id == call_id)?.kind;
    refused_for(kind, decision).map(|hint| AgentError::DecisionMismatch {
        call_id: call_id.to_owned(),
        decision: decision.name(),
        kind: kind.as_str(),
        hint,
    })
}

/// Checks a run's waiting rows against its journal: each names a call the journal says waits,
/// with the journal's arguments and their digest. The rows are what a person is shown and what a
/// decision binds to, and they sit in a table anyone with database access can edit: a row whose
/// arguments were changed would be shown and approved, and then the journal's arguments would run.
/// Such a row is refused as damage ([`StoreError::Corrupt`], naming the row's version), never
/// shown or decided.
pub(crate) fn check_pending(rows: &[PendingRow], state: &RunState) -> Result<(), StoreError> {
    for row in rows {
        let damaged = |reason: String| StoreError::Corrupt {
            run_id: row.run_id.clone(),
            version: row.version,
            reason,
        };
        let Some(call) = state.pending().iter().find(|p| p.call.id == row.call_id) else {
            return Err(damaged(format!(
                "pending call `{}` is not waiting in the run's journal",
                row.call_id
            )));
        };
        let arguments = call.arguments.to_string();
        if row.arguments != arguments
            || row.digest != arguments_digest(&arguments)
            || row.tool != call.call.name
            || row.kind != call.kind.as_str()
        {
            return Err(damaged(format!(
                "pending call `{}` differs from the run's journal (its arguments, digest, tool \
                 or kind were changed in the database)",
                row.call_id
            )));
        }
    }
    Ok(())
}

/// Who made an audited decision, and when.
pub(crate) fn decider(row: &DecisionRow) -> Decider {
    Decider {
        call_id: row.call_id.clone(),
        by: row.by.clone(),
        at_ms: u64::try_from(row.at_ms).ok(),
    }
}
