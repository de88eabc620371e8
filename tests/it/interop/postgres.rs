//! The PostgreSQL run store against a real server (PostgreSQL 15 on loopback, started by
//! `interop/run.sh`): the conformance suite of `store_backend`, reopening a migrated database, a
//! schema from a newer build, and four processes' worth of stores opening a fresh database at once.
//! Each test works in a database of its own, created with a random name through the server's URL
//! and dropped afterwards, so reruns never collide.
//!
//! Run by `interop/run.sh` (`--ignored`); without the server's URL the tests fail, never pass.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use phaseo_agent::StoreError;
use phaseo_agent::store::{PostgresStore, RunStore, StoredStatus};
use sqlx::{AssertSqlSafe, PgPool};

use crate::store_backend::{
    LOAD_BOUND, ROW_BOUND, RawSql, T0, append, bounded_reads, conformance, entry,
    hundred_mb_body_refused, new_run,
};

/// The server's URL, naming a database the tests may create databases from.
fn admin_url() -> String {
    std::env::var("PHASEO_INTEROP_POSTGRES_URL").expect(
        "PHASEO_INTEROP_POSTGRES_URL is not set: run the interop suite with interop/run.sh, which \
         starts PostgreSQL",
    )
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
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

/// Runs raw SQL on `url`, through a pool of its own.
async fn execute(url: &str, sql: String) {
    let pool = PgPool::connect(url).await.expect("PostgreSQL answers");
    let done = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&pool).await;
    pool.close().await;
    done.expect("the statement runs");
}

/// Runs `test` with the URL of a fresh database, and drops the database after, whether the test
/// passed or not.
pub(super) async fn in_fresh_database<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let admin = admin_url();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .subsec_nanos();
    let name = format!("phaseo_test_{}_{nanos}", std::process::id());
    execute(&admin, format!("CREATE DATABASE {name}")).await;
    let outcome = std::panic::AssertUnwindSafe(test(with_database(&admin, &name)))
        .catch_unwind()
        .await;
    execute(&admin, format!("DROP DATABASE {name} WITH (FORCE)")).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The conformance suite on a store built by `builder` in a fresh database.
