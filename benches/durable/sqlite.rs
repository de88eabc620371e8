//! SQLite: the store's appends against the same bundled SQLite driven through its C library
//! (rusqlite, linking the very `libsqlite3-sys` sqlx links), with the store's pragmas.

use std::future::IntoFuture;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use phaseo_agent::durable::Runs;
use phaseo_agent::store::{RunStore, SqliteStore};
use rusqlite::{Connection, ToSql};

use crate::agents::tool_run;
use crate::timed::{Step, Timed};

/// The store's connection settings (`SqliteStoreBuilder::open` in `store/sqlite/connect.rs`): WAL,
/// `synchronous` FULL when power-safe (the default) else NORMAL, foreign keys on, a 5 s busy
/// timeout (the builder's default).
pub fn connect(path: &Path, power_safe: bool) -> Connection {
    let conn = Connection::open(path).expect("floor database");
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(
        None,
        "synchronous",
        if power_safe { "FULL" } else { "NORMAL" },
    )
    .unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    conn
}

/// The floor of an append on a power-safe store: one-row commits, each `BEGIN IMMEDIATE` (as
/// the store's writes), an `INSERT` of a 300-byte text, `COMMIT`.
pub struct CommitFloor {
    conn: Connection,
}

impl CommitFloor {
    pub fn new(dir: &Path, power_safe: bool) -> Self {
        let conn = connect(&dir.join("floor-commit.db"), power_safe);
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT",
        )
        .unwrap();
        CommitFloor { conn }
    }

    /// `n` one-row commits: ms per commit.
    pub fn run(&self, n: u64) -> f64 {
        let body = "x".repeat(300);
        let started = Instant::now();
        for _ in 0..n {
            self.conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            self.conn
                .prepare_cached("INSERT INTO floor (body) VALUES (?1)")
                .unwrap()
                .execute([&body])
                .unwrap();
            self.conn.execute_batch("COMMIT").unwrap();
        }
        started.elapsed().as_secs_f64() * 1000.0 / n as f64
    }
}

/// What the store sends for an append of one journal entry that leaves the run's status and lease
/// as they were (`append_journal` in `store/sqlite/statements.rs`, every append of a running run
/// but its last), copied here: the entry's row, inserted where the run is in that status under
/// that lease (or none) and at the version read, committed on its own. Keep in step with the
/// store: the bench compares them at its start (`statements_match`).
pub const APPEND_INSERT: &str = "INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest) \
     SELECT $1, v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES ($6, $7, $8, $9, $10)) v \
     WHERE EXISTS (SELECT 1 FROM phaseo_runs WHERE run_id = $1 AND status = $3 AND CASE WHEN $4 IS NULL \
     THEN lease_until_ms IS NULL ELSE lease_token = $4 AND lease_until_ms > $5 END) \
     AND EXISTS (SELECT 1 FROM phaseo_journal WHERE run_id = $1 AND version = $2)";

/// The floor of an append on a store that is not power-safe: the store's own statement
/// ([`APPEND_INSERT`]), committed on its own as the store commits it, on a file with the store's
/// schema, through the C library.
pub struct StatementsFloor {
    conn: Connection,
    run_id: String,
    version: i64,
    kind: String,
    format: i64,
    body: String,
    digest: String,
}

