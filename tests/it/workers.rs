//! Queued runs and workers in one process, on `MemoryStore` and SQLite: enqueue, the hand-over to
//! workers when the last decision is recorded, leases and their fencing tokens, recovery of a run
//! whose lease expired, draining. The real-process crash test (SIGKILL, SIGSTOP, four workers on
//! PostgreSQL) is in `interop/workers.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{
    Append, ClaimRequest, Lease, MemoryStore, PendingFilter, PendingRow, RunQueue, SqliteStore,
    StoredStatus,
};
use phaseo_agent::worker::Worker;
use phaseo_agent::{Agent, AgentError, Decision, ModelResponse, StoreError, Tool, ToolCall};

use crate::store_backend::{entry, new_run};
use crate::support::durable::{ByPosition, Hooked};

/// Each run of a tool's code, counted outside the runs: (run id, tool, idempotency key).
#[derive(Clone, Default)]
struct Effects(Arc<Mutex<Vec<(String, String, String)>>>);

impl Effects {
    fn of(&self, tool: &str) -> Vec<(String, String)> {
        let seen = self.0.lock().unwrap();
        seen.iter()
            .filter(|(_, t, _)| t == tool)
            .map(|(run, _, key)| (run.clone(), key.clone()))
            .collect()
    }
}

fn effect_tool(name: &str, effects: &Effects) -> Tool {
    let effects = effects.clone();
    let tool = name.to_owned();
    Tool::new(
        name,
        "Has a side effect",
        json!({"type": "object"}),
        move |_input, ctx| {
            effects.0.lock().unwrap().push((
                ctx.run_id().to_owned(),
                tool.clone(),
                ctx.idempotency_key(),
            ));
            Ok(json!({"done": true}))
        },
    )
}

/// One turn with a plain call and a gated one, then an answer.
fn agent(effects: &Effects) -> Agent {
    let model = ByPosition(vec![
        ModelResponse::tool_calls([
            ToolCall::new("c1", "notify", json!({})),
            ToolCall::new("c2", "deploy", json!({})),
        ]),
        ModelResponse::text("Shipped."),
    ]);
    Agent::builder("release")
        .model(model)
        .tool(effect_tool("notify", effects))
        .tool(effect_tool("deploy", effects).require_approval())
        .build()
        .unwrap()
}

