//! A process that runs a durable agent on a store, for the crash and race tests
//! (`tests/it/durable_processes.rs`): they start it, kill it with SIGKILL at a journal boundary,
//! and start it again to recover, or start eight at once to resume one run.
//!
//! ```text
//! durable_child STORE EFFECTS COMMAND RUN_ID [VERSION]
//!   STORE    sqlite:PATH, sqlite-not-power-safe:PATH or postgres:URL
//!   EFFECTS  a file each run of a tool's code appends one line to: "RUN_ID CALL_ID KEY"
//!   COMMAND  start    start run RUN_ID (the model: two calls, notify and sync (idempotent), then
//!                     a gated deploy, then an answer), then drive it
//!            drive    take RUN_ID to its end: recover it while it is running, decide what a person
//!                     would while it waits (approve; an in-doubt call's output supplied)
//!            pause    start RUN_ID, stop at its pause, print `version V` (for the race)
//!            resume   resume RUN_ID at VERSION, approving its calls
//! ```
//!
//! `PHASEO_CRASH_AT=before:N` or `after:N` stops the process right before or right after the
//! store's Nth write (the first is 1): it prints `crash-point N` on stdout and waits there to be
//! killed. Exit codes: 0 done, 3 refused (a lost race), 4 no such run, 1 anything else.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, LoadedRun, NewRun, Page, PendingFilter, PendingRow,
    PostgresStore, RunFilter, RunStore, RunSummary, Runs, SqliteStore, StoredStatus,
};
use phaseo_agent::{
    Agent, AgentError, Decisions, Message, Model, ModelError, ModelRequest, ModelResponse,
    PendingKind, StoreError, Tool, ToolCall,
};

/// Where to stop: before or after the store's Nth write.
#[derive(Clone, Copy)]
enum CrashAt {
    Before(usize),
    After(usize),
}

/// A store that counts its writes and stops the process at the crash point.
struct Counting {
    inner: Arc<dyn RunStore>,
    writes: AtomicUsize,
    crash: Option<CrashAt>,
}

impl Counting {
    fn stop_here() -> ! {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "crash-point");
        let _ = out.flush();
        // Wait to be killed: SIGKILL, here, with this write done or not.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }

    fn write<'a, T: Send + 'a>(
        &'a self,
        write: BoxFuture<'a, Result<T, StoreError>>,
    ) -> BoxFuture<'a, Result<T, StoreError>> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        let crash = self.crash;
        Box::pin(async move {
            if matches!(crash, Some(CrashAt::Before(at)) if at == n) {
                Self::stop_here();
            }
            let result = write.await;
            if result.is_ok() && matches!(crash, Some(CrashAt::After(at)) if at == n) {
                Self::stop_here();
            }
            result
        })
    }
}

impl RunStore for Counting {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(self.inner.create(run))
    }
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(self.inner.append(append))
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

/// Answers by where the conversation is, as a real model asked the same conversation again.
struct ByPosition(Vec<ModelResponse>);

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
            .unwrap_or_else(|| ModelResponse::text("?"));
        Box::pin(async move { Ok(answer) })
    }
}

/// A tool whose every run appends "RUN_ID CALL_ID KEY" to the effects file (one write of one
/// line, in append mode: lines from racing processes do not interleave).
fn effect_tool(name: &str, effects: &str) -> Tool {
    let path = effects.to_owned();
    Tool::new(
        name,
        "Has a side effect",
        json!({"type": "object"}),
        move |_, ctx| {
            let line = format!(
                "{} {} {}\n",
                ctx.run_id(),
                ctx.tool_call().id,
                ctx.idempotency_key()
            );
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(AgentError::tool)?;
            file.write_all(line.as_bytes()).map_err(AgentError::tool)?;
            file.sync_data().map_err(AgentError::tool)?;
            Ok(json!({"done": true}))
        },
    )
}