impl StatementsFloor {
    /// A file with the store's schema and one finished run (made by the store itself), whose
    /// largest journal entry each floor append writes again.
    pub fn new(rt: &tokio::runtime::Runtime, dir: &Path, power_safe: bool) -> Self {
        let path = dir.join(format!("floor-statements-{power_safe}.db"));
        let run_id = rt.block_on(async {
            let store = Arc::new(
                SqliteStore::builder(&path)
                    .power_safe(power_safe)
                    .open()
                    .await
                    .unwrap(),
            );
            let done = Runs::without_queue(store.clone())
                .attach(tool_run(20, 1, None))
                .run("Go")
                .into_future()
                .await
                .unwrap();
            store.close().await;
            done.state.run_id().to_owned()
        });
        let conn = connect(&path, power_safe);
        let (version, kind, format, body, digest) = conn
            .query_row(
                "SELECT (SELECT max(version) FROM phaseo_journal WHERE run_id = ?1), kind, format, \
                 body, digest FROM phaseo_journal WHERE run_id = ?1 ORDER BY length(body) DESC \
                 LIMIT 1",
                [&run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        StatementsFloor {
            conn,
            run_id,
            version,
            kind,
            format,
            body,
            digest,
        }
    }

    /// `n` appends of one entry: ms per append.
    pub fn run(&mut self, n: u64) -> f64 {
        let started = Instant::now();
        for _ in 0..n {
            let next = self.version + 1;
            let now = 1_780_000_000_000i64 + next;
            let no_fence: Option<i64> = None;
            // The floor's run is finished: its status, and no lease.
            let mut insert = self.conn.prepare_cached(APPEND_INSERT).unwrap();
            let params: [(&str, &dyn ToSql); 10] = [
                ("$1", &self.run_id),
                ("$2", &self.version),
                ("$3", &"completed"),
                ("$4", &no_fence),
                ("$5", &now),
                ("$6", &next),
                ("$7", &self.kind),
                ("$8", &self.format),
                ("$9", &self.body),
                ("$10", &self.digest),
            ];
            let inserted = insert.execute(&params[..]).unwrap();
            assert_eq!(inserted, 1, "the floor's run moved on");
            self.version = next;
        }
        started.elapsed().as_secs_f64() * 1000.0 / n as f64
    }
}

/// A store's appends during a 20-call run whose model answers at once: ms per append, and how
/// many.
pub struct Ours {
    timed: Arc<Timed>,
    runs: Runs,
}

impl Ours {
    pub fn new(store: Arc<dyn RunStore>, step: Step) -> Self {
        let timed = Arc::new(Timed::new(store, step));
        Ours {
            runs: Runs::without_queue(timed.clone()),
            timed,
        }
    }

    /// One run: (ms per timed operation, operations).
    pub fn run(&self, rt: &tokio::runtime::Runtime) -> (f64, u64) {
        self.timed.take();
        rt.block_on(
            self.runs
                .attach(tool_run(20, 1, None))
                .run("Go")
                .into_future(),
        )
        .unwrap();
        let (took, count) = self.timed.take();
        (took.as_secs_f64() * 1000.0 / count as f64, count)
    }
}

/// A SQLite store in `dir`.
pub fn store(rt: &tokio::runtime::Runtime, dir: &Path, power_safe: bool) -> Arc<dyn RunStore> {
    let path = dir.join(format!("runs-{power_safe}.db"));
    Arc::new(
        rt.block_on(SqliteStore::builder(path).power_safe(power_safe).open())
            .unwrap(),
    )
}

/// Whether the store still sends [`APPEND_INSERT`] for an append: the
/// statements sqlx logs (its `sqlx::query` events) during a one-call run on a SQLite store,
/// compared with the floor's, whitespace aside. `Err`: what the store sent instead.
///
/// sqlx runs SQLite's statements on a thread of its own, so the subscriber that captures them is
/// the process's global one ([`install_capture`]), which answers only while capturing.
pub fn statements_match(rt: &tokio::runtime::Runtime, dir: &Path) -> Result<(), String> {
    let path = dir.join("statements.db");
    CAPTURED.lock().unwrap().clear();
    CAPTURING.store(true, Ordering::SeqCst);
    rt.block_on(async {
        let store = Arc::new(
            SqliteStore::builder(&path)
                .power_safe(false)
                .open()
                .await
                .unwrap(),
        );
        Runs::without_queue(store.clone())
            .attach(tool_run(1, 1, None))
            .run("Go")
            .into_future()
            .await
            .unwrap();
        store.close().await;
    });
    CAPTURING.store(false, Ordering::SeqCst);
    let sent = std::mem::take(&mut *CAPTURED.lock().unwrap());
    let missing: Vec<&str> = [APPEND_INSERT]
        .into_iter()
        .filter(|floor| !sent.contains(&normalize(floor)))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        let mut seen = sent;
        seen.sort();
        seen.dedup();
        Err(format!(
            "not sent by the store: {missing:#?}\nsent: {seen:#?}"
        ))
    }
}

static CAPTURING: AtomicBool = AtomicBool::new(false);
static CAPTURED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs the process's `tracing` subscriber: it is interested in sqlx's statement events
/// only, and enabled only while [`statements_match`] captures them (every other callsite is
/// never enabled, as with no subscriber).
pub fn install_capture() {
    use tracing_subscriber::layer::SubscriberExt as _;
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
        .expect("the bench's tracing subscriber");
}

fn normalize(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A `tracing` layer keeping the SQL text of sqlx's statement events while capturing.
struct Capture;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if metadata.target() == "sqlx::query" {
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(
        &self,
        metadata: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        metadata.target() == "sqlx::query" && CAPTURING.load(Ordering::SeqCst)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        // sqlx sends the whole text in `db.statement` when its summary shortened it.
        let sql = if fields.statement.trim().is_empty() {
            fields.summary
        } else {
            fields.statement
        };
        CAPTURED.lock().unwrap().push(normalize(&sql));
    }
}

#[derive(Default)]
struct Fields {
    summary: String,
    statement: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "summary" => self.summary = value.to_owned(),
            "db.statement" => self.statement = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}
