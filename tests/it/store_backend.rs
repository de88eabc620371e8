//! The run-store backends against one conformance suite: [`conformance`] takes any
//! [`RunStore`] and checks the contract of `store::backend` (the compare-and-swap on a run's
//! version, all-or-nothing appends, snapshots, pending calls and their paging, the audit log,
//! listing, retention, damaged rows), each check under its own name.
//!
//! SQLite runs it here, on a file in the temporary folder, with the file's own cases (reopening,
//! a schema from a newer build, two stores on one file, opening a fresh file twice at once).
//! PostgreSQL runs it in `interop/postgres.rs`, against a real server.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use phaseo_agent::StoreError;
use phaseo_agent::store::{
    Append, AuditFilter, DecisionRow, JournalRow, NewRun, PendingFilter, PendingRow, RunFilter,
    RunStore, SnapshotRow, SqliteStore, StoredStatus,
};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

/// Runs one SQL statement on the store's database, outside the store (to damage a row).
pub(crate) type RawSql = Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>;

/// When the suite's rows are written (above the prune check's times, which are below 1,000).
pub(crate) const T0: i64 = 1_000_000;

pub(crate) fn entry(version: u64) -> JournalRow {
    JournalRow {
        version,
        kind: "turn".into(),
        format: 1,
        body: format!("{{\"v\": {version}, \"text\": \"é\\n\\u00e9  \"}}"),
        digest: format!("digest-{version}"),
    }
}

pub(crate) fn new_run(run_id: &str, agent_id: &str, at_ms: i64) -> NewRun {
    NewRun {
        run_id: run_id.into(),
        agent_id: agent_id.into(),
        status: StoredStatus::Running,
        row: entry(1),
        pending: Vec::new(),
        at_ms,
    }
}

/// `count` entries after `expected`, nothing else.
pub(crate) fn append(run_id: &str, expected: u64, count: u64) -> Append {
    Append {
        run_id: run_id.into(),
        expected_version: expected,
        rows: (expected + 1..=expected + count).map(entry).collect(),
        status: StoredStatus::Running,
        snapshot: None,
        pending: None,
        decisions: Vec::new(),
        at_ms: T0 + 1,
        fence: None,
    }
}

fn waiting(run_id: &str, call_id: &str, since_ms: i64) -> PendingRow {
    PendingRow {
        run_id: run_id.into(),
        agent_id: String::new(),
        call_id: call_id.into(),
        tool: "refund".into(),
        kind: "tool_approval".into(),
        arguments: format!("{{\"call\": \"{call_id}\"}}"),
        digest: format!("args-{call_id}"),
        since_ms,
        version: 1,
        decision: None,
        decided_by: None,
    }
}

fn decision(run_id: &str, call_id: &str, version: u64) -> DecisionRow {
    DecisionRow {
        run_id: run_id.into(),
        call_id: call_id.into(),
        tool: "refund".into(),
        decision: "{\"approve\": true}".into(),
        by: "alice".into(),
        at_ms: T0 + 2,
        digest: format!("args-{call_id}"),
        version,
    }
}

/// The whole suite, each check on runs of its own. `raw` damages rows from outside the store: a
/// store in memory has no outside, and skips those checks.
pub(crate) async fn conformance(store: Arc<dyn RunStore>, raw: Option<RawSql>) {
    create_and_already_exists(&*store).await;
    stale_append_conflicts_and_writes_nothing(&*store).await;
    status_time_moves_with_the_status_alone(&*store).await;
    multi_row_append_is_all_or_nothing(&*store).await;
    one_of_eight_racers_wins(store.clone()).await;
    load_after_snapshot_reads_only_later_rows(&*store).await;
    pending_replaced_and_cleared(&*store).await;
    pending_filters_and_paging(&*store).await;
    pending_limit_is_capped(&*store).await;
    audit_is_append_only_and_kept_by_prune(&*store).await;
    runs_listing(&*store).await;
    prune_keeps_unfinished_runs(&*store).await;
    if let Some(raw) = raw {
        damaged_row_fails_only_its_run(&*store, &raw).await;
    }
    damaged_pending_rows_are_named(&*store).await;
    broken_contract_refused(&*store).await;
}

async fn create_and_already_exists(store: &dyn RunStore) {
    store.create(new_run("ca-1", "ca", T0)).await.unwrap();
    let loaded = store.load("ca-1").await.unwrap();
    assert_eq!(loaded.run_id, "ca-1");
    assert_eq!(loaded.agent_id, "ca");
    assert_eq!(loaded.status, StoredStatus::Running);
    assert_eq!(loaded.version, 1);
    assert_eq!(
        loaded.rows,
        vec![entry(1)],
        "bodies round-trip byte for byte"
    );
    assert_eq!(loaded.snapshot, None);
    assert!(loaded.pending.is_empty());
    assert_eq!((loaded.created_ms, loaded.updated_ms), (T0, T0));

    let again = store.create(new_run("ca-1", "other", T0 + 5)).await;
    assert_eq!(
        again,
        Err(StoreError::AlreadyExists {
            run_id: "ca-1".into()
        })
    );
    assert_eq!(store.load("ca-1").await.unwrap(), loaded, "untouched");
    assert_eq!(
        store.load("ca-missing").await,
        Err(StoreError::NotFound {
            run_id: "ca-missing".into()
        })
    );
    assert_eq!(
        store.append(append("ca-missing", 1, 1)).await,
        Err(StoreError::NotFound {
            run_id: "ca-missing".into()
        })
    );
}

