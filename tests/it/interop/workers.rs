//! Queue workers as real processes on PostgreSQL (`tests/bin/worker_child.rs`): four workers, one
//! of them killed with SIGKILL every second and started again, until six kills have landed and a
//! crash has left a call in doubt (runs are queued in batches until then, so a fast machine does
//! not finish the work before the killer has struck) and every queued run has completed; a
//! worker stopped with SIGSTOP past its lease, whose runs another worker takes over, and which
//! writes nothing once it wakes up; and the figures (runs per second with one and with four
//! workers, how long a ready run waits to be claimed).
//!
//! Every run has a plain call (`charge`), an idempotent one (`sync`) and a gated one (`deploy`),
//! which a separate process approves as a person would. What happened is counted outside the
//! workers: each run of a tool's code in an effects file, each journal write a worker's store
//! accepted in a log per process, and the journal itself read back with SQL.
//!
//! Run by `interop/run.sh` (`--ignored`); without the server's URL the tests fail, never pass.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::store::{PostgresStore, QueueCounts};
use sqlx::PgPool;

use super::postgres::in_fresh_database;

/// The agent `worker_child` serves.
const AGENT: &str = "crash";

/// A fresh directory for one test's logs.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("phaseo-workers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The processes of one test: killed (SIGKILL) and reaped when it ends, passed or panicked. Each
/// child also exits when its standard input closes, should this process die without unwinding.
struct Fleet {
    url: String,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Fleet {
    fn new(url: &str, dir: &Path) -> Fleet {
        Fleet {
            url: url.to_owned(),
            dir: dir.to_owned(),
            children: Vec::new(),
        }
    }

    fn command(&self, mode: &str) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_worker_child"));
        command
            .args([mode, &self.url, self.dir.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        command
    }

    /// A worker's command; `slow`: how long its tools sleep after their side effect, and how
    /// long its lease renewals take to reach the database.
    fn worker_command(
        &self,
        name: &str,
        concurrency: usize,
        lease_ms: u64,
        slow: Option<(u64, u64)>,
    ) -> Command {
        let mut command = self.command("work");
        command.args([name, &concurrency.to_string(), &lease_ms.to_string()]);
        if let Some((tool_ms, renew_ms)) = slow {
            command.args([tool_ms.to_string(), renew_ms.to_string()]);
        }
        command
    }

    /// Starts a worker; returns its index.
    fn worker(
        &mut self,
        name: &str,
        concurrency: usize,
        lease_ms: u64,
        slow: Option<(u64, u64)>,
    ) -> usize {
        let child = self
            .worker_command(name, concurrency, lease_ms, slow)
            .spawn()
            .unwrap();
        self.children.push(child);
        self.children.len() - 1
    }

    /// Starts the approver; returns its index.
    fn approver(&mut self) -> usize {
        let child = self.command("approve").spawn().unwrap();
        self.children.push(child);
        self.children.len() - 1
    }

    fn pid(&self, index: usize) -> u32 {
        self.children[index].id()
    }

    /// Kills the worker at `index` with SIGKILL, and starts another in its place.
    fn restart(&mut self, index: usize, name: &str, concurrency: usize, lease_ms: u64) {
        let child = &mut self.children[index];
        child.kill().unwrap();
        child.wait().unwrap();
        self.children[index] = self
            .worker_command(name, concurrency, lease_ms, None)
            .spawn()
            .unwrap();
    }

    fn signal(&self, index: usize, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid(index).to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal}: {status}");
    }

    /// Waits until the worker at `index` listens for ready runs.
    async fn listening(&mut self, index: usize) {
        let marker = self.dir.join(format!("listening.{}", self.pid(index)));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !marker.exists() {
            if let Some(status) = self.children[index].try_wait().unwrap() {
                panic!("worker {index} exited before it listened: {status}");
            }
            assert!(Instant::now() < deadline, "worker {index} never listened");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (up to 300 ms) until the worker at `index` records its next side effect; returns
    /// whether it did.
    async fn after_next_effect(&self, index: usize) -> bool {
        use std::io::{Read as _, Seek as _};
        let pid = self.pid(index).to_string();
        let path = self.dir.join("effects");
        let mut from = std::fs::metadata(&path).map_or(0, |m| m.len());
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline {
            let mut new = String::new();
            if let Ok(mut file) = std::fs::File::open(&path) {
                file.seek(std::io::SeekFrom::Start(from)).unwrap();
                file.read_to_string(&mut new).unwrap();
            }
            // Whole lines only (each is one write).
            let whole = new.rfind('\n').map_or(0, |i| i + 1);
            from += whole as u64;
            if new[..whole]
                .lines()
                .any(|line| line.rsplit(' ').next() == Some(pid.as_str()))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        false
    }

    fn alive(&mut self, index: usize) -> bool {
        self.children[index].try_wait().unwrap().is_none()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The lines of every `PREFIX.PID` file in `dir`, with the PID.
fn logs(dir: &Path, prefix: &str) -> Vec<(u32, String)> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|pid| pid.parse().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        lines.extend(text.lines().map(|line| (pid, line.to_owned())));
    }
    lines
}

/// The space-separated fields of `line`, exactly `n` of them (a torn line fails the test).
fn fields(line: &str, n: usize) -> Vec<String> {
    let parts: Vec<String> = line.split(' ').map(str::to_owned).collect();
    assert_eq!(parts.len(), n, "a torn log line: {line:?}");
    parts
}

/// One run of a tool's code.
struct Effect {
    run: String,
    call: String,
    tool: String,
    key: String,
    pid: u32,
}

fn effects(dir: &Path) -> Vec<Effect> {
    let text = std::fs::read_to_string(dir.join("effects")).unwrap_or_default();
    text.lines()
        .map(|line| {
            let f = fields(line, 5);
            Effect {
                run: f[0].clone(),
                call: f[1].clone(),
                tool: f[2].clone(),
                key: f[3].clone(),
                pid: f[4].parse().unwrap(),
            }
        })
        .collect()
}

/// One run claimed: (run, token, status when taken, milliseconds it waited).
fn claims(dir: &Path) -> Vec<(String, u64, String, u64)> {
    logs(dir, "claims")
        .into_iter()
        .map(|(_, line)| {
            let f = fields(&line, 4);
            (
                f[0].clone(),
                f[1].parse().unwrap(),
                f[2].clone(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

/// The approver's decisions: (run, call, kind, decision).
fn decisions(dir: &Path) -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(dir.join("decisions")).unwrap_or_default();
    text.lines()
        .map(|line| {
            let f = fields(line, 4);
            (f[0].clone(), f[1].clone(), f[2].clone(), f[3].clone())
        })
        .collect()
}

/// The journal writes a worker's store accepted: (pid, run, the run's version after it).
fn writes(dir: &Path) -> Vec<(u32, String, u64)> {
    logs(dir, "writes")
        .into_iter()
        .map(|(pid, line)| {
            let f = fields(&line, 3);
            assert_eq!(f[0], pid.to_string(), "a line in another process's log");
            (pid, f[1].clone(), f[2].parse().unwrap())
        })
        .collect()
}

/// The lines of one process's write log.
fn writes_of(dir: &Path, pid: u32) -> Vec<String> {
    std::fs::read_to_string(dir.join(format!("writes.{pid}")))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Queues `n` runs named `PREFIX-NNN`.
async fn enqueue(runs: &Runs, prefix: &str, n: usize) -> Vec<String> {
    enqueue_from(runs, prefix, 0, n).await
}

/// Queues `n` runs named `PREFIX-NNN`, numbered from `from`.
async fn enqueue_from(runs: &Runs, prefix: &str, from: usize, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in from..from + n {
        let options = EnqueueOptions::new().run_id(format!("{prefix}-{i:03}"));
        ids.push(
            runs.enqueue(AGENT, "Charge, sync, deploy", options)
                .await
                .unwrap(),
        );
    }
    ids
}

async fn counts(runs: &Runs) -> QueueCounts {
    let counts = runs.queue_counts().await.unwrap();
    counts
        .into_iter()
        .find(|c| c.agent_id == AGENT)
        .unwrap_or_default()
}

/// Waits until `n` runs completed, up to `limit`; fails on a failed run, or with the counts.
async fn until_completed(runs: &Runs, n: u64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let counts = counts(runs).await;
        assert_eq!(counts.failed, 0, "a run failed: {counts:?}");
        if counts.completed == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not all {n} runs completed within {limit:?}: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One journal entry as stored.
struct Row {
    version: u64,
    kind: String,
    body: String,
}

/// Every run's journal, in version order, and its row: (status, version).
async fn journal(url: &str) -> (BTreeMap<String, Vec<Row>>, BTreeMap<String, (String, u64)>) {
    let pool = PgPool::connect(url).await.unwrap();
    let rows: Vec<(String, i64, String, String)> = sqlx::query_as(
        "SELECT run_id, version, kind, body FROM phaseo_journal ORDER BY run_id, version",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let runs: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT run_id, status, (SELECT max(j.version) FROM phaseo_journal j \
             WHERE j.run_id = r.run_id) FROM phaseo_runs r",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    let mut journal: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for (run, version, kind, body) in rows {
        journal.entry(run).or_default().push(Row {
            version: u64::try_from(version).unwrap(),
            kind,
            body,
        });
    }
    let runs = runs
        .into_iter()
        .map(|(run, status, version)| (run, (status, u64::try_from(version).unwrap())))
        .collect();
    (journal, runs)
}

/// What the checks counted.
#[derive(Debug, Default)]
struct Seen {
    /// Runs taken up again after their worker's lease expired (`recovered` entries).
    takeovers: usize,
    /// Calls left in doubt by a crash, decided by the approver (output supplied, run again).
    in_doubt_output: usize,
    in_doubt_again: usize,
    /// Runs of `sync`'s code past the first, each with the first one's key.
    sync_reruns: usize,
}

/// Checks, from outside the processes, that every run in `ids` completed once: each plain and
/// gated side effect happened exactly once, every run of the idempotent one saw one key, the
/// journal has no gap and no entry twice, the model was asked once per turn, every lease's
/// token grew, and no two writers were told that the same version was theirs.
async fn check(url: &str, dir: &Path, runs: &Runs, ids: &[String]) -> Seen {
    let mut seen = Seen::default();
    let (journal, rows) = journal(url).await;
    assert_eq!(rows.len(), ids.len(), "runs stored");
    let effects = effects(dir);
    let decisions = decisions(dir);
    for id in ids {
        let (status, version) = &rows[id];
        assert_eq!(status, "completed", "{id}");
        let entries = &journal[id];
        let versions: Vec<u64> = entries.iter().map(|r| r.version).collect();
        let expected: Vec<u64> = (1..=*version).collect();
        assert_eq!(versions, expected, "{id}: the journal's versions");
        let kinds: Vec<&str> = entries.iter().map(|r| r.kind.as_str()).collect();
        let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
        assert_eq!(kinds[0], "started", "{id}: {kinds:?}");
        assert_eq!(count("started"), 1, "{id}: {kinds:?}");
        // A recovery never asks the model again: two turns with calls, then the answer.
        assert_eq!(count("turn"), 2, "{id}: {kinds:?}");
        assert_eq!(count("refused"), 0, "{id}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"settled"), "{id}: {kinds:?}");
        // A call's result is recorded once, and only for a call that started.
        for call in ["call_1", "call_2", "call_3"] {
            let quoted = format!("\"call_id\":\"{call}\"");
            let finished = entries
                .iter()
                .filter(|r| r.kind == "call_finished" && r.body.contains(&quoted))
                .count();
            assert!(finished <= 1, "{id}: {call} finished {finished} times");
        }
        // Every take of the run names a lease; their tokens only grow.
        let tokens: Vec<u64> = entries
            .iter()
            .filter(|r| r.kind == "recovered")
            .map(|r| {
                let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
                let by = body["by"].as_str().unwrap().to_owned();
                let token = by.rsplit("(lease ").next().unwrap().trim_end_matches(')');
                token
                    .parse::<u64>()
                    .unwrap_or_else(|_| panic!("{id}: by {by:?}"))
            })
            .collect();
        // A worker begins a queued run without an entry of its own: each `recovered` entry is
        // a take-over of a run that had begun.
        assert!(
            tokens.windows(2).all(|w| w[0] < w[1]),
            "{id}: lease tokens {tokens:?}"
        );
        seen.takeovers += tokens.len();
        // Each decision the approver was told it recorded is in the journal once.
        let decided: Vec<_> = decisions.iter().filter(|d| &d.0 == id).collect();
        assert_eq!(count("decision"), decided.len(), "{id}: {decided:?}");
        let mut again: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, call, kind, decision) in &decided {
            match (kind.as_str(), decision.as_str()) {
                ("tool_approval", _) => assert_eq!(call, "call_3", "{id}"),
                ("outcome_unknown", "output") => seen.in_doubt_output += 1,
                ("outcome_unknown", _) => {
                    seen.in_doubt_again += 1;
                    *again.entry(call.as_str()).or_default() += 1;
                }
                other => panic!("{id}: a decision {other:?}"),
            }
        }
        // A call that is not idempotent starts once, and once more only when a person said to
        // run it again, each time as the next attempt.
        for call in ["call_1", "call_3"] {
            let attempts: Vec<u64> = entries
                .iter()
                .filter(|r| r.kind == "call_started")
                .map(|r| serde_json::from_str::<serde_json::Value>(&r.body).unwrap())
                .filter(|body| body["call_id"] == call)
                .map(|body| body["attempt"].as_u64().unwrap())
                .collect();
            let expected: Vec<u64> = (0..=again.get(call).copied().unwrap_or(0) as u64).collect();
            assert_eq!(attempts, expected, "{id}: the attempts of {call}");
        }

        let ran = |call: &str| -> Vec<&Effect> {
            effects
                .iter()
                .filter(|e| &e.run == id && e.call == call)
                .collect()
        };
        for (call, tool) in [("call_1", "charge"), ("call_3", "deploy")] {
            let times = ran(call).len();
            assert_eq!(times, 1, "{id}: {tool} ran {times} times");
        }
        let sync = ran("call_2");
        assert!(!sync.is_empty(), "{id}: sync never ran");
        assert!(
            sync.iter()
                .all(|e| e.key == sync[0].key && e.tool == "sync"),
            "{id}: sync ran with keys {:?}",
            sync.iter().map(|e| &e.key).collect::<Vec<_>>()
        );
        seen.sync_reruns += sync.len() - 1;

        // The run as loaded: the answer, and one result per call.
        let stored = runs.load(id).await.unwrap();
        assert_eq!(stored.state.output(), Some("All done."), "{id}");
        let steps: Vec<&str> = stored
            .state
            .steps()
            .iter()
            .map(|s| s.call_id.as_str())
            .collect();
        assert_eq!(steps, ["call_1", "call_2", "call_3"], "{id}: steps");
        assert!(stored.state.steps().iter().all(|s| !s.is_error), "{id}");
    }
    // No two writers were told they wrote the same version of a run; each accepted write is in
    // the journal.
    let mut versions = BTreeSet::new();
    for (pid, run, version) in writes(dir) {
        assert!(
            versions.insert((run.clone(), version)),
            "{run} version {version} written twice (the second by {pid})"
        );
        assert!(version <= rows[&run].1, "{run}: a write past the journal");
    }
    // No two claims of a run got the same token (two workers holding it at once).
    let mut tokens = BTreeSet::new();
    for (run, token, _, _) in claims(dir) {
        assert!(
            tokens.insert((run.clone(), token)),
            "{run}: token {token} given twice"
        );
    }
    seen
}

/// Prints a figure on the process's standard error itself, past the test harness's capture: the
/// interop suite's log keeps it even when the test passes.
fn report(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "[workers] {line}");
}

/// A number drawn from the process's random hasher keys.
fn draw(n: u64) -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(Instant::now()) % n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_four_workers_killed_every_second_complete_every_run_once() {
    // The first batch; more are queued while the killer has work left (below).
    const RUNS: usize = 200;
    const WORKERS: usize = 4;
    const CONCURRENCY: usize = 8;
    const LEASE_MS: u64 = 1_500;
    // The kills the test makes before it lets the runs drain, whatever the machine's speed.
    const KILLS: usize = 6;
    // Runs queued or in flight below which another batch is queued, and that batch's size: the
    // workers are never idle while the killer still has kills to make.
    const LOW_WATER: u64 = (WORKERS * CONCURRENCY) as u64;
    const BATCH: usize = 40;
    in_fresh_database(|url| async move {
        let dir = scratch("sigkill");
        let store = PostgresStore::connect(&url).await.unwrap();
        let runs = Runs::new(store.clone());
        let mut fleet = Fleet::new(&url, &dir);
        fleet.approver();
        let mut workers = Vec::new();
        for slot in 0..WORKERS {
            workers.push(fleet.worker(&format!("w{slot}.0"), CONCURRENCY, LEASE_MS, None));
        }
        for &index in &workers {
            fleet.listening(index).await;
        }
        let started = Instant::now();
        let mut ids = enqueue(&runs, "crash", RUNS).await;
        let deadline = started + Duration::from_secs(300);
        let mut next_kill = started + Duration::from_secs(1);
        let mut kills = 0;
        let mut mid_call = 0;
        loop {
            let counts = counts(&runs).await;
            assert_eq!(counts.failed, 0, "a run failed: {counts:?}");
            // Enough kills, and one of them left a call in doubt that the approver decided:
            // the promises below have been exercised, and the runs may drain.
            let struck = kills >= KILLS
                && decisions(&dir)
                    .iter()
                    .any(|(_, _, kind, _)| kind == "outcome_unknown");
            if struck && counts.completed == ids.len() as u64 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not every run completed in 5 minutes ({kills} kills, {} runs): {counts:?}",
                ids.len()
            );
            if !struck && ids.len() as u64 - counts.completed < LOW_WATER {
                ids.extend(enqueue_from(&runs, "crash", ids.len(), BATCH).await);
            }
            if Instant::now() >= next_kill {
                let slot = usize::try_from(draw(WORKERS as u64)).unwrap();
                // Every other kill lands in the middle of a call: right after the worker's next
                // side effect, while its tool sleeps (or after 300 ms if it starts none).
                if kills % 2 == 1 && fleet.after_next_effect(workers[slot]).await {
                    mid_call += 1;
                }
                kills += 1;
                let name = format!("w{slot}.{kills}");
                fleet.restart(workers[slot], &name, CONCURRENCY, LEASE_MS);
                next_kill += Duration::from_secs(1);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let wall = started.elapsed();
        drop(fleet);
        let seen = check(&url, &dir, &runs, &ids).await;
        let taken_running = claims(&dir).iter().filter(|c| c.2 == "running").count();
        report(&format!(
            "sigkill: {} runs completed by {WORKERS} workers in {:.1} s; {kills} \
             kills ({mid_call} right after a side effect); {} takeovers ({taken_running} claims of a running run); {} in-doubt \
             decisions ({} output supplied, {} run again); {} re-runs of the idempotent call",
            ids.len(),
            wall.as_secs_f64(),
            seen.takeovers,
            seen.in_doubt_output + seen.in_doubt_again,
            seen.in_doubt_output,
            seen.in_doubt_again,
            seen.sync_reruns,
        ));
        assert!(kills >= KILLS, "only {kills} kills");
        assert!(seen.takeovers > 0, "no run was taken over after a kill");
        assert!(
            seen.in_doubt_output + seen.in_doubt_again > 0,
            "no kill left a call in doubt"
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_a_worker_stopped_past_its_lease_writes_nothing_once_it_wakes() {
    const RUNS: usize = 4;
    const LEASE_MS: u64 = 1_500;
    // The stopped worker's tools sleep this long after their side effect: it is stopped there.
    const SLOW_MS: u64 = 1_000;
    // Its renewals take this long to reach the database: once it wakes, its tools' results reach
    // the journal first, and the fence, not the renewal, is what stops them.
    const RENEW_DELAY_MS: u64 = 300;
    in_fresh_database(|url| async move {
        let dir = scratch("sigstop");
        let store = PostgresStore::connect(&url).await.unwrap();
        let runs = Runs::new(store.clone());
        let mut fleet = Fleet::new(&url, &dir);
        fleet.approver();
        let stopped = fleet.worker("stopped", RUNS, LEASE_MS, Some((SLOW_MS, RENEW_DELAY_MS)));
        fleet.listening(stopped).await;
        let pid = fleet.pid(stopped);
        let ids = enqueue(&runs, "stop", RUNS).await;
        // Every run in the middle of its first turn's calls, both side effects done.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let effects = effects(&dir);
            let busy = ids
                .iter()
                .filter(|id| {
                    effects
                        .iter()
                        .filter(|e| &e.run == *id && e.pid == pid)
                        .count()
                        == 2
                })
                .count();
            if busy == RUNS {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the runs never reached their calls"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        fleet.signal(stopped, "-STOP");
        let at_stop = writes_of(&dir, pid);
        let stopped_at = Instant::now();

        let taker = fleet.worker("taker", RUNS, LEASE_MS, None);
        until_completed(&runs, RUNS as u64, Duration::from_secs(60)).await;
        let taken_after = stopped_at.elapsed();
        assert!(
            taken_after > Duration::from_millis(LEASE_MS),
            "the runs completed before the stopped worker's lease could expire"
        );
        // Woken once its tools' sleeps are over: each call's result is due in the journal.
        tokio::time::sleep_until((stopped_at + Duration::from_millis(SLOW_MS + 300)).into()).await;
        fleet.signal(stopped, "-CONT");
        // It tries its writes once it is scheduled again, which a busy machine may delay: wait
        // for its first refusal (not a fixed time), then a little longer for any write that
        // would follow it.
        let refused_by_it = || -> Vec<String> {
            logs(&dir, "refused")
                .into_iter()
                .filter(|(p, _)| *p == pid)
                .map(|(_, line)| line)
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while refused_by_it().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = writes_of(&dir, pid);
        assert_eq!(
            after, at_stop,
            "the worker wrote after it was stopped past its lease"
        );
        // It did try, and the database refused: its lease's token is no longer the run's. The
        // run moved on too, but a fenced write is told of the lease first, so the worker knows
        // its run was taken rather than merely behind.
        let refused = refused_by_it();
        assert!(
            !refused.is_empty(),
            "the woken worker tried no write within 30 s"
        );
        assert!(
            refused.iter().all(|line| line.ends_with(" lease_lost")),
            "{refused:?}"
        );
        assert!(fleet.alive(stopped), "the stopped worker died");
        assert!(fleet.alive(taker), "the taker died");
        let taken: Vec<_> = claims(&dir)
            .into_iter()
            .filter(|c| c.2 == "running")
            .collect();
        assert_eq!(taken.len(), RUNS, "runs taken over: {taken:?}");
        drop(fleet);
        let seen = check(&url, &dir, &runs, &ids).await;
        assert_eq!(seen.takeovers, RUNS);
        // Stopped after both side effects: the charge is in doubt, and its output supplied.
        assert_eq!(seen.in_doubt_output, RUNS, "{seen:?}");
        assert_eq!(seen.sync_reruns, RUNS, "{seen:?}");
        report(&format!(
            "sigstop: {RUNS} runs taken over and completed {:.1} s after their worker was \
             stopped (lease {LEASE_MS} ms); it wrote {} entries before, none after; {} writes \
             it tried once woken were refused as lease lost",
            taken_after.as_secs_f64(),
            at_stop.len(),
            refused.len(),
        ));
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// The figures of one fleet size: (runs per second, claim waits in milliseconds).
async fn throughput(workers: usize, runs_n: usize) -> (f64, Vec<u64>) {
    let mut figures = (0.0, Vec::new());
    let out = &mut figures;
    in_fresh_database(|url| async move {
        let dir = scratch(&format!("throughput-{workers}"));
        let store = PostgresStore::connect(&url).await.unwrap();
        let runs = Runs::new(store.clone());
        let mut fleet = Fleet::new(&url, &dir);
        fleet.approver();
        let started: Vec<usize> = (0..workers)
            .map(|slot| fleet.worker(&format!("w{slot}"), 8, 10_000, None))
            .collect();
        for index in started {
            fleet.listening(index).await;
        }
        let ids = enqueue(&runs, "fig", runs_n).await;
        until_completed(&runs, runs_n as u64, Duration::from_secs(120)).await;
        drop(fleet);
        // From the first enqueue to the last completion, by the rows' own times.
        let pool = PgPool::connect(&url).await.unwrap();
        let (first, last): (i64, i64) =
            sqlx::query_as("SELECT min(created_ms), max(updated_ms) FROM phaseo_runs")
                .fetch_one(&pool)
                .await
                .unwrap();
        pool.close().await;
        let seen = check(&url, &dir, &runs, &ids).await;
        assert_eq!(seen.takeovers, 0, "{seen:?}");
        let seconds = (last - first) as f64 / 1000.0;
        *out = (
            runs_n as f64 / seconds,
            claims(&dir).into_iter().map(|c| c.3).collect(),
        );
        store.close().await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
    figures
}

/// The value at `q` (0 to 1) of sorted `values`.
fn quantile(values: &[u64], q: f64) -> u64 {
    let rank = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_worker_figures() {
    const RUNS: usize = 200;
    for workers in [1, 4] {
        let (rate, mut waits) = throughput(workers, RUNS).await;
        waits.sort_unstable();
        report(&format!(
            "{workers} worker(s) x 8: {RUNS} runs at {rate:.1} runs/s (first enqueue to \
             last completion, a gated call approved by another process in each); ready to \
             claimed: p50 {} ms, p99 {} ms over {} claims",
            quantile(&waits, 0.5),
            quantile(&waits, 0.99),
            waits.len(),
        ));
    }
}
