//! Stores made by an older release, opened by this one: the fixtures in
//! `tests/fixtures/store_upgrade/` (a SQLite file and a PostgreSQL dump) hold runs in every
//! status, written by the code of the commit named in their README, and the tests here open them
//! with today's code (its migrations run) and take every run on from where it was.
//!
//! The fixtures are made by the ignored test `store_upgrade::generate_fixtures` (see the README).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{ClaimRequest, RunQueue};
use phaseo_agent::{
    Agent, Decision, Message, Model, ModelError, ModelRequest, ModelResponse, Tool, ToolCall,
};

use crate::support::durable::Hooked;

/// The agent of every fixture run.
pub(crate) const AGENT: &str = "release";

/// The folder of the fixtures.
pub(crate) fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/store_upgrade")
}

/// Answers by the run's input and its count of assistant turns, so that a run taken up by
/// another process (or another release) gets the answers the first one would have got:
///
/// - "Deploy": a call of `deploy` (gated), then "Deployed.";
/// - "Notify": a call of `notify` (not idempotent), then "Notified.";
/// - "Sync": a call of `sync` (idempotent), then "Synced.";
/// - "Fail": fails while `down`, then "Recovered.";
/// - anything else: "Hello.".
pub(crate) struct ByInput {
    /// Whether the model fails the runs whose input is "Fail".
    pub(crate) down: bool,
}

impl Model for ByInput {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let input = request.messages.iter().find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        });
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let call = |tool: &str, done: &str| {
            if turn == 0 {
                Ok(ModelResponse::tool_calls([ToolCall::new(
                    "call_1",
                    tool,
                    json!({}),
                )]))
            } else {
                Ok(ModelResponse::text(done))
            }
        };
        let answer = match input {
            Some("Deploy") => call("deploy", "Deployed."),
            Some("Notify") => call("notify", "Notified."),
            Some("Sync") => call("sync", "Synced."),
            Some("Fail") if self.down => Err(ModelError::other("the model is down")),
            Some("Fail") => Ok(ModelResponse::text("Recovered.")),
            _ => Ok(ModelResponse::text("Hello.")),
        };
        Box::pin(async move { answer })
    }
}

/// The fixtures' agent: `deploy` (needs approval), `notify`, `sync` (idempotent), each counting
/// its runs in `ran`.
pub(crate) fn agent(down: bool, ran: &Arc<std::sync::Mutex<Vec<String>>>) -> Agent {
    let tool = |name: &'static str| {
        let ran = ran.clone();
        Tool::new(
            name,
            "Has a side effect",
            json!({"type": "object"}),
            move |_, ctx| {
                ran.lock().unwrap().push(format!("{}:{name}", ctx.run_id()));
                Ok(json!({"done": true}))
            },
        )
    };
    Agent::builder(AGENT)
        .model(ByInput { down })
        .tool(tool("deploy").require_approval())
        .tool(tool("notify"))
        .tool(tool("sync").idempotent(true))
        .build()
        .unwrap()
}

/// The lease of the processes that "die" while writing a fixture.
const DEAD_LEASE: Duration = Duration::from_millis(100);

