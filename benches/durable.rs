//! Durable runs: what a run store costs, each figure measured alternating with its floor round
//! by round and reported as the median of the per-round ratios (with their quartiles), beside
//! the disk's flush time of the same rounds.
//!
//! ```text
//! PHASEO_BENCH_POSTGRES_URL=$(interop/postgres.sh start) cargo bench --bench durable
//! cargo bench --bench durable -- --quick          # 8 rounds, short runs: a check, not figures
//! cargo bench --bench durable -- --sqlite-only    # without PostgreSQL
//! ```
//!
//! `DURABLE_BENCH_ROUNDS` sets the rounds (default 60; `--quick`: 8). What each figure measures
//! and against what: benches/durable/README.md.

use std::future::IntoFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use phaseo_agent::durable::Runs;
use phaseo_agent::store::{MemoryStore, RunStore};

// Shared with the durable tests; not every item is used here.
#[allow(dead_code)]
#[path = "../tests/support/durable.rs"]
mod support;

#[path = "durable/agents.rs"]
mod agents;
#[path = "durable/postgres.rs"]
mod postgres;
#[path = "durable/rounds.rs"]
mod rounds;
#[path = "durable/sqlite.rs"]
mod sqlite;
#[path = "durable/timed.rs"]
mod timed;

use agents::tool_run;
use rounds::{Contender, Flush, Measured, alternate};
use support::Hooked;
use timed::{Step, Timed};

struct Settings {
    rounds: usize,
    quick: bool,
    postgres: Option<String>,
}

fn settings() -> Settings {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("DURABLE_BENCH_QUICK").is_ok_and(|v| v == "1");
    let sqlite_only = args.iter().any(|a| a == "--sqlite-only");
    let rounds = std::env::var("DURABLE_BENCH_ROUNDS")
        .ok()
        .map(|r| r.parse().expect("DURABLE_BENCH_ROUNDS: a number"))
        .unwrap_or(if quick { 8 } else { 60 });
    let postgres = match std::env::var("PHASEO_BENCH_POSTGRES_URL") {
        Ok(url) if !sqlite_only => Some(url),
        _ if sqlite_only => None,
        _ => {
            eprintln!(
                "durable bench: PHASEO_BENCH_POSTGRES_URL is not set, and the PostgreSQL figures \
                 were asked for (the default); set it (e.g. to `interop/postgres.sh start`'s \
                 URL) or pass --sqlite-only"
            );
            std::process::exit(2);
        }
    };
    Settings {
        rounds,
        quick,
        postgres,
    }
}

/// One line of the final table.
struct Row {
    measure: String,
    figure: String,
    target: String,
    flush: String,
}

fn ratio_text((q1, median, q3): (f64, f64, f64)) -> String {
    format!("{median:.2}× ({q1:.2}–{q3:.2})")
}

fn flush_text(m: &Measured) -> String {
    let (median, low, high) = m.flush();
    format!("{median:.2} ms ({low:.2}–{high:.2})")
}

