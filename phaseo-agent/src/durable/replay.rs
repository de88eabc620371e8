//! A run rebuilt from its journal: a snapshot and the entries after it, every checksum and
//! version checked on the way; and what a run's state means as rows (its stored status, its
//! pending calls).

use serde::{Deserialize, Serialize};

use crate::durable::entry::{
    Entry, FORMAT, arguments_digest, chain, decode_entry, snapshot_digest,
};
use crate::error::StoreError;
use crate::run::journal::{FinishedCall, InFlight, StartedCall};
use crate::run::state::{Decisions, PendingKind, RunState, RunStatus};
use crate::store::backend::{LoadedRun, PendingRow, StoredStatus};

/// A run as its journal leaves it: the state as last recorded, the turn under way, and the
/// decisions a resume took it with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Replayed {
    pub(crate) state: RunState,
    #[serde(default, skip_serializing_if = "InFlight::is_empty")]
    pub(crate) in_flight: InFlight,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) decisions: Option<Decisions>,
    /// Why the run failed, when its last settling was a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failure: Option<String>,
}

impl Replayed {
    /// Applies one entry.
    pub(crate) fn apply(&mut self, entry: Entry) -> Result<(), String> {
        match entry {
            Entry::Started { state } => {
                *self = Replayed {
                    state: *state,
                    in_flight: InFlight::default(),
                    decisions: None,
                    failure: None,
                }
            }
            Entry::Turn { delta, params } => {
                delta.apply(&mut self.state)?;
                self.in_flight = InFlight {
                    turn: Some(params),
                    ..InFlight::default()
                };
                self.decisions = None;
            }
            Entry::CallStarted {
                call_id,
                tool,
                attempt,
                at_ms,
            } => self.in_flight.started.push(StartedCall {
                call_id,
                tool,
                attempt,
                at_ms,
            }),
            Entry::CallFinished { step, new_context } => self
                .in_flight
                .finished
                .push(FinishedCall { step, new_context }),
            Entry::Settled { delta, failure } => {
                delta.apply(&mut self.state)?;
                self.in_flight = InFlight::default();
                self.decisions = None;
                self.failure = failure;
            }
            Entry::Decided { decisions, .. } => {
                self.in_flight = InFlight::default();
                self.decisions = Some(decisions);
            }
            Entry::Refused { .. } => {
                self.in_flight = InFlight::default();
                self.decisions = None;
            }
            Entry::Retried { .. } => {
                self.in_flight = InFlight::default();
                self.decisions = None;
                self.failure = None;
            }
            Entry::Decision { .. } | Entry::Recovered { .. } => {}
        }
        Ok(())
    }
}

/// The snapshot body: the replayed run and the chain's checksum at its version. Written from
/// borrowed parts (no copy of the run), read back owned.
#[derive(Serialize, Deserialize)]
pub(crate) struct Snapshot<R> {
    pub(crate) chain: String,
    #[serde(flatten)]
    pub(crate) run: R,
}

/// Reads a snapshot body. The run's state is read straight into its fields (as
/// [`RunState::from_json`] does) rather than through serde's buffering of a flattened struct and
/// the state's own reading through a `Value`: three passes over the largest text the store
/// reads, made one. A body that does not read so is read the general way, for its error.
pub(crate) fn decode_snapshot(body: &str) -> Result<Snapshot<Replayed>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Fast<'a> {
        chain: String,
        #[serde(borrow)]
        state: &'a serde_json::value::RawValue,
        #[serde(default)]
        in_flight: InFlight,
        #[serde(default)]
        decisions: Option<Decisions>,
        #[serde(default)]
        failure: Option<String>,
    }
    if let Ok(fast) = serde_json::from_str::<Fast<'_>>(body)
        && let Ok(state) = RunState::from_json(fast.state.get())
    {
        return Ok(Snapshot {
            chain: fast.chain,
            run: Replayed {
                state,
                in_flight: fast.in_flight,
                decisions: fast.decisions,
                failure: fast.failure,
            },
        });
    }
    serde_json::from_str(body)
}