/// Waits (up to 10 s) until every run in `ids` is in `status`.
async fn until_all(runs: &Runs, ids: &[String], status: StoredStatus) {
    for _ in 0..1_000 {
        let mut all = true;
        for id in ids {
            if runs.load(id).await.unwrap().status != status {
                all = false;
            }
        }
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut seen = Vec::new();
    for id in ids {
        seen.push(runs.load(id).await.unwrap().status);
    }
    panic!("runs never all {status:?}: {seen:?}");
}

pub(crate) async fn serve_and_decide(runs: Runs) {
    let effects = Effects::default();
    let worker = Worker::new(runs.clone())
        .agent(agent(&effects))
        .concurrency(3)
        .idle_check(Duration::from_secs(60));
    let serving = tokio::spawn(worker.run());
    let mut ids = Vec::new();
    for i in 0..6 {
        let id = runs
            .enqueue("release", format!("Ship {i}"), EnqueueOptions::new())
            .await
            .unwrap();
        ids.push(id);
    }
    until_all(&runs, &ids, StoredStatus::Paused).await;
    let counts = runs.queue_counts().await.unwrap();
    assert_eq!(counts.len(), 1);
    assert_eq!((counts[0].paused, counts[0].ready), (6, 0));
    // The last decision hands each run back to the workers, in its own transaction.
    let waiting = runs.pending(&PendingFilter::default()).await.unwrap().items;
    assert_eq!(waiting.len(), 6);
    for row in &waiting {
        runs.decide(row, Decision::Approve, "ada").await.unwrap();
    }
    until_all(&runs, &ids, StoredStatus::Completed).await;
    serving.abort();
    for tool in ["notify", "deploy"] {
        let mut seen = effects.of(tool);
        seen.sort();
        seen.dedup_by(|a, b| a.0 == b.0);
        assert_eq!(seen.len(), 6, "{tool} ran once per run");
        assert_eq!(effects.of(tool).len(), 6, "{tool} ran once per run");
    }
    let counts = runs.queue_counts().await.unwrap();
    assert_eq!(counts[0].completed, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_workers_serve_enqueued_runs_and_take_them_back_when_decided() {
    serve_and_decide(Runs::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_workers_serve_enqueued_runs_and_take_them_back_when_decided() {
    let dir = tempdir("serve");
    let store = SqliteStore::open(dir.join("runs.db")).await.unwrap();
    serve_and_decide(Runs::new(store)).await;
    std::fs::remove_dir_all(&dir).ok();
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "phaseo-workers-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn claim(agent: &str, limit: usize, lease_ms: u64) -> ClaimRequest {
    ClaimRequest {
        agents: vec![agent.to_owned()],
        worker: "test".into(),
        lease_ms,
        limit,
    }
}

/// The queue's contract, on any store that keeps one.
pub(crate) async fn queue_contract<S: RunQueue>(store: Arc<S>) {
    let runs = Runs::from_arc(store.clone());
    let a = runs
        .enqueue("release", "a", EnqueueOptions::new().run_id("q-a"))
        .await
        .unwrap();
    let again = runs
        .enqueue("release", "a", EnqueueOptions::new().run_id("q-a"))
        .await;
    assert!(
        matches!(
            again,
            Err(AgentError::Store(StoreError::AlreadyExists { .. }))
        ),
        "an id enqueued twice is refused: {again:?}"
    );
    // Another agent's run is never handed to this worker.
    runs.enqueue("other", "b", EnqueueOptions::new().run_id("q-b"))
        .await
        .unwrap();

    let first = store.claim(&claim("release", 10, 60_000)).await.unwrap();
    assert_eq!(first.leases.len(), 1);
    let lease: Lease = first.leases[0].clone();
    assert_eq!(
        (lease.run_id.as_str(), lease.status, lease.version),
        (a.as_str(), StoredStatus::Ready, 1)
    );
    // Held: nobody else takes it.
    let second = store.claim(&claim("release", 10, 60_000)).await.unwrap();
    assert!(second.leases.is_empty());
    assert!(second.next_expiry_ms.is_some_and(|ms| ms <= 60_000));
    store.renew(&lease, 60_000).await.unwrap();

    // Released: the next claim takes it, with a larger token; the old lease is over.
    store.release(&lease).await.unwrap();
    let third = store.claim(&claim("release", 10, 60_000)).await.unwrap();
    assert_eq!(third.leases.len(), 1);
    let newer = third.leases[0].clone();
    assert!(newer.token > lease.token);
    let lost = store.renew(&lease, 60_000).await;
    assert!(
        matches!(lost, Err(StoreError::LeaseLost { token, .. }) if token == lease.token),
        "{lost:?}"
    );

    // A lease that expires lets another claim take the run.
    store.release(&newer).await.unwrap();
    let short = store.claim(&claim("release", 1, 50)).await.unwrap();
    let short = short.leases[0].clone();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let expired = store.renew(&short, 60_000).await;
    assert!(
        matches!(expired, Err(StoreError::LeaseLost { .. })),
        "{expired:?}"
    );
    let taken = store.claim(&claim("release", 1, 60_000)).await.unwrap();
    assert_eq!(taken.leases.len(), 1);
    assert!(taken.leases[0].token > short.token);

    fenced_writes(&*store).await;
    hand_over_only_queued_runs(&*store).await;

    let counts = runs.queue_counts().await.unwrap();
    let release = counts.iter().find(|c| c.agent_id == "release").unwrap();
    let other = counts.iter().find(|c| c.agent_id == "other").unwrap();
    assert_eq!((release.ready, release.running), (0, 1));
    assert_eq!(other.ready, 1);
    assert!(other.oldest_ready_ms.is_some());
}

#[tokio::test]
async fn memory_queue_contract() {
    queue_contract(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn sqlite_queue_contract() {
    let dir = tempdir("contract");
    let store = SqliteStore::open(dir.join("runs.db")).await.unwrap();
    queue_contract(Arc::new(store)).await;
    std::fs::remove_dir_all(&dir).ok();
}

/// One entry after `expected`, with `status`, as a worker under `fence` writes it.
fn write(run_id: &str, expected: u64, status: StoredStatus, fence: Option<u64>) -> Append {
    Append {
        run_id: run_id.into(),
        expected_version: expected,
        rows: vec![entry(expected + 1)],
        status,
        snapshot: None,
        pending: None,
        decisions: Vec::new(),
        at_ms: 1_000_001,
        fence,
    }
}

fn waiting_call(run_id: &str, decided: bool) -> PendingRow {
    PendingRow {
        run_id: run_id.into(),
        agent_id: "release".into(),
        call_id: "c1".into(),
        tool: "deploy".into(),
        kind: "tool_approval".into(),
        arguments: "{}".into(),
        digest: "d".into(),
        since_ms: 1_000_000,
        version: 2,
        decision: decided.then(|| "{\"decision\":\"approve\"}".into()),
        decided_by: decided.then(|| "ada".into()),
    }
}

/// A write under a lease applies only while that lease lives and is the run's latest; nothing is
/// written otherwise, and a write outside any lease is checked by version alone.
async fn fenced_writes(store: &dyn RunQueue) {
    let runs_agent = "fenced";
    let runs = store;
    runs.enqueue(phaseo_agent::store::NewRun {
        agent_id: runs_agent.into(),
        status: StoredStatus::Ready,
        ..new_run("q-fence", runs_agent, 1_000_000)
    })
    .await
    .unwrap();
    let lease = store
        .claim(&claim(runs_agent, 1, 60_000))
        .await
        .unwrap()
        .leases[0]
        .clone();
    store
        .append(write(
            "q-fence",
            1,
            StoredStatus::Running,
            Some(lease.token),
        ))
        .await
        .unwrap();
    // A token the run never gave, and then the same token once its lease ended.
    let stale = store
        .append(write(
            "q-fence",
            2,
            StoredStatus::Running,
            Some(lease.token + 7),
        ))
        .await;
    assert!(
        matches!(stale, Err(StoreError::LeaseLost { .. })),
        "{stale:?}"
    );
    store.release(&lease).await.unwrap();
    let ended = store
        .append(write(
            "q-fence",
            2,
            StoredStatus::Running,
            Some(lease.token),
        ))
        .await;
    assert_eq!(
        ended,
        Err(StoreError::LeaseLost {
            run_id: "q-fence".into(),
            token: lease.token
        })
    );
    // A stale version is a conflict whatever the lease.
    let taken = store
        .claim(&claim(runs_agent, 1, 60_000))
        .await
        .unwrap()
        .leases[0]
        .clone();
    assert_eq!(taken.status, StoredStatus::Running);
    let behind = store
        .append(write(
            "q-fence",
            1,
            StoredStatus::Running,
            Some(taken.token),
        ))
        .await;
    assert!(
        matches!(behind, Err(StoreError::Conflict { .. })),
        "{behind:?}"
    );
    let loaded = store.load("q-fence").await.unwrap();
    assert_eq!(loaded.version, 2, "nothing was written by a refused write");
    // The new holder writes; the old one, behind on the version too, is told its lease is over
    // (not merely that it is behind), so a worker knows its run was taken.
    store
        .append(write(
            "q-fence",
            2,
            StoredStatus::Running,
            Some(taken.token),
        ))
        .await
        .unwrap();
    let taken_over = store
        .append(write(
            "q-fence",
            2,
            StoredStatus::Running,
            Some(lease.token),
        ))
        .await;
    assert_eq!(
        taken_over,
        Err(StoreError::LeaseLost {
            run_id: "q-fence".into(),
            token: lease.token
        })
    );
    // Pausing under the lease ends it: the run is no one's, and no claim takes it.
    store
        .append(write("q-fence", 3, StoredStatus::Paused, Some(taken.token)))
        .await
        .unwrap();
    let after = store
        .append(write(
            "q-fence",
            4,
            StoredStatus::Running,
            Some(taken.token),
        ))
        .await;
    assert!(
        matches!(after, Err(StoreError::LeaseLost { .. })),
        "{after:?}"
    );
    assert!(
        store
            .claim(&claim(runs_agent, 1, 60_000))
            .await
            .unwrap()
            .leases
            .is_empty()
    );
}

/// The decision that completes a queued run's waiting calls makes it ready (and announces it);
/// the same decision on a run that is not queued leaves it paused, for its own process.
async fn hand_over_only_queued_runs(store: &dyn RunQueue) {
    let mut wakeups = store.wakeups().await.unwrap();
    store
        .create(phaseo_agent::store::NewRun {
            status: StoredStatus::Paused,
            pending: vec![waiting_call("plain-paused", false)],
            ..new_run("plain-paused", "release", 1_000_000)
        })
        .await
        .unwrap();
    let decided = Append {
        pending: Some(vec![waiting_call("plain-paused", true)]),
        ..write("plain-paused", 1, StoredStatus::Paused, None)
    };
    store.append(decided).await.unwrap();
    assert_eq!(
        store.load("plain-paused").await.unwrap().status,
        StoredStatus::Paused
    );

    store
        .enqueue(phaseo_agent::store::NewRun {
            agent_id: "handed".into(),
            status: StoredStatus::Ready,
            ..new_run("q-paused", "handed", 1_000_000)
        })
        .await
        .unwrap();
    let lease = store
        .claim(&claim("handed", 1, 60_000))
        .await
        .unwrap()
        .leases[0]
        .clone();
    let paused = Append {
        pending: Some(vec![waiting_call("q-paused", false)]),
        ..write("q-paused", 1, StoredStatus::Paused, Some(lease.token))
    };
    store.append(paused).await.unwrap();
    assert_eq!(
        store.load("q-paused").await.unwrap().status,
        StoredStatus::Paused
    );
    // Drain what the enqueue announced, then decide: the decision announces the run.
    while tokio::time::timeout(Duration::from_millis(50), wakeups.next())
        .await
        .is_ok()
    {}
    let decided = Append {
        pending: Some(vec![waiting_call("q-paused", true)]),
        ..write("q-paused", 2, StoredStatus::Paused, None)
    };
    store.append(decided).await.unwrap();
    assert_eq!(
        store.load("q-paused").await.unwrap().status,
        StoredStatus::Ready
    );
    let heard = tokio::time::timeout(Duration::from_secs(5), wakeups.next()).await;
    assert!(
        matches!(heard, Ok(Some(Ok(())))),
        "the hand-over was announced: {heard:?}"
    );
    let taken = store.claim(&claim("handed", 1, 60_000)).await.unwrap();
    assert_eq!(taken.leases[0].status, StoredStatus::Ready);
    assert!(taken.leases[0].token > lease.token);
}

/// A store that keeps no queue (a `RunStore` only, given with `Runs::without_queue`): workers and
/// enqueues are refused when they start. (`Runs::new` refuses such a store when it compiles: see
/// `tests/ui/store-without-queue.rs`.)
#[tokio::test]
async fn a_store_without_a_queue_refuses_workers_and_enqueues() {
    let store = Hooked::new(Arc::new(MemoryStore::new()));
    let runs = Runs::without_queue(Arc::new(store));
    let effects = Effects::default();
    let refused = runs.enqueue("release", "go", EnqueueOptions::new()).await;
    assert!(
        matches!(
            refused,
            Err(AgentError::Store(StoreError::Unsupported { .. }))
        ),
        "{refused:?}"
    );
    let worker = Worker::new(runs).agent(agent(&effects)).run().await;
    assert!(
        matches!(
            worker,
            Err(AgentError::Store(StoreError::Unsupported { .. }))
        ),
        "{worker:?}"
    );
}

#[tokio::test]
async fn a_worker_without_agents_is_refused() {
    let refused = Worker::new(Runs::new(MemoryStore::new())).run().await;
    assert!(
        matches!(refused, Err(AgentError::InvalidState(_))),
        "{refused:?}"
    );
}

/// A worker told to stop lets its runs go on for its drain timeout, then ends their leases, so
/// that another worker takes them at once rather than when the leases expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_worker_hands_its_runs_to_another_at_once() {
    let runs = Runs::new(MemoryStore::new());
    let slow_agent = |delay: Duration| {
        let tool = Tool::new(
            "slow",
            "Slow",
            json!({"type": "object"}),
            move |_, _| async move {
                tokio::time::sleep(delay).await;
                Ok::<_, AgentError>(json!({"slept": true}))
            },
        )
        .idempotent(true);
        Agent::builder("release")
            .model(ByPosition(vec![
                ModelResponse::tool_calls([ToolCall::new("c1", "slow", json!({}))]),
                ModelResponse::text("Done."),
            ]))
            .tool(tool)
            .build()
            .unwrap()
    };
    let run_id = runs
        .enqueue("release", "go", EnqueueOptions::new())
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let first = Worker::new(runs.clone())
        .agent(slow_agent(Duration::from_secs(3_600)))
        .lease(Duration::from_secs(3_600))
        .drain_timeout(Duration::from_millis(100));
    let first = tokio::spawn(first.run_until(async {
        stopped.await.ok();
    }));
    // Running, under the first worker's hour-long lease.
    for _ in 0..500 {
        let counts = runs.queue_counts().await.unwrap();
        if counts[0].running == 1 && runs.load(&run_id).await.unwrap().version >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(
        runs.queue_counts().await.unwrap()[0].ready,
        1,
        "its lease was ended"
    );
    let second = tokio::spawn(
        Worker::new(runs.clone())
            .agent(slow_agent(Duration::from_millis(1)))
            .run(),
    );
    until_all(
        &runs,
        std::slice::from_ref(&run_id),
        StoredStatus::Completed,
    )
    .await;
    second.abort();
}

/// Dropping a worker's future stops its runs where they are: a tool in the middle of its call is
/// dropped at once, not left running or finished first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_worker_stops_its_runs_at_once() {
    struct Dropped(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let started = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (on_start, on_drop) = (started.clone(), dropped.clone());
    let tool = Tool::new("wait", "Waits", json!({"type": "object"}), move |_, _| {
        let guard = Dropped(on_drop.clone());
        let on_start = on_start.clone();
        async move {
            on_start.notify_one();
            tokio::time::sleep(Duration::from_secs(3_600)).await;
            drop(guard);
            Ok::<_, AgentError>(json!({}))
        }
    });
    let agent = Agent::builder("release")
        .model(ByPosition(vec![ModelResponse::tool_calls([
            ToolCall::new("c1", "wait", json!({})),
        ])]))
        .tool(tool)
        .build()
        .unwrap();
    let runs = Runs::new(MemoryStore::new());
    runs.enqueue("release", "go", EnqueueOptions::new())
        .await
        .unwrap();
    let serving = tokio::spawn(Worker::new(runs).agent(agent).run());
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the tool started");
    assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
    serving.abort();
    let _ = serving.await;
    for _ in 0..100 {
        if dropped.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the tool's call went on after the worker was dropped");
}