fn ms(x: f64) -> String {
    format!("{x:.3} ms")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("phaseo-bench-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main() {
    let settings = settings();
    sqlite::install_capture();
    let rt = runtime();
    let dir = scratch();
    let flush = Flush::new(&dir);
    let rounds = settings.rounds;
    let mut rows = Vec::new();
    let started = Instant::now();
    eprintln!(
        "[durable] {rounds} rounds; disk flush (8 KiB fdatasync) now {:.2} ms; load average {}",
        flush.measure(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    // The floor of the SQLite NORMAL figure runs the store's statements, copied into the bench:
    // checked against what the store sends today.
    let statements = sqlite::statements_match(&rt, &dir);
    if let Err(e) = &statements {
        eprintln!(
            "[durable] WARNING: the SQLite NORMAL floor's statements are not the store's any more \
             (update benches/durable/sqlite.rs): {e}"
        );
    }
    commits(&rt, &mut rows);
    sqlite_figures(&rt, &dir, &flush, rounds, statements.is_ok(), &mut rows);
    let db = settings
        .postgres
        .as_deref()
        .map(|url| postgres::BenchDb::create(&rt, url));
    if let Some(db) = &db {
        postgres_figures(&rt, &db.url, &dir, &flush, rounds, &mut rows);
    }
    share(&rt, &dir, &flush, &settings, db.as_ref(), &mut rows);
    growth(&rt, &dir, &settings, db.as_ref(), &mut rows);
    if let Some(db) = db {
        db.drop(&rt);
    }
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "\ndurable: {rounds} rounds per figure (unless said), {:.0} s; each ratio the median of the \
         per-round ratios (quartiles); flush: 8 KiB fdatasync per round, median (range)\n",
        started.elapsed().as_secs_f64()
    );
    println!("| measure | figure | target | disk flush |");
    println!("|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {} |",
            row.measure, row.figure, row.target, row.flush
        );
    }
}

/// Commits of a run with `t` tool turns of `c` calls each, counted as the writes reaching a store
/// (every write is one transaction).
fn commits(rt: &tokio::runtime::Runtime, rows: &mut Vec<Row>) {
    for (turns, calls) in [(1, 1), (20, 1), (5, 4), (4, 5), (2, 10)] {
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        let store: Arc<dyn RunStore> = Arc::new(
            Hooked::new(Arc::new(MemoryStore::new())).after_write(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
            }),
        );
        rt.block_on(
            Runs::without_queue(store)
                .attach(tool_run(turns, calls, None))
                .run("Go")
                .into_future(),
        )
        .unwrap();
        let commits = count.load(Ordering::SeqCst);
        let target = turns * (1 + calls) + 2;
        rows.push(Row {
            measure: format!("commits, {turns} tool turns of {calls} calls"),
            figure: format!("{commits}"),
            target: format!(
                "≤ {target} ({:.2}× the target)",
                commits as f64 / target as f64
            ),
            flush: "—".into(),
        });
    }
}

/// The SQLite store's appends in a 20-call run against the C library's floors.
fn sqlite_figures(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    flush: &Flush,
    rounds: usize,
    statements_match: bool,
    rows: &mut Vec<Row>,
) {
    for power_safe in [true, false] {
        let ours = sqlite::Ours::new(sqlite::store(rt, dir, power_safe), Step::Append);
        let n = ours.run(rt).1;
        let measured = if power_safe {
            let floor = sqlite::CommitFloor::new(dir, true);
            alternate(
                "SQLite FULL append",
                rounds,
                flush,
                &mut [
                    Box::new(|| floor.run(n)) as Contender,
                    Box::new(|| ours.run(rt).0),
                ],
            )
        } else {
            let mut floor = sqlite::StatementsFloor::new(rt, dir, false);
            alternate(
                "SQLite NORMAL append",
                rounds,
                flush,
                &mut [
                    Box::new(|| floor.run(n)) as Contender,
                    Box::new(|| ours.run(rt).0),
                ],
            )
        };
        let (measure, floor, target) = if power_safe {
            (
                "SQLite FULL: an append",
                "one-row commit, C library",
                "≤ 1.3×",
            )
        } else {
            (
                "SQLite NORMAL: an append",
                if statements_match {
                    "the store's statements, C library"
                } else {
                    "STALE: statements the store no longer sends, C library"
                },
                "≤ 1.5×",
            )
        };
        rows.push(Row {
            measure: measure.into(),
            figure: format!(
                "{} (ours {} per append, {n} appends a run; floor, {floor}: {})",
                ratio_text(measured.ratio(1, 0)),
                ms(measured.median(1)),
                ms(measured.median(0))
            ),
            target: target.into(),
            flush: flush_text(&measured),
        });
    }
}