pub(crate) fn corrupt(run_id: &str, version: u64, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        run_id: run_id.to_owned(),
        version,
        reason: reason.into(),
    }
}

/// Refuses a row in a format newer than this build's.
pub(crate) fn readable(run_id: &str, version: u64, format: u32) -> Result<(), StoreError> {
    if format > FORMAT {
        return Err(StoreError::UnsupportedFormat {
            run_id: run_id.into(),
            version,
            found: format,
            supported: FORMAT,
        });
    }
    Ok(())
}

/// Rebuilds a run from what its store returned, checking every checksum and version on the way.
pub(crate) fn replay(loaded: &LoadedRun) -> Result<(Replayed, String), StoreError> {
    let run_id = loaded.run_id.as_str();
    let (mut run, mut digest, mut version) = match &loaded.snapshot {
        Some(snapshot) => {
            readable(run_id, snapshot.version, snapshot.format)?;
            if snapshot_digest(&snapshot.body) != snapshot.digest {
                return Err(corrupt(
                    run_id,
                    snapshot.version,
                    "the snapshot does not match its checksum",
                ));
            }
            let parsed = decode_snapshot(&snapshot.body)
                .map_err(|e| corrupt(run_id, snapshot.version, format!("snapshot: {e}")))?;
            (Some(parsed.run), parsed.chain, snapshot.version)
        }
        None => (None, String::new(), 0),
    };
    for row in &loaded.rows {
        if row.version != version + 1 {
            return Err(corrupt(
                run_id,
                version + 1,
                format!(
                    "the journal goes from version {version} to {}: an entry is missing or repeated",
                    row.version
                ),
            ));
        }
        readable(run_id, row.version, row.format)?;
        let expected = chain(&digest, row.version, &row.kind, &row.body);
        if expected != row.digest {
            return Err(corrupt(
                run_id,
                row.version,
                "the entry does not match its checksum",
            ));
        }
        let entry = decode_entry(&row.body)
            .map_err(|e| corrupt(run_id, row.version, format!("entry: {e}")))?;
        match (&mut run, entry) {
            (None, Entry::Started { state }) => {
                run = Some(Replayed {
                    state: *state,
                    in_flight: InFlight::default(),
                    decisions: None,
                    failure: None,
                })
            }
            (None, _) => {
                return Err(corrupt(
                    run_id,
                    row.version,
                    "the journal does not begin with the run's start",
                ));
            }
            (Some(run), entry) => run
                .apply(entry)
                .map_err(|reason| corrupt(run_id, row.version, reason))?,
        }
        digest = expected;
        version = row.version;
    }
    if version != loaded.version {
        return Err(corrupt(
            run_id,
            loaded.version,
            format!("the journal ends at version {version}"),
        ));
    }
    let run = run.ok_or_else(|| corrupt(run_id, 0, "no entries and no snapshot"))?;
    // Deltas set fields one by one: the state they leave is checked as a stored state is.
    run.state
        .check_consistent()
        .map_err(|e| corrupt(run_id, version, format!("the replayed state: {e}")))?;
    if run.state.run_id != loaded.run_id {
        return Err(corrupt(
            run_id,
            version,
            format!("the stored state is of run `{}`", run.state.run_id),
        ));
    }
    Ok((run, digest))
}

/// The stored status of a run in state `state`.
pub(crate) fn status_of(state: &RunState) -> StoredStatus {
    match state.status {
        RunStatus::Completed => StoredStatus::Completed,
        RunStatus::Failed => StoredStatus::Failed,
        RunStatus::WaitingForHuman
            if state
                .pending
                .iter()
                .any(|p| p.kind == PendingKind::OutcomeUnknown) =>
        {
            StoredStatus::InDoubt
        }
        RunStatus::WaitingForHuman => StoredStatus::Paused,
    }
}

