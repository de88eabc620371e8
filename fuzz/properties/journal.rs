//! The property of the `journal` fuzz target, shared with `tests/it/fuzz_corpus.rs`: loading a
//! run from whatever rows a store hands back never panics, and neither does recovering or resuming
//! it; a run that loads has a state that re-serialises and reads back to an equal state.
//!
//! An input is four header bytes, then sections separated by zero bytes (which JSON text cannot
//! hold):
//!
//! - `h0`: the stored status (its low three bits, modulo 5: running, paused, in doubt, completed,
//!   failed); bit 3: the store refuses writes; bit 4: the pending rows carry an approval already
//!   recorded (for a resume without decisions given);
//! - `h1`: the snapshot's version, when there is a snapshot;
//! - `h2`: a damage ([`Damage`]): its low three bits pick what, the rest which row;
//! - `h3`: the model's script after a recovery or a resume ([`model`]);
//! - the first section: the snapshot's body (empty: no snapshot);
//! - every other section: one journal row, `<kind>\t<body>` (no tab: an empty kind).
//!
//! Versions follow each other from the snapshot's (or from 1), formats are the current one, and
//! the checksums are computed for the bodies as given (the chain's formula, reimplemented here),
//! so that the fuzzer reaches the entries' parsing and the deltas' application; then the damage,
//! if any, breaks one of them. The run is served by [`Served`], a store whose `load` returns it
//! and whose writes succeed without storing anything (or fail, by `h0`), so a recovery or a resume
//! goes on into the loop with the replayed run.
//!
//! The seeds (`corpus/journal`) are real rows of runs of [`agent`] on a `MemoryStore`, written by
//! `src/bin/gen_corpus.rs` with [`encode`].

use std::future::Future;
use std::future::IntoFuture as _;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use phaseo_agent::durable::Runs;
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, JournalRow, LoadedRun, NewRun, Page, PendingFilter,
    PendingRow, RunFilter, RunStore, RunSummary, SnapshotRow, StoredStatus,
};
use phaseo_agent::{
    Agent, Decision, Decisions, PendingKind, RunState, ScriptedModel, StoreError, Tool,
};
use serde_json::json;
use sha2::{Digest, Sha256};

/// The run every input is loaded as.
pub const RUN_ID: &str = "run_journal";

/// The format of the rows this build of phaseo-agent reads.
const FORMAT: u32 = 1;

/// The statuses `h0` picks from, in order.
const STATUSES: [StoredStatus; 5] = [
    StoredStatus::Running,
    StoredStatus::Paused,
    StoredStatus::InDoubt,
    StoredStatus::Completed,
    StoredStatus::Failed,
];

/// One thing broken after the rows are made right (`h2`'s low three bits; the rest, `h2 >> 3`,
/// is the row it applies to, modulo their number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Nothing.
    None,
    /// A row's checksum has one digit changed.
    RowDigest,
    /// The snapshot's checksum has one digit changed.
    SnapshotDigest,
    /// A row's version skips one.
    RowVersion,
    /// A row's format is newer than this build's.
    RowFormat,
    /// The snapshot's format is newer than this build's.
    SnapshotFormat,
    /// The run's version is one past its last row's.
    RunVersion,
    /// The store names another run.
    OtherRun,
}

impl Damage {
    /// The damage an `h2` byte picks.
    pub fn of(byte: u8) -> Damage {
        match byte & 7 {
            0 => Damage::None,
            1 => Damage::RowDigest,
            2 => Damage::SnapshotDigest,
            3 => Damage::RowVersion,
            4 => Damage::RowFormat,
            5 => Damage::SnapshotFormat,
            6 => Damage::RunVersion,
            _ => Damage::OtherRun,
        }
    }
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A store that serves one run: `load` returns it (for any id), writes succeed and store nothing,
/// or fail when `refuse_writes`.
pub struct Served {
    run: LoadedRun,
    refuse_writes: bool,
}

impl Served {
    /// A store serving `run`, whose writes succeed.
    pub fn new(run: LoadedRun) -> Self {
        Served {
            run,
            refuse_writes: false,
        }
    }

    fn write(&self) -> Boxed<'_, ()> {
        let refused = self.refuse_writes;
        Box::pin(async move {
            if refused {
                Err(StoreError::Database("this store refuses writes".into()))
            } else {
                Ok(())
            }
        })
    }
}

fn empty_page<'a, T: Send + 'a>() -> Boxed<'a, Page<T>> {
    Box::pin(async { Ok(Page::new(Vec::new(), None)) })
}

