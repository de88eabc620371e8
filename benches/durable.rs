//! Durable runs: what a run store costs.
//!
//! - `sqlite_run`: a 20-call run without a store, on `MemoryStore` (the journal's own work), and
//!   on `SqliteStore` (synchronous FULL: every entry on disk before the next step);
//! - `postgres_save_load` (with `PHASEO_BENCH_POSTGRES_URL`): a paused 20-message run saved as a
//!   new run and loaded back, one client, against the same cluster's floor
//!   (`benches/durable/pgbench_floor.sh`) and LangGraph's checkpointer
//!   (`benches/durable/langgraph.sh`), measured in the same session;
//! - then, printed: the same with 4 runs at once (runs per second), and the bytes PostgreSQL holds
//!   after 10, 100 and 1,000 steps of one conversation.
//!
//! `cargo bench -p phaseo-agent-tests --bench durable`; see benches/durable/README.md.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use criterion::{Criterion, criterion_group, criterion_main};
use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::{self, json};
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, LoadedRun, MemoryStore, NewRun, Page, PendingFilter,
    PendingRow, PostgresStore, RunFilter, RunStore, RunSummary, SqliteStore,
};
use phaseo_agent::{
    Agent, AgentError, Decisions, ModelResponse, RunState, StoreError, Tool, ToolCall,
};

// Shared with the durable tests; not every item is used here.
#[allow(dead_code)]
#[path = "../tests/support/durable.rs"]
mod durable;

use durable::ByPosition;

/// About 200 bytes of text, as in the checkpointer baseline.
fn text(i: usize) -> String {
    format!("Step {i}: ")
        .chars()
        .chain(
            "the quick brown fox jumps over the lazy dog; "
                .chars()
                .cycle(),
        )
        .take(200)
        .collect()
}

/// `steps` turns of one lookup call each, then an answer (or a gated call, when `pause`).
fn agent(steps: usize, pause: bool) -> Agent {
    let mut turns: Vec<ModelResponse> = (0..steps).map(lookup_turn).collect();
    turns.push(if pause {
        send_turn()
    } else {
        ModelResponse::text(text(100))
    });
    scripted(turns)
}

/// Turn `i`: one lookup call.
fn lookup_turn(i: usize) -> ModelResponse {
    ModelResponse::tool_calls([ToolCall::new(
        format!("call_{i}"),
        "lookup",
        json!({"query": text(i)}),
    )])
}

/// The gated call a run pauses on.
fn send_turn() -> ModelResponse {
    ModelResponse::tool_calls([ToolCall::new(
        "send",
        "send_email",
        json!({"to": "ops@example.com", "body": text(99)}),
    )])
}

