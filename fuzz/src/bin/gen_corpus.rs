//! Writes the seed corpus of both fuzz targets, replacing what is there:
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --bin gen_corpus
//! ```
//!
//! - `corpus/decode/<type>-<what>`: the type's index byte, then an argument text: valid ones,
//!   invalid ones, and hostile ones (numbers out of range, lone surrogates, deep nesting, serde
//!   aliases, floats for integers, duplicate keys);
//! - `corpus/resume/<run>-<plain|signed>-<script>`: `0` or `1` (the agent that does not sign, the
//!   one that signs), a paused state this agent really returned, a zero byte, and a decisions
//!   script (`properties/resume.rs` says how it is read);
//! - `corpus/journal/<run>`: the rows a `MemoryStore` holds for real runs of a `DurableAgent`
//!   (paused, completed, failed, interrupted at every journal boundary, in doubt, with snapshots
//!   every two entries), as `properties/journal.rs` reads them, and some of them damaged.
//!
//! Run ids are fixed, so the output is the same on every run. Every seed is checked against its
//! target's property before it is written.

use std::future::IntoFuture;
use std::path::Path;
use std::sync::Arc;

use phaseo_agent::durable::Runs;
use phaseo_agent::store::{Append, LoadedRun, MemoryStore, NewRun, RunStore, StoredStatus};
use phaseo_agent::{Decision, Decisions, RunState, RunStatus};
use serde_json::{Value, json};

#[path = "../../properties/decode.rs"]
mod decode;
#[path = "../../properties/journal.rs"]
mod journal;
#[path = "../../properties/resume.rs"]
mod resume;

