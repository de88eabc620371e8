//! PostgreSQL: the store against pgbench on the same cluster, and against LangGraph's
//! `PostgresSaver`, in a database of the bench's own (`phaseo_bench`, made fresh, dropped at the
//! end), so that no other user of the cluster sees its tables.

use std::future::IntoFuture;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::{self, Value};
use phaseo_agent::store::{PostgresStore, RunStore};

use crate::agents::tool_run;
use crate::timed::Timed;

/// The bench's database on the cluster of `url`.
pub struct BenchDb {
    admin: String,
    pub url: String,
}

const DB: &str = "phaseo_bench";

impl BenchDb {
    /// Drops and makes the database `phaseo_bench` on the cluster of `url`, with the floor's
    /// tables (`floor_schema.sql`).
    pub fn create(rt: &tokio::runtime::Runtime, url: &str) -> Self {
        let bench = with_database(url, DB);
        rt.block_on(async {
            let admin = sqlx::PgPool::connect(url)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to PHASEO_BENCH_POSTGRES_URL: {e}"));
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {DB} WITH (FORCE)"
            )))
            .execute(&admin)
            .await
            .unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {DB}")))
                .execute(&admin)
                .await
                .unwrap();
            admin.close().await;
            let pool = sqlx::PgPool::connect(&bench).await.unwrap();
            sqlx::raw_sql(include_str!("floor_schema.sql"))
                .execute(&pool)
                .await
                .unwrap();
            pool.close().await;
        });
        BenchDb {
            admin: url.to_owned(),
            url: bench,
        }
    }

    pub fn drop(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(async {
            let admin = sqlx::PgPool::connect(&self.admin).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {DB} WITH (FORCE)"
            )))
            .execute(&admin)
            .await
            .unwrap();
        });
    }
}

/// `url` with its database replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{db}{query}", &base[..host_end])
}

/// A PostgreSQL store on the bench's database.
pub fn store(rt: &tokio::runtime::Runtime, url: &str, pool: u32) -> Arc<dyn RunStore> {
    Arc::new(
        rt.block_on(PostgresStore::builder(url).pool_size(pool).connect())
            .unwrap(),
    )
}

/// pgbench (from `postgresql-15`), one client, `-n -M prepared`, with the scripts of
/// `pgbench_floor.sh`.
pub struct Pgbench {
    bin: PathBuf,
    url: String,
    dir: PathBuf,
}

/// (i): a bare one-row commit.
pub const COMMIT: &str = "INSERT INTO phaseo_floor.tiny (v) VALUES (1);\n";
/// (ii): a ~120 B journal row committed, then a 6.7 KB read.
pub const JOURNAL: &str = "INSERT INTO phaseo_floor.journal (run_id, entry) VALUES (1, :entry);\n\
                           SELECT body FROM phaseo_floor.snapshot WHERE id = 1;\n";
const ENTRY: &str =
    r#"{"kind":"tool_result","call_id":"call_status_1","output":{"status":"ok","service":"api"}}"#;

impl Pgbench {
    pub fn new(url: &str, dir: &Path) -> Self {
        let bin = std::env::var_os("PHASEO_INTEROP_POSTGRES_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"))
            .join("pgbench");
        let bin = if bin.exists() {
            bin
        } else {
            PathBuf::from("pgbench")
        };
        std::fs::write(dir.join("commit.sql"), COMMIT).unwrap();
        std::fs::write(dir.join("journal.sql"), JOURNAL).unwrap();
        Pgbench {
            bin,
            url: url.to_owned(),
            dir: dir.to_owned(),
        }
    }

    /// `n` transactions of `script` (`commit` or `journal`): pgbench's latency average, ms
    /// (the connection's setup not counted).
    pub fn run(&self, script: &str, n: u64) -> f64 {
        let out = Command::new(&self.bin)
            .args(["-n", "-c", "1", "-j", "1", "-M", "prepared", "-t"])
            .arg(n.to_string())
            .arg("-D")
            .arg(format!("entry={ENTRY}"))
            .arg("-f")
            .arg(self.dir.join(format!("{script}.sql")))
            .arg(&self.url)
            .output()
            .unwrap_or_else(|e| panic!("pgbench ({}): {e}", self.bin.display()));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pgbench failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("latency average = "))
            .and_then(|l| l.trim_end_matches(" ms").trim().parse().ok())
            .unwrap_or_else(|| panic!("no latency in pgbench's output: {stdout}"))
    }

    pub fn version(&self) -> String {
        Command::new(&self.bin)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }
}

/// `clients` 20-call runs at once on one store (a pool of as many connections), each append
/// followed by a load of its run: the wall time over the steps, ms (the inverse of steps per
/// second).
pub fn steps_at_once(rt: &tokio::runtime::Runtime, timed: &Arc<Timed>, clients: usize) -> f64 {
    let runs = Runs::without_queue(timed.clone());
    timed.take();
    let started = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let durable = runs.attach(tool_run(20, 1, None));
                tokio::spawn(async move { durable.run("Go").into_future().await.unwrap() })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let wall = started.elapsed();
    let (_, count) = timed.take();
    wall.as_secs_f64() * 1000.0 / count as f64
}

/// LangGraph's `PostgresSaver` in a Python process of its own (`langgraph.sh URL --serve`),
/// started once and told by the bench when to measure, so that its rounds alternate with ours.
pub struct LangGraph {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl LangGraph {
    pub fn start(url: &str) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/durable/langgraph.sh");
        let mut child = Command::new("bash")
            .arg(script)
            .arg(url)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("langgraph.sh");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lg = LangGraph {
            child,
            stdin,
            stdout,
        };
        let hello = lg.ask("hello");
        eprintln!("[durable] LangGraph: {hello}");
        lg
    }

    fn ask(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        let read = self.stdout.read_line(&mut answer).unwrap();
        assert!(read > 0, "the LangGraph process ended (see its stderr)");
        serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("LangGraph answered {answer:?}: {e}"))
    }

    /// `n` put + get_tuple with one client: ms each.
    pub fn latency(&mut self, n: u64) -> f64 {
        self.ask(&format!("latency {n}"))["ms"].as_f64().unwrap()
    }

    /// `threads` threads each doing `n` put + get_tuple: the wall time over all of them, ms.
    pub fn throughput(&mut self, threads: usize, n: u64) -> f64 {
        self.ask(&format!("throughput {threads} {n}"))["ms"]
            .as_f64()
            .unwrap()
    }

    pub fn stop(mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// Bytes the bench's database holds in the store's tables.
pub async fn size(pool: &sqlx::PgPool) -> i64 {
    let (bytes,): (i64,) = sqlx::query_as(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'phaseo_%'",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    bytes
}