/// `updated_ms` is since when the run is in its status: an append that keeps the status (most of
/// a run's appends) writes the journal alone; one that changes it sets the time.
async fn status_time_moves_with_the_status_alone(store: &dyn RunStore) {
    store.create(new_run("st-1", "st", T0)).await.unwrap();
    let mut a = append("st-1", 1, 2);
    a.at_ms = T0 + 10;
    store.append(a).await.unwrap();
    let loaded = store.load("st-1").await.unwrap();
    assert_eq!(
        (loaded.version, loaded.updated_ms),
        (3, T0),
        "running, still since T0"
    );
    let mut paused = append("st-1", 3, 1);
    paused.status = StoredStatus::Paused;
    paused.at_ms = T0 + 20;
    store.append(paused).await.unwrap();
    let mut decided = append("st-1", 4, 1);
    decided.status = StoredStatus::Paused;
    decided.decisions = vec![decision("st-1", "c1", 4)];
    decided.at_ms = T0 + 30;
    store.append(decided).await.unwrap();
    let loaded = store.load("st-1").await.unwrap();
    assert_eq!((loaded.status, loaded.version), (StoredStatus::Paused, 5));
    assert_eq!(
        loaded.updated_ms,
        T0 + 20,
        "paused since the write that paused it"
    );
    let listed = store
        .runs(&RunFilter {
            agent_id: Some("st".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        (listed.items[0].version, listed.items[0].updated_ms),
        (5, T0 + 20)
    );
}

async fn stale_append_conflicts_and_writes_nothing(store: &dyn RunStore) {
    store.create(new_run("cas-1", "cas", T0)).await.unwrap();
    store.append(append("cas-1", 1, 1)).await.unwrap();
    let before = store.load("cas-1").await.unwrap();
    assert_eq!(before.version, 2);

    let mut stale = append("cas-1", 1, 2);
    stale.status = StoredStatus::Paused;
    stale.pending = Some(vec![waiting("cas-1", "c1", T0)]);
    stale.decisions = vec![decision("cas-1", "c0", 1)];
    stale.snapshot = Some(SnapshotRow {
        version: 3,
        format: 1,
        body: "{}".into(),
        digest: "s".into(),
    });
    stale.at_ms = T0 + 50;
    assert_eq!(
        store.append(stale).await,
        Err(StoreError::Conflict {
            run_id: "cas-1".into(),
            expected: 1,
            found: 2
        })
    );
    assert_eq!(
        store.load("cas-1").await.unwrap(),
        before,
        "nothing written"
    );
    let audit = store
        .audit(&AuditFilter {
            run_id: Some("cas-1".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert!(audit.items.is_empty(), "no decision recorded: {audit:?}");

    // A version from the future conflicts too.
    assert!(matches!(
        store.append(append("cas-1", 7, 1)).await,
        Err(StoreError::Conflict { found: 2, .. })
    ));
}

async fn multi_row_append_is_all_or_nothing(store: &dyn RunStore) {
    store.create(new_run("aon-1", "aon", T0)).await.unwrap();
    let before = store.load("aon-1").await.unwrap();
    // The journal rows and the run's row are written, then the second pending call breaks the
    // pending table's key: the whole append must go.
    let mut broken = append("aon-1", 1, 3);
    broken.status = StoredStatus::Paused;
    broken.pending = Some(vec![
        waiting("aon-1", "dup", T0),
        waiting("aon-1", "dup", T0),
    ]);
    broken.decisions = vec![decision("aon-1", "x", 1)];
    let error = store.append(broken).await.unwrap_err();
    assert!(matches!(error, StoreError::Database(_)), "{error:?}");
    assert_eq!(
        store.load("aon-1").await.unwrap(),
        before,
        "nothing written"
    );
    let audit = store
        .audit(&AuditFilter {
            run_id: Some("aon-1".into()),
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert!(audit.items.is_empty());

    // The same append without the duplicate is written whole.
    let mut whole = append("aon-1", 1, 3);
    whole.status = StoredStatus::Paused;
    whole.pending = Some(vec![waiting("aon-1", "dup", T0)]);
    whole.decisions = vec![decision("aon-1", "x", 1)];
    store.append(whole).await.unwrap();
    let loaded = store.load("aon-1").await.unwrap();
    assert_eq!(loaded.version, 4);
    assert_eq!(loaded.status, StoredStatus::Paused);
    assert_eq!(loaded.rows, (1..=4).map(entry).collect::<Vec<_>>());
    assert_eq!(loaded.pending.len(), 1);
}

async fn one_of_eight_racers_wins(store: Arc<dyn RunStore>) {
    store.create(new_run("race-1", "race", T0)).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut a = append("race-1", 1, 1);
                a.rows[0].body = format!("{{\"racer\": {i}}}");
                (i, store.append(a).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        let (i, result) = task.await.unwrap();
        match result {
            Ok(()) => winners.push(i),
            Err(StoreError::Conflict {
                expected: 1,
                found: 2,
                ..
            }) => {}
            Err(other) => panic!("racer {i}: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one racer wins: {winners:?}");
    let loaded = store.load("race-1").await.unwrap();
    assert_eq!(loaded.version, 2);
    assert_eq!(loaded.rows.len(), 2);
    assert_eq!(
        loaded.rows[1].body,
        format!("{{\"racer\": {}}}", winners[0])
    );
}

async fn load_after_snapshot_reads_only_later_rows(store: &dyn RunStore) {
    store.create(new_run("snap-1", "snap", T0)).await.unwrap();
    let snapshot = SnapshotRow {
        version: 3,
        format: 2,
        body: "{\"state\":  [1, 2.50, \"ü\"]}".into(),
        digest: "digest-3".into(),
    };
    let mut a = append("snap-1", 1, 4);
    a.snapshot = Some(snapshot.clone());
    store.append(a).await.unwrap();
    let loaded = store.load("snap-1").await.unwrap();
    assert_eq!(loaded.version, 5);
    assert_eq!(loaded.snapshot, Some(snapshot.clone()));
    assert_eq!(loaded.rows, vec![entry(4), entry(5)]);

    // An append without a snapshot keeps the stored one.
    store.append(append("snap-1", 5, 1)).await.unwrap();
    let loaded = store.load("snap-1").await.unwrap();
    assert_eq!(loaded.snapshot, Some(snapshot));
    assert_eq!(loaded.rows, vec![entry(4), entry(5), entry(6)]);

    // A snapshot at the last entry: nothing after it.
    let mut a = append("snap-1", 6, 1);
    a.snapshot = Some(SnapshotRow {
        version: 7,
        format: 1,
        body: "{}".into(),
        digest: "digest-7".into(),
    });
    store.append(a).await.unwrap();
    let loaded = store.load("snap-1").await.unwrap();
    assert_eq!(loaded.snapshot.map(|s| s.version), Some(7));
    assert!(loaded.rows.is_empty());
    assert_eq!(loaded.version, 7);
}

async fn pending_replaced_and_cleared(store: &dyn RunStore) {
    store.create(new_run("pr-1", "pr", T0)).await.unwrap();
    let mut a = append("pr-1", 1, 1);
    a.status = StoredStatus::Paused;
    // Not in id order: the store keeps the order it was given.
    a.pending = Some(vec![waiting("pr-1", "b", T0), waiting("pr-1", "a", T0)]);
    store.append(a).await.unwrap();
    let loaded = store.load("pr-1").await.unwrap();
    let ids: Vec<_> = loaded.pending.iter().map(|p| p.call_id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    assert_eq!(loaded.pending[0].agent_id, "pr", "the run's agent");
    assert_eq!(loaded.pending[0].arguments, "{\"call\": \"b\"}");

    // `None` leaves them.
    store.append(append("pr-1", 2, 1)).await.unwrap();
    assert_eq!(store.load("pr-1").await.unwrap().pending.len(), 2);

    // `Some` replaces them, with a decision recorded on one.
    let mut a = append("pr-1", 3, 1);
    let mut decided = waiting("pr-1", "c", T0 + 3);
    decided.decision = Some("{\"approve\": false}".into());
    decided.decided_by = Some("bob".into());
    decided.version = 3;
    a.pending = Some(vec![decided.clone()]);
    store.append(a).await.unwrap();
    let loaded = store.load("pr-1").await.unwrap();
    decided.agent_id = "pr".into();
    assert_eq!(loaded.pending, vec![decided]);

    // An empty list clears them.
    let mut a = append("pr-1", 4, 1);
    a.pending = Some(Vec::new());
    store.append(a).await.unwrap();
    assert!(store.load("pr-1").await.unwrap().pending.is_empty());
}

/// Every page of `filter`, following the cursors.
async fn all_pending(store: &dyn RunStore, filter: &PendingFilter) -> Vec<PendingRow> {
    let mut filter = filter.clone();
    let mut items = Vec::new();
    loop {
        let page = store.pending(&filter).await.unwrap();
        assert!(page.items.len() <= filter.limit);
        items.extend(page.items);
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return items,
        }
    }
}

fn keys(rows: &[PendingRow]) -> Vec<(i64, String, String)> {
    rows.iter()
        .map(|p| (p.since_ms, p.run_id.clone(), p.call_id.clone()))
        .collect()
}

/// A waiting call of the filters' check: id, since, tool, kind, decided.
type Call = (&'static str, i64, &'static str, &'static str, bool);

async fn pending_filters_and_paging(store: &dyn RunStore) {
    // Three runs of agent `pf`, one of agent `pf-other`; calls at equal and different times.
    let calls: &[(&str, &str, &[Call])] = &[
        (
            "pf-a",
            "pf",
            &[
                ("c1", T0 + 10, "refund", "tool_approval", false),
                ("c2", T0 + 30, "email", "hitl", true),
                ("c3", T0 + 30, "refund", "tool_approval", false),
            ],
        ),
        (
            "pf-b",
            "pf",
            &[
                ("c1", T0 + 30, "refund", "external_output", false),
                ("c2", T0 + 20, "refund", "tool_approval", false),
            ],
        ),
        (
            "pf-c",
            "pf",
            &[("c1", T0 + 5, "email", "outcome_unknown", false)],
        ),
        (
            "pf-d",
            "pf-other",
            &[("c1", T0 + 40, "refund", "tool_approval", false)],
        ),
    ];
    for (run, agent, list) in calls {
        store.create(new_run(run, agent, T0)).await.unwrap();
        let mut a = append(run, 1, 1);
        a.status = StoredStatus::Paused;
        a.pending = Some(
            list.iter()
                .map(|(call, since, tool, kind, decided)| PendingRow {
                    tool: (*tool).into(),
                    kind: (*kind).into(),
                    decision: decided.then(|| "{\"approve\": true}".into()),
                    decided_by: decided.then(|| "carol".into()),
                    ..waiting(run, call, *since)
                })
                .collect(),
        );
        store.append(a).await.unwrap();
    }
    let pf = PendingFilter {
        agent_id: Some("pf".into()),
        ..PendingFilter::default()
    };
    let everything = store.pending(&pf).await.unwrap();
    assert_eq!(everything.next, None);
    let expected: Vec<(i64, String, String)> = [
        (T0 + 30, "pf-b", "c1"),
        (T0 + 30, "pf-a", "c3"),
        (T0 + 30, "pf-a", "c2"),
        (T0 + 20, "pf-b", "c2"),
        (T0 + 10, "pf-a", "c1"),
        (T0 + 5, "pf-c", "c1"),
    ]
    .into_iter()
    .map(|(t, r, c)| (t, r.to_owned(), c.to_owned()))
    .collect();
    assert_eq!(keys(&everything.items), expected, "newest first");
    assert!(everything.items.iter().all(|p| p.agent_id == "pf"));

    let count =
        |filter: PendingFilter| async move { keys(&store.pending(&filter).await.unwrap().items) };
    assert_eq!(
        count(PendingFilter {
            run_id: Some("pf-a".into()),
            ..pf.clone()
        })
        .await,
        expected
            .iter()
            .filter(|k| k.1 == "pf-a")
            .cloned()
            .collect::<Vec<_>>()
    );
    assert_eq!(
        count(PendingFilter {
            tool: Some("email".into()),
            ..pf.clone()
        })
        .await
        .len(),
        2
    );
    assert_eq!(
        count(PendingFilter {
            kind: Some("tool_approval".into()),
            ..pf.clone()
        })
        .await
        .len(),
        3
    );
    assert_eq!(
        count(PendingFilter {
            older_than_ms: Some(T0 + 20),
            ..pf.clone()
        })
        .await,
        expected[4..].to_vec(),
        "strictly older"
    );
    let undecided = count(PendingFilter {
        undecided_only: true,
        ..pf.clone()
    })
    .await;
    assert_eq!(undecided.len(), 5);
    assert!(!undecided.contains(&(T0 + 30, "pf-a".into(), "c2".into())));
    assert_eq!(
        count(PendingFilter {
            agent_id: Some("pf-other".into()),
            ..PendingFilter::default()
        })
        .await
        .len(),
        1
    );

    // Paging, two at a time: the same rows, in the same order, with no duplicate or gap.
    for limit in [1, 2, 4, 5] {
        let paged = all_pending(
            store,
            &PendingFilter {
                limit,
                ..pf.clone()
            },
        )
        .await;
        assert_eq!(keys(&paged), expected, "pages of {limit}");
    }

    // Calls added between pages (newer than any) do not shift the pages after the cursor.
    let first = store
        .pending(&PendingFilter {
            limit: 2,
            ..pf.clone()
        })
        .await
        .unwrap();
    store.create(new_run("pf-e", "pf", T0)).await.unwrap();
    let mut a = append("pf-e", 1, 1);
    a.pending = Some(vec![waiting("pf-e", "c1", T0 + 100)]);
    store.append(a).await.unwrap();
    let rest = all_pending(
        store,
        &PendingFilter {
            limit: 2,
            after: first.next.clone(),
            ..pf.clone()
        },
    )
    .await;
    let mut seen = keys(&first.items);
    seen.extend(keys(&rest));
    assert_eq!(seen, expected, "stable under inserts");

    // A cursor that is not one is refused, not read as the start.
    assert!(
        store
            .pending(&PendingFilter {
                after: Some("nonsense".into()),
                ..pf
            })
            .await
            .is_err()
    );
}

async fn pending_limit_is_capped(store: &dyn RunStore) {
    store.create(new_run("cap-1", "cap", T0)).await.unwrap();
    let mut a = append("cap-1", 1, 1);
    a.pending = Some(
        (0..1_005)
            .map(|i| waiting("cap-1", &format!("c{i:04}"), T0 + i))
            .collect(),
    );
    store.append(a).await.unwrap();
    let filter = PendingFilter {
        run_id: Some("cap-1".into()),
        limit: 5_000,
        ..PendingFilter::default()
    };
    let page = store.pending(&filter).await.unwrap();
    assert_eq!(page.items.len(), 1_000, "capped at 1,000");
    assert!(page.next.is_some());
    let rest = store
        .pending(&PendingFilter {
            after: page.next,
            ..filter
        })
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 5);
    assert_eq!(rest.next, None);
    assert_eq!(rest.items[4].call_id, "c0000", "the oldest last");
}

async fn audit_is_append_only_and_kept_by_prune(store: &dyn RunStore) {
    // Times below the prune check's bound, so that the prune check removes this run too.
    store.create(new_run("au-1", "au", 100)).await.unwrap();
    for (version, call) in [(1, "c1"), (2, "c2"), (3, "c3")] {
        let mut a = append("au-1", version, 1);
        a.at_ms = 100;
        a.decisions = vec![decision("au-1", call, version)];
        store.append(a).await.unwrap();
    }
    let mut a = append("au-1", 4, 1);
    a.at_ms = 100;
    a.status = StoredStatus::Completed;
    a.decisions = vec![decision("au-1", "c4", 4), decision("au-1", "c5", 4)];
    store.append(a).await.unwrap();

    let filter = AuditFilter {
        run_id: Some("au-1".into()),
        limit: 2,
        ..AuditFilter::default()
    };
    let mut calls = Vec::new();
    let mut page_filter = filter.clone();
    loop {
        let page = store.audit(&page_filter).await.unwrap();
        calls.extend(page.items.iter().map(|d| d.call_id.clone()));
        match page.next {
            Some(next) => page_filter.after = Some(next),
            None => break,
        }
    }
    assert_eq!(calls, ["c1", "c2", "c3", "c4", "c5"], "oldest first");
    let first = store.audit(&filter).await.unwrap();
    assert_eq!(first.items[0], decision("au-1", "c1", 1), "as written");

    assert!(store.prune(500).await.unwrap() >= 1);
    assert!(matches!(
        store.load("au-1").await,
        Err(StoreError::NotFound { .. })
    ));
    let after = store
        .audit(&AuditFilter {
            limit: 10,
            ..filter
        })
        .await
        .unwrap();
    assert_eq!(after.items.len(), 5, "prune keeps the audit log");
}

async fn runs_listing(store: &dyn RunStore) {
    let runs = [
        ("rl-a", StoredStatus::Running, T0 + 1),
        ("rl-b", StoredStatus::Paused, T0 + 3),
        ("rl-c", StoredStatus::Paused, T0 + 2),
        ("rl-d", StoredStatus::Completed, T0 + 3),
        ("rl-e", StoredStatus::InDoubt, T0 + 5),
    ];
    for (run, status, at) in runs {
        store.create(new_run(run, "rl", T0)).await.unwrap();
        let mut a = append(run, 1, 1);
        a.status = status;
        a.at_ms = at;
        store.append(a).await.unwrap();
    }
    store.create(new_run("rl-x", "rl-other", T0)).await.unwrap();
    let filter = RunFilter {
        agent_id: Some("rl".into()),
        ..RunFilter::default()
    };
    let page = store.runs(&filter).await.unwrap();
    let ids: Vec<_> = page.items.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(
        ids,
        ["rl-e", "rl-d", "rl-b", "rl-c", "rl-a"],
        "last written first"
    );
    assert_eq!(page.next, None);
    let d = &page.items[1];
    assert_eq!(
        (
            d.status,
            d.version,
            d.created_ms,
            d.updated_ms,
            d.agent_id.as_str()
        ),
        (StoredStatus::Completed, 2, T0, T0 + 3, "rl")
    );

    let paused = store
        .runs(&RunFilter {
            status: Some(StoredStatus::Paused),
            ..filter.clone()
        })
        .await
        .unwrap();
    let ids: Vec<_> = paused.items.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["rl-b", "rl-c"]);

    let mut paged = Vec::new();
    let mut page_filter = RunFilter { limit: 2, ..filter };
    loop {
        let page = store.runs(&page_filter).await.unwrap();
        assert!(page.items.len() <= 2);
        paged.extend(page.items.into_iter().map(|r| r.run_id));
        match page.next {
            Some(next) => page_filter.after = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, ["rl-e", "rl-d", "rl-b", "rl-c", "rl-a"]);
}

async fn prune_keeps_unfinished_runs(store: &dyn RunStore) {
    let runs = [
        ("pn-running", StoredStatus::Running, 200),
        ("pn-paused", StoredStatus::Paused, 200),
        ("pn-doubt", StoredStatus::InDoubt, 200),
        ("pn-done", StoredStatus::Completed, 200),
        ("pn-failed", StoredStatus::Failed, 200),
        ("pn-recent", StoredStatus::Completed, 500),
    ];
    for (run, status, at) in runs {
        store.create(new_run(run, "pn", 100)).await.unwrap();
        let mut a = append(run, 1, 1);
        a.status = status;
        a.at_ms = at;
        a.pending = Some(vec![waiting(run, "c1", 100)]);
        store.append(a).await.unwrap();
    }
    assert_eq!(store.prune(500).await.unwrap(), 2, "`before` is exclusive");
    for run in ["pn-done", "pn-failed"] {
        assert!(matches!(
            store.load(run).await,
            Err(StoreError::NotFound { .. })
        ));
        let pending = store
            .pending(&PendingFilter {
                run_id: Some(run.into()),
                ..PendingFilter::default()
            })
            .await
            .unwrap();
        assert!(pending.items.is_empty(), "{run}'s pending calls go with it");
    }
    for run in ["pn-running", "pn-paused", "pn-doubt", "pn-recent"] {
        assert_eq!(store.load(run).await.unwrap().version, 2, "{run} is kept");
    }
    // Its journal went too: the id can be used again from version 1.
    store.create(new_run("pn-done", "pn", T0)).await.unwrap();
    assert_eq!(store.load("pn-done").await.unwrap().rows, vec![entry(1)]);
    assert_eq!(store.prune(500).await.unwrap(), 0);
}

async fn damaged_row_fails_only_its_run(store: &dyn RunStore, raw: &RawSql) {
    for run in ["dmg-status", "dmg-version", "dmg-ok"] {
        store.create(new_run(run, "dmg", T0)).await.unwrap();
    }
    raw("UPDATE phaseo_runs SET status = 'on_holiday' WHERE run_id = 'dmg-status'".into()).await;
    raw("UPDATE phaseo_journal SET version = -3 WHERE run_id = 'dmg-version'".into()).await;
    match store.load("dmg-status").await {
        Err(StoreError::Corrupt {
            run_id,
            version,
            reason,
        }) => {
            assert_eq!((run_id.as_str(), version), ("dmg-status", 1));
            assert!(reason.contains("on_holiday"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.load("dmg-version").await,
        Err(StoreError::Corrupt { run_id, .. }) if run_id == "dmg-version"
    ));
    assert!(matches!(
        store.append(append("dmg-version", 1, 1)).await,
        Err(StoreError::Corrupt { run_id, .. }) if run_id == "dmg-version"
    ));
    assert_eq!(store.load("dmg-ok").await.unwrap().version, 1);
    let mut a = append("dmg-ok", 1, 1);
    a.status = StoredStatus::Paused;
    store.append(a).await.unwrap();
    // A listing that does not reach the damaged rows is served; one that does names the run.
    let ok = store
        .runs(&RunFilter {
            status: Some(StoredStatus::Paused),
            agent_id: Some("dmg".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(ok.items.len(), 1);
    assert!(matches!(
        store
            .runs(&RunFilter {
                agent_id: Some("dmg".into()),
                ..RunFilter::default()
            })
            .await,
        Err(StoreError::Corrupt { .. })
    ));

    // A hole in the journal is damage too.
    store.create(new_run("dmg-hole", "dmg", T0)).await.unwrap();
    store.append(append("dmg-hole", 1, 2)).await.unwrap();
    raw("DELETE FROM phaseo_journal WHERE run_id = 'dmg-hole' AND version = 2".into()).await;
    assert!(matches!(
        store.load("dmg-hole").await,
        Err(StoreError::Corrupt { run_id, version: 2, .. }) if run_id == "dmg-hole"
    ));
}

/// A waiting call of agent `dp`.
fn dp_waiting(run_id: &str, call_id: &str, since_ms: i64) -> PendingRow {
    PendingRow {
        agent_id: "dp".into(),
        ..waiting(run_id, call_id, since_ms)
    }
}

/// Waiting rows that cannot be read back as written (a kind that is none of the four, arguments
/// or a recorded decision that are not JSON) are their runs' problem: the listing serves the
/// rows beside them and names each damaged one, with its run, call and version; following the
/// cursors reaches every row once, damaged or not.
pub(crate) async fn damaged_pending_rows_are_named(store: &dyn RunStore) {
    let mut run = new_run("dp-1", "dp", T0);
    run.status = StoredStatus::Paused;
    let mut kind = dp_waiting("dp-1", "c-kind", T0 + 5);
    kind.kind = "approval_please".into();
    let mut args = dp_waiting("dp-1", "c-args", T0 + 4);
    args.arguments = "{\"env\": ".into();
    run.pending = vec![dp_waiting("dp-1", "c-ok", T0 + 6), kind, args];
    store.create(run).await.unwrap();
    let mut other = new_run("dp-2", "dp", T0);
    other.status = StoredStatus::Paused;
    let mut decided = dp_waiting("dp-2", "c-decision", T0 + 3);
    decided.decision = Some("approve, I guess".into());
    decided.decided_by = Some("ada".into());
    other.pending = vec![dp_waiting("dp-2", "c-fine", T0 + 2), decided];
    store.create(other).await.unwrap();

    let filter = PendingFilter {
        agent_id: Some("dp".into()),
        ..PendingFilter::default()
    };
    let page = store.pending(&filter).await.expect("the listing is served");
    let listed: Vec<&str> = page.items.iter().map(|p| p.call_id.as_str()).collect();
    assert_eq!(listed, ["c-ok", "c-fine"]);
    let named: Vec<(&str, Option<&str>, Option<u64>)> = page
        .damaged
        .iter()
        .map(|d| (d.run_id.as_str(), d.call_id.as_deref(), d.version))
        .collect();
    assert_eq!(
        named,
        [
            ("dp-1", Some("c-kind"), Some(1)),
            ("dp-1", Some("c-args"), Some(1)),
            ("dp-2", Some("c-decision"), Some(1)),
        ]
    );
    let reasons: Vec<&str> = page.damaged.iter().map(|d| d.reason.as_str()).collect();
    assert!(
        reasons[0].contains("unknown kind `approval_please`"),
        "{reasons:?}"
    );
    assert!(reasons[1].contains("arguments are not JSON"), "{reasons:?}");
    assert!(reasons[2].contains("decision is not JSON"), "{reasons:?}");
    assert!(page.next.is_none());

    // Two rows a page: every row once, in order, damaged or not, and the cursor moves past the
    // damaged ones.
    let mut paged = PendingFilter { limit: 2, ..filter };
    let mut seen = Vec::new();
    loop {
        let page = store.pending(&paged).await.unwrap();
        assert!(page.items.len() + page.damaged.len() <= 2);
        seen.extend(page.items.iter().map(|p| p.call_id.clone()));
        seen.extend(page.damaged.iter().filter_map(|d| d.call_id.clone()));
        match page.next {
            Some(next) => paged.after = Some(next),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, ["c-args", "c-decision", "c-fine", "c-kind", "c-ok"]);
}

async fn broken_contract_refused(store: &dyn RunStore) {
    store.create(new_run("bc-1", "bc", T0)).await.unwrap();
    let before = store.load("bc-1").await.unwrap();
    let mut empty = append("bc-1", 1, 1);
    empty.rows.clear();
    let mut gap = append("bc-1", 1, 2);
    gap.rows[1].version = 4;
    let mut late_snapshot = append("bc-1", 1, 1);
    late_snapshot.snapshot = Some(SnapshotRow {
        version: 3,
        format: 1,
        body: "{}".into(),
        digest: "s".into(),
    });
    let mut other_run = append("bc-1", 1, 1);
    other_run.decisions = vec![decision("bc-2", "c1", 1)];
    for broken in [empty, gap, late_snapshot, other_run] {
        assert!(matches!(
            store.append(broken).await,
            Err(StoreError::Database(_))
        ));
    }
    let mut second = new_run("bc-2", "bc", T0);
    second.row.version = 2;
    assert!(matches!(
        store.create(second).await,
        Err(StoreError::Database(_))
    ));
    assert_eq!(store.load("bc-1").await.unwrap(), before);
}

/// The bound on one row of the store [`bounded_reads`] checks.
pub(crate) const ROW_BOUND: u64 = 4_096;
/// The bound on one load of the store [`bounded_reads`] checks.
pub(crate) const LOAD_BOUND: u64 = 16_384;

/// The setting bounding a row, as errors name it.
const ROW: &str = "max_row_bytes";
/// The setting bounding a load.
const LOAD: &str = "max_load_bytes";

/// A text of `bytes` bytes, as JSON.
fn sized(bytes: u64) -> String {
    let filler = "x".repeat(usize::try_from(bytes).unwrap() - 9);
    format!("{{\"x\": \"{filler}\"}}")
}

/// Whether `result` is the typed error for `run_id`'s `what`, over the bound `setting`.
fn too_large<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    run_id: &str,
    what: &str,
    setting: &str,
) -> u64 {
    match result {
        Err(StoreError::TooLarge {
            run_id: r,
            what: w,
            size,
            limit,
            setting: s,
        }) => {
            assert_eq!((r.as_str(), s), (run_id, setting));
            assert!(w.contains(what), "{w}");
            assert!(size > limit, "{size} > {limit}");
            size
        }
        // Not the value itself: it may be the 100 MB body.
        Ok(_) => panic!("expected TooLarge for {run_id}'s {what}, got a value"),
        Err(e) => panic!("expected TooLarge for {run_id}'s {what}, got {e:?}"),
    }
}

/// The read bounds, on a store built with `max_row_bytes(ROW_BOUND)` and
/// `max_load_bytes(LOAD_BOUND)`: a row or a load over them fails with the typed error for its
/// run only, with the row's size as stored; a row at the bound is read.
pub(crate) async fn bounded_reads(store: &dyn RunStore) {
    // At the bound: read.
    store.create(new_run("rb-ok", "rb", T0)).await.unwrap();
    let mut a = append("rb-ok", 1, 1);
    a.rows[0].body = sized(ROW_BOUND);
    store.append(a).await.unwrap();
    assert_eq!(
        store.load("rb-ok").await.unwrap().rows[1].body.len() as u64,
        ROW_BOUND
    );

    // An entry one byte over.
    store.create(new_run("rb-entry", "rb", T0)).await.unwrap();
    let mut a = append("rb-entry", 1, 1);
    a.rows[0].body = sized(ROW_BOUND + 1);
    store.append(a).await.unwrap();
    let size = too_large(
        store.load("rb-entry").await,
        "rb-entry",
        "journal entry 2",
        ROW,
    );
    assert_eq!(size, ROW_BOUND + 1);

    // A snapshot over.
    store.create(new_run("rb-snap", "rb", T0)).await.unwrap();
    let mut a = append("rb-snap", 1, 1);
    a.snapshot = Some(SnapshotRow {
        version: 2,
        format: 1,
        body: sized(ROW_BOUND + 100),
        digest: "s".into(),
    });
    store.append(a).await.unwrap();
    let size = too_large(store.load("rb-snap").await, "rb-snap", "snapshot", ROW);
    assert_eq!(size, ROW_BOUND + 100);

    // A pending call's arguments over: the load, and a listing that reaches it, name it.
    let mut run = new_run("rb-pending", "rb-p", T0);
    run.status = StoredStatus::Paused;
    let mut call = waiting("rb-pending", "c-big", T0);
    call.arguments = sized(ROW_BOUND + 1);
    run.pending = vec![waiting("rb-pending", "c-small", T0), call];
    store.create(run).await.unwrap();
    too_large(
        store.load("rb-pending").await,
        "rb-pending",
        "pending call `c-big`",
        ROW,
    );
    let listing = PendingFilter {
        agent_id: Some("rb-p".into()),
        ..PendingFilter::default()
    };
    // The listing serves the small call and names the big one, with the setting.
    let page = store.pending(&listing).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].call_id, "c-small");
    assert_eq!(page.damaged.len(), 1);
    assert_eq!(page.damaged[0].call_id.as_deref(), Some("c-big"));
    assert!(
        page.damaged[0].reason.contains(ROW),
        "{}",
        page.damaged[0].reason
    );

    // Rows each within the bound, together over the load's.
    store.create(new_run("rb-total", "rb", T0)).await.unwrap();
    let mut a = append("rb-total", 1, LOAD_BOUND / ROW_BOUND + 1);
    for row in &mut a.rows {
        row.body = sized(ROW_BOUND);
    }
    store.append(a).await.unwrap();
    too_large(store.load("rb-total").await, "rb-total", "load", LOAD);
    // ... and once a snapshot covers most of them, the load is within it again.
    let last = LOAD_BOUND / ROW_BOUND + 2;
    let mut a = append("rb-total", last, 1);
    a.snapshot = Some(SnapshotRow {
        version: last + 1,
        format: 1,
        body: sized(ROW_BOUND),
        digest: "s".into(),
    });
    store.append(a).await.unwrap();
    assert_eq!(store.load("rb-total").await.unwrap().version, last + 1);

    // A decision over, in the audit log.
    store.create(new_run("rb-audit", "rb", T0)).await.unwrap();
    let mut a = append("rb-audit", 1, 1);
    let mut d = decision("rb-audit", "c1", 1);
    d.decision = sized(ROW_BOUND + 1);
    a.decisions = vec![d];
    store.append(a).await.unwrap();
    let audit = AuditFilter {
        run_id: Some("rb-audit".into()),
        ..AuditFilter::default()
    };
    too_large(store.audit(&audit).await, "rb-audit", "`c1`", ROW);

    // The other runs still load and list.
    assert_eq!(store.load("rb-ok").await.unwrap().version, 2);
    assert_eq!(store.load("rb-audit").await.unwrap().version, 2);
    let others = PendingFilter {
        agent_id: Some("rb".into()),
        ..PendingFilter::default()
    };
    assert!(store.pending(&others).await.unwrap().items.is_empty());
}

/// The peak resident memory of this process so far, in bytes (Linux).
fn peak_memory() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A journal entry of 100 MB, written outside the store by `raw` with the SQL text expression
/// `hundred_mb` (the store would not be asked to send it), refused at once by a store with the
/// default bounds: the load fails with the typed error, quickly, without the process's peak
/// memory growing by the body's size.
pub(crate) async fn hundred_mb_body_refused(store: &dyn RunStore, raw: &RawSql, hundred_mb: &str) {
    store.create(new_run("huge", "huge", T0)).await.unwrap();
    raw(format!(
        "UPDATE phaseo_journal SET body = {hundred_mb} WHERE run_id = 'huge'"
    ))
    .await;
    let before = peak_memory();
    let started = std::time::Instant::now();
    let size = too_large(store.load("huge").await, "huge", "journal entry 1", ROW);
    let took = started.elapsed();
    let grew = peak_memory().saturating_sub(before);
    eprintln!("100 MB body refused in {took:?}, peak memory grew by {grew} bytes");
    assert_eq!(size, 100_000_000);
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    assert!(grew < 50_000_000, "peak memory grew by {grew} bytes");
}

/// A SQLite file in the temporary folder, removed (with its WAL files) when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TempFile(
            std::env::temp_dir().join(format!("phaseo-store-{name}-{}-{n}.db", std::process::id())),
        )
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

/// Raw SQL on the file, through a connection of its own.
fn sqlite_raw(path: &Path) -> RawSql {
    let path = path.to_path_buf();
    Arc::new(move |sql: String| {
        let path = path.clone();
        Box::pin(async move {
            let mut conn = SqliteConnectOptions::new()
                .filename(&path)
                .connect()
                .await
                .expect("the file opens");
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .expect("the statement runs");
            conn.close().await.expect("it closes");
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_conformance() {
    let file = TempFile::new("conformance");
    let store = SqliteStore::open(&file.0).await.unwrap();
    conformance(Arc::new(store), Some(sqlite_raw(&file.0))).await;
}

/// Most of a run's appends (a turn, a call's start, its result) leave its status and lease as they
/// were: they insert their entries, and the run's row is not written (counted by a trigger).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_append_that_keeps_the_status_writes_only_the_journal() {
    let file = TempFile::new("journal-alone");
    let store = SqliteStore::open(&file.0).await.unwrap();
    store.create(new_run("ja-1", "ja", T0)).await.unwrap();
    sqlite_raw(&file.0)(
        "CREATE TABLE row_writes (run_id TEXT); \
         CREATE TRIGGER row_written AFTER UPDATE ON phaseo_runs \
         BEGIN INSERT INTO row_writes VALUES (NEW.run_id); END"
            .into(),
    )
    .await;
    let writes = || async {
        let mut conn = SqliteConnectOptions::new()
            .filename(&file.0)
            .connect()
            .await
            .unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM row_writes")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        n
    };
    for v in 1..6 {
        store.append(append("ja-1", v, 1)).await.unwrap();
    }
    assert_eq!(writes().await, 0, "five running appends: the journal alone");
    assert_eq!(store.load("ja-1").await.unwrap().version, 6);
    let mut paused = append("ja-1", 6, 1);
    paused.status = StoredStatus::Paused;
    store.append(paused).await.unwrap();
    assert_eq!(writes().await, 1, "a status that changes writes the row");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_conformance() {
    conformance(Arc::new(phaseo_agent::store::MemoryStore::new()), None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_damaged_pending_rows_are_named() {
    damaged_pending_rows_are_named(&phaseo_agent::store::MemoryStore::new()).await;
}

/// Two runs of agent `nu` at version 3, each with a call that started waiting at version 2; the
/// pending row of `nu-bad` has a tool name that is not UTF-8 (as another program may write).
async fn not_utf8_runs(store: &SqliteStore, raw: &RawSql) {
    for run_id in ["nu-bad", "nu-ok"] {
        store.create(new_run(run_id, "nu", T0)).await.unwrap();
        let mut a = append(run_id, 1, 1);
        a.status = StoredStatus::Paused;
        let mut call = waiting(run_id, "c1", T0);
        call.version = 2;
        a.pending = Some(vec![call]);
        store.append(a).await.unwrap();
        store.append(append(run_id, 2, 1)).await.unwrap();
    }
    raw("UPDATE phaseo_pending SET tool = CAST(x'ff74' AS TEXT) WHERE run_id = 'nu-bad'".into())
        .await;
}

/// Text that is not UTF-8 in a SQLite file (written by another program), in a pending row: the
/// listing serves the rows beside it and names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_text_not_utf8_in_a_pending_row_is_named() {
    let file = TempFile::new("not-utf8");
    let store = SqliteStore::open(&file.0).await.unwrap();
    let raw = sqlite_raw(&file.0);
    not_utf8_runs(&store, &raw).await;
    let filter = PendingFilter {
        agent_id: Some("nu".into()),
        ..PendingFilter::default()
    };
    let page = store.pending(&filter).await.expect("the listing is served");
    let listed: Vec<&str> = page.items.iter().map(|p| p.run_id.as_str()).collect();
    assert_eq!(listed, ["nu-ok"]);
    assert_eq!(page.damaged.len(), 1, "{:?}", page.damaged);
    let damaged = &page.damaged[0];
    assert_eq!(
        (
            damaged.run_id.as_str(),
            damaged.call_id.as_deref(),
            damaged.version
        ),
        ("nu-bad", Some("c1"), Some(2))
    );
    assert!(damaged.reason.contains("\"tool\""), "{}", damaged.reason);
    assert!(damaged.reason.contains("utf-8"), "{}", damaged.reason);
}

/// Text that is not UTF-8 in a SQLite file: loading the run names the damaged row's own version
/// (read apart from the text), not 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_text_not_utf8_names_the_damaged_rows_version() {
    let file = TempFile::new("not-utf8-version");
    let store = SqliteStore::open(&file.0).await.unwrap();
    let raw = sqlite_raw(&file.0);
    not_utf8_runs(&store, &raw).await;
    match store.load("nu-bad").await {
        Err(StoreError::Corrupt {
            run_id, version, ..
        }) => assert_eq!((run_id.as_str(), version), ("nu-bad", 2)),
        other => panic!("{other:?}"),
    }

    // A journal entry's body: its version, 2.
    raw("UPDATE phaseo_pending SET tool = 'refund' WHERE run_id = 'nu-bad'".into()).await;
    raw("UPDATE phaseo_journal SET body = CAST(x'7bff7d' AS TEXT) \
         WHERE run_id = 'nu-bad' AND version = 2"
        .into())
    .await;
    match store.load("nu-bad").await {
        Err(StoreError::Corrupt {
            run_id, version, ..
        }) => assert_eq!((run_id.as_str(), version), ("nu-bad", 2)),
        other => panic!("{other:?}"),
    }

    // The run's own row: the run's version, 3.
    raw("UPDATE phaseo_runs SET agent_id = CAST(x'6eff' AS TEXT) WHERE run_id = 'nu-bad'".into())
        .await;
    match store.load("nu-bad").await {
        Err(StoreError::Corrupt {
            run_id, version, ..
        }) => assert_eq!((run_id.as_str(), version), ("nu-bad", 3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(store.load("nu-ok").await.unwrap().version, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_bounded_reads() {
    let file = TempFile::new("bounded");
    let store = SqliteStore::builder(&file.0)
        .max_row_bytes(ROW_BOUND)
        .max_load_bytes(LOAD_BOUND)
        .open()
        .await
        .unwrap();
    bounded_reads(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_hundred_mb_body_refused() {
    let file = TempFile::new("huge");
    let store = SqliteStore::open(&file.0).await.unwrap();
    let raw = sqlite_raw(&file.0);
    hundred_mb_body_refused(&store, &raw, "replace(hex(zeroblob(50000000)), '0', 'x')").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reopen_is_a_no_op_and_a_newer_schema_is_refused() {
    let file = TempFile::new("reopen");
    let store = SqliteStore::open(&file.0).await.unwrap();
    store.create(new_run("keep", "a", T0)).await.unwrap();
    store.close().await;

    let store = SqliteStore::open(&file.0).await.unwrap();
    assert_eq!(store.load("keep").await.unwrap().rows, vec![entry(1)]);
    store.close().await;

    // A migration this build does not know, recorded by a newer one in sqlx's bookkeeping.
    sqlite_raw(&file.0)(
        "INSERT INTO phaseo_migrations (version, description, success, checksum, execution_time) \
         VALUES (999, 'newer', TRUE, X'00', 0)"
            .into(),
    )
    .await;
    assert_eq!(
        SqliteStore::open(&file.0).await.unwrap_err(),
        StoreError::SchemaTooNew {
            found: 999,
            supported: 3
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fresh_file_opened_twice_at_once() {
    let file = TempFile::new("fresh");
    let (a, b) = tokio::join!(SqliteStore::open(&file.0), SqliteStore::open(&file.0));
    let (a, b) = (a.unwrap(), b.unwrap());
    a.create(new_run("one", "a", T0)).await.unwrap();
    assert_eq!(b.load("one").await.unwrap().version, 1);
}

/// Two stores on one file (two pools, as two processes would have) race on one run: SQLite's
/// write lock serialises them, and the losers get a conflict, not "database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_stores_on_one_file_race() {
    let file = TempFile::new("two");
    let a: Arc<dyn RunStore> = Arc::new(SqliteStore::open(&file.0).await.unwrap());
    let b: Arc<dyn RunStore> = Arc::new(SqliteStore::open(&file.0).await.unwrap());
    for round in 0..20u64 {
        let run = format!("two-{round}");
        a.create(new_run(&run, "two", T0)).await.unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = if i % 2 == 0 { a.clone() } else { b.clone() };
                let run = run.clone();
                tokio::spawn(async move { store.append(append(&run, 1, 1)).await })
            })
            .collect();
        let mut wins = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(()) => wins += 1,
                Err(StoreError::Conflict { found: 2, .. }) => {}
                Err(other) => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(wins, 1, "round {round}");
        assert_eq!(b.load(&run).await.unwrap().version, 2);
    }
}

/// The test binary run again as three writer processes on one file (the test itself, in the child
/// role when `PHASEO_STORE_CHILD_FILE` names the file): each appends 25 entries to one run,
/// loading it again after each conflict. Every write lands once, in order, and no writer sees
/// anything but a conflict ("database is locked" would fail the child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_in_three_processes() {
    const CHILD: &str = "PHASEO_STORE_CHILD_FILE";
    const EACH: u64 = 25;
    if let Ok(path) = std::env::var(CHILD) {
        let store = SqliteStore::open(&path).await.unwrap();
        let (mut done, mut conflicts) = (0, 0);
        while done < EACH {
            let version = store.load("shared").await.unwrap().version;
            match store.append(append("shared", version, 1)).await {
                Ok(()) => done += 1,
                Err(StoreError::Conflict { .. }) => conflicts += 1,
                Err(other) => panic!("after {done} appends: {other:?}"),
            }
        }
        println!(
            "child {}: {done} appends, {conflicts} conflicts",
            std::process::id()
        );
        return;
    }
    let file = TempFile::new("processes");
    let store = SqliteStore::open(&file.0).await.unwrap();
    store.create(new_run("shared", "p", T0)).await.unwrap();
    let exe = std::env::current_exe().expect("the test binary");
    let children: Vec<_> = (0..3)
        .map(|_| {
            tokio::process::Command::new(&exe)
                .args([
                    "--exact",
                    "store_backend::sqlite_writers_in_three_processes",
                    "--nocapture",
                ])
                .env(CHILD, &file.0)
                .spawn()
                .expect("a child starts")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().await.unwrap().success(), "a writer failed");
    }
    let loaded = store.load("shared").await.unwrap();
    assert_eq!(loaded.version, 1 + 3 * EACH);
    assert_eq!(
        loaded.rows.iter().map(|r| r.version).collect::<Vec<_>>(),
        (1..=1 + 3 * EACH).collect::<Vec<_>>()
    );
}