/// The bench's agent answering `turns` by position, with its two tools: `lookup`, and
/// `send_email`, which waits for approval.
fn scripted(turns: Vec<ModelResponse>) -> Agent {
    let lookup = Tool::new(
        "lookup",
        "Look something up",
        json!({"type": "object"}),
        |input, _| Ok(json!({"found": input["query"]})),
    );
    let send = Tool::new(
        "send_email",
        "Send an email",
        json!({"type": "object"}),
        |v, _| Ok(v),
    )
    .require_approval();
    Agent::builder("bench")
        .model(ByPosition(turns))
        .tool(lookup)
        .tool(send)
        .max_turns(10_000)
        .build()
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("phaseo-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sqlite_run(c: &mut Criterion) {
    let rt = runtime();
    let plain = agent(20, false);
    let dir = scratch("sqlite");
    let sqlite = rt.block_on(SqliteStore::open(dir.join("runs.db"))).unwrap();
    let on_sqlite = Runs::new(sqlite).attach(agent(20, false));
    let on_memory = Runs::new(MemoryStore::new()).attach(agent(20, false));
    let normal = rt
        .block_on(
            SqliteStore::builder(dir.join("normal.db"))
                .power_safe(false)
                .open(),
        )
        .unwrap();
    let on_normal = Runs::new(normal).attach(agent(20, false));
    let mut group = c.benchmark_group("sqlite_run");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(15));
    group.bench_function("20 calls, no store", |b| {
        b.iter(|| rt.block_on(plain.run("Go").into_future()).unwrap())
    });
    group.bench_function("20 calls, MemoryStore", |b| {
        b.iter(|| rt.block_on(on_memory.run("Go").into_future()).unwrap())
    });
    group.bench_function("20 calls, SqliteStore", |b| {
        b.iter(|| rt.block_on(on_sqlite.run("Go").into_future()).unwrap())
    });
    group.bench_function("20 calls, SqliteStore, not power-safe", |b| {
        b.iter(|| rt.block_on(on_normal.run("Go").into_future()).unwrap())
    });
    // The floor: the commits such a run makes (one per journal entry: started, 20 times a turn,
    // a call started and a call finished, and the end), each one row of 300 bytes, through the
    // same driver with the same settings, and nothing else.
    let commits = 62;
    let floor = rt.block_on(sqlite_floor_pool(&dir.join("floor.db"), true));
    let floor_normal = rt.block_on(sqlite_floor_pool(&dir.join("floor-normal.db"), false));
    group.bench_function("floor: 62 one-row commits", |b| {
        b.iter(|| rt.block_on(sqlite_commits(&floor, commits)))
    });
    group.bench_function("floor: 62 one-row commits, not power-safe", |b| {
        b.iter(|| rt.block_on(sqlite_commits(&floor_normal, commits)))
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

async fn sqlite_floor_pool(path: &std::path::Path, power_safe: bool) -> sqlx::SqlitePool {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(if power_safe {
            SqliteSynchronous::Full
        } else {
            SqliteSynchronous::Normal
        });
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    sqlx::query("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

/// `n` transactions of one 300-byte row each, as the store writes them (`BEGIN IMMEDIATE`).
async fn sqlite_commits(pool: &sqlx::SqlitePool, n: usize) {
    let body = "x".repeat(300);
    for _ in 0..n {
        let mut conn = pool.acquire().await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO floor (body) VALUES (?)")
            .bind(&body)
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("COMMIT").execute(&mut *conn).await.unwrap();
    }
}

/// A paused run of 20 messages (user, 9 lookups with their results, the gated call).
fn paused_state(rt: &tokio::runtime::Runtime) -> RunState {
    let paused = rt.block_on(agent(9, true).run("Go").into_future()).unwrap();
    assert!(paused.is_paused());
    assert_eq!(paused.state.messages().len(), 20);
    paused.state
}

/// The state with another run id (a new run each time, as the baseline's threads mode does).
fn renamed(state: &RunState, run_id: &str) -> RunState {
    let mut value = serde_json::to_value(state).unwrap();
    value["run_id"] = json!(run_id);
    RunState::from_json(&value.to_string()).unwrap()
}

fn postgres_url() -> Option<String> {
    std::env::var("PHASEO_BENCH_POSTGRES_URL").ok()
}

async fn postgres(url: &str, pool: u32) -> PostgresStore {
    PostgresStore::builder(url)
        .pool_size(pool)
        .connect()
        .await
        .unwrap()
}

fn postgres_save_load(c: &mut Criterion) {
    let Some(url) = postgres_url() else {
        eprintln!("postgres_save_load: PHASEO_BENCH_POSTGRES_URL is not set; not measured");
        return;
    };
    let rt = runtime();
    let state = paused_state(&rt);
    println!(
        "paused state: {} messages, {} bytes as JSON",
        state.messages().len(),
        state.to_json().len()
    );
    let runs = Runs::new(rt.block_on(postgres(&url, 4)));
    let mut n = 0u64;
    let mut group = c.benchmark_group("postgres_save_load");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("save + load, paused 20 messages", |b| {
        b.iter_custom(|iters| {
            let states: Vec<RunState> = (0..iters)
                .map(|_| {
                    n += 1;
                    renamed(&state, &format!("bench_{}_{n}", std::process::id()))
                })
                .collect();
            rt.block_on(async {
                let start = Instant::now();
                for state in &states {
                    runs.save(state).await.unwrap();
                    let loaded = runs.load(state.run_id()).await.unwrap();
                    assert_eq!(loaded.state.messages().len(), 20);
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    throughput(&rt, &url, &state);
    steps(&rt, &url, &state);
    growth(&rt, &url);
}

/// A store that loads the run back after every append (through [`Runs::load`]: checksums checked,
/// journal replayed) and adds the time of both to a total: one journaled step written and read,
/// as a checkpointer's `put` then `get`.
struct StepTimer {
    inner: Arc<dyn RunStore>,
    runs: Runs,
    /// Time spent in appends and their loads, and how many.
    total: Mutex<(Duration, u64)>,
}

impl StepTimer {
    fn new(inner: Arc<dyn RunStore>) -> Self {
        StepTimer {
            runs: Runs::without_queue(inner.clone()),
            inner,
            total: Mutex::new((Duration::ZERO, 0)),
        }
    }

    fn take(&self) -> (Duration, u64) {
        std::mem::take(&mut *self.total.lock().unwrap())
    }
}

impl RunStore for StepTimer {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.create(run)
    }

    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let run_id = append.run_id.clone();
            let started = Instant::now();
            self.inner.append(append).await?;
            match self.runs.load(&run_id).await {
                Ok(_) => {}
                Err(AgentError::Store(e)) => return Err(e),
                Err(other) => panic!("load: {other}"),
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

/// The agent of [`steps`]: the paused run's nine lookups and gated call at the same positions,
/// then ten more lookups and an answer.
fn stepping_agent() -> Agent {
    let turns = (0..20)
        .map(|i| if i == 9 { send_turn() } else { lookup_turn(i) })
        .chain([ModelResponse::text(text(100))])
        .collect();
    scripted(turns)
}

/// Journaled steps, each written and loaded back: the paused 20-message run stored, then resumed
/// by a `DurableAgent` with its approval and run on for ten more tool-call turns (20 to 42
/// messages; about 34 journal entries, each an append and a load). One client gives the time of
/// one step (write + load, as LangGraph's put + get); 1 and 4 runs at once give steps per second,
/// over the whole wall time (the runs' own work included).
fn steps(rt: &tokio::runtime::Runtime, url: &str, state: &RunState) {
    let in_memory = |_: u32| -> Arc<dyn RunStore> { Arc::new(MemoryStore::new()) };
    let on_postgres =
        |pool: u32| -> Arc<dyn RunStore> { Arc::new(rt.block_on(postgres(url, pool))) };
    // MemoryStore first: the journal's own work, without a database.
    steps_on(rt, "MemoryStore", &in_memory, &[1], state);
    steps_on(rt, "postgres", &on_postgres, &[1, 4], state);
}

fn steps_on(
    rt: &tokio::runtime::Runtime,
    label: &str,
    store: &dyn Fn(u32) -> Arc<dyn RunStore>,
    clients_list: &[usize],
    state: &RunState,
) {
    for &clients in clients_list {
        let timer = Arc::new(StepTimer::new(store(clients as u32)));
        let store: Arc<dyn RunStore> = timer.clone();
        let durable = Runs::without_queue(store).attach(stepping_agent());
        let per_client = if clients == 1 { 120 } else { 60 };
        let prepare = |c: usize, i: usize| {
            renamed(
                state,
                &format!("step_{}_{clients}_{c}_{i}", std::process::id()),
            )
        };
        // One round outside the clock: connections open, statements prepared.
        rt.block_on(async {
            let warm = prepare(99, 0);
            let version = durable.runs().save(&warm).await.unwrap();
            durable
                .resume(
                    warm.run_id(),
                    version,
                    Decisions::new().approve("send"),
                    "bench",
                )
                .await
                .unwrap();
        });
        timer.take();
        let elapsed = rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|c| {
                    let durable = durable.clone();
                    let states: Vec<RunState> = (0..per_client).map(|i| prepare(c, i)).collect();
                    tokio::spawn(async move {
                        for state in &states {
                            let version = durable.runs().save(state).await.unwrap();
                            let done = durable
                                .resume(
                                    state.run_id(),
                                    version,
                                    Decisions::new().approve("send"),
                                    "bench",
                                )
                                .await
                                .unwrap();
                            assert_eq!(done.output(), Some(text(100).as_str()));
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            start.elapsed()
        });
        let (timed, count) = timer.take();
        println!(
            "{label} journaled step (append + load), {clients} at once: {count} steps, {:.3} ms each in the store, {:.0} steps per second over the wall time",
            timed.as_secs_f64() * 1000.0 / count as f64,
            count as f64 / elapsed.as_secs_f64()
        );
    }
}

/// Save + load with `clients` runs at once, each on its own connection: runs per second.
fn throughput(rt: &tokio::runtime::Runtime, url: &str, state: &RunState) {
    for clients in [1usize, 4] {
        let runs = Runs::new(rt.block_on(postgres(url, clients as u32)));
        let per_client = 1_000;
        let elapsed = rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|c| {
                    let runs = runs.clone();
                    let states: Vec<RunState> = (0..per_client)
                        .map(|i| {
                            renamed(
                                state,
                                &format!("tp_{}_{clients}_{c}_{i}", std::process::id()),
                            )
                        })
                        .collect();
                    tokio::spawn(async move {
                        for state in &states {
                            runs.save(state).await.unwrap();
                            runs.load(state.run_id()).await.unwrap();
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            start.elapsed()
        });
        let total = (clients * per_client) as f64;
        println!(
            "postgres save + load, {clients} at once: {:.0} per second ({:.3} ms each per client)",
            total / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1000.0 * clients as f64 / total
        );
    }
}

/// Bytes PostgreSQL holds for one conversation after `steps` tool-call steps, each step one
/// assistant call and one result of about 200 bytes.
fn growth(rt: &tokio::runtime::Runtime, url: &str) {
    rt.block_on(async {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        for steps in [10usize, 100, 1000] {
            sqlx::query("TRUNCATE phaseo_runs, phaseo_journal, phaseo_pending, phaseo_audit")
                .execute(&pool)
                .await
                .unwrap();
            let empty = size(&pool).await;
            let runs = Runs::new(postgres(url, 2).await);
            let started = Instant::now();
            let done = runs.attach(agent(steps, false)).run("Go").await.unwrap();
            let took = started.elapsed();
            let conversation: usize = done.state.to_json().len();
            let stored = size(&pool).await - empty;
            let load_started = Instant::now();
            runs.load(done.state.run_id()).await.unwrap();
            let load = load_started.elapsed();
            println!(
                "after {steps} steps: {stored} bytes stored ({:.1} KB per step), conversation {conversation} bytes as JSON, run {:.1} ms, load {:.2} ms",
                stored as f64 / steps as f64 / 1024.0,
                took.as_secs_f64() * 1000.0,
                load.as_secs_f64() * 1000.0
            );
        }
    });
}

async fn size(pool: &sqlx::PgPool) -> i64 {
    let (bytes,): (i64,) = sqlx::query_as(
        "SELECT (pg_total_relation_size('phaseo_runs') + pg_total_relation_size('phaseo_journal') \
         + pg_total_relation_size('phaseo_pending') + pg_total_relation_size('phaseo_audit'))::bigint",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    bytes
}

criterion_group!(benches, sqlite_run, postgres_save_load);
criterion_main!(benches);