/// Decode seeds: the type's index ([`decode::TYPES`]), a name, the argument text.
const DECODE: &[(u8, &str, &str)] = &[
    (0, "valid", r#"{"query": "printers", "limit": 3}"#),
    (0, "blank", ""),
    (0, "blank-whitespace", " \n\t"),
    (
        0,
        "alias-out-of-range",
        r#"{"query": "x", "max_results": 50}"#,
    ),
    (0, "alias-in-range", r#"{"query": "x", "max_results": 5}"#),
    (0, "default-alias", r#"{"query": "x", "with_drafts": 20}"#),
    (0, "renamed", r#"{"query": "x", "includeDrafts": true}"#),
    (0, "rust-name", r#"{"query": "x", "include_drafts": true}"#),
    (0, "skipped-field", r#"{"query": "x", "cache_hint": 7}"#),
    (
        0,
        "float-for-integer",
        r#"{"query": "x", "limit": 1.0, "pages": 2.0}"#,
    ),
    (0, "number-1e400", r#"{"query": "x", "limit": 1e400}"#),
    (0, "lone-surrogate", r#"{"query": "\ud800"}"#),
    (0, "surrogate-pair", r#"{"query": "\ud83d\ude00"}"#),
    (
        0,
        "duplicate-key",
        r#"{"query": "x", "limit": 3, "limit": 11}"#,
    ),
    (0, "trailing-text", r#"{"query": "x"} {}"#),
    (
        1,
        "valid",
        r#"{"ticketId": "T-1", "page": 2, "per_page": 50, "extra": {"a": 1}}"#,
    ),
    (1, "rust-name", r#"{"ticket_id": "T-1", "page": 2}"#),
    (1, "page-0", r#"{"ticketId": "T-1", "page": 0}"#),
    (
        1,
        "duplicate-page",
        r#"{"ticketId": "T-1", "page": 2, "page": 200}"#,
    ),
    (
        1,
        "float-page",
        r#"{"ticketId": "T-1", "page": 2.0, "per_page": null}"#,
    ),
    (
        2,
        "valid",
        r#"{"amount": 12.5, "ratio": 0.5, "weight": 0.25, "scale": 2.0}"#,
    ),
    (
        2,
        "f32-1e300",
        r#"{"amount": "twelve", "ratio": -1.5, "weight": 1, "scale": 1e300}"#,
    ),
    (
        2,
        "f32-max",
        r#"{"amount": 0, "ratio": 1e30, "weight": -0.0, "scale": 3.4028235e38, "precise": 1e308}"#,
    ),
    (
        2,
        "f32-past-max",
        r#"{"amount": 0, "ratio": 1, "weight": 0, "scale": 3.5e38}"#,
    ),
    (
        2,
        "f32-tiny",
        r#"{"amount": 1e-300, "ratio": 1e-50, "weight": 5e-324, "scale": -1e-46}"#,
    ),
    (
        2,
        "untagged-empty-string",
        r#"{"amount": "", "ratio": 0, "weight": 0, "scale": 0}"#,
    ),
    (
        2,
        "untagged-negative",
        r#"{"amount": -1, "ratio": 0, "weight": 0, "scale": 0}"#,
    ),
    (
        2,
        "untagged-bool",
        r#"{"amount": true, "ratio": 0, "weight": 0, "scale": 0}"#,
    ),
    (
        2,
        "number-1e400",
        r#"{"amount": 1, "ratio": 0, "weight": 0, "scale": 0, "precise": 1e400}"#,
    ),
    (
        3,
        "valid",
        r#"{"kind": "deploy", "environment": "prod", "replicas": 3}"#,
    ),
    (3, "unit-variant", r#"{"kind": "pause"}"#),
    (
        3,
        "u64-max",
        r#"{"kind": "rollback", "to_version": 18446744073709551615}"#,
    ),
    (
        3,
        "u64-past-max",
        r#"{"kind": "rollback", "to_version": 18446744073709551616}"#,
    ),
    (
        3,
        "out-of-range",
        r#"{"kind": "deploy", "environment": "prod", "replicas": 6}"#,
    ),
    (
        3,
        "wrong-tag-case",
        r#"{"kind": "Deploy", "environment": "p", "replicas": 1}"#,
    ),
    (3, "no-tag", r#"{"environment": "x", "replicas": 1}"#),
    (3, "extra-key", r#"{"kind": "pause", "extra": 1}"#),
    (4, "unit-variant", r#"{"command": "Start"}"#),
    (
        4,
        "out-of-range",
        r#"{"command": {"Stop": {"grace_secs": 61}}}"#,
    ),
    (
        4,
        "i64-min",
        r#"{"command": {"Scale": -9223372036854775808}, "level": "high"}"#,
    ),
    (4, "empty-string", r#"{"command": {"Rename": ""}}"#),
    (4, "unit-as-map", r#"{"command": {"Start": null}}"#),
    (4, "float-for-integer", r#"{"command": {"Scale": 1.0}}"#),
    (
        4,
        "two-variants",
        r#"{"command": {"Scale": 1, "Rename": "x"}}"#,
    ),
    (4, "wrong-case", r#"{"command": "Start", "level": "HIGH"}"#),
    (
        5,
        "valid-extremes",
        r#"{"small": 255, "signed": -9223372036854775808, "big": 18446744073709551615, "bounded": -100, "big_bounded": 10, "maybe": null}"#,
    ),
    (
        5,
        "u8-256",
        r#"{"small": 256, "signed": 0, "big": 0, "bounded": 0, "big_bounded": 10}"#,
    ),
    (
        5,
        "floats-for-integers",
        r#"{"small": 1.0, "signed": -2.0, "big": 1e19, "bounded": 1e2, "big_bounded": 1e1, "tries": 2.0}"#,
    ),
    (
        5,
        "fraction",
        r#"{"small": 1.5, "signed": 0, "big": 0, "bounded": 0, "big_bounded": 10}"#,
    ),
    (
        5,
        "u64-float-past-max",
        r#"{"small": -0, "signed": 0, "big": 2e19, "bounded": 0, "big_bounded": 10}"#,
    ),
    (
        5,
        "just-past-bound",
        r#"{"small": 0, "signed": 0, "big": 0, "bounded": 100.0000000000001, "big_bounded": 9}"#,
    ),
    (
        6,
        "valid",
        r#"{"order_id": "AB-123", "items": [{"name": "bolt", "qty": 10}], "batches": [[{"name": "nut", "qty": 1}]], "note": null, "metadata": {"a": [1, 2, {"b": null}]}}"#,
    ),
    (
        6,
        "pattern-mismatch",
        r#"{"order_id": "ab-123", "items": [{"name": "bolt", "qty": 1}], "metadata": 1}"#,
    ),
    (
        6,
        "no-items",
        r#"{"order_id": "AB-1", "items": [], "metadata": null}"#,
    ),
    (
        6,
        "qty-past-max",
        r#"{"order_id": "AB-1", "items": [{"name": "a", "qty": 1001}], "metadata": null}"#,
    ),
    (
        6,
        "code-points",
        r#"{"order_id": "AB-1", "items": [{"name": "éééééééé", "qty": 1}], "metadata": "\u0000"}"#,
    ),
    (
        6,
        "no-metadata",
        r#"{"order_id": "AB-1", "items": [{"name": "a", "qty": 1}]}"#,
    ),
    (
        6,
        "nested-batches",
        r#"{"order_id": "AB-1", "items": [{"name": "a", "qty": 1}], "batches": [[], [{"name": "", "qty": 0}]], "metadata": []}"#,
    ),
    (
        7,
        "valid",
        r#"{"LABEL": "root", "CHILDREN": [{"LABEL": "a", "WEIGHT": 0.5}]}"#,
    ),
    (7, "f32-overflow", r#"{"LABEL": "x", "WEIGHT": 1e39}"#),
    (7, "rust-name", r#"{"label": "x"}"#),
    (7, "too-long", r#"{"LABEL": "seventeen chars!!"}"#),
    (12, "index-wraps", r#"{"command": "Start"}"#),
];

/// The user inputs the seed runs start from, and the model's first turn (`resume::model`).
const RUN_INPUTS: [(&str, u8); 5] = [
    ("Restart the API.", 1),
    ("Ship it everywhere.", 2),
    ("Restart both.", 7),
    ("Deploy to production, then look up T-7.", 8),
    ("Escalate and restart.", 9),
];

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("the seed is written");
}

/// Empties a corpus folder (it holds only seeds this program writes).
fn fresh(dir: &Path) {
    std::fs::create_dir_all(dir).expect("the corpus folder exists");
    for entry in std::fs::read_dir(dir).expect("the corpus folder reads") {
        std::fs::remove_file(entry.expect("an entry").path()).expect("an old seed is removed");
    }
}

fn decode_seeds(dir: &Path) -> usize {
    fresh(dir);
    for &(index, what, text) in DECODE {
        let mut seed = vec![index];
        seed.extend_from_slice(text.as_bytes());
        decode::check(&seed);
        let name = decode::TYPES[usize::from(index) % decode::TYPES.len()].to_lowercase();
        write(dir, &format!("{name}-{what}"), &seed);
    }
    // Nesting around the parser's limit (128 arrays and objects), and far past it. A tree level
    // nests two (an object and its `CHILDREN` array).
    for depth in [20, 63, 64, 200] {
        let tree = format!(
            "{}{}",
            r#"{"LABEL": "n", "CHILDREN": ["#.repeat(depth),
            "]}".repeat(depth)
        );
        let mut seed = vec![7];
        seed.extend_from_slice(tree.as_bytes());
        decode::check(&seed);
        write(dir, &format!("tree-nested-{depth}"), &seed);
    }
    for depth in [126, 127, 128, 400] {
        let metadata = format!(
            r#"{{"order_id": "AB-1", "items": [{{"name": "a", "qty": 1}}], "metadata": {}0{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let mut seed = vec![6];
        seed.extend_from_slice(metadata.as_bytes());
        decode::check(&seed);
        write(dir, &format!("order-metadata-nested-{depth}"), &seed);
    }
    write(dir, "search-not-utf8", b"\x00{\"query\": \"\xff\"}");
    DECODE.len() + 9
}

/// A decisions script: which run the decisions name (`how`: 0 this run, 1 none, 2 another run,
/// 3 the empty id), the model's next turn (`model`, see `resume::model`), then the decisions.
fn script(how: u8, model: u8, ops: &[u8]) -> Vec<u8> {
    let mut bytes = vec![how | (model << 2)];
    bytes.extend_from_slice(ops);
    bytes
}

/// A length-prefixed chunk of a script.
fn chunk(text: &str) -> Vec<u8> {
    let mut bytes = vec![u8::try_from(text.len()).expect("a short chunk")];
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

fn seed(signed: bool, state: &str, script: &[u8]) -> Vec<u8> {
    let mut bytes = vec![if signed { b'1' } else { b'0' }];
    bytes.extend_from_slice(state.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(script);
    bytes
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a Tokio runtime")
}

/// A paused state of a fresh run of the agent: `input` with the model's first turn `first`.
fn paused(
    rt: &tokio::runtime::Runtime,
    run: usize,
    input: &str,
    first: u8,
    signed: bool,
) -> RunState {
    let agent = resume::agent(resume::model(first), signed);
    let result = rt
        .block_on(
            agent
                .run(input)
                .run_id(format!("run_seed_{run}"))
                .context(json!({"tenant": "acme"}))
                .into_future(),
        )
        .expect("the seed run does not fail");
    assert_eq!(result.status(), RunStatus::WaitingForHuman, "{input}");
    result.state
}

/// A state resumed once and paused again.
fn paused_twice(
    rt: &tokio::runtime::Runtime,
    state: &RunState,
    decisions: Decisions,
    next: u8,
    signed: bool,
) -> RunState {
    let agent = resume::agent(resume::model(next), signed);
    let result = rt
        .block_on(agent.resume(state, decisions).into_future())
        .expect("the seed resume does not fail");
    assert_eq!(result.status(), RunStatus::WaitingForHuman);
    result.state
}

fn resume_seeds(dir: &Path) -> usize {
    fresh(dir);
    let rt = runtime();
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    let mut plain_states: Vec<RunState> = Vec::new();
    for (run, &(input, first)) in RUN_INPUTS.iter().enumerate() {
        for signed in [false, true] {
            let state = paused(&rt, run, input, first, signed);
            let kind = if signed { "signed" } else { "plain" };
            let json = state.to_json();
            seeds.push((format!("run{run}-{kind}-fitting"), seed(signed, &json, &[])));
            if !signed {
                plain_states.push(state);
            }
        }
    }
    // Other scripts on the plain states: (name, run, which run the decisions name, the model's
    // next turn, the ops). Run 0 waits on `restart`; run 1 on `deploy`, `ticket_lookup` (external)
    // and `get_status` (reviewed); run 2 on two `restart`s; run 3 on `deploy`; run 4 on `restart`
    // beside a next-turn override.
    let reject = [vec![2], chunk("Not during the freeze")].concat();
    let edit = chunk(r#"{"environment": "staging", "replicas": 2}"#);
    let scripts: [(&str, usize, u8, u8, Vec<u8>); 11] = [
        ("reject-then-pause", 0, 0, 1, reject),
        ("model-runs-out", 0, 0, 5, vec![0]),
        ("deep-output", 1, 0, 0, vec![1, 4, 6, 1]),
        (
            "bad-output",
            1,
            0,
            0,
            [vec![1, 4], chunk(r#"{"title": ""}"#), vec![2, 0]].concat(),
        ),
        ("unbound-then-mixed", 1, 1, 2, vec![0, 0, 0]),
        ("approve-always-then-pause", 2, 0, 9, vec![5, 5]),
        ("made-up-id", 2, 0, 0, vec![0, 0, 6, 1]),
        ("edit-arguments", 3, 0, 2, [vec![3], edit].concat()),
        ("hostile-arguments", 3, 0, 4, vec![3, 4]),
        ("missing-decision", 4, 0, 0, vec![6]),
        ("another-run", 4, 2, 0, vec![0]),
    ];
    for (name, run, how, model, ops) in scripts {
        let state = &plain_states[run];
        seeds.push((
            format!("run{run}-plain-{name}"),
            seed(false, &state.to_json(), &script(how, model, &ops)),
        ));
    }
    // Paused twice: with steps, progress and a context from the first resume, and a tool approved
    // for the rest of the run.
    let first = &plain_states[0];
    for signed in [false, true] {
        let kind = if signed { "signed" } else { "plain" };
        let state = if signed {
            paused(&rt, 0, RUN_INPUTS[0].0, RUN_INPUTS[0].1, true)
        } else {
            first.clone()
        };
        let approved = Decisions::for_run(state.run_id())
            .decide(state.pending()[0].call.id.clone(), Decision::ApproveAlways);
        let twice = paused_twice(&rt, &state, approved, 2, signed);
        seeds.push((
            format!("run0-{kind}-paused-twice"),
            seed(signed, &twice.to_json(), &script(0, 7, &[0, 0, 0])),
        ));
    }
    // Stored states edited by hand: what a store might hand back.
    let (run, state) = (1, &plain_states[1]);
    let stored: Value = serde_json::from_str(&state.to_json()).expect("a state is JSON");
    let edits: [(&str, &str, Value); 5] = [
        ("version-2", "/version", json!(2)),
        ("completed", "/status", json!("completed")),
        ("turns-max", "/turns", json!(u64::MAX)),
        ("other-agent", "/agent_id", json!("support")),
        ("pending-edited", "/pending/0/call/arguments", json!("{}")),
    ];
    for (name, pointer, value) in edits {
        let mut edited = stored.clone();
        *edited.pointer_mut(pointer).expect("the field exists") = value;
        seeds.push((
            format!("run{run}-plain-edited-{name}"),
            seed(false, &edited.to_string(), &[]),
        ));
    }
    for (name, bytes) in &seeds {
        resume::check(bytes);
        write(dir, name, bytes);
    }
    seeds.len()
}

/// The `h0` byte of a journal input for a stored status (`properties/journal.rs`).
fn status_byte(status: StoredStatus) -> u8 {
    match status {
        StoredStatus::Running => 0,
        StoredStatus::Paused => 1,
        StoredStatus::InDoubt => 2,
        StoredStatus::Completed => 3,
        StoredStatus::Failed => 4,
        // A queued run is not among the journal target's statuses; it reads as running.
        _ => 0,
    }
}

/// A journal seed for a stored run, the model's next turn `model` and damage `damage` (`h2`).
fn journal_seed(run: &LoadedRun, model: u8, damage: u8) -> Vec<u8> {
    journal::encode(run, [status_byte(run.status), 0, damage, model])
}

/// The run as the store holds it.
fn stored(rt: &tokio::runtime::Runtime, store: &MemoryStore) -> LoadedRun {
    rt.block_on(store.load(journal::RUN_ID))
        .expect("the seed run is stored")
}

/// A fresh store holding the first `rows` rows of `run`, as a process killed after writing them
/// leaves it: the run is running.
fn interrupted(rt: &tokio::runtime::Runtime, run: &LoadedRun, rows: usize) -> MemoryStore {
    let store = MemoryStore::new();
    let mut written = run.rows[..rows].iter().cloned();
    let first = written.next().expect("a run has a first row");
    rt.block_on(store.create(NewRun {
        run_id: journal::RUN_ID.to_owned(),
        agent_id: journal::AGENT_ID.to_owned(),
        status: StoredStatus::Running,
        row: first,
        pending: Vec::new(),
        at_ms: 0,
    }))
    .expect("the first row is written");
    for row in written {
        rt.block_on(store.append(Append {
            run_id: journal::RUN_ID.to_owned(),
            expected_version: row.version - 1,
            rows: vec![row],
            status: StoredStatus::Running,
            snapshot: None,
            pending: None,
            decisions: Vec::new(),
            at_ms: 0,
            fence: None,
        }))
        .expect("a row is written");
    }
    store
}

fn journal_seeds(dir: &Path) -> usize {
    fresh(dir);
    let rt = runtime();
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    // A gated call: the run pauses; resumed, it runs a plain and an idempotent call, then ends.
    let store = Arc::new(MemoryStore::new());
    let runs = Runs::from_arc(store.clone()).snapshot_every(2);
    let durable = runs.attach(journal::agent(journal::model(1)));
    let paused = rt
        .block_on(durable.run("Ship it").run_id(journal::RUN_ID).into_future())
        .expect("the seed run pauses");
    let paused_run = stored(&rt, &store);
    assert_eq!(paused_run.status, StoredStatus::Paused);
    seeds.push(("paused".into(), journal_seed(&paused_run, 2, 0)));
    let durable = runs.attach(journal::agent(journal::model(2)));
    let decisions =
        Decisions::for_run(journal::RUN_ID).approve(paused.pending()[0].call.id.clone());
    rt.block_on(durable.resume(journal::RUN_ID).decisions(decisions).at(paused_run.version).by("ops").into_future())
        .expect("the seed run completes");
    let completed = stored(&rt, &store);
    assert_eq!(completed.status, StoredStatus::Completed);
    seeds.push(("completed".into(), journal_seed(&completed, 0, 0)));
    // The same runs without snapshots: their whole journals.
    let whole = MemoryStore::new();
    let durable = Runs::from_arc(Arc::new(whole)).snapshot_every(u32::MAX);
    let store = durable.store().clone();
    let agent = durable.attach(journal::agent(journal::model(1)));
    rt.block_on(agent.run("Ship it").run_id(journal::RUN_ID).into_future())
        .expect("the seed run pauses");
    let version = rt
        .block_on(store.load(journal::RUN_ID))
        .expect("stored")
        .version;
    let agent = durable.attach(journal::agent(journal::model(2)));
    let decisions = Decisions::for_run(journal::RUN_ID).approve("call_9");
    rt.block_on(agent.resume(journal::RUN_ID).decisions(decisions).at(version).by("ops").into_future())
        .expect("the seed run completes");
    let journal = rt.block_on(store.load(journal::RUN_ID)).expect("stored");
    assert!(journal.snapshot.is_none());
    seeds.push(("completed-whole".into(), journal_seed(&journal, 0, 0)));
    // Interrupted after every row: running, to be recovered.
    for rows in 1..journal.rows.len() {
        let store = interrupted(&rt, &journal, rows);
        let kind = &journal.rows[rows - 1].kind;
        let run = stored(&rt, &store);
        seeds.push((
            format!("interrupted-{rows}-{kind}"),
            journal_seed(&run, 2, 0),
        ));
        // A call started and not finished: recovered, it waits in doubt (`notify` is not
        // idempotent), with snapshots from then on.
        if kind == "call_started" && run.rows[rows - 1].body.contains("notify") {
            let store = Arc::new(store);
            let runs = Runs::from_arc(store.clone()).snapshot_every(2);
            let agent = runs.attach(journal::agent(journal::model(0)));
            let _ = rt.block_on(agent.recover(journal::RUN_ID).into_future());
            let run = stored(&rt, &store);
            if run.status == StoredStatus::InDoubt {
                seeds.push((format!("in-doubt-after-{rows}"), journal_seed(&run, 0, 0)));
            }
        }
    }
    // The model fails: the run is stored failed.
    let store = Arc::new(MemoryStore::new());
    let agent = Runs::from_arc(store.clone()).attach(journal::agent(journal::model(3)));
    let _ = rt.block_on(agent.run("Ship it").run_id(journal::RUN_ID).into_future());
    seeds.push(("failed".into(), journal_seed(&stored(&rt, &store), 0, 0)));
    // Every damage that applies, on the run with a snapshot (and no rows after it) and on the
    // whole journal.
    for damage in 1..8u8 {
        let name = format!("{:?}", journal::Damage::of(damage)).to_lowercase();
        for (run, what) in [(&completed, "completed"), (&journal, "completed-whole")] {
            let applies = match journal::Damage::of(damage) {
                journal::Damage::RowDigest
                | journal::Damage::RowVersion
                | journal::Damage::RowFormat => !run.rows.is_empty(),
                journal::Damage::SnapshotDigest | journal::Damage::SnapshotFormat => {
                    run.snapshot.is_some()
                }
                _ => true,
            };
            if applies {
                seeds.push((
                    format!("{what}-damaged-{name}"),
                    journal_seed(run, 0, damage | (2 << 3)),
                ));
            }
        }
    }
    assert!(
        seeds.iter().any(|(name, _)| name.starts_with("in-doubt")),
        "no seed run in doubt"
    );
    for (name, bytes) in &seeds {
        journal::check(bytes);
        // The undamaged seeds load; every damaged one is refused.
        let (run, _, _) = journal::decode(bytes).expect("a seed is UTF-8");
        let loaded = rt.block_on(Runs::without_queue(std::sync::Arc::new(journal::Served::new(run))).load(journal::RUN_ID));
        assert_eq!(
            loaded.is_ok(),
            !name.contains("damaged"),
            "{name}: {loaded:?}"
        );
        write(dir, name, bytes);
    }
    seeds.len()
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let decode = decode_seeds(&corpus.join("decode"));
    let resume = resume_seeds(&corpus.join("resume"));
    let journal = journal_seeds(&corpus.join("journal"));
    println!(
        "wrote {decode} decode seeds, {resume} resume seeds and {journal} journal seeds under {}",
        corpus.display()
    );
}