impl RunStore for Served {
    fn create(&self, _run: NewRun) -> Boxed<'_, ()> {
        self.write()
    }
    fn append(&self, _append: Append) -> Boxed<'_, ()> {
        self.write()
    }
    fn load<'a>(&'a self, _run_id: &'a str) -> Boxed<'a, LoadedRun> {
        let run = self.run.clone();
        Box::pin(async move { Ok(run) })
    }
    fn pending<'a>(&'a self, _filter: &'a PendingFilter) -> Boxed<'a, Page<PendingRow>> {
        empty_page()
    }
    fn runs<'a>(&'a self, _filter: &'a RunFilter) -> Boxed<'a, Page<RunSummary>> {
        empty_page()
    }
    fn audit<'a>(&'a self, _filter: &'a AuditFilter) -> Boxed<'a, Page<DecisionRow>> {
        empty_page()
    }
    fn prune(&self, _before_ms: i64) -> Boxed<'_, u64> {
        Box::pin(async { Ok(0) })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The journal's checksum after an entry, as phaseo-agent computes it: the previous checksum,
/// the kind and the body, each prefixed by its length (little-endian `u64`), then the version.
pub fn chain(previous: &str, version: u64, kind: &str, body: &str) -> String {
    let mut hash = Sha256::new();
    for part in [previous.as_bytes(), kind.as_bytes(), body.as_bytes()] {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.update(version.to_le_bytes());
    hex(&hash.finalize())
}

/// A snapshot's checksum: the SHA-256 of its body.
pub fn snapshot_digest(body: &str) -> String {
    hex(&Sha256::digest(body.as_bytes()))
}

/// The snapshot's `chain` field: the checksum the rows after it chain from.
fn snapshot_chain(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("chain")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A hex digit changed.
fn flipped(digest: &mut String) {
    let last = match digest.pop() {
        Some('0') => '1',
        _ => '0',
    };
    digest.push(last);
}

/// The input for a stored run: the header bytes `[h0, h1, h2, h3]` with `h1` set to the
/// snapshot's version, the snapshot's body, and each row as `<kind>\t<body>`.
pub fn encode(run: &LoadedRun, header: [u8; 4]) -> Vec<u8> {
    let mut bytes = header.to_vec();
    if let Some(snapshot) = &run.snapshot {
        bytes[1] = u8::try_from(snapshot.version).expect("a short seed run");
        bytes.extend_from_slice(snapshot.body.as_bytes());
    }
    for row in &run.rows {
        bytes.push(0);
        bytes.extend_from_slice(row.kind.as_bytes());
        bytes.push(b'\t');
        bytes.extend_from_slice(row.body.as_bytes());
    }
    bytes
}

/// The stored run an input describes (see the module docs), or `None` if a body is not UTF-8.
pub fn decode(data: &[u8]) -> Option<(LoadedRun, u8, u8)> {
    let (header, rest) = data.split_at_checked(4)?;
    let [h0, h1, h2, h3] = [header[0], header[1], header[2], header[3]];
    let mut sections = rest.split(|&b| b == 0);
    let snapshot = std::str::from_utf8(sections.next().unwrap_or_default()).ok()?;
    let snapshot = (!snapshot.is_empty()).then(|| SnapshotRow {
        version: u64::from(h1),
        format: FORMAT,
        digest: snapshot_digest(snapshot),
        body: snapshot.to_owned(),
    });
    let (mut digest, mut version) = match &snapshot {
        Some(s) => (snapshot_chain(&s.body), s.version),
        None => (String::new(), 0),
    };
    let mut rows = Vec::new();
    for section in sections {
        let text = std::str::from_utf8(section).ok()?;
        let (kind, body) = text.split_once('\t').unwrap_or(("", text));
        version += 1;
        digest = chain(&digest, version, kind, body);
        rows.push(JournalRow {
            version,
            kind: kind.to_owned(),
            format: FORMAT,
            body: body.to_owned(),
            digest: digest.clone(),
        });
    }
    let mut run = LoadedRun {
        run_id: RUN_ID.to_owned(),
        agent_id: AGENT_ID.to_owned(),
        status: STATUSES[usize::from(h0 & 7) % STATUSES.len()],
        version,
        snapshot,
        rows,
        pending: Vec::new(),
        created_ms: 0,
        updated_ms: 0,
    };
    let target = usize::from(h2 >> 3);
    let row = (!run.rows.is_empty()).then(|| target % run.rows.len());
    match (Damage::of(h2), row) {
        (Damage::RowDigest, Some(i)) => flipped(&mut run.rows[i].digest),
        (Damage::RowVersion, Some(i)) => run.rows[i].version += 1,
        (Damage::RowFormat, Some(i)) => run.rows[i].format = FORMAT + 1,
        (Damage::SnapshotDigest, _) => {
            if let Some(s) = &mut run.snapshot {
                flipped(&mut s.digest);
            }
        }
        (Damage::SnapshotFormat, _) => {
            if let Some(s) = &mut run.snapshot {
                s.format = FORMAT + 1;
            }
        }
        (Damage::RunVersion, _) => run.version += 1,
        (Damage::OtherRun, _) => run.run_id = format!("{RUN_ID}_other"),
        _ => {}
    }
    Some((run, h0, h3))
}

/// The id of the agent, as its states record it.
pub const AGENT_ID: &str = "release";

/// The agent: `deploy` needs an approval, `notify` does not, `sync` is idempotent.
pub fn agent(model: ScriptedModel) -> Agent {
    let tool = |name: &str| {
        Tool::new(name, "Does it", json!({"type": "object"}), |input, _| {
            Ok(json!({"done": input}))
        })
    };
    Agent::builder(AGENT_ID)
        .model(model)
        .tool(tool("deploy").require_approval())
        .tool(tool("notify"))
        .tool(tool("sync").idempotent(true))
        .build()
        .expect("the agent builds")
}

/// A scripted model (`choice` modulo 4): an answer; a gated call; a plain and an idempotent call;
/// nothing (the model fails). Then answers.
pub fn model(choice: u8) -> ScriptedModel {
    let model = ScriptedModel::new();
    let model = match choice % 4 {
        0 => model,
        1 => model.tool_call("call_9", "deploy", json!({"env": "prod"})),
        2 => model.tool_calls([
            phaseo_agent::ToolCall::new("call_7", "notify", json!({"to": "ops"})),
            phaseo_agent::ToolCall::new("call_8", "sync", json!({"repo": "web"})),
        ]),
        _ => return model,
    };
    model.text("Done.").text("Done again.")
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a Tokio runtime")
    })
}

