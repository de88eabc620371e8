//! A worker process, or the person approving its runs, on PostgreSQL, for the crash tests of
//! workers (`tests/it/interop/workers.rs`): they start four workers, kill one with SIGKILL every
//! second and start it again, stop one with SIGSTOP past its lease, and count what happened in
//! files outside the processes.
//!
//! ```text
//! worker_child work URL DIR NAME CONCURRENCY LEASE_MS [TOOL_MS [RENEW_DELAY_MS]]
//!     serve the agent `crash` (below) with a `Worker` of that name, concurrency and lease; each
//!     tool sleeps TOOL_MS after its side effect (20 to 50 ms, drawn per call, without it); each
//!     lease renewal waits RENEW_DELAY_MS before it reaches the database (a slow link: a worker
//!     woken from SIGSTOP then tries its journal write before it learns its lease is gone)
//! worker_child approve URL DIR
//!     decide every waiting call, as a person would: approve a gated call; for a call whose
//!     outcome a crash left unknown, supply its output if its side effect is in DIR/effects (so
//!     that it does not happen twice), else run it again (`Decision::RerunAfterDoubt`: checked,
//!     it did not happen)
//! ```
//!
//! The agent `crash`: its model's first turn calls `charge` (not idempotent) and `sync`
//! (idempotent), run at once, its second `deploy` (gated), its third answers. Files in DIR, each line written
//! with one `write` in append mode (lines from racing processes never interleave, and a killed
//! process leaves whole lines):
//!
//! - `effects`: one line per run of a tool's code, "RUN_ID CALL_ID TOOL KEY PID";
//! - `writes.PID`: one line per journal write the store accepted, "PID RUN_ID VERSION" (the
//!   run's version after it);
//! - `refused.PID`: one line per journal write refused, "PID RUN_ID EXPECTED_VERSION ERROR";
//! - `claims.PID`: one line per run claimed, "RUN_ID TOKEN STATUS WAITED_MS";
//! - `listening.PID`: made once the worker listens for ready runs;
//! - `decisions`: the approver's, "RUN_ID CALL_ID KIND DECISION".
//!
//! Both modes exit when their standard input closes (the test process ended, however it ended).

use std::fs::File;
use std::future::Future;
use std::hash::BuildHasher;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{
    Append, AuditFilter, ClaimRequest, Claimed, DecisionRow, Lease, LoadedRun, NewRun, Page,
    PendingFilter, PendingRow, PostgresStore, QueueCounts, RunFilter, RunQueue, RunStore,
    RunSummary, Wakeups,
};
use phaseo_agent::worker::Worker;
use phaseo_agent::{Agent, AgentError, Decision, ModelResponse, StoreError, Tool, ToolCall};

// Shared with the tests and the durable bench; not every item is used here.
#[allow(dead_code)]
#[path = "../support/durable.rs"]
mod durable;

use durable::ByPosition;

/// A file opened for appending; each line is one `write`.
struct Log(File);

impl Log {
    fn open(path: &Path) -> std::io::Result<Log> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Log(file))
    }

    fn line(&self, line: String) {
        // One write of the whole line: O_APPEND puts it at the end at once.
        let _ = (&self.0).write_all(format!("{line}\n").as_bytes());
    }
}

/// The store, forwarding every method (the queue's too: their defaults refuse) and logging each
/// journal write, accepted or refused, and each claim.
struct Logged {
    inner: Arc<dyn RunQueue>,
    pid: u32,
    writes: Log,
    refused: Log,
    claims: Log,
    listening: PathBuf,
    renew_delay: Duration,
}

impl RunStore for Logged {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.create(run)
    }
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let run_id = append.run_id.clone();
            let expected = append.expected_version;
            let version = expected + append.rows.len() as u64;
            match self.inner.append(append).await {
                Ok(()) => {
                    self.writes.line(format!("{} {run_id} {version}", self.pid));
                    Ok(())
                }
                Err(error) => {
                    let name = match &error {
                        StoreError::LeaseLost { .. } => "lease_lost".to_owned(),
                        StoreError::Conflict { .. } => "conflict".to_owned(),
                        other => format!("{other:?}").replace(['\n', ' '], "_"),
                    };
                    self.refused
                        .line(format!("{} {run_id} {expected} {name}", self.pid));
                    Err(error)
                }
            }
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
    fn renew<'a>(
        &'a self,
        lease: &'a Lease,
        lease_ms: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            tokio::time::sleep(self.renew_delay).await;
            self.inner.renew(lease, lease_ms).await
        })
    }
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release(lease)
    }
}

