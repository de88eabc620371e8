//! The `workers` example in several processes against a real PostgreSQL (two `work`, one
//! `enqueue`, one `approve`), and the workers' latency from enqueue to a run's start, measured the
//! way `interop/graphile.sh` measures graphile-worker's (one worker at concurrency 1, one run
//! queued at a time, each once the worker is idle again).
//!
//! Run by `interop/run.sh` (`--ignored`); without `PHASEO_INTEROP_POSTGRES_URL` the tests fail,
//! never pass.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::serde_json::{self, Value};
use phaseo_agent::store::{
    Append, AuditFilter, ClaimRequest, Claimed, DecisionRow, Lease, LoadedRun, NewRun, Page,
    PendingFilter, PendingRow, PostgresStore, QueueCounts, RunFilter, RunQueue, RunStore,
    RunSummary, StoredStatus, Wakeups,
};
use phaseo_agent::worker::Worker;
use phaseo_agent::{Agent, Model, ModelError, ModelRequest, ModelResponse, StoreError};
use tokio::process::{Child, Command};

use super::postgres::in_fresh_database;

/// Builds the example (`--features postgres` of the root package) and returns its executable.
fn example_binary() -> PathBuf {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(root)
        .args([
            "build",
            "-q",
            "--example",
            "workers",
            "--features",
            "postgres",
            "--message-format=json",
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo build --example workers --features postgres failed"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "workers")
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the example's executable")
}

fn example(binary: &PathBuf, url: &str, args: &[&str]) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .env("PHASEO_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Waits (up to 120 s) for a child to end; its stdout, and a panic showing both streams if it
/// failed.
async fn finished(name: &str, child: Child) -> String {
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`{name}` did not end within 120 s"))
        .expect("the child is waited for");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "`{name}` failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn the_workers_example_serves_runs_across_processes() {
    in_fresh_database(|url| async move {
        let binary = example_binary();
        // Two workers and the front end open the fresh database at once: one of them makes the
        // tables, the others wait for it.
        let workers = [
            example(&binary, &url, &["work"]).spawn().expect("starts"),
            example(&binary, &url, &["work"]).spawn().expect("starts"),
        ];
        let enqueued = example(&binary, &url, &["enqueue", "12"])
            .spawn()
            .expect("starts");
        let enqueued = finished("enqueue 12", enqueued).await;
        // `enqueued run ID: Please refund order 1001: 30.00 EUR`
        let runs: BTreeMap<String, (u32, u64)> = enqueued
            .lines()
            .filter_map(|line| line.strip_prefix("enqueued run "))
            .map(|rest| {
                let (id, input) = rest.split_once(": ").expect("an id and an input");
                let (_, order) = input.split_once("order ").expect("an order");
                let (order, amount) = order.split_once(": ").expect("an amount");
                let amount = amount
                    .strip_suffix(" EUR")
                    .expect("in EUR")
                    .replace('.', "");
                (
                    id.to_owned(),
                    (order.parse().unwrap(), amount.parse().unwrap()),
                )
            })
            .collect();
        assert_eq!(runs.len(), 12, "{enqueued}");

        let approved = example(&binary, &url, &["approve"])
            .spawn()
            .expect("starts");
        let approved = finished("approve", approved).await;
        assert!(
            approved.contains(
                "queue `refunds`: 0 ready, 0 running, 0 paused, 0 in doubt, 0 failed, 12 completed"
            ),
            "{approved}"
        );
        assert_eq!(approved.matches("approved run ").count(), 8, "{approved}");
        assert_eq!(approved.matches("refused run ").count(), 4, "{approved}");

        // SIGINT: each worker drains (it holds nothing by now) and exits 0.
        let mut printed = String::new();
        for (i, worker) in workers.into_iter().enumerate() {
            let pid = worker.id().expect("running").to_string();
            let sent = std::process::Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .expect("kill runs");
            assert!(sent.success(), "SIGINT sent to worker {pid}");
            let out = finished(&format!("work #{i}"), worker).await;
            assert!(out.contains(&format!("worker {pid} stopped")), "{out}");
            printed.push_str(&out);
        }
        // Each approved refund ran once, in one of the two processes; a refused one never ran.
        let store = PostgresStore::connect(&url).await.expect("connects");
        let stored = Runs::new(store.clone());
        for (id, (order, cents)) in &runs {
            let ran = printed.matches(&format!("refunded order {order} ")).count();
            let run = stored.load(id).await.expect("the run loads");
            assert_eq!(run.status, StoredStatus::Completed, "run {id}");
            let output = run.state.output().unwrap_or_default().to_owned();
            if *cents <= 10_000 {
                assert_eq!(ran, 1, "order {order}: {printed}");
                assert_eq!(output, format!("Refunded order {order}."));
            } else {
                assert_eq!(ran, 0, "order {order}: {printed}");
                assert!(output.starts_with("No refund: "), "{output}");
                assert!(output.contains("over 100 EUR"), "{output}");
            }
        }
        store.close().await;
    })
    .await;
}

// --- Latency -------------------------------------------------------------------------------------

/// A store that stamps the moment its claims return, with what each lease's run waited by the
/// database's clock: the worker's view of "claimed", from the outside.
struct Timed {
    inner: PostgresStore,
    claimed: Arc<Mutex<HashMap<String, (Instant, u64)>>>,
}

impl RunStore for Timed {
    fn create(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.create(run)
    }
    fn append(&self, append: Append) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.append(append)
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
        self.inner.renew(lease, lease_ms)
    }
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release(lease)
    }
}

impl RunQueue for Timed {
    fn enqueue(&self, run: NewRun) -> BoxFuture<'_, Result<(), StoreError>> {
        self.inner.enqueue(run)
    }

    fn claim<'a>(
        &'a self,
        request: &'a ClaimRequest,
    ) -> BoxFuture<'a, Result<Claimed, StoreError>> {
        Box::pin(async move {
            let claimed = self.inner.claim(request).await?;
            let now = Instant::now();
            let mut seen = self.claimed.lock().unwrap();
            for lease in &claimed.leases {
                seen.insert(lease.run_id.clone(), (now, lease.waited_ms));
            }
            Ok(claimed)
        })
    }

    fn wakeups(&self) -> BoxFuture<'_, Result<Wakeups, StoreError>> {
        self.inner.wakeups()
    }

    fn queue_counts(&self) -> BoxFuture<'_, Result<Vec<QueueCounts>, StoreError>> {
        self.inner.queue_counts()
    }
}