/// The decisions that fit a state's pending calls: approve, or supply an output.
fn fitting(state: &RunState) -> Decisions {
    state
        .pending()
        .iter()
        .fold(Decisions::for_run(state.run_id()), |d, p| match p.kind {
            PendingKind::ExternalOutput | PendingKind::OutcomeUnknown => {
                d.output(p.call.id.clone(), json!("done"))
            }
            _ => d.approve(p.call.id.clone()),
        })
}

/// The pending rows of a state, each with an approval recorded when `decided`.
fn pending_rows(state: &RunState, version: u64, decided: bool) -> Vec<PendingRow> {
    let approve = serde_json::to_string(&Decision::Approve).ok();
    state
        .pending()
        .iter()
        .map(|p| PendingRow {
            run_id: RUN_ID.to_owned(),
            agent_id: AGENT_ID.to_owned(),
            call_id: p.call.id.clone(),
            tool: p.call.name.clone(),
            kind: p.kind.as_str().to_owned(),
            arguments: p.arguments.to_string(),
            digest: String::new(),
            since_ms: 0,
            version,
            decision: approve.clone().filter(|_| decided),
            decided_by: decided.then(|| "ops".to_owned()),
        })
        .collect()
}

/// Checks the property on one input (see the module docs for its layout).
pub fn check(data: &[u8]) {
    let Some((mut run, h0, h3)) = decode(data) else {
        return;
    };
    let refuse_writes = h0 & 8 != 0;
    let runs = Runs::without_queue(Arc::new(Served {
        run: run.clone(),
        refuse_writes,
    }));
    let Ok(stored) = runtime().block_on(runs.load(RUN_ID)) else {
        return;
    };
    let text = stored.state.to_json();
    let again = RunState::from_json(&text).unwrap_or_else(|e| {
        panic!("a loaded run's state does not read back from its JSON: {e}\nstate: {text}")
    });
    assert!(
        again == stored.state,
        "a loaded run's state reads back as another state\nloaded: {text}\nread back: {}",
        again.to_json()
    );
    // The same run, with pending rows for its waiting calls, recovered and resumed.
    run.pending = pending_rows(&stored.state, stored.version, h0 & 16 != 0);
    let durable =
        Runs::without_queue(Arc::new(Served { run, refuse_writes })).attach(agent(model(h3)));
    let rt = runtime();
    let _ = rt.block_on(durable.recover(RUN_ID).into_future());
    let _ = rt.block_on(
        durable
            .resume(RUN_ID)
            .decisions(fitting(&stored.state))
            .at(stored.version)
            .by("ops")
            .into_future(),
    );
    let _ = rt.block_on(durable.resume(RUN_ID).into_future());
}