/// The pending rows of a paused state, waiting since `at_ms`, at `version`.
pub(crate) fn pending_rows(state: &RunState, version: u64, at_ms: i64) -> Vec<PendingRow> {
    state
        .pending
        .iter()
        .map(|p| {
            let arguments = p.arguments.to_string();
            PendingRow {
                run_id: state.run_id.clone(),
                agent_id: state.agent_id.clone(),
                call_id: p.call.id.clone(),
                tool: p.call.name.clone(),
                kind: p.kind.as_str().to_owned(),
                digest: arguments_digest(&arguments),
                arguments,
                since_ms: at_ms,
                version,
                decision: None,
                decided_by: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    use crate::durable::entry::{Delta, Set, decode_entry};
    use crate::model::message::Message;
    use crate::model::request::TurnParams;
    use crate::run::state::{Decisions, RunState, ToolStep};

    fn state() -> RunState {
        let mut state = RunState::new("run_1".into(), "agent".into(), serde_json::json!({"k": 1}));
        state.messages.push(Message::user("Hello"));
        state
    }

    fn entries() -> Vec<Entry> {
        let delta = Delta {
            messages: vec![Message::user("More")],
            set: vec![Set::Turns(2)],
            ..Delta::default()
        };
        vec![
            Entry::Started {
                state: Box::new(state()),
            },
            Entry::Turn {
                delta: delta.clone(),
                params: TurnParams::default(),
            },
            Entry::CallFinished {
                step: ToolStep {
                    step_index: 0,
                    call_id: "c".into(),
                    tool: "t".into(),
                    preliminary_results: vec![serde_json::json!(1.5)],
                    content: "out".into(),
                    is_error: false,
                    error: None,
                },
                new_context: Some(serde_json::json!({"k": 2})),
            },
            Entry::Settled {
                delta: delta.clone(),
                failure: None,
            },
            Entry::Settled {
                delta,
                failure: Some("the model failed: down".into()),
            },
            Entry::Recovered { by: "p".into() },
        ]
    }

    #[test]
    fn an_entry_reads_back_the_same_by_the_short_path_and_the_general_one() {
        for entry in entries() {
            let body = serde_json::to_string(&entry).unwrap();
            assert!(body.starts_with(r#"{"type":""#), "{body}");
            assert_eq!(decode_entry(&body).unwrap(), entry, "{body}");
            // The tag last (keys sorted): only the general way reads it.
            let sorted =
                serde_json::to_string(&serde_json::from_str::<Value>(&body).unwrap()).unwrap();
            assert!(!sorted.starts_with(r#"{"type""#), "{sorted}");
            assert_eq!(decode_entry(&sorted).unwrap(), entry, "{sorted}");
        }
    }

    #[test]
    fn an_entry_the_short_path_cannot_read_fails_with_the_general_error() {
        for body in [
            r#"{"type":"started","state":{"version":2}}"#,
            r#"{"type":"turn","delta":{},"params":{},"delta":{}}"#,
            r#"{"type":"settled"}"#,
            r#"{"type":"nonsense"}"#,
        ] {
            let general = serde_json::from_str::<Entry>(body)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let ours = decode_entry(body).map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(ours, general, "{body}");
        }
    }

    #[test]
    fn a_snapshot_reads_back_the_same_by_the_short_path_and_the_general_one() {
        let run = Replayed {
            state: state(),
            in_flight: InFlight::default(),
            decisions: Some(Decisions::new().approve("c")),
            failure: Some("the model failed".into()),
        };
        let body = serde_json::to_string(&Snapshot {
            chain: "abc".into(),
            run: &run,
        })
        .unwrap();
        let read = decode_snapshot(&body).unwrap();
        assert_eq!((read.chain.as_str(), &read.run), ("abc", &run));
        let bad = body.replace(r#""version":1"#, r#""version":7"#);
        let general = serde_json::from_str::<Snapshot<Replayed>>(&bad)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(
            decode_snapshot(&bad).map(|_| ()).map_err(|e| e.to_string()),
            general
        );
    }
}