impl RunQueue for Logged {
    fn enqueue(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.enqueue(run)
    }

    fn claim<'a>(
        &'a self,
        request: &'a ClaimRequest,
    ) -> BoxFuture<'a, Result<Claimed, StoreError>> {
        Box::pin(async move {
            let claimed = self.inner.claim(request).await?;
            for lease in &claimed.leases {
                self.claims.line(format!(
                    "{} {} {} {}",
                    lease.run_id,
                    lease.token,
                    lease.status.as_str(),
                    lease.waited_ms
                ));
            }
            Ok(claimed)
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Result<Wakeups, StoreError>> {
        Box::pin(async move {
            let stream = self.inner.wakeups().await?;
            let _ = File::create(&self.listening);
            Ok(stream)
        })
    }

    fn queue_counts(&self) -> BoxFuture<'_, Result<Vec<QueueCounts>, StoreError>> {
        self.inner.queue_counts()
    }
}

/// How long a call's tool sleeps after its side effect: `fixed`, or 20 to 50 ms drawn per call.
fn pause(fixed: Option<u64>) -> Duration {
    let ms = fixed.unwrap_or_else(|| {
        let draw =
            std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
        20 + draw % 31
    });
    Duration::from_millis(ms)
}

/// A tool whose every run appends "RUN_ID CALL_ID TOOL KEY PID" to the effects file, then sleeps
/// (so that a kill lands in the middle of a call now and then).
fn effect_tool(name: &str, effects: &Arc<Log>, tool_ms: Option<u64>) -> Tool {
    let effects = effects.clone();
    let tool = name.to_owned();
    Tool::new(
        name,
        "Has a side effect",
        json!({"type": "object"}),
        move |_, ctx| {
            let effects = effects.clone();
            let tool = tool.clone();
            async move {
                effects.line(format!(
                    "{} {} {tool} {} {}",
                    ctx.run_id(),
                    ctx.tool_call().id,
                    ctx.idempotency_key(),
                    std::process::id()
                ));
                tokio::time::sleep(pause(tool_ms)).await;
                Ok(json!({"done": true}))
            }
        },
    )
}

fn agent(effects: &Arc<Log>, tool_ms: Option<u64>) -> Agent {
    let model = ByPosition(vec![
        ModelResponse::tool_calls([
            ToolCall::new("call_1", "charge", json!({"cents": 500})),
            ToolCall::new("call_2", "sync", json!({"repo": "web"})),
        ]),
        ModelResponse::tool_calls([ToolCall::new("call_3", "deploy", json!({"env": "staging"}))]),
        ModelResponse::text("All done."),
    ]);
    Agent::builder("crash")
        .model(model)
        .tool(effect_tool("charge", effects, tool_ms))
        .tool(effect_tool("sync", effects, tool_ms).idempotent(true))
        .tool(effect_tool("deploy", effects, tool_ms).require_approval())
        // The first turn's two calls at once: a kill often finds both under way.
        .tool_concurrency(2)
        .build()
        .expect("the agent builds")
}

fn invalid(message: impl Into<String>) -> AgentError {
    AgentError::InvalidAgent(message.into())
}

fn io(error: std::io::Error) -> AgentError {
    AgentError::InvalidState(error.to_string())
}

