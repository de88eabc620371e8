//! Durable runs loaded from rows a store damaged, with checksums that match: what the `journal`
//! fuzz target found, one test each. A damaged run is refused as corrupt, never loaded.

use std::sync::Arc;

use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{LoadedRun, MemoryStore, RunStore};
use phaseo_agent::{AgentError, RunState, ScriptedModel, StoreError};

use crate::fuzz_corpus::journal;

/// The whole journal of a run paused on a gated call (`call_9`), without snapshots.
async fn paused_journal() -> LoadedRun {
    let store = Arc::new(MemoryStore::new());
    let runs = Runs::from_arc(store.clone()).snapshot_every(u32::MAX);
    let model = ScriptedModel::new().tool_call("call_9", "deploy", json!({"env": "prod"}));
    runs.attach(journal::agent(model))
        .run("Ship it")
        .run_id(journal::RUN_ID)
        .await
        .unwrap();
    store.load(journal::RUN_ID).await.unwrap()
}

/// `run` with the body of its row `kind` edited, and every checksum recomputed for it.
fn edited(run: &LoadedRun, kind: &str, from: &str, to: &str) -> LoadedRun {
    let mut run = run.clone();
    let row = run.rows.iter_mut().find(|r| r.kind == kind).unwrap();
    assert!(row.body.contains(from), "{}", row.body);
    row.body = row.body.replacen(from, to, 1);
    let (run, _, _) = journal::decode(&journal::encode(&run, [1, 0, 0, 0])).unwrap();
    run
}

#[tokio::test(flavor = "current_thread")]
async fn a_delta_that_leaves_a_paused_state_inconsistent_is_refused_as_corrupt() {
    let journal = paused_journal().await;
    // The pending call is not the paused turn's call: a state `RunState::from_json` refuses.
    let damaged = edited(
        &journal,
        "settled",
        r#""call":{"id":"call_9""#,
        r#""call":{"id":"call_4""#,
    );
    let loaded = Runs::without_queue(Arc::new(journal::Served::new(damaged)))
        .load(journal::RUN_ID)
        .await;
    match loaded {
        Err(AgentError::Store(StoreError::Corrupt { run_id, reason, .. })) => {
            assert_eq!(run_id, journal::RUN_ID);
            assert!(reason.contains("call_4"), "{reason}");
        }
        other => panic!("a damaged run loads: {other:?}"),
    }
    // Undamaged, the same rows load, to a state that reads back.
    let stored = Runs::without_queue(Arc::new(journal::Served::new(edited(
        &journal, "settled", "", "",
    ))))
    .load(journal::RUN_ID)
    .await
    .unwrap();
    assert_eq!(
        RunState::from_json(&stored.state.to_json()).unwrap(),
        stored.state
    );
}