/// Writes the fixture's runs into `store`:
///
/// - `pruned`: completed, then pruned (gone);
/// - `completed`: completed;
/// - `approved` and `rejected`: paused, decided (by "ada" and "bob"), resumed and completed (the
///   audit log's rows);
/// - `paused`: paused for an approval of `deploy`;
/// - `in_doubt`: `notify` started, the process died, recovered: in doubt;
/// - `crashed_notify`: `notify` started, the process died (running, its lease expired);
/// - `crashed_sync`: `sync` (idempotent) started, the process died (running, its lease expired);
/// - `failed`: the model failed;
/// - `leased`: queued and claimed by a worker that is gone (its lease expired);
/// - `ready`: queued, never claimed.
async fn populate<S: RunQueue>(store: Arc<S>) {
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let runs = Runs::from_arc(store.clone());
    let live = runs.attach(agent(false, &ran));
    let down = runs.attach(agent(true, &ran));

    live.run("Hello").run_id("pruned").await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cutoff = phaseo_now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;

    live.run("Hello").run_id("completed").await.unwrap();
    for (run_id, decision, by) in [
        ("approved", Decision::Approve, "ada"),
        (
            "rejected",
            Decision::Reject {
                message: "not today".into(),
            },
            "bob",
        ),
    ] {
        live.run("Deploy").run_id(run_id).await.unwrap();
        let stored = runs.load(run_id).await.unwrap();
        let item = phaseo_agent::store::PendingFilter {
            run_id: Some(run_id.into()),
            ..Default::default()
        };
        let item = runs.pending(&item).await.unwrap().items.remove(0);
        assert_eq!(item.run_id, stored.state.run_id());
        runs.decide(&item, decision, by).await.unwrap();
        live.resume(run_id).await.unwrap();
    }
    live.run("Deploy").run_id("paused").await.unwrap();

    // started (1), the turn with its call's start (2): the process dies after the tool ran.
    for (run_id, input) in [
        ("in_doubt", "Notify"),
        ("crashed_notify", "Notify"),
        ("crashed_sync", "Sync"),
    ] {
        let dying =
            Runs::without_queue(Arc::new(Hooked::dies_after(store.clone(), 2))).lease(DEAD_LEASE);
        let _ = dying
            .attach(agent(false, &ran))
            .run(input)
            .run_id(run_id)
            .await;
    }
    tokio::time::sleep(DEAD_LEASE * 2).await;
    let recovered = live.recover("in_doubt").await.unwrap();
    assert_eq!(recovered.pending().len(), 1);

    assert!(down.run("Fail").run_id("failed").await.is_err());

    runs.enqueue(AGENT, "Hello", EnqueueOptions::new().run_id("leased"))
        .await
        .unwrap();
    let claimed = store
        .claim(&ClaimRequest {
            agents: vec![AGENT.into()],
            worker: "gone".into(),
            lease_ms: 100,
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(claimed.leases.len(), 1);
    assert_eq!(claimed.leases[0].run_id, "leased");
    runs.enqueue(AGENT, "Hello", EnqueueOptions::new().run_id("ready"))
        .await
        .unwrap();

    assert_eq!(store.prune(cutoff).await.unwrap(), 1);
    tokio::time::sleep(DEAD_LEASE * 2).await;
}

/// Milliseconds since the epoch.
fn phaseo_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Opens a store an older release wrote (its runs as `populate` left them) and takes each run on.
pub(crate) async fn upgraded<S: RunQueue>(store: Arc<S>) {
    use phaseo_agent::store::{AuditFilter, PendingFilter, RunFilter, StoredStatus};
    use phaseo_agent::worker::Worker;
    use phaseo_agent::{AgentError, PendingKind, StoreError};

    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    let runs = Runs::from_arc(store.clone());
    let agent = runs.attach(agent(false, &ran));

    // Every run loads; the pruned one stays gone.
    let listed = runs
        .runs(&RunFilter {
            limit: 100,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    let mut ids: Vec<&str> = listed.items.iter().map(|r| r.run_id.as_str()).collect();
    ids.sort_unstable();
    let expected = [
        "approved",
        "completed",
        "crashed_notify",
        "crashed_sync",
        "failed",
        "in_doubt",
        "leased",
        "paused",
        "ready",
        "rejected",
    ];
    assert_eq!(ids, expected);
    for id in expected {
        runs.load(id).await.unwrap();
    }
    assert!(matches!(
        runs.load("pruned").await.unwrap_err(),
        AgentError::Store(StoreError::NotFound { .. })
    ));

    // Completed loads as completed, with its answer.
    for (id, answer) in [
        ("completed", "Hello."),
        ("approved", "Deployed."),
        ("rejected", "Deployed."),
    ] {
        let stored = runs.load(id).await.unwrap();
        assert_eq!(stored.status, StoredStatus::Completed, "{id}");
        assert_eq!(stored.state.output(), Some(answer), "{id}");
    }

    // The audit log shows the old decisions.
    let audit = runs.audit(&AuditFilter::default()).await.unwrap().items;
    let mut decided: Vec<(&str, &str)> = audit
        .iter()
        .map(|d| (d.run_id.as_str(), d.by.as_str()))
        .collect();
    decided.sort_unstable();
    assert_eq!(decided, [("approved", "ada"), ("rejected", "bob")]);

    // The paused run resumes after a decision.
    let paused = runs.load("paused").await.unwrap();
    assert_eq!(paused.status, StoredStatus::Paused);
    let waiting = runs
        .pending(&PendingFilter {
            run_id: Some("paused".into()),
            ..PendingFilter::default()
        })
        .await
        .unwrap()
        .items;
    assert_eq!(waiting.len(), 1);
    runs.decide(&waiting[0], Decision::Approve, "cy")
        .await
        .unwrap();
    let done = agent.resume("paused").await.unwrap();
    assert_eq!(done.output(), Some("Deployed."));

    // The run already in doubt waits for a person, who supplies the outcome.
    let in_doubt = runs.load("in_doubt").await.unwrap();
    assert_eq!(in_doubt.status, StoredStatus::InDoubt);
    assert_eq!(in_doubt.pending[0].kind, "outcome_unknown");
    runs.decide(
        &in_doubt.pending[0],
        Decision::Output {
            output: json!({"done": true}),
        },
        "cy",
    )
    .await
    .unwrap();
    let done = agent.resume("in_doubt").await.unwrap();
    assert_eq!(done.output(), Some("Notified."));

    // A crashed call of a tool that is not idempotent is recovered as in doubt; of one that is,
    // it runs again and the run completes.
    let recovered = agent.recover("crashed_notify").await.unwrap();
    assert_eq!(recovered.pending()[0].kind, PendingKind::OutcomeUnknown);
    assert_eq!(
        runs.load("crashed_notify").await.unwrap().status,
        StoredStatus::InDoubt
    );
    let recovered = agent.recover("crashed_sync").await.unwrap();
    assert_eq!(recovered.output(), Some("Synced."));

    // A failed run can be retried.
    let failed = runs.load("failed").await.unwrap();
    assert_eq!(failed.status, StoredStatus::Failed);
    assert!(failed.failure.unwrap().contains("the model is down"));
    let done = agent
        .retry("failed")
        .at(failed.version)
        .by("cy")
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Recovered."));

    // The queued runs, the ready one and the one whose worker is gone, are served by a worker.
    let worker = Worker::new(runs.clone())
        .agent(self::agent(false, &ran))
        .idle_check(Duration::from_millis(50));
    let serving = tokio::spawn(worker.run());
    for id in ["ready", "leased"] {
        let mut status = StoredStatus::Ready;
        for _ in 0..500 {
            status = runs.load(id).await.unwrap().status;
            if status == StoredStatus::Completed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status, StoredStatus::Completed, "{id}");
        assert_eq!(runs.load(id).await.unwrap().state.output(), Some("Hello."));
    }
    serving.abort();

    let ran = ran.lock().unwrap().clone();
    assert_eq!(
        ran,
        ["paused:deploy", "crashed_sync:sync"],
        "a tool ran that should not have"
    );
}

/// A copy of the SQLite fixture, in a folder of its own (deleted on drop).
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_of_the_previous_release_opens_and_every_run_goes_on() {
    use phaseo_agent::store::SqliteStore;

    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir =
        Copy(std::env::temp_dir().join(format!("phaseo_upgrade_{}_{nanos}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("runs.sqlite");
    std::fs::copy(fixtures().join("v1.sqlite"), &file).unwrap();
    let store = Arc::new(SqliteStore::open(&file).await.unwrap());
    upgraded(store.clone()).await;
    store.close().await;
    // Opened again: nothing more to migrate, and the runs are as they were left.
    let store = SqliteStore::open(&file).await.unwrap();
    assert_eq!(
        Runs::new(store).load("paused").await.unwrap().status,
        phaseo_agent::store::StoredStatus::Completed
    );
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    adopted(&pool, 2).await;
    pool.close().await;
}

/// The migrations a store of the previous release had applied (`1..=newest`, in its own table
/// `phaseo_schema`) are recorded as applied in sqlx's bookkeeping (`phaseo_migrations`), with
/// the checksums of this build's files, and the old table tells an older release that the
/// database is newer than it.
pub(crate) async fn adopted<DB>(pool: &sqlx::Pool<DB>, newest: i64)
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
    for<'r> i64: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    for<'r> bool: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    for<'r> &'r str: sqlx::ColumnIndex<DB::Row>,
{
    use sqlx::Row as _;

    let rows = sqlx::raw_sql("SELECT version, success FROM phaseo_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap();
    let applied: Vec<(i64, bool)> = rows
        .iter()
        .map(|r| (r.get("version"), r.get("success")))
        .collect();
    // Those, then this build's newer ones, each once and each applied.
    let expected: Vec<(i64, bool)> = (1..=applied.len() as i64).map(|v| (v, true)).collect();
    assert_eq!(applied, expected);
    assert!(
        applied.len() as i64 > newest,
        "this build's own migrations ran after: {applied:?}"
    );
    let old = sqlx::raw_sql("SELECT MAX(version) AS v FROM phaseo_schema")
        .fetch_one(pool)
        .await
        .unwrap();
    let old: i64 = old.get("v");
    assert!(
        old > 1_000,
        "the previous release's table still reads {old}"
    );
}

/// Writes the fixtures with the code as it is: `tests/fixtures/store_upgrade/v1.sqlite` and
/// `v1.postgres.sql` (a dump of a database of its own, `pg_dump --inserts --no-owner`, needs
/// `PHASEO_INTEROP_POSTGRES_URL` and `pg_dump` on the `PATH`). Run only when a release changes
/// the schema, at the commit before the change:
///
/// `cargo test -p phaseo-agent-tests --all-features --test it -- --ignored generate_fixtures`
#[tokio::test]
#[ignore = "writes the fixtures; run by hand at the commit they are made at"]
async fn generate_fixtures() {
    use phaseo_agent::store::{PostgresStore, SqliteStore};
    use sqlx::{AssertSqlSafe, PgPool};

    std::fs::create_dir_all(fixtures()).unwrap();
    let scratch = std::env::temp_dir().join(format!("phaseo_fixture_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let file = scratch.join("v1.sqlite");
    let store = SqliteStore::open(&file).await.unwrap();
    let shared: Arc<SqliteStore> = Arc::new(store);
    populate(shared.clone()).await;
    shared.close().await;
    drop(shared);
    // One file (no write-ahead log beside it), as a release's user would copy it.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE; VACUUM;")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    std::fs::copy(&file, fixtures().join("v1.sqlite")).unwrap();
    let _ = std::fs::remove_dir_all(&scratch);

    let admin = std::env::var("PHASEO_INTEROP_POSTGRES_URL").expect("PHASEO_INTEROP_POSTGRES_URL");
    let database = "phaseo_fixture_v1";
    let pool = PgPool::connect(&admin).await.unwrap();
    let drop_it = format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)");
    sqlx::raw_sql(AssertSqlSafe(drop_it.clone()))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&pool)
        .await
        .unwrap();
    let url = with_database(&admin, database);
    let store = Arc::new(PostgresStore::connect(&url).await.unwrap());
    populate(store.clone()).await;
    store.close().await;
    let dump = std::process::Command::new("pg_dump")
        .args([
            "--inserts",
            "--no-owner",
            "--no-privileges",
            "--dbname",
            &url,
        ])
        .output()
        .expect("pg_dump runs");
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    // psql's meta-commands (`\restrict`, in dumps of recent minor releases) are not SQL.
    let sql: String = String::from_utf8(dump.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('\\'))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(fixtures().join("v1.postgres.sql"), sql).unwrap();
    sqlx::raw_sql(AssertSqlSafe(drop_it))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

/// `url` with its database replaced by `database`.
pub(crate) fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{database}{query}", &base[..host_end])
}