async fn conformance_with(builder: fn(&str) -> phaseo_agent::store::PostgresStoreBuilder) {
    in_fresh_database(|url| async move {
        let store = builder(&url).connect().await.expect("connects");
        conformance(Arc::new(store.clone()), Some(raw_on(&url))).await;
        store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_conformance() {
    conformance_with(PostgresStore::builder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_conformance_without_statement_cache() {
    // As behind a transaction-mode pooler: unnamed statements, one transaction an operation.
    conformance_with(|url| PostgresStore::builder(url).statement_cache(false)).await;
}

/// Raw SQL on `url`.
fn raw_on(url: &str) -> RawSql {
    let url = url.to_owned();
    Arc::new(move |sql| {
        let url = url.clone();
        Box::pin(async move { execute(&url, sql).await })
    })
}

/// Most of a run's appends (a turn, a call's start, its result) leave its status and lease as they
/// were: one statement inserts their entries and leaves the run's row as it was (the same row
/// version, `xmin`: no new tuple, no index entries, no `updated_ms`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_an_append_that_keeps_the_status_writes_only_the_journal() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        store.create(new_run("ja-1", "ja", T0)).await.unwrap();
        let row = || on_one_connection(&url, "SELECT 1", "SELECT xmin::text FROM phaseo_runs");
        let before = row().await;
        for v in 1..6 {
            store.append(append("ja-1", v, 1)).await.unwrap();
        }
        assert_eq!(
            row().await,
            before,
            "five running appends: the journal alone"
        );
        assert_eq!(store.load("ja-1").await.unwrap().version, 6);
        let mut paused = append("ja-1", 6, 1);
        paused.status = StoredStatus::Paused;
        store.append(paused).await.unwrap();
        assert_ne!(row().await, before, "a status that changes writes the row");
        store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_bounded_reads() {
    for cache in [true, false] {
        in_fresh_database(|url| async move {
            let store = PostgresStore::builder(&url)
                .statement_cache(cache)
                .max_row_bytes(ROW_BOUND)
                .max_load_bytes(LOAD_BOUND)
                .connect()
                .await
                .expect("connects");
            bounded_reads(&store).await;
            store.close().await;
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_hundred_mb_body_refused() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        hundred_mb_body_refused(&store, &raw_on(&url), "repeat('x', 100000000)").await;
        store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_reopen_is_a_no_op_and_a_newer_schema_is_refused() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        store.create(new_run("keep", "a", T0)).await.unwrap();
        store.close().await;

        let store = PostgresStore::connect(&url).await.expect("connects again");
        assert_eq!(store.load("keep").await.unwrap().rows, vec![entry(1)]);
        store.close().await;

        execute(
            &url,
            "INSERT INTO phaseo_migrations (version, description, success, checksum, execution_time) \
             VALUES (999, 'newer', TRUE, '\\x00'::bytea, 0)"
                .into(),
        )
        .await;
        assert_eq!(
            PostgresStore::connect(&url).await.unwrap_err(),
            StoreError::SchemaTooNew {
                found: 999,
                supported: 4
            }
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_fresh_database_opened_four_times_at_once() {
    in_fresh_database(|url| async move {
        let opens = (0..4).map(|_| PostgresStore::builder(&url).pool_size(2).connect());
        let stores = futures::future::join_all(opens).await;
        let stores: Vec<PostgresStore> = stores
            .into_iter()
            .map(|s| s.expect("every open succeeds"))
            .collect();
        stores[0].create(new_run("one", "a", T0)).await.unwrap();
        assert_eq!(stores[3].load("one").await.unwrap().version, 1);
        for store in &stores {
            store.close().await;
        }
    })
    .await;
}

/// Rows of the first column of `sql`'s result, as text, on one connection after `setup` (both
/// sent as simple queries, so `setup` may prepare statements that `sql` uses).
async fn on_one_connection(url: &str, setup: &str, sql: &str) -> Vec<String> {
    use sqlx::{Connection as _, Row as _};
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("PostgreSQL answers");
    sqlx::raw_sql(AssertSqlSafe(setup.to_owned()))
        .execute(&mut conn)
        .await
        .expect("the setup runs");
    let rows = sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .fetch_all(&mut conn)
        .await
        .expect("the statement runs");
    rows.iter()
        .map(|row| row.try_get::<String, _>(0).expect("text"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_statements_are_planned_once_per_connection() {
    // The cluster the interop suite starts loads pg_stat_statements, which counts plans.
    in_fresh_database(|url| async move {
        execute(&url, "CREATE EXTENSION pg_stat_statements".into()).await;
        let store = PostgresStore::builder(&url)
            .pool_size(2)
            .connect()
            .await
            .expect("connects");
        store.create(new_run("planned", "a", T0)).await.unwrap();
        execute(&url, "SELECT pg_stat_statements_reset()".into()).await;
        for _ in 0..40 {
            store.load("planned").await.unwrap();
        }
        let counts = on_one_connection(
            &url,
            "SELECT 1",
            "SELECT calls::text || ' ' || plans::text FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND query LIKE '%FROM r, t%'",
        )
        .await;
        store.close().await;
        let [counts] = counts.as_slice() else {
            panic!("one load statement in pg_stat_statements, found {counts:?}");
        };
        let (calls, plans) = counts.split_once(' ').unwrap();
        assert_eq!(calls, "40");
        let plans: u32 = plans.parse().unwrap();
        assert!(
            plans <= 2,
            "40 loads on 2 connections were planned {plans} times"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_a_plan_for_any_run_finds_its_rows_by_key() {
    // One long run is all the journal holds: ANALYZE then counts one run id. A plan made for any
    // id must still find one run's rows through the key, not by reading every row.
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        store.create(new_run("long", "a", T0)).await.unwrap();
        store.close().await;
        execute(
            &url,
            "INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest) \
             SELECT 'long', v, 'turn', 1, repeat('x', 300), 'd' FROM generate_series(2, 5000) v; \
             INSERT INTO phaseo_pending (run_id, call_id, seq, agent_id, tool, kind, arguments, \
             digest, since_ms, version) SELECT 'long', 'c' || i, i, 'a', 't', 'hitl', '{}', 'd', \
             0, 1 FROM generate_series(1, 2000) i; \
             ANALYZE phaseo_journal, phaseo_pending"
                .into(),
        )
        .await;
        for (table, extra) in [
            ("phaseo_journal", "AND version > $2"),
            ("phaseo_pending", "AND seq > $2"),
        ] {
            let plan = on_one_connection(
                &url,
                &format!(
                    "SET plan_cache_mode = force_generic_plan; \
                     PREPARE q(text, bigint) AS SELECT * FROM {table} WHERE run_id = $1 {extra}"
                ),
                "EXPLAIN EXECUTE q('long', 4990)",
            )
            .await
            .join("\n");
            assert!(
                plan.contains(&format!("Index Scan using {table}_pkey"))
                    && !plan.contains("Seq Scan"),
                "{table}:\n{plan}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_a_store_finds_runs_by_key_after_its_tables_grew() {
    // The store's statements are planned while its tables are empty; they must not read a whole
    // table to find one run once the tables are large.
    in_fresh_database(|url| async move {
        let store = PostgresStore::builder(&url)
            .pool_size(1)
            .connect()
            .await
            .expect("connects");
        store.create(new_run("first", "a", T0)).await.unwrap();
        store.load("first").await.unwrap();
        execute(
            &url,
            "INSERT INTO phaseo_runs (run_id, agent_id, status, created_ms, updated_ms) \
             SELECT 'r' || i, 'a', 'paused', 0, 0 FROM generate_series(1, 20000) i; \
             INSERT INTO phaseo_journal (run_id, version, kind, format, body, digest) \
             SELECT 'r' || i, 1, 'started', 1, repeat('x', 100), 'd' FROM generate_series(1, 20000) i"
                .into(),
        )
        .await;
        // Rows read by sequential scans of the store's tables, as reported so far.
        let scans = || async {
            on_one_connection(
                &url,
                "SELECT 1",
                "SELECT coalesce(sum(seq_tup_read), 0)::text FROM pg_stat_user_tables \
                 WHERE relname IN ('phaseo_runs', 'phaseo_journal', 'phaseo_pending')",
            )
            .await
            .remove(0)
            .parse::<u64>()
            .expect("a count")
        };
        // A server process reports its table statistics as it exits: wait for the inserts' and
        // (below) the store's to be gone, so that a count cannot miss their scans; `left` is
        // how many may stay (the store's one connection, while it is open).
        let db = url.as_str();
        let alone = |left: &'static str| async move {
            for _ in 0..200 {
                let others = on_one_connection(
                    db,
                    "SELECT 1",
                    "SELECT count(*)::text FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .await;
                if others == [left] {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            panic!("other server processes stay connected to the test database");
        };
        alone("1").await;
        let before = scans().await;
        for _ in 0..20 {
            store.load("first").await.unwrap();
        }
        store.close().await;
        alone("0").await;
        // Rows read by sequential scans: the few of the tables before they grew, at most (the
        // store's process reports its statistics only as it exits).
        let read = scans().await - before;
        assert!(read < 100, "20 loads read {read} rows by sequential scans");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_queue_contract() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        crate::workers::queue_contract(Arc::new(store.clone())).await;
        store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_workers_serve_enqueued_runs_and_take_them_back_when_decided() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::connect(&url).await.expect("connects");
        crate::workers::serve_and_decide(phaseo_agent::durable::Runs::new(store.clone())).await;
        store.close().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run interop/run.sh"]
async fn postgres_queue_contract_behind_a_transaction_pooler() {
    in_fresh_database(|url| async move {
        let store = PostgresStore::builder(&url)
            .statement_cache(false)
            .connect()
            .await
            .expect("connects");
        crate::workers::queue_contract(Arc::new(store.clone())).await;
        store.close().await;
    })
    .await;
}

/// A PostgreSQL store of the previous release (`tests/fixtures/store_upgrade/v1.postgres.sql`,
/// replayed into a fresh database) opens with today's code, and every run goes on from where
/// it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: run by interop/run.sh"]
async fn postgres_store_of_the_previous_release_opens_and_every_run_goes_on() {
    in_fresh_database(|url| async move {
        let dump =
            std::fs::read_to_string(crate::store_upgrade::fixtures().join("v1.postgres.sql"))
                .expect("the fixture is there");
        execute(&url, dump).await;
        let store = Arc::new(PostgresStore::connect(&url).await.expect("connects"));
        crate::store_upgrade::upgraded(store.clone()).await;
        store.close().await;
        let store = PostgresStore::connect(&url).await.expect("connects again");
        store.close().await;
        let pool = PgPool::connect(&url).await.expect("PostgreSQL answers");
        crate::store_upgrade::adopted(&pool, 3).await;
        pool.close().await;
    })
    .await;
}