/// The PostgreSQL store against pgbench and LangGraph.
fn postgres_figures(
    rt: &tokio::runtime::Runtime,
    url: &str,
    dir: &std::path::Path,
    flush: &Flush,
    rounds: usize,
    rows: &mut Vec<Row>,
) {
    let pgbench = postgres::Pgbench::new(url, dir);
    eprintln!("[durable] {}", pgbench.version());

    // (i) An append against a bare one-row commit.
    let ours = sqlite::Ours::new(postgres::store(rt, url, 2), Step::Append);
    let n = ours.run(rt).1;
    let measured = alternate(
        "PostgreSQL append",
        rounds,
        flush,
        &mut [
            Box::new(|| pgbench.run("commit", n)) as Contender,
            Box::new(|| ours.run(rt).0),
        ],
    );
    rows.push(Row {
        measure: "PostgreSQL: an append".into(),
        figure: format!(
            "{} (ours {}; pgbench (i) bare commit {})",
            ratio_text(measured.ratio(1, 0)),
            ms(measured.median(1)),
            ms(measured.median(0))
        ),
        target: "≤ 1.3×".into(),
        flush: flush_text(&measured),
    });

    // (ii) A step (append + load) against a journal row + 6.7 KB read, and LangGraph's
    // put + get_tuple, the three in each round.
    let lg = std::cell::RefCell::new(postgres::LangGraph::start(url));
    let ours = sqlite::Ours::new(postgres::store(rt, url, 2), Step::AppendLoad);
    let n = ours.run(rt).1;
    let measured = alternate(
        "PostgreSQL step",
        rounds,
        flush,
        &mut [
            Box::new(|| pgbench.run("journal", n)) as Contender,
            Box::new(|| ours.run(rt).0),
            Box::new(|| lg.borrow_mut().latency(n)),
        ],
    );
    rows.push(Row {
        measure: "PostgreSQL: a step (append + load of the run)".into(),
        figure: format!(
            "{} (ours {}; pgbench (ii) journal row + 6.7 KB read {})",
            ratio_text(measured.ratio(1, 0)),
            ms(measured.median(1)),
            ms(measured.median(0))
        ),
        target: "≤ 1.5×".into(),
        flush: flush_text(&measured),
    });
    rows.push(Row {
        measure: "against LangGraph, one client (its put + get_tuple over our step)".into(),
        figure: format!(
            "{} faster (LangGraph {}, same rounds)",
            ratio_text(measured.ratio(2, 1)),
            ms(measured.median(2))
        ),
        target: "≥ 3×".into(),
        flush: flush_text(&measured),
    });

    // Four clients: steps per second against LangGraph's put + get_tuple per second.
    let clients = 4;
    let timed = Arc::new(Timed::new(
        postgres::store(rt, url, clients as u32),
        Step::AppendLoad,
    ));
    let n = {
        postgres::steps_at_once(rt, &timed, clients);
        // LangGraph does as many operations per thread as one of our runs has steps.
        let runs = Runs::without_queue(timed.clone());
        timed.take();
        rt.block_on(runs.attach(tool_run(20, 1, None)).run("Go").into_future())
            .unwrap();
        timed.take().1
    };
    let measured = alternate(
        "PostgreSQL, 4 clients",
        rounds,
        flush,
        &mut [
            Box::new(|| lg.borrow_mut().throughput(clients, n)) as Contender,
            Box::new(|| postgres::steps_at_once(rt, &timed, clients)),
        ],
    );
    rows.push(Row {
        measure: format!("against LangGraph, {clients} clients (steps per second)"),
        figure: format!(
            "{} the throughput (ours {:.0}/s, LangGraph {:.0}/s)",
            ratio_text(measured.ratio(0, 1)),
            1000.0 / measured.median(1),
            1000.0 / measured.median(0)
        ),
        target: "≥ 5×".into(),
        flush: flush_text(&measured),
    });
    lg.into_inner().stop();
}