async fn work(url: &str, dir: &Path, rest: &[String]) -> Result<(), AgentError> {
    let [name, concurrency, lease_ms, slow @ ..] = rest else {
        return Err(invalid(
            "work needs NAME CONCURRENCY LEASE_MS [TOOL_MS [RENEW_DELAY_MS]]",
        ));
    };
    let number = |text: &str| {
        text.parse::<u64>()
            .map_err(|_| invalid(format!("not a number: {text}")))
    };
    let concurrency = number(concurrency)?;
    let lease = Duration::from_millis(number(lease_ms)?);
    let tool_ms = slow.first().map(|ms| number(ms)).transpose()?;
    let renew_delay = Duration::from_millis(slow.get(1).map_or(Ok(0), |ms| number(ms))?);
    let pid = std::process::id();
    let store = PostgresStore::connect(url).await?;
    let logged = Logged {
        inner: Arc::new(store),
        pid,
        writes: Log::open(&dir.join(format!("writes.{pid}"))).map_err(io)?,
        refused: Log::open(&dir.join(format!("refused.{pid}"))).map_err(io)?,
        claims: Log::open(&dir.join(format!("claims.{pid}"))).map_err(io)?,
        listening: dir.join(format!("listening.{pid}")),
        renew_delay,
    };
    let effects = Arc::new(Log::open(&dir.join("effects")).map_err(io)?);
    Worker::new(Runs::new(logged))
        .agent(agent(&effects, tool_ms))
        .concurrency(usize::try_from(concurrency).unwrap_or(usize::MAX))
        .lease(lease)
        .name(name.clone())
        .run()
        .await
}

/// Whether the effects file records a run of `call_id`'s code in `run_id`.
fn happened(effects: &Path, run_id: &str, call_id: &str) -> bool {
    let text = std::fs::read_to_string(effects).unwrap_or_default();
    text.lines().any(|line| {
        let mut parts = line.split(' ');
        parts.next() == Some(run_id) && parts.next() == Some(call_id)
    })
}

async fn approve(url: &str, dir: &Path) -> Result<(), AgentError> {
    let runs = Runs::new(PostgresStore::connect(url).await?);
    let log = Log::open(&dir.join("decisions")).map_err(io)?;
    let effects = dir.join("effects");
    let filter = PendingFilter {
        undecided_only: true,
        limit: 1_000,
        ..PendingFilter::default()
    };
    loop {
        let waiting = match runs.pending(&filter).await {
            Ok(page) => page.items,
            Err(error) => {
                eprintln!("worker_child approve: listing: {error}");
                Vec::new()
            }
        };
        for row in &waiting {
            let (decision, name) = match row.kind.as_str() {
                "tool_approval" => (Decision::Approve, "approve"),
                // Read after the call went in doubt: its worker is gone (its lease expired and
                // another worker took the run), so the file says all it will ever say of it.
                "outcome_unknown" if happened(&effects, &row.run_id, &row.call_id) => (
                    Decision::Output {
                        output: json!({"done": "before the crash"}),
                    },
                    "output",
                ),
                "outcome_unknown" => (Decision::RerunAfterDoubt, "rerun_after_doubt"),
                other => {
                    eprintln!("worker_child approve: a call waits as {other}");
                    continue;
                }
            };
            match runs.decide(row, decision, "approver").await {
                Ok(_) => log.line(format!(
                    "{} {} {} {name}",
                    row.run_id, row.call_id, row.kind
                )),
                Err(error) => eprintln!("worker_child approve: {}: {error}", row.run_id),
            }
        }
        if waiting.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn main_async(args: Vec<String>) -> Result<(), AgentError> {
    let [mode, url, dir, rest @ ..] = args.as_slice() else {
        return Err(invalid(
            "usage: worker_child work URL DIR NAME CONCURRENCY LEASE_MS [TOOL_MS [RENEW_DELAY_MS]] \
             | approve URL DIR",
        ));
    };
    let dir = Path::new(dir);
    match mode.as_str() {
        "work" => work(url, dir, rest).await,
        "approve" => approve(url, dir).await,
        other => Err(invalid(format!("unknown mode {other}"))),
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

fn main() {
    // The test process holds the other end of standard input: when it ends, so does this one.
    std::thread::spawn(|| {
        let mut sink = [0_u8; 64];
        while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(error) = block_on(main_async(args)) {
        eprintln!("worker_child: {error}");
        std::process::exit(1);
    }
}
