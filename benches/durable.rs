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
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use phaseo_agent::serde_json::{self, json};
use phaseo_agent::store::{MemoryStore, PostgresStore, Runs, SqliteStore};
use phaseo_agent::{Agent, ModelResponse, RunState, Tool, ToolCall};

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
    let mut turns: Vec<ModelResponse> = (0..steps)
        .map(|i| {
            ModelResponse::tool_calls([ToolCall::new(
                format!("call_{i}"),
                "lookup",
                json!({"query": text(i)}),
            )])
        })
        .collect();
    if pause {
        turns.push(ModelResponse::tool_calls([ToolCall::new(
            "send",
            "send_email",
            json!({"to": "ops@example.com", "body": text(99)}),
        )]));
    } else {
        turns.push(ModelResponse::text(text(100)));
    }
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
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
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
    growth(&rt, &url);
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