/// The store's share of a 20-call run whose model answers after `delay` a turn: per round, the
/// run without a store, on SQLite (FULL), on PostgreSQL and on `MemoryStore` (the durable layer's
/// own cost, no database); share = (with − without) / with.
fn share(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    flush: &Flush,
    settings: &Settings,
    db: Option<&postgres::BenchDb>,
    rows: &mut Vec<Row>,
) {
    let sqlite = Runs::without_queue(sqlite::store(rt, dir, true));
    let pg = db.map(|db| Runs::without_queue(postgres::store(rt, &db.url, 2)));
    let memory = Runs::new(MemoryStore::new());
    for (delay, rounds) in [
        (20, settings.rounds),
        // A round of three 4.2 s runs: fewer rounds, so that the whole bench stays under 15 min.
        (200, (settings.rounds / 3).max(2)),
    ] {
        let delay = Duration::from_millis(delay);
        let time = |runs: Option<&Runs>| {
            let agent = tool_run(20, 1, Some(delay));
            let started = Instant::now();
            match runs {
                Some(runs) => {
                    rt.block_on(runs.attach(agent).run("Go").into_future())
                        .unwrap();
                }
                None => {
                    rt.block_on(agent.run("Go").into_future()).unwrap();
                }
            }
            started.elapsed().as_secs_f64() * 1000.0
        };
        let mut contenders: Vec<Contender> =
            vec![Box::new(|| time(None)), Box::new(|| time(Some(&sqlite)))];
        if let Some(pg) = &pg {
            contenders.push(Box::new(move || time(Some(pg))));
        }
        contenders.push(Box::new(|| time(Some(&memory))));
        let label = format!("share at {} ms a turn", delay.as_millis());
        let measured = alternate(&label, rounds, flush, &mut contenders);
        let mut stores = vec![("SQLite FULL", "2 %", "0.2 %")];
        if pg.is_some() {
            stores.push(("PostgreSQL", "4 %", "0.5 %"));
        }
        // What the durable layer costs with no database under it: the part of the shares above
        // that no store can remove.
        stores.push((
            "MemoryStore (no database)",
            "— (a reference)",
            "— (a reference)",
        ));
        for (k, (name, at20, at200)) in stores.iter().enumerate() {
            let (q1, median, q3) = measured.per_round(|r| (r[k + 1] - r[0]) / r[k + 1] * 100.0);
            rows.push(Row {
                measure: format!(
                    "{name}: the store's share of a 20-call run, model {} ms a turn ({rounds} rounds)",
                    delay.as_millis()
                ),
                figure: format!(
                    "{median:.2} % ({q1:.2}–{q3:.2}) (run {} against {} without a store)",
                    ms(measured.median(k + 1)),
                    ms(measured.median(0))
                ),
                target: {
                    let target = if delay.as_millis() == 20 { at20 } else { at200 };
                    if target.starts_with('—') {
                        (*target).to_owned()
                    } else {
                        format!("≤ {target}")
                    }
                },
                flush: flush_text(&measured),
            });
        }
    }
}

/// Bytes stored per step of one conversation after 10, 100, 1,000 one-call steps: on
/// PostgreSQL, the growth of the store's tables (`pg_total_relation_size`); on SQLite, of the
/// file (after the store closed it, WAL checkpointed).
fn growth(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    settings: &Settings,
    db: Option<&postgres::BenchDb>,
    rows: &mut Vec<Row>,
) {
    let lengths: &[usize] = if settings.quick {
        &[10, 100]
    } else {
        &[10, 100, 1000]
    };
    let mut sqlite_figures = Vec::new();
    for &steps in lengths {
        let path = dir.join(format!("growth-{steps}.db"));
        let empty = rt.block_on(async {
            let store = phaseo_agent::store::SqliteStore::open(&path).await.unwrap();
            store.close().await;
            std::fs::metadata(&path).unwrap().len()
        });
        rt.block_on(async {
            let store = Arc::new(phaseo_agent::store::SqliteStore::open(&path).await.unwrap());
            Runs::without_queue(store.clone())
                .attach(tool_run(steps, 1, None))
                .run("Go")
                .into_future()
                .await
                .unwrap();
            store.close().await;
        });
        let bytes = std::fs::metadata(&path).unwrap().len() - empty;
        sqlite_figures.push(format!("{steps}: {:.0} B", bytes as f64 / steps as f64));
    }
    rows.push(Row {
        measure: "SQLite: bytes stored per step, by the run's steps".into(),
        figure: sqlite_figures.join("; "),
        target: "flat".into(),
        flush: "—".into(),
    });
    let Some(db) = db else { return };
    let mut figures = Vec::new();
    let runs = Runs::without_queue(postgres::store(rt, &db.url, 2));
    rt.block_on(async {
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        for &steps in lengths {
            let before = postgres::size(&pool).await;
            runs.attach(tool_run(steps, 1, None))
                .run("Go")
                .into_future()
                .await
                .unwrap();
            let after = postgres::size(&pool).await;
            figures.push(format!(
                "{steps}: {:.0} B",
                (after - before) as f64 / steps as f64
            ));
        }
    });
    rows.push(Row {
        measure: "PostgreSQL: bytes stored per step, by the run's steps".into(),
        figure: figures.join("; "),
        target: "flat".into(),
        flush: "—".into(),
    });
}