fn agent(effects: &str) -> Agent {
    let model = ByPosition(vec![
        ModelResponse::tool_calls([
            ToolCall::new("call_1", "notify", json!({"to": "ops"})),
            ToolCall::new("call_2", "sync", json!({"repo": "web"})),
        ]),
        ModelResponse::tool_calls([ToolCall::new("call_3", "deploy", json!({"env": "staging"}))]),
        ModelResponse::text("All done."),
    ]);
    Agent::builder("release")
        .model(model)
        .tool(effect_tool("deploy", effects).require_approval())
        .tool(effect_tool("notify", effects))
        .tool(effect_tool("sync", effects).idempotent(true))
        .build()
        .expect("the agent builds")
}

async fn open(store: &str) -> Result<Arc<dyn RunStore>, AgentError> {
    if let Some(path) = store.strip_prefix("sqlite:") {
        return Ok(Arc::new(SqliteStore::open(path).await?));
    }
    if let Some(path) = store.strip_prefix("sqlite-not-power-safe:") {
        let store = SqliteStore::builder(path).power_safe(false).open().await?;
        return Ok(Arc::new(store));
    }
    if let Some(url) = store.strip_prefix("postgres:") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    Err(AgentError::InvalidAgent(format!("unknown store {store}")))
}

fn decisions_for(run_id: &str, pending: &[phaseo_agent::PendingCall]) -> Decisions {
    let mut decisions = Decisions::for_run(run_id);
    for p in pending {
        decisions = match p.kind {
            PendingKind::OutcomeUnknown => {
                decisions.output(&p.call.id, json!({"done": "before the crash"}))
            }
            _ => decisions.approve(&p.call.id),
        };
    }
    decisions
}

async fn main_async(args: Vec<String>) -> Result<(), AgentError> {
    let [store, effects, command, run_id, rest @ ..] = args.as_slice() else {
        return Err(AgentError::InvalidAgent(
            "usage: durable_child STORE EFFECTS COMMAND RUN_ID [VERSION]".into(),
        ));
    };
    let crash = std::env::var("PHASEO_CRASH_AT").ok().and_then(|at| {
        let (when, n) = at.split_once(':')?;
        let n = n.parse().ok()?;
        match when {
            "before" => Some(CrashAt::Before(n)),
            "after" => Some(CrashAt::After(n)),
            _ => None,
        }
    });
    let store = Counting {
        inner: open(store).await?,
        writes: AtomicUsize::new(0),
        crash,
    };
    let runs = Runs::new(store).snapshot_every(3);
    let durable = runs.attach(agent(effects));
    match command.as_str() {
        "pause" => {
            durable.run("Ship it").run_id(run_id).await?;
            println!("version {}", runs.load(run_id).await?.version);
        }
        "start" | "drive" => {
            if command == "start" {
                durable.run("Ship it").run_id(run_id).await?;
            }
            for _ in 0..20 {
                let stored = runs.load(run_id).await?;
                let result = match stored.status {
                    StoredStatus::Running => durable.recover(run_id).await,
                    StoredStatus::Paused | StoredStatus::InDoubt => {
                        let decisions = decisions_for(run_id, stored.state.pending());
                        durable
                            .resume(run_id, stored.version, decisions, "ops")
                            .await
                    }
                    StoredStatus::Completed => return Ok(()),
                    StoredStatus::Failed => {
                        return Err(AgentError::InvalidState("the run failed".into()));
                    }
                };
                result?;
            }
            return Err(AgentError::InvalidState("the run never ended".into()));
        }
        "resume" => {
            let version: u64 = rest
                .first()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| AgentError::InvalidAgent("resume needs a VERSION".into()))?;
            let stored = runs.load(run_id).await?;
            let decisions = decisions_for(run_id, stored.state.pending());
            durable.resume(run_id, version, decisions, "racer").await?;
        }
        other => return Err(AgentError::InvalidAgent(format!("unknown command {other}"))),
    }
    Ok(())
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match block_on(main_async(args)) {
        Ok(()) => {}
        Err(AgentError::Store(StoreError::Conflict { .. } | StoreError::WrongStatus { .. })) => {
            std::process::exit(3)
        }
        Err(AgentError::Store(StoreError::NotFound { .. })) => std::process::exit(4),
        Err(error) => {
            eprintln!("durable_child: {error}");
            std::process::exit(1)
        }
    }
}