/// Stamps the moment of each run's first model request (the first code a run runs, once its
/// worker has claimed it, loaded it and journaled that it took it), and answers at once.
struct Stamp(Arc<Mutex<HashMap<String, Instant>>>);

impl Model for Stamp {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        if request.meta.turn == 0 {
            let now = Instant::now();
            let run_id = request.meta.run_id.to_string();
            self.0.lock().unwrap().entry(run_id).or_insert(now);
        }
        Box::pin(async { Ok(ModelResponse::text("Done.")) })
    }
}

/// avg, p50, p99 and max of milliseconds (nearest rank).
fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let rank = |q: f64| values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
    let avg = values.iter().sum::<f64>() / values.len() as f64;
    format!(
        "avg {avg:.2} ms, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        rank(0.5),
        rank(0.99),
        values[values.len() - 1]
    )
}

/// One line of the figures, written past the test harness's capture of `print!`, so that the
/// suite's log (`target/interop-cargo.log`, which `interop/run.sh`'s last step reads) has it.
fn report(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").ok();
    out.flush().ok();
}

/// One run's moments, and what it waited by the database's clock.
struct Sample {
    called: Instant,
    returned: Instant,
    claimed: Instant,
    started: Instant,
    waited_ms: u64,
}

const WARMUP: usize = 50;
const SAMPLES: usize = 500;
/// The pause after a run completed before the next is queued, so that the worker is idle again
/// (the same as interop/graphile_latency.mjs's).
const SETTLE: Duration = Duration::from_millis(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn workers_latency_from_enqueue_to_a_run_started() {
    in_fresh_database(|url| async move {
        let claimed = Arc::new(Mutex::new(HashMap::new()));
        let started = Arc::new(Mutex::new(HashMap::new()));
        let worker_store = PostgresStore::connect(&url).await.expect("connects");
        let timed = Timed {
            inner: worker_store.clone(),
            claimed: claimed.clone(),
        };
        let agent = Agent::builder("latency")
            .model(Stamp(started.clone()))
            .build()
            .unwrap();
        // A missed announcement would wait for this, and fail the sample's deadline below.
        let worker = Worker::new(Runs::new(timed))
            .agent(agent)
            .concurrency(1)
            .idle_check(Duration::from_secs(60));
        let serving = tokio::spawn(worker.run());
        // The front end: a pool of its own, as another process's would be.
        let front_store = PostgresStore::connect(&url).await.expect("connects");
        let front = Runs::new(front_store.clone());

        let mut samples = Vec::new();
        for i in 0..WARMUP + SAMPLES {
            let id = format!("latency-{i}");
            let called = Instant::now();
            front
                .enqueue("latency", "go", EnqueueOptions::new().run_id(id.clone()))
                .await
                .expect("enqueued");
            let returned = Instant::now();
            let deadline = returned + Duration::from_secs(5);
            let start = loop {
                if let Some(at) = started.lock().unwrap().get(&id) {
                    break *at;
                }
                assert!(
                    Instant::now() < deadline,
                    "run {id} did not start within 5 s of its enqueue"
                );
                tokio::time::sleep(Duration::from_micros(200)).await;
            };
            // Idle again: the run completed, then a pause.
            while front.load(&id).await.expect("loads").status != StoredStatus::Completed {
                assert!(Instant::now() < deadline, "run {id} did not complete");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(SETTLE).await;
            let (claim, waited_ms) = claimed.lock().unwrap()[&id];
            if i >= WARMUP {
                samples.push(Sample {
                    called,
                    returned,
                    claimed: claim,
                    started: start,
                    waited_ms,
                });
            }
        }
        serving.abort();
        front_store.close().await;
        worker_store.close().await;

        let ms = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64() * 1e3;
        let series = |f: &dyn Fn(&Sample) -> f64| summary(samples.iter().map(f).collect());
        let shape = format!("phaseo-agent workers, N={SAMPLES}, one worker, concurrency 1");
        report(&format!(
            "[workers] latency ({shape}) enqueue called -> run started: {}",
            series(&|s| ms(s.called, s.started))
        ));
        report(&format!(
            "[workers] latency ({shape}) enqueue returned -> run started: {}",
            series(&|s| ms(s.returned, s.started))
        ));
        report(&format!(
            "[workers] latency ({shape}) enqueue returned -> claimed: {}",
            series(&|s| ms(s.returned, s.claimed))
        ));
        report(&format!(
            "[workers] latency ({shape}) enqueue itself: {}",
            series(&|s| ms(s.called, s.returned))
        ));
        report(&format!(
            "[workers] latency ({shape}) waited by the database's clock (whole ms): {}",
            series(&|s| s.waited_ms as f64)
        ));
    })
    .await;
}
